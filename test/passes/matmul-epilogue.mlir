// RUN: dsc-opt %s --matmul-epilogue | FileCheck %s

// matmul-epilogue: an nn.add of a matmul's only use becomes the matmul's
// epilogue: a vector of its N columns is the bias, a value of its type the
// addend; a bias folded first meets its residual next.

// A transformer block's projection: bias, then the residual (either operand
// order of each add).
// CHECK-LABEL: func.func @block(
// CHECK-SAME:    %[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<8x8xf32>, %[[B:.*]]: tensor<8xf32>, %[[R:.*]]: tensor<2x4x8xf32>)
// CHECK-NEXT:    %[[Y:.*]] = nn.matmul_epilogue %[[X]], %[[W]] bias %[[B]] addend %[[R]] {transpose_rhs} : tensor<2x4x8xf32>, tensor<8x8xf32> bias tensor<8xf32> addend tensor<2x4x8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT:    return %[[Y]]
func.func @block(%x: tensor<2x4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>, %r: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %m = nn.matmul %x, %w {transpose_rhs} : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %y = nn.add %b, %m : tensor<8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %z = nn.add %r, %y : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  return %z : tensor<2x4x8xf32>
}

// A bias alone (the layer's output goes on to GELU), and in bf16.
// CHECK-LABEL: func.func @bias_bf16(
// CHECK-NEXT:    %[[Y:.*]] = nn.matmul_epilogue %arg0, %arg1 bias %arg2 : tensor<4x8xbf16>, tensor<8x16xbf16> bias tensor<16xbf16> -> tensor<4x16xbf16>
// CHECK-NEXT:    nn.gelu %[[Y]]
func.func @bias_bf16(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xbf16>) -> tensor<4x16xbf16> {
  %m = nn.matmul %x, %w : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
  %y = nn.add %m, %b : tensor<4x16xbf16>, tensor<16xbf16> -> tensor<4x16xbf16>
  %g = nn.gelu %y : tensor<4x16xbf16>
  return %g : tensor<4x16xbf16>
}

// In the backward pass: a gradient summed with a GEMM's (an addend only),
// with the matmul's transposes and its marks kept.
// CHECK-LABEL: func.func @gradient_sum(
// CHECK-NEXT:    %[[G:.*]] = nn.matmul_epilogue %arg0, %arg1 addend %arg2 {dist.tp = "column", transpose_lhs} : tensor<8x4xf32>, tensor<8x16xf32> addend tensor<4x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    return %[[G]]
func.func @gradient_sum(%a: tensor<8x4xf32>, %b: tensor<8x16xf32>, %g: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %m = nn.matmul %a, %b {transpose_lhs, dist.tp = "column"} : tensor<8x4xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %s = nn.add %g, %m : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  return %s : tensor<4x16xf32>
}

// Two biases in a row: the second is an addend's broadcast, not the
// epilogue's (one bias each); the second add stays.
// CHECK-LABEL: func.func @two_biases(
// CHECK-NEXT:    %[[Y:.*]] = nn.matmul_epilogue %arg0, %arg1 bias %arg2 : tensor<4x8xf32>, tensor<8x16xf32> bias tensor<16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    nn.add %[[Y]], %arg3
func.func @two_biases(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>, %c: tensor<16xf32>) -> tensor<4x16xf32> {
  %m = nn.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %y = nn.add %m, %b : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  %z = nn.add %y, %c : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  return %z : tensor<4x16xf32>
}

// Must not fuse: the product has another use (it is stored anyway).
// CHECK-LABEL: func.func @product_read_twice(
// CHECK-NOT:     nn.matmul_epilogue
// CHECK:         nn.matmul
// CHECK-NEXT:    nn.add
func.func @product_read_twice(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %m = nn.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %y = nn.add %m, %b : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  return %y, %m : tensor<4x16xf32>, tensor<4x16xf32>
}

// Must not fuse: a sum over another broadcast (a per-row [4, 1] column, or a
// result wider than the product), or a bias of another type.
// CHECK-LABEL: func.func @other_broadcasts(
// CHECK-NOT:     nn.matmul_epilogue
func.func @other_broadcasts(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %c: tensor<4x1xf32>, %wide: tensor<3x4x16xf32>, %x16: tensor<4x8xbf16>, %w16: tensor<8x16xbf16>, %b32: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<3x4x16xf32>, tensor<4x16xf32>) {
  %m = nn.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %y = nn.add %m, %c : tensor<4x16xf32>, tensor<4x1xf32> -> tensor<4x16xf32>
  %m2 = nn.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %z = nn.add %m2, %wide : tensor<4x16xf32>, tensor<3x4x16xf32> -> tensor<3x4x16xf32>
  %m3 = nn.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %s = nn.sub %m3, %y : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  return %y, %z, %s : tensor<4x16xf32>, tensor<3x4x16xf32>, tensor<4x16xf32>
}

