// RUN: split-file %s %t
// RUN: dsc-opt %t/functions.mlir -split-input-file --offload=param-device=cpu -verify-diagnostics -o /dev/null
// The tiers are an enum: another is refused where the pipeline is parsed.
// RUN: not dsc-opt %t/device.mlir --offload=device=disk -o /dev/null 2>&1 | FileCheck %s --check-prefix=DEVICE
// DEVICE: for the --device option: Cannot find option named 'disk'!
// RUN: dsc-opt %t/ops.mlir -split-input-file -verify-diagnostics -o /dev/null

//--- device.mlir
module {
}

//--- functions.mlir
// A state read by more than its update cannot live in a tier.
func.func @shared(%w: tensor<4xf32> {train.param = "w"}, %m: tensor<4xf32> {train.opt_state = "w/exp_avg"},
                  %v: tensor<4xf32> {train.opt_state = "w/exp_avg_sq"}, %s: tensor<i64> {train.step})
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %lr = train.lr_schedule "constant" {lr = 1.0e-3 : f64}, %s
  %g = nn.mul %w, %m : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  // expected-error @below {{offload: optimizer state '"w/exp_avg"' is read by more than its update}}
  %p, %m2, %v2 = train.adam %w, %g, %m, %v, %lr, %s : tensor<4xf32>
  return %p, %m2, %v2, %g : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// The state must be a step argument (here: computed in the step).
func.func @computed(%w: tensor<4xf32> {train.param = "w"}, %s: tensor<i64> {train.step})
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %lr = train.lr_schedule "constant" {lr = 1.0e-3 : f64}, %s
  %z = nn.mul %w, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  // expected-error @below {{offload: the optimizer state operand #2 is not a step argument with train.opt_state}}
  %p, %m2, %v2 = train.adam %w, %z, %z, %z, %lr, %s : tensor<4xf32>
  return %p, %m2, %v2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// The new state lives in its tier: nothing but the step's return may read it.
func.func @reads_new(%w: tensor<4xf32> {train.param = "w"}, %m: tensor<4xf32> {train.opt_state = "w/exp_avg"},
                     %v: tensor<4xf32> {train.opt_state = "w/exp_avg_sq"}, %s: tensor<i64> {train.step})
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %lr = train.lr_schedule "constant" {lr = 1.0e-3 : f64}, %s
  %g = nn.mul %w, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %p, %m2, %v2 = train.adam %w, %g, %m, %v, %lr, %s : tensor<4xf32>
  // expected-error @below {{offload: reads an optimizer state's new value, which lives in its tier}}
  %x = nn.mul %m2, %m2 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %p, %m2, %v2, %x : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Parameter offload needs ZeRO stage 3: below it, the updated parameter is
// read again (ZeRO 1/2 all-gather it), and it lives in its tier.
func.func @reads_new_param(%w: tensor<4xf32> {train.param = "w"}, %m: tensor<4xf32> {train.opt_state = "w/exp_avg"},
                           %v: tensor<4xf32> {train.opt_state = "w/exp_avg_sq"}, %s: tensor<i64> {train.step})
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %lr = train.lr_schedule "constant" {lr = 1.0e-3 : f64}, %s
  %g = nn.mul %w, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %p, %m2, %v2 = train.adam %w, %g, %m, %v, %lr, %s : tensor<4xf32>
  // expected-error @below {{offload: reads a parameter's new value (parameter offload needs ZeRO stage 3, whose updated shards are only returned), which lives in its tier}}
  %x = nn.mul %p, %p : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %p, %m2, %v2, %x : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

//--- ops.mlir
// The tier ops' verifiers.
func.func @not_tiered(%m: tensor<4xf32> {train.opt_state = "w/exp_avg"}) -> tensor<4xf32> {
  // expected-error @below {{operand is not a step argument with a memory tier (train.tier)}}
  %s = train.tier_fetch %m {tile = 0 : i64} : tensor<4xf32> -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

func.func @types(%m: tensor<4xf32> {train.tier = "host", train.opt_state = "w/exp_avg"}) -> tensor<8xf32> {
  // expected-error @below {{a working copy's type 'tensor<8xf32>' is not its home's 'tensor<4xf32>'}}
  %s = train.tier_fetch %m {tile = 0 : i64} : tensor<4xf32> -> tensor<8xf32>
  return %s : tensor<8xf32>
}

// -----

func.func @tile(%m: tensor<4xf32> {train.tier = "host", train.opt_state = "w/exp_avg"}) -> tensor<4xf32> {
  // expected-error @below {{tile must be non-negative, got -1}}
  %s = train.tier_fetch %m {tile = -1 : i64} : tensor<4xf32> -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

func.func @store(%m: tensor<4xf32> {train.tier = "host", train.opt_state = "w/exp_avg"},
                 %x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{stores 2 values to 1 homes}}
  train.tier_store %x, %x to %m {tile = 0 : i64} : tensor<4xf32>, tensor<4xf32> to tensor<4xf32>
  return %m : tensor<4xf32>
}

// -----

func.func @store_home(%m: tensor<4xf32> {train.opt_state = "w/exp_avg"}, %x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{operand is not a step argument with a memory tier (train.tier)}}
  train.tier_store %x to %m {tile = 0 : i64} : tensor<4xf32> to tensor<4xf32>
  return %m : tensor<4xf32>
}
