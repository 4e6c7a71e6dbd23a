// RUN: dsc-opt %s -split-input-file -verify-diagnostics --verify-zero

// --verify-zero checks a partitioned step against its module's dist.dp and
// dist.zero_stage. One case per error.

// expected-error @+1 {{verify-zero: the module has no dist.dp / dist.zero_stage (run data-parallel or zero)}}
module {
}

// -----

// Stage 1 partitions every optimizer state.
module attributes {dist.dp = 2 : i64, dist.zero_stage = 1 : i64} {
  // expected-error @+1 {{verify-zero: optimizer state 'w/exp_avg' is not partitioned at ZeRO stage 1}}
  func.func @step(%w: tensor<6xf32> {train.param = "w"}, %m: tensor<6xf32> {train.opt_state = "w/exp_avg"}) {
    return
  }
}

// -----

// A chunk has ceil(numel / dp) elements: 6 elements on 4 ranks -> 2.
module attributes {dist.dp = 4 : i64, dist.zero_stage = 1 : i64} {
  // expected-error @+1 {{verify-zero: argument 1 of type 'tensor<3xf32>' is not a chunk of 4 of its dist.shard_of shape}}
  func.func @step(%w: tensor<6xf32> {train.param = "w"}, %m: tensor<3xf32> {dist.shard_of = array<i64: 6>, train.opt_state = "w/exp_avg"}) {
    return
  }
}

// -----

// Stage 2 reduce-scatters every gradient inside the micro-batch.
module attributes {dist.dp = 2 : i64, dist.zero_stage = 2 : i64} {
  func.func @step(%w: tensor<6xf32> {train.param = "w"}) -> (tensor<f32>, tensor<6xf32>) {
    // expected-error @+1 {{verify-zero: gradient sum 1 is not reduce-scattered in the micro-batch at ZeRO stage 2}}
    %0:2 = train.accumulate 1 -> tensor<f32>, tensor<6xf32> {
    ^bb0(%i: index):
      %l = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<6xf32> -> tensor<f32>
      train.yield %l, %w : tensor<f32>, tensor<6xf32>
    }
    return %0#0, %0#1 : tensor<f32>, tensor<6xf32>
  }
}

// -----

// Collectives run over the module's data-parallel ranks...
module attributes {dist.dp = 4 : i64, dist.zero_stage = 0 : i64} {
  func.func @step(%g: tensor<6xf32>) -> tensor<6xf32> {
    // expected-error @+1 {{'dist.all_reduce' op verify-zero: the group must be the 4 data-parallel ranks}}
    %0 = dist.all_reduce avg %g {group = #dist.group<dp, 2>} : tensor<6xf32> -> tensor<6xf32>
    %1 = dist.wait %0 : tensor<6xf32>
    return %1 : tensor<6xf32>
  }
}

// -----

// ... and are completed by a dist.wait.
module attributes {dist.dp = 2 : i64, dist.zero_stage = 0 : i64} {
  func.func @step(%g: tensor<6xf32>) -> tensor<6xf32> {
    // expected-error @+1 {{'dist.all_reduce' op verify-zero: no dist.wait completes this collective}}
    %0 = dist.all_reduce avg %g {group = #dist.group<dp, 2>} : tensor<6xf32> -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}
