// RUN: dsc-opt %s --nn-fusion="fuse=attention" | FileCheck %s
// RUN: dsc-opt %s --nn-fusion="fuse=all" | FileCheck %s
// RUN: dsc-opt %s --nn-fusion | FileCheck %s --check-prefix=NONE
// RUN: dsc-opt %s --nn-fusion="fuse=none" | FileCheck %s --check-prefix=NONE
// RUN: not dsc-opt %s --nn-fusion="fuse=some" 2>&1 | FileCheck %s --check-prefix=BAD

// nn-fusion fuse=attention: scaled dot-product attention as the exporters
// write it becomes one nn.attention; fuse=none (the pipeline's default for
// now) leaves every chain as it is.
// NONE-NOT: nn.attention
// BAD: for the --fuse option: Cannot find option named 'some'!

// nanoGPT (models/gpt.py): the key transposed by [0, 2, 3, 1], a scalar
// multiply, a constant lower-triangular i1 mask selecting -inf where it is
// true, softmax, dropout, the value GEMM. The key comes back as the
// transpose that swaps the last two dimensions back ([0, 2, 1, 3]), the
// dropout's ratio and stream move onto the op, and nothing of the chain
// is left.
// CHECK-LABEL: func.func @gpt(
// CHECK-SAME:    %[[Q:.*]]: tensor<2x2x4x8xf32>, %[[KX:.*]]: tensor<2x4x2x8xf32>, %[[V:.*]]: tensor<2x2x4x8xf32>)
// CHECK-NEXT:    %[[K:.*]] = nn.transpose %[[KX]] {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
// CHECK-NEXT:    %[[O:.*]], %{{.*}} = nn.attention %[[Q]], %[[K]], %[[V]] {causal, ratio = 1.000000e-01 : f64, rng_stream = 1 : i64, scale = 2.500000e-01 : f64} : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x8xf32>, tensor<2x2x4x2xf32>
// CHECK-NEXT:    return %[[O]]
func.func @gpt(%q: tensor<2x2x4x8xf32>, %kx: tensor<2x4x2x8xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %kt = nn.transpose %kx {permutation = array<i64: 0, 2, 3, 1>} : tensor<2x4x2x8xf32> -> tensor<2x2x8x4xf32>
  %s = nn.matmul %q, %kt : tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32> -> tensor<2x2x4x4xf32>
  %c = arith.constant dense<2.500000e-01> : tensor<f32>
  %s2 = nn.mul %s, %c : tensor<2x2x4x4xf32>, tensor<f32> -> tensor<2x2x4x4xf32>
  %m = arith.constant dense<[[[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]]]> : tensor<1x1x4x4xi1>
  %ninf = arith.constant dense<0xFF800000> : tensor<f32>
  %x = nn.select %m, %ninf, %s2 : tensor<1x1x4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %p = nn.softmax %x : tensor<2x2x4x4xf32>
  %d, %dm = nn.dropout %p {ratio = 0.1 : f64, rng_stream = 1 : i64} : tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>, tensor<2x2x4x4xi1>
  %o = nn.matmul %d, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// BERT (models/bert.py): the key with the matmul's transpose flag, a
// division by sqrt(head dim), an additive pad bias from an input.
// CHECK-LABEL: func.func @bert(
// CHECK-SAME:    %[[Q:.*]]: tensor<2x2x4x8xf32>, %[[K:.*]]: tensor<2x2x4x8xf32>, %[[V:.*]]: tensor<2x2x4x8xf32>, %[[B:.*]]: tensor<2x1x1x4xf32> {train.input = "mask"})
// CHECK-NEXT:    %[[O:.*]], %{{.*}} = nn.attention %[[Q]], %[[K]], %[[V]], %[[B]] {ratio = 1.000000e-01 : f64, rng_stream = 2 : i64, scale = 2.8284270763397217 : f64, scale_divides}
// CHECK-NEXT:    return %[[O]]
func.func @bert(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>, %b: tensor<2x1x1x4xf32> {train.input = "mask"}) -> tensor<2x2x4x8xf32> {
  %s = nn.matmul %q, %k {transpose_rhs} : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x4xf32>
  %c = arith.constant dense<2.82842708> : tensor<f32>
  %s2 = nn.div %s, %c : tensor<2x2x4x4xf32>, tensor<f32> -> tensor<2x2x4x4xf32>
  %x = nn.add %s2, %b : tensor<2x2x4x4xf32>, tensor<2x1x1x4xf32> -> tensor<2x2x4x4xf32>
  %p = nn.softmax %x : tensor<2x2x4x4xf32>
  %d, %dm = nn.dropout %p {ratio = 0.1 : f64, rng_stream = 2 : i64} : tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>, tensor<2x2x4x4xi1>
  %o = nn.matmul %d, %v : tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// Hugging Face's polarity: where(causal, scores, finfo.min), kept where
// the mask is true; no dropout (ratio 0, not printed); the bias added
// before the mask; rank 3 (heads folded into the batch).
// CHECK-LABEL: func.func @hf(
// CHECK-SAME:    %[[Q:.*]]: tensor<4x3x8xf32>, %[[K:.*]]: tensor<4x3x8xf32>, %[[V:.*]]: tensor<4x3x6xf32>, %[[B:.*]]: tensor<3x3xf32>)
// CHECK-NEXT:    %[[O:.*]], %{{.*}} = nn.attention %[[Q]], %[[K]], %[[V]], %[[B]] {causal, scale = 1.250000e-01 : f64} : tensor<4x3x8xf32>, tensor<4x3x8xf32>, tensor<4x3x6xf32>, tensor<3x3xf32> -> tensor<4x3x6xf32>, tensor<4x3x2xf32>
func.func @hf(%q: tensor<4x3x8xf32>, %k: tensor<4x3x8xf32>, %v: tensor<4x3x6xf32>, %b: tensor<3x3xf32>) -> tensor<4x3x6xf32> {
  %s = nn.matmul %q, %k {transpose_rhs} : tensor<4x3x8xf32>, tensor<4x3x8xf32> -> tensor<4x3x3xf32>
  %c = arith.constant dense<1.250000e-01> : tensor<1xf32>
  %s2 = nn.mul %c, %s : tensor<1xf32>, tensor<4x3x3xf32> -> tensor<4x3x3xf32>
  %sb = nn.add %b, %s2 : tensor<3x3xf32>, tensor<4x3x3xf32> -> tensor<4x3x3xf32>
  %m = arith.constant dense<[[true, false, false], [true, true, false], [true, true, true]]> : tensor<3x3xi1>
  %min = arith.constant dense<-3.40282347E+38> : tensor<f32>
  %x = nn.select %m, %sb, %min : tensor<3x3xi1>, tensor<4x3x3xf32>, tensor<f32> -> tensor<4x3x3xf32>
  %p = nn.softmax %x {axis = 2 : i64} : tensor<4x3x3xf32>
  %o = nn.matmul %p, %v : tensor<4x3x3xf32>, tensor<4x3x6xf32> -> tensor<4x3x6xf32>
  return %o : tensor<4x3x6xf32>
}

// The causal mask as an additive constant (0 on and below the diagonal,
// -inf above: the dynamo exporter's), no scale (1), and a key already
// laid out [..., S, E] under an explicit swap (no new transpose).
// CHECK-LABEL: func.func @additive_causal(
// CHECK-SAME:    %[[Q:.*]]: tensor<2x3x4xf32>, %[[K:.*]]: tensor<2x3x4xf32>, %[[V:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT:    %[[O:.*]], %{{.*}} = nn.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 1.000000e+00 : f64}
func.func @additive_causal(%q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>, %v: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %kt = nn.transpose %k {permutation = array<i64: 0, 2, 1>} : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %s = nn.matmul %q, %kt : tensor<2x3x4xf32>, tensor<2x4x3xf32> -> tensor<2x3x3xf32>
  %m = arith.constant dense<[[0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0]]> : tensor<3x3xf32>
  %x = nn.add %s, %m : tensor<2x3x3xf32>, tensor<3x3xf32> -> tensor<2x3x3xf32>
  %p = nn.softmax %x : tensor<2x3x3xf32>
  %o = nn.matmul %p, %v : tensor<2x3x3xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %o : tensor<2x3x4xf32>
}

// Not fused: a bias a parameter reaches (T5's relative position bias): it
// needs a gradient, which nn.attention does not give.
// CHECK-LABEL: func.func @param_bias(
// CHECK-NOT:     nn.attention
// CHECK:         nn.softmax
func.func @param_bias(%q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>, %v: tensor<2x3x4xf32>, %w: tensor<3x3xf32> {train.param = "rel_bias"}) -> tensor<2x3x4xf32> {
  %s = nn.matmul %q, %k {transpose_rhs} : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x3xf32>
  %x = nn.add %s, %w : tensor<2x3x3xf32>, tensor<3x3xf32> -> tensor<2x3x3xf32>
  %p = nn.softmax %x : tensor<2x3x3xf32>
  %o = nn.matmul %p, %v : tensor<2x3x3xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %o : tensor<2x3x4xf32>
}

// Not fused: the probabilities are also returned (need_weights).
// CHECK-LABEL: func.func @weights_used(
// CHECK-NOT:     nn.attention
// CHECK:         nn.softmax
func.func @weights_used(%q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>, %v: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x3xf32>) {
  %s = nn.matmul %q, %k {transpose_rhs} : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x3xf32>
  %p = nn.softmax %s : tensor<2x3x3xf32>
  %o = nn.matmul %p, %v : tensor<2x3x3xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %o, %p : tensor<2x3x4xf32>, tensor<2x3x3xf32>
}

// Not fused: a mask that is not the causal triangle (here its transpose,
// keys before the query masked).
// CHECK-LABEL: func.func @not_causal(
// CHECK-NOT:     nn.attention
// CHECK:         nn.softmax
func.func @not_causal(%q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>, %v: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %s = nn.matmul %q, %k {transpose_rhs} : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x3xf32>
  %m = arith.constant dense<[[false, false, false], [true, false, false], [true, true, false]]> : tensor<3x3xi1>
  %ninf = arith.constant dense<0xFF800000> : tensor<f32>
  %x = nn.select %m, %ninf, %s : tensor<3x3xi1>, tensor<f32>, tensor<2x3x3xf32> -> tensor<2x3x3xf32>
  %p = nn.softmax %x : tensor<2x3x3xf32>
  %o = nn.matmul %p, %v : tensor<2x3x3xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %o : tensor<2x3x4xf32>
}

// Not fused: a fill that is not exact (exp(-100 - max) is not 0 in float).
// CHECK-LABEL: func.func @soft_fill(
// CHECK-NOT:     nn.attention
// CHECK:         nn.softmax
func.func @soft_fill(%q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>, %v: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %s = nn.matmul %q, %k {transpose_rhs} : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x3xf32>
  %m = arith.constant dense<[[false, true, true], [false, false, true], [false, false, false]]> : tensor<3x3xi1>
  %fill = arith.constant dense<-1.0e+02> : tensor<f32>
  %x = nn.select %m, %fill, %s : tensor<3x3xi1>, tensor<f32>, tensor<2x3x3xf32> -> tensor<2x3x3xf32>
  %p = nn.softmax %x : tensor<2x3x3xf32>
  %o = nn.matmul %p, %v : tensor<2x3x3xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %o : tensor<2x3x4xf32>
}

// Not fused: a softmax over the queries, and batch dimensions that
// broadcast (a key shared by every head).
// CHECK-LABEL: func.func @other_axis(
// CHECK-NOT:     nn.attention
// CHECK:         nn.softmax
func.func @other_axis(%q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>, %v: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %s = nn.matmul %q, %k {transpose_rhs} : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x3xf32>
  %p = nn.softmax %s {axis = 1 : i64} : tensor<2x3x3xf32>
  %o = nn.matmul %p, %v : tensor<2x3x3xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %o : tensor<2x3x4xf32>
}
// CHECK-LABEL: func.func @shared_key(
// CHECK-NOT:     nn.attention
// CHECK:         nn.softmax
func.func @shared_key(%q: tensor<2x3x4xf32>, %k: tensor<3x4xf32>, %v: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %s = nn.matmul %q, %k {transpose_rhs} : tensor<2x3x4xf32>, tensor<3x4xf32> -> tensor<2x3x3xf32>
  %p = nn.softmax %s : tensor<2x3x3xf32>
  %o = nn.matmul %p, %v : tensor<2x3x3xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %o : tensor<2x3x4xf32>
}
