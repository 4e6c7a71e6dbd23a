// RUN: dsc-opt %s --split-input-file --fuse-optimizer | FileCheck %s

// fuse-optimizer: consecutive train.adam ops with the same lr, step,
// attributes and clip become one train.fused_adam; a clip_grad_norm whose
// every clipped gradient only they read becomes train.clip_coef, and a
// widening of a gradient only the clip and the updates read is read
// through.

// The step of a bf16 model: two gradients widened, clipped and applied.
// CHECK-LABEL: func.func @clipped_bf16(
// CHECK-SAME:    %[[P0:[^:]*]]: tensor<4xf32>, %[[P1:[^:]*]]: tensor<2x3xf32>, %[[G0:[^:]*]]: tensor<4xbf16>, %[[G1:[^:]*]]: tensor<2x3xbf16>, %[[M0:[^:]*]]: tensor<4xf32>, %[[M1:[^:]*]]: tensor<2x3xf32>, %[[V0:[^:]*]]: tensor<4xf32>, %[[V1:[^:]*]]: tensor<2x3xf32>, %[[LR:[^:]*]]: tensor<f32>, %[[S:[^:]*]]: tensor<i64>)
// CHECK-NOT:     nn.cast
// CHECK-NOT:     train.clip_grad_norm
// CHECK:         %[[N:.*]], %[[C:.*]] = train.clip_coef %[[G0]], %[[G1]] {max_norm = 1.000000e+00 : f64} : tensor<4xbf16>, tensor<2x3xbf16>
// CHECK-NEXT:    %[[U:.*]]:6 = train.fused_adam(%[[P0]], %[[P1]]) grads(%[[G0]], %[[G1]]) states(%[[M0]], %[[M1]]) (%[[V0]], %[[V1]]), %[[LR]], %[[S]] coef(%[[C]]) {decoupled_weight_decay} : (tensor<4xf32>, tensor<2x3xf32>) grads(tensor<4xbf16>, tensor<2x3xbf16>)
// CHECK-NEXT:    return %[[U]]#0, %[[U]]#1, %[[U]]#2, %[[U]]#3, %[[U]]#4, %[[U]]#5, %[[N]]
func.func @clipped_bf16(%p0: tensor<4xf32>, %p1: tensor<2x3xf32>, %g0: tensor<4xbf16>, %g1: tensor<2x3xbf16>,
                        %m0: tensor<4xf32>, %m1: tensor<2x3xf32>, %v0: tensor<4xf32>, %v1: tensor<2x3xf32>,
                        %lr: tensor<f32>, %s: tensor<i64>)
    -> (tensor<4xf32>, tensor<2x3xf32>, tensor<4xf32>, tensor<2x3xf32>, tensor<4xf32>, tensor<2x3xf32>, tensor<f32>) {
  %w0 = nn.cast %g0 : tensor<4xbf16> to tensor<4xf32>
  %w1 = nn.cast %g1 : tensor<2x3xbf16> to tensor<2x3xf32>
  %c:2, %norm = train.clip_grad_norm %w0, %w1 {max_norm = 1.0 : f64} : tensor<4xf32>, tensor<2x3xf32> -> tensor<4xf32>, tensor<2x3xf32>
  %a:3 = train.adam %p0, %c#0, %m0, %v0, %lr, %s {decoupled_weight_decay} : tensor<4xf32>
  %b:3 = train.adam %p1, %c#1, %m1, %v1, %lr, %s {decoupled_weight_decay} : tensor<2x3xf32>
  return %a#0, %b#0, %a#1, %b#1, %a#2, %b#2, %norm : tensor<4xf32>, tensor<2x3xf32>, tensor<4xf32>, tensor<2x3xf32>, tensor<4xf32>, tensor<2x3xf32>, tensor<f32>
}

// -----

