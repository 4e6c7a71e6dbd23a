// RUN: dsc-opt %s --tensor-parallel=tp=2 --sequence-parallel | FileCheck %s
// RUN: dsc-opt %s --tensor-parallel=tp=2 --sequence-parallel --autodiff --gradient-accumulation=steps=1 --optimizer="type=adamw clip=1.0" --tensor-parallel-lower | FileCheck %s --check-prefix=LOWER
// The same on a pipeline stage after pipeline-schedule, whose unrolled
// ops say their phase (train.phase 2: backward) instead of train.backward:
// the weight gradient of every micro-batch reads a fresh all-gather (the
// forward's whole copy was kept for it, tp times the token-split bytes per
// micro-batch in flight).
// RUN: dsc-opt %s --tensor-parallel=tp=2 --sequence-parallel --pipeline-split="stages=2 method=uniform" --autodiff --pipeline-schedule="micro-batches=2" --optimizer="type=adamw clip=1.0" --tensor-parallel-lower --pipeline-expand | FileCheck %s --check-prefix=PIPE

// --sequence-parallel after --tensor-parallel: the layer norm, the bias and
// residual adds and the dropout outside the MLP's tensor-parallel region
// compute on this rank's half of the 4 tokens. The input enters through
// dist.sp_scatter (a local part); f becomes an all-gather (sp_gather
// reduce: backward a reduce-scatter), g a reduce-scatter (sp_scatter
// reduce: backward an all-gather); the loss's reduction over every token
// reads the whole tensor through sp_gather. The layer norm's scale and the
// row-parallel bias get partial gradients: dist.sp_partial. The position
// term, computed from a parameter and read whole by a token-split add, goes
// through f (its gradient summed over the group); the parameter itself is
// not marked. Dropout draws its part of the whole mask (dist.tp_split).
// CHECK-LABEL: func.func @block(
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<4x8xf32> {train.input = "x"}
// CHECK-SAME:    tensor<8xf32> {dist.sp_partial, train.param = "ln.weight"}
// CHECK-SAME:    tensor<8xf32> {dist.sp_partial, train.param = "b2"}
// CHECK-SAME:    tensor<1x8xf32> {train.param = "pos"}
// CHECK:         %[[XP:.+]] = dist.sp_scatter %[[X]] {dim = 0 : i64, group = #dist.group<tp, 2>} : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK:         %[[POS:.+]] = dist.tp_copy %{{.*}} : tensor<1x8xf32>
// CHECK-NEXT:    %[[X1:.+]] = nn.add %[[XP]], %[[POS]] : tensor<2x8xf32>, tensor<1x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT:    %[[LN:.+]] = nn.layer_norm %[[X1]], %{{.*}} : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
// CHECK:         %[[F:.+]] = dist.sp_gather %[[LN]] {dim = 0 : i64, group = #dist.group<tp, 2>, reduce} : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    nn.matmul %[[F]], %{{.*}} {dist.tp = "column"}
// CHECK:         %[[ROW:.+]] = nn.matmul {{.*}} {dist.tp = "row"}
// CHECK-NEXT:    %[[G:.+]] = dist.sp_scatter %[[ROW]] {dim = 0 : i64, group = #dist.group<tp, 2>, reduce} : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT:    %[[YB:.+]] = nn.add %{{.*}}, %[[G]] : tensor<8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT:    %[[R:.+]] = nn.add %[[X1]], %[[YB]] : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT:    %[[D:.+]], %{{.*}} = nn.dropout %[[R]] {dist.tp_split = array<i64: 0, 1, 2>, {{.*}} : tensor<2x8xf32> -> tensor<2x8xf32>, tensor<2x8xi1>
// CHECK-NEXT:    %[[OUT:.+]] = dist.sp_gather %[[D]] {dim = 0 : i64, group = #dist.group<tp, 2>} : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    nn.reduce_sum %[[OUT]]
// CHECK-NOT:     dist.tp_reduce

