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

// The same attention fused (nn-fusion fuse=attention): nn.attention on each
// rank's head, marked with the split so that its dropout draws its part of
// the whole tensor's bits; autodiff gives its gradient op the same mark.
// CHECK-LABEL: func.func @fused_attention(
// CHECK:         nn.attention {{.*}}dist.tp_split = array<i64: 1, 1, 2>{{.*}} : tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32> -> tensor<2x1x3x4xf32>, tensor<2x1x3x2xf32>
// CHECK:         nn.matmul {{.*}} {dist.tp = "row"} : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT:    dist.tp_reduce
// GRAD-LABEL: func.func @fused_attention(
// GRAD:          nn.attention_grad {{.*}}dist.tp_split = array<i64: 1, 1, 2>{{.*}} : tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>, tensor<2x1x3x2xf32>
func.func @fused_attention(%x: tensor<2x3x8xf32> {train.input = "x"},
                     %wqkv: tensor<24x8xf32> {train.param = "c_attn.weight"},
                     %wo: tensor<8x8xf32> {train.param = "c_proj.weight"}) -> (tensor<f32> {train.loss}) {
  %t = nn.transpose %wqkv {permutation = array<i64: 1, 0>} : tensor<24x8xf32> -> tensor<8x24xf32>
  %pb = nn.matmul %x, %t : tensor<2x3x8xf32>, tensor<8x24xf32> -> tensor<2x3x24xf32>
  %q = nn.slice %pb {limit = array<i64: 2, 3, 8>, start = array<i64: 0, 0, 0>, stride = array<i64: 1, 1, 1>} : tensor<2x3x24xf32> -> tensor<2x3x8xf32>
  %k = nn.slice %pb {limit = array<i64: 2, 3, 16>, start = array<i64: 0, 0, 8>, stride = array<i64: 1, 1, 1>} : tensor<2x3x24xf32> -> tensor<2x3x8xf32>
  %v = nn.slice %pb {limit = array<i64: 2, 3, 24>, start = array<i64: 0, 0, 16>, stride = array<i64: 1, 1, 1>} : tensor<2x3x24xf32> -> tensor<2x3x8xf32>
  %q4 = nn.reshape %q : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %k4 = nn.reshape %k : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %v4 = nn.reshape %v : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %qh = nn.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x2x4xf32> -> tensor<2x2x3x4xf32>
  %kh = nn.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x2x4xf32> -> tensor<2x2x3x4xf32>
  %vh = nn.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x2x4xf32> -> tensor<2x2x3x4xf32>
  %o, %st = nn.attention %qh, %kh, %vh {scale = 0.5 : f64, causal, ratio = 0.1 : f64, rng_stream = 0 : i64} : tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32> -> tensor<2x2x3x4xf32>, tensor<2x2x3x2xf32>
  %ot = nn.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x2x3x4xf32> -> tensor<2x3x2x4xf32>
  %om = nn.reshape %ot : tensor<2x3x2x4xf32> -> tensor<2x3x8xf32>
  %to = nn.transpose %wo {permutation = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32>
  %y = nn.matmul %om, %to : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %l = nn.reduce_sum %y {axes = array<i64: 0, 1, 2>} : tensor<2x3x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// What the split cannot cover stays whole, with the reason: a weight also
// read whole elsewhere (tied to an embedding gather, here by a GEMM that is
// not an LM head), and a GEMM whose output feeds the loss directly (an LM
// head whose logits another op reads too, so that no vocabulary-parallel
// cross-entropy can replace the loss).
// CHECK-LABEL: func.func @leftovers(
// CHECK-NOT:     dist.tp_split
// CHECK-NOT:     dist.tp_copy
// CHECK:         nn.matmul {{.*}} {dist.tp = "replicated", dist.tp_reason = "{{.*}}also read whole (by nn.gather; a tied parameter?)"}
// With that GEMM whole, the one after it (row parallel before) becomes a
// seed of its own, and is rolled back in turn: its output is summed over
// the split dimension.
// CHECK:         nn.matmul {{.*}} {dist.tp = "replicated", dist.tp_reason = "nn.reduce_sum reduces over the split dimension"}
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
  %zl = nn.reduce_sum %logits {axes = array<i64: 0, 1>} : tensor<4x6xf32> -> tensor<f32>
  %l2 = nn.add %l, %zl : tensor<f32>, tensor<f32> -> tensor<f32>
  return %l2 : tensor<f32>
}

// -----

// The vocabulary (Megatron's VocabParallelEmbedding, column-parallel output
// layer and vocab_parallel_cross_entropy): the tied table [V, d] is split
// along V, each rank gathers its rows (dist.tp_part: the others read as
// zeros) and g sums the parts; the LM head is column parallel over V (f on
// its input, its bias split too), and the loss is computed from the parts:
// this part's row maxima, their maximum over the group (dist.tp_max), the
// part's softmax sums and label logits, summed by g, then the loss. A
// position table gathered at constant indices stays whole.
// CHECK-LABEL: func.func @vocab(
// CHECK-SAME:    %[[IDS:[a-z0-9]+]]: tensor<4xi64> {train.input = "ids"}, %[[Y:[a-z0-9]+]]: tensor<4xi64> {train.input = "y"}
// CHECK-SAME:    %[[EMB:[a-z0-9]+]]: tensor<4x8xf32> {dist.tp_split = array<i64: 0, 1, 2>, train.param = "wte"}
// CHECK-SAME:    tensor<4xf32> {dist.tp_split = array<i64: 0, 1, 2>, train.param = "bias"}
// CHECK-SAME:    tensor<4x8xf32> {train.param = "wpe"}
// CHECK:         %[[E:.+]] = nn.gather %[[EMB]], %[[IDS]] {dist.tp_part = 2 : i64} : tensor<4x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[ES:.+]] = dist.tp_reduce %[[E]] {group = #dist.group<tp, 2>} : tensor<4x8xf32>
// CHECK:         %[[F:.+]] = dist.tp_copy %{{.*}} {group = #dist.group<tp, 2>} : tensor<4x8xf32>
// CHECK-NEXT:    %[[LOGITS:.+]] = nn.matmul %[[F]], %[[EMB]] {dist.tp = "column", dist.tp_vocab, transpose_rhs} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x4xf32>
// CHECK-NEXT:    %[[B:.+]] = nn.add %[[LOGITS]], %{{.*}} : tensor<4x4xf32>, tensor<4xf32> -> tensor<4x4xf32>
// CHECK-NEXT:    %[[M:.+]] = nn.reduce_max %[[B]] {axes = array<i64: 1>} : tensor<4x4xf32> -> tensor<4xf32>
// CHECK-NEXT:    %[[MM:.+]] = dist.tp_max %[[M]] {group = #dist.group<tp, 2>} : tensor<4xf32>
// CHECK-NEXT:    %[[S:.+]] = nn.vocab_ce_sums %[[B]], %[[Y]], %[[MM]] {parts = 2 : i64} : tensor<4x4xf32>, tensor<4xi64>, tensor<4xf32> -> tensor<2x4xf32>
// CHECK-NEXT:    %[[SS:.+]] = dist.tp_reduce %[[S]] {group = #dist.group<tp, 2>} : tensor<2x4xf32>
// CHECK-NEXT:    nn.vocab_ce_loss %[[SS]], %[[MM]], %[[Y]] {classes = 8 : i64, ignore_index = -100 : i64} : tensor<2x4xf32>, tensor<4xf32>, tensor<4xi64> -> tensor<f32>
// CHECK-NOT:     nn.cross_entropy
func.func @vocab(%ids: tensor<4xi64> {train.input = "ids"}, %y: tensor<4xi64> {train.input = "y"},
                 %wte: tensor<8x8xf32> {train.param = "wte"},
                 %bias: tensor<8xf32> {train.param = "bias"},
                 %wpe: tensor<4x8xf32> {train.param = "wpe"}) -> (tensor<f32> {train.loss}) {
  %pos = arith.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %e = nn.gather %wte, %ids : tensor<8x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
  %p = nn.gather %wpe, %pos : tensor<4x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
  %x = nn.add %e, %p : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %logits = nn.matmul %x, %wte {transpose_rhs} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %b = nn.add %logits, %bias : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %ce = nn.cross_entropy %b, %y {ignore_index = -100 : i64} : tensor<4x8xf32>, tensor<4xi64> -> tensor<f32>
  return %ce : tensor<f32>
}

// -----

// LLaMA's MLP behind its RMSNorm: the norm (mean of squares over the
// features, its weight broadcast) runs whole before the split; SwiGLU's gate
// and up projections read the same normed input and are two column-parallel
// seeds sharing one f; silu(gate) * up multiplies two values split alike,
// each rank its 8 of the 16 features; the down projection is row parallel.
// CHECK-LABEL: func.func @swiglu(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x3x8xf32> {train.input = "x"}
// CHECK-SAME:    %[[G:[^:]+]]: tensor<8xf32> {train.param = "norm.weight"}
// CHECK-SAME:    tensor<8x8xf32> {dist.tp_split = array<i64: 0, 1, 2>, train.param = "gate_proj.weight"}
// CHECK-SAME:    tensor<8x8xf32> {dist.tp_split = array<i64: 0, 1, 2>, train.param = "up_proj.weight"}
// CHECK-SAME:    tensor<8x8xf32> {dist.tp_split = array<i64: 1, 1, 2>, train.param = "down_proj.weight"}
// CHECK-NOT:     dist.tp_copy
// CHECK:         nn.reduce_mean {{.*}} : tensor<2x3x8xf32> -> tensor<2x3x1xf32>
// CHECK:         %[[N:.+]] = nn.mul %[[G]], %{{.*}} : tensor<8xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>
// CHECK:         %[[F:.+]] = dist.tp_copy %[[N]] {group = #dist.group<tp, 2>} : tensor<2x3x8xf32>
// CHECK-NEXT:    %[[GATE:.+]] = nn.matmul %[[F]], %{{.*}} {dist.tp = "column"} : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT:    %[[SIG:.+]] = nn.sigmoid %[[GATE]] : tensor<2x3x8xf32>
// CHECK-NEXT:    %[[SILU:.+]] = nn.mul %[[GATE]], %[[SIG]] : tensor<2x3x8xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>
// CHECK-NOT:     dist.tp_copy
// CHECK:         %[[UP:.+]] = nn.matmul %[[F]], %{{.*}} {dist.tp = "column"} : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT:    %[[GU:.+]] = nn.mul %[[SILU]], %[[UP]] : tensor<2x3x8xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>
// CHECK:         nn.matmul %[[GU]], %{{.*}} {dist.tp = "row"} : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT:    dist.tp_reduce
// Backward: g's gradient (a tp_copy), then the normed input's gradient,
// the sum of the two GEMMs', all-reduced once (f's gradient).
// GRAD-LABEL: func.func @swiglu(
// GRAD:         dist.tp_copy
// GRAD-NOT:     dist.tp_copy
// GRAD:         dist.tp_reduce
// GRAD:         dist.tp_copy
// GRAD-NOT:     dist.tp_
// GRAD:         dist.tp_reduce
// GRAD-NOT:     dist.tp_
// GRAD:         return
func.func @swiglu(%x: tensor<2x3x8xf32> {train.input = "x"},
                  %g: tensor<8xf32> {train.param = "norm.weight"},
                  %wg: tensor<16x8xf32> {train.param = "gate_proj.weight"},
                  %wu: tensor<16x8xf32> {train.param = "up_proj.weight"},
                  %wd: tensor<8x16xf32> {train.param = "down_proj.weight"}) -> (tensor<f32> {train.loss}) {
  %c2 = arith.constant dense<2.0> : tensor<f32>
  %sq = nn.pow %x, %c2 : tensor<2x3x8xf32>, tensor<f32> -> tensor<2x3x8xf32>
  %ms = nn.reduce_mean %sq {axes = array<i64: -1>, keepdims} : tensor<2x3x8xf32> -> tensor<2x3x1xf32>
  %eps = arith.constant dense<1.0e-6> : tensor<f32>
  %ve = nn.add %ms, %eps : tensor<2x3x1xf32>, tensor<f32> -> tensor<2x3x1xf32>
  %rt = nn.sqrt %ve : tensor<2x3x1xf32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %inv = nn.div %one, %rt : tensor<f32>, tensor<2x3x1xf32> -> tensor<2x3x1xf32>
  %n = nn.mul %x, %inv : tensor<2x3x8xf32>, tensor<2x3x1xf32> -> tensor<2x3x8xf32>
  %h = nn.mul %g, %n : tensor<8xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  %tg = nn.transpose %wg {permutation = array<i64: 1, 0>} : tensor<16x8xf32> -> tensor<8x16xf32>
  %a = nn.matmul %h, %tg : tensor<2x3x8xf32>, tensor<8x16xf32> -> tensor<2x3x16xf32>
  %s = nn.sigmoid %a : tensor<2x3x16xf32>
  %silu = nn.mul %a, %s : tensor<2x3x16xf32>, tensor<2x3x16xf32> -> tensor<2x3x16xf32>
  %tu = nn.transpose %wu {permutation = array<i64: 1, 0>} : tensor<16x8xf32> -> tensor<8x16xf32>
  %u = nn.matmul %h, %tu : tensor<2x3x8xf32>, tensor<8x16xf32> -> tensor<2x3x16xf32>
  %gu = nn.mul %silu, %u : tensor<2x3x16xf32>, tensor<2x3x16xf32> -> tensor<2x3x16xf32>
  %td = nn.transpose %wd {permutation = array<i64: 1, 0>} : tensor<8x16xf32> -> tensor<16x8xf32>
  %y = nn.matmul %gu, %td : tensor<2x3x16xf32>, tensor<16x8xf32> -> tensor<2x3x8xf32>
  %l = nn.reduce_sum %y {axes = array<i64: 0, 1, 2>} : tensor<2x3x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// SwiGLU with gate and up fused in one projection, chunked in two (as
// Megatron-Core's linear_fc1 stores them): its 32 output features are 2
// blocks, each rank holds its half of the gate and of the up features.
// CHECK-LABEL: func.func @swiglu_fused(
// CHECK-SAME:    tensor<16x8xf32> {dist.tp_split = array<i64: 0, 2, 2>, train.param = "gate_up_proj.weight"}
// CHECK-SAME:    tensor<8x8xf32> {dist.tp_split = array<i64: 1, 1, 2>, train.param = "down_proj.weight"}
// CHECK:         nn.matmul {{.*}} {dist.tp = "column"} : tensor<2x3x8xf32>, tensor<8x16xf32> -> tensor<2x3x16xf32>
// CHECK-NEXT:    nn.slice {{.*}} {limit = array<i64: 2, 3, 8>, start = array<i64: 0, 0, 0>{{.*}} -> tensor<2x3x8xf32>
// CHECK-NEXT:    nn.slice {{.*}} {limit = array<i64: 2, 3, 16>, start = array<i64: 0, 0, 8>{{.*}} -> tensor<2x3x8xf32>
// CHECK:         nn.matmul {{.*}} {dist.tp = "row"} : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT:    dist.tp_reduce
func.func @swiglu_fused(%x: tensor<2x3x8xf32> {train.input = "x"},
                        %wgu: tensor<32x8xf32> {train.param = "gate_up_proj.weight"},
                        %wd: tensor<8x16xf32> {train.param = "down_proj.weight"}) -> (tensor<f32> {train.loss}) {
  %t = nn.transpose %wgu {permutation = array<i64: 1, 0>} : tensor<32x8xf32> -> tensor<8x32xf32>
  %p = nn.matmul %x, %t : tensor<2x3x8xf32>, tensor<8x32xf32> -> tensor<2x3x32xf32>
  %a = nn.slice %p {limit = array<i64: 2, 3, 16>, start = array<i64: 0, 0, 0>, stride = array<i64: 1, 1, 1>} : tensor<2x3x32xf32> -> tensor<2x3x16xf32>
  %u = nn.slice %p {limit = array<i64: 2, 3, 32>, start = array<i64: 0, 0, 16>, stride = array<i64: 1, 1, 1>} : tensor<2x3x32xf32> -> tensor<2x3x16xf32>
  %s = nn.sigmoid %a : tensor<2x3x16xf32>
  %silu = nn.mul %a, %s : tensor<2x3x16xf32>, tensor<2x3x16xf32> -> tensor<2x3x16xf32>
  %gu = nn.mul %silu, %u : tensor<2x3x16xf32>, tensor<2x3x16xf32> -> tensor<2x3x16xf32>
  %td = nn.transpose %wd {permutation = array<i64: 1, 0>} : tensor<8x16xf32> -> tensor<16x8xf32>
  %y = nn.matmul %gu, %td : tensor<2x3x16xf32>, tensor<16x8xf32> -> tensor<2x3x8xf32>
  %l = nn.reduce_sum %y {axes = array<i64: 0, 1, 2>} : tensor<2x3x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Attention with rotary position embeddings as transformers writes it
// (2 heads of 4; q, k, v projections separate, no biases): rotate_half
// slices the halves of each head's dimensions, negates the second and
// concatenates them swapped; the cos/sin tables [seq, head_dim] broadcast
// over the batch and the heads. The split is along the heads, so all of it
// runs on each rank's head with the whole tables, which take no f (they
// carry no gradient).
// CHECK-LABEL: func.func @rotary(
// CHECK-SAME:    tensor<4x8xf32> {dist.tp_split = array<i64: 0, 1, 2>, train.param = "q_proj.weight"}
// CHECK-SAME:    tensor<4x8xf32> {dist.tp_split = array<i64: 0, 1, 2>, train.param = "k_proj.weight"}
// CHECK-SAME:    tensor<4x8xf32> {dist.tp_split = array<i64: 0, 1, 2>, train.param = "v_proj.weight"}
// CHECK-SAME:    tensor<8x4xf32> {dist.tp_split = array<i64: 1, 1, 2>, train.param = "o_proj.weight"}
// CHECK-SAME:    %[[COS:[^:]+]]: tensor<3x4xf32> {train.buffer = "rotary_emb.cos_cached"}
// CHECK-SAME:    %[[SIN:[^:]+]]: tensor<3x4xf32> {train.buffer = "rotary_emb.sin_cached"}
// CHECK:         dist.tp_copy
// CHECK-NOT:     dist.tp_copy
// CHECK:         %[[Q:.+]] = nn.transpose %{{.*}} : tensor<2x3x1x4xf32> -> tensor<2x1x3x4xf32>
// CHECK:         nn.mul %[[Q]], %[[COS]] : tensor<2x1x3x4xf32>, tensor<3x4xf32> -> tensor<2x1x3x4xf32>
// CHECK-NEXT:    %[[Q1:.+]] = nn.slice %[[Q]] {limit = array<i64: 2, 1, 3, 2>, start = array<i64: 0, 0, 0, 0>{{.*}} -> tensor<2x1x3x2xf32>
// CHECK-NEXT:    %[[Q2:.+]] = nn.slice %[[Q]] {limit = array<i64: 2, 1, 3, 4>, start = array<i64: 0, 0, 0, 2>{{.*}} -> tensor<2x1x3x2xf32>
// CHECK-NEXT:    %[[NQ2:.+]] = nn.neg %[[Q2]] : tensor<2x1x3x2xf32>
// CHECK-NEXT:    %[[R:.+]] = nn.concat %[[NQ2]], %[[Q1]] {axis = -1 : i64} : tensor<2x1x3x2xf32>, tensor<2x1x3x2xf32> -> tensor<2x1x3x4xf32>
// CHECK-NEXT:    nn.mul %[[R]], %[[SIN]] : tensor<2x1x3x4xf32>, tensor<3x4xf32> -> tensor<2x1x3x4xf32>
// CHECK:         nn.concat {{.*}} -> tensor<2x1x3x4xf32>
// CHECK:         nn.matmul {{.*}} : tensor<2x1x3x4xf32>, tensor<2x1x4x3xf32> -> tensor<2x1x3x3xf32>
// CHECK:         nn.softmax {{.*}} : tensor<2x1x3x3xf32>
// CHECK:         nn.matmul {{.*}} {dist.tp = "row"} : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT:    dist.tp_reduce
func.func @rotary(%x: tensor<2x3x8xf32> {train.input = "x"},
                  %wq: tensor<8x8xf32> {train.param = "q_proj.weight"},
                  %wk: tensor<8x8xf32> {train.param = "k_proj.weight"},
                  %wv: tensor<8x8xf32> {train.param = "v_proj.weight"},
                  %wo: tensor<8x8xf32> {train.param = "o_proj.weight"},
                  %cos: tensor<3x4xf32> {train.buffer = "rotary_emb.cos_cached"},
                  %sin: tensor<3x4xf32> {train.buffer = "rotary_emb.sin_cached"}) -> (tensor<f32> {train.loss}) {
  %tq = nn.transpose %wq {permutation = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32>
  %q = nn.matmul %x, %tq : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %q4 = nn.reshape %q : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %qh = nn.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x2x4xf32> -> tensor<2x2x3x4xf32>
  %tk = nn.transpose %wk {permutation = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32>
  %k = nn.matmul %x, %tk : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %k4 = nn.reshape %k : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %kh = nn.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x2x4xf32> -> tensor<2x2x3x4xf32>
  %tv = nn.transpose %wv {permutation = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32>
  %v = nn.matmul %x, %tv : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %v4 = nn.reshape %v : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %vh = nn.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x2x4xf32> -> tensor<2x2x3x4xf32>
  // q * cos + rotate_half(q) * sin, and the same for k.
  %qc = nn.mul %qh, %cos : tensor<2x2x3x4xf32>, tensor<3x4xf32> -> tensor<2x2x3x4xf32>
  %q1 = nn.slice %qh {limit = array<i64: 2, 2, 3, 2>, start = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1, 1, 1>} : tensor<2x2x3x4xf32> -> tensor<2x2x3x2xf32>
  %q2 = nn.slice %qh {limit = array<i64: 2, 2, 3, 4>, start = array<i64: 0, 0, 0, 2>, stride = array<i64: 1, 1, 1, 1>} : tensor<2x2x3x4xf32> -> tensor<2x2x3x2xf32>
  %nq2 = nn.neg %q2 : tensor<2x2x3x2xf32>
  %qr = nn.concat %nq2, %q1 {axis = -1 : i64} : tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32> -> tensor<2x2x3x4xf32>
  %qs = nn.mul %qr, %sin : tensor<2x2x3x4xf32>, tensor<3x4xf32> -> tensor<2x2x3x4xf32>
  %qe = nn.add %qc, %qs : tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32> -> tensor<2x2x3x4xf32>
  %kc = nn.mul %kh, %cos : tensor<2x2x3x4xf32>, tensor<3x4xf32> -> tensor<2x2x3x4xf32>
  %k1 = nn.slice %kh {limit = array<i64: 2, 2, 3, 2>, start = array<i64: 0, 0, 0, 0>, stride = array<i64: 1, 1, 1, 1>} : tensor<2x2x3x4xf32> -> tensor<2x2x3x2xf32>
  %k2 = nn.slice %kh {limit = array<i64: 2, 2, 3, 4>, start = array<i64: 0, 0, 0, 2>, stride = array<i64: 1, 1, 1, 1>} : tensor<2x2x3x4xf32> -> tensor<2x2x3x2xf32>
  %nk2 = nn.neg %k2 : tensor<2x2x3x2xf32>
  %kr = nn.concat %nk2, %k1 {axis = -1 : i64} : tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32> -> tensor<2x2x3x4xf32>
  %ks = nn.mul %kr, %sin : tensor<2x2x3x4xf32>, tensor<3x4xf32> -> tensor<2x2x3x4xf32>
  %ke = nn.add %kc, %ks : tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32> -> tensor<2x2x3x4xf32>
  %kt = nn.transpose %ke {permutation = array<i64: 0, 1, 3, 2>} : tensor<2x2x3x4xf32> -> tensor<2x2x4x3xf32>
  %sc = nn.matmul %qe, %kt : tensor<2x2x3x4xf32>, tensor<2x2x4x3xf32> -> tensor<2x2x3x3xf32>
  %p = nn.softmax %sc : tensor<2x2x3x3xf32>
  %o = nn.matmul %p, %vh : tensor<2x2x3x3xf32>, tensor<2x2x3x4xf32> -> tensor<2x2x3x4xf32>
  %ot = nn.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x2x3x4xf32> -> tensor<2x3x2x4xf32>
  %om = nn.reshape %ot : tensor<2x3x2x4xf32> -> tensor<2x3x8xf32>
  %to = nn.transpose %wo {permutation = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32>
  %y = nn.matmul %om, %to : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %l = nn.reduce_sum %y {axes = array<i64: 0, 1, 2>} : tensor<2x3x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A per-head RMSNorm (QK-norm: over each head's 4 dimensions, its weight
// shared by the heads): the mean of squares reduces a dimension other than
// the heads, so it runs on each rank's head; the weight is whole and
// broadcast over the heads, so it enters through f: each rank's gradient of
// it sums over its own head only, and f's gradient (a tp_reduce) adds the
// ranks' parts.
// CHECK-LABEL: func.func @qk_norm(
// CHECK-SAME:    %[[GQ:[^:]+]]: tensor<4xf32> {train.param = "q_norm.weight"}
// CHECK:         nn.reduce_mean {{.*}} {axes = array<i64: -1>, keepdims} : tensor<2x3x1x4xf32> -> tensor<2x3x1x1xf32>
// CHECK:         %[[F:.+]] = dist.tp_copy %[[GQ]] {group = #dist.group<tp, 2>} : tensor<4xf32>
// CHECK-NEXT:    nn.mul %[[F]], %{{.*}} : tensor<4xf32>, tensor<2x3x1x4xf32> -> tensor<2x3x1x4xf32>
// CHECK:         nn.matmul {{.*}} {dist.tp = "row"}
// GRAD-LABEL: func.func @qk_norm(
// GRAD:         %[[DG:.+]] = dist.tp_reduce %{{.*}} : tensor<4xf32>
// GRAD:         return %{{.*}}, %{{.*}}, %[[DG]], %{{.*}} : tensor<f32>, tensor<4x8xf32>, tensor<4xf32>, tensor<8x4xf32>
func.func @qk_norm(%x: tensor<2x3x8xf32> {train.input = "x"},
                   %wq: tensor<8x8xf32> {train.param = "q_proj.weight"},
                   %gq: tensor<4xf32> {train.param = "q_norm.weight"},
                   %wo: tensor<8x8xf32> {train.param = "o_proj.weight"}) -> (tensor<f32> {train.loss}) {
  %tq = nn.transpose %wq {permutation = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32>
  %q = nn.matmul %x, %tq : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %q4 = nn.reshape %q : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %c2 = arith.constant dense<2.0> : tensor<f32>
  %sq = nn.pow %q4, %c2 : tensor<2x3x2x4xf32>, tensor<f32> -> tensor<2x3x2x4xf32>
  %ms = nn.reduce_mean %sq {axes = array<i64: -1>, keepdims} : tensor<2x3x2x4xf32> -> tensor<2x3x2x1xf32>
  %eps = arith.constant dense<1.0e-6> : tensor<f32>
  %ve = nn.add %ms, %eps : tensor<2x3x2x1xf32>, tensor<f32> -> tensor<2x3x2x1xf32>
  %rt = nn.sqrt %ve : tensor<2x3x2x1xf32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %inv = nn.div %one, %rt : tensor<f32>, tensor<2x3x2x1xf32> -> tensor<2x3x2x1xf32>
  %n = nn.mul %q4, %inv : tensor<2x3x2x4xf32>, tensor<2x3x2x1xf32> -> tensor<2x3x2x4xf32>
  %h = nn.mul %gq, %n : tensor<4xf32>, tensor<2x3x2x4xf32> -> tensor<2x3x2x4xf32>
  %hm = nn.reshape %h : tensor<2x3x2x4xf32> -> tensor<2x3x8xf32>
  %to = nn.transpose %wo {permutation = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32>
  %y = nn.matmul %hm, %to : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %l = nn.reduce_sum %y {axes = array<i64: 0, 1, 2>} : tensor<2x3x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// An RMSNorm over the features a column-parallel GEMM split (OLMo-2's
// QK-norm over the whole projection) reduces over the split dimension: that
// GEMM stays whole, with the reason.
// CHECK-LABEL: func.func @norm_over_split(
// CHECK-NOT:     dist.tp_copy
// CHECK:         nn.matmul {{.*}} {dist.tp = "replicated", dist.tp_reason = "nn.reduce_mean reduces over the split dimension"}
func.func @norm_over_split(%x: tensor<2x3x8xf32> {train.input = "x"},
                           %wq: tensor<8x8xf32> {train.param = "q_proj.weight"}) -> (tensor<f32> {train.loss}) {
  %tq = nn.transpose %wq {permutation = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32>
  %q = nn.matmul %x, %tq : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %c2 = arith.constant dense<2.0> : tensor<f32>
  %sq = nn.pow %q, %c2 : tensor<2x3x8xf32>, tensor<f32> -> tensor<2x3x8xf32>
  %ms = nn.reduce_mean %sq {axes = array<i64: -1>, keepdims} : tensor<2x3x8xf32> -> tensor<2x3x1xf32>
  %n = nn.mul %q, %ms : tensor<2x3x8xf32>, tensor<2x3x1xf32> -> tensor<2x3x8xf32>
  %l = nn.reduce_sum %n {axes = array<i64: 0, 1, 2>} : tensor<2x3x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Two column-parallel outputs concatenated along the split features: the
// blocks append (each rank holds its half of each), so the row-parallel
// GEMM after them splits its weight into 2 blocks.
// CHECK-LABEL: func.func @concat_blocks(
// CHECK-SAME:    tensor<8x8xf32> {dist.tp_split = array<i64: 1, 2, 2>, train.param = "o.weight"}
// CHECK:         %[[A:.+]] = nn.matmul {{.*}} {dist.tp = "column"} {{.*}} -> tensor<2x4xf32>
// CHECK:         %[[B:.+]] = nn.matmul {{.*}} {dist.tp = "column"} {{.*}} -> tensor<2x4xf32>
// CHECK-NEXT:    %[[C:.+]] = nn.concat %[[A]], %[[B]] {axis = 1 : i64} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x8xf32>
// CHECK:         nn.matmul %[[C]], %{{.*}} {dist.tp = "row"} : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
func.func @concat_blocks(%x: tensor<2x8xf32> {train.input = "x"},
                         %wa: tensor<8x8xf32> {train.param = "a.weight"},
                         %wb: tensor<8x8xf32> {train.param = "b.weight"},
                         %wo: tensor<8x16xf32> {train.param = "o.weight"}) -> (tensor<f32> {train.loss}) {
  %ta = nn.transpose %wa {permutation = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32>
  %a = nn.matmul %x, %ta : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %tb = nn.transpose %wb {permutation = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32>
  %b = nn.matmul %x, %tb : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %c = nn.concat %a, %b {axis = 1 : i64} : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x16xf32>
  %to = nn.transpose %wo {permutation = array<i64: 1, 0>} : tensor<8x16xf32> -> tensor<16x8xf32>
  %y = nn.matmul %c, %to : tensor<2x16xf32>, tensor<16x8xf32> -> tensor<2x8xf32>
  %l = nn.reduce_sum %y {axes = array<i64: 0, 1>} : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The same with the axis counted from the end (ONNX's and torch.cat's
// dim=-1): still the split dimension, so the blocks append.
// CHECK-LABEL: func.func @concat_blocks_negative_axis(
// CHECK-SAME:    tensor<8x8xf32> {dist.tp_split = array<i64: 1, 2, 2>, train.param = "o.weight"}
// CHECK:         nn.concat %{{.*}}, %{{.*}} {axis = -1 : i64} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x8xf32>
func.func @concat_blocks_negative_axis(%x: tensor<2x8xf32> {train.input = "x"},
                         %wa: tensor<8x8xf32> {train.param = "a.weight"},
                         %wb: tensor<8x8xf32> {train.param = "b.weight"},
                         %wo: tensor<8x16xf32> {train.param = "o.weight"}) -> (tensor<f32> {train.loss}) {
  %ta = nn.transpose %wa {permutation = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32>
  %a = nn.matmul %x, %ta : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %tb = nn.transpose %wb {permutation = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32>
  %b = nn.matmul %x, %tb : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %c = nn.concat %a, %b {axis = -1 : i64} : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x16xf32>
  %to = nn.transpose %wo {permutation = array<i64: 1, 0>} : tensor<8x16xf32> -> tensor<16x8xf32>
  %y = nn.matmul %c, %to : tensor<2x16xf32>, tensor<16x8xf32> -> tensor<2x8xf32>
  %l = nn.reduce_sum %y {axes = array<i64: 0, 1>} : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Grouped-query attention (4 query heads of 2, 2 key/value heads): k and v
// are repeated for their groups by transformers' repeat_kv (a unit dimension,
// broadcast along it, merged into the heads). The split stays on the kv
// heads through the broadcast, so each rank holds kv head r repeated for its
// 2 query heads, query heads 2r and 2r+1: the groups stay together.
// CHECK-LABEL: func.func @gqa(
// CHECK-SAME:    tensor<4x8xf32> {dist.tp_split = array<i64: 0, 1, 2>, train.param = "q_proj.weight"}
// CHECK-SAME:    tensor<2x8xf32> {dist.tp_split = array<i64: 0, 1, 2>, train.param = "k_proj.weight"}
// CHECK-SAME:    tensor<2x8xf32> {dist.tp_split = array<i64: 0, 1, 2>, train.param = "v_proj.weight"}
// CHECK-SAME:    tensor<8x4xf32> {dist.tp_split = array<i64: 1, 1, 2>, train.param = "o_proj.weight"}
// CHECK:         nn.reshape {{.*}} : tensor<2x1x3x2xf32> -> tensor<2x1x1x3x2xf32>
// CHECK-NEXT:    nn.broadcast {{.*}} : tensor<2x1x1x3x2xf32> -> tensor<2x1x2x3x2xf32>
// CHECK-NEXT:    nn.reshape {{.*}} : tensor<2x1x2x3x2xf32> -> tensor<2x2x3x2xf32>
// CHECK:         nn.matmul {{.*}} : tensor<2x2x3x2xf32>, tensor<2x2x2x3xf32> -> tensor<2x2x3x3xf32>
// CHECK:         nn.matmul {{.*}} {dist.tp = "row"} : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT:    dist.tp_reduce
func.func @gqa(%x: tensor<2x3x8xf32> {train.input = "x"},
               %wq: tensor<8x8xf32> {train.param = "q_proj.weight"},
               %wk: tensor<4x8xf32> {train.param = "k_proj.weight"},
               %wv: tensor<4x8xf32> {train.param = "v_proj.weight"},
               %wo: tensor<8x8xf32> {train.param = "o_proj.weight"}) -> (tensor<f32> {train.loss}) {
  %tq = nn.transpose %wq {permutation = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32>
  %q = nn.matmul %x, %tq : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %q4 = nn.reshape %q : tensor<2x3x8xf32> -> tensor<2x3x4x2xf32>
  %qh = nn.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x4x2xf32> -> tensor<2x4x3x2xf32>
  %tk = nn.transpose %wk {permutation = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %k = nn.matmul %x, %tk : tensor<2x3x8xf32>, tensor<8x4xf32> -> tensor<2x3x4xf32>
  %k4 = nn.reshape %k : tensor<2x3x4xf32> -> tensor<2x3x2x2xf32>
  %kh = nn.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x2x2xf32> -> tensor<2x2x3x2xf32>
  %k5 = nn.reshape %kh : tensor<2x2x3x2xf32> -> tensor<2x2x1x3x2xf32>
  %kb = nn.broadcast %k5 : tensor<2x2x1x3x2xf32> -> tensor<2x2x2x3x2xf32>
  %kr = nn.reshape %kb : tensor<2x2x2x3x2xf32> -> tensor<2x4x3x2xf32>
  %tv = nn.transpose %wv {permutation = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %v = nn.matmul %x, %tv : tensor<2x3x8xf32>, tensor<8x4xf32> -> tensor<2x3x4xf32>
  %v4 = nn.reshape %v : tensor<2x3x4xf32> -> tensor<2x3x2x2xf32>
  %vh = nn.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x2x2xf32> -> tensor<2x2x3x2xf32>
  %v5 = nn.reshape %vh : tensor<2x2x3x2xf32> -> tensor<2x2x1x3x2xf32>
  %vb = nn.broadcast %v5 : tensor<2x2x1x3x2xf32> -> tensor<2x2x2x3x2xf32>
  %vr = nn.reshape %vb : tensor<2x2x2x3x2xf32> -> tensor<2x4x3x2xf32>
  %kt = nn.transpose %kr {permutation = array<i64: 0, 1, 3, 2>} : tensor<2x4x3x2xf32> -> tensor<2x4x2x3xf32>
  %sc = nn.matmul %qh, %kt : tensor<2x4x3x2xf32>, tensor<2x4x2x3xf32> -> tensor<2x4x3x3xf32>
  %p = nn.softmax %sc : tensor<2x4x3x3xf32>
  %o = nn.matmul %p, %vr : tensor<2x4x3x3xf32>, tensor<2x4x3x2xf32> -> tensor<2x4x3x2xf32>
  %ot = nn.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x4x3x2xf32> -> tensor<2x3x4x2xf32>
  %om = nn.reshape %ot : tensor<2x3x4x2xf32> -> tensor<2x3x8xf32>
  %to = nn.transpose %wo {permutation = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32>
  %y = nn.matmul %om, %to : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
  %l = nn.reduce_sum %y {axes = array<i64: 0, 1, 2>} : tensor<2x3x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A classifier's 5 classes over tp 2 (and a table of 97 rows feeding it):
// the head feeding the loss stays whole, with the reason, instead of an
// error; the hidden GEMMs before it still split.
// CHECK-LABEL: func.func @classes
// CHECK-SAME:    %{{.*}}: tensor<97x8xf32> {train.param = "emb"}
// CHECK-SAME:    %{{.*}}: tensor<5x8xf32> {train.param = "head"}
// CHECK:         nn.gather
// CHECK-NOT:     dist.tp_part
// CHECK:         nn.matmul {{.*}} {dist.tp = "column", transpose_rhs}
// CHECK:         nn.matmul {{.*}} {dist.tp = "row", transpose_rhs}
// CHECK:         nn.matmul {{.*}} {dist.tp = "replicated", dist.tp_reason = "the 5 classes of the head feeding the loss do not split into tp 2 parts (pad them to a multiple of tp, as Megatron's --make-vocab-size-divisible-by does, to split the head)", transpose_rhs}
// CHECK:         nn.cross_entropy
// CHECK-NOT:     nn.vocab_ce_loss
func.func @classes(%ids: tensor<2xi64> {train.input = "ids"}, %y: tensor<2xi64> {train.input = "y"},
                   %emb: tensor<97x8xf32> {train.param = "emb"},
                   %w1: tensor<16x8xf32> {train.param = "w1"},
                   %w2: tensor<8x16xf32> {train.param = "w2"},
                   %head: tensor<5x8xf32> {train.param = "head"}) -> (tensor<f32> {train.loss}) {
  %x = nn.gather %emb, %ids {axis = 0 : i64} : tensor<97x8xf32>, tensor<2xi64> -> tensor<2x8xf32>
  %h = nn.matmul %x, %w1 {transpose_rhs} : tensor<2x8xf32>, tensor<16x8xf32> -> tensor<2x16xf32>
  %z = nn.matmul %h, %w2 {transpose_rhs} : tensor<2x16xf32>, tensor<8x16xf32> -> tensor<2x8xf32>
  %logits = nn.matmul %z, %head {transpose_rhs} : tensor<2x8xf32>, tensor<5x8xf32> -> tensor<2x5xf32>
  %ce = nn.cross_entropy %logits, %y : tensor<2x5xf32>, tensor<2xi64> -> tensor<f32>
  return %ce : tensor<f32>
}