// Must not fuse: a row-parallel layer's all-reduce comes between the GEMM
// and its bias.
// CHECK-LABEL: func.func @row_parallel(
// CHECK-NOT:     nn.matmul_epilogue
func.func @row_parallel(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %m = nn.matmul %x, %w {dist.tp = "row"} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %r = dist.all_reduce sum %m {group = #dist.group<tp, 2>} : tensor<4x16xf32> -> tensor<4x16xf32>
  %y = nn.add %r, %b : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// Must not fuse: the addend is made after the GEMM (a gradient summed with
// another branch's computed later); the fused op would take the GEMM's
// place, before its addend exists.
// CHECK-LABEL: func.func @addend_after(
// CHECK-NOT:     nn.matmul_epilogue
func.func @addend_after(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %g: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %m = nn.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %late = nn.neg %g : tensor<4x16xf32>
  %s = nn.add %m, %late : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  return %s : tensor<4x16xf32>
}

// A mixed-precision head's loss reads its bf16 logits: the widening that
// only the cross-entropy and its gradient read goes, and the gradient's cast
// back becomes the gradient's own type.
// CHECK-LABEL: func.func @loss_casts(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xbf16>, %[[Y:[^:]*]]: tensor<4xi64>, %[[D:[^:]*]]: tensor<f32>)
// CHECK-NOT:     nn.cast
// CHECK:         %[[L:.*]] = nn.cross_entropy %[[X]], %[[Y]] {ignore_index = -100 : i64} : tensor<4x8xbf16>, tensor<4xi64> -> tensor<f32>
// CHECK-NEXT:    %[[G:.*]] = nn.cross_entropy_grad %[[X]], %[[Y]], %[[D]] {ignore_index = -100 : i64, train.backward} : tensor<4x8xbf16>, tensor<4xi64>, tensor<f32>
// CHECK-NEXT:    return %[[L]], %[[G]]
func.func @loss_casts(%x: tensor<4x8xbf16>, %y: tensor<4xi64>, %d: tensor<f32>) -> (tensor<f32>, tensor<4x8xbf16>) {
  %w = nn.cast %x : tensor<4x8xbf16> to tensor<4x8xf32>
  %l = nn.cross_entropy %w, %y {ignore_index = -100 : i64} : tensor<4x8xf32>, tensor<4xi64> -> tensor<f32>
  %g = nn.cross_entropy_grad %w, %y, %d {ignore_index = -100 : i64, train.backward} : tensor<4x8xf32>, tensor<4xi64>, tensor<f32>
  %n = nn.cast %g {train.backward} : tensor<4x8xf32> to tensor<4x8xbf16>
  return %l, %n : tensor<f32>, tensor<4x8xbf16>
}

// The float logits read by anything else, or a float gradient read as it
// is, keep both casts.
// CHECK-LABEL: func.func @loss_casts_kept(
// CHECK:         nn.cast %{{.*}} : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK:         nn.cross_entropy %{{.*}} : tensor<4x8xf32>
// CHECK:         nn.cast %{{.*}} : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK:         nn.cross_entropy_grad %{{.*}} : tensor<4x8xf32>
func.func @loss_casts_kept(%x: tensor<4x8xbf16>, %x2: tensor<4x8xbf16>, %y: tensor<4xi64>, %d: tensor<f32>) -> (tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %w = nn.cast %x : tensor<4x8xbf16> to tensor<4x8xf32>
  %l = nn.cross_entropy %w, %y {ignore_index = -100 : i64} : tensor<4x8xf32>, tensor<4xi64> -> tensor<f32>
  %w2 = nn.cast %x2 : tensor<4x8xbf16> to tensor<4x8xf32>
  %g = nn.cross_entropy_grad %w2, %y, %d {ignore_index = -100 : i64} : tensor<4x8xf32>, tensor<4xi64>, tensor<f32>
  return %l, %w, %g : tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// The GELU's gradient: h = fc1's output is read only by the GELU and its
// gradient, dy = fc2's input gradient only by the gradient. The GELU keeps
// its derivative, and fc2's backward GEMM multiplies it in; the marks of
// the GEMM and the gradient are kept (train.backward).
// CHECK-LABEL: func.func @gelu_grad(
// CHECK-SAME:    %[[X:.*]]: tensor<4x8xbf16>, %[[W1:.*]]: tensor<8x16xbf16>, %[[B1:.*]]: tensor<16xbf16>, %[[W2:.*]]: tensor<16x8xbf16>, %[[G:.*]]: tensor<4x8xbf16>)
// CHECK-NEXT:    %[[H:.*]] = nn.matmul_epilogue %[[X]], %[[W1]] bias %[[B1]]
// CHECK-NEXT:    %[[Y:.*]], %[[D:.*]] = nn.gelu_with_derivative %[[H]] approximation = tanh : tensor<4x16xbf16>
// CHECK-NEXT:    %[[O:.*]] = nn.matmul %[[Y]], %[[W2]]
// CHECK-NEXT:    %[[DH:.*]] = nn.matmul_epilogue %[[G]], %[[W2]] scale %[[D]] {train.backward, transpose_rhs} : tensor<4x8xbf16>, tensor<16x8xbf16> scale tensor<4x16xbf16> -> tensor<4x16xbf16>
// CHECK-NEXT:    return %[[O]], %[[DH]]
func.func @gelu_grad(%x: tensor<4x8xbf16>, %w1: tensor<8x16xbf16>, %b1: tensor<16xbf16>, %w2: tensor<16x8xbf16>, %g: tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<4x16xbf16>) {
  %m = nn.matmul %x, %w1 : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
  %h = nn.add %m, %b1 : tensor<4x16xbf16>, tensor<16xbf16> -> tensor<4x16xbf16>
  %y = nn.gelu %h approximation = tanh : tensor<4x16xbf16>
  %o = nn.matmul %y, %w2 : tensor<4x16xbf16>, tensor<16x8xbf16> -> tensor<4x8xbf16>
  %dy = nn.matmul %g, %w2 {transpose_rhs, train.backward} : tensor<4x8xbf16>, tensor<16x8xbf16> -> tensor<4x16xbf16>
  %dh = nn.gelu_grad %h, %dy approximation = tanh {train.backward} : tensor<4x16xbf16>
  return %o, %dh : tensor<4x8xbf16>, tensor<4x16xbf16>
}

// A residual summed into the scaled product after the fold (dh + r): the
// addend joins the scale; a bias never comes after a scale.
// CHECK-LABEL: func.func @gelu_grad_then_sum(
// CHECK:         nn.gelu_with_derivative
// CHECK:         %[[DH:.*]] = nn.matmul_epilogue %arg3, %arg2 scale %{{.*}} addend %arg4 {transpose_rhs}
// CHECK-NEXT:    return %[[DH]]
func.func @gelu_grad_then_sum(%x: tensor<4x16xf32>, %w1: tensor<16x16xf32>, %w2: tensor<16x8xf32>, %g: tensor<4x8xf32>, %r: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %h = nn.matmul %x, %w1 : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
  %y = nn.gelu %h : tensor<4x16xf32>
  %dy = nn.matmul %g, %w2 {transpose_rhs} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %dh = nn.gelu_grad %h, %dy : tensor<4x16xf32>
  %s = nn.add %dh, %r : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  return %s : tensor<4x16xf32>
}

// Must not fuse: h is read by something else too (it is kept anyway); dy
// has another use; dy is not a GEMM's; the GELU's approximation differs
// from its gradient's.
// CHECK-LABEL: func.func @gelu_grad_kept(
// CHECK-NOT:     nn.gelu_with_derivative
// CHECK-NOT:     scale
// CHECK-COUNT-4: nn.gelu_grad
func.func @gelu_grad_kept(%h: tensor<4x16xf32>, %h2: tensor<4x16xf32>, %h3: tensor<4x16xf32>, %h4: tensor<4x16xf32>, %g: tensor<4x8xf32>, %w2: tensor<16x8xf32>, %e: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %y = nn.gelu %h : tensor<4x16xf32>
  %dy = nn.matmul %g, %w2 {transpose_rhs} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %dh = nn.gelu_grad %h, %dy : tensor<4x16xf32>
  %y2 = nn.gelu %h2 : tensor<4x16xf32>
  %dy2 = nn.matmul %g, %w2 {transpose_rhs} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %dh2 = nn.gelu_grad %h2, %dy2 : tensor<4x16xf32>
  %y3 = nn.gelu %h3 : tensor<4x16xf32>
  %dh3 = nn.gelu_grad %h3, %e : tensor<4x16xf32>
  %y4 = nn.gelu %h4 approximation = tanh : tensor<4x16xf32>
  %dy4 = nn.matmul %g, %w2 {transpose_rhs} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %dh4 = nn.gelu_grad %h4, %dy4 : tensor<4x16xf32>
  return %y, %dh, %h, %y2, %dh2, %dy2, %y3, %dh3, %y4, %dh4 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// The bias gradient of the MLP's first layer: the column sum of the GEMM
// that makes its output gradient (here after the GELU's gradient was
// multiplied in), summed by that GEMM; in bf16 and in the backward pass.
// CHECK-LABEL: func.func @bias_grad(
// CHECK:         nn.gelu_with_derivative
// CHECK:         %[[DH:.*]], %[[DB:.*]] = nn.matmul_epilogue %arg3, %arg2 scale %{{.*}} {train.backward, transpose_rhs} : tensor<4x8xbf16>, tensor<16x8xbf16> scale tensor<4x16xbf16> -> tensor<4x16xbf16> column_sum tensor<16xbf16>
// CHECK-NOT:     nn.reduce_sum
// CHECK:         return %{{.*}}, %[[DH]], %[[DB]]
func.func @bias_grad(%x: tensor<4x16xbf16>, %w1: tensor<16x16xbf16>, %w2: tensor<16x8xbf16>, %g: tensor<4x8xbf16>) -> (tensor<4x16xbf16>, tensor<4x16xbf16>, tensor<16xbf16>) {
  %h = nn.matmul %x, %w1 : tensor<4x16xbf16>, tensor<16x16xbf16> -> tensor<4x16xbf16>
  %y = nn.gelu %h : tensor<4x16xbf16>
  %dy = nn.matmul %g, %w2 {transpose_rhs, train.backward} : tensor<4x8xbf16>, tensor<16x8xbf16> -> tensor<4x16xbf16>
  %dh = nn.gelu_grad %h, %dy {train.backward} : tensor<4x16xbf16>
  %db = nn.reduce_sum %dh {axes = array<i64: 0>, train.backward} : tensor<4x16xbf16> -> tensor<16xbf16>
  return %y, %dh, %db : tensor<4x16xbf16>, tensor<4x16xbf16>, tensor<16xbf16>
}

// Over the batch and token axes of a plain matmul's [2, 4, 16]: the
// epilogue has only the column sum; a second sum of the same product is
// left (the GEMM sums once).
// CHECK-LABEL: func.func @bias_grad_tokens(
// CHECK-NEXT:    %[[P:.*]], %[[S:.*]] = nn.matmul_epilogue %arg0, %arg1 : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32> column_sum tensor<16xf32>
// CHECK-NEXT:    %[[T:.*]] = nn.reduce_sum %[[P]]
// CHECK-NEXT:    return %[[P]], %[[S]], %[[T]]
func.func @bias_grad_tokens(%x: tensor<2x4x8xf32>, %w: tensor<8x16xf32>) -> (tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %p = nn.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %s = nn.reduce_sum %p {axes = array<i64: 0, 1>} : tensor<2x4x16xf32> -> tensor<16xf32>
  %t = nn.reduce_sum %p {axes = array<i64: 0, 1>} : tensor<2x4x16xf32> -> tensor<16xf32>
  return %p, %s, %t : tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>
}

// Must not fold: a transposed lhs (the GEMM's rows are not the product's
// rows in memory), a sum over some of the row axes only, kept dims, a
// sum in the other phase, a sum that is not of a GEMM.
// CHECK-LABEL: func.func @column_sum_kept(
// CHECK-NOT:     column_sum
// CHECK-COUNT-5: nn.reduce_sum
func.func @column_sum_kept(%a: tensor<8x4xf32>, %b: tensor<8x16xf32>, %x: tensor<2x4x8xf32>, %w: tensor<8x16xf32>, %e: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<16xf32>, tensor<2x4x16xf32>, tensor<4x16xf32>, tensor<1x16xf32>, tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %m = nn.matmul %a, %b {transpose_lhs} : tensor<8x4xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %s = nn.reduce_sum %m {axes = array<i64: 0>} : tensor<4x16xf32> -> tensor<16xf32>
  %p = nn.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %q = nn.reduce_sum %p {axes = array<i64: 1>} : tensor<2x4x16xf32> -> tensor<2x16xf32>
  %m2 = nn.matmul %e, %w {transpose_rhs} : tensor<4x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
  %m3 = nn.matmul %m2, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %kd = nn.reduce_sum %m3 {axes = array<i64: 0>, keepdims} : tensor<4x16xf32> -> tensor<1x16xf32>
  %f = nn.matmul %m2, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %fb = nn.reduce_sum %f {axes = array<i64: 0>, train.backward} : tensor<4x16xf32> -> tensor<16xf32>
  %ns = nn.reduce_sum %e {axes = array<i64: 0>} : tensor<4x16xf32> -> tensor<16xf32>
  return %m, %s, %p, %m3, %kd, %f, %fb, %ns : tensor<4x16xf32>, tensor<16xf32>, tensor<2x4x16xf32>, tensor<4x16xf32>, tensor<1x16xf32>, tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>
}
