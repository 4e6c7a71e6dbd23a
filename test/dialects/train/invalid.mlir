// RUN: dsc-opt %s -split-input-file -allow-unregistered-dialect -verify-diagnostics

// Verifier errors of the train dialect: role attributes on function
// arguments and results, optimizer updates and step-structure regions.
// (-allow-unregistered-dialect only serves the case whose region ends with
// a foreign terminator.)

//===----------------------------------------------------------------------===//
// Argument and result roles
//===----------------------------------------------------------------------===//

// Only train.param, train.buffer and train.input are argument roles.
// expected-error @+1 {{unknown argument attribute 'train.weight'}}
func.func @unknown_arg_attr(%w: tensor<4xf32> {train.weight = "w"}) {
  return
}

// -----

// train.loss is a result role, not an argument role.
// expected-error @+1 {{unknown argument attribute 'train.loss'}}
func.func @loss_on_arg(%l: tensor<f32> {train.loss}) {
  return
}

// -----

// A role's name may not be empty.
// expected-error @+1 {{'train.param' of argument 0 must be a non-empty name string}}
func.func @empty_param_name(%w: tensor<4xf32> {train.param = ""}) {
  return
}

// -----

// A role's value must be a string (the source model's name); the index in
// the message is the argument's.
// expected-error @+1 {{'train.input' of argument 1 must be a non-empty name string}}
func.func @non_string_input_name(%w: tensor<4xf32>, %x: tensor<4xf32> {train.input = 3 : i64}) {
  return
}

// -----

// train.buffer is checked like the other roles (here: a unit value).
// expected-error @+1 {{'train.buffer' of argument 0 must be a non-empty name string}}
func.func @unit_buffer_name(%b: tensor<4xf32> {train.buffer}) {
  return
}

// -----

// Role-carrying arguments are tensors, not scalars.
// expected-error @+1 {{argument 0 ('x') must be a statically shaped tensor, got 'f32'}}
func.func @input_not_tensor(%x: f32 {train.input = "x"}) {
  return
}

// -----

// Role-carrying arguments have a static shape.
// expected-error @+1 {{argument 1 ('running_mean') must be a statically shaped tensor, got 'tensor<?xf32>'}}
func.func @buffer_dynamic(%w: tensor<4xf32>, %b: tensor<?xf32> {train.buffer = "running_mean"}) {
  return
}

// -----

// A parameter is trainable, so it must be a float tensor.
// expected-error @+1 {{parameter 'embed.ids' must be a float tensor, got 'tensor<4xi32>'}}
func.func @param_not_float(%w: tensor<4xi32> {train.param = "embed.ids"}) {
  return
}

// -----

// train.param is the only role that requires floats: an integer buffer and
// input are fine, so only the parameter is reported.
// expected-error @+1 {{parameter 'w' must be a float tensor, got 'tensor<2x2xi64>'}}
func.func @param_not_float_mixed(%b: tensor<4xi64> {train.buffer = "n"}, %x: tensor<4xi8> {train.input = "x"}, %w: tensor<2x2xi64> {train.param = "w"}) {
  return
}

// -----

// train.loss is the only result role.
// expected-error @+1 {{unknown result attribute 'train.param'}}
func.func @unknown_result_attr(%w: tensor<4xf32>) -> (tensor<4xf32> {train.param = "w"}) {
  return %w : tensor<4xf32>
}

// -----

// The loss is a scalar: a rank-1 loss is rejected.
// expected-error @+1 {{the loss (result 0) must be a scalar float tensor, got 'tensor<4xf32>'}}
func.func @loss_not_scalar(%l: tensor<4xf32>) -> (tensor<4xf32> {train.loss}) {
  return %l : tensor<4xf32>
}

// -----

// The loss is a float: an integer scalar is rejected; the index is the result's.
// expected-error @+1 {{the loss (result 1) must be a scalar float tensor, got 'tensor<i64>'}}
func.func @loss_not_float(%w: tensor<4xf32>, %l: tensor<i64>) -> (tensor<4xf32>, tensor<i64> {train.loss}) {
  return %w, %l : tensor<4xf32>, tensor<i64>
}

// -----

// The loss is a tensor, not a bare f32.
// expected-error @+1 {{the loss (result 0) must be a scalar float tensor, got 'f32'}}
func.func @loss_not_tensor(%l: f32) -> (f32 {train.loss}) {
  return %l : f32
}

//===----------------------------------------------------------------------===//
// train.sgd
//===----------------------------------------------------------------------===//

// -----

// momentum lies in [0, 1).
func.func @sgd_momentum_one(%p: tensor<4xf32>, %lr: tensor<f32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'train.sgd' op momentum = 1.000000e+00 must be in [0.000000e+00, 1.000000e+00)}}
  %0, %1 = train.sgd %p, %p, %lr buffer %b : tensor<4xf32> {momentum = 1.0} : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

// A negative momentum is rejected.
func.func @sgd_momentum_negative(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.sgd' op momentum = -5.000000e-01 must be in [0.000000e+00, 1.000000e+00)}}
  %0 = train.sgd %p, %p, %lr {momentum = -0.5} : tensor<4xf32>
  return
}

// -----

// dampening lies in [0, 1).
func.func @sgd_dampening(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.sgd' op dampening = 1.000000e+00 must be in [0.000000e+00, 1.000000e+00)}}
  %0 = train.sgd %p, %p, %lr {dampening = 1.0} : tensor<4xf32>
  return
}

// -----

// weight_decay must not be negative.
func.func @sgd_weight_decay(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.sgd' op weight_decay = -1.000000e-01 must be in [0.000000e+00, 1.000000e+30)}}
  %0 = train.sgd %p, %p, %lr {weight_decay = -0.1} : tensor<4xf32>
  return
}

// -----

// momentum > 0 needs the momentum buffer operand.
func.func @sgd_momentum_without_buffer(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.sgd' op a momentum buffer is required exactly when momentum > 0}}
  %0 = train.sgd %p, %p, %lr {momentum = 0.9} : tensor<4xf32>
  return
}

// -----

// A momentum buffer without momentum is rejected as well.
func.func @sgd_buffer_without_momentum(%p: tensor<4xf32>, %lr: tensor<f32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'train.sgd' op a momentum buffer is required exactly when momentum > 0}}
  %0, %1 = train.sgd %p, %p, %lr buffer %b : tensor<4xf32> : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

// With a buffer operand, the updated buffer must be a result.
func.func @sgd_buffer_not_returned(%p: tensor<4xf32>, %lr: tensor<f32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'train.sgd' op the momentum buffer operand and its updated result must both be present or both be absent}}
  %0 = train.sgd %p, %p, %lr buffer %b : tensor<4xf32> {momentum = 0.9} : tensor<4xf32>
  return
}

// -----

