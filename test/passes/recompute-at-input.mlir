// RUN: dsc-opt %s --recompute=mode=layers | FileCheck %s

// --recompute alone, on a hand-written step at its precondition: the output
// of autodiff (forward ops, then the backward pass returning train.grad
// results). Three layers: the w1 GEMM, GELU + the w2 GEMM, GELU + the w3
// GEMM + loss (the last layer, never recomputed). Layer inputs (%h1, the
// GELU output) are kept; the GEMM outputs the GELU gradients read are
// recomputed right before their first backward use, so the forward
// originals die after the forward pass.

// CHECK:       module attributes {train.recompute = {flops = 1.280000e+02 : f64, mode = "layers", ops = 2 : i64}
// CHECK-LABEL: func.func @mlp(
// CHECK:         %[[H1:.*]] = nn.gelu
// CHECK:         nn.cross_entropy_grad
// CHECK-NOT:     nn.gelu_grad
// CHECK:         %[[M2:.*]] = nn.matmul %[[H1]], %arg3 {train.recomputed = 1 : i64}
// CHECK-NEXT:    nn.gelu_grad %[[M2]],
// CHECK-NOT:     nn.gelu_grad
// CHECK:         %[[M1:.*]] = nn.matmul %arg0, %arg2 {train.recomputed = 0 : i64}
// CHECK-NEXT:    nn.gelu_grad %[[M1]],
func.func @mlp(%x: tensor<2x4xf32> {train.input = "x"}, %y: tensor<2xi64> {train.input = "y"},
               %w1: tensor<4x4xf32> {train.param = "w1"}, %w2: tensor<4x4xf32> {train.param = "w2"},
               %w3: tensor<4x3xf32> {train.param = "w3"})
    -> (tensor<f32> {train.loss}, tensor<4x4xf32> {train.grad = "w1"}, tensor<4x4xf32> {train.grad = "w2"},
        tensor<4x3xf32> {train.grad = "w3"}) {
  %m1 = nn.matmul %x, %w1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %h1 = nn.gelu %m1 : tensor<2x4xf32>
  %m2 = nn.matmul %h1, %w2 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %h2 = nn.gelu %m2 : tensor<2x4xf32>
  %z = nn.matmul %h2, %w3 : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %loss = nn.cross_entropy %z, %y : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %dz = nn.cross_entropy_grad %z, %y, %one : tensor<2x3xf32>, tensor<2xi64>, tensor<f32>
  %dh2 = nn.matmul %dz, %w3 {transpose_rhs} : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<2x4xf32>
  %dw3 = nn.matmul %h2, %dz {transpose_lhs} : tensor<2x4xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
  %dm2 = nn.gelu_grad %m2, %dh2 : tensor<2x4xf32>
  %dh1 = nn.matmul %dm2, %w2 {transpose_rhs} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %dw2 = nn.matmul %h1, %dm2 {transpose_lhs} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  %dm1 = nn.gelu_grad %m1, %dh1 : tensor<2x4xf32>
  %dw1 = nn.matmul %x, %dm1 {transpose_lhs} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  return %loss, %dw1, %dw2, %dw3 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x3xf32>
}
