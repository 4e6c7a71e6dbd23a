// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=1 --optimizer="type=onebitadam freeze-step=5 clip=1.0" --data-parallel=dp=4 --onebit-compression=dp=4 | FileCheck %s
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=1 --optimizer="type=onebitadam freeze-step=5 clip=1.0" --data-parallel=dp=4 --onebit-compression=dp=4 --comm-fusion | FileCheck %s --check-prefix=FUSED
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=1 --optimizer="type=onebitadam freeze-step=1" | FileCheck %s --check-prefix=ONE
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --mixed-precision=dtype=fp16 --autodiff --gradient-accumulation=steps=1 --optimizer="type=onebitadam freeze-step=5 clip=1.0" --data-parallel=dp=4 --onebit-compression=dp=4 | FileCheck %s --check-prefix=FLAT
// RUN: split-file %s %t
// RUN: dsc-opt %t/dp1.mlir --onebit-compression=dp=1 -verify-diagnostics
// RUN: dsc-opt %t/zero.mlir --onebit-compression=dp=2 -verify-diagnostics
// RUN: dsc-opt %t/twice.mlir --onebit-compression=dp=2 -verify-diagnostics
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=1 --optimizer="type=onebitadam freeze-step=5" --zero="stage=1 dp=2" | not dsc-opt --onebit-compression=dp=2 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=1 --optimizer="type=zerooneadam freeze-step=8 var-update-scaler=2 local-step-scaler=2 local-step-clipper=4 clip=1.0" --data-parallel=dp=4 --onebit-compression=dp=4 | FileCheck %s --check-prefix=ZO
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --autodiff --gradient-accumulation=steps=1 --optimizer="type=onebitlamb freeze-step=5 clip=1.0" --data-parallel=dp=4 --onebit-compression=dp=4 | FileCheck %s --check-prefix=LAMB
// RUN: dsc-opt %S/Inputs/dp-mlp.mlir --mixed-precision=dtype=fp16 --autodiff --gradient-accumulation=steps=1 --optimizer="type=onebitlamb freeze-step=5 clip=1.0" --data-parallel=dp=4 --onebit-compression=dp=4 | FileCheck %s --check-prefix=LAMBFLAT

