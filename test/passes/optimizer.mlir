// The defaults: AdamW, lr 1e-3, constant schedule, no clipping.
// RUN: dsc-opt %s --optimizer | FileCheck %s --check-prefixes=CHECK,ADAMW
// RUN: dsc-opt %s --optimizer | dsc-opt | FileCheck %s --check-prefixes=CHECK,ADAMW
// Adam (L2 weight decay, not decoupled) with every hyperparameter set.
// RUN: dsc-opt %s --optimizer="type=adam lr=0.01 beta1=0.8 beta2=0.99 eps=0.125 weight-decay=0.25 bias-correction=false" | FileCheck %s --check-prefixes=CHECK,ADAM
// SGD with Nesterov momentum, weight decay, clipping and a WarmupLR
// schedule (the type name is case-insensitive).
// RUN: dsc-opt %s --optimizer="type=sgd lr=0.5 momentum=0.9 nesterov=true weight-decay=0.25 clip=1.0 schedule=WarmupLR schedule-params=warmup_num_steps:10,warmup_min_lr:0.125" | FileCheck %s --check-prefixes=CHECK,NESTEROV
// SGD with momentum and dampening, no Nesterov.
// RUN: dsc-opt %s --optimizer="type=sgd momentum=0.5 dampening=0.25" | FileCheck %s --check-prefixes=CHECK,MOMENTUM
// Plain SGD has no state; a negative clip means no clipping.
// RUN: dsc-opt %s --optimizer="type=sgd clip=-1" | FileCheck %s --check-prefixes=CHECK,SGD
// LAMB, Lion and Adagrad (DeepSpeed's FusedLamb, FusedLion and
// torch.optim.Adagrad), with their state names.
// RUN: dsc-opt %s --optimizer="type=lamb lr=0.01 weight-decay=0.25 max-coeff=4 min-coeff=0.5 bias-correction=false" | FileCheck %s --check-prefix=LAMB
// RUN: dsc-opt %s --optimizer="type=lion beta2=0.99 weight-decay=0.5" | FileCheck %s --check-prefix=LION
// RUN: dsc-opt %s --optimizer="type=adagrad lr-decay=0.25 eps=0.125" | FileCheck %s --check-prefix=ADAGRAD
// RUN: dsc-opt %s --optimizer="type=lamb" | dsc-opt | FileCheck %s --check-prefix=LAMB-DEFAULTS

// With LAMB, the trust ratio's sums (train.lamb_stats, on the old moments and
// the clipped gradient) right before each update, which reads them.
// LAMB-LABEL:  func.func @step(
// LAMB-SAME:     %[[W:[a-z0-9]+]]: tensor<3x5xf32> {train.param = "w"}, %[[B:[a-z0-9]+]]: tensor<5xf32> {train.param = "b"},
// LAMB-SAME:     %[[MW:[a-z0-9]+]]: tensor<3x5xf32> {train.opt_state = "w/exp_avg"}, %[[VW:[a-z0-9]+]]: tensor<3x5xf32> {train.opt_state = "w/exp_avg_sq"},
// LAMB-SAME:     {train.opt_state = "b/exp_avg"}, {{.*}} {train.opt_state = "b/exp_avg_sq"}, %[[S:[a-z0-9]+]]: tensor<i64> {train.step})
// LAMB:          %[[C:.*]]:2, %{{.*}} = train.clip_grad_norm
// LAMB-NEXT:     %[[SW:.*]] = train.lamb_stats %[[W]], %[[C]]#0, %[[MW]], %[[VW]] {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, weight_decay = 2.500000e-01 : f64} : tensor<3x5xf32> -> tensor<2xf32>
// LAMB-NEXT:     train.lamb %[[W]], %[[C]]#0, %[[MW]], %[[VW]], %{{.*}}, %[[S]], %[[SW]] {bias_correction = false, max_coeff = 4.000000e+00 : f64, min_coeff = 5.000000e-01 : f64, weight_decay = 2.500000e-01 : f64} : tensor<3x5xf32>, tensor<2xf32>
// LAMB-NEXT:     train.lamb_stats %[[B]], %[[C]]#1,
// LAMB-NEXT:     train.lamb %[[B]], %[[C]]#1,
// LAMB-DEFAULTS: train.lamb_stats {{.*}} {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64}
// LAMB-DEFAULTS: train.lamb {{.*}} : tensor<3x5xf32>, tensor<2xf32>

