// RUN: dsc-opt %s --autodiff | FileCheck %s
// The output is valid IR that round-trips.
// RUN: dsc-opt %s --autodiff | dsc-opt | FileCheck %s

// --autodiff appends, after the forward ops of each function with a
// train.loss result, the backward pass seeded with 1.0, and returns one
// gradient per train.param argument (in argument order, marked train.grad).

// Two linear layers as PyTorch exports them (x @ W^T + b), a ReLU and the
// cross-entropy loss. Backward, from the loss:
//   dlogits = cross_entropy_grad(h2, y, 1.0)
//   dW2     = h1^T @ dlogits               (matmul transpose_lhs)
//   dh1     = dlogits @ W2^T               (matmul transpose_rhs)
//   da      = select(a > 0, dh1, 0)         (relu)
//   db1     = reduce_sum(da, axis 0)        (the bias was broadcast over rows)
//   dW1     = da^T @ x                      (x @ W1^T: W1's gradient is da^T x)
// x is an input: its gradient (da @ W1) is built by the rule but is dead and
// removed, like every other unused value.
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<4x3xf32> {train.input = "x"}, %[[Y:[a-z0-9]+]]: tensor<4xi64> {train.input = "y"},
// CHECK-SAME:    %[[W1:[a-z0-9]+]]: tensor<6x3xf32> {train.param = "w1"}, %[[B1:[a-z0-9]+]]: tensor<6xf32> {train.param = "b1"},
// CHECK-SAME:    %[[W2:[a-z0-9]+]]: tensor<6x5xf32> {train.param = "w2"})
// CHECK-SAME:    -> (tensor<f32> {train.loss}, tensor<6x3xf32> {train.grad = "w1"}, tensor<6xf32> {train.grad = "b1"}, tensor<6x5xf32> {train.grad = "w2"})
// CHECK-NEXT:    %[[MM1:.*]] = nn.matmul %[[X]], %[[W1]] {transpose_rhs} : tensor<4x3xf32>, tensor<6x3xf32> -> tensor<4x6xf32>
// CHECK-NEXT:    %[[A:.*]] = nn.add %[[MM1]], %[[B1]] : tensor<4x6xf32>, tensor<6xf32> -> tensor<4x6xf32>
// CHECK-NEXT:    %[[H1:.*]] = nn.relu %[[A]] : tensor<4x6xf32>
// CHECK-NEXT:    %[[H2:.*]] = nn.matmul %[[H1]], %[[W2]] : tensor<4x6xf32>, tensor<6x5xf32> -> tensor<4x5xf32>
// CHECK-NEXT:    %[[LOSS:.*]] = nn.cross_entropy %[[H2]], %[[Y]] : tensor<4x5xf32>, tensor<4xi64> -> tensor<f32>
// CHECK-NEXT:    %[[SEED:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[DL:.*]] = nn.cross_entropy_grad %[[H2]], %[[Y]], %[[SEED]] : tensor<4x5xf32>, tensor<4xi64>, tensor<f32>
// CHECK-NEXT:    %[[DH1:.*]] = nn.matmul %[[DL]], %[[W2]] {transpose_rhs} : tensor<4x5xf32>, tensor<6x5xf32> -> tensor<4x6xf32>
// CHECK-NEXT:    %[[DW2:.*]] = nn.matmul %[[H1]], %[[DL]] {transpose_lhs} : tensor<4x6xf32>, tensor<4x5xf32> -> tensor<6x5xf32>
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[POS:.*]] = nn.cmp gt, %[[A]], %[[ZERO]] : tensor<4x6xf32>, tensor<f32> -> tensor<4x6xi1>
// CHECK-NEXT:    %[[ZERO2:.*]] = arith.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[DA:.*]] = nn.select %[[POS]], %[[DH1]], %[[ZERO2]] : tensor<4x6xi1>, tensor<4x6xf32>, tensor<f32> -> tensor<4x6xf32>
// CHECK-NEXT:    %[[DB1:.*]] = nn.reduce_sum %[[DA]] {axes = array<i64: 0>} : tensor<4x6xf32> -> tensor<6xf32>
// CHECK-NEXT:    %[[DW1:.*]] = nn.matmul %[[DA]], %[[X]] {transpose_lhs} : tensor<4x6xf32>, tensor<4x3xf32> -> tensor<6x3xf32>
// CHECK-NEXT:    return %[[LOSS]], %[[DW1]], %[[DB1]], %[[DW2]] : tensor<f32>, tensor<6x3xf32>, tensor<6xf32>, tensor<6x5xf32>
// CHECK-NEXT:  }
func.func @mlp(%x: tensor<4x3xf32> {train.input = "x"}, %y: tensor<4xi64> {train.input = "y"},
               %w1: tensor<6x3xf32> {train.param = "w1"}, %b1: tensor<6xf32> {train.param = "b1"},
               %w2: tensor<6x5xf32> {train.param = "w2"})
    -> (tensor<f32> {train.loss}) {
  %0 = nn.matmul %x, %w1 {transpose_rhs} : tensor<4x3xf32>, tensor<6x3xf32> -> tensor<4x6xf32>
  %1 = nn.add %0, %b1 : tensor<4x6xf32>, tensor<6xf32> -> tensor<4x6xf32>
  %2 = nn.relu %1 : tensor<4x6xf32>
  %3 = nn.matmul %2, %w2 : tensor<4x6xf32>, tensor<6x5xf32> -> tensor<4x5xf32>
  %4 = nn.cross_entropy %3, %y : tensor<4x5xf32>, tensor<4xi64> -> tensor<f32>
  return %4 : tensor<f32>
}

