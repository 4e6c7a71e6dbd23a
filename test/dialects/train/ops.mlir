// RUN: dsc-opt %s | dsc-opt | FileCheck %s
// RUN: dsc-opt %s --mlir-print-op-generic | dsc-opt | FileCheck %s

// Round trip of every train op and of the train.* argument/result roles,
// through the custom assembly and through the generic form.

// Every role attribute is accepted and kept: train.param on a float tensor,
// train.input on an integer tensor, train.buffer on an integer tensor, and
// train.loss on a scalar float result; unannotated arguments stay bare.
// CHECK-LABEL: func.func @roles(
// CHECK-SAME:    %{{.*}}: tensor<16x8xf32> {train.param = "fc.weight"},
// CHECK-SAME:    %{{.*}}: tensor<4x16xf32> {train.input = "x"},
// CHECK-SAME:    %{{.*}}: tensor<4xi64> {train.input = "labels"},
// CHECK-SAME:    %{{.*}}: tensor<8xi64> {train.buffer = "bn.num_batches_tracked"},
// CHECK-SAME:    %{{.*}}: tensor<8xbf16> {train.param = "fc.bias"},
// CHECK-SAME:    %{{.*}}: tensor<f32>)
// CHECK-SAME:    -> (tensor<f32> {train.loss}, tensor<16x8xf32>)
func.func @roles(%w: tensor<16x8xf32> {train.param = "fc.weight"},
                 %x: tensor<4x16xf32> {train.input = "x"},
                 %y: tensor<4xi64> {train.input = "labels"},
                 %n: tensor<8xi64> {train.buffer = "bn.num_batches_tracked"},
                 %b: tensor<8xbf16> {train.param = "fc.bias"},
                 %lr: tensor<f32>)
    -> (tensor<f32> {train.loss}, tensor<16x8xf32>) {
  %h = nn.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %loss = nn.cross_entropy %h, %y : tensor<4x8xf32>, tensor<4xi64> -> tensor<f32>
  return %loss, %w : tensor<f32>, tensor<16x8xf32>
}

// train.loss accepts any float scalar, f16 included.
// CHECK-LABEL: func.func @loss_f16(
// CHECK-SAME:    -> (tensor<f16> {train.loss})
func.func @loss_f16(%l: tensor<f16>) -> (tensor<f16> {train.loss}) {
  return %l : tensor<f16>
}

// SGD without momentum has no buffer operand or result: plain, and with
// weight decay and dampening (printed as attributes, defaults elided).
// CHECK-LABEL: func.func @sgd_plain(
// CHECK-SAME:    %[[P:.*]]: tensor<4x4xf32>, %[[G:.*]]: tensor<4x4xf32>, %[[LR:.*]]: tensor<f32>)
// CHECK-NEXT:    %{{.*}} = train.sgd %[[P]], %[[G]], %[[LR]] : tensor<4x4xf32>
// CHECK-NEXT:    %{{.*}} = train.sgd %[[P]], %[[G]], %[[LR]] {dampening = 5.000000e-01 : f64, weight_decay = 2.500000e-01 : f64} : tensor<4x4xf32>
// CHECK-NEXT:    %{{.*}} = train.sgd %[[P]], %[[G]], %[[LR]] : tensor<4x4xf32>
func.func @sgd_plain(%p: tensor<4x4xf32>, %g: tensor<4x4xf32>, %lr: tensor<f32>) {
  %0 = train.sgd %p, %g, %lr : tensor<4x4xf32>
  %1 = train.sgd %p, %g, %lr {weight_decay = 0.25, dampening = 0.5} : tensor<4x4xf32>
  // Explicit defaults are elided on print.
  %2 = train.sgd %p, %g, %lr {momentum = 0.0, dampening = 0.0, weight_decay = 0.0} : tensor<4x4xf32>
  return
}

