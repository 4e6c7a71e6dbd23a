// RUN: dsc-opt %s --nn-fusion | FileCheck %s

// A linear layer as exported: the weight's transpose folds into the matmul.
// CHECK-LABEL: func.func @linear(
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x16xf32>, %[[W:.*]]: tensor<32x16xf32>
// CHECK-NEXT:    %[[Y:.*]] = nn.matmul %[[X]], %[[W]] {transpose_rhs} : tensor<2x8x16xf32>, tensor<32x16xf32> -> tensor<2x8x32xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @linear(%x: tensor<2x8x16xf32>, %w: tensor<32x16xf32>) -> tensor<2x8x32xf32> {
  %t = nn.transpose %w {permutation = array<i64: 1, 0>} : tensor<32x16xf32> -> tensor<16x32xf32>
  %y = nn.matmul %x, %t : tensor<2x8x16xf32>, tensor<16x32xf32> -> tensor<2x8x32xf32>
  return %y : tensor<2x8x32xf32>
}

// Both operands, batched; an operand already transposed flips back.
// CHECK-LABEL: func.func @both(
// CHECK-SAME:    %[[A:.*]]: tensor<2x4x8xf32>, %[[B:.*]]: tensor<2x4x8xf32>
// CHECK-NEXT:    nn.matmul %[[A]], %[[B]] {transpose_lhs} : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x8x8xf32>
func.func @both(%a: tensor<2x4x8xf32>, %b: tensor<2x4x8xf32>) -> tensor<2x8x8xf32> {
  %at = nn.transpose %a {permutation = array<i64: 0, 2, 1>} : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
  %bt = nn.transpose %b {permutation = array<i64: 0, 2, 1>} : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
  %y = nn.matmul %at, %bt {transpose_rhs} : tensor<2x8x4xf32>, tensor<2x8x4xf32> -> tensor<2x8x8xf32>
  return %y : tensor<2x8x8xf32>
}

// A transpose that moves batch dims is not a matmul transpose: kept.
// CHECK-LABEL: func.func @not_last_two(
// CHECK:         nn.transpose
// CHECK:         nn.matmul %{{.*}}, %{{.*}} : tensor<4x2x8xf32>, tensor<8x3xf32>
func.func @not_last_two(%a: tensor<2x4x8xf32>, %w: tensor<8x3xf32>) -> tensor<4x2x3xf32> {
  %at = nn.transpose %a {permutation = array<i64: 1, 0, 2>} : tensor<2x4x8xf32> -> tensor<4x2x8xf32>
  %y = nn.matmul %at, %w : tensor<4x2x8xf32>, tensor<8x3xf32> -> tensor<4x2x3xf32>
  return %y : tensor<4x2x3xf32>
}

// torch's exact GELU as exported: x * (1 + erf(x / sqrt 2)) * 0.5.
// CHECK-LABEL: func.func @gelu_erf(
// CHECK-SAME:    %[[X:.*]]: tensor<4x8xf32>
// CHECK-NEXT:    %[[G:.*]] = nn.gelu %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    return %[[G]]
func.func @gelu_erf(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %sqrt2 = arith.constant dense<1.41421354> : tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %half = arith.constant dense<0.5> : tensor<f32>
  %0 = nn.div %x, %sqrt2 : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %1 = nn.erf %0 : tensor<4x8xf32>
  %2 = nn.add %1, %one : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %3 = nn.mul %x, %2 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %4 = nn.mul %3, %half : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  return %4 : tensor<4x8xf32>
}

// The tanh approximation, with x^3 as x * (x * x) and constants first.
// CHECK-LABEL: func.func @gelu_tanh(
// CHECK-NEXT:    %[[G:.*]] = nn.gelu %{{.*}} approximation = tanh : tensor<4x8xf32>
// CHECK-NEXT:    return %[[G]]
func.func @gelu_tanh(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = arith.constant dense<4.471500e-02> : tensor<f32>
  %k = arith.constant dense<0.797884583> : tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %half = arith.constant dense<0.5> : tensor<f32>
  %sq = nn.mul %x, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %cube = nn.mul %x, %sq : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %0 = nn.mul %c, %cube : tensor<f32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %1 = nn.add %x, %0 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %2 = nn.mul %k, %1 : tensor<f32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %3 = nn.tanh %2 : tensor<4x8xf32>
  %4 = nn.add %one, %3 : tensor<f32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %5 = nn.mul %x, %4 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %6 = nn.mul %5, %half : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  return %6 : tensor<4x8xf32>
}

// A near miss (0.4 instead of 0.5) stays unfused.
// CHECK-LABEL: func.func @not_gelu(
// CHECK:         nn.erf
// CHECK-NOT:     nn.gelu
func.func @not_gelu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %sqrt2 = arith.constant dense<1.41421354> : tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %c = arith.constant dense<0.4> : tensor<f32>
  %0 = nn.div %x, %sqrt2 : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %1 = nn.erf %0 : tensor<4x8xf32>
  %2 = nn.add %1, %one : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %3 = nn.mul %x, %2 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %4 = nn.mul %3, %c : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  return %4 : tensor<4x8xf32>
}
