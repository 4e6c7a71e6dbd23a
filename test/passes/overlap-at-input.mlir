// RUN: dsc-opt %s --overlap | FileCheck %s

// --overlap alone, on hand-written IR at its precondition: the output of
// zero (stage 3) and comm-fusion, every collective immediately followed by
// its dist.wait. Waits sink to the first use of their results, but not past
// the next collective of the same kind; a parameter gather rises to just
// after the previous gather's wait (one bucket prefetched).

// b's gather starts right after a's wait, so it is in flight while the
// first layer computes; its wait sinks to b's use.
// CHECK-LABEL: func.func @gathers
// CHECK-NEXT:    %[[A:.*]] = dist.all_gather %arg0
// CHECK-NEXT:    %[[FA:.*]] = dist.wait %[[A]]
// CHECK-NEXT:    %[[B:.*]] = dist.all_gather %arg1
// CHECK-NEXT:    nn.mul %arg2, %[[FA]]
// CHECK-NEXT:    %[[H:.*]] = nn.relu
// CHECK-NEXT:    %[[FB:.*]] = dist.wait %[[B]]
// CHECK-NEXT:    nn.mul %[[H]], %[[FB]]

// g1's wait sinks below the compute that does not need it, but stops at the
// start of the next reduce-scatter; g2's wait sinks to the return.
// CHECK-LABEL: func.func @reduces
// CHECK-NEXT:    %[[R1:.*]] = dist.reduce_scatter  avg %arg0
// CHECK-NEXT:    nn.relu %arg2
// CHECK-NEXT:    nn.exp
// CHECK-NEXT:    %[[W1:.*]] = dist.wait %[[R1]]
// CHECK-NEXT:    %[[R2:.*]] = dist.reduce_scatter  avg %arg1
// CHECK-NEXT:    %[[T:.*]] = nn.relu
// CHECK-NEXT:    %[[W2:.*]] = dist.wait %[[R2]]
// CHECK-NEXT:    return %[[W1]], %[[W2]], %[[T]]
module attributes {dist.dp = 2 : i64, dist.zero_stage = 3 : i64} {
  func.func @gathers(%a: tensor<2xf32> {dist.shard_of = array<i64: 4>, train.param = "a"},
                     %b: tensor<2xf32> {dist.shard_of = array<i64: 4>, train.param = "b"},
                     %x: tensor<4xf32> {train.input = "x"}) -> (tensor<f32> {train.loss}) {
    %ra = dist.all_gather %a {group = #dist.group<dp, 2>} : tensor<2xf32> -> tensor<4xf32>
    %fa = dist.wait %ra : tensor<4xf32>
    %h = nn.mul %x, %fa : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    %h2 = nn.relu %h : tensor<4xf32>
    %rb = dist.all_gather %b {group = #dist.group<dp, 2>} : tensor<2xf32> -> tensor<4xf32>
    %fb = dist.wait %rb : tensor<4xf32>
    %y = nn.mul %h2, %fb : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    %l = nn.reduce_sum %y {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }

  // Two gradients' reduce-scatters with backward compute around them.
  func.func @reduces(%g1: tensor<4xf32>, %g2: tensor<4xf32>, %x: tensor<4xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<4xf32>) {
    %r1 = dist.reduce_scatter avg %g1 {group = #dist.group<dp, 2>} : tensor<4xf32> -> tensor<2xf32>
    %w1 = dist.wait %r1 : tensor<2xf32>
    %t = nn.relu %x : tensor<4xf32>
    %t2 = nn.exp %t : tensor<4xf32>
    %r2 = dist.reduce_scatter avg %g2 {group = #dist.group<dp, 2>} : tensor<4xf32> -> tensor<2xf32>
    %w2 = dist.wait %r2 : tensor<2xf32>
    %t3 = nn.relu %t2 : tensor<4xf32>
    return %w1, %w2, %t3 : tensor<2xf32>, tensor<2xf32>, tensor<4xf32>
  }
}
