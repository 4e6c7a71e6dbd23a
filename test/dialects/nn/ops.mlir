// RUN: dsc-opt %s | dsc-opt | FileCheck %s
// RUN: dsc-opt %s --mlir-print-op-generic | dsc-opt | FileCheck %s

// Round trip of every nn op through the custom assembly, and through the
// generic form back to the custom one. Each case states what it proves.

// The seven broadcasting binary ops print both operand types and the result
// type; rank extension ([3] against [2,3]) and size-1 dims ([2,1]) broadcast.
// CHECK-LABEL: func.func @binary(
// CHECK-SAME:    %[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<3xf32>, %[[C:.*]]: tensor<2x1xf32>)
// CHECK-NEXT:    nn.add %[[A]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:    nn.sub %[[B]], %[[A]] : tensor<3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:    nn.mul %[[C]], %[[B]] : tensor<2x1xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:    nn.div %[[A]], %[[A]] : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:    nn.pow %[[A]], %[[C]] : tensor<2x3xf32>, tensor<2x1xf32> -> tensor<2x3xf32>
// CHECK-NEXT:    nn.max %[[A]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:    nn.min %[[A]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:    return
func.func @binary(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %c: tensor<2x1xf32>) {
  %0 = nn.add %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %1 = nn.sub %b, %a : tensor<3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %2 = nn.mul %c, %b : tensor<2x1xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %3 = nn.div %a, %a : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %4 = nn.pow %a, %c : tensor<2x3xf32>, tensor<2x1xf32> -> tensor<2x3xf32>
  %5 = nn.max %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %6 = nn.min %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  return
}

// Binary ops accept integer tensors too (NN_Tensor is AnyType).
// CHECK-LABEL: func.func @binary_int(
// CHECK-SAME:    %[[A:.*]]: tensor<4xi64>, %[[B:.*]]: tensor<i64>)
// CHECK-NEXT:    nn.add %[[A]], %[[B]] : tensor<4xi64>, tensor<i64> -> tensor<4xi64>
func.func @binary_int(%a: tensor<4xi64>, %b: tensor<i64>) {
  %0 = nn.add %a, %b : tensor<4xi64>, tensor<i64> -> tensor<4xi64>
  return
}

// nn.cmp prints its predicate keyword first and yields i1 of the broadcast
// shape; nn.select broadcasts cond, lhs and rhs (a 0-d rhs here); nn.not
// takes i1 tensors.
// CHECK-LABEL: func.func @cmp_select(
// CHECK-SAME:    %[[A:.*]]: tensor<2x3xi32>, %[[B:.*]]: tensor<3xi32>, %[[X:.*]]: tensor<2x3xf32>, %[[Y:.*]]: tensor<f32>)
// CHECK-NEXT:    %[[LT:.*]] = nn.cmp lt, %[[A]], %[[B]] : tensor<2x3xi32>, tensor<3xi32> -> tensor<2x3xi1>
// CHECK-NEXT:    nn.cmp eq, %[[A]], %[[B]] : tensor<2x3xi32>, tensor<3xi32> -> tensor<2x3xi1>
// CHECK-NEXT:    nn.cmp ge, %[[X]], %[[Y]] : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
// CHECK-NEXT:    nn.select %[[LT]], %[[X]], %[[Y]] : tensor<2x3xi1>, tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
// CHECK-NEXT:    nn.not %[[LT]] : tensor<2x3xi1>
func.func @cmp_select(%a: tensor<2x3xi32>, %b: tensor<3xi32>, %x: tensor<2x3xf32>, %y: tensor<f32>) {
  %0 = nn.cmp lt, %a, %b : tensor<2x3xi32>, tensor<3xi32> -> tensor<2x3xi1>
  %1 = nn.cmp eq, %a, %b : tensor<2x3xi32>, tensor<3xi32> -> tensor<2x3xi1>
  %2 = nn.cmp ge, %x, %y : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
  %3 = nn.select %0, %x, %y : tensor<2x3xi1>, tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  %4 = nn.not %0 : tensor<2x3xi1>
  return
}

// A condition of smaller rank broadcasts against the values in nn.select.
// CHECK-LABEL: func.func @select_broadcast_cond(
// CHECK-SAME:    %[[C:.*]]: tensor<3xi1>, %[[X:.*]]: tensor<2x3xf16>)
// CHECK-NEXT:    nn.select %[[C]], %[[X]], %[[X]] : tensor<3xi1>, tensor<2x3xf16>, tensor<2x3xf16> -> tensor<2x3xf16>
func.func @select_broadcast_cond(%c: tensor<3xi1>, %x: tensor<2x3xf16>) {
  %0 = nn.select %c, %x, %x : tensor<3xi1>, tensor<2x3xf16>, tensor<2x3xf16> -> tensor<2x3xf16>
  return
}

