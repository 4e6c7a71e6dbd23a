// RUN: dsc-opt %s --tensor-parallel-lower | FileCheck %s

// --tensor-parallel-lower alone, on a hand-written step at its
// precondition: the output of tensor-parallel=tp=2, autodiff and
// optimizer="type=sgd clip=1.0". w1 (column) and w2 (row) are split, b2 is
// whole. f (dist.tp_copy) disappears; g (dist.tp_reduce, forward after the
// row GEMM and backward on the input's gradient) becomes an all-reduce sum
// on the tp group and its wait; the clipping norm sums the split gradients'
// squares over the group and adds the whole one's once.

// CHECK-LABEL: func.func @mlp(
// CHECK-NOT:     dist.tp_copy
// CHECK:         %[[H:.+]] = nn.matmul %arg0, %arg1 {dist.tp = "column"
// CHECK-NEXT:    %[[Y:.+]] = nn.matmul %[[H]], %arg2 {dist.tp = "row"
// CHECK-NEXT:    %[[AR:.+]] = dist.all_reduce  sum %[[Y]] {group = #dist.group<tp, 2>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[W:.+]] = dist.wait %[[AR]]
// CHECK-NEXT:    nn.add %[[W]], %arg3
// CHECK:         %[[DX:.+]] = nn.matmul %{{.*}}, %arg1 :
// CHECK:         %[[BR:.+]] = dist.all_reduce  sum %[[DX]] {group = #dist.group<tp, 2>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    dist.wait %[[BR]]
// CHECK-NEXT:    %[[SPLIT:.+]] = train.sum_sq %[[DW1:[a-z0-9_]+]], %[[DW2:[a-z0-9_]+]] : tensor<8x8xf32>, tensor<8x8xf32>
// CHECK-NEXT:    %[[SR:.+]] = dist.all_reduce  sum %[[SPLIT]] {group = #dist.group<tp, 2>} : tensor<f32> -> tensor<f32>
// CHECK-NEXT:    %[[SW:.+]] = dist.wait %[[SR]]
// CHECK-NEXT:    %[[WHOLE:.+]] = train.sum_sq %[[DB2:[a-z0-9_]+]] : tensor<8xf32>
// CHECK-NEXT:    %[[SUM:.+]] = nn.add %[[SW]], %[[WHOLE]]
// CHECK-NEXT:    train.clip_grad_norm %[[DW1]], %[[DW2]], %[[DB2]] sum_sq(%[[SUM]]) {max_norm = 1.000000e+00 : f64}
// CHECK-NOT:     dist.tp_
// CHECK:         return
module attributes {dist.tp = 2 : i64} {
  func.func @mlp(%x: tensor<4x8xf32> {train.input = "x"},
                 %w1: tensor<8x8xf32> {dist.tp_split = array<i64: 0, 1, 2>, train.param = "w1"},
                 %w2: tensor<8x8xf32> {dist.tp_split = array<i64: 1, 1, 2>, train.param = "w2"},
                 %b2: tensor<8xf32> {train.param = "b2"}, %s: tensor<i64> {train.step})
      -> (tensor<8x8xf32> {train.updated = "w1"}, tensor<8x8xf32> {train.updated = "w2"}, tensor<8xf32> {train.updated = "b2"},
          tensor<f32> {train.loss}, tensor<f32> {train.grad_norm}, tensor<f32> {train.lr}) {
    %lr = train.lr_schedule "constant" {lr = 1.0e-3 : f64}, %s
    // Forward: f, the column and row GEMMs, g, the whole bias, the loss.
    %fx = dist.tp_copy %x {group = #dist.group<tp, 2>} : tensor<4x8xf32>
    %h = nn.matmul %fx, %w1 {dist.tp = "column", transpose_rhs} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %y = nn.matmul %h, %w2 {dist.tp = "row", transpose_rhs} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %gy = dist.tp_reduce %y {group = #dist.group<tp, 2>} : tensor<4x8xf32>
    %yb = nn.add %gy, %b2 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    %loss = nn.reduce_sum %yb {axes = array<i64: 0, 1>} : tensor<4x8xf32> -> tensor<f32>
    // Backward: g's gradient through f (tp_copy), f's through g (tp_reduce).
    %dy = arith.constant dense<1.0> : tensor<4x8xf32>
    %db2 = nn.reduce_sum %dy {axes = array<i64: 0>} : tensor<4x8xf32> -> tensor<8xf32>
    %fdy = dist.tp_copy %dy {group = #dist.group<tp, 2>} : tensor<4x8xf32>
    %dh = nn.matmul %fdy, %w2 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %dw2 = nn.matmul %fdy, %h {transpose_lhs} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
    %dfx = nn.matmul %dh, %w1 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %dw1 = nn.matmul %dh, %fx {transpose_lhs} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
    %dx = dist.tp_reduce %dfx {group = #dist.group<tp, 2>} : tensor<4x8xf32>
    %c:3, %n = train.clip_grad_norm %dw1, %dw2, %db2 {max_norm = 1.0 : f64} : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32> -> tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>
    %n1 = train.sgd %w1, %c#0, %lr : tensor<8x8xf32>
    %n2 = train.sgd %w2, %c#1, %lr : tensor<8x8xf32>
    %n3 = train.sgd %b2, %c#2, %lr : tensor<8xf32>
    return %n1, %n2, %n3, %loss, %n, %lr : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<f32>, tensor<f32>, tensor<f32>
  }
}
