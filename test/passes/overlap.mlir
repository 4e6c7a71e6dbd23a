// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=1 --optimizer --zero="stage=3 dp=4 persistence-threshold=10" --comm-fusion="allgather-bucket=18 reduce-bucket=24" --overlap | FileCheck %s
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=1 --optimizer --zero="stage=3 dp=4 persistence-threshold=10" --comm-fusion="allgather-bucket=18 reduce-bucket=24" --overlap | dsc-opt --verify-zero --overlap | FileCheck %s
// RUN: dsc-opt %s --overlap -verify-diagnostics

// --overlap: waits sink to the first use of their results, but not past the
// start of the next collective of the same kind; gathers of parameter
// chunks rise to just after the previous gather's wait (prefetch one
// bucket), not across the loss into the forward pass.
// Stage 3 on 4 ranks, gathers of one parameter each, reductions of at most
// 24 elements.

// w2's forward gather starts right after w1's wait: it is in flight while
// the first layer computes.
// CHECK:      ^bb0
// CHECK-NEXT: %[[A1:.*]] = dist.all_gather %[[W1:[a-z0-9]+]] {{.*}} -> tensor<18xf32>
// CHECK-NEXT: %[[F1:.*]] = dist.wait %[[A1]]
// CHECK-NEXT: %[[A2:.*]] = dist.all_gather %[[W2:[a-z0-9]+]] {{.*}} -> tensor<30xf32>
// CHECK-NEXT: nn.reshape %[[F1]]
// CHECK-NEXT: nn.matmul
// CHECK-NEXT: nn.add
// CHECK-NEXT: nn.relu
// CHECK-NEXT: %[[F2:.*]] = dist.wait %[[A2]]
// CHECK-NEXT: nn.reshape %[[F2]]
// The backward gather of w2 starts right after the loss, and is waited for
// where the input gradient needs it.
// CHECK:      nn.cross_entropy
// CHECK-NOT:  nn.
// CHECK:      %[[A3:.*]] = dist.all_gather %[[W2]]
// CHECK:      nn.cross_entropy_grad
// CHECK-NEXT: %[[F3:.*]] = dist.wait %[[A3]]
// w2's gradient is reduce-scattered as soon as it exists and waited for
// only before the next reduce-scatter starts: the rest of the backward
// pass runs meanwhile.
// CHECK:      %[[R2:.*]] = dist.reduce_scatter  avg %{{.*}} : tensor<30xf32> -> tensor<8xf32>
// CHECK-NOT:  dist.
// CHECK:      nn.select
// CHECK-NOT:  dist.
// CHECK:      nn.reduce_sum
// CHECK-NEXT: nn.matmul
// CHECK-NEXT: nn.reshape
// CHECK-NEXT: %[[G2:.*]] = dist.wait %[[R2]]
// CHECK-NEXT: %[[R1:.*]]:2 = dist.reduce_scatter  avg
// CHECK-NEXT: %[[G1:.*]]:2 = dist.wait %[[R1]]#0, %[[R1]]#1
// CHECK-NEXT: train.yield %{{.*}}, %[[G1]]#1, %[[G1]]#0, %[[G2]]

// A collective nobody waits for cannot be scheduled.
func.func @no_wait(%a: tensor<4xf32>) {
  // expected-error @+1 {{'dist.all_reduce' op overlap: a collective without its dist.wait}}
  %0 = dist.all_reduce sum %a {group = #dist.group<dp, 2>} : tensor<4xf32> -> tensor<4xf32>
  return
}