// ZeRO's sharded norm and fp16's loss scale go to clip_coef; a widening
// that something else reads too (the sum of squares) stays.
// CHECK-LABEL: func.func @sharded_fp16(
// CHECK:         %[[W:.*]] = nn.cast %arg2 : tensor<4xf16> to tensor<4xf32>
// CHECK-NEXT:    %[[SQ:.*]] = train.sum_sq %[[W]]
// CHECK-NEXT:    %[[N:.*]], %[[C:.*]] = train.clip_coef %[[W]], %arg3 sum_sq(%[[SQ]]) loss_scale(%arg8) {max_norm = 0.000000e+00 : f64} : tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT:    train.fused_adam(%arg0, %arg1) grads(%[[W]], %arg3) states(%arg4, %arg5) (%arg6, %arg7), %arg9, %arg10 coef(%[[C]]) : (tensor<4xf32>, tensor<4xf32>) grads(tensor<4xf32>, tensor<4xf32>)
func.func @sharded_fp16(%p0: tensor<4xf32>, %p1: tensor<4xf32>, %g0: tensor<4xf16>, %g1: tensor<4xf32>,
                        %m0: tensor<4xf32>, %m1: tensor<4xf32>, %v0: tensor<4xf32>, %v1: tensor<4xf32>,
                        %scale: tensor<f32>, %lr: tensor<f32>, %s: tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<f32>) {
  %w0 = nn.cast %g0 : tensor<4xf16> to tensor<4xf32>
  %sq = train.sum_sq %w0 : tensor<4xf32>
  %c:2, %norm = train.clip_grad_norm %w0, %g1 sum_sq(%sq) loss_scale(%scale) {max_norm = 0.0 : f64} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>, tensor<4xf32>
  %a:3 = train.adam %p0, %c#0, %m0, %v0, %lr, %s : tensor<4xf32>
  %b:3 = train.adam %p1, %c#1, %m1, %v1, %lr, %s : tensor<4xf32>
  return %a#0, %b#0, %norm : tensor<4xf32>, tensor<4xf32>, tensor<f32>
}

// -----