// A tied embedding: the same parameter is the embedding table (gather) and
// the LM head (matmul transpose_rhs). Its gradient is the nn.add of both
// contributions: the head's dlogits^T @ h and the embedding's gather_grad of
// the reshaped dh. The integer token ids get no gradient.
// CHECK-LABEL: func.func @tied(
// CHECK-SAME:    %[[IDS:[a-z0-9]+]]: tensor<2x3xi64> {train.input = "ids"}, %[[TGT:[a-z0-9]+]]: tensor<6xi64> {train.input = "targets"},
// CHECK-SAME:    %[[E:[a-z0-9]+]]: tensor<10x4xf32> {train.param = "wte"})
// CHECK-SAME:    -> (tensor<f32> {train.loss}, tensor<10x4xf32> {train.grad = "wte"})
// CHECK-NEXT:    %[[G:.*]] = nn.gather %[[E]], %[[IDS]] : tensor<10x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
// CHECK-NEXT:    %[[H:.*]] = nn.reshape %[[G]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT:    %[[LOGITS:.*]] = nn.matmul %[[H]], %[[E]] {transpose_rhs} : tensor<6x4xf32>, tensor<10x4xf32> -> tensor<6x10xf32>
// CHECK-NEXT:    %[[LOSS:.*]] = nn.cross_entropy %[[LOGITS]], %[[TGT]] : tensor<6x10xf32>, tensor<6xi64> -> tensor<f32>
// CHECK-NEXT:    %[[SEED:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[DL:.*]] = nn.cross_entropy_grad %[[LOGITS]], %[[TGT]], %[[SEED]] : tensor<6x10xf32>, tensor<6xi64>, tensor<f32>
// CHECK-NEXT:    %[[DH:.*]] = nn.matmul %[[DL]], %[[E]] : tensor<6x10xf32>, tensor<10x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT:    %[[DHEAD:.*]] = nn.matmul %[[DL]], %[[H]] {transpose_lhs} : tensor<6x10xf32>, tensor<6x4xf32> -> tensor<10x4xf32>
// CHECK-NEXT:    %[[DG:.*]] = nn.reshape %[[DH]] : tensor<6x4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT:    %[[DEMB:.*]] = nn.gather_grad %[[DG]], %[[IDS]] : tensor<2x3x4xf32>, tensor<2x3xi64> -> tensor<10x4xf32>
// CHECK-NEXT:    %[[SUM:.*]] = nn.add %[[DHEAD]], %[[DEMB]] : tensor<10x4xf32>, tensor<10x4xf32> -> tensor<10x4xf32>
// CHECK-NEXT:    return %[[LOSS]], %[[SUM]] : tensor<f32>, tensor<10x4xf32>
func.func @tied(%ids: tensor<2x3xi64> {train.input = "ids"}, %tgt: tensor<6xi64> {train.input = "targets"},
                %emb: tensor<10x4xf32> {train.param = "wte"})
    -> (tensor<f32> {train.loss}) {
  %0 = nn.gather %emb, %ids : tensor<10x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %1 = nn.reshape %0 : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %2 = nn.matmul %1, %emb {transpose_rhs} : tensor<6x4xf32>, tensor<10x4xf32> -> tensor<6x10xf32>
  %3 = nn.cross_entropy %2, %tgt : tensor<6x10xf32>, tensor<6xi64> -> tensor<f32>
  return %3 : tensor<f32>
}