// With Lion, one state, exp_avg, and no step.
// LION-LABEL:  func.func @step(
// LION-SAME:     %[[W:[a-z0-9]+]]: tensor<3x5xf32> {train.param = "w"}, %{{.*}}: tensor<5xf32> {train.param = "b"},
// LION-SAME:     %[[MW:[a-z0-9]+]]: tensor<3x5xf32> {train.opt_state = "w/exp_avg"}, %{{.*}}: tensor<5xf32> {train.opt_state = "b/exp_avg"}, %{{.*}}: tensor<i64> {train.step})
// LION:          %[[C:.*]]:2, %{{.*}} = train.clip_grad_norm
// LION-NEXT:     train.lion %[[W]], %[[C]]#0, %[[MW]], %{{.*}} {beta2 = 0.98999999999999999 : f64, weight_decay = 5.000000e-01 : f64} : tensor<3x5xf32>
// LION-NEXT:     train.lion

// With Adagrad, torch's state name, sum.
// ADAGRAD-LABEL: func.func @step(
// ADAGRAD-SAME:    %[[W:[a-z0-9]+]]: tensor<3x5xf32> {train.param = "w"}, %{{.*}}: tensor<5xf32> {train.param = "b"},
// ADAGRAD-SAME:    %[[SUM:[a-z0-9]+]]: tensor<3x5xf32> {train.opt_state = "w/sum"}, %{{.*}}: tensor<5xf32> {train.opt_state = "b/sum"}, %[[S:[a-z0-9]+]]: tensor<i64> {train.step})
// ADAGRAD:         %[[C:.*]]:2, %{{.*}} = train.clip_grad_norm
// ADAGRAD-NEXT:    train.adagrad %[[W]], %[[C]]#0, %[[SUM]], %{{.*}}, %[[S]] {eps = 1.250000e-01 : f64, lr_decay = 2.500000e-01 : f64} : tensor<3x5xf32>


// --optimizer turns a step returning the loss and one train.grad per
// parameter into one that returns, in this order: the updated parameters
// (train.updated), the updated optimizer states (train.opt_state), the loss,
// the global gradient norm and the learning rate. The states (two per
// parameter for Adam, one for SGD with momentum, none for plain SGD) and the
// step counter (train.step) become new arguments after the existing ones.
// The learning rate is computed first, from the step; train.clip_grad_norm
// computes the norm (and clips when clip > 0); the updates read the
// clipped gradients.

// CHECK-LABEL: func.func @step(
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<4x3xf32> {train.input = "x"}, %[[W:[a-z0-9]+]]: tensor<3x5xf32> {train.param = "w"}, %[[B:[a-z0-9]+]]: tensor<5xf32> {train.param = "b"},

