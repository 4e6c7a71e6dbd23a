// RUN: split-file %s %t
// RUN: dsc-opt %t/steps.mlir -split-input-file --gradient-accumulation=steps=2 -verify-diagnostics
// RUN: dsc-opt %t/zero.mlir --gradient-accumulation=steps=0 -verify-diagnostics
// RUN: dsc-opt %t/negative.mlir --gradient-accumulation=steps=-3 -verify-diagnostics

// Every error --gradient-accumulation reports.

// A step count below 1 is rejected on the module before any function is
// touched, naming the pass and the option: one input per value.
//--- zero.mlir
// expected-error-re @below {{gradient-accumulation: steps must be at least 1, got 0{{$}}}}
module {
}

//--- negative.mlir
// expected-error-re @below {{gradient-accumulation: steps must be at least 1, got -3{{$}}}}
module {
}

//--- steps.mlir
// A step whose body already runs in a train.accumulate is not wrapped a
// second time.
// expected-error @+1 {{gradients are already accumulated}}
func.func @twice(%w: tensor<4xf32> {train.param = "w"})
    -> (tensor<f32> {train.loss}, tensor<4xf32> {train.grad = "w"}) {
  %0:2 = train.accumulate 2 -> tensor<f32>, tensor<4xf32> {
  ^bb0(%i: index):
    %s = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
    train.yield %s, %w : tensor<f32>, tensor<4xf32>
  }
  return %0#0, %0#1 : tensor<f32>, tensor<4xf32>
}