// SGD with momentum takes the buffer (`buffer %b : type`) and returns the
// new one after `->`; Nesterov with dampening 0 is accepted.
// CHECK-LABEL: func.func @sgd_momentum(
// CHECK-SAME:    %[[P:.*]]: tensor<8xf16>, %[[G:.*]]: tensor<8xf16>, %[[LR:.*]]: tensor<f32>, %[[B:.*]]: tensor<8xf16>)
// CHECK-NEXT:    %[[NP:.*]], %[[NB:.*]] = train.sgd %[[P]], %[[G]], %[[LR]] buffer %[[B]] : tensor<8xf16> {momentum = 9.000000e-01 : f64} : tensor<8xf16> -> tensor<8xf16>
// CHECK-NEXT:    %{{.*}}, %{{.*}} = train.sgd %[[NP]], %[[G]], %[[LR]] buffer %[[NB]] : tensor<8xf16> {momentum = 5.000000e-01 : f64, nesterov} : tensor<8xf16> -> tensor<8xf16>
// CHECK-NEXT:    %{{.*}}, %{{.*}} = train.sgd %[[P]], %[[G]], %[[LR]] buffer %[[B]] : tensor<8xf16> {dampening = 2.500000e-01 : f64, momentum = 5.000000e-01 : f64, weight_decay = 1.250000e-01 : f64} : tensor<8xf16> -> tensor<8xf16>
func.func @sgd_momentum(%p: tensor<8xf16>, %g: tensor<8xf16>, %lr: tensor<f32>, %b: tensor<8xf16>) {
  %0, %1 = train.sgd %p, %g, %lr buffer %b : tensor<8xf16> {momentum = 0.9} : tensor<8xf16> -> tensor<8xf16>
  %2, %3 = train.sgd %0, %g, %lr buffer %1 : tensor<8xf16> {momentum = 0.5, nesterov} : tensor<8xf16> -> tensor<8xf16>
  %4, %5 = train.sgd %p, %g, %lr buffer %b : tensor<8xf16> {momentum = 0.5, dampening = 0.25, weight_decay = 0.125} : tensor<8xf16> -> tensor<8xf16>
  return
}

// Adam: all defaults (elided); AdamW (decoupled_weight_decay) with weight
// decay; custom betas/eps and no bias correction; an explicit
// bias_correction = true is the default and is elided.
// CHECK-LABEL: func.func @adam(
// CHECK-SAME:    %[[P:.*]]: tensor<2x3xf32>, %[[G:.*]]: tensor<2x3xf32>, %[[M:.*]]: tensor<2x3xf32>, %[[V:.*]]: tensor<2x3xf32>, %[[LR:.*]]: tensor<f32>, %[[S:.*]]: tensor<i64>)
// CHECK-NEXT:    %{{.*}}, %{{.*}}, %{{.*}} = train.adam %[[P]], %[[G]], %[[M]], %[[V]], %[[LR]], %[[S]] : tensor<2x3xf32>
// CHECK-NEXT:    %{{.*}}, %{{.*}}, %{{.*}} = train.adam %[[P]], %[[G]], %[[M]], %[[V]], %[[LR]], %[[S]] {decoupled_weight_decay, weight_decay = 1.000000e-02 : f64} : tensor<2x3xf32>
// CHECK-NEXT:    %{{.*}}, %{{.*}}, %{{.*}} = train.adam %[[P]], %[[G]], %[[M]], %[[V]], %[[LR]], %[[S]] {beta1 = 5.000000e-01 : f64, beta2 = 7.500000e-01 : f64, bias_correction = false, eps = 1.250000e-01 : f64} : tensor<2x3xf32>
// CHECK-NEXT:    %{{.*}}, %{{.*}}, %{{.*}} = train.adam %[[P]], %[[G]], %[[M]], %[[V]], %[[LR]], %[[S]] {weight_decay = 1.000000e-02 : f64} : tensor<2x3xf32>
// CHECK-NEXT:    %{{.*}}, %{{.*}}, %{{.*}} = train.adam %[[P]], %[[G]], %[[M]], %[[V]], %[[LR]], %[[S]] : tensor<2x3xf32>
func.func @adam(%p: tensor<2x3xf32>, %g: tensor<2x3xf32>, %m: tensor<2x3xf32>, %v: tensor<2x3xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  %0:3 = train.adam %p, %g, %m, %v, %lr, %s : tensor<2x3xf32>
  %1:3 = train.adam %p, %g, %m, %v, %lr, %s {decoupled_weight_decay, weight_decay = 0.01} : tensor<2x3xf32>
  %2:3 = train.adam %p, %g, %m, %v, %lr, %s {beta1 = 0.5, beta2 = 0.75, eps = 0.125, bias_correction = false} : tensor<2x3xf32>
  // Adam with L2 (not decoupled) weight decay.
  %3:3 = train.adam %p, %g, %m, %v, %lr, %s {weight_decay = 0.01} : tensor<2x3xf32>
  %4:3 = train.adam %p, %g, %m, %v, %lr, %s {bias_correction = true, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8} : tensor<2x3xf32>
  return
}