// A clipped gradient read by something else (returned) keeps the clip: the
// updates fuse without a factor, reading its results.
// CHECK-LABEL: func.func @clip_kept(
// CHECK:         %[[C:.*]]:2, %{{.*}} = train.clip_grad_norm
// CHECK-NEXT:    train.fused_adam(%arg0, %arg1) grads(%[[C]]#0, %[[C]]#1) states(%arg4, %arg5) (%arg6, %arg7), %arg8, %arg9 :
// CHECK-NOT:     coef
func.func @clip_kept(%p0: tensor<4xf32>, %p1: tensor<4xf32>, %g0: tensor<4xf32>, %g1: tensor<4xf32>,
                     %m0: tensor<4xf32>, %m1: tensor<4xf32>, %v0: tensor<4xf32>, %v1: tensor<4xf32>,
                     %lr: tensor<f32>, %s: tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %c:2, %norm = train.clip_grad_norm %g0, %g1 {max_norm = 1.0 : f64} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>, tensor<4xf32>
  %a:3 = train.adam %p0, %c#0, %m0, %v0, %lr, %s : tensor<4xf32>
  %b:3 = train.adam %p1, %c#1, %m1, %v1, %lr, %s : tensor<4xf32>
  return %a#0, %b#0, %c#0 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Without a clip: a widening only the update reads is read through; runs
// break at other attributes, another learning rate and an op that reads an
// update's result; a lone update with no clip to fold stays train.adam.
// CHECK-LABEL: func.func @runs(
// CHECK-NEXT:    %{{.*}}:6 = train.fused_adam(%arg0, %arg1) grads(%arg2, %arg3) states(%arg0, %arg1) (%arg0, %arg1), %arg4, %arg6 : (tensor<4xf32>, tensor<4xf32>) grads(tensor<4xbf16>, tensor<4xf32>)
// CHECK-NEXT:    train.adam %arg0, %arg3, %arg0, %arg0, %arg4, %arg6 {weight_decay = 1.000000e-01 : f64}
// CHECK-NEXT:    %[[D:.*]], %{{.*}}, %{{.*}} = train.adam %arg0, %arg3, %arg0, %arg0, %arg5, %arg6 :
// CHECK-NEXT:    nn.neg %[[D]]
// CHECK-NEXT:    %{{.*}}:6 = train.fused_adam(%arg0, %arg1) grads(%arg3, %arg3) states(%arg0, %arg1) (%arg0, %arg1), %arg5, %arg6 :
// CHECK-NOT:     nn.cast
func.func @runs(%p0: tensor<4xf32>, %p1: tensor<4xf32>, %g0: tensor<4xbf16>, %g1: tensor<4xf32>,
                %lr: tensor<f32>, %lr2: tensor<f32>, %s: tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %w0 = nn.cast %g0 : tensor<4xbf16> to tensor<4xf32>
  %a:3 = train.adam %p0, %w0, %p0, %p0, %lr, %s : tensor<4xf32>
  %b:3 = train.adam %p1, %g1, %p1, %p1, %lr, %s : tensor<4xf32>
  %c:3 = train.adam %p0, %g1, %p0, %p0, %lr, %s {weight_decay = 0.1 : f64} : tensor<4xf32>
  %d:3 = train.adam %p0, %g1, %p0, %p0, %lr2, %s : tensor<4xf32>
  %n = nn.neg %d#0 : tensor<4xf32>
  %e:3 = train.adam %p0, %g1, %p0, %p0, %lr2, %s : tensor<4xf32>
  %f:3 = train.adam %p1, %g1, %p1, %p1, %lr2, %s : tensor<4xf32>
  return %a#0, %b#0, %c#0, %d#0, %n, %e#0, %f#0 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// ZeRO's updates of shards, each shard cut (dist.chunk, pure) between the
// updates: the run steps over the cuts and the fused op goes after them.
// CHECK-LABEL: func.func @shards(
// CHECK-NEXT:    %[[A:.*]] = dist.chunk %arg0
// CHECK-NEXT:    %[[B:.*]] = dist.chunk %arg1
// CHECK-NEXT:    train.fused_adam(%[[A]], %[[B]]) grads(%arg2, %arg3)
// CHECK-NEXT:    return
func.func @shards(%p0: tensor<4xf32>, %p1: tensor<4xf32>, %g0: tensor<2xf32>, %g1: tensor<2xf32>,
                  %lr: tensor<f32>, %s: tensor<i64>) -> (tensor<2xf32>, tensor<2xf32>) {
  %c0 = dist.chunk %p0 {group = #dist.group<dp, 2>} : tensor<4xf32> -> tensor<2xf32>
  %a:3 = train.adam %c0, %g0, %c0, %c0, %lr, %s : tensor<2xf32>
  %c1 = dist.chunk %p1 {group = #dist.group<dp, 2>} : tensor<4xf32> -> tensor<2xf32>
  %b:3 = train.adam %c1, %g1, %c1, %c1, %lr, %s : tensor<2xf32>
  return %a#0, %b#0 : tensor<2xf32>, tensor<2xf32>
}

// -----

// A lone update is fused to read its clip's factor; other optimizers are
// left alone.
// CHECK-LABEL: func.func @lone(
// CHECK:         %{{.*}}, %[[C:.*]] = train.clip_coef %arg1
// CHECK-NEXT:    train.fused_adam(%arg0) grads(%arg1) states(%arg2) (%arg3), %arg4, %arg5 coef(%[[C]])
// CHECK-NEXT:    train.sgd
func.func @lone(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>,
                %lr: tensor<f32>, %s: tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<f32>) {
  %c:1, %norm = train.clip_grad_norm %g {max_norm = 1.0 : f64} : tensor<4xf32> -> tensor<4xf32>
  %a:3 = train.adam %p, %c#0, %m, %v, %lr, %s : tensor<4xf32>
  %q = train.sgd %p, %g, %lr : tensor<4xf32>
  return %a#0, %q, %norm : tensor<4xf32>, tensor<4xf32>, tensor<f32>
}

// -----

// One micro-batch: the accumulate's sum is the yielded gradient itself, so
// a widening yielded only for the clip and the update is yielded narrow and
// read through. With two micro-batches the sum is formed in f32 and the
// accumulate widens the bf16 gradient as it adds it: the cast in the body
// goes, the sum stays f32. A widening read in the body too stays.
// CHECK-LABEL: func.func @one_micro_batch(
// CHECK:         %[[SUM:.*]] = train.accumulate 1 -> tensor<4xbf16> {
// CHECK:           %[[G:.*]] = nn.neg %arg3 : tensor<4xbf16>
// CHECK-NEXT:      train.yield %[[G]] : tensor<4xbf16>
// CHECK:         %{{.*}}, %[[C:.*]] = train.clip_coef %[[SUM]] {{.*}} : tensor<4xbf16>
// CHECK-NEXT:    train.fused_adam(%arg0) grads(%[[SUM]]) {{.*}} coef(%[[C]]) : (tensor<4xf32>) grads(tensor<4xbf16>)
// CHECK-NOT:     nn.cast
func.func @one_micro_batch(%p: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %x: tensor<4xbf16>,
                           %lr: tensor<f32>, %s: tensor<i64>) -> (tensor<4xf32>, tensor<f32>) {
  %sum = train.accumulate 1 -> tensor<4xf32> {
  ^bb0(%i: index):
    %g = nn.neg %x : tensor<4xbf16>
    %w = nn.cast %g : tensor<4xbf16> to tensor<4xf32>
    train.yield %w : tensor<4xf32>
  }
  %c:1, %norm = train.clip_grad_norm %sum {max_norm = 1.0 : f64} : tensor<4xf32> -> tensor<4xf32>
  %a:3 = train.adam %p, %c#0, %m, %v, %lr, %s : tensor<4xf32>
  return %a#0, %norm : tensor<4xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @two_micro_batches(
// CHECK:         %[[SUM:.*]]:3 = train.accumulate 2 -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32> {
// CHECK:           %[[G:.*]] = nn.neg %arg3 : tensor<4xbf16>
// CHECK-NEXT:      %[[H:.*]] = nn.neg %arg3 : tensor<4xbf16>
// CHECK-NEXT:      %[[W:.*]] = nn.cast %[[H]] : tensor<4xbf16> to tensor<4xf32>
// CHECK-NEXT:      %[[R:.*]] = nn.neg %[[W]] : tensor<4xf32>
// CHECK-NEXT:      train.yield %[[G]], %[[W]], %[[R]] : tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>
// CHECK:         train.clip_coef %[[SUM]]#0, %[[SUM]]#1 {{.*}} : tensor<4xf32>, tensor<4xf32>
func.func @two_micro_batches(%p: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %x: tensor<4xbf16>,
                             %lr: tensor<f32>, %s: tensor<i64>, %q: tensor<4xf32>, %m2: tensor<4xf32>,
                             %v2: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>) {
  %sum:3 = train.accumulate 2 -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32> {
  ^bb0(%i: index):
    %g = nn.neg %x : tensor<4xbf16>
    %w = nn.cast %g : tensor<4xbf16> to tensor<4xf32>
    %h = nn.neg %x : tensor<4xbf16>
    %u = nn.cast %h : tensor<4xbf16> to tensor<4xf32>
    %r = nn.neg %u : tensor<4xf32>
    train.yield %w, %u, %r : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
  %c:2, %norm = train.clip_grad_norm %sum#0, %sum#1 {max_norm = 1.0 : f64} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>, tensor<4xf32>
  %a:3 = train.adam %p, %c#0, %m, %v, %lr, %s : tensor<4xf32>
  %b:3 = train.adam %q, %c#1, %m2, %v2, %lr, %s : tensor<4xf32>
  return %a#0, %b#0, %norm, %sum#2 : tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>
}

// -----

// A pipeline stage sums its yields after their phase into zero-filled
// sums: a gradient widened only to be yielded is yielded narrow for its
// f32 sum, whatever the micro-batch count.
// CHECK-LABEL: func.func @pipeline_stage(
// CHECK:         train.pipeline 1 {{.*}} -> tensor<4xf32> {
// CHECK:           %[[G:.*]] = nn.neg %arg0 {train.phase = 2 : i64} : tensor<4xbf16>
// CHECK-NEXT:      train.yield %[[G]] : tensor<4xbf16>
// CHECK-NOT:     nn.cast
func.func @pipeline_stage(%x: tensor<4xbf16>) -> tensor<4xf32> {
  %sum = train.pipeline 1 schedule [1, 0, 2, 0] sum_phases [2] -> tensor<4xf32> {
  ^bb0(%i: index):
    %g = nn.neg %x {train.phase = 2 : i64} : tensor<4xbf16>
    %w = nn.cast %g {train.phase = 2 : i64} : tensor<4xbf16> to tensor<4xf32>
    train.yield %w : tensor<4xf32>
  }
  return %sum : tensor<4xf32>
}

// -----

// LAMB as the optimizer pass writes it (each parameter's sums of squares
// right before its update): the updates become one train.fused_lamb, the
// sums one train.fused_lamb_stats before it; the clip folds into both and
// the widening is read through by both.
// CHECK-LABEL: func.func @lamb_bf16(
// CHECK-SAME:    %[[P0:[^:]*]]: tensor<4xf32>, %[[P1:[^:]*]]: tensor<2x3xf32>, %[[G0:[^:]*]]: tensor<4xbf16>, %[[G1:[^:]*]]: tensor<2x3xf32>, %[[M0:[^:]*]]: tensor<4xf32>, %[[M1:[^:]*]]: tensor<2x3xf32>, %[[V0:[^:]*]]: tensor<4xf32>, %[[V1:[^:]*]]: tensor<2x3xf32>, %[[LR:[^:]*]]: tensor<f32>, %[[S:[^:]*]]: tensor<i64>)
// CHECK-NOT:     nn.cast
// CHECK:         %[[N:.*]], %[[C:.*]] = train.clip_coef %[[G0]], %[[G1]] {max_norm = 1.000000e+00 : f64} : tensor<4xbf16>, tensor<2x3xf32>
// CHECK-NEXT:    %[[ST:.*]]:2 = train.fused_lamb_stats(%[[P0]], %[[P1]]) grads(%[[G0]], %[[G1]]) states(%[[M0]], %[[M1]]) (%[[V0]], %[[V1]]) coef(%[[C]]) {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 9.9999999999999995E-7 : f64, weight_decay = 0.000000e+00 : f64} : (tensor<4xf32>, tensor<2x3xf32>) grads(tensor<4xbf16>, tensor<2x3xf32>)
// CHECK-NEXT:    %[[U:.*]]:6 = train.fused_lamb(%[[P0]], %[[P1]]) grads(%[[G0]], %[[G1]]) states(%[[M0]], %[[M1]]) (%[[V0]], %[[V1]]) stats(%[[ST]]#0, %[[ST]]#1), %[[LR]], %[[S]] coef(%[[C]]) {eps = 9.9999999999999995E-7 : f64, max_coeff = 5.000000e+00 : f64} : (tensor<4xf32>, tensor<2x3xf32>) grads(tensor<4xbf16>, tensor<2x3xf32>) stats(tensor<2xf32>, tensor<2xf32>)
// CHECK-NEXT:    return %[[U]]#0, %[[U]]#1, %[[U]]#2, %[[U]]#3, %[[U]]#4, %[[U]]#5, %[[N]]
func.func @lamb_bf16(%p0: tensor<4xf32>, %p1: tensor<2x3xf32>, %g0: tensor<4xbf16>, %g1: tensor<2x3xf32>,
                     %m0: tensor<4xf32>, %m1: tensor<2x3xf32>, %v0: tensor<4xf32>, %v1: tensor<2x3xf32>,
                     %lr: tensor<f32>, %s: tensor<i64>)
    -> (tensor<4xf32>, tensor<2x3xf32>, tensor<4xf32>, tensor<2x3xf32>, tensor<4xf32>, tensor<2x3xf32>, tensor<f32>) {
  %w0 = nn.cast %g0 : tensor<4xbf16> to tensor<4xf32>
  %c:2, %norm = train.clip_grad_norm %w0, %g1 {max_norm = 1.0 : f64} : tensor<4xf32>, tensor<2x3xf32> -> tensor<4xf32>, tensor<2x3xf32>
  %s0 = train.lamb_stats %p0, %c#0, %m0, %v0 {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-6 : f64, weight_decay = 0.0 : f64} : tensor<4xf32> -> tensor<2xf32>
  %a:3 = train.lamb %p0, %c#0, %m0, %v0, %lr, %s, %s0 {eps = 1.0e-6 : f64, max_coeff = 5.0 : f64} : tensor<4xf32>, tensor<2xf32>
  %s1 = train.lamb_stats %p1, %c#1, %m1, %v1 {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-6 : f64, weight_decay = 0.0 : f64} : tensor<2x3xf32> -> tensor<2xf32>
  %b:3 = train.lamb %p1, %c#1, %m1, %v1, %lr, %s, %s1 {eps = 1.0e-6 : f64, max_coeff = 5.0 : f64} : tensor<2x3xf32>, tensor<2xf32>
  return %a#0, %b#0, %a#1, %b#1, %a#2, %b#2, %norm : tensor<4xf32>, tensor<2x3xf32>, tensor<4xf32>, tensor<2x3xf32>, tensor<4xf32>, tensor<2x3xf32>, tensor<f32>
}

// -----

// ZeRO's and tensor parallelism's LAMB: the partial sums are all-reduced
// before the first update. The sums fuse before the all-reduce, the
// updates after it; without a clip the widening is read through by both.
// CHECK-LABEL: func.func @lamb_sharded(
// CHECK-NEXT:    %[[ST:.*]]:2 = train.fused_lamb_stats(%arg0, %arg1) grads(%arg2, %arg3) states(%arg0, %arg1) (%arg0, %arg1) {beta1 = {{.*}}} : (tensor<4xf32>, tensor<4xf32>) grads(tensor<4xbf16>, tensor<4xf32>)
// CHECK-NEXT:    %[[R0:.*]] = dist.all_reduce  sum %[[ST]]#0
// CHECK-NEXT:    %[[R1:.*]] = dist.all_reduce  sum %[[ST]]#1
// CHECK-NEXT:    train.fused_lamb(%arg0, %arg1) grads(%arg2, %arg3) states(%arg0, %arg1) (%arg0, %arg1) stats(%[[R0]], %[[R1]]), %arg4, %arg5 {
// CHECK-NOT:     nn.cast
func.func @lamb_sharded(%p0: tensor<4xf32>, %p1: tensor<4xf32>, %g0: tensor<4xbf16>, %g1: tensor<4xf32>,
                        %lr: tensor<f32>, %s: tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>) {
  %w0 = nn.cast %g0 : tensor<4xbf16> to tensor<4xf32>
  %s0 = train.lamb_stats %p0, %w0, %p0, %p0 {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-6 : f64, weight_decay = 0.0 : f64} : tensor<4xf32> -> tensor<2xf32>
  %s1 = train.lamb_stats %p1, %g1, %p1, %p1 {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-6 : f64, weight_decay = 0.0 : f64} : tensor<4xf32> -> tensor<2xf32>
  %r0 = dist.all_reduce sum %s0 {group = #dist.group<dp, 2>} : tensor<2xf32> -> tensor<2xf32>
  %r1 = dist.all_reduce sum %s1 {group = #dist.group<dp, 2>} : tensor<2xf32> -> tensor<2xf32>
  %a:3 = train.lamb %p0, %w0, %p0, %p0, %lr, %s, %r0 {eps = 1.0e-6 : f64} : tensor<4xf32>, tensor<2xf32>
  %b:3 = train.lamb %p1, %g1, %p1, %p1, %lr, %s, %r1 {eps = 1.0e-6 : f64} : tensor<4xf32>, tensor<2xf32>
  return %a#0, %b#0 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Sums read before the last of them (here by an update that stays alone:
// another learning rate) do not fuse; the clip, read by them, stays too.
// CHECK-LABEL: func.func @lamb_stats_kept(
// CHECK:         train.clip_grad_norm
// CHECK-NEXT:    %[[S0:.*]] = train.lamb_stats
// CHECK-NEXT:    train.lamb %{{.*}}, %[[S0]]
// CHECK-NEXT:    %[[S1:.*]] = train.lamb_stats
// CHECK-NEXT:    train.lamb %{{.*}}, %[[S1]]
// CHECK-NOT:     fused
func.func @lamb_stats_kept(%p0: tensor<4xf32>, %p1: tensor<4xf32>, %g0: tensor<4xf32>, %g1: tensor<4xf32>,
                           %lr: tensor<f32>, %lr2: tensor<f32>, %s: tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>) {
  %c:2, %norm = train.clip_grad_norm %g0, %g1 {max_norm = 1.0 : f64} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>, tensor<4xf32>
  %s0 = train.lamb_stats %p0, %c#0, %p0, %p0 {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-6 : f64, weight_decay = 0.0 : f64} : tensor<4xf32> -> tensor<2xf32>
  %a:3 = train.lamb %p0, %c#0, %p0, %p0, %lr, %s, %s0 {eps = 1.0e-6 : f64} : tensor<4xf32>, tensor<2xf32>
  %s1 = train.lamb_stats %p1, %c#1, %p1, %p1 {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-6 : f64, weight_decay = 0.0 : f64} : tensor<4xf32> -> tensor<2xf32>
  %b:3 = train.lamb %p1, %c#1, %p1, %p1, %lr2, %s, %s1 {eps = 1.0e-6 : f64} : tensor<4xf32>, tensor<2xf32>
  return %a#0, %b#0 : tensor<4xf32>, tensor<4xf32>
}