// Non-differentiable operands receive nothing: the gather indices come from
// an integer nn.add (no gradient op is emitted for it, and reaching an
// integer value is not an error), and the float constant operand of nn.mul
// is skipped (constants need no rule). The seed 1.0 reaches the [3x4] gather
// result through reduce_sum as a reshape + broadcast.
// CHECK-LABEL: func.func @non_differentiable(
// CHECK-SAME:    %[[IDS:[a-z0-9]+]]: tensor<3xi64> {train.input = "ids"}, %[[E:[a-z0-9]+]]: tensor<10x4xf32> {train.param = "emb"})
// CHECK-SAME:    -> (tensor<f32> {train.loss}, tensor<10x4xf32> {train.grad = "emb"})
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant dense<1> : tensor<i64>
// CHECK-NEXT:    %[[SHIFTED:.*]] = nn.add %[[IDS]], %[[ONE]] : tensor<3xi64>, tensor<i64> -> tensor<3xi64>
// CHECK-NEXT:    %[[G:.*]] = nn.gather %[[E]], %[[SHIFTED]] : tensor<10x4xf32>, tensor<3xi64> -> tensor<3x4xf32>
// CHECK-NEXT:    %[[TWO:.*]] = arith.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[M:.*]] = nn.mul %[[G]], %[[TWO]] : tensor<3x4xf32>, tensor<f32> -> tensor<3x4xf32>
// CHECK-NEXT:    %[[L:.*]] = nn.reduce_sum %[[M]] {axes = array<i64: 0, 1>} : tensor<3x4xf32> -> tensor<f32>
// CHECK-NEXT:    %[[SEED:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[R:.*]] = nn.reshape %[[SEED]] : tensor<f32> -> tensor<1x1xf32>
// CHECK-NEXT:    %[[B:.*]] = nn.broadcast %[[R]] : tensor<1x1xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %[[DG:.*]] = nn.mul %[[B]], %[[TWO]] : tensor<3x4xf32>, tensor<f32> -> tensor<3x4xf32>
// CHECK-NEXT:    %[[DE:.*]] = nn.gather_grad %[[DG]], %[[SHIFTED]] : tensor<3x4xf32>, tensor<3xi64> -> tensor<10x4xf32>
// CHECK-NEXT:    return %[[L]], %[[DE]] : tensor<f32>, tensor<10x4xf32>
func.func @non_differentiable(%ids: tensor<3xi64> {train.input = "ids"}, %emb: tensor<10x4xf32> {train.param = "emb"})
    -> (tensor<f32> {train.loss}) {
  %c1 = arith.constant dense<1> : tensor<i64>
  %0 = nn.add %ids, %c1 : tensor<3xi64>, tensor<i64> -> tensor<3xi64>
  %1 = nn.gather %emb, %0 : tensor<10x4xf32>, tensor<3xi64> -> tensor<3x4xf32>
  %c2 = arith.constant dense<2.0> : tensor<f32>
  %2 = nn.mul %1, %c2 : tensor<3x4xf32>, tensor<f32> -> tensor<3x4xf32>
  %3 = nn.reduce_sum %2 {axes = array<i64: 0, 1>} : tensor<3x4xf32> -> tensor<f32>
  return %3 : tensor<f32>
}