// Every unary op prints a single type; neg/abs accept integers; gelu prints
// a non-default approximation and elides the default (an explicit
// `approximation = none` disappears); cast prints `to` and the new type.
// CHECK-LABEL: func.func @unary(
// CHECK-SAME:    %[[X:.*]]: tensor<4xf32>, %[[I:.*]]: tensor<4xi32>)
// CHECK-NEXT:    nn.neg %[[I]] : tensor<4xi32>
// CHECK-NEXT:    nn.abs %[[I]] : tensor<4xi32>
// CHECK-NEXT:    nn.neg %[[X]] : tensor<4xf32>
// CHECK-NEXT:    nn.exp %[[X]] : tensor<4xf32>
// CHECK-NEXT:    nn.log %[[X]] : tensor<4xf32>
// CHECK-NEXT:    nn.sqrt %[[X]] : tensor<4xf32>
// CHECK-NEXT:    nn.rsqrt %[[X]] : tensor<4xf32>
// CHECK-NEXT:    nn.reciprocal %[[X]] : tensor<4xf32>
// CHECK-NEXT:    nn.tanh %[[X]] : tensor<4xf32>
// CHECK-NEXT:    nn.erf %[[X]] : tensor<4xf32>
// CHECK-NEXT:    nn.relu %[[X]] : tensor<4xf32>
// CHECK-NEXT:    nn.sigmoid %[[X]] : tensor<4xf32>
// CHECK-NEXT:    nn.gelu %[[X]] : tensor<4xf32>
// CHECK-NEXT:    nn.gelu %[[X]] approximation = tanh : tensor<4xf32>
// CHECK-NEXT:    nn.gelu %[[X]] : tensor<4xf32>
// CHECK-NEXT:    nn.cast %[[X]] : tensor<4xf32> to tensor<4xbf16>
// CHECK-NEXT:    nn.cast %[[I]] : tensor<4xi32> to tensor<4xf32>
// CHECK-NEXT:    return
func.func @unary(%x: tensor<4xf32>, %i: tensor<4xi32>) {
  %0 = nn.neg %i : tensor<4xi32>
  %1 = nn.abs %i : tensor<4xi32>
  %2 = nn.neg %x : tensor<4xf32>
  %3 = nn.exp %x : tensor<4xf32>
  %4 = nn.log %x : tensor<4xf32>
  %5 = nn.sqrt %x : tensor<4xf32>
  %6 = nn.rsqrt %x : tensor<4xf32>
  %7 = nn.reciprocal %x : tensor<4xf32>
  %8 = nn.tanh %x : tensor<4xf32>
  %9 = nn.erf %x : tensor<4xf32>
  %10 = nn.relu %x : tensor<4xf32>
  %11 = nn.sigmoid %x : tensor<4xf32>
  %12 = nn.gelu %x : tensor<4xf32>
  %13 = nn.gelu %x approximation = tanh : tensor<4xf32>
  %14 = nn.gelu %x approximation = none : tensor<4xf32>
  %15 = nn.cast %x : tensor<4xf32> to tensor<4xbf16>
  %16 = nn.cast %i : tensor<4xi32> to tensor<4xf32>
  return
}

// nn.matmul: plain, transpose_rhs, transpose_lhs, both, and broadcast batch
// dimensions ([2] against [4,1] gives [4,2]).
// CHECK-LABEL: func.func @matmul(
// CHECK-SAME:    %[[A:.*]]: tensor<2x8x16xf32>, %[[W:.*]]: tensor<16x32xf32>, %[[WT:.*]]: tensor<32x16xf32>, %[[AT:.*]]: tensor<16x8xf32>, %[[B:.*]]: tensor<4x1x16x8xf32>)
// CHECK-NEXT:    nn.matmul %[[A]], %[[W]] : tensor<2x8x16xf32>, tensor<16x32xf32> -> tensor<2x8x32xf32>
// CHECK-NEXT:    nn.matmul %[[A]], %[[WT]] {transpose_rhs} : tensor<2x8x16xf32>, tensor<32x16xf32> -> tensor<2x8x32xf32>
// CHECK-NEXT:    nn.matmul %[[AT]], %[[W]] {transpose_lhs} : tensor<16x8xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
// CHECK-NEXT:    nn.matmul %[[AT]], %[[WT]] {transpose_lhs, transpose_rhs} : tensor<16x8xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
// CHECK-NEXT:    nn.matmul %[[A]], %[[B]] : tensor<2x8x16xf32>, tensor<4x1x16x8xf32> -> tensor<4x2x8x8xf32>
func.func @matmul(%a: tensor<2x8x16xf32>, %w: tensor<16x32xf32>, %wt: tensor<32x16xf32>, %at: tensor<16x8xf32>, %b: tensor<4x1x16x8xf32>) {
  %0 = nn.matmul %a, %w : tensor<2x8x16xf32>, tensor<16x32xf32> -> tensor<2x8x32xf32>
  %1 = nn.matmul %a, %wt {transpose_rhs} : tensor<2x8x16xf32>, tensor<32x16xf32> -> tensor<2x8x32xf32>
  %2 = nn.matmul %at, %w {transpose_lhs} : tensor<16x8xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %3 = nn.matmul %at, %wt {transpose_lhs, transpose_rhs} : tensor<16x8xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
  %4 = nn.matmul %a, %b : tensor<2x8x16xf32>, tensor<4x1x16x8xf32> -> tensor<4x2x8x8xf32>
  return
}