// Lowered: the parts are chunks of the flattened tensor (all-gather,
// reduce-scatter sum, or a local dist.chunk); backward, each reverses its
// forward; the two partial gradients are summed in one all-reduce on the
// tp group before the norm reads them, and count once in it (they are
// whole), as does the position parameter's.
// LOWER-LABEL: func.func @block(
// LOWER:         %[[ACC:.+]]:7 = train.accumulate
// LOWER:         dist.chunk %{{.*}} {group = #dist.group<tp, 2>} : tensor<32xf32> -> tensor<16xf32>
// LOWER:         dist.all_gather %{{.*}} {group = #dist.group<tp, 2>} : tensor<16xf32> -> tensor<32xf32>
// LOWER:         dist.reduce_scatter sum %{{.*}} {group = #dist.group<tp, 2>} : tensor<32xf32> -> tensor<16xf32>
// Backward: the loss's gradient chunked (the exit gather's), g's gradient
// all-gathered; the column GEMM's weight gradient then reads its input
// all-gathered again from the token-split part (Megatron's backward), not
// the forward's whole copy:
// LOWER:         nn.reduce_sum %{{.*}} {axes = array<i64: 0, 1>}
// LOWER:         dist.chunk
// LOWER:         dist.all_gather
// LOWER:         %[[PART:.+]] = nn.reshape %{{.*}} : tensor<2x8xf32> -> tensor<16xf32>
// LOWER-NEXT:    %[[AG:.+]] = dist.all_gather %[[PART]] {group = #dist.group<tp, 2>} : tensor<16xf32> -> tensor<32xf32>
// LOWER-NEXT:    %[[AGW:.+]] = dist.wait %[[AG]]
// LOWER-NEXT:    %[[IN:.+]] = nn.reshape %[[AGW]] : tensor<32xf32> -> tensor<4x8xf32>
// LOWER-NEXT:    nn.matmul %[[IN]], %{{.*}} {transpose_lhs} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
// LOWER:         %[[AR:.+]]:2 = dist.all_reduce sum %[[ACC]]#1, %[[ACC]]#5 {group = #dist.group<tp, 2>}
// LOWER-NEXT:    %[[SUM:.+]]:2 = dist.wait %[[AR]]#0, %[[AR]]#1
// LOWER:         train.sum_sq %[[SUM]]#0, %[[SUM]]#1, %[[ACC]]#6 :
// LOWER:         train.clip_grad_norm %[[SUM]]#0, {{.*}}, %[[SUM]]#1, %[[ACC]]#6 sum_sq
// PIPE-LABEL: func.func @block_stage1(
// (The row GEMM's input gradient and weight gradient of micro-batch 0
// come first; then the column GEMM's weight gradient.)
// PIPE:         nn.matmul {{.*}} {train.micro = 0 : i64, train.phase = 2 : i64, transpose_lhs}
// PIPE:         %[[PART0:.+]] = nn.reshape %{{.*}} {train.micro = 0 : i64, train.phase = 2 : i64} : tensor<2x8xf32> -> tensor<16xf32>
// PIPE-NEXT:    %[[AG0:.+]] = dist.all_gather %[[PART0]] {group = #dist.group<tp, 2>, train.micro = 0 : i64, train.phase = 2 : i64} : tensor<16xf32> -> tensor<32xf32>
// PIPE-NEXT:    %[[AGW0:.+]] = dist.wait %[[AG0]]
// PIPE-NEXT:    %[[IN0:.+]] = nn.reshape %[[AGW0]] {train.micro = 0 : i64, train.phase = 2 : i64} : tensor<32xf32> -> tensor<4x8xf32>
// PIPE-NEXT:    nn.matmul %[[IN0]], %{{.*}} {train.micro = 0 : i64, train.phase = 2 : i64, transpose_lhs}
// PIPE:         nn.matmul {{.*}} {train.micro = 1 : i64, train.phase = 2 : i64, transpose_lhs}
// PIPE:         %[[PART1:.+]] = nn.reshape %{{.*}} {train.micro = 1 : i64, train.phase = 2 : i64} : tensor<2x8xf32> -> tensor<16xf32>
// PIPE-NEXT:    %[[AG1:.+]] = dist.all_gather %[[PART1]] {group = #dist.group<tp, 2>, train.micro = 1 : i64, train.phase = 2 : i64} : tensor<16xf32> -> tensor<32xf32>
// PIPE-NEXT:    %[[AGW1:.+]] = dist.wait %[[AG1]]
// PIPE-NEXT:    %[[IN1:.+]] = nn.reshape %[[AGW1]] {train.micro = 1 : i64, train.phase = 2 : i64} : tensor<32xf32> -> tensor<4x8xf32>
// PIPE-NEXT:    nn.matmul %[[IN1]], %{{.*}} {train.micro = 1 : i64, train.phase = 2 : i64, transpose_lhs}
func.func @block(%x: tensor<4x8xf32> {train.input = "x"}, %g: tensor<8xf32> {train.param = "ln.weight"},
                 %w1: tensor<16x8xf32> {train.param = "w1"}, %b1: tensor<16xf32> {train.param = "b1"},
                 %w2: tensor<8x16xf32> {train.param = "w2"}, %b2: tensor<8xf32> {train.param = "b2"},
                 %pos: tensor<1x8xf32> {train.param = "pos"}) -> (tensor<f32> {train.loss}) {
  %p = nn.mul %pos, %pos : tensor<1x8xf32>, tensor<1x8xf32> -> tensor<1x8xf32>
  %x1 = nn.add %x, %p : tensor<4x8xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
  %h0 = nn.layer_norm %x1, %g : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %t1 = nn.transpose %w1 {permutation = array<i64: 1, 0>} : tensor<16x8xf32> -> tensor<8x16xf32>
  %h = nn.matmul %h0, %t1 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %hb = nn.add %b1, %h : tensor<16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  %a = nn.gelu %hb : tensor<4x16xf32>
  %t2 = nn.transpose %w2 {permutation = array<i64: 1, 0>} : tensor<8x16xf32> -> tensor<16x8xf32>
  %y = nn.matmul %a, %t2 : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %yb = nn.add %b2, %y : tensor<8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %r = nn.add %x1, %yb : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %d, %m = nn.dropout %r {ratio = 1.000000e-01 : f64, rng_stream = 0 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>, tensor<4x8xi1>
  %l = nn.reduce_sum %d {axes = array<i64: 0, 1>} : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// Mixed precision after the splits: the collectives move what they are
// given, bf16 activations in bf16 (they were cast to fp32 around each one,
// twice Megatron's bytes); the micro-batch's fp32 input is scattered as it
// is.
// RUN: dsc-opt %s --tensor-parallel=tp=2 --sequence-parallel --mixed-precision | FileCheck %s --check-prefix=BF16
// BF16-LABEL: func.func @block(
// BF16:         dist.sp_scatter %arg0 {{.*}} : tensor<4x8xf32> -> tensor<2x8xf32>
// BF16:         dist.tp_copy %{{.*}} : tensor<1x8xbf16>
// BF16:         %[[G:.*]] = dist.sp_gather %{{.*}} {dim = 0 : i64, group = #dist.group<tp, 2>, reduce} : tensor<2x8xbf16> -> tensor<4x8xbf16>
// BF16-NEXT:    nn.matmul %[[G]], %{{.*}} : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
// BF16:         dist.sp_scatter %{{.*}} {dim = 0 : i64, group = #dist.group<tp, 2>, reduce} : tensor<4x8xbf16> -> tensor<2x8xbf16>
