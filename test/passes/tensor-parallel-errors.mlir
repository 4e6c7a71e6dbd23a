// RUN: split-file %s %t
// RUN: dsc-opt %t/steps.mlir --tensor-parallel=tp=4 --split-input-file --verify-diagnostics
// RUN: dsc-opt %t/tp0.mlir --tensor-parallel=tp=0 --verify-diagnostics

//--- tp0.mlir
// The rank count is checked on the module, before any function.
// expected-error @below {{tensor-parallel: tp must be at least 1, got 0}}
module {
}

//--- steps.mlir
// Errors of --tensor-parallel: sizes a split over tp ranks cannot divide
// (a GEMM that merely does not fit the pattern stays whole instead:
// tensor-parallel.mlir).

// 2 attention heads over 4 ranks (the fused projection's 24 features split
// into 3 blocks x 4, but each block's 2 heads do not).
func.func @heads(%x: tensor<2x3x8xf32> {train.input = "x"},
                 %w: tensor<24x8xf32> {train.param = "w"},
                 %wo: tensor<8x8xf32> {train.param = "wo"}) -> (tensor<f32> {train.loss}) {
  %t = nn.transpose %w {permutation = array<i64: 1, 0>} : tensor<24x8xf32> -> tensor<8x24xf32>
  %p = nn.matmul %x, %t : tensor<2x3x8xf32>, tensor<8x24xf32> -> tensor<2x3x24xf32>
  %q = nn.slice %p {limit = array<i64: 2, 3, 8>, start = array<i64: 0, 0, 0>, stride = array<i64: 1, 1, 1>} : tensor<2x3x24xf32> -> tensor<2x3x8xf32>
  %k = nn.slice %p {limit = array<i64: 2, 3, 16>, start = array<i64: 0, 0, 8>, stride = array<i64: 1, 1, 1>} : tensor<2x3x24xf32> -> tensor<2x3x8xf32>
  %v = nn.slice %p {limit = array<i64: 2, 3, 24>, start = array<i64: 0, 0, 16>, stride = array<i64: 1, 1, 1>} : tensor<2x3x24xf32> -> tensor<2x3x8xf32>
  // expected-error @+1 {{'nn.reshape' op tensor-parallel: splits 2 attention heads (or groups) over tp 4, which does not divide them}}
  %q4 = nn.reshape %q : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %s = nn.reduce_sum %q4 {axes = array<i64: 0, 1, 2, 3>} : tensor<2x3x2x4xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// An MLP of 6 hidden features over 4 ranks.
func.func @features(%x: tensor<4x8xf32> {train.input = "x"}, %w1: tensor<6x8xf32> {train.param = "w1"},
                    %w2: tensor<8x6xf32> {train.param = "w2"}) -> (tensor<f32> {train.loss}) {
  %t1 = nn.transpose %w1 {permutation = array<i64: 1, 0>} : tensor<6x8xf32> -> tensor<8x6xf32>
  // expected-error @+1 {{'nn.matmul' op tensor-parallel: would split a parameter of 6 along dimension 0 into 1 block(s) x tp 4, which does not divide it}}
  %h = nn.matmul %x, %t1 : tensor<4x8xf32>, tensor<8x6xf32> -> tensor<4x6xf32>
  %t2 = nn.transpose %w2 {permutation = array<i64: 1, 0>} : tensor<8x6xf32> -> tensor<6x8xf32>
  %y = nn.matmul %h, %t2 : tensor<4x6xf32>, tensor<6x8xf32> -> tensor<4x8xf32>
  %l = nn.reduce_sum %y {axes = array<i64: 0, 1>} : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
