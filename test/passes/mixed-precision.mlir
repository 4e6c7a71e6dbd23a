// RUN: dsc-opt %s --split-input-file --mixed-precision | FileCheck %s --check-prefix=BF16
// RUN: dsc-opt %s --split-input-file --mixed-precision=dtype=fp16 | FileCheck %s --check-prefix=FP16
// The output is valid IR that round-trips.
// RUN: dsc-opt %s --split-input-file --mixed-precision | dsc-opt --split-input-file | FileCheck %s --check-prefix=BF16
// With autodiff and gradient accumulation: fp32 gradients, one copy per
// parameter per step, hoisted out of the micro-batch body.
// RUN: dsc-opt %s --split-input-file --mixed-precision --autodiff --gradient-accumulation=steps=2 | FileCheck %s --check-prefix=STEP

// A linear layer, GELU, dropout, layer norm, a tied second matmul, softmax,
// layout ops and the loss. Parameters stay fp32 arguments; each gets one
// bf16 copy at the top (layer_norm's scale and bias get none); matmul,
// add, gelu, dropout, softmax and layer_norm run in bf16; the constant is
// converted, not cast; the transposes follow their bf16 input; the loss
// reads an fp32 cast of the logits and is fp32.
// BF16-LABEL: module attributes {train.precision = "bf16"}
// BF16-LABEL: func.func @step(
// BF16-SAME:    %[[X:[a-z0-9]+]]: tensor<4x8xf32> {train.input = "x"}, %[[Y:[a-z0-9]+]]: tensor<4xi64> {train.input = "y"}, %[[W:[a-z0-9]+]]: tensor<8x8xf32> {train.param = "w"}, %[[B:[a-z0-9]+]]: tensor<8xf32> {train.param = "b"}, %[[G:[a-z0-9]+]]: tensor<8xf32> {train.param = "ln.weight"}, %[[BETA:[a-z0-9]+]]: tensor<8xf32> {train.param = "ln.bias"})
// BF16-SAME:    -> (tensor<f32> {train.loss})
// BF16-NEXT:    %[[XL:.*]] = nn.cast %[[X]] : tensor<4x8xf32> to tensor<4x8xbf16>
// BF16-NEXT:    %[[WL:.*]] = nn.cast %[[W]] : tensor<8x8xf32> to tensor<8x8xbf16>
// BF16-NEXT:    %[[BL:.*]] = nn.cast %[[B]] : tensor<8xf32> to tensor<8xbf16>
// BF16-NEXT:    %[[MM:.*]] = nn.matmul %[[XL]], %[[WL]] : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
// BF16-NEXT:    %[[ADD:.*]] = nn.add %[[MM]], %[[BL]] : tensor<4x8xbf16>, tensor<8xbf16> -> tensor<4x8xbf16>
// BF16-NEXT:    %[[GELU:.*]] = nn.gelu %[[ADD]] : tensor<4x8xbf16>
// BF16-NEXT:    %[[DROP:.*]], %{{.*}} = nn.dropout %[[GELU]] {{.*}} : tensor<4x8xbf16> -> tensor<4x8xbf16>, tensor<4x8xi1>
// BF16-NEXT:    %[[LN:.*]] = nn.layer_norm %[[DROP]], %[[G]], %[[BETA]] : tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xbf16>
// BF16-NEXT:    %[[HALF:.*]] = arith.constant dense<5.000000e-01> : tensor<bf16>
// BF16-NEXT:    %[[MUL:.*]] = nn.mul %[[LN]], %[[HALF]] : tensor<4x8xbf16>, tensor<bf16> -> tensor<4x8xbf16>
// BF16-NEXT:    %[[MM2:.*]] = nn.matmul %[[MUL]], %[[WL]] {transpose_rhs} : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
// BF16-NEXT:    %[[SM:.*]] = nn.softmax %[[MM2]] : tensor<4x8xbf16>
// BF16-NEXT:    %[[T1:.*]] = nn.transpose %[[SM]] {{.*}} : tensor<4x8xbf16> -> tensor<8x4xbf16>
// BF16-NEXT:    %[[T2:.*]] = nn.transpose %[[T1]] {{.*}} : tensor<8x4xbf16> -> tensor<4x8xbf16>
// BF16-NEXT:    %[[F32:.*]] = nn.cast %[[T2]] : tensor<4x8xbf16> to tensor<4x8xf32>
// BF16-NEXT:    %[[LOSS:.*]] = nn.cross_entropy %[[F32]], %[[Y]] : tensor<4x8xf32>, tensor<4xi64> -> tensor<f32>
// BF16-NEXT:    return %[[LOSS]] : tensor<f32>
// No fp32 constant is left behind, and no parameter is cast twice.
// BF16-NOT:     arith.constant dense<5.000000e-01> : tensor<f32>

