// RUN: dsc-opt %s --onebit-compression=dp=2 | FileCheck %s

// --onebit-compression alone, on a hand-written step at its precondition:
// the output of optimizer (type=onebitadam freeze-step=5) and data-parallel
// (dp=2, one micro-batch: the gradient all-reduce inside the body). The
// all-reduce runs only in the 5 warm-up steps; afterwards the norm is the
// mean of the ranks' norms and the momentum goes through 1-bit compression,
// whose worker and server errors become optimizer states.

// CHECK-LABEL: func.func @step(
// CHECK-SAME:    %[[WE:[a-z0-9]+]]: tensor<16xf32> {dist.shard_of = array<i64: 32>, train.opt_state = "w/worker_error"}
// CHECK-SAME:    %[[SE:[a-z0-9]+]]: tensor<8xf32> {dist.shard_of = array<i64: 16>, train.opt_state = "w/server_error"}
// CHECK-SAME:    tensor<16xf32> {train.opt_state = "w/worker_error"}, tensor<8xf32> {train.opt_state = "w/server_error"})
// CHECK:         dist.all_reduce  avg %{{.*}} {group = #dist.group<dp, 2>, train.active_steps = array<i64: 1, 5>}
// CHECK:         %[[SQ:.*]] = train.sum_sq
// CHECK-NEXT:    %[[N:.*]] = nn.sqrt %[[SQ]]
// CHECK-NEXT:    dist.all_reduce  avg %[[N]] {group = #dist.group<dp, 2>, train.active_steps = array<i64: 6, 0>}
// CHECK:         %[[C:.*]], %{{.*}} = train.clip_grad_norm
// CHECK:         %[[BITS:.*]], %[[SCALE:.*]], %[[NWE:.*]] = train.onebit_compress %{{.*}}, %[[WE]] {train.active_steps = array<i64: 6, 0>} : tensor<16xf32> -> tensor<2xi8>
// CHECK:         dist.all_to_all %[[BITS]]
// CHECK:         dist.all_gather %[[SCALE]]
// CHECK:         %{{.*}}, %{{.*}}, %[[NSE:.*]] = train.onebit_server {{.*}}, %[[SE]] {train.active_steps = array<i64: 6, 0>}
// CHECK:         %[[E:.*]] = train.onebit_expand
// CHECK-NEXT:    %[[M:.*]] = nn.slice %[[E]] {{.*}} : tensor<16xf32> -> tensor<3xf32>
// CHECK-NEXT:    train.onebit_adam %{{.*}}, %[[C]], {{.*}} compressed(%[[M]] : tensor<3xf32>)
// CHECK-NEXT:    return {{.*}}, %[[NWE]], %[[NSE]] :
module attributes {dist.dp = 2 : i64, dist.zero_stage = 0 : i64} {
  func.func @step(%x: tensor<3xf32> {train.input = "x"}, %w: tensor<3xf32> {train.param = "w"},
                  %m: tensor<3xf32> {train.opt_state = "w/exp_avg"}, %v: tensor<3xf32> {train.opt_state = "w/exp_avg_sq"},
                  %s: tensor<i64> {train.step})
      -> (tensor<3xf32> {train.updated = "w"}, tensor<3xf32> {train.opt_state = "w/exp_avg"},
          tensor<3xf32> {train.opt_state = "w/exp_avg_sq"}, tensor<f32> {train.loss},
          tensor<f32> {train.grad_norm}, tensor<f32> {train.lr}) {
    %lr = train.lr_schedule "constant" {lr = 1.0e-3 : f64}, %s
    %r:2 = train.accumulate 1 -> tensor<f32>, tensor<3xf32> {
    ^bb0(%i: index):
      %ww = nn.add %w, %w : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
      %p = nn.mul %x, %ww : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
      %l = nn.reduce_sum %p {axes = array<i64: 0>} : tensor<3xf32> -> tensor<f32>
      %g = nn.add %x, %x : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
      %a = dist.all_reduce avg %g {group = #dist.group<dp, 2>} : tensor<3xf32> -> tensor<3xf32>
      %ga = dist.wait %a : tensor<3xf32>
      train.yield %l, %ga : tensor<f32>, tensor<3xf32>
    }
    %c, %n = train.clip_grad_norm %r#1 {max_norm = 0.0 : f64} : tensor<3xf32> -> tensor<3xf32>
    %nw, %nm, %nv = train.onebit_adam %w, %c, %m, %v, %lr, %s {freeze_step = 5 : i64} : tensor<3xf32>
    return %nw, %nm, %nv, %r#0, %n, %lr : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<f32>, tensor<f32>
  }
}
