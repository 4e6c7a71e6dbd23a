// RUN: dsc-opt %s -split-input-file --optimizer -verify-diagnostics -o /dev/null

// Errors about the options are reported on the module, before any function
// is rewritten (unknown type) or while building the schedule (parameters
// that are not name:number: no ':', an empty name, a value that is not a
// number).
// RUN: not dsc-opt %s --optimizer=type=lamb 2>&1 | FileCheck %s --check-prefix=TYPE
// TYPE: error: optimizer: unknown type 'lamb' (expected adam, adamw or sgd)
// RUN: not dsc-opt %s --optimizer=schedule-params=warmup_num_steps 2>&1 | FileCheck %s --check-prefix=NOCOLON
// NOCOLON: error: optimizer: schedule parameter 'warmup_num_steps' is not name:number
// RUN: not dsc-opt %s --optimizer=schedule-params=:5 2>&1 | FileCheck %s --check-prefix=NONAME
// NONAME: error: optimizer: schedule parameter ':5' is not name:number
// RUN: not dsc-opt %s --optimizer="schedule=WarmupLR schedule-params=warmup_min_lr:0,warmup_num_steps:ten" 2>&1 | FileCheck %s --check-prefix=NAN
// NAN: error: optimizer: schedule parameter 'warmup_num_steps:ten' is not name:number
// An unknown schedule type is caught by train.lr_schedule's verifier after
// the pass, which lists the known ones (-split-input-file: the valid chunk
// gets that far).
// RUN: not dsc-opt %s -split-input-file --optimizer=schedule=NoSuchLR 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// SCHEDULE: error: 'train.lr_schedule' op unknown schedule 'NoSuchLR' (expected constant, WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle or LRRangeTest)

// A valid step first, so that the runs without -split-input-file above
// reach the schedule (built per function) before any function's error.
// (No diagnostic with the default options.)
func.func @valid(%w: tensor<4xf32> {train.param = "w"})
    -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "w"}) {
  %0 = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  return %0, %w : tensor<f32>, tensor<4xf32>
}

// -----

// Every error --optimizer reports on a function.

// A gradient must belong to a train.param argument of the same name.
// expected-error @+1 {{optimizer: gradient of unknown parameter 'bias'}}
func.func @unknown_param(%w: tensor<4xf32> {train.param = "weight"})
    -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "bias"}) {
  %0 = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  return %0, %w : tensor<f32>, tensor<4xf32>
}

// -----

// The name matches a train.input, not a parameter: still unknown.
// expected-error @+1 {{optimizer: gradient of unknown parameter 'x'}}
func.func @grad_of_input(%x: tensor<4xf32> {train.input = "x"}, %w: tensor<4xf32> {train.param = "w"})
    -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "x"}) {
  %0 = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  return %0, %w : tensor<f32>, tensor<4xf32>
}

// -----

// Gradients without the loss they belong to.
// expected-error @+1 {{optimizer: a differentiated step needs its train.loss result}}
func.func @no_loss(%w: tensor<4xf32> {train.param = "w"})
    -> (tensor<f32>, tensor<4xf32> {train.grad = "w"}) {
  %0 = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
  return %0, %w : tensor<f32>, tensor<4xf32>
}
