// RUN: split-file %s %t
// RUN: dsc-opt %t/stage0.mlir --zero="stage=0" -verify-diagnostics
// RUN: dsc-opt %t/stage4.mlir --zero="stage=4" -verify-diagnostics
// RUN: dsc-opt %t/dp0.mlir --zero="dp=0" -verify-diagnostics
// RUN: dsc-opt %t/steps.mlir -split-input-file --zero -verify-diagnostics

// Errors of --zero. The options are checked on the module, before any
// function is partitioned: one input per option value.

//--- stage0.mlir
// expected-error @below {{zero: stage must be 1, 2 or 3 (stage 0 is the data-parallel pass), got 0}}
module {
}

//--- stage4.mlir
// expected-error @below {{zero: stage must be 1, 2 or 3 (stage 0 is the data-parallel pass), got 4}}
module {
}

//--- dp0.mlir
// expected-error @below {{zero: dp must be at least 1, got 0}}
module {
}

//--- steps.mlir
// The errors --zero reports on a step (after autodiff, gradient-accumulation
// and optimizer; the gradient of sum(x * w) is x).

// Partitioning a step that already all-reduces its gradients.
module attributes {dist.dp = 2 : i64, dist.zero_stage = 0 : i64} {
  func.func @twice(%x: tensor<4xf32> {train.input = "x"}, %w: tensor<4xf32> {train.param = "w"}, %step: tensor<i64> {train.step})
      -> (tensor<4xf32> {train.updated = "w"}, tensor<f32> {train.loss}, tensor<f32> {train.grad_norm}, tensor<f32> {train.lr}) {
    %lr = train.lr_schedule "constant" {lr = 1.000000e-03 : f64}, %step
    %0:2 = train.accumulate 1 -> tensor<f32>, tensor<4xf32> {
    ^bb0(%i: index):
      %m = nn.mul %x, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
      %l = nn.reduce_sum %m {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
      // expected-error @+1 {{'dist.all_reduce' op zero: the step already communicates (data-parallel ran?)}}
      %r = dist.all_reduce avg %x {group = #dist.group<dp, 2>} : tensor<4xf32> -> tensor<4xf32>
      %g = dist.wait %r : tensor<4xf32>
      train.yield %l, %g : tensor<f32>, tensor<4xf32>
    }
    %clipped, %norm = train.clip_grad_norm %0#1 {max_norm = 0.000000e+00 : f64} : tensor<4xf32> -> tensor<4xf32>
    %new = train.sgd %w, %clipped, %lr : tensor<4xf32>
    return %new, %0#0, %norm, %lr : tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>
  }
}

// -----

// The gradients must be accumulated (once per step) before they are
// partitioned.
// expected-error @below {{zero: expected one train.accumulate (run gradient-accumulation)}}
func.func @no_accumulate(%x: tensor<4xf32> {train.input = "x"}, %w: tensor<4xf32> {train.param = "w"}, %step: tensor<i64> {train.step})
    -> (tensor<4xf32> {train.updated = "w"}, tensor<f32> {train.loss}, tensor<f32> {train.grad_norm}, tensor<f32> {train.lr}) {
  %lr = train.lr_schedule "constant" {lr = 1.000000e-03 : f64}, %step
  %m = nn.mul %x, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %l = nn.reduce_sum %m {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  %clipped, %norm = train.clip_grad_norm %x {max_norm = 0.000000e+00 : f64} : tensor<4xf32> -> tensor<4xf32>
  %new = train.sgd %w, %clipped, %lr : tensor<4xf32>
  return %new, %l, %norm, %lr : tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>
}