// ADAMW-SAME:    %[[MW:[a-z0-9]+]]: tensor<3x5xf32> {train.opt_state = "w/exp_avg"}, %[[VW:[a-z0-9]+]]: tensor<3x5xf32> {train.opt_state = "w/exp_avg_sq"},
// ADAMW-SAME:    %[[MB:[a-z0-9]+]]: tensor<5xf32> {train.opt_state = "b/exp_avg"}, %[[VB:[a-z0-9]+]]: tensor<5xf32> {train.opt_state = "b/exp_avg_sq"},
// ADAMW-SAME:    %[[S:[a-z0-9]+]]: tensor<i64> {train.step})
// ADAMW-SAME:    -> (tensor<3x5xf32> {train.updated = "w"}, tensor<5xf32> {train.updated = "b"},
// ADAMW-SAME:        tensor<3x5xf32> {train.opt_state = "w/exp_avg"}, tensor<3x5xf32> {train.opt_state = "w/exp_avg_sq"},
// ADAMW-SAME:        tensor<5xf32> {train.opt_state = "b/exp_avg"}, tensor<5xf32> {train.opt_state = "b/exp_avg_sq"},
// ADAMW-SAME:        tensor<f32> {train.loss}, tensor<f32> {train.grad_norm}, tensor<f32> {train.lr})
// ADAMW-NEXT:    %[[LR:.*]] = train.lr_schedule "constant" {lr = 1.000000e-03 : f64}, %[[S]]
// ADAMW-NEXT:    nn.matmul
// ADAMW:         %[[LOSS:.*]] = nn.reduce_sum %{{.*}} {axes = array<i64: 0, 1>}
// ADAMW-NEXT:    %[[GW:.*]] = nn.matmul %[[X]], %{{.*}} {transpose_lhs}
// ADAMW-NEXT:    %[[GB:.*]] = nn.reduce_sum %{{.*}} {axes = array<i64: 0>}
// ADAMW-NEXT:    %[[C:.*]]:2, %[[NORM:.*]] = train.clip_grad_norm %[[GW]], %[[GB]] {max_norm = 0.000000e+00 : f64} : tensor<3x5xf32>, tensor<5xf32> -> tensor<3x5xf32>, tensor<5xf32>
// ADAMW-NEXT:    %[[PW:[a-z_0-9]+]], %[[NMW:[a-z_0-9]+]], %[[NVW:[a-z_0-9]+]] = train.adam %[[W]], %[[C]]#0, %[[MW]], %[[VW]], %[[LR]], %[[S]] {decoupled_weight_decay} : tensor<3x5xf32>
// ADAMW-NEXT:    %[[PB:[a-z_0-9]+]], %[[NMB:[a-z_0-9]+]], %[[NVB:[a-z_0-9]+]] = train.adam %[[B]], %[[C]]#1, %[[MB]], %[[VB]], %[[LR]], %[[S]] {decoupled_weight_decay} : tensor<5xf32>
// ADAMW-NEXT:    return %[[PW]], %[[PB]], %[[NMW]], %[[NVW]], %[[NMB]], %[[NVB]], %[[LOSS]], %[[NORM]], %[[LR]] :

// ADAM-SAME:     {train.opt_state = "w/exp_avg"}, {{.*}} {train.opt_state = "w/exp_avg_sq"}, {{.*}} {train.opt_state = "b/exp_avg"}, {{.*}} {train.opt_state = "b/exp_avg_sq"}, %[[S:[a-z0-9]+]]: tensor<i64> {train.step})
// ADAM-NEXT:     %[[LR:.*]] = train.lr_schedule "constant" {lr = 1.000000e-02 : f64}, %[[S]]
// ADAM:          train.clip_grad_norm {{.*}} {max_norm = 0.000000e+00 : f64}
// ADAM-NEXT:     train.adam %[[W]], %{{.*}}#0, %{{.*}}, %{{.*}}, %[[LR]], %[[S]] {beta1 = 8.000000e-01 : f64, beta2 = 0.98999999999999999 : f64, bias_correction = false, eps = 1.250000e-01 : f64, weight_decay = 2.500000e-01 : f64} : tensor<3x5xf32>
// ADAM-NEXT:     train.adam %[[B]], %{{.*}}#1, %{{.*}}, %{{.*}}, %[[LR]], %[[S]] {beta1 = 8.000000e-01 : f64, beta2 = 0.98999999999999999 : f64, bias_correction = false, eps = 1.250000e-01 : f64, weight_decay = 2.500000e-01 : f64} : tensor<5xf32>
// ADAM-NOT:      decoupled_weight_decay

