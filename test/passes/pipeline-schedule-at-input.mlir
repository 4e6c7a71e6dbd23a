// RUN: dsc-opt %s --pipeline-schedule=micro-batches=2 | FileCheck %s

// --pipeline-schedule alone, on hand-written stages at its precondition:
// the output of pipeline-split=stages=2 and autodiff (one function per
// dist.stage, the activation sent forward and its gradient sent back, the
// backward ops marked train.backward). Each stage is unrolled over 2
// micro-batches in 1F1B order, each reading train.load_batch k; the
// gradients (and the loss) are summed over micro-batches and scaled by 1/2;
// a send is waited for before the next send on its channel.

// CHECK:       module attributes {dist.bubble = {{.*}}, dist.micro_batches = 2 : i64, dist.pp = 2 : i64, dist.schedule = "1f1b"}
// Stage 0 (warm-up: both forwards, then both backwards).
// CHECK-LABEL: func.func @mlp_stage0(
// CHECK-SAME:    %[[W1:[a-z0-9]+]]: tensor<4x4xf32> {train.param = "w1"})
// CHECK-NEXT:    %[[B0:.*]]:2 = train.load_batch 0 ["x", "y"] {train.micro = 0 : i64, train.phase = 1 : i64}
// CHECK-NEXT:    %[[H0:.*]] = nn.matmul %[[B0]]#0, %[[W1]] {train.micro = 0 : i64, train.phase = 1 : i64}
// CHECK-NEXT:    %[[S0:.*]] = dist.send %[[H0]] {{.*}}tag = 0 : i64, train.micro = 0 : i64
// CHECK:         %[[B1:.*]]:2 = train.load_batch 1 ["x", "y"] {train.micro = 1 : i64, train.phase = 1 : i64}
// CHECK-NEXT:    %[[H1:.*]] = nn.matmul %[[B1]]#0, %[[W1]] {train.micro = 1 : i64, train.phase = 1 : i64}
// CHECK-NEXT:    dist.wait %[[S0]]
// CHECK-NEXT:    dist.send %[[H1]] {{.*}}tag = 0 : i64, train.micro = 1 : i64
// CHECK:         dist.recv {{.*}}tag = 1 : i64, train.micro = 0 : i64, train.phase = 2 : i64}
// CHECK:         %[[G0:.*]] = nn.matmul %[[B0]]#0, %{{.*}} {train.micro = 0 : i64, train.phase = 2 : i64, transpose_lhs}
// CHECK:         dist.recv {{.*}}tag = 1 : i64, train.micro = 1 : i64, train.phase = 2 : i64}
// CHECK:         %[[G1:.*]] = nn.matmul %[[B1]]#0, %{{.*}} {train.micro = 1 : i64, train.phase = 2 : i64, transpose_lhs}
// CHECK-NEXT:    %[[SUM:.*]] = nn.add %[[G0]], %[[G1]]
// CHECK:         %[[HALF:.*]] = arith.constant dense<5.000000e-01>
// CHECK-NEXT:    %[[MEAN:.*]] = nn.mul %[[SUM]], %[[HALF]]
// CHECK:         return %{{.*}}, %[[MEAN]]
// Stage 1 (steady state: forward 0, backward 0, forward 1, backward 1).
// CHECK-LABEL: func.func @mlp_stage1(
// CHECK:         nn.cross_entropy {{.*}}train.micro = 0 : i64, train.phase = 1 : i64
// CHECK:         nn.cross_entropy_grad {{.*}}train.micro = 0 : i64, train.phase = 2 : i64
// CHECK:         train.load_batch 1
// CHECK:         nn.cross_entropy {{.*}}train.micro = 1 : i64, train.phase = 1 : i64
// CHECK:         nn.cross_entropy_grad {{.*}}train.micro = 1 : i64, train.phase = 2 : i64
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