// The fused update over two parameters, one gradient in bf16, with the
// factor of a clip_coef (sharded norm and loss scale); without a factor.
// CHECK-LABEL: func.func @fused_adam(
// CHECK-SAME:    %[[P:[^:]*]]: tensor<2x3xf32>, %[[Q:[^:]*]]: tensor<4xf32>, %[[G:[^:]*]]: tensor<4xbf16>, %[[LR:[^:]*]]: tensor<f32>, %[[S:[^:]*]]: tensor<i64>)
// CHECK-NEXT:    %[[N:.*]], %[[C:.*]] = train.clip_coef %[[P]], %[[G]] sum_sq(%[[LR]]) loss_scale(%[[LR]]) {max_norm = 1.000000e+00 : f64} : tensor<2x3xf32>, tensor<4xbf16>
// CHECK-NEXT:    %{{.*}}:6 = train.fused_adam(%[[P]], %[[Q]]) grads(%[[P]], %[[G]]) states(%[[P]], %[[Q]]) (%[[P]], %[[Q]]), %[[LR]], %[[S]] coef(%[[C]]) {decoupled_weight_decay, weight_decay = 1.000000e-02 : f64} : (tensor<2x3xf32>, tensor<4xf32>) grads(tensor<2x3xf32>, tensor<4xbf16>)
// CHECK-NEXT:    %{{.*}}:3 = train.fused_adam(%[[Q]]) grads(%[[G]]) states(%[[Q]]) (%[[Q]]), %[[LR]], %[[S]] {bias_correction = false} : (tensor<4xf32>) grads(tensor<4xbf16>)
func.func @fused_adam(%p: tensor<2x3xf32>, %q: tensor<4xf32>, %g: tensor<4xbf16>, %lr: tensor<f32>, %s: tensor<i64>) {
  %n, %c = train.clip_coef %p, %g sum_sq(%lr) loss_scale(%lr) {max_norm = 1.0 : f64} : tensor<2x3xf32>, tensor<4xbf16>
  %0:6 = train.fused_adam(%p, %q) grads(%p, %g) states(%p, %q) (%p, %q), %lr, %s coef(%c) {decoupled_weight_decay, weight_decay = 0.01} : (tensor<2x3xf32>, tensor<4xf32>) grads(tensor<2x3xf32>, tensor<4xbf16>)
  %1:3 = train.fused_adam(%q) grads(%g) states(%q) (%q), %lr, %s {bias_correction = false} : (tensor<4xf32>) grads(tensor<4xbf16>)
  return
}