// nn.layer_norm spells its result type (the parser must not infer it before properties exist): without bias,
// with bias, with a non-default axis and epsilon, and with defaults spelled
// out explicitly (elided on print).
// CHECK-LABEL: func.func @layer_norm(
// CHECK-SAME:    %[[X:.*]]: tensor<2x3x4xf32>, %[[S:.*]]: tensor<3x4xf32>, %[[V:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[N0:.*]] = nn.layer_norm %[[X]], %[[V]] : tensor<2x3x4xf32>, tensor<4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT:    nn.layer_norm %[[X]], %[[V]], %[[V]] : tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT:    nn.layer_norm %[[X]], %[[S]], %[[S]] {axis = 1 : i64, epsilon = 1.250000e-01 : f64} : tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT:    nn.layer_norm %[[X]], %[[S]] {axis = -2 : i64} : tensor<2x3x4xf32>, tensor<3x4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT:    nn.layer_norm %[[X]], %[[V]] : tensor<2x3x4xf32>, tensor<4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT:    nn.add %[[N0]], %[[X]] : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
func.func @layer_norm(%x: tensor<2x3x4xf32>, %s: tensor<3x4xf32>, %v: tensor<4xf32>) {
  %0 = nn.layer_norm %x, %v : tensor<2x3x4xf32>, tensor<4xf32> -> tensor<2x3x4xf32>
  %1 = nn.layer_norm %x, %v, %v : tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<2x3x4xf32>
  %2 = nn.layer_norm %x, %s, %s {axis = 1 : i64, epsilon = 0.125 : f64} : tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32> -> tensor<2x3x4xf32>
  %3 = nn.layer_norm %x, %s {axis = -2 : i64} : tensor<2x3x4xf32>, tensor<3x4xf32> -> tensor<2x3x4xf32>
  %4 = nn.layer_norm %x, %v {axis = -1 : i64, epsilon = 1.0e-5 : f64} : tensor<2x3x4xf32>, tensor<4xf32> -> tensor<2x3x4xf32>
  // The inferred type is usable by a following op.
  %5 = nn.add %0, %x : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return
}

// softmax / log_softmax default to the last axis (elided) and accept a
// positive or negative explicit axis.
// CHECK-LABEL: func.func @softmax(
// CHECK-SAME:    %[[X:.*]]: tensor<2x5xf32>)
// CHECK-NEXT:    nn.softmax %[[X]] : tensor<2x5xf32>
// CHECK-NEXT:    nn.softmax %[[X]] {axis = 0 : i64} : tensor<2x5xf32>
// CHECK-NEXT:    nn.log_softmax %[[X]] : tensor<2x5xf32>
// CHECK-NEXT:    nn.log_softmax %[[X]] {axis = -2 : i64} : tensor<2x5xf32>
// CHECK-NEXT:    nn.softmax %[[X]] : tensor<2x5xf32>
func.func @softmax(%x: tensor<2x5xf32>) {
  %0 = nn.softmax %x : tensor<2x5xf32>
  %1 = nn.softmax %x {axis = 0 : i64} : tensor<2x5xf32>
  %2 = nn.log_softmax %x : tensor<2x5xf32>
  %3 = nn.log_softmax %x {axis = -2 : i64} : tensor<2x5xf32>
  %4 = nn.softmax %x {axis = -1 : i64} : tensor<2x5xf32>
  return
}

