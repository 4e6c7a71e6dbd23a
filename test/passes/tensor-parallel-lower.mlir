// RUN: dsc-opt %s --tensor-parallel=tp=2 --autodiff --optimizer="type=adamw clip=1.0" --tensor-parallel-lower | FileCheck %s
// Without clipping the norm is still computed (and logged): the same sum.
// RUN: dsc-opt %s --tensor-parallel=tp=2 --autodiff --optimizer="type=adamw" --tensor-parallel-lower | FileCheck %s --check-prefix=NOCLIP
// With ZeRO 1 over dp 2 (run before it, as dsc does):
// RUN: dsc-opt %s --tensor-parallel=tp=2 --autodiff --gradient-accumulation=steps=1 --optimizer="type=adamw clip=1.0" --zero="stage=1 dp=2" --tensor-parallel-lower | FileCheck %s --check-prefix=ZERO
// With LAMB, the split parameters' trust-ratio sums are partial, summed over the
// group in one all-reduce; a whole parameter's (b2) are its own.
// RUN: dsc-opt %s --tensor-parallel=tp=2 --autodiff --optimizer="type=lamb clip=1.0" --tensor-parallel-lower | FileCheck %s --check-prefix=LAMB
// LAMB-LABEL:  func.func @mlp(
// LAMB:        %[[SW1:.*]] = train.lamb_stats %arg1, %clipped#0, {{.*}} : tensor<8x8xf32> -> tensor<2xf32>
// LAMB-NEXT:   %[[SB1:.*]] = train.lamb_stats %arg2, %clipped#1, {{.*}} : tensor<8xf32> -> tensor<2xf32>
// LAMB-NEXT:   %[[SW2:.*]] = train.lamb_stats %arg3, %clipped#2, {{.*}} : tensor<8x8xf32> -> tensor<2xf32>
// LAMB-NEXT:   %[[CAT:.*]] = nn.concat %[[SW1]], %[[SB1]], %[[SW2]] {axis = 0 : i64}
// LAMB-NEXT:   %[[AR:.*]] = dist.all_reduce  sum %[[CAT]] {group = #dist.group<tp, 2>} : tensor<6xf32> -> tensor<6xf32>
// LAMB-NEXT:   %[[SUM:.*]] = dist.wait %[[AR]]
// LAMB-NEXT:   %[[RW1:.*]] = nn.slice %[[SUM]] {limit = array<i64: 2>, start = array<i64: 0>, stride = array<i64: 1>}
// LAMB-NEXT:   %[[RB1:.*]] = nn.slice %[[SUM]] {limit = array<i64: 4>, start = array<i64: 2>, stride = array<i64: 1>}
// LAMB-NEXT:   %[[RW2:.*]] = nn.slice %[[SUM]] {limit = array<i64: 6>, start = array<i64: 4>, stride = array<i64: 1>}
// LAMB-NEXT:   train.lamb %arg1, %clipped#0, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[RW1]]
// LAMB-NEXT:   train.lamb %arg2, %clipped#1, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[RB1]]
// LAMB-NEXT:   train.lamb %arg3, %clipped#2, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[RW2]]
// LAMB-NEXT:   %[[SB2:.*]] = train.lamb_stats %arg4, %clipped#3, {{.*}} : tensor<8xf32> -> tensor<2xf32>
// LAMB-NEXT:   train.lamb %arg4, %clipped#3, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[SB2]]
// LAMB-NEXT:   return


