// RUN: dsc-opt %s --zero="stage=1 dp=2" | FileCheck %s --check-prefix=S1
// RUN: dsc-opt %s --zero="stage=2 dp=2" | FileCheck %s --check-prefix=S2
// RUN: dsc-opt %s --zero="stage=3 dp=2 persistence-threshold=0" | FileCheck %s --check-prefix=S3

// --zero alone, on a hand-written step at its precondition: the output of
// autodiff, gradient-accumulation (2 micro-batches, sums scaled by 0.5) and
// optimizer (clipping, then train.adam with two fp32 states). w has 3
// elements: on 2 ranks a chunk of 2 (1 padding). Stage 1 chunks the states
// and reduce-scatters the scaled sum; stage 2 moves the reduce-scatter into
// the micro-batch; stage 3 also chunks w and gathers it before its use.

// Stage 1: the states are chunks; the scaled sum is reduce-scattered after
// the micro-batches; the norm is global (each rank's sum of squares,
// summed); the rank updates its chunk of w and gathers w back.
// S1-LABEL: func.func @step(
// S1-SAME:    tensor<3xf32> {train.param = "w"}
// S1-SAME:    tensor<2xf32> {dist.shard_of = array<i64: 3>, train.opt_state = "w/exp_avg"}
// S1-SAME:    tensor<2xf32> {dist.shard_of = array<i64: 3>, train.opt_state = "w/exp_avg_sq"}
// S1:         train.accumulate 2 -> tensor<f32>, tensor<3xf32>
// S1-NOT:     dist.
// S1:         %[[S:.*]] = nn.mul %{{.*}}#1, %{{.*}} : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
// S1-NEXT:    %[[R:.*]] = dist.reduce_scatter  avg %[[S]] {group = #dist.group<dp, 2>} : tensor<3xf32> -> tensor<2xf32>
// S1-NEXT:    %[[G:.*]] = dist.wait %[[R]] : tensor<2xf32>
// S1-NEXT:    %[[Q:.*]] = train.sum_sq %[[G]] : tensor<2xf32>
// S1-NEXT:    %[[QR:.*]] = dist.all_reduce  sum %[[Q]] {group = #dist.group<dp, 2>} : tensor<f32> -> tensor<f32>
// S1-NEXT:    %[[QW:.*]] = dist.wait %[[QR]]
// S1-NEXT:    %[[CL:.*]], %{{.*}} = train.clip_grad_norm %[[G]] sum_sq(%[[QW]]) {{.*}} : tensor<2xf32> -> tensor<2xf32>
// S1-NEXT:    %[[C:.*]] = dist.chunk %arg1 {group = #dist.group<dp, 2>} : tensor<3xf32> -> tensor<2xf32>
// S1-NEXT:    %[[P:.*]], %{{.*}}, %{{.*}} = train.adam %[[C]], %[[CL]], {{.*}} : tensor<2xf32>
// S1-NEXT:    dist.all_gather %[[P]] {group = #dist.group<dp, 2>} : tensor<2xf32> -> tensor<3xf32>

// Stage 2: the gradient is reduce-scattered in the micro-batch; only the
// chunk is accumulated.
// S2-LABEL: func.func @step(
// S2:         train.accumulate 2 -> tensor<f32>, tensor<2xf32>
// S2:         %[[G:.*]] = nn.add %arg0, %arg0
// S2-NEXT:    %[[R:.*]] = dist.reduce_scatter  avg %[[G]] {group = #dist.group<dp, 2>} : tensor<3xf32> -> tensor<2xf32>
// S2-NEXT:    %[[W:.*]] = dist.wait %[[R]]
// S2-NEXT:    train.yield %{{.*}}, %[[W]] : tensor<f32>, tensor<2xf32>
// S2-NOT:     dist.reduce_scatter
// S2:         train.sum_sq %{{.*}} : tensor<2xf32>
// S2:         dist.chunk %arg1
// S2:         dist.all_gather

// Stage 3: w itself is a chunk, gathered before its use in the micro-batch;
// the update writes the chunk and nothing is gathered back.
// S3-LABEL: func.func @step(
// S3-SAME:    tensor<2xf32> {dist.shard_of = array<i64: 3>, train.param = "w"}
// S3:         train.accumulate 2 -> tensor<f32>, tensor<2xf32>
// S3-NEXT:    ^bb0
// S3-NEXT:    %[[A:.*]] = dist.all_gather %arg1 {group = #dist.group<dp, 2>} : tensor<2xf32> -> tensor<3xf32>
// S3-NEXT:    %[[W:.*]] = dist.wait %[[A]] : tensor<3xf32>
// S3-NEXT:    nn.add %[[W]], %[[W]]
// S3:         dist.reduce_scatter  avg
// S3:         train.adam %arg1, {{.*}} : tensor<2xf32>
// S3-NOT:     dist.
// S3:         return
func.func @step(%x: tensor<3xf32> {train.input = "x"}, %w: tensor<3xf32> {train.param = "w"},
                %m: tensor<3xf32> {train.opt_state = "w/exp_avg"}, %v: tensor<3xf32> {train.opt_state = "w/exp_avg_sq"},
                %s: tensor<i64> {train.step})
    -> (tensor<3xf32> {train.updated = "w"}, tensor<3xf32> {train.opt_state = "w/exp_avg"},
        tensor<3xf32> {train.opt_state = "w/exp_avg_sq"}, tensor<f32> {train.loss},
        tensor<f32> {train.grad_norm}, tensor<f32> {train.lr}) {
  %lr = train.lr_schedule "constant" {lr = 1.0e-3 : f64}, %s
  %r:2 = train.accumulate 2 -> tensor<f32>, tensor<3xf32> {
  ^bb0(%i: index):
    %ww = nn.add %w, %w : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
    %p = nn.mul %x, %ww : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
    %l = nn.reduce_sum %p {axes = array<i64: 0>} : tensor<3xf32> -> tensor<f32>
    %g = nn.add %x, %x : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
    train.yield %l, %g : tensor<f32>, tensor<3xf32>
  }
  %half = arith.constant dense<5.0e-01> : tensor<f32>
  %loss = nn.mul %r#0, %half : tensor<f32>, tensor<f32> -> tensor<f32>
  %sum = nn.mul %r#1, %half : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %c, %n = train.clip_grad_norm %sum {max_norm = 1.0 : f64} : tensor<3xf32> -> tensor<3xf32>
  %nw, %nm, %nv = train.adam %w, %c, %m, %v, %lr, %s {decoupled_weight_decay} : tensor<3xf32>
  return %nw, %nm, %nv, %loss, %n, %lr : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<f32>, tensor<f32>
}
