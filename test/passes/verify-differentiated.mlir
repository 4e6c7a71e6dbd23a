// RUN: split-file %s %t
// RUN: dsc-opt %t/bad.mlir --split-input-file --verify-differentiated -verify-diagnostics
// RUN: dsc-opt %t/good.mlir --verify-differentiated -o /dev/null

//--- good.mlir
// One gradient per parameter, of its type: nothing to say.
func.func @good(%w: tensor<4xf32> {train.param = "w"}, %b: tensor<2xf32> {train.param = "b"}) -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "w"}, tensor<2xf32> {train.grad = "b"}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l, %w, %b : tensor<f32>, tensor<4xf32>, tensor<2xf32>
}

//--- bad.mlir
// expected-error @below {{verify-differentiated: parameter 'b' (argument 1) has no gradient}}
func.func @missing(%w: tensor<4xf32> {train.param = "w"}, %b: tensor<2xf32> {train.param = "b"}) -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "w"}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error @below {{verify-differentiated: the gradient of 'w' has type 'tensor<4xbf16>', its parameter 'tensor<4xf32>'}}
func.func @type(%w: tensor<4xf32> {train.param = "w"}, %g: tensor<4xbf16>) -> (tensor<f32> {train.loss}, tensor<4xbf16> {train.grad = "w"}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l, %g : tensor<f32>, tensor<4xbf16>
}

// -----

// expected-error @below {{verify-differentiated: result 2 is the gradient of 'x', which is not a train.param argument}}
func.func @stranger(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "w"}, tensor<4xf32> {train.grad = "x"}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l, %w, %w : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// expected-error @below {{verify-differentiated: two gradients of 'w'}}
func.func @twice(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "w"}, tensor<4xf32> {train.grad = "w"}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l, %w, %w : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}
