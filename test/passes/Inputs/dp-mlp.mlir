// The forward step the data-parallel and ZeRO tests differentiate: an MLP
// with parameters of 18 (w1), 6 (b1) and 30 (w2) elements. On 4 ranks they
// split into chunks of 5 (2 padding), 2 and 8 (2 padding).
func.func @mlp(%x: tensor<4x3xf32> {train.input = "x"}, %y: tensor<4xi64> {train.input = "y"},
               %w1: tensor<6x3xf32> {train.param = "w1"}, %b1: tensor<6xf32> {train.param = "b1"},
               %w2: tensor<6x5xf32> {train.param = "w2"})
    -> (tensor<f32> {train.loss}) {
  %0 = nn.matmul %x, %w1 {transpose_rhs} : tensor<4x3xf32>, tensor<6x3xf32> -> tensor<4x6xf32>
  %1 = nn.add %0, %b1 : tensor<4x6xf32>, tensor<6xf32> -> tensor<4x6xf32>
  %2 = nn.relu %1 : tensor<4x6xf32>
  %3 = nn.matmul %2, %w2 : tensor<4x6xf32>, tensor<6x5xf32> -> tensor<4x5xf32>
  %4 = nn.cross_entropy %3, %y : tensor<4x5xf32>, tensor<4xi64> -> tensor<f32>
  return %4 : tensor<f32>
}