// Without a buffer operand, there is no updated buffer result either.
func.func @sgd_buffer_result_without_operand(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.sgd' op the momentum buffer operand and its updated result must both be present or both be absent}}
  %0, %1 = train.sgd %p, %p, %lr : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

// The momentum buffer has the parameter's type.
func.func @sgd_buffer_type(%p: tensor<4xf32>, %lr: tensor<f32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{'train.sgd' op momentum buffer must have the parameter's type}}
  %0, %1 = train.sgd %p, %p, %lr buffer %b : tensor<4xf16> {momentum = 0.9} : tensor<4xf32> -> tensor<4xf16>
  return
}

// -----

// The updated momentum buffer has the parameter's type too.
func.func @sgd_new_buffer_type(%p: tensor<4xf32>, %lr: tensor<f32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'train.sgd' op momentum buffer must have the parameter's type}}
  %0, %1 = train.sgd %p, %p, %lr buffer %b : tensor<4xf32> {momentum = 0.9} : tensor<4xf32> -> tensor<2x2xf32>
  return
}

// -----

// Nesterov needs momentum.
func.func @sgd_nesterov_without_momentum(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.sgd' op nesterov requires momentum > 0 and dampening = 0}}
  %0 = train.sgd %p, %p, %lr {nesterov} : tensor<4xf32>
  return
}

// -----

// Nesterov forbids dampening.
func.func @sgd_nesterov_dampening(%p: tensor<4xf32>, %lr: tensor<f32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'train.sgd' op nesterov requires momentum > 0 and dampening = 0}}
  %0, %1 = train.sgd %p, %p, %lr buffer %b : tensor<4xf32> {momentum = 0.9, dampening = 0.1, nesterov} : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

// param, grad and new_param share one type (the ODS AllTypesMatch constraint
// reports it, before the C++ verifier's own equality check could run).
func.func @sgd_grad_type(%p: tensor<4xf32>, %g: tensor<4xf16>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.sgd' op failed to verify that all of {param, grad, new_param} have same type}}
  %0 = "train.sgd"(%p, %g, %lr) : (tensor<4xf32>, tensor<4xf16>, tensor<f32>) -> tensor<4xf32>
  return
}

// -----

// The learning rate is an f32 scalar tensor.
func.func @sgd_lr_type(%p: tensor<4xf32>, %lr: tensor<f16>) {
  // expected-error @+1 {{'train.sgd' op operand #2 must be 0D tensor of 32-bit float values}}
  %0 = "train.sgd"(%p, %p, %lr) : (tensor<4xf32>, tensor<4xf32>, tensor<f16>) -> tensor<4xf32>
  return
}

//===----------------------------------------------------------------------===//
// train.adam
//===----------------------------------------------------------------------===//

// -----

// beta1 lies in [0, 1).
func.func @adam_beta1(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.adam' op beta1 = 1.000000e+00 must be in [0.000000e+00, 1.000000e+00)}}
  %0:3 = train.adam %p, %p, %p, %p, %lr, %s {beta1 = 1.0} : tensor<4xf32>
  return
}

// -----

// beta2 lies in [0, 1).
func.func @adam_beta2(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.adam' op beta2 = -1.000000e-01 must be in [0.000000e+00, 1.000000e+00)}}
  %0:3 = train.adam %p, %p, %p, %p, %lr, %s {beta2 = -0.1} : tensor<4xf32>
  return
}

// -----

// Adam's weight_decay must not be negative.
func.func @adam_weight_decay(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.adam' op weight_decay = -1.000000e-02 must be in [0.000000e+00, 1.000000e+30)}}
  %0:3 = train.adam %p, %p, %p, %p, %lr, %s {decoupled_weight_decay, weight_decay = -0.01} : tensor<4xf32>
  return
}

// -----

// eps = 0 is rejected (it guards a division).
func.func @adam_eps_zero(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.adam' op eps must be positive}}
  %0:3 = train.adam %p, %p, %p, %p, %lr, %s {eps = 0.0} : tensor<4xf32>
  return
}

// -----

//===--- train.lion, train.adagrad, train.lamb_stats, train.lamb ---------===//

// Lion's betas lie in [0, 1).
func.func @lion_beta2(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.lion' op beta2 = 1.000000e+00 must be in [0.000000e+00, 1.000000e+00)}}
  %0:2 = train.lion %p, %p, %p, %lr {beta2 = 1.0} : tensor<4xf32>
  return
}

// -----

func.func @lion_weight_decay(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'train.lion' op weight_decay = -1.000000e+00 must be in [0.000000e+00, 1.000000e+30)}}
  %0:2 = train.lion %p, %p, %p, %lr {weight_decay = -1.0} : tensor<4xf32>
  return
}

// -----

// Adagrad's eps guards a division.
func.func @adagrad_eps(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.adagrad' op eps must be positive}}
  %0:2 = train.adagrad %p, %p, %p, %lr, %s {eps = 0.0} : tensor<4xf32>
  return
}

// -----

func.func @adagrad_lr_decay(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.adagrad' op lr_decay = -1.000000e+00 must be in [0.000000e+00, 1.000000e+30)}}
  %0:2 = train.adagrad %p, %p, %p, %lr, %s {lr_decay = -1.0} : tensor<4xf32>
  return
}

// -----

// The trust ratio's sums are a pair.
func.func @lamb_stats_shape(%p: tensor<4xf32>) {
  // expected-error @+1 {{'train.lamb_stats' op result must be tensor<2xf32> (the squares of the parameter and of the update), got 'tensor<3xf32>'}}
  %0 = train.lamb_stats %p, %p, %p, %p {beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0} : tensor<4xf32> -> tensor<3xf32>
  return
}

// -----

func.func @lamb_stats_eps(%p: tensor<4xf32>) {
  // expected-error @+1 {{'train.lamb_stats' op eps must be positive}}
  %0 = train.lamb_stats %p, %p, %p, %p {beta1 = 0.9, beta2 = 0.999, eps = 0.0, weight_decay = 0.0} : tensor<4xf32> -> tensor<2xf32>
  return
}

// -----

func.func @lamb_stats_operand(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>, %st: tensor<1xf32>) {
  // expected-error @+1 {{'train.lamb' op stats must be tensor<2xf32> (train.lamb_stats), got 'tensor<1xf32>'}}
  %0:3 = train.lamb %p, %p, %p, %p, %lr, %s, %st : tensor<4xf32>, tensor<1xf32>
  return
}

// -----

// min_coeff and max_coeff clamp the trust ratio: 0 <= min <= max.
func.func @lamb_coeffs(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>, %st: tensor<2xf32>) {
  // expected-error @+1 {{'train.lamb' op needs 0 <= min_coeff <= max_coeff, got min_coeff = 2.000000e+00, max_coeff = 1.000000e+00}}
  %0:3 = train.lamb %p, %p, %p, %p, %lr, %s, %st {min_coeff = 2.0, max_coeff = 1.0} : tensor<4xf32>, tensor<2xf32>
  return
}

// -----

// The sums must be of the update train.lamb makes.
func.func @lamb_stats_mismatch(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  %st = train.lamb_stats %p, %p, %p, %p {beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.5} : tensor<4xf32> -> tensor<2xf32>
  // expected-error @+1 {{'train.lamb' op its train.lamb_stats has other betas, eps or weight_decay}}
  %0:3 = train.lamb %p, %p, %p, %p, %lr, %s, %st : tensor<4xf32>, tensor<2xf32>
  return
}

// -----

