// RUN: split-file %s %t
// RUN: dsc-opt %t/functions.mlir -split-input-file --optimizer -verify-diagnostics -o /dev/null
// RUN: dsc-opt %t/no-colon.mlir --optimizer=schedule-params=warmup_num_steps -verify-diagnostics -o /dev/null
// RUN: dsc-opt %t/no-name.mlir --optimizer=schedule-params=:5 -verify-diagnostics -o /dev/null
// RUN: dsc-opt %t/not-a-number.mlir --optimizer="schedule=WarmupLR schedule-params=warmup_min_lr:0,warmup_num_steps:ten" -verify-diagnostics -o /dev/null
// RUN: not dsc-opt %t/functions.mlir --optimizer=schedule=NoSuchLR -o /dev/null 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// SCHEDULE: for the --schedule option: Cannot find option named 'NoSuchLR'!
// RUN: dsc-opt %t/unknown-schedule.mlir -verify-diagnostics -o /dev/null

// Errors about the options are reported on the module, before any function
// is rewritten (unknown type) or while building the schedule (parameters
// that are not name:number: no ':', an empty name, a value that is not a
// number): one input with a valid step per option value.
// RUN: not dsc-opt %t/functions.mlir --optimizer=type=lars 2>&1 | FileCheck %s --check-prefix=TYPE
// TYPE: for the --type option: Cannot find option named 'lars'!

//--- no-colon.mlir
// expected-error @below {{optimizer: schedule parameter 'warmup_num_steps' is not name:number}}
module {
  func.func @step(%w: tensor<4xf32> {train.param = "w"})
      -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "w"}) {
    %0 = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
    return %0, %w : tensor<f32>, tensor<4xf32>
  }
}

//--- no-name.mlir
// expected-error @below {{optimizer: schedule parameter ':5' is not name:number}}
module {
  func.func @step(%w: tensor<4xf32> {train.param = "w"})
      -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "w"}) {
    %0 = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
    return %0, %w : tensor<f32>, tensor<4xf32>
  }
}

//--- not-a-number.mlir
// expected-error @below {{optimizer: schedule parameter 'warmup_num_steps:ten' is not name:number}}
module {
  func.func @step(%w: tensor<4xf32> {train.param = "w"})
      -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "w"}) {
    %0 = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
    return %0, %w : tensor<f32>, tensor<4xf32>
  }
}

//--- unknown-schedule.mlir
// The pass's schedule option is an enum (refused where the pipeline is
// parsed, above); a hand-written train.lr_schedule of an unknown kind is
// caught by its verifier, which lists the known ones.
func.func @step(%s: tensor<i64> {train.step}) -> tensor<f32> {
  // expected-error @below {{'train.lr_schedule' op unknown schedule 'NoSuchLR' (expected constant, WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle or LRRangeTest)}}
  %lr = train.lr_schedule "NoSuchLR" {lr = 1.0e-3 : f64}, %s
  return %lr : tensor<f32>
}

//--- functions.mlir
// A valid step first (no diagnostic with the default options).
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
