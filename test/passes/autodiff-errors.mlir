// RUN: dsc-opt %s -split-input-file --autodiff -verify-diagnostics

// Every error --autodiff reports.

// A function that already has train.grad results is not differentiated
// twice.
// expected-error @+1 {{function is already differentiated}}
func.func @twice(%w: tensor<8xf32> {train.param = "w"})
    -> (tensor<f32> {train.loss}, tensor<8xf32> {train.grad = "w"}) {
  %0 = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<8xf32> -> tensor<f32>
  return %0, %w : tensor<f32>, tensor<8xf32>
}

// -----

// A parameter the loss does not depend on (here: only the other parameter
// feeds the loss) is an error, named.
// expected-error @+1 {{the loss does not depend on parameter 'unused'}}
func.func @unused_param(%w: tensor<8xf32> {train.param = "w"}, %u: tensor<8xf32> {train.param = "unused"})
    -> (tensor<f32> {train.loss}) {
  %0 = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<8xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// A parameter that reaches the loss only through an integer value (a cast
// to int and back) gets no gradient either: integer values stop it.
// expected-error @+1 {{the loss does not depend on parameter 'w'}}
func.func @through_integer(%x: tensor<3xf32> {train.input = "x"}, %w: tensor<3xf32> {train.param = "w"})
    -> (tensor<f32> {train.loss}) {
  %0 = nn.mul %x, %w : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %1 = nn.cast %0 : tensor<3xf32> to tensor<3xi64>
  %2 = nn.cast %1 : tensor<3xi64> to tensor<3xf32>
  %3 = nn.reduce_sum %2 {axes = array<i64: 0>} : tensor<3xf32> -> tensor<f32>
  return %3 : tensor<f32>
}

// -----

// Gradient ops have no gradient rule of their own: a parameter fed into
// nn.softmax_grad on the path to the loss would need a second-order rule.
func.func @gradient_op_on_path(%x: tensor<2x8xf32> {train.input = "x"}, %w: tensor<2x8xf32> {train.param = "w"})
    -> (tensor<f32> {train.loss}) {
  // expected-error @+1 {{'nn.softmax_grad' op has no gradient rule (higher-order gradients are not supported)}}
  %0 = nn.softmax_grad %x, %w : tensor<2x8xf32>
  %1 = nn.reduce_sum %0 {axes = array<i64: 0, 1>} : tensor<2x8xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// An op outside the nn dialect (no GradientOpInterface) on the path to the
// loss.
func.func @foreign_op_on_path(%x: tensor<8xf32> {train.input = "x"}, %w: tensor<8xf32> {train.param = "w"})
    -> (tensor<f32> {train.loss}) {
  // expected-error @+1 {{'arith.addf' op is on the path to the loss but has no gradient rule}}
  %0 = arith.addf %x, %w : tensor<8xf32>
  %1 = nn.reduce_sum %0 {axes = array<i64: 0>} : tensor<8xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// The same foreign op off the path to the loss is fine: only ops that a
// gradient reaches need a rule. (No diagnostic here.)
func.func @foreign_op_off_path(%x: tensor<8xf32> {train.input = "x"}, %w: tensor<8xf32> {train.param = "w"})
    -> (tensor<f32> {train.loss}, tensor<8xf32>) {
  %0 = arith.addf %x, %x : tensor<8xf32>
  %1 = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<8xf32> -> tensor<f32>
  return %1, %0 : tensor<f32>, tensor<8xf32>
}