// NESTEROV-SAME: %[[BW:[a-z0-9]+]]: tensor<3x5xf32> {train.opt_state = "w/momentum_buffer"}, %[[BB:[a-z0-9]+]]: tensor<5xf32> {train.opt_state = "b/momentum_buffer"},
// NESTEROV-SAME: %[[S:[a-z0-9]+]]: tensor<i64> {train.step})
// NESTEROV-SAME: -> (tensor<3x5xf32> {train.updated = "w"}, tensor<5xf32> {train.updated = "b"},
// NESTEROV-SAME:     tensor<3x5xf32> {train.opt_state = "w/momentum_buffer"}, tensor<5xf32> {train.opt_state = "b/momentum_buffer"},
// NESTEROV-SAME:     tensor<f32> {train.loss}, tensor<f32> {train.grad_norm}, tensor<f32> {train.lr})
// The schedule's parameters are its name:value pairs plus lr, sorted.
// NESTEROV-NEXT: %[[LR:.*]] = train.lr_schedule "WarmupLR" {lr = 5.000000e-01 : f64, warmup_min_lr = 1.250000e-01 : f64, warmup_num_steps = 1.000000e+01 : f64}, %[[S]]
// NESTEROV:      %[[C:.*]]:2, %[[NORM:.*]] = train.clip_grad_norm %{{.*}}, %{{.*}} {max_norm = 1.000000e+00 : f64}
// NESTEROV-NEXT: %[[PW:[a-z_0-9]+]], %[[NBW:[a-z_0-9]+]] = train.sgd %[[W]], %[[C]]#0, %[[LR]] buffer %[[BW]] : tensor<3x5xf32> {momentum = 9.000000e-01 : f64, nesterov, weight_decay = 2.500000e-01 : f64} : tensor<3x5xf32> -> tensor<3x5xf32>
// NESTEROV-NEXT: %[[PB:[a-z_0-9]+]], %[[NBB:[a-z_0-9]+]] = train.sgd %[[B]], %[[C]]#1, %[[LR]] buffer %[[BB]] : tensor<5xf32> {momentum = 9.000000e-01 : f64, nesterov, weight_decay = 2.500000e-01 : f64} : tensor<5xf32> -> tensor<5xf32>
// NESTEROV-NEXT: return %[[PW]], %[[PB]], %[[NBW]], %[[NBB]], %{{.*}}, %[[NORM]], %[[LR]] :

// MOMENTUM-SAME: {train.opt_state = "w/momentum_buffer"}, {{.*}} {train.opt_state = "b/momentum_buffer"}, %{{.*}}: tensor<i64> {train.step})
// MOMENTUM:      train.sgd %[[W]], %{{.*}}#0, %{{.*}} buffer %{{.*}} : tensor<3x5xf32> {dampening = 2.500000e-01 : f64, momentum = 5.000000e-01 : f64} : tensor<3x5xf32> -> tensor<3x5xf32>
// MOMENTUM-NEXT: train.sgd %[[B]], %{{.*}}#1, %{{.*}} buffer %{{.*}} : tensor<5xf32> {dampening = 2.500000e-01 : f64, momentum = 5.000000e-01 : f64} : tensor<5xf32> -> tensor<5xf32>

