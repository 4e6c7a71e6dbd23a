// RUN: dsc-opt %s --split-input-file --mixed-precision -verify-diagnostics
// RUN: not dsc-opt %s --split-input-file --mixed-precision=dtype=fp8 2>&1 | FileCheck %s --check-prefix=DTYPE
// DTYPE: for the --dtype option: Cannot find option named 'fp8'!

// After autodiff it is too late: the gradients would stay fp32 compute.
// expected-error @below {{mixed-precision: runs on the forward graph, before autodiff (this function already has gradients)}}
func.func @differentiated(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "w"}) {
  %l = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  %ones = arith.constant dense<1.000000e+00> : tensor<4xf32>
  return %l, %ones : tensor<f32>, tensor<4xf32>
}
