// A forward step as mixed-precision leaves a model with biases: the bf16
// copies of the biases (and a transposed weight's) at the top, each read
// only by its own layer, far below. pipeline-split looks through them:
// they are not activations live across every cut point.
func.func @mlp(%x: tensor<4x8xf32> {train.input = "x"}, %y: tensor<4xi64> {train.input = "y"},
               %w1: tensor<8x8xf32> {train.param = "w1"}, %b1: tensor<8xf32> {train.param = "b1"},
               %w2: tensor<8x8xf32> {train.param = "w2"}, %b2: tensor<8xf32> {train.param = "b2"},
               %w3: tensor<8x8xf32> {train.param = "w3"}, %b3: tensor<8xf32> {train.param = "b3"})
    -> (tensor<f32> {train.loss}) {
  %c1 = nn.cast %b1 : tensor<8xf32> to tensor<8xbf16>
  %c2 = nn.cast %b2 : tensor<8xf32> to tensor<8xbf16>
  %t3 = nn.transpose %w3 {permutation = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32>
  %c3 = nn.cast %b3 : tensor<8xf32> to tensor<8xbf16>
  %xb = nn.cast %x : tensor<4x8xf32> to tensor<4x8xbf16>
  %w1b = nn.cast %w1 : tensor<8x8xf32> to tensor<8x8xbf16>
  %m1 = nn.matmul %xb, %w1b : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
  %a1 = nn.add %c1, %m1 : tensor<8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
  %r1 = nn.relu %a1 : tensor<4x8xbf16>
  %w2b = nn.cast %w2 : tensor<8x8xf32> to tensor<8x8xbf16>
  %m2 = nn.matmul %r1, %w2b : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
  %a2 = nn.add %c2, %m2 : tensor<8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
  %r2 = nn.relu %a2 : tensor<4x8xbf16>
  %w3b = nn.cast %t3 : tensor<8x8xf32> to tensor<8x8xbf16>
  %m3 = nn.matmul %r2, %w3b : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
  %a3 = nn.add %c3, %m3 : tensor<8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
  %f = nn.cast %a3 : tensor<4x8xbf16> to tensor<4x8xf32>
  %l = nn.cross_entropy %f, %y : tensor<4x8xf32>, tensor<4xi64> -> tensor<f32>
  return %l : tensor<f32>
}