// SGD-SAME:      %[[S:[a-z0-9]+]]: tensor<i64> {train.step})
// SGD-SAME:      -> (tensor<3x5xf32> {train.updated = "w"}, tensor<5xf32> {train.updated = "b"}, tensor<f32> {train.loss}, tensor<f32> {train.grad_norm}, tensor<f32> {train.lr})
// SGD-NOT:       train.opt_state
// SGD:           %[[C:.*]]:2, %{{.*}} = train.clip_grad_norm {{.*}} {max_norm = 0.000000e+00 : f64}
// SGD-NEXT:      %[[PW:.*]] = train.sgd %[[W]], %[[C]]#0, %{{.*}} : tensor<3x5xf32>
// SGD-NEXT:      %[[PB:.*]] = train.sgd %[[B]], %[[C]]#1, %{{.*}} : tensor<5xf32>
// SGD-NEXT:      return %[[PW]], %[[PB]], %{{.*}}, %{{.*}}, %{{.*}} : tensor<3x5xf32>, tensor<5xf32>, tensor<f32>, tensor<f32>, tensor<f32>
func.func @step(%x: tensor<4x3xf32> {train.input = "x"}, %w: tensor<3x5xf32> {train.param = "w"}, %b: tensor<5xf32> {train.param = "b"})
    -> (tensor<f32> {train.loss}, tensor<3x5xf32> {train.grad = "w"}, tensor<5xf32> {train.grad = "b"}) {
  %0 = nn.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32> -> tensor<4x5xf32>
  %1 = nn.add %0, %b : tensor<4x5xf32>, tensor<5xf32> -> tensor<4x5xf32>
  %2 = nn.reduce_sum %1 {axes = array<i64: 0, 1>} : tensor<4x5xf32> -> tensor<f32>
  %3 = nn.matmul %x, %0 {transpose_lhs} : tensor<4x3xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
  %4 = nn.reduce_sum %1 {axes = array<i64: 0>} : tensor<4x5xf32> -> tensor<5xf32>
  return %2, %3, %4 : tensor<f32>, tensor<3x5xf32>, tensor<5xf32>
}

// Gradients are matched to parameters by name, and the updates, the states
// and their new arguments follow the order of the train.grad results (here
// b before w), not that of the parameters; the loss may be any result.
// ADAMW-LABEL: func.func @by_name(
// ADAMW-SAME:    %[[W:[a-z0-9]+]]: tensor<3xf32> {train.param = "w"}, %[[B:[a-z0-9]+]]: tensor<2xf32> {train.param = "b"},
// ADAMW-SAME:    %[[MB:[a-z0-9]+]]: tensor<2xf32> {train.opt_state = "b/exp_avg"}, %[[VB:[a-z0-9]+]]: tensor<2xf32> {train.opt_state = "b/exp_avg_sq"},
// ADAMW-SAME:    %[[MW:[a-z0-9]+]]: tensor<3xf32> {train.opt_state = "w/exp_avg"}, %[[VW:[a-z0-9]+]]: tensor<3xf32> {train.opt_state = "w/exp_avg_sq"},
// ADAMW-SAME:    %[[S:[a-z0-9]+]]: tensor<i64> {train.step})
// ADAMW-SAME:    -> (tensor<2xf32> {train.updated = "b"}, tensor<3xf32> {train.updated = "w"},
// ADAMW:         %[[C:.*]]:2, %{{.*}} = train.clip_grad_norm %[[GB:.*]], %[[GW:.*]] {max_norm
// ADAMW-NEXT:    train.adam %[[B]], %[[C]]#0, %[[MB]], %[[VB]], %{{.*}}, %[[S]]
// ADAMW-NEXT:    train.adam %[[W]], %[[C]]#1, %[[MW]], %[[VW]], %{{.*}}, %[[S]]
func.func @by_name(%w: tensor<3xf32> {train.param = "w"}, %b: tensor<2xf32> {train.param = "b"})
    -> (tensor<2xf32> {train.grad = "b"}, tensor<f32> {train.loss}, tensor<3xf32> {train.grad = "w"}) {
  %0 = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<3xf32> -> tensor<f32>
  %1 = nn.mul %b, %b : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  %2 = nn.mul %w, %w : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return %1, %0, %2 : tensor<2xf32>, tensor<f32>, tensor<3xf32>
}

// A function without gradients is left alone: no new arguments or ops.
// CHECK-LABEL: func.func @forward_only(
// CHECK-SAME:    %{{.*}}: tensor<4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
// CHECK-NEXT:    nn.reduce_sum
// CHECK-NEXT:    return
func.func @forward_only(%w: tensor<4xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  %0 = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  return %0 : tensor<f32>
}