// --onebit-compression plans DeepSpeed's OnebitAdam on 4 ranks with
// freeze_step 5: steps 1-5 are the warm-up (train.active_steps [1, 5]: the
// gradient averages data-parallel planned), steps 6 on the compressed phase
// (train.active_steps [6, 0]).
// CHECK-LABEL: func.func @mlp(
// The worker (Np = 32: 18, 6 and 30 padded to a multiple of W lcm(W, 8) =
// 32) and server (Np / W = 8) errors of w1, b1 and w2 are optimizer states,
// each rank's its own: the ranks' chunks of one tensor of W x that.
// CHECK-SAME:    %{{.*}}: tensor<32xf32> {dist.shard_of = array<i64: 128>, train.opt_state = "w1/worker_error"}, %{{.*}}: tensor<8xf32> {dist.shard_of = array<i64: 32>, train.opt_state = "w1/server_error"}
// CHECK-SAME:    %{{.*}}: tensor<32xf32> {dist.shard_of = array<i64: 128>, train.opt_state = "b1/worker_error"}, %{{.*}}: tensor<8xf32> {dist.shard_of = array<i64: 32>, train.opt_state = "b1/server_error"}
// CHECK-SAME:    %{{.*}}: tensor<32xf32> {dist.shard_of = array<i64: 128>, train.opt_state = "w2/worker_error"}, %{{.*}}: tensor<8xf32> {dist.shard_of = array<i64: 32>, train.opt_state = "w2/server_error"}
// CHECK-SAME:    -> ({{.*}}tensor<32xf32> {train.opt_state = "w1/worker_error"}, tensor<8xf32> {train.opt_state = "w1/server_error"}
// The gradient averages run in the warm-up only (their waits follow).
// CHECK:         dist.all_reduce avg %{{.*}} {group = #dist.group<dp, 4>, train.active_steps = array<i64: 1, 5>} : tensor<6x5xf32>
// The clipping norm: the compressed phase averages the ranks' local norms.
// CHECK:         %[[SQ:.*]] = train.sum_sq
// CHECK-NEXT:    %[[N:.*]] = nn.sqrt %[[SQ]] : tensor<f32>
// CHECK-NEXT:    %[[R:.*]] = dist.all_reduce avg %[[N]] {group = #dist.group<dp, 4>, train.active_steps = array<i64: 6, 0>} : tensor<f32>
// CHECK-NEXT:    %[[W:.*]] = dist.wait %[[R]]
// CHECK-NEXT:    %[[S:.*]] = nn.mul %[[W]], %[[W]]
// CHECK-NEXT:    %[[C:.*]]:3, %{{.*}} = train.clip_grad_norm %{{.*}} sum_sq(%[[S]])
// Each momentum b1 m + (1-b1) g (the factors rounded to float), padded with
// zeros and compressed with its worker error, in the compressed phase.
// CHECK:         %[[B1:.*]] = arith.constant dense<0.899999976> : tensor<f32>
// CHECK:         %[[B1C:.*]] = arith.constant dense<1.000000e-01> : tensor<f32>
// CHECK:         nn.mul %{{.*}}, %[[B1]] {train.active_steps = array<i64: 6, 0>} : tensor<6x3xf32>
// CHECK-NEXT:    nn.mul %[[C]]#0, %[[B1C]] {train.active_steps = array<i64: 6, 0>}
// CHECK-NEXT:    %[[M:.*]] = nn.add
// CHECK-NEXT:    %[[F:.*]] = nn.reshape %[[M]] : tensor<6x3xf32> -> tensor<18xf32>
// CHECK-NEXT:    %[[P:.*]] = nn.slice_grad %[[F]] {limit = array<i64: 18>, start = array<i64: 0>, stride = array<i64: 1>, train.active_steps = array<i64: 6, 0>} : tensor<18xf32> -> tensor<32xf32>
// CHECK-NEXT:    %[[BITS:.*]], %[[SCALE:.*]], %{{.*}} = train.onebit_compress %[[P]], %{{.*}} {train.active_steps = array<i64: 6, 0>} : tensor<32xf32> -> tensor<4xi8>
// Stage by stage over the parameters: the signs to their servers, the
// scales to everyone, each rank the server of its chunk, the servers'
// signs and scales to everyone, expanded and sliced back.
// CHECK:         %[[A2A:.*]] = dist.all_to_all %[[BITS]] {group = #dist.group<dp, 4>, train.active_steps = array<i64: 6, 0>} : tensor<4xi8> -> tensor<4xi8>
// CHECK:         %[[GS:.*]] = dist.all_gather %[[SCALE]] {group = #dist.group<dp, 4>, train.active_steps = array<i64: 6, 0>} : tensor<1xf32> -> tensor<4xf32>
// CHECK:         %[[SB:.*]], %[[SS:.*]], %{{.*}} = train.onebit_server %{{.*}}, %{{.*}}, %{{.*}} {train.active_steps = array<i64: 6, 0>} : tensor<4xi8>, tensor<4xf32>, tensor<8xf32> -> tensor<1xi8>
// CHECK:         dist.all_gather %[[SB]] {group = #dist.group<dp, 4>, train.active_steps = array<i64: 6, 0>} : tensor<1xi8> -> tensor<4xi8>
// CHECK:         dist.all_gather %[[SS]] {group = #dist.group<dp, 4>, train.active_steps = array<i64: 6, 0>} : tensor<1xf32> -> tensor<4xf32>
// CHECK:         %[[E:.*]] = train.onebit_expand %{{.*}}, %{{.*}} {train.active_steps = array<i64: 6, 0>} : tensor<4xi8>, tensor<4xf32> -> tensor<32xf32>
// CHECK-NEXT:    %[[SL:.*]] = nn.slice %[[E]] {limit = array<i64: 18>, start = array<i64: 0>, stride = array<i64: 1>, train.active_steps = array<i64: 6, 0>} : tensor<32xf32> -> tensor<18xf32>
// CHECK-NEXT:    %[[CM:.*]] = nn.reshape %[[SL]] : tensor<18xf32> -> tensor<6x3xf32>
// The update reads the compressed momentum after the warm-up only.
// CHECK:         train.onebit_adam %{{.*}}, %[[C]]#0, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} compressed(%[[CM]] : tensor<6x3xf32>) {freeze_step = 5 : i64} : tensor<6x3xf32>