// A negative eps is rejected.
func.func @adam_eps_negative(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.adam' op eps must be positive}}
  %0:3 = train.adam %p, %p, %p, %p, %lr, %s {eps = -1.0e-8} : tensor<4xf32>
  return
}

// -----

// The step counter is an i64 scalar tensor.
func.func @adam_step_type(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i32>) {
  // expected-error @+1 {{'train.adam' op operand #5 must be 0D tensor of 64-bit signless integer values}}
  %0:3 = "train.adam"(%p, %p, %p, %p, %lr, %s) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

//===----------------------------------------------------------------------===//
// train.fused_lamb_stats and train.fused_lamb (fuse-optimizer)
//===----------------------------------------------------------------------===//

// -----

// The sums' rates are LAMB's.
func.func @fused_lamb_stats_eps(%p: tensor<4xf32>) {
  // expected-error @+1 {{'train.fused_lamb_stats' op eps must be positive}}
  %0 = train.fused_lamb_stats(%p) grads(%p) states(%p) (%p) {beta1 = 0.9, beta2 = 0.999, eps = 0.0, weight_decay = 0.0} : (tensor<4xf32>) grads(tensor<4xf32>)
  return
}

// -----

// One gradient per parameter (the tensors are checked as train.fused_adam's).
func.func @fused_lamb_stats_count(%p: tensor<4xf32>) {
  // expected-error @+1 {{'train.fused_lamb_stats' op needs one gradient, exp_avg and exp_avg_sq per parameter; has 1 parameters, 2 gradients, 1 exp_avgs and 1 exp_avg_sqs}}
  %0 = train.fused_lamb_stats(%p) grads(%p, %p) states(%p) (%p) {beta1 = 0.9, beta2 = 0.999, eps = 1.0e-6, weight_decay = 0.0} : (tensor<4xf32>) grads(tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// The update's rates are LAMB's.
func.func @fused_lamb_beta(%p: tensor<4xf32>, %st: tensor<2xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.fused_lamb' op beta1 = 1.000000e+00 must be in [0.000000e+00, 1.000000e+00)}}
  %0:3 = train.fused_lamb(%p) grads(%p) states(%p) (%p) stats(%st), %lr, %s {beta1 = 1.0} : (tensor<4xf32>) grads(tensor<4xf32>) stats(tensor<2xf32>)
  return
}

// -----

// The trust ratio's clamp is an interval of non-negative numbers.
func.func @fused_lamb_coeffs(%p: tensor<4xf32>, %st: tensor<2xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.fused_lamb' op needs 0 <= min_coeff <= max_coeff, got min_coeff = 2.000000e+00, max_coeff = 1.000000e+00}}
  %0:3 = train.fused_lamb(%p) grads(%p) states(%p) (%p) stats(%st), %lr, %s {min_coeff = 2.0, max_coeff = 1.0} : (tensor<4xf32>) grads(tensor<4xf32>) stats(tensor<2xf32>)
  return
}

// -----

// The master weights are f32.
func.func @fused_lamb_bf16_param(%p: tensor<4xbf16>, %st: tensor<2xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.fused_lamb' op parameter 0 must be f32 (the master weights), is 'tensor<4xbf16>'}}
  %0:3 = train.fused_lamb(%p) grads(%p) states(%p) (%p) stats(%st), %lr, %s : (tensor<4xbf16>) grads(tensor<4xbf16>) stats(tensor<2xf32>)
  return
}

// -----

// One pair of sums per parameter.
func.func @fused_lamb_stats_missing(%p: tensor<4xf32>, %st: tensor<2xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.fused_lamb' op needs one stats per parameter; has 1 parameters and 2 stats}}
  %0:3 = train.fused_lamb(%p) grads(%p) states(%p) (%p) stats(%st, %st), %lr, %s : (tensor<4xf32>) grads(tensor<4xf32>) stats(tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

// Each stats holds the two sums.
func.func @fused_lamb_stats_type(%p: tensor<4xf32>, %st: tensor<3xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.fused_lamb' op stats 0 must be tensor<2xf32> (train.fused_lamb_stats), got 'tensor<3xf32>'}}
  %0:3 = train.fused_lamb(%p) grads(%p) states(%p) (%p) stats(%st), %lr, %s : (tensor<4xf32>) grads(tensor<4xf32>) stats(tensor<3xf32>)
  return
}

// -----

// The sums were computed with the update's rates.
func.func @fused_lamb_other_rates(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  %st = train.fused_lamb_stats(%p) grads(%p) states(%p) (%p) {beta1 = 0.9, beta2 = 0.999, eps = 1.0e-6, weight_decay = 0.0} : (tensor<4xf32>) grads(tensor<4xf32>)
  // expected-error @+1 {{'train.fused_lamb' op its train.fused_lamb_stats has other betas, eps or weight_decay}}
  %0:3 = train.fused_lamb(%p) grads(%p) states(%p) (%p) stats(%st), %lr, %s : (tensor<4xf32>) grads(tensor<4xf32>) stats(tensor<2xf32>)
  return
}

//===----------------------------------------------------------------------===//
// The fused updates' working copies (fuse-optimizer)
//===----------------------------------------------------------------------===//

// -----

// One copy_of index per copy.
func.func @copies_count(%p: tensor<4xf32>, %c: tensor<4xbf16>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.fused_adam' op has 1 copies and 2 copy_of indices}}
  %0:4 = train.fused_adam(%p) grads(%p) states(%p) (%p), %lr, %s copies(%c : tensor<4xbf16>) {copy_of = array<i64: 0, 0>} : (tensor<4xf32>) grads(tensor<4xf32>)
  return
}

// -----

// Each index names a parameter, once.
func.func @copies_index(%p: tensor<4xf32>, %c: tensor<4xbf16>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.fused_adam' op copy_of 1 must name a parameter (0 to 0) once}}
  %0:4 = train.fused_adam(%p) grads(%p) states(%p) (%p), %lr, %s copies(%c : tensor<4xbf16>) {copy_of = array<i64: 1>} : (tensor<4xf32>) grads(tensor<4xf32>)
  return
}

// -----

// A copy is bf16 or f16 of its parameter's shape.
func.func @copies_type(%p: tensor<4xf32>, %c: tensor<2x2xbf16>, %st: tensor<2xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.fused_lamb' op the copy of parameter 0 must be a bf16 or f16 tensor of its shape 'tensor<4xf32>', is 'tensor<2x2xbf16>'}}
  %0:4 = train.fused_lamb(%p) grads(%p) states(%p) (%p) stats(%st), %lr, %s copies(%c : tensor<2x2xbf16>) {copy_of = array<i64: 0>} : (tensor<4xf32>) grads(tensor<4xf32>) stats(tensor<2xf32>)
  return
}

// -----

// The step's working copy arguments and results are bf16 or f16.
// expected-error @+1 {{the working copy of 'w' (argument 0) must be a bf16 or f16 tensor, got 'tensor<4xf32>'}}
func.func @copy_argument(%c: tensor<4xf32> {train.param_copy = "w"}) {
  return
}

// -----

// expected-error @+1 {{'train.param_copy' result 0 must be a bf16 or f16 tensor, got 'tensor<4xf32>'}}
func.func @copy_result(%c: tensor<4xf32>) -> (tensor<4xf32> {train.param_copy = "w"}) {
  return %c : tensor<4xf32>
}

//===----------------------------------------------------------------------===//
// train.fused_adam and train.clip_coef (fuse-optimizer)
//===----------------------------------------------------------------------===//

// -----

// Its rates are train.adam's.
func.func @fused_adam_beta(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.fused_adam' op beta2 = 1.000000e+00 must be in [0.000000e+00, 1.000000e+00)}}
  %0:3 = train.fused_adam(%p) grads(%p) states(%p) (%p), %lr, %s {beta2 = 1.0} : (tensor<4xf32>) grads(tensor<4xf32>)
  return
}

// -----

// One gradient per parameter.
func.func @fused_adam_count(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.fused_adam' op needs one gradient, exp_avg and exp_avg_sq per parameter; has 1 parameters, 2 gradients, 1 exp_avgs and 1 exp_avg_sqs}}
  %0:3 = train.fused_adam(%p) grads(%p, %p) states(%p) (%p), %lr, %s : (tensor<4xf32>) grads(tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// At least one parameter.
func.func @fused_adam_empty(%lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.fused_adam' op needs at least one parameter}}
  "train.fused_adam"(%lr, %s) {operandSegmentSizes = array<i32: 0, 0, 0, 0, 1, 1, 0, 0>} : (tensor<f32>, tensor<i64>) -> ()
  return
}

// -----

// The master weights are f32.
func.func @fused_adam_bf16_param(%p: tensor<4xbf16>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.fused_adam' op parameter 0 must be f32 (the master weights), is 'tensor<4xbf16>'}}
  %0:3 = train.fused_adam(%p) grads(%p) states(%p) (%p), %lr, %s : (tensor<4xbf16>) grads(tensor<4xbf16>)
  return
}

// -----

// A gradient has its parameter's shape.
func.func @fused_adam_shape(%p: tensor<4xf32>, %g: tensor<2x2xbf16>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.fused_adam' op gradient 0 has shape 'tensor<2x2xbf16>', its parameter 'tensor<4xf32>'}}
  %0:3 = train.fused_adam(%p) grads(%g) states(%p) (%p), %lr, %s : (tensor<4xf32>) grads(tensor<2x2xbf16>)
  return
}

// -----

// A gradient is f32, bf16 or f16.
func.func @fused_adam_f64_grad(%p: tensor<4xf32>, %g: tensor<4xf64>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.fused_adam' op gradient 0 must be f32, bf16 or f16, is 'tensor<4xf64>'}}
  %0:3 = train.fused_adam(%p) grads(%g) states(%p) (%p), %lr, %s : (tensor<4xf32>) grads(tensor<4xf64>)
  return
}

// -----

// The states have the parameters' types.
func.func @fused_adam_state_type(%p: tensor<4xf32>, %m: tensor<4xf16>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'train.fused_adam' op failed to verify that exp_avgs have the parameters' types}}
  %0:3 = "train.fused_adam"(%p, %p, %m, %p, %lr, %s) {operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0>} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf16>, tensor<4xf32>, tensor<f32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf16>, tensor<4xf32>)
  return
}

// -----

// A negative max_norm is rejected.
func.func @clip_coef_max_norm(%g: tensor<4xbf16>) {
  // expected-error @+1 {{'train.clip_coef' op max_norm must be >= 0 (0 only unscales)}}
  %n, %c = train.clip_coef %g {max_norm = -1.0} : tensor<4xbf16>
  return
}

// -----

// At least one gradient.
func.func @clip_coef_empty() {
  // expected-error @+1 {{'train.clip_coef' op needs at least one gradient}}
  %n, %c = "train.clip_coef"() {max_norm = 1.0 : f64, operandSegmentSizes = array<i32: 0, 0, 0>} : () -> (tensor<f32>, tensor<f32>)
  return
}

//===----------------------------------------------------------------------===//
// train.clip_grad_norm
//===----------------------------------------------------------------------===//

// -----

// A negative max_norm is rejected.
func.func @clip_max_norm_negative(%g: tensor<4xf32>) {
  // expected-error @+1 {{'train.clip_grad_norm' op max_norm must be >= 0 (0 reports the norm without clipping)}}
  %0, %n = train.clip_grad_norm %g {max_norm = -1.0e-3} : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

// Each clipped gradient has its gradient's type.
func.func @clip_types(%g: tensor<4xf32>) {
  // expected-error @+1 {{'train.clip_grad_norm' op clipped gradients must have the gradients' types}}
  %0, %n = train.clip_grad_norm %g {max_norm = 1.0} : tensor<4xf32> -> tensor<4xf16>
  return
}

// -----

// There is one clipped gradient per gradient.
func.func @clip_count(%g: tensor<4xf32>, %h: tensor<2xf32>) {
  // expected-error @+1 {{'train.clip_grad_norm' op clipped gradients must have the gradients' types}}
  %0, %n = train.clip_grad_norm %g, %h {max_norm = 1.0} : tensor<4xf32>, tensor<2xf32> -> tensor<4xf32>
  return
}

//===----------------------------------------------------------------------===//
// train.accumulate
//===----------------------------------------------------------------------===//

// -----

// At least one micro-batch.
func.func @accumulate_count_zero(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.accumulate' op count must be at least 1, got 0}}
  %0 = train.accumulate 0 -> tensor<4xf32> {
  ^bb0(%i: index):
    train.yield %x : tensor<4xf32>
  }
  return
}

// -----

// A negative count is reported with its value.
func.func @accumulate_count_negative(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.accumulate' op count must be at least 1, got -3}}
  %0 = train.accumulate -3 -> tensor<4xf32> {
  ^bb0(%i: index):
    train.yield %x : tensor<4xf32>
  }
  return
}

// -----

// The body takes the micro-batch index.
func.func @accumulate_no_arg(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.accumulate' op body must take the micro-batch index as its one argument of type index}}
  %0 = train.accumulate 2 -> tensor<4xf32> {
    train.yield %x : tensor<4xf32>
  }
  return
}

// -----

// The index argument has type index.
func.func @accumulate_arg_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.accumulate' op body must take the micro-batch index as its one argument of type index}}
  %0 = train.accumulate 2 -> tensor<4xf32> {
  ^bb0(%i: i64):
    train.yield %x : tensor<4xf32>
  }
  return
}

// -----

// The index is the body's only argument.
func.func @accumulate_two_args(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.accumulate' op body must take the micro-batch index as its one argument of type index}}
  %0 = train.accumulate 2 -> tensor<4xf32> {
  ^bb0(%i: index, %j: index):
    train.yield %x : tensor<4xf32>
  }
  return
}

// -----

// The body yields exactly the result types: a count mismatch.
func.func @accumulate_yield_count(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.accumulate' op yields 2 values of types ('tensor<4xf32>', 'tensor<4xf32>') but has result types ('tensor<4xf32>') (a bf16 or fp16 value may be summed into an f32 result of its shape)}}
  %0 = train.accumulate 2 -> tensor<4xf32> {
  ^bb0(%i: index):
    train.yield %x, %x : tensor<4xf32>, tensor<4xf32>
  }
  return
}

// -----

// The body yields exactly the result types: a type mismatch.
func.func @accumulate_yield_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.accumulate' op yields 1 values of types ('tensor<4xf32>') but has result types ('tensor<2x2xf32>') (a bf16 or fp16 value may be summed into an f32 result of its shape)}}
  %0 = train.accumulate 2 -> tensor<2x2xf32> {
  ^bb0(%i: index):
    train.yield %x : tensor<4xf32>
  }
  return
}

// -----

// A 16-bit value widens only into an f32 sum of its own shape: not into
// another 16-bit type, not narrowed, not reshaped.
func.func @accumulate_widen_to_f16(%x: tensor<4xbf16>) {
  // expected-error @+1 {{'train.accumulate' op yields 1 values of types ('tensor<4xbf16>') but has result types ('tensor<4xf16>')}}
  %0 = train.accumulate 2 -> tensor<4xf16> {
  ^bb0(%i: index):
    train.yield %x : tensor<4xbf16>
  }
  return
}

// -----

func.func @accumulate_narrowing(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.accumulate' op yields 1 values of types ('tensor<4xf32>') but has result types ('tensor<4xbf16>')}}
  %0 = train.accumulate 2 -> tensor<4xbf16> {
  ^bb0(%i: index):
    train.yield %x : tensor<4xf32>
  }
  return
}

// -----

func.func @accumulate_widen_reshaped(%x: tensor<4xbf16>) {
  // expected-error @+1 {{'train.accumulate' op yields 1 values of types ('tensor<4xbf16>') but has result types ('tensor<2x2xf32>')}}
  %0 = train.accumulate 2 -> tensor<2x2xf32> {
  ^bb0(%i: index):
    train.yield %x : tensor<4xbf16>
  }
  return
}

// -----

// train.pipeline widens as train.accumulate does, and only so.
func.func @pipeline_narrowing(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.pipeline' op yields 1 values of types ('tensor<4xf32>') but has result types ('tensor<4xbf16>') (a bf16 or fp16 value may be summed into an f32 result of its shape)}}
  %0 = train.pipeline 2 schedule [1, 0, 2, 0, 1, 1, 2, 1] sum_phases [2] -> tensor<4xbf16> {
  ^bb0(%i: index):
    train.yield %x : tensor<4xf32>
  }
  return
}

// -----

// The body must end with train.yield, not another terminator.
func.func @accumulate_foreign_terminator(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.accumulate' op body must end with train.yield}}
  %0 = train.accumulate 2 -> tensor<4xf32> {
  ^bb0(%i: index):
    "test.terminator"(%x) : (tensor<4xf32>) -> ()
  }
  return
}

// -----

// train.yield only terminates train regions.
func.func @yield_outside() {
  // expected-error @+1 {{'train.yield' op expects parent op to be one of 'train.accumulate, train.pipeline'}}
  train.yield
}

// -----

// A step has exactly one loss: two results marked train.loss are rejected.
// expected-error @+1 {{results 0 and 1 are both marked train.loss; a step has one}}
func.func @two_losses(%x: tensor<f32>) -> (tensor<f32> {train.loss}, tensor<f32> {train.loss}) {
  return %x, %x : tensor<f32>, tensor<f32>
}

// -----

func.func @unknown_schedule(%s: tensor<i64>) {
  // expected-error @+1 {{'train.lr_schedule' op unknown schedule 'Cosine' (expected constant, WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle or LRRangeTest)}}
  %lr = train.lr_schedule "Cosine" {lr = 1.0e-3 : f64}, %s
  return
}

// -----

func.func @schedule_param_type(%s: tensor<i64>) {
  // expected-error @+1 {{'train.lr_schedule' op schedule parameter 'lr' must be a number, bool or string}}
  %lr = train.lr_schedule "constant" {lr = [1.0]}, %s
  return
}

// -----

// expected-error @+1 {{'train.step' (argument 0) is a unit attribute on a tensor<i64> scalar}}
func.func @step_not_i64(%s: tensor<f32> {train.step}) {
  return
}

// -----

// expected-error @+1 {{'train.loss_scale' (argument 0) is a unit attribute on a tensor<f32> scalar}}
func.func @loss_scale_f16(%s: tensor<f16> {train.loss_scale}) {
  return
}

// -----

// expected-error @+1 {{'train.loss_scale' (argument 1) is a unit attribute on a tensor<f32> scalar}}
func.func @loss_scale_not_scalar(%g: tensor<4xf32>, %s: tensor<1xf32> {train.loss_scale}) {
  return
}

// -----

// expected-error @+1 {{optimizer state 'w/exp_avg' must be a float tensor, got 'tensor<4xi64>'}}
func.func @opt_state_int(%m: tensor<4xi64> {train.opt_state = "w/exp_avg"}) {
  return
}

// -----

// expected-error @+1 {{'train.grad' of result 0 must be a non-empty name string}}
func.func @grad_unnamed(%g: tensor<4xf32>) -> (tensor<4xf32> {train.grad = ""}) {
  return %g : tensor<4xf32>
}

// -----

// expected-error @+1 {{'train.updated' result 0 must be a float tensor, got 'tensor<4xi64>'}}
func.func @updated_int(%g: tensor<4xi64>) -> (tensor<4xi64> {train.updated = "w"}) {
  return %g : tensor<4xi64>
}

// -----

// expected-error @+1 {{the train.grad_norm (result 0) must be a scalar float tensor, got 'tensor<4xf32>'}}
func.func @norm_not_scalar(%g: tensor<4xf32>) -> (tensor<4xf32> {train.grad_norm}) {
  return %g : tensor<4xf32>
}

// -----

// expected-error @+1 {{results 0 and 1 are both marked train.lr; a step has one}}
func.func @two_lrs(%x: tensor<f32>) -> (tensor<f32> {train.lr}, tensor<f32> {train.lr}) {
  return %x, %x : tensor<f32>, tensor<f32>
}

// -----

// load_batch: a micro-batch index is non-negative.
func.func @load_batch_negative() {
  // expected-error @+1 {{'train.load_batch' op micro-batch index must be non-negative, got -1}}
  %0 = train.load_batch -1 ["x"] : tensor<2x4xi64>
  return
}

// -----

// load_batch: one name per result.
func.func @load_batch_names() {
  // expected-error @+1 {{'train.load_batch' op names 2 inputs but has 1 results}}
  %0 = train.load_batch 0 ["x", "y"] : tensor<2x4xi64>
  return
}

// -----

// load_batch: inputs have a batch dimension.
func.func @load_batch_scalar() {
  // expected-error @+1 {{'train.load_batch' op inputs need a batch dimension; a result is a scalar}}
  %0 = train.load_batch 0 ["x"] : tensor<i64>
  return
}

// -----

// assign: the target is a model buffer (train.buffer), not a parameter.
func.func @assign_param(%w: tensor<8xf32> {train.param = "w"}, %v: tensor<8xf32> {train.input = "v"}) {
  // expected-error @+1 {{'train.assign' op target is not a step argument with train.buffer (model state)}}
  train.assign %v to %w : tensor<8xf32> to tensor<8xf32>
  return
}

// -----

// assign: the value has the buffer's type.
func.func @assign_type(%rm: tensor<8xf32> {train.buffer = "rm"}, %v: tensor<4xf32> {train.input = "v"}) {
  // expected-error @+1 {{'train.assign' op value type 'tensor<4xf32>' is not the buffer's 'tensor<8xf32>'}}
  train.assign %v to %rm : tensor<4xf32> to tensor<8xf32>
  return
}

// -----

//===--- train.onebit_compress, train.onebit_server, train.onebit_expand ---===//

// Eight signs a byte: the buffer is padded to a multiple of 8.
func.func @onebit_compress_length(%m: tensor<12xf32>) {
  // expected-error @+1 {{'train.onebit_compress' op input length 12 is not a multiple of 8 (eight signs a byte)}}
  %b, %a, %e = "train.onebit_compress"(%m, %m) : (tensor<12xf32>, tensor<12xf32>) -> (tensor<1xi8>, tensor<1xf32>, tensor<12xf32>)
  return
}

// -----

func.func @onebit_compress_bits(%m: tensor<16xf32>) {
  // expected-error @+1 {{'train.onebit_compress' op bits must hold 2 bytes, got 3}}
  %b, %a, %e = "train.onebit_compress"(%m, %m) : (tensor<16xf32>, tensor<16xf32>) -> (tensor<3xi8>, tensor<1xf32>, tensor<16xf32>)
  return
}

// -----

func.func @onebit_compress_scale(%m: tensor<16xf32>) {
  // expected-error @+1 {{'train.onebit_compress' op scale must be tensor<1xf32>, got 'tensor<2xf32>'}}
  %b, %a, %e = "train.onebit_compress"(%m, %m) : (tensor<16xf32>, tensor<16xf32>) -> (tensor<2xi8>, tensor<2xf32>, tensor<16xf32>)
  return
}

// -----

// The server reads every worker's bits of its chunk.
func.func @onebit_server_bits(%bits: tensor<3xi8>, %s: tensor<2xf32>, %e: tensor<16xf32>) {
  // expected-error @+1 {{'train.onebit_server' op bits must hold 2 workers' 2 bytes, got 3}}
  %b, %a, %e2 = train.onebit_server %bits, %s, %e : tensor<3xi8>, tensor<2xf32>, tensor<16xf32> -> tensor<2xi8>
  return
}

// -----

func.func @onebit_server_out(%bits: tensor<4xi8>, %s: tensor<2xf32>, %e: tensor<16xf32>) {
  // expected-error @+1 {{'train.onebit_server' op bits_out must hold 2 bytes, got 4}}
  %b, %a, %e2 = train.onebit_server %bits, %s, %e : tensor<4xi8>, tensor<2xf32>, tensor<16xf32> -> tensor<4xi8>
  return
}

// -----

func.func @onebit_server_chunk(%bits: tensor<4xi8>, %s: tensor<2xf32>, %e: tensor<12xf32>) {
  // expected-error @+1 {{'train.onebit_server' op chunk length 12 is not a multiple of 8 (eight signs a byte)}}
  %b, %a, %e2 = train.onebit_server %bits, %s, %e : tensor<4xi8>, tensor<2xf32>, tensor<12xf32> -> tensor<1xi8>
  return
}

// -----

// Expanding gives eight elements a byte, in as many chunks as scales.
func.func @onebit_expand_length(%bits: tensor<4xi8>, %s: tensor<2xf32>) {
  // expected-error @+1 {{'train.onebit_expand' op result length must be 8 x 4 bytes = 32 in 2 equal chunks, got 16}}
  %0 = train.onebit_expand %bits, %s : tensor<4xi8>, tensor<2xf32> -> tensor<16xf32>
  return
}

// -----

func.func @onebit_expand_chunks(%bits: tensor<4xi8>, %s: tensor<3xf32>) {
  // expected-error @+1 {{'train.onebit_expand' op result length must be 8 x 4 bytes = 32 in 3 equal chunks, got 32}}
  %0 = train.onebit_expand %bits, %s : tensor<4xi8>, tensor<3xf32> -> tensor<32xf32>
  return
}

//===--- train.onebit_adam and train.active_steps --------------------------===//

// -----

func.func @onebit_adam_offset(%p: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<i64>) {
  // expected-error @+1 {{'train.onebit_adam' op step_offset must be 0 or 1 (DeepSpeed's fp16 wrapper spends one call), got 2}}
  %0:3 = train.onebit_adam %p, %p, %p, %p, %lr, %t {freeze_step = 10 : i64, step_offset = 2 : i64} : tensor<4xf32>
  return
}

// -----

func.func @onebit_adam_freeze(%p: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<i64>) {
  // expected-error @+1 {{'train.onebit_adam' op freeze_step must be non-negative, got -1}}
  %0:3 = train.onebit_adam %p, %p, %p, %p, %lr, %t {freeze_step = -1 : i64} : tensor<4xf32>
  return
}

// -----

// The compressed momentum replaces the momentum: the parameter's type.
func.func @onebit_adam_compressed(%p: tensor<4xf32>, %c: tensor<8xf32>, %lr: tensor<f32>, %t: tensor<i64>) {
  // expected-error @+1 {{'train.onebit_adam' op compressed momentum 'tensor<8xf32>' must have the parameter's type 'tensor<4xf32>'}}
  %0:3 = train.onebit_adam %p, %p, %p, %p, %lr, %t compressed(%c : tensor<8xf32>) {freeze_step = 10 : i64} : tensor<4xf32>
  return
}

// -----

func.func @onebit_adam_beta(%p: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<i64>) {
  // expected-error @+1 {{'train.onebit_adam' op beta1}}
  %0:3 = train.onebit_adam %p, %p, %p, %p, %lr, %t {beta1 = 1.0 : f64, freeze_step = 10 : i64} : tensor<4xf32>
  return
}

// -----

// train.active_steps is a range of optimizer steps: [first, last], last 0
// for no end.
func.func @active_steps_shape(%x: tensor<4xf32>) {
  // expected-error @+1 {{'nn.neg' op 'train.active_steps' must be array<i64: first, last>, got array<i64: 3>}}
  %0 = nn.neg %x {train.active_steps = array<i64: 3>} : tensor<4xf32>
  return
}

// -----

func.func @active_steps_range(%x: tensor<4xf32>) {
  // expected-error @+1 {{'nn.neg' op 'train.active_steps' = [5, 3] is no range of optimizer steps (first >= 1; last 0 for no end, or >= first)}}
  %0 = nn.neg %x {train.active_steps = array<i64: 5, 3>} : tensor<4xf32>
  return
}

// -----

func.func @active_steps_first(%x: tensor<4xf32>) {
  // expected-error @+1 {{'nn.neg' op 'train.active_steps' = [0, 0] is no range of optimizer steps}}
  %0 = nn.neg %x {train.active_steps = array<i64: 0, 0>} : tensor<4xf32>
  return
}

//===--- train.zero_one_adam, _payload, reset_at and train.step_classes ---===//

// -----

func.func @zero_one_clipper(%p: tensor<4xf32>, %s: tensor<f32>, %lr: tensor<f32>, %t: tensor<i64>) {
  // expected-error @+1 {{'train.zero_one_adam' op local_step_clipper must be at least 1 (the largest local_step_interval), got 0}}
  %0:5 = train.zero_one_adam %p, %p, %p, %p, %p, %s, %lr, %t {var_freeze_step = 8 : i64, local_step_clipper = 0 : i64} : tensor<4xf32>
  return
}

// -----

func.func @zero_one_scaler(%p: tensor<4xf32>, %s: tensor<f32>, %lr: tensor<f32>, %t: tensor<i64>) {
  // expected-error @+1 {{'train.zero_one_adam' op var_freeze_step, var_update_scaler and local_step_scaler must be non-negative}}
  %0:5 = train.zero_one_adam %p, %p, %p, %p, %p, %s, %lr, %t {var_freeze_step = 8 : i64, var_update_scaler = -1 : i64} : tensor<4xf32>
  return
}

// -----

func.func @zero_one_offset(%p: tensor<4xf32>, %s: tensor<f32>, %lr: tensor<f32>, %t: tensor<i64>) {
  // expected-error @+1 {{'train.zero_one_adam' op step_offset must be 0 or 1 (DeepSpeed's fp16 wrapper spends one call), got 3}}
  %0:5 = train.zero_one_adam %p, %p, %p, %p, %p, %s, %lr, %t {var_freeze_step = 8 : i64, step_offset = 3 : i64} : tensor<4xf32>
  return
}

// -----

func.func @zero_one_compressed(%p: tensor<4xf32>, %c: tensor<2x2xf32>, %s: tensor<f32>, %lr: tensor<f32>, %t: tensor<i64>) {
  // expected-error @+1 {{'train.zero_one_adam' op compressed 'tensor<2x2xf32>' must have the parameter's type 'tensor<4xf32>'}}
  %0:5 = train.zero_one_adam %p, %p, %p, %p, %p, %s, %lr, %t compressed(%c : tensor<2x2xf32>) {var_freeze_step = 8 : i64} : tensor<4xf32>
  return
}

// -----

func.func @zero_one_payload_eps(%p: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<i64>) {
  // expected-error @+1 {{'train.zero_one_payload' op eps must be positive}}
  %0 = train.zero_one_payload %p, %p, %p, %p, %p, %lr, %t {eps = 0.0 : f64, var_freeze_step = 8 : i64} : tensor<4xf32>
  return
}

// -----

func.func @reset_at_step(%e: tensor<8xf32>, %t: tensor<i64>) {
  // expected-error @+1 {{'train.reset_at' op at must be an optimizer step (>= 1), got 0}}
  %0 = train.reset_at %e, %t {at = 0 : i64} : tensor<8xf32>
  return
}

// -----

// train.step_classes is a mask of plan/StepRule.h's classes.
func.func @step_classes_mask(%x: tensor<4xf32>) {
  // expected-error @+1 {{'nn.neg' op 'train.step_classes' must be a mask of step classes (1 to 31), got 32}}
  %0 = nn.neg %x {train.step_classes = 32 : i64} : tensor<4xf32>
  return
}

// -----

func.func @step_classes_and_range(%x: tensor<4xf32>) {
  // expected-error @+1 {{'nn.neg' op has both 'train.active_steps' and 'train.step_classes': an op runs by one rule}}
  %0 = nn.neg %x {train.step_classes = 2 : i64, train.active_steps = array<i64: 1, 0>} : tensor<4xf32>
  return
}

//===--- train.onebit_lamb and train.onebit_lamb_scaling ------------------===//

// -----

func.func @onebit_lamb_factor(%p: tensor<4xf32>, %s: tensor<f32>, %lr: tensor<f32>, %t: tensor<i64>) {
  // expected-error @+1 {{'train.onebit_lamb' op factor_min must lie in [0, factor_max] and factor_threshold be non-negative}}
  %0:6 = train.onebit_lamb %p, %p, %p, %p, %p, %s, %s, %s, %lr, %t {freeze_step = 8 : i64, factor_min = 5.0 : f64} : tensor<4xf32>
  return
}

// -----

func.func @onebit_lamb_coeff_beta(%p: tensor<4xf32>, %s: tensor<f32>, %lr: tensor<f32>, %t: tensor<i64>) {
  // expected-error @+1 {{'train.onebit_lamb' op coeff_beta must lie in [0, 1], got 2}}
  %0:6 = train.onebit_lamb %p, %p, %p, %p, %p, %s, %s, %s, %lr, %t {freeze_step = 8 : i64, coeff_beta = 2.0 : f64} : tensor<4xf32>
  return
}

// -----

func.func @onebit_lamb_coeffs(%p: tensor<4xf32>, %s: tensor<f32>, %lr: tensor<f32>, %t: tensor<i64>) {
  // expected-error @+1 {{'train.onebit_lamb' op min_coeff must lie in [0, max_coeff], got 2.000000e+00 and 1.000000e+00}}
  %0:6 = train.onebit_lamb %p, %p, %p, %p, %p, %s, %s, %s, %lr, %t {freeze_step = 8 : i64, min_coeff = 2.0 : f64, max_coeff = 1.0 : f64} : tensor<4xf32>
  return
}

// -----

func.func @onebit_lamb_scaling_at(%m: tensor<4xf32>, %s: tensor<f32>, %t: tensor<i64>) {
  // expected-error @+1 {{'train.onebit_lamb_scaling' op at must be an optimizer step (>= 1), got 0}}
  %0 = train.onebit_lamb_scaling (%m : tensor<4xf32>) coeffs(%s), %t {at = 0 : i64} -> tensor<f32>
  return
}

// -----

func.func @onebit_lamb_stats_count(%p: tensor<4xf32>, %q: tensor<2xf32>, %t: tensor<i64>) {
  // expected-error @+1 {{'train.onebit_lamb_stats' op takes as many gradients, moments (and compressed momenta, if any) as parameters, at least one}}
  %0 = train.onebit_lamb_stats(%p, %q : tensor<4xf32>, tensor<2xf32>) grads(%p : tensor<4xf32>) exp_avgs(%p : tensor<4xf32>) exp_avg_sqs(%p : tensor<4xf32>) exp_avg_sq_freshes(%p : tensor<4xf32>), %t {freeze_step = 8 : i64} -> tensor<3xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// The memory plan (memory-plan and offload set these; the dialect checks
// them whichever pass does)
//===----------------------------------------------------------------------===//

// One offset per result.
func.func @offsets_per_result(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'train.offsets' must be array<i64> with one offset per result (1), got array<i64: 0, 16>}}
  %0 = "test.op"(%x) {train.offsets = array<i64: 0, 16>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @negative_offset(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'train.offsets' holds the negative offset -64}}
  %0 = "test.op"(%x) {train.offsets = array<i64: -64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @staging_range(%x: tensor<4xf32>) {
  // expected-error @+1 {{'train.staging' must be array<i64: offset, bytes>, both >= 0, got array<i64: 64>}}
  "test.op"(%x) {train.staging = array<i64: 64>} : (tensor<4xf32>) -> ()
  return
}

// -----

// The arena's size is the function's.
// expected-error @+1 {{'train.arena_bytes' belongs on a function}}
module attributes {train.arena_bytes = 64 : i64} {
}

// -----

// expected-error @+1 {{'train.persistent_bytes' must be a non-negative i64, got -1 : i64}}
func.func @negative_bytes() attributes {train.persistent_bytes = -1 : i64} {
  return
}

// -----

// The parameters' own NVMe file begins inside the tier.
// expected-error @+1 {{'train.nvme_param_offset' (8192 : i64) lies past the NVMe tier's 4096 bytes}}
func.func @param_file_outside() attributes {train.nvme_tier_bytes = 4096 : i64, train.nvme_param_offset = 8192 : i64} {
  return
}

// -----

// expected-error @+1 {{'train.nvme_param_offset' needs 'train.nvme_tier_bytes'}}
func.func @param_file_no_tier() attributes {train.nvme_param_offset = 0 : i64} {
  return
}

// -----

// No arena holds less than the bytes live at one time.
// expected-error @+1 {{'train.peak_live_bytes' (4096 : i64) exceeds the arena's 2048 bytes: no arena holds less than what is live at once}}
func.func @peak_past_arena() attributes {train.arena_bytes = 2048 : i64, train.peak_live_bytes = 4096 : i64} {
  return
}

// -----

// expected-error @+1 {{'train.peak_live_bytes' must be a non-negative i64, got -1 : i64}}
func.func @peak_negative() attributes {train.peak_live_bytes = -1 : i64} {
  return
}

// -----

// expected-error @+1 {{'train.offset' must be a non-negative i64, got "0"}}
func.func @offset_type(%w: tensor<4xf32> {train.param = "w", train.offset = "0"}) {
  return
}

// -----

// expected-error @+1 {{'train.tier' (argument 0) is "host" or "nvme", got "disk"}}
func.func @tier_name(%m: tensor<4xf32> {train.opt_state = "w/exp_avg", train.tier = "disk"}) {
  return
}

// -----

// The precision of mixed-precision: bf16 or fp16, on the module.
// expected-error @+1 {{'train.precision' is a module attribute, "bf16" or "fp16"; got "fp8"}}
module attributes {train.precision = "fp8"} {
}

// -----

// pipeline: every body op belongs to a phase of the schedule.
func.func @pipeline_no_phase(%w: tensor<4xf32>) -> tensor<4xf32> {
  %s = train.pipeline 1 schedule [1, 0, 2, 0] sum_phases [2] -> tensor<4xf32> {
  ^bb0(%k: index):
    // expected-error @+1 {{'nn.neg' op in a train.pipeline body needs train.phase 1 (F) or 2 (B)}}
    %n = nn.neg %w : tensor<4xf32>
    train.yield %n : tensor<4xf32>
  }
  return %s : tensor<4xf32>
}

// -----

// pipeline: a forward op cannot read what the backward computes.
func.func @pipeline_reads_later(%w: tensor<4xf32>) -> tensor<4xf32> {
  %s = train.pipeline 1 schedule [1, 0, 2, 0] sum_phases [2] -> tensor<4xf32> {
  ^bb0(%k: index):
    %b = nn.neg %w {train.phase = 2 : i64} : tensor<4xf32>
    // expected-error @+1 {{'nn.neg' op of phase 1 reads a value of the later phase 2}}
    %f = nn.neg %b {train.phase = 1 : i64} : tensor<4xf32>
    train.yield %f : tensor<4xf32>
  }
  return %s : tensor<4xf32>
}

// -----

// pipeline: only train.load_batch reads the micro-batch index.
func.func @pipeline_index_use(%w: tensor<4xf32>) -> tensor<4xf32> {
  %s = train.pipeline 1 schedule [1, 0, 2, 0] sum_phases [2] -> tensor<4xf32> {
  ^bb0(%k: index):
    // expected-error @+1 {{'test.op' op reads the micro-batch index, which only train.load_batch may}}
    %x = "test.op"(%k) {train.phase = 1 : i64} : (index) -> tensor<4xf32>
    train.yield %x : tensor<4xf32>
  }
  return %s : tensor<4xf32>
}

// -----

// pipeline: each micro-batch runs F then B, once each.
func.func @pipeline_order(%w: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'train.pipeline' op schedule item 1 runs phase 2 of micro-batch 1, whose next phase is 1}}
  %s = train.pipeline 2 schedule [1, 0, 2, 1, 2, 0, 1, 1] sum_phases [2] -> tensor<4xf32> {
  ^bb0(%k: index):
    %n = nn.neg %w {train.phase = 2 : i64} : tensor<4xf32>
    train.yield %n : tensor<4xf32>
  }
  return %s : tensor<4xf32>
}

// -----

// pipeline: the schedule holds every item of every micro-batch.
func.func @pipeline_items(%w: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'train.pipeline' op schedule has 2 items, expected 4 (2 phases of 2 micro-batches)}}
  %s = train.pipeline 2 schedule [1, 0, 2, 0] sum_phases [2] -> tensor<4xf32> {
  ^bb0(%k: index):
    %n = nn.neg %w {train.phase = 2 : i64} : tensor<4xf32>
    train.yield %n : tensor<4xf32>
  }
  return %s : tensor<4xf32>
}

// -----

// pipeline: micro-batches are numbered from 0 to count - 1.
func.func @pipeline_micro_range(%w: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'train.pipeline' op schedule item 0 names micro-batch 1, outside [0, 1)}}
  %s = train.pipeline 1 schedule [1, 1, 2, 0] sum_phases [2] -> tensor<4xf32> {
  ^bb0(%k: index):
    %n = nn.neg %w {train.phase = 2 : i64} : tensor<4xf32>
    train.yield %n : tensor<4xf32>
  }
  return %s : tensor<4xf32>
}

