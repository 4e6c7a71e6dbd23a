// Two residual blocks (matmul, GELU, matmul, + input) and a head, for the
// recompute tests.
func.func @blocks(%x: tensor<4x8xf32> {train.input = "x"}, %y: tensor<4xi64> {train.input = "y"},
                  %w1: tensor<8x8xf32> {train.param = "w1"}, %w2: tensor<8x8xf32> {train.param = "w2"},
                  %w3: tensor<8x8xf32> {train.param = "w3"}, %w4: tensor<8x8xf32> {train.param = "w4"},
                  %wh: tensor<8x5xf32> {train.param = "head"})
    -> (tensor<f32> {train.loss}) {
  %0 = nn.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %1 = nn.gelu %0 : tensor<4x8xf32>
  %2 = nn.matmul %1, %w2 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %3 = nn.add %2, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %4 = nn.matmul %3, %w3 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %5 = nn.gelu %4 : tensor<4x8xf32>
  %6 = nn.matmul %5, %w4 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %7 = nn.add %6, %3 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %8 = nn.matmul %7, %wh : tensor<4x8xf32>, tensor<8x5xf32> -> tensor<4x5xf32>
  %9 = nn.cross_entropy %8, %y : tensor<4x5xf32>, tensor<4xi64> -> tensor<f32>
  return %9 : tensor<f32>
}