// comm-fusion buckets each exchange of all parameters into one collective
// of the compressed phase (the steps are part of its key).
// FUSED:         dist.all_to_all %{{.*}}, %{{.*}}, %{{.*}} {group = #dist.group<dp, 4>, train.active_steps = array<i64: 6, 0>} : tensor<4xi8>, tensor<4xi8>, tensor<4xi8>
// FUSED:         dist.all_gather %{{.*}}, %{{.*}}, %{{.*}} {group = #dist.group<dp, 4>, train.active_steps = array<i64: 6, 0>} : tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
// FUSED:         dist.all_gather %{{.*}}, %{{.*}}, %{{.*}} {group = #dist.group<dp, 4>, train.active_steps = array<i64: 6, 0>} : tensor<1xi8>, tensor<1xi8>, tensor<1xi8>

// Under fp16 / bf16 (the module's train.precision) DeepSpeed's wrapper
// (FP16_Optimizer) made OnebitAdam's first call at construction
// (step_offset 1: steps 1-4 are the warm-up, 5 on compressed) and hands it
// one flat tensor of every parameter: one worker error of 64 (18 + 6 + 30 =
// 54 padded to a multiple of 32) and one server error of 16.
// FLAT-LABEL:    func.func @mlp(
// FLAT-SAME:     %{{.*}}: tensor<64xf32> {dist.shard_of = array<i64: 256>, train.opt_state = "fp32_flat_group/worker_error"}, %{{.*}}: tensor<16xf32> {dist.shard_of = array<i64: 64>, train.opt_state = "fp32_flat_group/server_error"})
// FLAT:          dist.all_reduce avg %{{.*}} {group = #dist.group<dp, 4>, train.active_steps = array<i64: 1, 4>} : tensor<6x5xf32>
// The wrapper clips by each rank's own norm and agrees on overflow: the
// local sum of squares plus 0 x their sum over the ranks (NaN everywhere
// when any rank's is not finite).
// FLAT:          %[[SQ:.*]] = train.sum_sq
// FLAT-NEXT:     %[[R:.*]] = dist.all_reduce sum %[[SQ]] {group = #dist.group<dp, 4>, train.active_steps = array<i64: 5, 0>} : tensor<f32>
// FLAT-NEXT:     %[[W:.*]] = dist.wait %[[R]]
// FLAT-NEXT:     %[[Z:.*]] = arith.constant dense<0.000000e+00> : tensor<f32>
// FLAT-NEXT:     %[[F:.*]] = nn.mul %[[W]], %[[Z]]
// FLAT-NEXT:     %[[A:.*]] = nn.add %[[SQ]], %[[F]]
// FLAT-NEXT:     %[[C:.*]]:3, %{{.*}} = train.clip_grad_norm %{{.*}} sum_sq(%[[A]]) loss_scale(%{{.*}})
// The momenta, concatenated in parameter order, padded once, compressed
// with the one worker error; the result sliced back per parameter.
// FLAT:          %[[CAT:.*]] = nn.concat %{{.*}}, %{{.*}}, %{{.*}} {axis = 0 : i64, train.active_steps = array<i64: 5, 0>} : tensor<18xf32>, tensor<6xf32>, tensor<30xf32> -> tensor<54xf32>
// FLAT-NEXT:     %[[P:.*]] = nn.slice_grad %[[CAT]] {limit = array<i64: 54>, start = array<i64: 0>, stride = array<i64: 1>, train.active_steps = array<i64: 5, 0>} : tensor<54xf32> -> tensor<64xf32>
// FLAT-NEXT:     train.onebit_compress %[[P]], %{{.*}} {train.active_steps = array<i64: 5, 0>} : tensor<64xf32> -> tensor<8xi8>
// FLAT:          train.onebit_server %{{.*}}, %{{.*}}, %{{.*}} {train.active_steps = array<i64: 5, 0>} : tensor<8xi8>, tensor<4xf32>, tensor<16xf32> -> tensor<2xi8>
// FLAT-NOT:      train.onebit_compress
// FLAT:          %[[E:.*]] = train.onebit_expand %{{.*}}, %{{.*}} {train.active_steps = array<i64: 5, 0>} : tensor<8xi8>, tensor<4xf32> -> tensor<64xf32>
// FLAT-NEXT:     nn.slice %[[E]] {limit = array<i64: 18>, start = array<i64: 0>, {{.*}}} : tensor<64xf32> -> tensor<18xf32>
// FLAT:          nn.slice %[[E]] {limit = array<i64: 24>, start = array<i64: 18>, {{.*}}} : tensor<64xf32> -> tensor<6xf32>
// FLAT:          nn.slice %[[E]] {limit = array<i64: 54>, start = array<i64: 24>, {{.*}}} : tensor<64xf32> -> tensor<30xf32>
// FLAT:          train.onebit_adam %{{.*}}, %[[C]]#0, {{.*}} compressed(%{{.*}} : tensor<6x3xf32>) {freeze_step = 5 : i64, step_offset = 1 : i64}
// FLAT:          train.onebit_adam %{{.*}}, %[[C]]#1, {{.*}} compressed(%{{.*}} : tensor<6xf32>) {freeze_step = 5 : i64, step_offset = 1 : i64}
// FLAT:          train.onebit_adam %{{.*}}, %[[C]]#2, {{.*}} compressed(%{{.*}} : tensor<6x5xf32>) {freeze_step = 5 : i64, step_offset = 1 : i64}

