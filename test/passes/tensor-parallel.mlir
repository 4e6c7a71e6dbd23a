// RUN: dsc-opt %s --tensor-parallel=tp=2 --split-input-file | FileCheck %s
// The per-rank program is valid IR and goes through autodiff: f's gradient
// is a dist.tp_reduce, g's a dist.tp_copy.
// RUN: dsc-opt %s --tensor-parallel=tp=2 --autodiff --split-input-file | FileCheck %s --check-prefix=GRAD
// tp=1 changes nothing.
// RUN: dsc-opt %s --tensor-parallel=tp=1 --split-input-file | FileCheck %s --check-prefix=ONE

// An MLP, as PyTorch exports nn.Linear (x W^T + b): the first GEMM is column
// parallel (W1 [16, 8] split along its 16 output features, b1 with it; the
// input enters through f = dist.tp_copy), GELU runs on each rank's 8
// features, the second GEMM contracts them and is row parallel (W2 [8, 16]
// split along its input features), followed by g = dist.tp_reduce; the bias
// b2 is added once, after g, and stays whole.
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32> {train.input = "x"}
// CHECK-SAME:    %[[W1:[^:]+]]: tensor<8x8xf32> {dist.tp_split = array<i64: 0, 1, 2>, train.param = "w1"}
// CHECK-SAME:    %[[B1:[^:]+]]: tensor<8xf32> {dist.tp_split = array<i64: 0, 1, 2>, train.param = "b1"}
// CHECK-SAME:    %[[W2:[^:]+]]: tensor<8x8xf32> {dist.tp_split = array<i64: 1, 1, 2>, train.param = "w2"}
// CHECK-SAME:    %[[B2:[^:]+]]: tensor<8xf32> {train.param = "b2"}
// CHECK:         %[[T1:.+]] = nn.transpose %[[W1]] {{.*}} -> tensor<8x8xf32>
// CHECK:         %[[F:.+]] = dist.tp_copy %[[X]] {group = #dist.group<tp, 2>} : tensor<4x8xf32>
// CHECK:         %[[H:.+]] = nn.matmul %[[F]], %[[T1]] {dist.tp = "column"} {{.*}} -> tensor<4x8xf32>
// CHECK:         nn.add %[[B1]], %[[H]] {{.*}} -> tensor<4x8xf32>
// CHECK:         nn.gelu {{.*}} : tensor<4x8xf32>
// CHECK:         %[[R:.+]] = nn.matmul {{.*}} {dist.tp = "row"} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[G:.+]] = dist.tp_reduce %[[R]] {group = #dist.group<tp, 2>} : tensor<4x8xf32>
// CHECK-NEXT:    nn.add %[[B2]], %[[G]]
// GRAD-LABEL: func.func @mlp(
// GRAD-COUNT-2: dist.tp_reduce
// GRAD: dist.tp_copy
// ONE-LABEL: func.func @mlp(
// ONE-NOT: dist.
// ONE: return
func.func @mlp(%x: tensor<4x8xf32> {train.input = "x"}, %w1: tensor<16x8xf32> {train.param = "w1"},
               %b1: tensor<16xf32> {train.param = "b1"}, %w2: tensor<8x16xf32> {train.param = "w2"},
               %b2: tensor<8xf32> {train.param = "b2"}) -> (tensor<f32> {train.loss}) {
  %t1 = nn.transpose %w1 {permutation = array<i64: 1, 0>} : tensor<16x8xf32> -> tensor<8x16xf32>
  %h = nn.matmul %x, %t1 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %hb = nn.add %b1, %h : tensor<16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  %a = nn.gelu %hb : tensor<4x16xf32>
  %t2 = nn.transpose %w2 {permutation = array<i64: 1, 0>} : tensor<8x16xf32> -> tensor<16x8xf32>
  %y = nn.matmul %a, %t2 : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %yb = nn.add %b2, %y : tensor<8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %l = nn.reduce_sum %yb {axes = array<i64: 0, 1>} : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Attention with a fused QKV projection (GPT-2's c_attn, 2 heads of 4):
// its 24 output features are q, k and v, sliced apart, so the split has 3
// blocks (each rank holds head r of q, of k and of v: dist.tp_split [0, 3,
// 2], local 12 features), the slices take local bounds, the heads
// dimension is split (2 -> 1), the score GEMMs are batched over it, the
// softmax runs over keys, and the output projection is row parallel.
// CHECK-LABEL: func.func @attention(
// CHECK-SAME:    tensor<12x8xf32> {dist.tp_split = array<i64: 0, 3, 2>, train.param = "c_attn.weight"}
// CHECK-SAME:    tensor<12xf32> {dist.tp_split = array<i64: 0, 3, 2>, train.param = "c_attn.bias"}
// CHECK-SAME:    tensor<8x4xf32> {dist.tp_split = array<i64: 1, 1, 2>, train.param = "c_proj.weight"}
// CHECK:         dist.tp_copy
// CHECK:         nn.matmul {{.*}} {dist.tp = "column"} {{.*}} -> tensor<2x3x12xf32>
// CHECK:         nn.slice {{.*}} {limit = array<i64: 2, 3, 4>, start = array<i64: 0, 0, 0>{{.*}} -> tensor<2x3x4xf32>
// CHECK:         nn.slice {{.*}} {limit = array<i64: 2, 3, 8>, start = array<i64: 0, 0, 4>{{.*}} -> tensor<2x3x4xf32>
// CHECK:         nn.slice {{.*}} {limit = array<i64: 2, 3, 12>, start = array<i64: 0, 0, 8>{{.*}} -> tensor<2x3x4xf32>
// CHECK:         nn.reshape {{.*}} : tensor<2x3x4xf32> -> tensor<2x3x1x4xf32>
// CHECK:         nn.matmul {{.*}} : tensor<2x1x3x4xf32>, tensor<2x1x4x3xf32> -> tensor<2x1x3x3xf32>
// CHECK:         nn.softmax {{.*}} : tensor<2x1x3x3xf32>
// Dropout on the split attention probabilities is marked with the split, so
// that each rank draws its part of the whole tensor's mask.
// CHECK:         nn.dropout {{.*}} {dist.tp_split = array<i64: 1, 1, 2>, {{.*}} : tensor<2x1x3x3xf32>
// CHECK:         nn.reshape {{.*}} : tensor<2x3x1x4xf32> -> tensor<2x3x4xf32>
// CHECK:         nn.matmul {{.*}} {dist.tp = "row"} : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT:    dist.tp_reduce
func.func @attention(%x: tensor<2x3x8xf32> {train.input = "x"},
                     %wqkv: tensor<24x8xf32> {train.param = "c_attn.weight"},
                     %bqkv: tensor<24xf32> {train.param = "c_attn.bias"},
                     %wo: tensor<8x8xf32> {train.param = "c_proj.weight"}) -> (tensor<f32> {train.loss}) {
  %t = nn.transpose %wqkv {permutation = array<i64: 1, 0>} : tensor<24x8xf32> -> tensor<8x24xf32>
  %p = nn.matmul %x, %t : tensor<2x3x8xf32>, tensor<8x24xf32> -> tensor<2x3x24xf32>
  %pb = nn.add %bqkv, %p : tensor<24xf32>, tensor<2x3x24xf32> -> tensor<2x3x24xf32>
  %q = nn.slice %pb {limit = array<i64: 2, 3, 8>, start = array<i64: 0, 0, 0>, stride = array<i64: 1, 1, 1>} : tensor<2x3x24xf32> -> tensor<2x3x8xf32>
  %k = nn.slice %pb {limit = array<i64: 2, 3, 16>, start = array<i64: 0, 0, 8>, stride = array<i64: 1, 1, 1>} : tensor<2x3x24xf32> -> tensor<2x3x8xf32>
  %v = nn.slice %pb {limit = array<i64: 2, 3, 24>, start = array<i64: 0, 0, 16>, stride = array<i64: 1, 1, 1>} : tensor<2x3x24xf32> -> tensor<2x3x8xf32>
  %q4 = nn.reshape %q : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %k4 = nn.reshape %k : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %v4 = nn.reshape %v : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %qh = nn.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x2x4xf32> -> tensor<2x2x3x4xf32>
  %kh = nn.transpose %k4 {permutation = array<i64: 0, 2, 3, 1>} : tensor<2x3x2x4xf32> -> tensor<2x2x4x3xf32>
  %vh = nn.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x2x4xf32> -> tensor<2x2x3x4xf32>
  %s = nn.matmul %qh, %kh : tensor<2x2x3x4xf32>, tensor<2x2x4x3xf32> -> tensor<2x2x3x3xf32>
  %a0 = nn.softmax %s : tensor<2x2x3x3xf32>
  %a, %am = nn.dropout %a0 {ratio = 1.000000e-01 : f64, rng_stream = 0 : i64} : tensor<2x2x3x3xf32> -> tensor<2x2x3x3xf32>, tensor<2x2x3x3xi1>
  %o = nn.matmul %a, %vh : tensor<2x2x3x3xf32>, tensor<2x2x3x4xf32> -> tensor<2x2x3x4xf32>
  %ot = nn.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x2x3x4xf32> -> tensor<2x3x2x4xf32>
  %om = nn.reshape %ot : tensor<2x3x2x4xf32> -> tensor<2x3x8xf32>
  %to = nn.transpose %wo {permutation = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32>
  %y = nn.matmul %om, %to : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %l = nn.reduce_sum %y {axes = array<i64: 0, 1, 2>} : tensor<2x3x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// What the split cannot cover stays whole, with the reason: a weight also
// read whole elsewhere (tied to an embedding gather), and a GEMM whose
// output feeds the loss directly (an LM head without a vocabulary-parallel
// cross-entropy).
// CHECK-LABEL: func.func @leftovers(
// CHECK-NOT:     dist.tp_split
// CHECK-NOT:     dist.tp_copy
// CHECK:         nn.matmul {{.*}} {dist.tp = "replicated", dist.tp_reason = "{{.*}}also read whole (by nn.gather; a tied parameter?)"}
// With that GEMM whole, the one after it (row parallel before) becomes a
// seed of its own, and is rolled back in turn: its output is summed over
// the split dimension.
// CHECK:         nn.matmul {{.*}} {dist.tp = "replicated", dist.tp_reason = "nn.reduce_sum reads a split value and has no tensor-parallel rule"}
// CHECK:         nn.matmul {{.*}} {dist.tp = "replicated", dist.tp_reason = "nn.cross_entropy reads a split value and has no tensor-parallel rule"}
func.func @leftovers(%ids: tensor<4xi64> {train.input = "ids"}, %y: tensor<4xi64> {train.input = "y"},
                     %emb: tensor<6x8xf32> {train.param = "emb"},
                     %head: tensor<6x8xf32> {train.param = "head"},
                     %w2: tensor<8x6xf32> {train.param = "w2"}) -> (tensor<f32> {train.loss}) {
  %e = nn.gather %emb, %ids : tensor<6x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
  %te = nn.transpose %emb {permutation = array<i64: 1, 0>} : tensor<6x8xf32> -> tensor<8x6xf32>
  %z = nn.matmul %e, %te : tensor<4x8xf32>, tensor<8x6xf32> -> tensor<4x6xf32>
  %t2 = nn.transpose %w2 {permutation = array<i64: 1, 0>} : tensor<8x6xf32> -> tensor<6x8xf32>
  %o = nn.matmul %z, %t2 : tensor<4x6xf32>, tensor<6x8xf32> -> tensor<4x8xf32>
  %th = nn.transpose %head {permutation = array<i64: 1, 0>} : tensor<6x8xf32> -> tensor<8x6xf32>
  %logits = nn.matmul %e, %th : tensor<4x8xf32>, tensor<8x6xf32> -> tensor<4x6xf32>
  %ce = nn.cross_entropy %logits, %y : tensor<4x6xf32>, tensor<4xi64> -> tensor<f32>
  %s = nn.reduce_sum %o {axes = array<i64: 0, 1>} : tensor<4x8xf32> -> tensor<f32>
  %l = nn.add %ce, %s : tensor<f32>, tensor<f32> -> tensor<f32>
  return %l : tensor<f32>
}