// The gradient results follow the original results (the loss need not be
// first) in argument order, not in the order the backward pass reaches the
// parameters: "b" (argument 1) before "a" (argument 3), though a's gradient
// is computed first. Inputs and train.buffer arguments get no result. A
// forward value nothing uses (%unused) is removed.
// CHECK-LABEL: func.func @order(
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<4xf32> {train.input = "x"}, %[[B:[a-z0-9]+]]: tensor<4xf32> {train.param = "b"},
// CHECK-SAME:    %[[S:[a-z0-9]+]]: tensor<4xf32> {train.buffer = "scale"}, %[[A:[a-z0-9]+]]: tensor<4xf32> {train.param = "a"})
// CHECK-SAME:    -> (tensor<4xf32>, tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "b"}, tensor<4xf32> {train.grad = "a"})
// CHECK-NOT:     nn.sub
// CHECK:         %[[ONES:.*]] = nn.broadcast %{{.*}} : tensor<1xf32> -> tensor<4xf32>
// CHECK-NEXT:    %[[DA:.*]] = nn.mul %[[ONES]], %[[X]] : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT:    %[[DB:.*]] = nn.mul %[[ONES]], %[[S]] : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT:    return %{{.*}}, %{{.*}}, %[[DB]], %[[DA]] : tensor<4xf32>, tensor<f32>, tensor<4xf32>, tensor<4xf32>
func.func @order(%x: tensor<4xf32> {train.input = "x"}, %b: tensor<4xf32> {train.param = "b"},
                 %s: tensor<4xf32> {train.buffer = "scale"}, %a: tensor<4xf32> {train.param = "a"})
    -> (tensor<4xf32>, tensor<f32> {train.loss}) {
  %unused = nn.sub %x, %s : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %0 = nn.mul %b, %s : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %1 = nn.mul %a, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %2 = nn.add %0, %1 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %3 = nn.reduce_sum %2 {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  return %0, %3 : tensor<4xf32>, tensor<f32>
}

// A function without a train.loss result is left alone.
// CHECK-LABEL: func.func @no_loss(
// CHECK-SAME:    %{{.*}}: tensor<4xf32> {train.param = "w"}) -> tensor<f32> {
// CHECK-NEXT:    %[[S:.*]] = nn.reduce_sum
// CHECK-NEXT:    return %[[S]] : tensor<f32>
func.func @no_loss(%w: tensor<4xf32> {train.param = "w"}) -> tensor<f32> {
  %0 = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// sin and cos (rotary tables computed in forward): d sin = cos, d cos = -sin.
// CHECK-LABEL: func.func @sin_cos(
// CHECK-SAME:    %[[W:[a-z0-9]+]]: tensor<4xf32> {train.param = "w"})
// CHECK-NEXT:    nn.sin %[[W]] : tensor<4xf32>
// CHECK-NEXT:    nn.cos %[[W]] : tensor<4xf32>
// Backward, the cos first (the later op): -(dy * sin), then dy * cos.
// CHECK:         %[[DC:.*]] = nn.sin %[[W]] : tensor<4xf32>
// CHECK-NEXT:    %[[M:.*]] = nn.mul %{{.*}}, %[[DC]]
// CHECK-NEXT:    %[[NEG:.*]] = nn.neg %[[M]]
// CHECK-NEXT:    %[[DS:.*]] = nn.cos %[[W]] : tensor<4xf32>
// CHECK-NEXT:    %[[M2:.*]] = nn.mul %{{.*}}, %[[DS]]
// CHECK-NEXT:    nn.add %[[NEG]], %[[M2]]
func.func @sin_cos(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  %0 = nn.sin %w : tensor<4xf32>
  %1 = nn.cos %w : tensor<4xf32>
  %2 = nn.add %0, %1 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %3 = nn.reduce_sum %2 {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  return %3 : tensor<f32>
}

// Convolution and pooling: avg_pool's gradient op, slice_grad (Pad) back
// through a slice, the transposed convolution (conv_input_grad) to its
// input by a conv and to its weight by conv_weight_grad with the roles
// swapped, max_pool's gradient from its input, and conv's weight gradient;
// no gradient for the input x.
// CHECK-LABEL: func.func @conv_pool(
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<1x2x8xf32> {train.input = "x"}, %[[W:[a-z0-9]+]]: tensor<4x2x3xf32> {train.param = "w"}, %[[T:[a-z0-9]+]]: tensor<4x2x2xf32> {train.param = "t"})
// CHECK:         %[[C:.*]] = nn.conv %[[X]], %[[W]]
// CHECK-NEXT:    %[[M:.*]] = nn.max_pool %[[C]]
// CHECK-NEXT:    %[[CT:.*]] = nn.conv_input_grad %[[M]], %[[T]]
// CHECK:         %[[DA:.*]] = nn.avg_pool_grad %{{.*}} {kernel_shape = array<i64: 2>, pads = array<i64: 0, 0>, strides = array<i64: 2>} : tensor<1x2x5xf32> -> tensor<1x2x10xf32>
// CHECK-NEXT:    %[[DP:.*]] = nn.slice %[[DA]] {limit = array<i64: 1, 2, 9>, start = array<i64: 0, 0, 1>, stride = array<i64: 1, 1, 1>} : tensor<1x2x10xf32> -> tensor<1x2x8xf32>
// CHECK-NEXT:    %[[DM:.*]] = nn.conv %[[DP]], %[[T]] {dilations = array<i64: 1>, pads = array<i64: 0, 0>, strides = array<i64: 2>} : tensor<1x2x8xf32>, tensor<4x2x2xf32> -> tensor<1x4x4xf32>
// CHECK-NEXT:    %[[DT:.*]] = nn.conv_weight_grad %[[DP]], %[[M]] {dilations = array<i64: 1>, pads = array<i64: 0, 0>, strides = array<i64: 2>} : tensor<1x2x8xf32>, tensor<1x4x4xf32> -> tensor<4x2x2xf32>
// CHECK-NEXT:    %[[DC:.*]] = nn.max_pool_grad %[[C]], %[[DM]] {dilations = array<i64: 1>, kernel_shape = array<i64: 2>, pads = array<i64: 0, 1>, strides = array<i64: 1>} : tensor<1x4x4xf32>, tensor<1x4x4xf32>
// CHECK-NEXT:    %[[DW:.*]] = nn.conv_weight_grad %[[X]], %[[DC]] {dilations = array<i64: 1>, pads = array<i64: 1, 1>, strides = array<i64: 2>} : tensor<1x2x8xf32>, tensor<1x4x4xf32> -> tensor<4x2x3xf32>
// CHECK-NOT:     nn.conv_input_grad
// CHECK:         return %{{.*}}, %[[DW]], %[[DT]]
func.func @conv_pool(%x: tensor<1x2x8xf32> {train.input = "x"}, %w: tensor<4x2x3xf32> {train.param = "w"}, %t: tensor<4x2x2xf32> {train.param = "t"}) -> (tensor<f32> {train.loss}) {
  %0 = nn.conv %x, %w {strides = array<i64: 2>, pads = array<i64: 1, 1>, dilations = array<i64: 1>} : tensor<1x2x8xf32>, tensor<4x2x3xf32> -> tensor<1x4x4xf32>
  %1 = nn.max_pool %0 {kernel_shape = array<i64: 2>, strides = array<i64: 1>, pads = array<i64: 0, 1>, dilations = array<i64: 1>} : tensor<1x4x4xf32> -> tensor<1x4x4xf32>
  %2 = nn.conv_input_grad %1, %t {strides = array<i64: 2>, pads = array<i64: 0, 0>, dilations = array<i64: 1>} : tensor<1x4x4xf32>, tensor<4x2x2xf32> -> tensor<1x2x8xf32>
  %3 = nn.slice_grad %2 {start = array<i64: 0, 0, 1>, limit = array<i64: 1, 2, 9>, stride = array<i64: 1, 1, 1>} : tensor<1x2x8xf32> -> tensor<1x2x10xf32>
  %4 = nn.avg_pool %3 {kernel_shape = array<i64: 2>, strides = array<i64: 2>, pads = array<i64: 0, 0>} : tensor<1x2x10xf32> -> tensor<1x2x5xf32>
  %5 = nn.reduce_sum %4 {axes = array<i64: 0, 1, 2>} : tensor<1x2x5xf32> -> tensor<f32>
  return %5 : tensor<f32>
}

// Slices that tile a value along one axis (a fused QKV projection split in
// three, in any order of use): the value's gradient is the concatenation
// of theirs, not the sum of their padded slice_grads. A parameter sliced
// so too. Slices that leave a gap, overlap or cut two axes keep the
// padded sum.
// CHECK-LABEL: func.func @qkv_split(
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<4x8xf32> {train.input = "x"}, %[[W:[a-z0-9]+]]: tensor<8x12xf32> {train.param = "w"})
// CHECK-NOT:     nn.slice_grad
// CHECK:         %[[DY:.*]] = nn.concat %{{.*}}, %{{.*}}, %{{.*}} {axis = 1 : i64} : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x12xf32>
// CHECK-NOT:     nn.slice_grad
// CHECK:         nn.matmul %[[X]], %[[DY]] {transpose_lhs}
func.func @qkv_split(%x: tensor<4x8xf32> {train.input = "x"}, %w: tensor<8x12xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  %y = nn.matmul %x, %w : tensor<4x8xf32>, tensor<8x12xf32> -> tensor<4x12xf32>
  %v = nn.slice %y {start = array<i64: 0, 8>, limit = array<i64: 4, 12>, stride = array<i64: 1, 1>} : tensor<4x12xf32> -> tensor<4x4xf32>
  %q = nn.slice %y {start = array<i64: 0, 0>, limit = array<i64: 4, 4>, stride = array<i64: 1, 1>} : tensor<4x12xf32> -> tensor<4x4xf32>
  %k = nn.slice %y {start = array<i64: 0, 4>, limit = array<i64: 4, 8>, stride = array<i64: 1, 1>} : tensor<4x12xf32> -> tensor<4x4xf32>
  %qk = nn.mul %q, %k : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %o = nn.mul %qk, %v : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %s = nn.reduce_sum %o {axes = array<i64: 0, 1>} : tensor<4x4xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// CHECK-LABEL: func.func @param_split(
// CHECK:         %[[DW:.*]] = nn.concat %{{.*}}, %{{.*}} {axis = 0 : i64} : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
// CHECK:         return %{{.*}}, %[[DW]]
func.func @param_split(%w: tensor<4x3xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  %a = nn.slice %w {start = array<i64: 0, 0>, limit = array<i64: 2, 3>, stride = array<i64: 1, 1>} : tensor<4x3xf32> -> tensor<2x3xf32>
  %b = nn.slice %w {start = array<i64: 2, 0>, limit = array<i64: 4, 3>, stride = array<i64: 1, 1>} : tensor<4x3xf32> -> tensor<2x3xf32>
  %p = nn.mul %a, %b : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %s = nn.reduce_sum %p {axes = array<i64: 0, 1>} : tensor<2x3xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// CHECK-LABEL: func.func @not_tiles(
// CHECK-NOT:     nn.concat
// CHECK-COUNT-6: nn.slice_grad
// CHECK-NOT:     nn.concat
// CHECK:         return
func.func @not_tiles(%w: tensor<4x4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  // A gap (rows 0-1 and 3), an overlap (columns 0-2 and 1-3), two axes cut.
  %a = nn.slice %w {start = array<i64: 0, 0>, limit = array<i64: 2, 4>, stride = array<i64: 1, 1>} : tensor<4x4xf32> -> tensor<2x4xf32>
  %b = nn.slice %w {start = array<i64: 3, 0>, limit = array<i64: 4, 4>, stride = array<i64: 1, 1>} : tensor<4x4xf32> -> tensor<1x4xf32>
  %c = nn.slice %w {start = array<i64: 0, 0>, limit = array<i64: 4, 3>, stride = array<i64: 1, 1>} : tensor<4x4xf32> -> tensor<4x3xf32>
  %d = nn.slice %w {start = array<i64: 0, 1>, limit = array<i64: 4, 4>, stride = array<i64: 1, 1>} : tensor<4x4xf32> -> tensor<4x3xf32>
  %e = nn.slice %w {start = array<i64: 0, 0>, limit = array<i64: 2, 2>, stride = array<i64: 1, 1>} : tensor<4x4xf32> -> tensor<2x2xf32>
  %f = nn.slice %w {start = array<i64: 2, 2>, limit = array<i64: 4, 4>, stride = array<i64: 1, 1>} : tensor<4x4xf32> -> tensor<2x2xf32>
  %sa = nn.reduce_sum %a {axes = array<i64: 0, 1>} : tensor<2x4xf32> -> tensor<f32>
  %sb = nn.reduce_sum %b {axes = array<i64: 0, 1>} : tensor<1x4xf32> -> tensor<f32>
  %sc = nn.reduce_sum %c {axes = array<i64: 0, 1>} : tensor<4x3xf32> -> tensor<f32>
  %sd = nn.reduce_sum %d {axes = array<i64: 0, 1>} : tensor<4x3xf32> -> tensor<f32>
  %se = nn.reduce_sum %e {axes = array<i64: 0, 1>} : tensor<2x2xf32> -> tensor<f32>
  %sf = nn.reduce_sum %f {axes = array<i64: 0, 1>} : tensor<2x2xf32> -> tensor<f32>
  %1 = nn.add %sa, %sb : tensor<f32>, tensor<f32> -> tensor<f32>
  %2 = nn.add %1, %sc : tensor<f32>, tensor<f32> -> tensor<f32>
  %3 = nn.add %2, %sd : tensor<f32>, tensor<f32> -> tensor<f32>
  %4 = nn.add %3, %se : tensor<f32>, tensor<f32> -> tensor<f32>
  %5 = nn.add %4, %sf : tensor<f32>, tensor<f32> -> tensor<f32>
  return %5 : tensor<f32>
}

// Fused attention: one attention_grad from the result's gradient, the
// forward's stats and attributes; the query, key and value gradients reach
// their parameters; the bias (an input) gets none, and no gradient flows
// into the stats.
// CHECK-LABEL: func.func @attention(
// CHECK-SAME:    %[[Q:[a-z0-9]+]]: tensor<2x4x3xf32> {train.param = "q"}, %[[K:[a-z0-9]+]]: tensor<2x5x3xf32> {train.param = "k"}, %[[V:[a-z0-9]+]]: tensor<2x5x6xf32> {train.param = "v"}, %[[B:[a-z0-9]+]]: tensor<2x1x5xf32> {train.input = "b"})
// CHECK:         %[[O:.*]], %[[S:.*]] = nn.attention %[[Q]], %[[K]], %[[V]], %[[B]] {ratio = 1.000000e-01 : f64, rng_stream = 2 : i64, scale = 5.000000e-01 : f64}
// CHECK:         %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = nn.attention_grad %{{.*}}, %[[Q]], %[[K]], %[[V]], %[[S]], %[[B]] {ratio = 1.000000e-01 : f64, rng_stream = 2 : i64, scale = 5.000000e-01 : f64}
// CHECK-NOT:     nn.attention_grad
// CHECK:         return %{{.*}}, %[[DQ]], %[[DK]], %[[DV]]
func.func @attention(%q: tensor<2x4x3xf32> {train.param = "q"}, %k: tensor<2x5x3xf32> {train.param = "k"}, %v: tensor<2x5x6xf32> {train.param = "v"}, %b: tensor<2x1x5xf32> {train.input = "b"}) -> (tensor<f32> {train.loss}) {
  %0, %1 = nn.attention %q, %k, %v, %b {scale = 0.5 : f64, ratio = 0.1 : f64, rng_stream = 2 : i64} : tensor<2x4x3xf32>, tensor<2x5x3xf32>, tensor<2x5x6xf32>, tensor<2x1x5xf32> -> tensor<2x4x6xf32>, tensor<2x4x2xf32>
  %2 = nn.reduce_sum %0 {axes = array<i64: 0, 1, 2>} : tensor<2x4x6xf32> -> tensor<f32>
  return %2 : tensor<f32>
}