// One rank: --optimizer alone, nothing to compress (DeepSpeed calls
// compressed_allreduce only with several ranks).
// ONE:           train.onebit_adam %{{.*}} {freeze_step = 1 : i64} : tensor<6x3xf32>
// ONE-NOT:       compressed

// With ZeRO the momentum is partitioned: refused (the config refuses the
// combination first, with the reason).
// ZERO: error: 'dist.reduce_scatter' op onebit-compression: the gradients are partitioned (ZeRO): a 1-bit optimizer compresses each parameter's whole momentum with one scale and one error buffer, which ZeRO leaves each rank only a part of (DeepSpeed asserts "1bit-Adam is not compatible with ZeRO"); use ZeRO stage 0 with it, or Adam/AdamW with ZeRO
// ZERO-NOT: error:

//--- dp1.mlir
// expected-error @+1 {{onebit-compression: needs dp >= 2 (one rank compresses nothing), got 1}}
module {
}

//--- zero.mlir
func.func @step(%p: tensor<8xf32> {train.param = "p"}, %g: tensor<8xf32>, %m: tensor<8xf32> {train.opt_state = "p/exp_avg"}, %v: tensor<8xf32> {train.opt_state = "p/exp_avg_sq"}, %lr: tensor<f32>, %t: tensor<i64> {train.step}, %s: tensor<f32>) -> (tensor<8xf32> {train.updated = "p"}) {
  // expected-error @+1 {{'train.clip_grad_norm' op onebit-compression: the gradients are partitioned already}}
  %c:2 = train.clip_grad_norm %g sum_sq(%s) {max_norm = 1.0 : f64} : tensor<8xf32> -> tensor<8xf32>
  %a:3 = train.onebit_adam %p, %c#0, %m, %v, %lr, %t {freeze_step = 10 : i64} : tensor<8xf32>
  return %a#0 : tensor<8xf32>
}

//--- twice.mlir
func.func @step(%p: tensor<8xf32> {train.param = "p"}, %g: tensor<8xf32>, %m: tensor<8xf32> {train.opt_state = "p/exp_avg"}, %v: tensor<8xf32> {train.opt_state = "p/exp_avg_sq"}, %lr: tensor<f32>, %t: tensor<i64> {train.step}) -> (tensor<8xf32> {train.updated = "p"}) {
  %c:2 = train.clip_grad_norm %g {max_norm = 1.0 : f64} : tensor<8xf32> -> tensor<8xf32>
  // expected-error @+1 {{'train.onebit_adam' op onebit-compression: the momentum is compressed already}}
  %a:3 = train.onebit_adam %p, %c#0, %m, %v, %lr, %t compressed(%m : tensor<8xf32>) {freeze_step = 10 : i64} : tensor<8xf32>
  return %a#0 : tensor<8xf32>
}

