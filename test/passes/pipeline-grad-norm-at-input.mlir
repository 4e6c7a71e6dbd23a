// RUN: dsc-opt %s --pipeline-grad-norm | FileCheck %s

// --pipeline-grad-norm alone, on hand-written stages at its precondition:
// the output of pipeline-split=stages=2, autodiff, pipeline-schedule and
// optimizer="type=sgd clip=1.0" (each stage clips its own gradients). Every
// stage's clipping then reads the sum of squares of its gradients
// all-reduced over the pp group, so both clip by the norm of the whole
// model; stage 1's copy of the tied embedding (dist.tied_copy) is left out
// of its sum, since stage 0 counts it. The stages' scheduled micro-batch
// bodies are cut down to one op per gradient: the pass reads only the
// clipping and the updates.

// CHECK-LABEL: func.func @mlp_stage0(
// CHECK:         %[[SQ:.*]] = train.sum_sq %[[DE:[a-z0-9_]+]], %[[DW:[a-z0-9_]+]] : tensor<8x4xf32>, tensor<4x4xf32>
// CHECK-NEXT:    %[[AR:.*]] = dist.all_reduce  sum %[[SQ]] {group = #dist.group<pp, 2>} : tensor<f32> -> tensor<f32>
// CHECK-NEXT:    %[[W:.*]] = dist.wait %[[AR]]
// CHECK-NEXT:    train.clip_grad_norm %[[DE]], %[[DW]] sum_sq(%[[W]]) {max_norm = 1.000000e+00 : f64}
// CHECK-LABEL: func.func @mlp_stage1(
// CHECK:         %[[SQ:.*]] = train.sum_sq %[[DH:[a-z0-9_]+]] : tensor<4x3xf32>
// CHECK-NEXT:    %[[AR:.*]] = dist.all_reduce  sum %[[SQ]] {group = #dist.group<pp, 2>} : tensor<f32> -> tensor<f32>
// CHECK-NEXT:    %[[W:.*]] = dist.wait %[[AR]]
// CHECK-NEXT:    train.clip_grad_norm %{{.*}}, %[[DH]] sum_sq(%[[W]]) {max_norm = 1.000000e+00 : f64}
module attributes {dist.layers = 2 : i64, dist.micro_batches = 2 : i64, dist.pp = 2 : i64, dist.schedule = "1f1b"} {
  func.func @mlp_stage0(%emb: tensor<8x4xf32> {train.param = "emb"}, %w: tensor<4x4xf32> {train.param = "w"}, %s: tensor<i64> {train.step})
      -> (tensor<8x4xf32> {train.updated = "emb"}, tensor<4x4xf32> {train.updated = "w"}, tensor<f32> {train.loss},
          tensor<f32> {train.grad_norm}, tensor<f32> {train.lr}) attributes {dist.layers = array<i64: 0, 0>, dist.stage = 0 : i64} {
    %lr = train.lr_schedule "constant" {lr = 1.0e-3 : f64}, %s
    %de = nn.add %emb, %emb : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
    %dw = nn.add %w, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
    %zero = arith.constant dense<0.0> : tensor<f32>
    %c:2, %n = train.clip_grad_norm %de, %dw {max_norm = 1.0 : f64} : tensor<8x4xf32>, tensor<4x4xf32> -> tensor<8x4xf32>, tensor<4x4xf32>
    %ne = train.sgd %emb, %c#0, %lr : tensor<8x4xf32>
    %nw = train.sgd %w, %c#1, %lr : tensor<4x4xf32>
    return %ne, %nw, %zero, %n, %lr : tensor<8x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<f32>, tensor<f32>
  }
  func.func @mlp_stage1(%emb: tensor<8x4xf32> {dist.tied_copy, train.param = "emb"}, %head: tensor<4x3xf32> {train.param = "head"},
                        %s: tensor<i64> {train.step})
      -> (tensor<8x4xf32> {train.updated = "emb"}, tensor<4x3xf32> {train.updated = "head"}, tensor<f32> {train.loss},
          tensor<f32> {train.grad_norm}, tensor<f32> {train.lr}) attributes {dist.layers = array<i64: 1, 1>, dist.stage = 1 : i64} {
    %lr = train.lr_schedule "constant" {lr = 1.0e-3 : f64}, %s
    %de = nn.add %emb, %emb : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
    %dh = nn.add %head, %head : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
    %loss = nn.reduce_sum %head {axes = array<i64: 0, 1>} : tensor<4x3xf32> -> tensor<f32>
    %c:2, %n = train.clip_grad_norm %de, %dh {max_norm = 1.0 : f64} : tensor<8x4xf32>, tensor<4x3xf32> -> tensor<8x4xf32>, tensor<4x3xf32>
    %ne = train.sgd %emb, %c#0, %lr : tensor<8x4xf32>
    %nh = train.sgd %head, %c#1, %lr : tensor<4x3xf32>
    return %ne, %nh, %loss, %n, %lr : tensor<8x4xf32>, tensor<4x3xf32>, tensor<f32>, tensor<f32>, tensor<f32>
  }
}
