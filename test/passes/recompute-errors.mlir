// RUN: split-file %s %t
// RUN: dsc-opt %t/step.mlir --recompute=mode=layers -verify-diagnostics
// RUN: not dsc-opt %S/Inputs/recompute-blocks.mlir --autodiff --recompute=mode=everything 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: dsc-opt %t/interval.mlir --recompute="mode=layers interval=0" -verify-diagnostics

// MODE: for the --mode option: Cannot find option named 'everything'!

//--- interval.mlir
// The numeric options are checked on the module, before any function.
// expected-error @below {{recompute: interval must be at least 1, checkpoints and limit at least 0, got 0, 0 and 0}}
module {
}

//--- step.mlir
// The pass runs on a step whose forward and backward share one block:
// after autodiff, before gradient-accumulation wraps them in a region.
func.func @step(%w: tensor<4xf32> {train.param = "w"})
    -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "w"}) {
  // expected-error @+1 {{'train.accumulate' op recompute: runs after autodiff and before gradient-accumulation / pipeline-schedule (no regions yet)}}
  %0:2 = train.accumulate 2 -> tensor<f32>, tensor<4xf32> {
  ^bb0(%i: index):
    %s = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
    train.yield %s, %w : tensor<f32>, tensor<4xf32>
  }
  return %0#0, %0#1 : tensor<f32>, tensor<4xf32>
}