// FP16-LABEL: module attributes {train.precision = "fp16"}
// FP16:         nn.cast %{{.*}} : tensor<8x8xf32> to tensor<8x8xf16>
// FP16:         nn.matmul {{.*}} : tensor<4x8xf16>, tensor<8x8xf16> -> tensor<4x8xf16>
// FP16:         nn.layer_norm {{.*}} : tensor<4x8xf16>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xf16>
// FP16:         nn.cross_entropy {{.*}} : tensor<4x8xf32>, tensor<4xi64> -> tensor<f32>

// The step: the copies of w and b are made once, before train.accumulate;
// the input's cast stays inside (each micro-batch loads its own); the
// gradients of the copies are cast back, so the step's gradients are fp32
// (layer_norm's scale and bias gradients are fp32 from the kernel).
// STEP-LABEL: func.func @step(
// STEP-SAME:    -> (tensor<f32> {train.loss}, tensor<8x8xf32> {train.grad = "w"}, tensor<8xf32> {train.grad = "b"}, tensor<8xf32> {train.grad = "ln.weight"}, tensor<8xf32> {train.grad = "ln.bias"})
// STEP-NEXT:    %[[WL:.*]] = nn.cast %{{.*}} : tensor<8x8xf32> to tensor<8x8xbf16>
// STEP-NEXT:    %[[BL:.*]] = nn.cast %{{.*}} : tensor<8xf32> to tensor<8xbf16>
// STEP-NEXT:    train.accumulate 2 -> tensor<f32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32> {
// STEP-NEXT:    ^bb0(%{{.*}}: index):
// STEP-NEXT:      nn.cast %{{.*}} : tensor<4x8xf32> to tensor<4x8xbf16>
// STEP-NOT:       nn.cast %{{.*}} : tensor<8x8xf32> to tensor<8x8xbf16>
// STEP:           nn.cross_entropy_grad
// STEP-NEXT:      nn.cast %{{.*}} : tensor<4x8xf32> to tensor<4x8xbf16>
// STEP:           %[[GB:.*]] = nn.cast %{{.*}} : tensor<8xbf16> to tensor<8xf32>
// STEP-NEXT:      %[[GW:.*]] = nn.cast %{{.*}} : tensor<8x8xbf16> to tensor<8x8xf32>
// STEP-NEXT:      train.yield %{{.*}}, %[[GW]], %[[GB]], %{{.*}}, %{{.*}} : tensor<f32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
func.func @step(%x: tensor<4x8xf32> {train.input = "x"}, %y: tensor<4xi64> {train.input = "y"},
                %w: tensor<8x8xf32> {train.param = "w"}, %b: tensor<8xf32> {train.param = "b"},
                %g: tensor<8xf32> {train.param = "ln.weight"}, %beta: tensor<8xf32> {train.param = "ln.bias"})
    -> (tensor<f32> {train.loss}) {
  %0 = nn.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %1 = nn.add %0, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %2 = nn.gelu %1 : tensor<4x8xf32>
  %r, %m = nn.dropout %2 {ratio = 1.000000e-01 : f64, rng_stream = 0 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>, tensor<4x8xi1>
  %3 = nn.layer_norm %r, %g, %beta : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %c = arith.constant dense<5.000000e-01> : tensor<f32>
  %4 = nn.mul %3, %c : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %5 = nn.matmul %4, %w {transpose_rhs} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %6 = nn.softmax %5 : tensor<4x8xf32>
  %7 = nn.transpose %6 {permutation = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %8 = nn.transpose %7 {permutation = array<i64: 1, 0>} : tensor<8x4xf32> -> tensor<4x8xf32>
  %loss = nn.cross_entropy %8, %y : tensor<4x8xf32>, tensor<4xi64> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// fp32 ops: exp and the reduction read fp32 casts of bf16 values and
// produce fp32; the add after exp is a low op again (autocast's rule: each
// op in its class); a select follows its non-constant input (bf16) and its
// constant operand is converted (-inf stays -inf).
// BF16-LABEL: func.func @classes(
// BF16-NEXT:    %[[XL:.*]] = nn.cast %{{.*}} : tensor<4x4xf32> to tensor<4x4xbf16>
// BF16-NEXT:    %[[P:.*]] = nn.cast %{{.*}} : tensor<4x4xf32> to tensor<4x4xbf16>
// BF16-NEXT:    %[[A:.*]] = nn.mul %[[XL]], %[[P]] : tensor<4x4xbf16>, tensor<4x4xbf16> -> tensor<4x4xbf16>
// BF16-NEXT:    %[[AF:.*]] = nn.cast %[[A]] : tensor<4x4xbf16> to tensor<4x4xf32>
// BF16-NEXT:    %[[E:.*]] = nn.exp %[[AF]] : tensor<4x4xf32>
// BF16-NEXT:    %[[EL:.*]] = nn.cast %[[E]] : tensor<4x4xf32> to tensor<4x4xbf16>
// BF16-NEXT:    %[[NEG:.*]] = arith.constant dense<0xFF80> : tensor<bf16>
// BF16-NEXT:    %[[SEL:.*]] = nn.select %{{.*}}, %[[NEG]], %[[A]] : tensor<4x4xi1>, tensor<bf16>, tensor<4x4xbf16> -> tensor<4x4xbf16>
// BF16-NEXT:    %[[S:.*]] = nn.add %[[EL]], %[[SEL]] : tensor<4x4xbf16>, tensor<4x4xbf16> -> tensor<4x4xbf16>
// BF16-NEXT:    %[[SF:.*]] = nn.cast %[[S]] : tensor<4x4xbf16> to tensor<4x4xf32>
// BF16-NEXT:    %[[L:.*]] = nn.reduce_sum %[[SF]] {{.*}} : tensor<4x4xf32> -> tensor<f32>
// BF16-NEXT:    return %[[L]] : tensor<f32>
func.func @classes(%x: tensor<4x4xf32> {train.input = "x"}, %mask: tensor<4x4xi1> {train.input = "mask"},
                   %p: tensor<4x4xf32> {train.param = "p"}) -> (tensor<f32> {train.loss}) {
  %a = nn.mul %x, %p : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %e = nn.exp %a : tensor<4x4xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<f32>
  %s = nn.select %mask, %ninf, %a : tensor<4x4xi1>, tensor<f32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %t = nn.add %e, %s : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %l = nn.reduce_sum %t {axes = array<i64: 0, 1>} : tensor<4x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// An embedding tied to the LM head: the gather reads the fp32 table (its
// scatter-add gradient sums in fp32) and only the gathered rows are cast;
// the head's matmul reads the table's one bf16 copy.
// BF16-LABEL: func.func @tied(
// BF16-SAME:    %[[IDS:[a-z0-9]+]]: tensor<2x3xi64> {train.input = "ids"}, %{{.*}}: tensor<2x3xi64> {train.input = "targets"}, %[[WTE:[a-z0-9]+]]: tensor<10x4xf32> {train.param = "wte"})
// BF16-NEXT:    %[[WL:.*]] = nn.cast %[[WTE]] : tensor<10x4xf32> to tensor<10x4xbf16>
// BF16-NEXT:    %[[E:.*]] = nn.gather %[[WTE]], %[[IDS]] : tensor<10x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
// BF16-NEXT:    %[[EL:.*]] = nn.cast %[[E]] : tensor<2x3x4xf32> to tensor<2x3x4xbf16>
// BF16-NEXT:    %{{.*}} = nn.matmul %[[EL]], %[[WL]] {transpose_rhs} : tensor<2x3x4xbf16>, tensor<10x4xbf16> -> tensor<2x3x10xbf16>
func.func @tied(%ids: tensor<2x3xi64> {train.input = "ids"}, %t: tensor<2x3xi64> {train.input = "targets"},
                %wte: tensor<10x4xf32> {train.param = "wte"}) -> (tensor<f32> {train.loss}) {
  %e = nn.gather %wte, %ids : tensor<10x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %l = nn.matmul %e, %wte {transpose_rhs} : tensor<2x3x4xf32>, tensor<10x4xf32> -> tensor<2x3x10xf32>
  %r = nn.reshape %l : tensor<2x3x10xf32> -> tensor<6x10xf32>
  %tt = nn.reshape %t : tensor<2x3xi64> -> tensor<6xi64>
  %loss = nn.cross_entropy %r, %tt : tensor<6x10xf32>, tensor<6xi64> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// The fused attention (nn-fusion's nn.attention) computes in bf16 storage:
// query, key and value are cast, the result is bf16; its bias is added to
// float32 scores and stays f32, even when what made it was lowered (the
// nn.add here), and so do the row stats. Its gradient reads the bf16
// result gradient and the f32 stats.
// BF16-LABEL: func.func @attention(
// BF16:         %[[Q:.*]] = nn.mul {{.*}} -> tensor<2x4x8xbf16>
// BF16:         %[[BIAS:.*]] = nn.add {{.*}} -> tensor<2x4x4xbf16>
// BF16-NEXT:    %[[BIAS32:.*]] = nn.cast %[[BIAS]] : tensor<2x4x4xbf16> to tensor<2x4x4xf32>
// BF16-NEXT:    %[[R:.*]], %{{.*}} = nn.attention %[[Q]], %[[Q]], %[[Q]], %[[BIAS32]] {{.*}} : tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x4xf32> -> tensor<2x4x8xbf16>, tensor<2x4x2xf32>
// BF16-NEXT:    nn.cast %[[R]] : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
// STEP-LABEL: func.func @attention(
// STEP:         nn.attention_grad {{.*}} : tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x2xf32>, tensor<2x4x4xf32>
func.func @attention(%x: tensor<2x4x8xf32> {train.input = "x"}, %m: tensor<2x4x4xf32> {train.input = "m"},
                     %w: tensor<2x4x8xf32> {train.param = "w"}) -> (tensor<f32> {train.loss}) {
  %q = nn.mul %x, %w : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %b = nn.add %m, %m : tensor<2x4x4xf32>, tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %r, %s = nn.attention %q, %q, %q, %b {scale = 0.5 : f64} : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32> -> tensor<2x4x8xf32>, tensor<2x4x2xf32>
  %loss = nn.reduce_sum %r {axes = array<i64: 0, 1, 2>} : tensor<2x4x8xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
