// RUN: dsc-opt %s --split-input-file --data-parallel=dp=4 | FileCheck %s

// --data-parallel alone, on hand-written steps at its precondition: the
// output of autodiff, gradient-accumulation and optimizer (a train.accumulate
// body yielding the loss and the gradient, train.clip_grad_norm reading the
// gradient, then the update). It inserts dist.all_reduce avg + dist.wait on
// each gradient at the accumulation boundary and marks the module.

// One micro-batch: the gradient is averaged inside the body, right where the
// backward pass yields it.
// CHECK:       module attributes {dist.dp = 4 : i64, dist.zero_stage = 0 : i64}
// CHECK-LABEL: func.func @one_micro_batch
// CHECK:         train.accumulate 1
// CHECK:         %[[R:.*]] = dist.all_reduce  avg %[[G:.*]] {group = #dist.group<dp, 4>} : tensor<3xf32> -> tensor<3xf32>
// CHECK-NEXT:    %[[W:.*]] = dist.wait %[[R]] : tensor<3xf32>
// CHECK-NEXT:    train.yield %{{.*}}, %[[W]] :
// CHECK-NOT:     dist.
// CHECK:         return
func.func @one_micro_batch(%x: tensor<3xf32> {train.input = "x"}, %w: tensor<3xf32> {train.param = "w"}, %s: tensor<i64> {train.step})
    -> (tensor<3xf32> {train.updated = "w"}, tensor<f32> {train.loss}, tensor<f32> {train.grad_norm}, tensor<f32> {train.lr}) {
  %lr = train.lr_schedule "constant" {lr = 1.0e-3 : f64}, %s
  %r:2 = train.accumulate 1 -> tensor<f32>, tensor<3xf32> {
  ^bb0(%i: index):
    %ww = nn.add %w, %w : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
    %p = nn.mul %x, %ww : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
    %l = nn.reduce_sum %p {axes = array<i64: 0>} : tensor<3xf32> -> tensor<f32>
    %g = nn.add %x, %x : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
    train.yield %l, %g : tensor<f32>, tensor<3xf32>
  }
  %c, %n = train.clip_grad_norm %r#1 {max_norm = 0.0 : f64} : tensor<3xf32> -> tensor<3xf32>
  %nw = train.sgd %w, %c, %lr : tensor<3xf32>
  return %nw, %r#0, %n, %lr : tensor<3xf32>, tensor<f32>, tensor<f32>, tensor<f32>
}

// -----

// Two micro-batches: the scaled sum is averaged once, after the
// accumulation, never inside the body.
// CHECK:       module attributes {dist.dp = 4 : i64, dist.zero_stage = 0 : i64}
// CHECK-LABEL: func.func @two_micro_batches
// CHECK:         train.accumulate 2
// CHECK-NOT:     dist.
// CHECK:         train.yield
// CHECK:         %[[S:.*]] = nn.mul %{{.*}}#1, %{{.*}} : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
// CHECK-NEXT:    %[[R:.*]] = dist.all_reduce  avg %[[S]] {group = #dist.group<dp, 4>} : tensor<3xf32> -> tensor<3xf32>
// CHECK-NEXT:    %[[W:.*]] = dist.wait %[[R]] : tensor<3xf32>
// CHECK-NEXT:    train.clip_grad_norm %[[W]]
func.func @two_micro_batches(%x: tensor<3xf32> {train.input = "x"}, %w: tensor<3xf32> {train.param = "w"}, %s: tensor<i64> {train.step})
    -> (tensor<3xf32> {train.updated = "w"}, tensor<f32> {train.loss}, tensor<f32> {train.grad_norm}, tensor<f32> {train.lr}) {
  %lr = train.lr_schedule "constant" {lr = 1.0e-3 : f64}, %s
  %r:2 = train.accumulate 2 -> tensor<f32>, tensor<3xf32> {
  ^bb0(%i: index):
    %ww = nn.add %w, %w : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
    %p = nn.mul %x, %ww : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
    %l = nn.reduce_sum %p {axes = array<i64: 0>} : tensor<3xf32> -> tensor<f32>
    %g = nn.add %x, %x : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
    train.yield %l, %g : tensor<f32>, tensor<3xf32>
  }
  %half = arith.constant dense<5.0e-01> : tensor<f32>
  %loss = nn.mul %r#0, %half : tensor<f32>, tensor<f32> -> tensor<f32>
  %sum = nn.mul %r#1, %half : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %c, %n = train.clip_grad_norm %sum {max_norm = 0.0 : f64} : tensor<3xf32> -> tensor<3xf32>
  %nw = train.sgd %w, %c, %lr : tensor<3xf32>
  return %nw, %loss, %n, %lr : tensor<3xf32>, tensor<f32>, tensor<f32>, tensor<f32>
}
