// The forward step the pipeline tests split: an embedding (64 x 8), two
// linear layers, and a head that reuses the embedding (a tied parameter)
// before the loss. Parameters per layer: 512, 256, 256, 512 (the head
// counts the tied table); flops grow towards the head.
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
