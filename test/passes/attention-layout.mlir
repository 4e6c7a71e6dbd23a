// RUN: dsc-opt %s --attention-layout --split-input-file | FileCheck %s

// attention-layout: an nn.attention (and nn.attention_grad) whose operands
// are permutes [B, T, H, D] -> [B, H, T, D] and whose results are read only
// through the permute back reads the unpermuted values with bshd; the
// permutes are erased. The stats stay head-major.

// A decoder layer's attention, forward and backward, as autodiff leaves
// it: every permute goes, the tensor-parallel split of the heads moves to
// the bshd operands' head dimension, the marks stay.
// CHECK-LABEL: func.func @layer(
// CHECK-SAME:    %[[Q:[^:]*]]: tensor<2x8x4x16xf32>, %[[K:[^:]*]]: tensor<2x8x4x16xf32>, %[[V:[^:]*]]: tensor<2x8x4x16xf32>, %[[DY:[^:]*]]: tensor<2x8x4x16xf32>)
// CHECK-NOT:     nn.transpose
// CHECK:         %[[O:.*]], %[[S:.*]] = nn.attention %[[Q]], %[[K]], %[[V]] {bshd, causal, dist.tp_split = array<i64: 2, 1, 2>, ratio = 1.000000e-01 : f64, rng_stream = 1 : i64, scale = 2.500000e-01 : f64} : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32> -> tensor<2x8x4x16xf32>, tensor<2x4x8x2xf32>
// CHECK-NOT:     nn.transpose
// CHECK:         %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = nn.attention_grad %[[DY]], %[[Q]], %[[K]], %[[V]], %[[S]] {bshd, causal, dist.tp_split = array<i64: 2, 1, 2>, ratio = 1.000000e-01 : f64, rng_stream = 1 : i64, scale = 2.500000e-01 : f64, train.backward}
// CHECK-NOT:     nn.transpose
// CHECK:         return %[[O]], %[[DQ]], %[[DK]], %[[DV]]
func.func @layer(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x4x16xf32>, %v: tensor<2x8x4x16xf32>, %dy: tensor<2x8x4x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) {
  %qt = nn.transpose %q {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %kt = nn.transpose %k {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %vt = nn.transpose %v {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %o, %s = nn.attention %qt, %kt, %vt {causal, ratio = 0.1 : f64, rng_stream = 1 : i64, scale = 0.25 : f64, dist.tp_split = array<i64: 1, 1, 2>} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>, tensor<2x4x8x2xf32>
  %ot = nn.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  %dyt = nn.transpose %dy {permutation = array<i64: 0, 2, 1, 3>, train.backward} : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %dq, %dk, %dv = nn.attention_grad %dyt, %qt, %kt, %vt, %s {causal, ratio = 0.1 : f64, rng_stream = 1 : i64, scale = 0.25 : f64, dist.tp_split = array<i64: 1, 1, 2>, train.backward} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x2xf32>
  %dqt = nn.transpose %dq {permutation = array<i64: 0, 2, 1, 3>, train.backward} : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  %dkt = nn.transpose %dk {permutation = array<i64: 0, 2, 1, 3>, train.backward} : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  %dvt = nn.transpose %dv {permutation = array<i64: 0, 2, 1, 3>, train.backward} : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  return %ot, %dqt, %dkt, %dvt : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>
}

// -----

// One permute as query, key and value (self-attention of one projection),
// in bf16 with a bias: folded, the permute erased once.
// CHECK-LABEL: func.func @shared(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<3x5x2x8xbf16>, %[[B:[^:]*]]: tensor<3x1x1x5xf32>)
// CHECK-NEXT:    %[[O:.*]], %{{.*}} = nn.attention %[[X]], %[[X]], %[[X]], %[[B]] {bshd, scale = 2.000000e+00 : f64, scale_divides}
// CHECK-NEXT:    return %[[O]]
func.func @shared(%x: tensor<3x5x2x8xbf16>, %b: tensor<3x1x1x5xf32>) -> tensor<3x5x2x8xbf16> {
  %xt = nn.transpose %x {permutation = array<i64: 0, 2, 1, 3>} : tensor<3x5x2x8xbf16> -> tensor<3x2x5x8xbf16>
  %o, %s = nn.attention %xt, %xt, %xt, %b {scale = 2.0 : f64, scale_divides} : tensor<3x2x5x8xbf16>, tensor<3x2x5x8xbf16>, tensor<3x2x5x8xbf16>, tensor<3x1x1x5xf32> -> tensor<3x2x5x8xbf16>, tensor<3x2x5x2xf32>
  %ot = nn.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<3x2x5x8xbf16> -> tensor<3x5x2x8xbf16>
  return %ot : tensor<3x5x2x8xbf16>
}

// -----

// Not folded: the result is also read head-major (it is stored either way);
// a key permuted [0, 2, 3, 1] (nanoGPT's k^T, which nn-fusion left
// explicit); a value that is no permute. The gradient of the first folds
// on its own: the stats are head-major in both layouts.
// CHECK-LABEL: func.func @kept(
// CHECK:         %[[QT:.*]] = nn.transpose %arg0
// CHECK:         %[[O:.*]], %[[S:.*]] = nn.attention %[[QT]], %[[QT]], %[[QT]] {scale = 1.000000e+00 : f64}
// CHECK:         nn.transpose %[[O]]
// CHECK:         nn.reduce_sum %[[O]]
// CHECK:         nn.attention_grad %arg1, %arg0, %arg0, %arg0, %[[S]] {bshd, scale = 1.000000e+00 : f64}
// CHECK-NOT:     nn.transpose
// CHECK:         return
func.func @kept(%x: tensor<1x4x2x8xf32>, %dy: tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1xf32>, tensor<1x4x2x8xf32>) {
  %xt = nn.transpose %x {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  %o, %s = nn.attention %xt, %xt, %xt {scale = 1.0 : f64} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4x2xf32>
  %ot = nn.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x2x4x8xf32> -> tensor<1x4x2x8xf32>
  %r = nn.reduce_sum %o {axes = array<i64: 1, 2, 3>} : tensor<1x2x4x8xf32> -> tensor<1xf32>
  %dyt = nn.transpose %dy {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  %dq, %dk, %dv = nn.attention_grad %dyt, %xt, %xt, %xt, %s {scale = 1.0 : f64} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x2xf32>
  %dqt = nn.transpose %dq {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x2x4x8xf32> -> tensor<1x4x2x8xf32>
  return %ot, %r, %dqt : tensor<1x4x2x8xf32>, tensor<1xf32>, tensor<1x4x2x8xf32>
}

// -----

// CHECK-LABEL: func.func @other_permutes(
// CHECK:         nn.transpose %arg0 {permutation = array<i64: 0, 2, 1, 3>}
// CHECK:         nn.transpose %arg1 {permutation = array<i64: 0, 2, 3, 1>}
// CHECK:         nn.attention
// CHECK-NOT:     bshd
// CHECK:         nn.transpose
// CHECK:         return
func.func @other_permutes(%q: tensor<1x4x2x8xf32>, %k: tensor<1x8x2x4xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x4x2x8xf32> {
  %qt = nn.transpose %q {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  %kt = nn.transpose %k {permutation = array<i64: 0, 2, 3, 1>} : tensor<1x8x2x4xf32> -> tensor<1x2x4x8xf32>
  %o, %s = nn.attention %qt, %kt, %v {scale = 1.0 : f64} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>, tensor<1x2x4x2xf32>
  %ot = nn.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x2x4x8xf32> -> tensor<1x4x2x8xf32>
  return %ot : tensor<1x4x2x8xf32>
}