// LAMB fused: the sums of two tensors (one gradient in bf16, read with a
// clip's factor), then the update reading them.
// CHECK-LABEL: func.func @fused_lamb(
// CHECK-SAME:    %[[P:[^:]*]]: tensor<2x3xf32>, %[[Q:[^:]*]]: tensor<4xf32>, %[[G:[^:]*]]: tensor<4xbf16>, %[[LR:[^:]*]]: tensor<f32>, %[[S:[^:]*]]: tensor<i64>, %[[C:[^:]*]]: tensor<f32>)
// CHECK-NEXT:    %[[ST:.*]]:2 = train.fused_lamb_stats(%[[P]], %[[Q]]) grads(%[[P]], %[[G]]) states(%[[P]], %[[Q]]) (%[[P]], %[[Q]]) coef(%[[C]]) {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 9.9999999999999995E-7 : f64, weight_decay = 0.000000e+00 : f64} : (tensor<2x3xf32>, tensor<4xf32>) grads(tensor<2x3xf32>, tensor<4xbf16>)
// CHECK-NEXT:    %{{.*}}:6 = train.fused_lamb(%[[P]], %[[Q]]) grads(%[[P]], %[[G]]) states(%[[P]], %[[Q]]) (%[[P]], %[[Q]]) stats(%[[ST]]#0, %[[ST]]#1), %[[LR]], %[[S]] coef(%[[C]]) {eps = 9.9999999999999995E-7 : f64} : (tensor<2x3xf32>, tensor<4xf32>) grads(tensor<2x3xf32>, tensor<4xbf16>) stats(tensor<2xf32>, tensor<2xf32>)
func.func @fused_lamb(%p: tensor<2x3xf32>, %q: tensor<4xf32>, %g: tensor<4xbf16>, %lr: tensor<f32>, %s: tensor<i64>, %c: tensor<f32>) {
  %st:2 = train.fused_lamb_stats(%p, %q) grads(%p, %g) states(%p, %q) (%p, %q) coef(%c) {beta1 = 0.9, beta2 = 0.999, eps = 1.0e-6, weight_decay = 0.0} : (tensor<2x3xf32>, tensor<4xf32>) grads(tensor<2x3xf32>, tensor<4xbf16>)
  %0:6 = train.fused_lamb(%p, %q) grads(%p, %g) states(%p, %q) (%p, %q) stats(%st#0, %st#1), %lr, %s coef(%c) {eps = 1.0e-6} : (tensor<2x3xf32>, tensor<4xf32>) grads(tensor<2x3xf32>, tensor<4xbf16>) stats(tensor<2xf32>, tensor<2xf32>)
  return
}

// clip_grad_norm returns one clipped gradient per input plus the global
// norm (a tensor<f32> the format does not spell); with one gradient and
// with a bucket of gradients of different shapes and types.
// CHECK-LABEL: func.func @clip_grad_norm(
// CHECK-SAME:    %[[A:.*]]: tensor<4xf32>, %[[B:.*]]: tensor<2x4xbf16>)
// CHECK-NEXT:    %{{.*}}, %[[N1:.*]] = train.clip_grad_norm %[[A]] {max_norm = 1.000000e+00 : f64} : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT:    %{{.*}}:2, %[[N2:.*]] = train.clip_grad_norm %[[A]], %[[B]] {max_norm = 5.000000e-01 : f64} : tensor<4xf32>, tensor<2x4xbf16> -> tensor<4xf32>, tensor<2x4xbf16>
// CHECK-NEXT:    nn.add %[[N1]], %[[N2]] : tensor<f32>, tensor<f32> -> tensor<f32>
func.func @clip_grad_norm(%a: tensor<4xf32>, %b: tensor<2x4xbf16>) {
  %0, %n1 = train.clip_grad_norm %a {max_norm = 1.0} : tensor<4xf32> -> tensor<4xf32>
  %1:2, %n2 = train.clip_grad_norm %a, %b {max_norm = 0.5} : tensor<4xf32>, tensor<2x4xbf16> -> tensor<4xf32>, tensor<2x4xbf16>
  %2 = nn.add %n1, %n2 : tensor<f32>, tensor<f32> -> tensor<f32>
  return
}

// fp16: the loss scale (after the sum of squares when the gradients are
// shards) is divided out.
// CHECK-LABEL: func.func @clip_grad_norm_scaled(
// CHECK-NEXT:    train.clip_grad_norm %{{.*}} loss_scale(%{{.*}}) {max_norm = 1.000000e+00 : f64} : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT:    train.clip_grad_norm %{{.*}} sum_sq(%{{.*}}) loss_scale(%{{.*}}) {max_norm = 0.000000e+00 : f64} : tensor<4xf32> -> tensor<4xf32>
func.func @clip_grad_norm_scaled(%a: tensor<4xf32>, %sq: tensor<f32>, %s: tensor<f32>) {
  %0, %n1 = train.clip_grad_norm %a loss_scale(%s) {max_norm = 1.0} : tensor<4xf32> -> tensor<4xf32>
  %1, %n2 = train.clip_grad_norm %a sum_sq(%sq) loss_scale(%s) {max_norm = 0.0} : tensor<4xf32> -> tensor<4xf32>
  return
}

// train.accumulate runs its body per micro-batch with the index as block
// argument and yields float tensors that become its results; count 1 and
// a body with no results are accepted too.
// CHECK-LABEL: func.func @accumulate(
// CHECK-SAME:    %[[W:.*]]: tensor<4xf32>, %[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[ACC:.*]]:2 = train.accumulate 8 -> tensor<4xf32>, tensor<f32> {
// CHECK-NEXT:    ^bb0(%[[I:.*]]: index):
// CHECK-NEXT:      %[[M:.*]] = nn.mul %[[W]], %[[X]] : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT:      %[[S:.*]] = nn.reduce_sum %[[M]] {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
// CHECK-NEXT:      train.yield %[[M]], %[[S]] : tensor<4xf32>, tensor<f32>
// CHECK-NEXT:    }
// CHECK-NEXT:    train.accumulate 1 {
// CHECK-NEXT:    ^bb0(%{{.*}}: index):
// CHECK-NEXT:      train.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    nn.add %[[ACC]]#0, %[[ACC]]#1 : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
func.func @accumulate(%w: tensor<4xf32>, %x: tensor<4xf32>) {
  %0:2 = train.accumulate 8 -> tensor<4xf32>, tensor<f32> {
  ^bb0(%i: index):
    %m = nn.mul %w, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    %s = nn.reduce_sum %m {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
    train.yield %m, %s : tensor<4xf32>, tensor<f32>
  }
  train.accumulate 1 {
  ^bb0(%j: index):
    train.yield
  }
  %1 = nn.add %0#0, %0#1 : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  return
}

// A bf16 or fp16 value is summed into an f32 result of its shape, widened
// as it is added (fuse-optimizer yields a gradient so instead of its cast).
// CHECK-LABEL: func.func @accumulate_widening(
// CHECK:         train.accumulate 4 -> tensor<2x3xf32>, tensor<2x3xf32> {
// CHECK:           train.yield %arg0, %arg1 : tensor<2x3xbf16>, tensor<2x3xf16>
func.func @accumulate_widening(%x: tensor<2x3xbf16>, %y: tensor<2x3xf16>) {
  %0:2 = train.accumulate 4 -> tensor<2x3xf32>, tensor<2x3xf32> {
  ^bb0(%i: index):
    train.yield %x, %y : tensor<2x3xbf16>, tensor<2x3xf16>
  }
  return
}

// A whole step: accumulate gradients over micro-batches, clip them and apply
// AdamW and momentum SGD, with the roles on the function signature.
// CHECK-LABEL: func.func @step(
// CHECK-SAME:    %[[W:.*]]: tensor<16x8xf32> {train.param = "w"}, %[[B:.*]]: tensor<8xf32> {train.param = "b"}, %[[X:.*]]: tensor<4x16xf32> {train.input = "x"},
// CHECK-SAME:    %[[M:.*]]: tensor<16x8xf32>, %[[V:.*]]: tensor<16x8xf32>, %[[BUF:.*]]: tensor<8xf32>, %[[LR:.*]]: tensor<f32>, %[[STEP:.*]]: tensor<i64>)
// CHECK-SAME:    -> (tensor<f32> {train.loss}, tensor<16x8xf32>, tensor<8xf32>)
// CHECK:         %[[G:.*]]:3 = train.accumulate 4 -> tensor<16x8xf32>, tensor<8xf32>, tensor<f32> {
// CHECK:         %[[C:.*]]:2, %{{.*}} = train.clip_grad_norm %[[G]]#0, %[[G]]#1 {max_norm = 1.000000e+00 : f64} : tensor<16x8xf32>, tensor<8xf32> -> tensor<16x8xf32>, tensor<8xf32>
// CHECK-NEXT:    %[[NW:.*]], %{{.*}}, %{{.*}} = train.adam %[[W]], %[[C]]#0, %[[M]], %[[V]], %[[LR]], %[[STEP]] {decoupled_weight_decay, weight_decay = 1.000000e-01 : f64} : tensor<16x8xf32>
// CHECK-NEXT:    %[[NB:.*]], %{{.*}} = train.sgd %[[B]], %[[C]]#1, %[[LR]] buffer %[[BUF]] : tensor<8xf32> {momentum = 9.000000e-01 : f64, nesterov} : tensor<8xf32> -> tensor<8xf32>
// CHECK-NEXT:    return %[[G]]#2, %[[NW]], %[[NB]] : tensor<f32>, tensor<16x8xf32>, tensor<8xf32>
func.func @step(%w: tensor<16x8xf32> {train.param = "w"}, %b: tensor<8xf32> {train.param = "b"},
                %x: tensor<4x16xf32> {train.input = "x"},
                %m: tensor<16x8xf32>, %v: tensor<16x8xf32>, %buf: tensor<8xf32>,
                %lr: tensor<f32>, %step: tensor<i64>)
    -> (tensor<f32> {train.loss}, tensor<16x8xf32>, tensor<8xf32>) {
  %g:3 = train.accumulate 4 -> tensor<16x8xf32>, tensor<8xf32>, tensor<f32> {
  ^bb0(%i: index):
    %h = nn.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
    %o = nn.add %h, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    %l = nn.reduce_mean %o {axes = array<i64: 0, 1>} : tensor<4x8xf32> -> tensor<f32>
    train.yield %w, %b, %l : tensor<16x8xf32>, tensor<8xf32>, tensor<f32>
  }
  %c:2, %norm = train.clip_grad_norm %g#0, %g#1 {max_norm = 1.0} : tensor<16x8xf32>, tensor<8xf32> -> tensor<16x8xf32>, tensor<8xf32>
  %nw, %nm, %nv = train.adam %w, %c#0, %m, %v, %lr, %step {decoupled_weight_decay, weight_decay = 0.1} : tensor<16x8xf32>
  %nb, %nbuf = train.sgd %b, %c#1, %lr buffer %buf : tensor<8xf32> {momentum = 0.9, nesterov} : tensor<8xf32> -> tensor<8xf32>
  return %g#2, %nw, %nb : tensor<f32>, tensor<16x8xf32>, tensor<8xf32>
}

// CHECK-LABEL: func @lr_schedule
func.func @lr_schedule(%s: tensor<i64> {train.step}) -> (tensor<f32> {train.lr}) {
  // CHECK: train.lr_schedule "WarmupLR" {lr = 1.000000e-03 : f64, warmup_num_steps = 5.000000e+00 : f64}, %{{.*}}
  %lr = train.lr_schedule "WarmupLR" {lr = 1.0e-3 : f64, warmup_num_steps = 5.0 : f64}, %s
  return %lr : tensor<f32>
}

// load_batch: the inputs of micro-batch 3, named.
// CHECK-LABEL: func.func @load_batch(
// CHECK:         %{{.*}}:2 = train.load_batch 3 ["input_ids", "targets"] : tensor<2x16xi64>, tensor<2x16xi64>
func.func @load_batch() -> (tensor<2x16xi64>, tensor<2x16xi64>) {
  %0:2 = train.load_batch 3 ["input_ids", "targets"] : tensor<2x16xi64>, tensor<2x16xi64>
  return %0#0, %0#1 : tensor<2x16xi64>, tensor<2x16xi64>
}

// assign: a new value into a model buffer (BatchNorm's running mean).
// CHECK-LABEL: func.func @assign(
// CHECK:         train.assign %{{.*}} to %{{.*}} : tensor<8xf32> to tensor<8xf32>
func.func @assign(%rm: tensor<8xf32> {train.buffer = "bn.running_mean"}, %v: tensor<8xf32> {train.input = "v"}) {
  train.assign %v to %rm : tensor<8xf32> to tensor<8xf32>
  return
}

// The compressed all-reduce's local steps on 2 workers of a 32-element
// buffer: compress (4 bytes of signs, a scale), serve a 16-element chunk
// (both workers' 2 bytes), expand both chunks.
// CHECK-LABEL: func.func @onebit(
// CHECK:         %[[B:.*]], %[[A:.*]], %{{.*}} = train.onebit_compress %{{.*}}, %{{.*}} : tensor<32xf32> -> tensor<4xi8>
// CHECK:         %{{.*}}, %{{.*}}, %{{.*}} = train.onebit_server %{{.*}}, %{{.*}}, %{{.*}} : tensor<4xi8>, tensor<2xf32>, tensor<16xf32> -> tensor<2xi8>
// CHECK:         train.onebit_expand %{{.*}}, %{{.*}} : tensor<4xi8>, tensor<2xf32> -> tensor<32xf32>
func.func @onebit(%m: tensor<32xf32>, %we: tensor<32xf32>, %got: tensor<4xi8>, %scales: tensor<2xf32>, %se: tensor<16xf32>) -> (tensor<4xi8>, tensor<1xf32>, tensor<32xf32>, tensor<2xi8>, tensor<1xf32>, tensor<16xf32>, tensor<32xf32>) {
  %bits, %a, %we2 = train.onebit_compress %m, %we : tensor<32xf32> -> tensor<4xi8>
  %sb, %b, %se2 = train.onebit_server %got, %scales, %se : tensor<4xi8>, tensor<2xf32>, tensor<16xf32> -> tensor<2xi8>
  %out = train.onebit_expand %got, %scales : tensor<4xi8>, tensor<2xf32> -> tensor<32xf32>
  return %bits, %a, %we2, %sb, %b, %se2, %out : tensor<4xi8>, tensor<1xf32>, tensor<32xf32>, tensor<2xi8>, tensor<1xf32>, tensor<16xf32>, tensor<32xf32>
}

// 1-bit Adam's update, with and without the compressed momentum, and an op
// of a range of optimizer steps.
// CHECK-LABEL: func.func @onebit_adam(
// CHECK:         train.onebit_adam %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {freeze_step = 10 : i64} : tensor<4xf32>
// CHECK:         nn.neg %{{.*}} {train.active_steps = array<i64: 11, 0>} : tensor<4xf32>
// CHECK:         train.onebit_adam %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} compressed(%{{.*}} : tensor<4xf32>) {freeze_step = 10 : i64, step_offset = 1 : i64} : tensor<4xf32>
func.func @onebit_adam(%p: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %a:3 = train.onebit_adam %p, %p, %p, %p, %lr, %t {freeze_step = 10 : i64} : tensor<4xf32>
  %c = nn.neg %p {train.active_steps = array<i64: 11, 0>} : tensor<4xf32>
  %b:3 = train.onebit_adam %a#0, %p, %a#1, %a#2, %lr, %t compressed(%c : tensor<4xf32>) {freeze_step = 10 : i64, step_offset = 1 : i64} : tensor<4xf32>
  return %b#0, %b#1, %b#2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// 0/1 Adam: the update, its all-reduce's payload and the error reset, each
// of the step classes train.step_classes names.
// CHECK-LABEL: func.func @zero_one_adam(
// CHECK:         %[[E:.*]] = train.reset_at %{{.*}}, %{{.*}} {at = 10 : i64, train.step_classes = 20 : i64} : tensor<8xf32>
// CHECK:         %[[Y:.*]] = train.zero_one_payload %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {train.step_classes = 20 : i64, var_freeze_step = 8 : i64} : tensor<4xf32>
// CHECK:         train.zero_one_adam %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} compressed(%[[Y]] : tensor<4xf32>) {local_step_clipper = 4 : i64, var_freeze_step = 8 : i64} : tensor<4xf32>
func.func @zero_one_adam(%p: tensor<4xf32>, %e: tensor<8xf32>, %s: tensor<f32>, %lr: tensor<f32>, %t: tensor<i64>) -> (tensor<4xf32>, tensor<f32>, tensor<8xf32>) {
  %r = train.reset_at %e, %t {at = 10 : i64, train.step_classes = 20 : i64} : tensor<8xf32>
  %y = train.zero_one_payload %p, %p, %p, %p, %p, %lr, %t {var_freeze_step = 8 : i64, train.step_classes = 20 : i64} : tensor<4xf32>
  %a:5 = train.zero_one_adam %p, %p, %p, %p, %p, %s, %lr, %t compressed(%y : tensor<4xf32>) {var_freeze_step = 8 : i64, local_step_clipper = 4 : i64} : tensor<4xf32>
  return %a#0, %a#4, %r : tensor<4xf32>, tensor<f32>, tensor<8xf32>
}

// 1-bit LAMB: the scaling coefficients, set once, and the update.
// CHECK-LABEL: func.func @onebit_lamb(
// CHECK:         %[[C:.*]]:2 = train.onebit_lamb_scaling(%{{.*}}, %{{.*}} : tensor<4xf32>, tensor<2xf32>) coeffs(%{{.*}}, %{{.*}}), %{{.*}} {at = 9 : i64} -> tensor<f32>, tensor<f32>
// CHECK:         train.onebit_lamb %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[C]]#0, %{{.*}}, %{{.*}} {freeze_step = 8 : i64} : tensor<4xf32>
func.func @onebit_lamb(%p: tensor<4xf32>, %q: tensor<2xf32>, %s: tensor<f32>, %lr: tensor<f32>, %t: tensor<i64>) -> (tensor<4xf32>, tensor<f32>) {
  %c:2 = train.onebit_lamb_scaling (%p, %q : tensor<4xf32>, tensor<2xf32>) coeffs(%s, %s), %t {at = 9 : i64} -> tensor<f32>, tensor<f32>
  %a:6 = train.onebit_lamb %p, %p, %p, %p, %p, %s, %s, %c#0, %lr, %t {freeze_step = 8 : i64} : tensor<4xf32>
  return %a#0, %c#1 : tensor<4xf32>, tensor<f32>
}

// 1-bit LAMB's norms over every tensor (bf16 / fp16), and an update that
// reads them.
// CHECK-LABEL: func.func @onebit_lamb_stats(
// CHECK:         %[[S:.*]] = train.onebit_lamb_stats(%{{.*}}, %{{.*}} : tensor<4xf32>, tensor<2xf32>) grads(%{{.*}}, %{{.*}} : tensor<4xf32>, tensor<2xf32>) exp_avgs(%{{.*}}, %{{.*}} : tensor<4xf32>, tensor<2xf32>) exp_avg_sqs(%{{.*}}, %{{.*}} : tensor<4xf32>, tensor<2xf32>) exp_avg_sq_freshes(%{{.*}}, %{{.*}} : tensor<4xf32>, tensor<2xf32>) compressed(%{{.*}}, %{{.*}} : tensor<4xf32>, tensor<2xf32>), %{{.*}} {freeze_step = 8 : i64, step_offset = 1 : i64} -> tensor<3xf32>
// CHECK:         train.onebit_lamb {{.*}} compressed(%{{.*}} : tensor<4xf32>) stats(%[[S]] : tensor<3xf32>) {freeze_step = 8 : i64, step_offset = 1 : i64} : tensor<4xf32>
func.func @onebit_lamb_stats(%p: tensor<4xf32>, %q: tensor<2xf32>, %s: tensor<f32>, %lr: tensor<f32>, %t: tensor<i64>) -> tensor<4xf32> {
  %st = train.onebit_lamb_stats (%p, %q : tensor<4xf32>, tensor<2xf32>) grads(%p, %q : tensor<4xf32>, tensor<2xf32>) exp_avgs(%p, %q : tensor<4xf32>, tensor<2xf32>) exp_avg_sqs(%p, %q : tensor<4xf32>, tensor<2xf32>) exp_avg_sq_freshes(%p, %q : tensor<4xf32>, tensor<2xf32>) compressed(%p, %q : tensor<4xf32>, tensor<2xf32>), %t {freeze_step = 8 : i64, step_offset = 1 : i64} -> tensor<3xf32>
  %a:6 = train.onebit_lamb %p, %p, %p, %p, %p, %s, %s, %s, %lr, %t compressed(%p : tensor<4xf32>) stats(%st : tensor<3xf32>) {freeze_step = 8 : i64, step_offset = 1 : i64} : tensor<4xf32>
  return %a#0 : tensor<4xf32>
}