// --onebit-compression plans DeepSpeed's ZeroOneAdam (0/1 Adam) on 4 ranks
// by step class (train.step_classes, plan/StepRule.h: 1
// initialising, 2 variance, 4 compressed gradient, 8 local, 16 sync).
// ZO-LABEL: func.func @mlp(
// Its states: DeepSpeed's names, lrs a scalar; then each tensor's errors.
// ZO-SAME:    tensor<6x3xf32> {train.opt_state = "w1/momentum_accumulator"}, %{{.*}}: tensor<f32> {train.opt_state = "w1/lrs"}
// ZO-SAME:    tensor<32xf32> {dist.shard_of = array<i64: 128>, train.opt_state = "w1/worker_error"}, %{{.*}}: tensor<8xf32> {dist.shard_of = array<i64: 32>, train.opt_state = "w1/server_error"}
// The gradient averages on the initialising and variance steps (1 | 2).
// ZO:         dist.all_reduce avg %{{.*}} {group = #dist.group<dp, 4>, train.step_classes = 3 : i64} : tensor<6x5xf32>
// The clipping norm's average of the local norms on the compressed-gradient
// and local steps (4 | 8; a sync step is a local step too).
// ZO:         %[[N:.*]] = nn.sqrt
// ZO-NEXT:    dist.all_reduce avg %[[N]] {group = #dist.group<dp, 4>, train.step_classes = 12 : i64} : tensor<f32>
// The errors read as zeros on the first local step (10: var_freeze_step 8
// freezes after call 9), on the steps that compress (4 | 16).
// ZO:         %[[WE:.*]] = train.reset_at %{{.*}}, %{{.*}} {at = 10 : i64, train.step_classes = 20 : i64} : tensor<32xf32>
// ZO:         %[[SE:.*]] = train.reset_at %{{.*}}, %{{.*}} {at = 10 : i64, train.step_classes = 20 : i64} : tensor<8xf32>
// What each tensor's all-reduce carries (the gradient, or the sync's
// u (sqrt(v) + eps)), padded and compressed with its worker error.
// ZO:         %[[Y:.*]] = train.zero_one_payload %{{.*}}, %[[G:.*]]#0, {{.*}} {local_step_clipper = 4 : i64, local_step_scaler = 2 : i64, train.step_classes = 20 : i64, var_freeze_step = 8 : i64, var_update_scaler = 2 : i64} : tensor<6x3xf32>
// ZO-NEXT:    %[[F:.*]] = nn.reshape %[[Y]]
// ZO-NEXT:    %[[P:.*]] = nn.slice_grad %[[F]] {{.*}}train.step_classes = 20 : i64} : tensor<18xf32> -> tensor<32xf32>
// ZO-NEXT:    train.onebit_compress %[[P]], %[[WE]] {train.step_classes = 20 : i64}
// ZO:         dist.all_to_all %{{.*}} {group = #dist.group<dp, 4>, train.step_classes = 20 : i64}
// ZO:         train.onebit_server %{{.*}}, %{{.*}}, %[[SE]] {train.step_classes = 20 : i64}
// ZO:         %[[X:.*]] = train.onebit_expand {{.*}}train.step_classes = 20 : i64
// ZO:         %[[S:.*]] = nn.slice %[[X]] {{.*}}train.step_classes = 20 : i64} : tensor<32xf32> -> tensor<18xf32>
// ZO:         %[[R:.*]] = nn.reshape %[[S]] : tensor<18xf32> -> tensor<6x3xf32>
// The update reads it on those steps; it runs on every step.
// ZO:         train.zero_one_adam %{{.*}}, %[[G]]#0, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} compressed(%[[R]] : tensor<6x3xf32>) {local_step_clipper = 4 : i64, local_step_scaler = 2 : i64, var_freeze_step = 8 : i64, var_update_scaler = 2 : i64} : tensor<6x3xf32>
// The new errors are results.
// ZO:         return {{.*}} : {{.*}}tensor<32xf32>, tensor<8xf32>, tensor<32xf32>, tensor<8xf32>, tensor<32xf32>, tensor<8xf32>

