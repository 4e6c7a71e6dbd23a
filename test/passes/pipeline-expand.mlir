// RUN: dsc-opt %s --pipeline-expand | FileCheck %s

// --pipeline-expand alone, on hand-written train.pipeline ops (what
// pipeline-schedule=micro-batches=2 makes of pipeline-schedule-at-input's
// stages): each item (phase, k) of the schedule becomes the body's ops of
// that phase for micro-batch k, marked train.micro and train.phase, reading
// train.load_batch k; each yielded value is added to its sum right after
// it is computed in the items of its sum phase; a send is waited for before
// the next send on its channel, the last one after the stage's last item.

// Stage 0 (warm-up: both forwards, then both backwards).
// CHECK-LABEL: func.func @mlp_stage0(
// CHECK-SAME:    %[[W1:[a-z0-9]+]]: tensor<4x4xf32> {train.param = "w1"})
// CHECK-NEXT:    %[[B0:.*]]:2 = train.load_batch 0 ["x", "y"] {train.micro = 0 : i64, train.phase = 1 : i64}
// CHECK-NEXT:    %[[H0:.*]] = nn.matmul %[[B0]]#0, %[[W1]] {train.micro = 0 : i64, train.phase = 1 : i64}
// CHECK-NEXT:    %[[S0:.*]] = dist.send %[[H0]] {{.*}}tag = 0 : i64, train.micro = 0 : i64
// CHECK:         %[[B1:.*]]:2 = train.load_batch 1 ["x", "y"] {train.micro = 1 : i64, train.phase = 1 : i64}
// CHECK-NEXT:    %[[H1:.*]] = nn.matmul %[[B1]]#0, %[[W1]] {train.micro = 1 : i64, train.phase = 1 : i64}
// CHECK-NEXT:    dist.wait %[[S0]]
// CHECK-NEXT:    %[[S1:.*]] = dist.send %[[H1]] {{.*}}tag = 0 : i64, train.micro = 1 : i64
// CHECK:         dist.recv {{.*}}tag = 1 : i64, train.micro = 0 : i64, train.phase = 2 : i64}
// CHECK:         %[[G0:.*]] = nn.matmul %[[B0]]#0, %{{.*}} {train.micro = 0 : i64, train.phase = 2 : i64, transpose_lhs}
// CHECK:         dist.recv {{.*}}tag = 1 : i64, train.micro = 1 : i64, train.phase = 2 : i64}
// CHECK:         %[[G1:.*]] = nn.matmul %[[B1]]#0, %{{.*}} {train.micro = 1 : i64, train.phase = 2 : i64, transpose_lhs}
// CHECK-NEXT:    %[[SUM:.*]] = nn.add %[[G0]], %[[G1]] {train.micro = 1 : i64, train.phase = 2 : i64}
// The last send completes once the stage's last item is done.
// CHECK-NEXT:    dist.wait %[[S1]]
// CHECK:         %[[HALF:.*]] = arith.constant dense<5.000000e-01>
// CHECK-NEXT:    %[[MEAN:.*]] = nn.mul %[[SUM]], %[[HALF]]
// CHECK-NEXT:    return %{{.*}}, %[[MEAN]]
// CHECK-NOT:     train.pipeline
// Stage 1 (steady state: forward 0, backward 0, forward 1, backward 1); the
// loss is summed after each forward, the gradient after each backward.
// CHECK-LABEL: func.func @mlp_stage1(
// CHECK:         %[[L0:.*]] = nn.cross_entropy {{.*}}train.micro = 0 : i64, train.phase = 1 : i64
// CHECK:         nn.cross_entropy_grad {{.*}}train.micro = 0 : i64, train.phase = 2 : i64
// CHECK:         %[[D0:.*]] = nn.matmul {{.*}}train.micro = 0 : i64, train.phase = 2 : i64, transpose_lhs
// CHECK:         train.load_batch 1
// CHECK:         %[[L1:.*]] = nn.cross_entropy {{.*}}train.micro = 1 : i64, train.phase = 1 : i64
// CHECK-NEXT:    %[[LSUM:.*]] = nn.add %[[L0]], %[[L1]] {train.micro = 1 : i64, train.phase = 1 : i64}
// CHECK:         nn.cross_entropy_grad {{.*}}train.micro = 1 : i64, train.phase = 2 : i64
// CHECK:         %[[D1:.*]] = nn.matmul {{.*}}train.micro = 1 : i64, train.phase = 2 : i64, transpose_lhs
// CHECK-NEXT:    %[[DSUM:.*]] = nn.add %[[D0]], %[[D1]] {train.micro = 1 : i64, train.phase = 2 : i64}
// CHECK-NOT:     train.load_batch
// CHECK:         nn.mul %[[LSUM]]
// CHECK:         nn.mul %[[DSUM]]
// CHECK:         return
module attributes {dist.micro_batches = 2 : i64, dist.pp = 2 : i64, dist.schedule = "1f1b"} {
  func.func @mlp_stage0(%w1: tensor<4x4xf32> {train.param = "w1"})
      -> (tensor<f32> {train.loss}, tensor<4x4xf32> {train.grad = "w1"}) attributes {dist.stage = 0 : i64} {
    %sum = train.pipeline 2 schedule [1, 0, 1, 1, 2, 0, 2, 1] sum_phases [2] -> tensor<4x4xf32> {
    ^bb0(%k: index):
      %in:2 = train.load_batch %k ["x", "y"] {train.phase = 1 : i64} : tensor<2x4xf32>, tensor<2xi64>
      %h = nn.matmul %in#0, %w1 {train.phase = 1 : i64} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
      %s = dist.send %h {group = #dist.group<pp, 2>, peer = 1 : i64, tag = 0 : i64, train.phase = 1 : i64} : tensor<2x4xf32>
      %sw = dist.wait %s {train.phase = 1 : i64} : tensor<2x4xf32>
      %r = dist.recv {group = #dist.group<pp, 2>, peer = 1 : i64, tag = 1 : i64, train.phase = 2 : i64} : tensor<2x4xf32>
      %dh = dist.wait %r {train.phase = 2 : i64} : tensor<2x4xf32>
      %dw1 = nn.matmul %in#0, %dh {train.phase = 2 : i64, transpose_lhs} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
      train.yield %dw1 : tensor<4x4xf32>
    }
    %zero = arith.constant dense<0.000000e+00> : tensor<f32>
    %half = arith.constant dense<5.000000e-01> : tensor<f32>
    %mean = nn.mul %sum, %half : tensor<4x4xf32>, tensor<f32> -> tensor<4x4xf32>
    return %zero, %mean : tensor<f32>, tensor<4x4xf32>
  }
  func.func @mlp_stage1(%w2: tensor<4x3xf32> {train.param = "w2"})
      -> (tensor<f32> {train.loss}, tensor<4x3xf32> {train.grad = "w2"}) attributes {dist.stage = 1 : i64} {
    %sums:2 = train.pipeline 2 schedule [1, 0, 2, 0, 1, 1, 2, 1] sum_phases [1, 2] -> tensor<f32>, tensor<4x3xf32> {
    ^bb0(%k: index):
      %in:2 = train.load_batch %k ["x", "y"] {train.phase = 1 : i64} : tensor<2x4xf32>, tensor<2xi64>
      %r = dist.recv {group = #dist.group<pp, 2>, peer = -1 : i64, tag = 0 : i64, train.phase = 1 : i64} : tensor<2x4xf32>
      %h = dist.wait %r {train.phase = 1 : i64} : tensor<2x4xf32>
      %z = nn.matmul %h, %w2 {train.phase = 1 : i64} : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
      %loss = nn.cross_entropy %z, %in#1 {train.phase = 1 : i64} : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>
      %one = arith.constant {train.phase = 1 : i64} dense<1.000000e+00> : tensor<f32>
      %dz = nn.cross_entropy_grad %z, %in#1, %one {train.phase = 2 : i64} : tensor<2x3xf32>, tensor<2xi64>, tensor<f32>
      %dh = nn.matmul %dz, %w2 {train.phase = 2 : i64, transpose_rhs} : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<2x4xf32>
      %dw2 = nn.matmul %h, %dz {train.phase = 2 : i64, transpose_lhs} : tensor<2x4xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
      %s = dist.send %dh {group = #dist.group<pp, 2>, peer = -1 : i64, tag = 1 : i64, train.phase = 2 : i64} : tensor<2x4xf32>
      %sw = dist.wait %s {train.phase = 2 : i64} : tensor<2x4xf32>
      train.yield %loss, %dw2 : tensor<f32>, tensor<4x3xf32>
    }
    %half = arith.constant dense<5.000000e-01> : tensor<f32>
    %l = nn.mul %sums#0, %half : tensor<f32>, tensor<f32> -> tensor<f32>
    %g = nn.mul %sums#1, %half : tensor<4x3xf32>, tensor<f32> -> tensor<4x3xf32>
    return %l, %g : tensor<f32>, tensor<4x3xf32>
  }
}
