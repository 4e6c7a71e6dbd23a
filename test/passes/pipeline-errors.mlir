// RUN: split-file %s %t
// RUN: dsc-opt %t/split.mlir --pipeline-split="stages=5" -verify-diagnostics
// RUN: not dsc-opt %S/Inputs/pp-mlp.mlir --pipeline-split="stages=2 method=best" 2>&1 | FileCheck %s --check-prefix=METHOD
// RUN: dsc-opt %t/schedule.mlir -split-input-file --pipeline-schedule="micro-batches=3" -verify-diagnostics
// RUN: not dsc-opt %S/Inputs/pp-mlp.mlir --pipeline-split="stages=2" --autodiff --pipeline-schedule="micro-batches=2 schedule=gpipe" 2>&1 | FileCheck %s --check-prefix=SCHEDULE

// METHOD: for the --method option: Cannot find option named 'best'!
// SCHEDULE: for the --schedule option: Cannot find option named 'gpipe'!

//--- split.mlir
// --pipeline-split: more stages than the forward step (Inputs/pp-mlp.mlir)
// has layers.
// expected-error @below {{pipeline-split: 5 stages but the model has only 4 layers to cut between (cut points are where 1 activation is live); use fewer stages}}
func.func @mlp(%x: tensor<4xi64> {train.input = "x"}, %y: tensor<4xi64> {train.input = "y"},
               %emb: tensor<64x8xf32> {train.param = "emb"}, %w2: tensor<8x32xf32> {train.param = "w2"},
               %w3: tensor<32x8xf32> {train.param = "w3"})
    -> (tensor<f32> {train.loss}) {
  %0 = nn.gather %emb, %x {axis = 0 : i64} : tensor<64x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
  %2 = nn.matmul %0, %w2 : tensor<4x8xf32>, tensor<8x32xf32> -> tensor<4x32xf32>
  %3 = nn.relu %2 : tensor<4x32xf32>
  %4 = nn.matmul %3, %w3 : tensor<4x32xf32>, tensor<32x8xf32> -> tensor<4x8xf32>
  %5 = nn.relu %4 : tensor<4x8xf32>
  %6 = nn.matmul %5, %emb {transpose_rhs} : tensor<4x8xf32>, tensor<64x8xf32> -> tensor<4x64xf32>
  %7 = nn.cross_entropy %6, %y : tensor<4x64xf32>, tensor<4xi64> -> tensor<f32>
  return %7 : tensor<f32>
}

//--- schedule.mlir
// --pipeline-schedule (micro-batches=3) on the output of pipeline-split and
// autodiff.

// 1f1b runs at least as many micro-batches as there are stages.
// expected-error @below {{pipeline-schedule: 1f1b needs at least as many micro-batches as stages, got M = 3 < P = 4 (raise gradient_accumulation_steps / --micro-batches, or use fewer stages)}}
module attributes {dist.layers = 4 : i64, dist.pp = 4 : i64} {
}

// -----

// The module must have been split into stages.
// expected-error @below {{pipeline-schedule: no dist.pp on the module (run pipeline-split first)}}
module {
}

// -----

// A stage whose micro-batches gradient-accumulation already wrapped in a
// train.accumulate.
module attributes {dist.layers = 2 : i64, dist.pp = 2 : i64} {
  // expected-error @below {{pipeline-schedule: the step is already accumulated (run pipeline-schedule instead of gradient-accumulation)}}
  func.func @mlp_stage0(%x: tensor<4x8xf32> {train.input = "x"}, %y: tensor<4xi64> {train.input = "y"}, %w1: tensor<8x8xf32> {train.param = "w1"})
      -> (tensor<f32> {train.loss}, tensor<8x8xf32> {train.grad = "w1"}) attributes {dist.layers = array<i64: 0, 0>, dist.stage = 0 : i64} {
    %0:2 = train.accumulate 2 -> tensor<f32>, tensor<8x8xf32> {
    ^bb0(%i: index):
      %h = nn.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
      %s = dist.send %h {group = #dist.group<pp, 2>, peer = 1 : i64, tag = 0 : i64} : tensor<4x8xf32>
      %sw = dist.wait %s : tensor<4x8xf32>
      %zero = arith.constant dense<0.000000e+00> : tensor<f32>
      %r = dist.recv {group = #dist.group<pp, 2>, peer = 1 : i64, tag = 1 : i64, train.backward} : tensor<4x8xf32>
      %dh = dist.wait %r {train.backward} : tensor<4x8xf32>
      %dw1 = nn.matmul %x, %dh {train.backward, transpose_lhs} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
      train.yield %zero, %dw1 : tensor<f32>, tensor<8x8xf32>
    }
    return %0#0, %0#1 : tensor<f32>, tensor<8x8xf32>
  }
  func.func @mlp_stage1(%x: tensor<4x8xf32> {train.input = "x"}, %y: tensor<4xi64> {train.input = "y"}, %w2: tensor<8x16xf32> {train.param = "w2"})
      -> (tensor<f32> {train.loss}, tensor<8x16xf32> {train.grad = "w2"}) attributes {dist.layers = array<i64: 1, 1>, dist.stage = 1 : i64} {
    %0:2 = train.accumulate 2 -> tensor<f32>, tensor<8x16xf32> {
    ^bb0(%i: index):
      %r = dist.recv {group = #dist.group<pp, 2>, peer = -1 : i64, tag = 0 : i64} : tensor<4x8xf32>
      %h = dist.wait %r : tensor<4x8xf32>
      %o = nn.matmul %h, %w2 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
      %l = nn.cross_entropy %o, %y : tensor<4x16xf32>, tensor<4xi64> -> tensor<f32>
      %one = arith.constant dense<1.000000e+00> : tensor<f32>
      %do = nn.cross_entropy_grad %o, %y, %one {train.backward} : tensor<4x16xf32>, tensor<4xi64>, tensor<f32>
      %dh = nn.matmul %do, %w2 {train.backward, transpose_rhs} : tensor<4x16xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
      %dw2 = nn.matmul %h, %do {train.backward, transpose_lhs} : tensor<4x8xf32>, tensor<4x16xf32> -> tensor<8x16xf32>
      %s = dist.send %dh {group = #dist.group<pp, 2>, peer = -1 : i64, tag = 1 : i64, train.backward} : tensor<4x8xf32>
      %sw = dist.wait %s {train.backward} : tensor<4x8xf32>
      train.yield %l, %dw2 : tensor<f32>, tensor<8x16xf32>
    }
    return %0#0, %0#1 : tensor<f32>, tensor<8x16xf32>
  }
}