// --onebit-compression plans DeepSpeed's OnebitLamb on 4 ranks with
// freeze_step 5: OnebitAdam's two phases, every tensor's scaled momentum in
// ONE compressed all-reduce of the 54 elements padded to 64.
// LAMB-LABEL: func.func @mlp(
// One pair of errors for the flat tensor, and its padding (10 elements) a
// state of its own.
// LAMB-SAME:    %[[WE:[a-z0-9]+]]: tensor<64xf32> {dist.shard_of = array<i64: 256>, train.opt_state = "exp_avg_flat/worker_error"}, %[[SE:[a-z0-9]+]]: tensor<16xf32> {dist.shard_of = array<i64: 64>, train.opt_state = "exp_avg_flat/server_error"}, %[[PAD:[a-z0-9]+]]: tensor<10xf32> {train.opt_state = "exp_avg_flat/exp_avg_padding"}
// LAMB:         dist.all_reduce avg %{{.*}} {group = #dist.group<dp, 4>, train.active_steps = array<i64: 1, 5>} : tensor<6x5xf32>
// LAMB:         dist.all_reduce avg %{{.*}} {group = #dist.group<dp, 4>, train.active_steps = array<i64: 6, 0>} : tensor<f32>
// The scaling coefficients, set on step 6 (the first compressed one).
// LAMB:         %[[SC:.*]]:3 = train.onebit_lamb_scaling(%{{.*}}, %{{.*}}, %{{.*}} : tensor<6x3xf32>, tensor<6xf32>, tensor<6x5xf32>) coeffs(%{{.*}}, %{{.*}}, %{{.*}}), %{{.*}} {at = 6 : i64}
// Each (b1 m + (1-b1) g) times its coefficient, all concatenated with the
// padding's state, compressed as one.
// LAMB:         %[[M:.*]] = nn.add
// LAMB-NEXT:    nn.mul %[[M]], %[[SC]]#0 {train.active_steps = array<i64: 6, 0>} : tensor<6x3xf32>, tensor<f32>
// LAMB:         %[[CAT:.*]] = nn.concat %{{.*}}, %{{.*}}, %{{.*}}, %[[PAD]] {axis = 0 : i64, train.active_steps = array<i64: 6, 0>} : tensor<18xf32>, tensor<6xf32>, tensor<30xf32>, tensor<10xf32> -> tensor<64xf32>
// LAMB-NEXT:    train.onebit_compress %[[CAT]], %[[WE]] {train.active_steps = array<i64: 6, 0>}
// LAMB:         train.onebit_server %{{.*}}, %{{.*}}, %[[SE]] {train.active_steps = array<i64: 6, 0>}
// LAMB:         %[[X:.*]] = train.onebit_expand
// The padding's new value: the result's last 10 elements.
// LAMB:         %[[NEWPAD:.*]] = nn.slice %[[X]] {limit = array<i64: 64>, start = array<i64: 54>, stride = array<i64: 1>, train.active_steps = array<i64: 6, 0>} : tensor<64xf32> -> tensor<10xf32>
// LAMB:         train.onebit_lamb %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[SC]]#0, %{{.*}}, %{{.*}} compressed(%{{.*}} : tensor<6x3xf32>) {freeze_step = 5 : i64} : tensor<6x3xf32>
// LAMB:         return {{.*}}%[[NEWPAD]] :

// Under fp16 (DeepSpeed's wrapper's one flat tensor of the whole model)
// 1-bit LAMB's norms are every tensor's: train.onebit_lamb_stats, after
// the compressed all-reduce (whose momenta it reads as the updates do), and
// every update reads them; the scaling coefficient is 1 (no multiply), the
// wrapper's first call is spent at construction (step_offset 1: the
// compressed phase from step 5).
// LAMBFLAT-NOT: train.onebit_lamb_scaling
// LAMBFLAT:     train.onebit_compress %{{.*}} {train.active_steps = array<i64: 5, 0>}
// LAMBFLAT:     %[[STATS:.*]] = train.onebit_lamb_stats({{.*}}) grads({{.*}}) exp_avgs({{.*}}) exp_avg_sqs({{.*}}) exp_avg_sq_freshes({{.*}}) compressed(%[[C0:.*]], %[[C1:.*]], %[[C2:.*]] : tensor<6x3xf32>, tensor<6xf32>, tensor<6x5xf32>), %{{.*}} {freeze_step = 5 : i64, step_offset = 1 : i64} -> tensor<3xf32>
// LAMBFLAT:     train.onebit_lamb {{.*}} compressed(%[[C0]] : tensor<6x3xf32>) stats(%[[STATS]] : tensor<3xf32>) {freeze_step = 5 : i64, step_offset = 1 : i64} : tensor<6x3xf32>
// LAMBFLAT:     train.onebit_lamb {{.*}} compressed(%[[C1]] : tensor<6xf32>) stats(%[[STATS]] : tensor<3xf32>)