// -----

// pipeline: one sum phase per result, a phase of the schedule.
func.func @pipeline_sum_phase(%w: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'train.pipeline' op sum_phases[0] = 3 is not a phase of the schedule}}
  %s = train.pipeline 1 schedule [1, 0, 2, 0] sum_phases [3] -> tensor<4xf32> {
  ^bb0(%k: index):
    %n = nn.neg %w {train.phase = 2 : i64} : tensor<4xf32>
    train.yield %n : tensor<4xf32>
  }
  return %s : tensor<4xf32>
}

// -----

func.func @pipeline_sum_count(%w: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'train.pipeline' op has 2 sum_phases for 1 results}}
  %s = train.pipeline 1 schedule [1, 0, 2, 0] sum_phases [2, 2] -> tensor<4xf32> {
  ^bb0(%k: index):
    %n = nn.neg %w {train.phase = 2 : i64} : tensor<4xf32>
    train.yield %n : tensor<4xf32>
  }
  return %s : tensor<4xf32>
}

// -----

// load_batch: the micro-batch as an operand only in a pipeline body.
func.func @load_batch_index_outside(%k: index) {
  // expected-error @+1 {{'train.load_batch' op takes its micro-batch as an operand only in a train.pipeline body}}
  %0 = train.load_batch %k ["x"] : tensor<2x4xi64>
  return
}
