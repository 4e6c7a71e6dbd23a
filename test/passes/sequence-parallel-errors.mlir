// RUN: split-file %s %t
// RUN: dsc-opt %t/steps.mlir --tensor-parallel=tp=2 --sequence-parallel --split-input-file --verify-diagnostics
// RUN: dsc-opt %t/no-tp.mlir --sequence-parallel --verify-diagnostics

// Errors of --sequence-parallel.

//--- no-tp.mlir
// The module must have been split by tensor-parallel (tp > 1); checked on
// the module before any function.
// expected-error @below {{sequence-parallel: run tensor-parallel first (the module has no tp > 1)}}
module {
}

//--- steps.mlir
// 3 tokens do not split over 2 ranks (reported at g, after the row-parallel
// GEMM).
func.func @tokens(%x: tensor<3x8xf32> {train.input = "x"},
                  %w1: tensor<16x8xf32> {train.param = "w1"},
                  %w2: tensor<8x16xf32> {train.param = "w2"}) -> (tensor<f32> {train.loss}) {
  %t1 = nn.transpose %w1 {permutation = array<i64: 1, 0>} : tensor<16x8xf32> -> tensor<8x16xf32>
  %h = nn.matmul %x, %t1 : tensor<3x8xf32>, tensor<8x16xf32> -> tensor<3x16xf32>
  %a = nn.gelu %h : tensor<3x16xf32>
  %t2 = nn.transpose %w2 {permutation = array<i64: 1, 0>} : tensor<8x16xf32> -> tensor<16x8xf32>
  // expected-error @+1 {{'dist.tp_reduce' op sequence-parallel: the token dimension 0 of 'tensor<3x8xf32>' (the micro-batch, or the sequence with a micro-batch of 1) does not split into tp 2 parts}}
  %y = nn.matmul %a, %t2 : tensor<3x16xf32>, tensor<16x8xf32> -> tensor<3x8xf32>
  %l = nn.reduce_sum %y {axes = array<i64: 0, 1>} : tensor<3x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A layer norm scale read by a token-split layer norm and also by an op
// every rank computes whole: its gradient would be part partial, part
// whole.
// expected-error @+1 {{sequence-parallel: parameter 'ln.weight' is read both by token-split ops and by ops every rank computes whole}}
func.func @mixed(%x: tensor<4x8xf32> {train.input = "x"}, %g: tensor<8xf32> {train.param = "ln.weight"},
                 %w1: tensor<16x8xf32> {train.param = "w1"},
                 %w2: tensor<8x16xf32> {train.param = "w2"}) -> (tensor<f32> {train.loss}) {
  %t1 = nn.transpose %w1 {permutation = array<i64: 1, 0>} : tensor<16x8xf32> -> tensor<8x16xf32>
  %h = nn.matmul %x, %t1 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %a = nn.gelu %h : tensor<4x16xf32>
  %t2 = nn.transpose %w2 {permutation = array<i64: 1, 0>} : tensor<8x16xf32> -> tensor<16x8xf32>
  %y = nn.matmul %a, %t2 : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %n = nn.layer_norm %y, %g : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %l = nn.reduce_sum %n {axes = array<i64: 0, 1>} : tensor<4x8xf32> -> tensor<f32>
  %s = nn.reduce_sum %g {axes = array<i64: 0>} : tensor<8xf32> -> tensor<f32>
  %r = nn.add %l, %s : tensor<f32>, tensor<f32> -> tensor<f32>
  return %r : tensor<f32>
}