// Losses: default reduction (mean, elided) gives a scalar; reduction none
// gives the per-sample shape [N, D1..]; sum; an explicit mean is elided;
// ignore_index prints; nll_loss with spatial dims and i32 labels.
// CHECK-LABEL: func.func @losses(
// CHECK-SAME:    %[[X:.*]]: tensor<4x10xf32>, %[[L:.*]]: tensor<4xi64>, %[[Y:.*]]: tensor<4x10x7xf32>, %[[M:.*]]: tensor<4x7xi32>)
// CHECK-NEXT:    nn.cross_entropy %[[X]], %[[L]] : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
// CHECK-NEXT:    nn.cross_entropy %[[X]], %[[L]] {ignore_index = -100 : i64, reduction = #nn<reduction none>} : tensor<4x10xf32>, tensor<4xi64> -> tensor<4xf32>
// CHECK-NEXT:    nn.cross_entropy %[[X]], %[[L]] {reduction = #nn<reduction sum>} : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
// CHECK-NEXT:    nn.cross_entropy %[[X]], %[[L]] {ignore_index = 0 : i64} : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
// CHECK-NEXT:    nn.nll_loss %[[Y]], %[[M]] {reduction = #nn<reduction none>} : tensor<4x10x7xf32>, tensor<4x7xi32> -> tensor<4x7xf32>
// CHECK-NEXT:    nn.nll_loss %[[Y]], %[[M]] {ignore_index = 3 : i64} : tensor<4x10x7xf32>, tensor<4x7xi32> -> tensor<f32>
// CHECK-NEXT:    nn.nll_loss %[[X]], %[[L]] {reduction = #nn<reduction sum>} : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
func.func @losses(%x: tensor<4x10xf32>, %l: tensor<4xi64>, %y: tensor<4x10x7xf32>, %m: tensor<4x7xi32>) {
  %0 = nn.cross_entropy %x, %l : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  %1 = nn.cross_entropy %x, %l {ignore_index = -100 : i64, reduction = #nn<reduction none>} : tensor<4x10xf32>, tensor<4xi64> -> tensor<4xf32>
  %2 = nn.cross_entropy %x, %l {reduction = #nn<reduction sum>} : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  %3 = nn.cross_entropy %x, %l {reduction = #nn<reduction mean>, ignore_index = 0 : i64} : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  %4 = nn.nll_loss %y, %m {reduction = #nn<reduction none>} : tensor<4x10x7xf32>, tensor<4x7xi32> -> tensor<4x7xf32>
  %5 = nn.nll_loss %y, %m {ignore_index = 3 : i64} : tensor<4x10x7xf32>, tensor<4x7xi32> -> tensor<f32>
  %6 = nn.nll_loss %x, %l {reduction = #nn<reduction sum>} : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  return
}

// nn.gather: default axis 0 (an embedding lookup with 2-d indices), an
// inner axis, and a negative axis; data may be any element type.
// CHECK-LABEL: func.func @gather(
// CHECK-SAME:    %[[E:.*]]: tensor<100x16xf32>, %[[I:.*]]: tensor<2x3xi64>, %[[D:.*]]: tensor<4x5x6xf16>, %[[J:.*]]: tensor<2xi32>)
// CHECK-NEXT:    nn.gather %[[E]], %[[I]] : tensor<100x16xf32>, tensor<2x3xi64> -> tensor<2x3x16xf32>
// CHECK-NEXT:    nn.gather %[[D]], %[[J]] {axis = 1 : i64} : tensor<4x5x6xf16>, tensor<2xi32> -> tensor<4x2x6xf16>
// CHECK-NEXT:    nn.gather %[[D]], %[[J]] {axis = -1 : i64} : tensor<4x5x6xf16>, tensor<2xi32> -> tensor<4x5x2xf16>
// CHECK-NEXT:    nn.gather %[[J]], %[[J]] : tensor<2xi32>, tensor<2xi32> -> tensor<2xi32>
func.func @gather(%e: tensor<100x16xf32>, %i: tensor<2x3xi64>, %d: tensor<4x5x6xf16>, %j: tensor<2xi32>) {
  %0 = nn.gather %e, %i : tensor<100x16xf32>, tensor<2x3xi64> -> tensor<2x3x16xf32>
  %1 = nn.gather %d, %j {axis = 1 : i64} : tensor<4x5x6xf16>, tensor<2xi32> -> tensor<4x2x6xf16>
  %2 = nn.gather %d, %j {axis = -1 : i64} : tensor<4x5x6xf16>, tensor<2xi32> -> tensor<4x5x2xf16>
  %3 = nn.gather %j, %j {axis = 0 : i64} : tensor<2xi32>, tensor<2xi32> -> tensor<2xi32>
  return
}

// Reductions: one axis, several axes with keepdims, a negative axis with
// keepdims, all axes to a scalar, an integer input, and no axes (identity).
// CHECK-LABEL: func.func @reduce(
// CHECK-SAME:    %[[X:.*]]: tensor<2x3x4xf32>, %[[I:.*]]: tensor<2x3xi32>)
// CHECK-NEXT:    nn.reduce_sum %[[X]] {axes = array<i64: 1>} : tensor<2x3x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT:    nn.reduce_sum %[[X]] {axes = array<i64: 0, 2>, keepdims} : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
// CHECK-NEXT:    nn.reduce_mean %[[X]] {axes = array<i64: -1>, keepdims} : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
// CHECK-NEXT:    nn.reduce_mean %[[X]] {axes = array<i64: 0, 1, 2>} : tensor<2x3x4xf32> -> tensor<f32>
// CHECK-NEXT:    nn.reduce_max %[[I]] {axes = array<i64: 0>} : tensor<2x3xi32> -> tensor<3xi32>
// CHECK-NEXT:    nn.reduce_max %[[X]] {axes = array<i64>} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT:    nn.reduce_max %[[X]] {axes = array<i64: 2, 0>, keepdims} : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
func.func @reduce(%x: tensor<2x3x4xf32>, %i: tensor<2x3xi32>) {
  %0 = nn.reduce_sum %x {axes = array<i64: 1>} : tensor<2x3x4xf32> -> tensor<2x4xf32>
  %1 = nn.reduce_sum %x {axes = array<i64: 0, 2>, keepdims} : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
  %2 = nn.reduce_mean %x {axes = array<i64: -1>, keepdims} : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
  %3 = nn.reduce_mean %x {axes = array<i64: 0, 1, 2>} : tensor<2x3x4xf32> -> tensor<f32>
  %4 = nn.reduce_max %i {axes = array<i64: 0>} : tensor<2x3xi32> -> tensor<3xi32>
  %5 = nn.reduce_max %x {axes = array<i64>} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %6 = nn.reduce_max %x {axes = array<i64: 2, 0>, keepdims} : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
  return
}

// Layout ops: reshape (same element count), transpose, strided slices
// (ceil((limit - start) / stride) per dim, empty slices allowed), concat of
// one, two and three inputs (negative axis), and broadcast to a larger rank.
// CHECK-LABEL: func.func @layout(
// CHECK-SAME:    %[[X:.*]]: tensor<2x3x4xf32>, %[[Y:.*]]: tensor<2x5x4xf32>, %[[B:.*]]: tensor<3x1xf32>)
// CHECK-NEXT:    nn.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT:    nn.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<24xf32>
// CHECK-NEXT:    nn.transpose %[[X]] {permutation = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
// CHECK-NEXT:    nn.slice %[[X]] {limit = array<i64: 2, 3, 4>, start = array<i64: 0, 1, 0>, stride = array<i64: 1, 1, 2>} : tensor<2x3x4xf32> -> tensor<2x2x2xf32>
// CHECK-NEXT:    nn.slice %[[X]] {limit = array<i64: 2, 3, 4>, start = array<i64: 1, 0, 1>, stride = array<i64: 1, 2, 3>} : tensor<2x3x4xf32> -> tensor<1x2x1xf32>
// CHECK-NEXT:    nn.slice %[[X]] {limit = array<i64: 2, 3, 4>, start = array<i64: 0, 3, 0>, stride = array<i64: 1, 1, 1>} : tensor<2x3x4xf32> -> tensor<2x0x4xf32>
// CHECK-NEXT:    nn.concat %[[X]], %[[Y]] {axis = 1 : i64} : tensor<2x3x4xf32>, tensor<2x5x4xf32> -> tensor<2x8x4xf32>
// CHECK-NEXT:    nn.concat %[[X]], %[[X]], %[[X]] {axis = -1 : i64} : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x12xf32>
// CHECK-NEXT:    nn.concat %[[X]] {axis = 0 : i64} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT:    nn.broadcast %[[B]] : tensor<3x1xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT:    nn.broadcast %[[B]] : tensor<3x1xf32> -> tensor<3x1xf32>
func.func @layout(%x: tensor<2x3x4xf32>, %y: tensor<2x5x4xf32>, %b: tensor<3x1xf32>) {
  %0 = nn.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = nn.reshape %x : tensor<2x3x4xf32> -> tensor<24xf32>
  %2 = nn.transpose %x {permutation = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %3 = nn.slice %x {start = array<i64: 0, 1, 0>, limit = array<i64: 2, 3, 4>, stride = array<i64: 1, 1, 2>} : tensor<2x3x4xf32> -> tensor<2x2x2xf32>
  %4 = nn.slice %x {start = array<i64: 1, 0, 1>, limit = array<i64: 2, 3, 4>, stride = array<i64: 1, 2, 3>} : tensor<2x3x4xf32> -> tensor<1x2x1xf32>
  %5 = nn.slice %x {start = array<i64: 0, 3, 0>, limit = array<i64: 2, 3, 4>, stride = array<i64: 1, 1, 1>} : tensor<2x3x4xf32> -> tensor<2x0x4xf32>
  %6 = nn.concat %x, %y {axis = 1 : i64} : tensor<2x3x4xf32>, tensor<2x5x4xf32> -> tensor<2x8x4xf32>
  %7 = nn.concat %x, %x, %x {axis = -1 : i64} : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x12xf32>
  %8 = nn.concat %x {axis = 0 : i64} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %9 = nn.broadcast %b : tensor<3x1xf32> -> tensor<2x3x4xf32>
  %10 = nn.broadcast %b : tensor<3x1xf32> -> tensor<3x1xf32>
  return
}

// nn.dropout returns the output and an i1 mask of the input's shape; ratio 0
// is allowed (the interval is [0, 1)) and rng_stream is kept verbatim.
// CHECK-LABEL: func.func @dropout(
// CHECK-SAME:    %[[X:.*]]: tensor<8x16xf32>)
// CHECK-NEXT:    %{{.*}}, %{{.*}} = nn.dropout %[[X]] {ratio = 1.000000e-01 : f64, rng_stream = 0 : i64} : tensor<8x16xf32> -> tensor<8x16xf32>, tensor<8x16xi1>
// CHECK-NEXT:    %{{.*}}, %{{.*}} = nn.dropout %[[X]] {ratio = 0.000000e+00 : f64, rng_stream = 7 : i64} : tensor<8x16xf32> -> tensor<8x16xf32>, tensor<8x16xi1>
// CHECK-NEXT:    %{{.*}}, %{{.*}} = nn.dropout %[[X]] {ratio = 5.000000e-01 : f64, rng_stream = 8 : i64} : tensor<8x16xf32> -> tensor<8x16xf32>, tensor<8x16xi1>
func.func @dropout(%x: tensor<8x16xf32>) {
  %0, %1 = nn.dropout %x {ratio = 0.1 : f64, rng_stream = 0 : i64} : tensor<8x16xf32> -> tensor<8x16xf32>, tensor<8x16xi1>
  %2, %3 = nn.dropout %x {ratio = 0.0 : f64, rng_stream = 7 : i64} : tensor<8x16xf32> -> tensor<8x16xf32>, tensor<8x16xi1>
  %4, %5 = nn.dropout %x {rng_stream = 8 : i64, ratio = 0.5 : f64} : tensor<8x16xf32> -> tensor<8x16xf32>, tensor<8x16xi1>
  return
}

// nn.attention infers [..., T, F] and the f32 row statistics [..., T, 2]
// from query [..., T, E], key [..., S, E] and value [..., S, F] (T = 8 and
// S = 6 differ); the bias broadcasts to the scores. nn.attention_grad
// takes the forward's operands, stats and attributes and returns the
// three operands' types. Defaults (ratio 0, rng_stream 0) are not printed.
// CHECK-LABEL: func.func @attention(
// CHECK-SAME:    %[[Q:.*]]: tensor<2x4x8x16xbf16>, %[[K:.*]]: tensor<2x4x6x16xbf16>, %[[V:.*]]: tensor<2x4x6x32xbf16>, %[[B:.*]]: tensor<2x1x1x6xf32>, %[[DY:.*]]: tensor<2x4x8x32xbf16>)
// CHECK-NEXT:    nn.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 2.500000e-01 : f64} : tensor<2x4x8x16xbf16>, tensor<2x4x6x16xbf16>, tensor<2x4x6x32xbf16> -> tensor<2x4x8x32xbf16>, tensor<2x4x8x2xf32>
// CHECK-NEXT:    %{{.*}}, %[[S:.*]] = nn.attention %[[Q]], %[[K]], %[[V]], %[[B]] {ratio = 1.000000e-01 : f64, rng_stream = 3 : i64, scale = 4.000000e+00 : f64, scale_divides} : tensor<2x4x8x16xbf16>, tensor<2x4x6x16xbf16>, tensor<2x4x6x32xbf16>, tensor<2x1x1x6xf32> -> tensor<2x4x8x32xbf16>, tensor<2x4x8x2xf32>
// CHECK-NEXT:    nn.attention_grad %[[DY]], %[[Q]], %[[K]], %[[V]], %[[S]], %[[B]] {ratio = 1.000000e-01 : f64, rng_stream = 3 : i64, scale = 4.000000e+00 : f64, scale_divides} : tensor<2x4x8x32xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x6x16xbf16>, tensor<2x4x6x32xbf16>, tensor<2x4x8x2xf32>, tensor<2x1x1x6xf32>
func.func @attention(%q: tensor<2x4x8x16xbf16>, %k: tensor<2x4x6x16xbf16>, %v: tensor<2x4x6x32xbf16>, %b: tensor<2x1x1x6xf32>, %dy: tensor<2x4x8x32xbf16>) {
  %0, %1 = nn.attention %q, %k, %v {scale = 0.25 : f64, causal, ratio = 0.0 : f64} : tensor<2x4x8x16xbf16>, tensor<2x4x6x16xbf16>, tensor<2x4x6x32xbf16> -> tensor<2x4x8x32xbf16>, tensor<2x4x8x2xf32>
  %2, %3 = nn.attention %q, %k, %v, %b {scale = 4.0 : f64, scale_divides, ratio = 0.1 : f64, rng_stream = 3 : i64} : tensor<2x4x8x16xbf16>, tensor<2x4x6x16xbf16>, tensor<2x4x6x32xbf16>, tensor<2x1x1x6xf32> -> tensor<2x4x8x32xbf16>, tensor<2x4x8x2xf32>
  %4:3 = nn.attention_grad %dy, %q, %k, %v, %3, %b {scale = 4.0 : f64, scale_divides, ratio = 0.1 : f64, rng_stream = 3 : i64} : tensor<2x4x8x32xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x6x16xbf16>, tensor<2x4x6x32xbf16>, tensor<2x4x8x2xf32>, tensor<2x1x1x6xf32>
  return
}

// With bshd the operands keep the heads after the sequence: query
// [B, T, H, E] (T = 8, H = 4), key and value [B, S, H, *] (S = 6); the
// result is [B, T, H, F] and the stats stay head-major [B, H, T, 2], as the
// bias's scores [B, H, T, S].
// CHECK-LABEL: func.func @attention_bshd(
// CHECK-NEXT:    %{{.*}}, %[[S:.*]] = nn.attention %arg0, %arg1, %arg2, %arg3 {bshd, causal, scale = 2.500000e-01 : f64} : tensor<2x8x4x16xf32>, tensor<2x6x4x16xf32>, tensor<2x6x4x32xf32>, tensor<2x1x1x6xf32> -> tensor<2x8x4x32xf32>, tensor<2x4x8x2xf32>
// CHECK-NEXT:    nn.attention_grad %arg4, %arg0, %arg1, %arg2, %[[S]], %arg3 {bshd, causal, scale = 2.500000e-01 : f64} : tensor<2x8x4x32xf32>, tensor<2x8x4x16xf32>, tensor<2x6x4x16xf32>, tensor<2x6x4x32xf32>, tensor<2x4x8x2xf32>, tensor<2x1x1x6xf32>
func.func @attention_bshd(%q: tensor<2x8x4x16xf32>, %k: tensor<2x6x4x16xf32>, %v: tensor<2x6x4x32xf32>, %b: tensor<2x1x1x6xf32>, %dy: tensor<2x8x4x32xf32>) {
  %0, %1 = nn.attention %q, %k, %v, %b {scale = 0.25 : f64, causal, bshd} : tensor<2x8x4x16xf32>, tensor<2x6x4x16xf32>, tensor<2x6x4x32xf32>, tensor<2x1x1x6xf32> -> tensor<2x8x4x32xf32>, tensor<2x4x8x2xf32>
  %2:3 = nn.attention_grad %dy, %q, %k, %v, %1, %b {scale = 0.25 : f64, causal, bshd} : tensor<2x8x4x32xf32>, tensor<2x8x4x16xf32>, tensor<2x6x4x16xf32>, tensor<2x6x4x32xf32>, tensor<2x4x8x2xf32>, tensor<2x1x1x6xf32>
  return
}

// The gradient ops autodiff emits.
// CHECK-LABEL: func.func @gradient_ops(
// CHECK:         nn.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-03 : f64} : tensor<2x8xf32>, tensor<8xf32>
// CHECK:         nn.softmax_grad %{{.*}}, %{{.*}} : tensor<2x8xf32>
// CHECK:         nn.log_softmax_grad %{{.*}}, %{{.*}} {axis = 0 : i64} : tensor<2x8xf32>
// CHECK:         nn.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} {ignore_index = -100 : i64} : tensor<2x8xf32>, tensor<2xi64>, tensor<f32>
// CHECK:         nn.nll_loss_grad %{{.*}}, %{{.*}}, %{{.*}} {reduction = #nn<reduction sum>} : tensor<2x8xf32>, tensor<2xi64>, tensor<f32>
// CHECK:         nn.gelu_grad %{{.*}}, %{{.*}} approximation = tanh : tensor<2x8xf32>
// CHECK:         nn.gather_grad %{{.*}}, %{{.*}} : tensor<2x3x8xf32>, tensor<2x3xi64> -> tensor<10x8xf32>
// CHECK:         nn.slice_grad %{{.*}} {limit = array<i64: 2, 8>, start = array<i64: 0, 4>, stride = array<i64: 1, 2>} : tensor<2x2xf32> -> tensor<2x8xf32>
// CHECK:         nn.dropout_grad %{{.*}}, %{{.*}} {ratio = 1.000000e-01 : f64} : tensor<2x8xf32>, tensor<2x8xi1>
func.func @gradient_ops(%dy: tensor<2x8xf32>, %x: tensor<2x8xf32>, %g: tensor<8xf32>,
                        %l: tensor<2xi64>, %s: tensor<f32>, %e: tensor<2x3x8xf32>,
                        %i: tensor<2x3xi64>, %d: tensor<2x2xf32>, %m: tensor<2x8xi1>) {
  %0:3 = nn.layer_norm_grad %dy, %x, %g {epsilon = 1.0e-3 : f64} : tensor<2x8xf32>, tensor<8xf32>
  %1 = nn.softmax_grad %x, %dy : tensor<2x8xf32>
  %2 = nn.log_softmax_grad %x, %dy {axis = 0 : i64} : tensor<2x8xf32>
  %3 = nn.cross_entropy_grad %x, %l, %s {ignore_index = -100 : i64} : tensor<2x8xf32>, tensor<2xi64>, tensor<f32>
  %4 = nn.nll_loss_grad %x, %l, %s {reduction = #nn<reduction sum>} : tensor<2x8xf32>, tensor<2xi64>, tensor<f32>
  %5 = nn.gelu_grad %x, %dy approximation = tanh : tensor<2x8xf32>
  %6 = nn.gather_grad %e, %i : tensor<2x3x8xf32>, tensor<2x3xi64> -> tensor<10x8xf32>
  %7 = nn.slice_grad %d {start = array<i64: 0, 4>, limit = array<i64: 2, 8>, stride = array<i64: 1, 2>} : tensor<2x2xf32> -> tensor<2x8xf32>
  %8 = nn.dropout_grad %dy, %m {ratio = 0.1 : f64} : tensor<2x8xf32>, tensor<2x8xi1>
  return
}

// Convolution and pooling: 1-D conv with groups, its two gradients (the
// input gradient with a larger input, as ConvTranspose's output_padding
// makes), 2-D pooling with ceil mode and dilation, avg_pool's flags.
// CHECK-LABEL: func.func @conv_pool
// CHECK:         nn.conv %{{.*}}, %{{.*}} {dilations = array<i64: 2>, groups = 2 : i64, pads = array<i64: 2, 1>, strides = array<i64: 2>} : tensor<2x4x9xf32>, tensor<6x2x3xf32> -> tensor<2x6x4xf32>
// CHECK:         nn.conv_input_grad %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<1x4x4x4xf32>, tensor<4x3x3x3xf32> -> tensor<1x3x8x8xf32>
// CHECK:         nn.conv_weight_grad %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<1x3x8x8xf32>, tensor<1x4x4x4xf32> -> tensor<4x3x3x3xf32>
// CHECK:         nn.max_pool %{{.*}} {ceil_mode, dilations = array<i64: 1, 2>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<1x3x7x6xf32> -> tensor<1x3x4x3xf32>
// CHECK:         nn.max_pool_grad %{{.*}}, %{{.*}} {ceil_mode, dilations = array<i64: 1, 2>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<1x3x7x6xf32>, tensor<1x3x4x3xf32>
// CHECK:         nn.avg_pool %{{.*}} {ceil_mode, count_include_pad, kernel_shape = array<i64: 3>, pads = array<i64: 1, 1>, strides = array<i64: 2>} : tensor<1x2x6xf32> -> tensor<1x2x4xf32>
// CHECK:         nn.avg_pool_grad %{{.*}} {kernel_shape = array<i64: 3>, pads = array<i64: 1, 1>, strides = array<i64: 2>} : tensor<1x2x3xf32> -> tensor<1x2x6xf32>
func.func @conv_pool(%x: tensor<2x4x9xf32>, %w: tensor<6x2x3xf32>, %g: tensor<1x4x4x4xf32>,
                     %w2: tensor<4x3x3x3xf32>, %i: tensor<1x3x8x8xf32>, %p: tensor<1x3x7x6xf32>,
                     %pg: tensor<1x3x4x3xf32>, %a: tensor<1x2x6xf32>, %ag: tensor<1x2x3xf32>) {
  %0 = nn.conv %x, %w {strides = array<i64: 2>, pads = array<i64: 2, 1>, dilations = array<i64: 2>, groups = 2 : i64} : tensor<2x4x9xf32>, tensor<6x2x3xf32> -> tensor<2x6x4xf32>
  %1 = nn.conv_input_grad %g, %w2 {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<1x4x4x4xf32>, tensor<4x3x3x3xf32> -> tensor<1x3x8x8xf32>
  %2 = nn.conv_weight_grad %i, %g {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<1x4x4x4xf32> -> tensor<4x3x3x3xf32>
  %3 = nn.max_pool %p {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 2>, ceil_mode} : tensor<1x3x7x6xf32> -> tensor<1x3x4x3xf32>
  %4 = nn.max_pool_grad %p, %pg {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 2>, ceil_mode} : tensor<1x3x7x6xf32>, tensor<1x3x4x3xf32>
  %5 = nn.avg_pool %a {kernel_shape = array<i64: 3>, strides = array<i64: 2>, pads = array<i64: 1, 1>, ceil_mode, count_include_pad} : tensor<1x2x6xf32> -> tensor<1x2x4xf32>
  %6 = nn.avg_pool_grad %ag {kernel_shape = array<i64: 3>, strides = array<i64: 2>, pads = array<i64: 1, 1>} : tensor<1x2x3xf32> -> tensor<1x2x6xf32>
  return
}

// argmax: int64 indices, the axis dropped or kept as 1.
// CHECK-LABEL: func.func @argmax
// CHECK:         nn.argmax %{{.*}} {axis = 1 : i64} : tensor<2x3xf32> -> tensor<2xi64>
// CHECK:         nn.argmax %{{.*}} {axis = 0 : i64, keepdims} : tensor<2x3xf32> -> tensor<1x3xi64>
func.func @argmax(%x: tensor<2x3xf32>) {
  %0 = nn.argmax %x {axis = 1 : i64} : tensor<2x3xf32> -> tensor<2xi64>
  %1 = nn.argmax %x {axis = 0 : i64, keepdims} : tensor<2x3xf32> -> tensor<1x3xi64>
  return
}