// --tensor-parallel-lower, after autodiff and optimizer: Megatron's f
// (dist.tp_copy) disappears, g (dist.tp_reduce) becomes an all-reduce sum on
// the tensor-parallel group and its wait -- one in the forward pass (after
// the row-parallel GEMM) and one in the backward pass (the gradient of the
// column-parallel GEMM's input) -- and the global gradient norm sums the
// squares of the split parameters' gradients (w1, b1, w2) over the group
// and adds those of the whole one (b2), which every rank holds alike.
// The optimizer states of a split parameter are split alike.
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME:    tensor<8x8xf32> {dist.tp_split = array<i64: 0, 1, 2>, train.opt_state = "w1/exp_avg"}
// CHECK-SAME:    tensor<8xf32> {dist.tp_split = array<i64: 0, 1, 2>, train.opt_state = "b1/exp_avg_sq"}
// CHECK-SAME:    tensor<8x8xf32> {dist.tp_split = array<i64: 1, 1, 2>, train.opt_state = "w2/exp_avg"}
// CHECK-SAME:    tensor<8xf32> {train.opt_state = "b2/exp_avg"}
// CHECK-NOT:     dist.tp_copy
// CHECK-NOT:     dist.tp_reduce
// CHECK:         nn.matmul {{.*}} {dist.tp = "row"}
// CHECK-NEXT:    %[[AR:.+]] = dist.all_reduce sum %{{.*}} {group = #dist.group<tp, 2>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    dist.wait %[[AR]]
// CHECK:         dist.all_reduce sum %{{.*}} {group = #dist.group<tp, 2>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK:         %[[SPLIT:.+]] = train.sum_sq %{{.*}}, %{{.*}}, %{{.*}} : tensor<8x8xf32>, tensor<8xf32>, tensor<8x8xf32>
// CHECK-NEXT:    %[[SR:.+]] = dist.all_reduce sum %[[SPLIT]] {group = #dist.group<tp, 2>} : tensor<f32> -> tensor<f32>
// CHECK-NEXT:    %[[SW:.+]] = dist.wait %[[SR]]
// CHECK-NEXT:    %[[WHOLE:.+]] = train.sum_sq %{{.*}} : tensor<8xf32>
// CHECK-NEXT:    %[[SUM:.+]] = nn.add %[[SW]], %[[WHOLE]]
// CHECK-NEXT:    train.clip_grad_norm {{.*}} sum_sq(%[[SUM]]) {max_norm = 1.000000e+00 : f64}
// CHECK-NOT:     dist.
// CHECK:         return
// NOCLIP:        train.clip_grad_norm {{.*}} sum_sq(%{{.*}}) {max_norm = 0.000000e+00 : f64}
// ZeRO 1 x tp: a split parameter's optimizer states are ZeRO chunks of its
// tp part (both attributes); the norm already summed over dp sums the split
// chunks' squares over tp first and adds the whole chunks' once:
// all_reduce_dp(all_reduce_tp(sum_sq(split chunks)) + sum_sq(whole chunks)).
// ZERO-LABEL: func.func @mlp(
// ZERO-SAME:    tensor<32xf32> {dist.shard_of = array<i64: 8, 8>, dist.tp_split = array<i64: 0, 1, 2>, train.opt_state = "w1/exp_avg"}
// ZERO-SAME:    tensor<4xf32> {dist.shard_of = array<i64: 8>, train.opt_state = "b2/exp_avg"}
// ZERO:         %[[W1:.+]] = dist.wait {{.*}} : tensor<32xf32>
// ZERO:         %[[B1:.+]] = dist.wait {{.*}} : tensor<4xf32>
// ZERO:         %[[W2:.+]] = dist.wait {{.*}} : tensor<32xf32>
// ZERO:         %[[B2:.+]] = dist.wait {{.*}} : tensor<4xf32>
// ZERO-NEXT:    %[[SPLIT:.+]] = train.sum_sq %[[W1]], %[[B1]], %[[W2]] :
// ZERO-NEXT:    %[[TP:.+]] = dist.all_reduce sum %[[SPLIT]] {group = #dist.group<tp, 2>}
// ZERO-NEXT:    %[[TPW:.+]] = dist.wait %[[TP]]
// ZERO-NEXT:    %[[WHOLE:.+]] = train.sum_sq %[[B2]] :
// ZERO-NEXT:    %[[SUM:.+]] = nn.add %[[TPW]], %[[WHOLE]]
// ZERO-NEXT:    %[[DP:.+]] = dist.all_reduce sum %[[SUM]] {group = #dist.group<dp, 2>}
// ZERO-NEXT:    %[[DPW:.+]] = dist.wait %[[DP]]
// ZERO-NEXT:    train.clip_grad_norm %[[W1]], %[[B1]], %[[W2]], %[[B2]] sum_sq(%[[DPW]])
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

// The vocabulary-parallel loss: the row maxima's dist.tp_max becomes an
// all-reduce max, the sums' g an all-reduce sum (forward only: the
// gradient of the part's logits is local); the embedding's g an all-reduce
// sum, and the LM head's f one backward.
// CHECK-LABEL: func.func @vocab(
// CHECK:         dist.all_reduce sum %{{.*}} {group = #dist.group<tp, 2>} : tensor<4x8xf32>
// CHECK:         %[[M:.+]] = nn.reduce_max
// CHECK-NEXT:    %[[AM:.+]] = dist.all_reduce max %[[M]] {group = #dist.group<tp, 2>} : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT:    %[[WM:.+]] = dist.wait %[[AM]]
// CHECK-NEXT:    %[[S:.+]] = nn.vocab_ce_sums %{{.*}}, %{{.*}}, %[[WM]]
// CHECK-NEXT:    %[[AS:.+]] = dist.all_reduce sum %[[S]] {group = #dist.group<tp, 2>} : tensor<2x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT:    %[[WS:.+]] = dist.wait %[[AS]]
// CHECK-NEXT:    nn.vocab_ce_loss %[[WS]], %[[WM]]
// CHECK:         nn.vocab_ce_loss_grad
// CHECK-NEXT:    nn.vocab_ce_sums_grad
// CHECK:         dist.all_reduce sum %{{.*}} {group = #dist.group<tp, 2>} : tensor<4x8xf32>
// CHECK:         nn.gather_grad {{.*}} {dist.tp_part = 2 : i64}
func.func @vocab(%ids: tensor<4xi64> {train.input = "ids"}, %y: tensor<4xi64> {train.input = "y"},
                 %wte: tensor<8x8xf32> {train.param = "wte"}) -> (tensor<f32> {train.loss}) {
  %e = nn.gather %wte, %ids : tensor<8x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
  %h = nn.gelu %e : tensor<4x8xf32>
  %logits = nn.matmul %h, %wte {transpose_rhs} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %ce = nn.cross_entropy %logits, %y : tensor<4x8xf32>, tensor<4xi64> -> tensor<f32>
  return %ce : tensor<f32>
}
