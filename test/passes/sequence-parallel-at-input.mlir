// RUN: dsc-opt %s --sequence-parallel | FileCheck %s

// --sequence-parallel alone, on a hand-written block at its precondition:
// the output of tensor-parallel=tp=2 (module dist.tp = 2, the MLP's GEMMs
// column / row parallel between f = dist.tp_copy and g = dist.tp_reduce,
// w1 and w2 typed by their local halves). The layer norm and the residual
// add outside the region then compute on this rank's 2 of the 4 tokens: x
// enters through dist.sp_scatter, f becomes sp_gather {reduce}, g
// sp_scatter {reduce}, and the loss reads the whole tensor through
// sp_gather. The layer norm's scale gets a partial gradient.

// CHECK:       module attributes {dist.sequence_parallel, dist.tp = 2 : i64}
// CHECK-LABEL: func.func @block(
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<4x8xf32> {train.input = "x"}
// CHECK-SAME:    tensor<8xf32> {dist.sp_partial, train.param = "ln.weight"}
// CHECK-NEXT:    %[[XP:.+]] = dist.sp_scatter %[[X]] {dim = 0 : i64, group = #dist.group<tp, 2>} : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT:    %[[LN:.+]] = nn.layer_norm %[[XP]], %{{.*}} : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
// CHECK-NEXT:    %[[F:.+]] = dist.sp_gather %[[LN]] {dim = 0 : i64, group = #dist.group<tp, 2>, reduce} : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    nn.matmul %[[F]], %{{.*}} {dist.tp = "column"
// CHECK-NEXT:    nn.gelu
// CHECK-NEXT:    %[[ROW:.+]] = nn.matmul {{.*}} {dist.tp = "row"
// CHECK-NEXT:    %[[G:.+]] = dist.sp_scatter %[[ROW]] {dim = 0 : i64, group = #dist.group<tp, 2>, reduce} : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT:    %[[R:.+]] = nn.add %[[XP]], %[[G]] : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT:    %[[OUT:.+]] = dist.sp_gather %[[R]] {dim = 0 : i64, group = #dist.group<tp, 2>} : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    nn.reduce_sum %[[OUT]]
// CHECK-NOT:     dist.tp_
module attributes {dist.tp = 2 : i64} {
  func.func @block(%x: tensor<4x8xf32> {train.input = "x"}, %g: tensor<8xf32> {train.param = "ln.weight"},
                   %w1: tensor<8x8xf32> {dist.tp_split = array<i64: 0, 1, 2>, train.param = "w1"},
                   %w2: tensor<8x8xf32> {dist.tp_split = array<i64: 1, 1, 2>, train.param = "w2"}) -> (tensor<f32> {train.loss}) {
    %n = nn.layer_norm %x, %g : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    %f = dist.tp_copy %n {group = #dist.group<tp, 2>} : tensor<4x8xf32>
    %h = nn.matmul %f, %w1 {dist.tp = "column", transpose_rhs} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %a = nn.gelu %h : tensor<4x8xf32>
    %y = nn.matmul %a, %w2 {dist.tp = "row", transpose_rhs} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %gy = dist.tp_reduce %y {group = #dist.group<tp, 2>} : tensor<4x8xf32>
    %r = nn.add %x, %gy : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    %l = nn.reduce_sum %r {axes = array<i64: 0, 1>} : tensor<4x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
