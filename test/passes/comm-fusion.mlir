// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=1 --optimizer --zero="stage=1 dp=4" --comm-fusion | FileCheck %s --check-prefix=ONE
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=2 --optimizer --zero="stage=2 dp=4" --comm-fusion="reduce-bucket=24" | FileCheck %s --check-prefix=SIZE
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=1 --optimizer --zero="stage=3 dp=4 persistence-threshold=10" --comm-fusion="allgather-bucket=48" | FileCheck %s --check-prefix=GATHER
// RUN: dsc-opt %s --comm-fusion="reduce-bucket=0" -verify-diagnostics

// --comm-fusion puts collectives of the same kind, group, reduction and
// element type into buckets of at most the bucket size (elements).

// Stage 1 with the default buckets (5e8 elements): one reduce-scatter for
// the three gradients (18 + 6 + 30 elements) at the last of them, the
// all-reduce of the norm alone (another reduction), one all-gather for the
// three updated chunks after the last update.
// ONE:      %[[RS:.*]]:3 = dist.reduce_scatter  avg %{{.*}}, %{{.*}}, %{{.*}} {group = #dist.group<dp, 4>} : tensor<18xf32>, tensor<6xf32>, tensor<30xf32> -> tensor<5xf32>, tensor<2xf32>, tensor<8xf32>
// ONE-NEXT: %[[W:.*]]:3 = dist.wait %[[RS]]#0, %[[RS]]#1, %[[RS]]#2 : tensor<5xf32>, tensor<2xf32>, tensor<8xf32>
// ONE-NEXT: train.sum_sq %[[W]]#0, %[[W]]#1, %[[W]]#2
// ONE-NEXT: dist.all_reduce  sum
// ONE:      train.adam
// ONE:      train.adam
// ONE:      %[[N3:[a-z_0-9]+]], {{.*}} = train.adam
// ONE-NEXT: %[[AG:.*]]:3 = dist.all_gather %{{.*}}, %{{.*}}, %[[N3]] {group = #dist.group<dp, 4>} : tensor<5xf32>, tensor<2xf32>, tensor<8xf32> -> tensor<18xf32>, tensor<6xf32>, tensor<30xf32>
// ONE-NEXT: dist.wait %[[AG]]#0, %[[AG]]#1, %[[AG]]#2
// ONE-NOT:  dist.

// Stage 2, buckets of 24 elements: w2's gradient (30 elements, produced
// first) is a bucket of its own; b1's and w1's (6 + 18 = 24) share one,
// issued when the last of them is ready.
// SIZE:      %[[G2:.*]] = nn.matmul %{{.*}}, %{{.*}} {transpose_lhs} : tensor<4x6xf32>, tensor<4x5xf32> -> tensor<6x5xf32>
// SIZE-NEXT: %[[F2:.*]] = nn.reshape %[[G2]]
// SIZE-NEXT: %[[R2:.*]] = dist.reduce_scatter  avg %[[F2]] {group = #dist.group<dp, 4>} : tensor<30xf32> -> tensor<8xf32>
// SIZE-NEXT: dist.wait %[[R2]]
// SIZE:      %[[GB:.*]] = nn.reduce_sum
// SIZE-NEXT: %[[G1:.*]] = nn.matmul
// SIZE-NEXT: %[[F1:.*]] = nn.reshape %[[G1]]
// SIZE-NEXT: %[[R1:.*]]:2 = dist.reduce_scatter  avg %[[GB]], %[[F1]] {group = #dist.group<dp, 4>} : tensor<6xf32>, tensor<18xf32> -> tensor<2xf32>, tensor<5xf32>
// SIZE-NEXT: %[[W1:.*]]:2 = dist.wait %[[R1]]#0, %[[R1]]#1
// SIZE-NEXT: train.yield %{{.*}}, %[[W1]]#1, %[[W1]]#0, %{{.*}} :

// Stage 3, gathers of 48 elements: the forward gathers of w1 and w2 (18 +
// 30) form one bucket, issued where the first was (their inputs, the
// chunks, exist from the start). The backward gather of w2 is not pulled
// into the forward pass: buckets do not cross the loss.
// GATHER:      ^bb0
// GATHER-NEXT: %[[AG:.*]]:2 = dist.all_gather %[[W1:.*]], %[[W2:.*]] {group = #dist.group<dp, 4>} : tensor<5xf32>, tensor<8xf32> -> tensor<18xf32>, tensor<30xf32>
// GATHER-NEXT: dist.wait %[[AG]]#0, %[[AG]]#1
// GATHER:      nn.cross_entropy
// GATHER:      %[[BW:.*]] = dist.all_gather %[[W2]] {group = #dist.group<dp, 4>} : tensor<8xf32> -> tensor<30xf32>

// The bucket sizes are checked on each function, before any of its blocks
// is fused (the only IR in this file: the runs above read
// Inputs/dp-mlp.mlir).
// expected-error @below {{comm-fusion: bucket sizes must be at least 1 element}}
func.func @step() {
  return
}
