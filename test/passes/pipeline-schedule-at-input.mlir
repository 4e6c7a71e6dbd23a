// RUN: dsc-opt %s --pipeline-schedule=micro-batches=2 | FileCheck %s

// --pipeline-schedule alone, on hand-written stages at its precondition:
// the output of pipeline-split=stages=2 and autodiff (one function per
// dist.stage, the activation sent forward and its gradient sent back, the
// backward ops marked train.backward). Each stage's micro-batch moves into
// one train.pipeline op: its body is the micro-batch once, every op marked
// with its phase (1 F, 2 B), reading train.load_batch of the body's index;
// the schedule lists the 1F1B items (phase, micro-batch); the op sums the
// gradients (and the last stage's loss) over the 2 micro-batches, and the
// sums are scaled by 1/2 after it. pipeline-expand.mlir unrolls the result.

// CHECK:       module attributes {dist.bubble = {{.*}}, dist.micro_batches = 2 : i64, dist.pp = 2 : i64, dist.schedule = "1f1b"}
// Stage 0 (warm-up: both forwards, then both backwards); no loss to sum.
// CHECK-LABEL: func.func @mlp_stage0(
// CHECK-SAME:    %[[W1:[a-z0-9]+]]: tensor<4x4xf32> {train.param = "w1"})
// CHECK-NEXT:    %[[SUM:.*]] = train.pipeline 2 schedule [1, 0, 1, 1, 2, 0, 2, 1] sum_phases [2] -> tensor<4x4xf32> {
// CHECK-NEXT:    ^bb0(%[[K:.*]]: index):
// CHECK-NEXT:      %[[B:.*]]:2 = train.load_batch %[[K]] ["x", "y"] {train.phase = 1 : i64}
// CHECK-NEXT:      %[[H:.*]] = nn.matmul %[[B]]#0, %[[W1]] {train.phase = 1 : i64}
// CHECK-NEXT:      %[[S:.*]] = dist.send %[[H]] {{.*}}tag = 0 : i64, train.phase = 1 : i64}
// CHECK-NEXT:      dist.wait %[[S]] {train.phase = 1 : i64}
// CHECK:           dist.recv {{.*}}tag = 1 : i64, train.phase = 2 : i64}
// CHECK:           %[[G:.*]] = nn.matmul %[[B]]#0, %{{.*}} {train.phase = 2 : i64, transpose_lhs}
// CHECK-NEXT:      train.yield %[[G]]
// CHECK-NEXT:    }
// CHECK:         %[[HALF:.*]] = arith.constant dense<5.000000e-01>
// CHECK-NEXT:    %[[MEAN:.*]] = nn.mul %[[SUM]], %[[HALF]]
// CHECK-NEXT:    return %{{.*}}, %[[MEAN]]
// Stage 1 (steady state: F0 B0 F1 B1): the loss is summed after each
// forward, the gradient after each backward.
// CHECK-LABEL: func.func @mlp_stage1(
// CHECK:         %[[SUMS:.*]]:2 = train.pipeline 2 schedule [1, 0, 2, 0, 1, 1, 2, 1] sum_phases [1, 2]
// CHECK:           %[[LOSS:.*]] = nn.cross_entropy {{.*}}train.phase = 1 : i64
// CHECK:           nn.cross_entropy_grad {{.*}}train.phase = 2 : i64
// CHECK:           %[[DW:.*]] = nn.matmul {{.*}}train.phase = 2 : i64, transpose_lhs
// CHECK:           train.yield %[[LOSS]], %[[DW]]
// CHECK:         nn.mul %[[SUMS]]#0
// CHECK:         nn.mul %[[SUMS]]#1
// CHECK-NOT:     train.load_batch
// CHECK:         return
module attributes {dist.layers = 2 : i64, dist.pp = 2 : i64} {
  func.func @mlp_stage0(%x: tensor<2x4xf32> {train.input = "x"}, %y: tensor<2xi64> {train.input = "y"},
                        %w1: tensor<4x4xf32> {train.param = "w1"})
      -> (tensor<f32> {train.loss}, tensor<4x4xf32> {train.grad = "w1"}) attributes {dist.layers = array<i64: 0, 0>, dist.stage = 0 : i64} {
    %h = nn.matmul %x, %w1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %s = dist.send %h {group = #dist.group<pp, 2>, peer = 1 : i64, tag = 0 : i64} : tensor<2x4xf32>
    %sw = dist.wait %s : tensor<2x4xf32>
    %zero = arith.constant dense<0.0> : tensor<f32>
    %r = dist.recv {group = #dist.group<pp, 2>, peer = 1 : i64, tag = 1 : i64, train.backward} : tensor<2x4xf32>
    %dh = dist.wait %r {train.backward} : tensor<2x4xf32>
    %dw1 = nn.matmul %x, %dh {train.backward, transpose_lhs} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    return %zero, %dw1 : tensor<f32>, tensor<4x4xf32>
  }
  func.func @mlp_stage1(%x: tensor<2x4xf32> {train.input = "x"}, %y: tensor<2xi64> {train.input = "y"},
                        %w2: tensor<4x3xf32> {train.param = "w2"})
      -> (tensor<f32> {train.loss}, tensor<4x3xf32> {train.grad = "w2"}) attributes {dist.layers = array<i64: 1, 1>, dist.stage = 1 : i64} {
    %r = dist.recv {group = #dist.group<pp, 2>, peer = -1 : i64, tag = 0 : i64} : tensor<2x4xf32>
    %h = dist.wait %r : tensor<2x4xf32>
    %z = nn.matmul %h, %w2 : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
    %loss = nn.cross_entropy %z, %y : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>
    %one = arith.constant dense<1.0> : tensor<f32>
    %dz = nn.cross_entropy_grad %z, %y, %one {train.backward} : tensor<2x3xf32>, tensor<2xi64>, tensor<f32>
    %dh = nn.matmul %dz, %w2 {train.backward, transpose_rhs} : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<2x4xf32>
    %dw2 = nn.matmul %h, %dz {train.backward, transpose_lhs} : tensor<2x4xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
    %s = dist.send %dh {group = #dist.group<pp, 2>, peer = -1 : i64, tag = 1 : i64, train.backward} : tensor<2x4xf32>
    %sw = dist.wait %s {train.backward} : tensor<2x4xf32>
    return %loss, %dw2 : tensor<f32>, tensor<4x3xf32>
  }
}
