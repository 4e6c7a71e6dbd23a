// RUN: dsc-opt %s -split-input-file -verify-diagnostics

// Verifier and shape-inference errors of the nn dialect, one per message.
// A failing inferReturnTypes reports its own message and then the generic
// "failed to infer returned types"; a written result type that disagrees
// with the inferred one reports "inferred type(s) ... are incompatible".

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// Binary ops reject operand shapes that do not broadcast (NumPy rules).
func.func @add_no_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{operand shapes [2,3] and [4] do not broadcast}}
  // expected-error @+1 {{'nn.add' op failed to infer returned types}}
  %0 = nn.add %a, %b : tensor<2x3xf32>, tensor<4xf32> -> tensor<2x3xf32>
  return
}

// -----

// Size-1 dims broadcast, but two different non-1 sizes do not (pow shares the rule).
func.func @pow_no_broadcast(%a: tensor<2x3xf32>, %b: tensor<5x1xf32>) {
  // expected-error @+2 {{operand shapes [2,3] and [5,1] do not broadcast}}
  // expected-error @+1 {{'nn.pow' op failed to infer returned types}}
  %0 = nn.pow %a, %b : tensor<2x3xf32>, tensor<5x1xf32> -> tensor<5x3xf32>
  return
}

// -----

// A written result type other than the broadcast shape is rejected.
func.func @add_wrong_result(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{'nn.sub' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<3x2xf32>'}}
  // expected-error @+1 {{'nn.sub' op failed to infer returned types}}
  %0 = nn.sub %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<3x2xf32>
  return
}

// -----

// The result of a broadcasting op is the broadcast shape, not the lhs shape.
func.func @mul_result_not_broadcast(%a: tensor<3xf32>, %b: tensor<2x3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<3xf32>'}}
  // expected-error @+1 {{'nn.mul' op failed to infer returned types}}
  %0 = nn.mul %a, %b : tensor<3xf32>, tensor<2x3xf32> -> tensor<3xf32>
  return
}

// -----

// Operands of a binary op must share the element type (AllElementTypesMatch).
func.func @div_element_types(%a: tensor<3xf32>, %b: tensor<3xf16>) {
  // expected-error @+1 {{'nn.div' op failed to verify that all of {lhs, rhs, result} have same element type}}
  %0 = nn.div %a, %b : tensor<3xf32>, tensor<3xf16> -> tensor<3xf32>
  return
}

// -----

// nn values must be statically shaped.
func.func @max_dynamic(%a: tensor<?xf32>) {
  // expected-error @+1 {{'nn.max' op operand #0 must be statically shaped tensor of any type values}}
  %0 = nn.max %a, %a : tensor<?xf32>, tensor<?xf32> -> tensor<?xf32>
  return
}

// -----

// nn.cmp broadcasts like the arithmetic ops.
func.func @cmp_no_broadcast(%a: tensor<2x3xi32>, %b: tensor<2xi32>) {
  // expected-error @+2 {{operand shapes [2,3] and [2] do not broadcast}}
  // expected-error @+1 {{'nn.cmp' op failed to infer returned types}}
  %0 = nn.cmp lt, %a, %b : tensor<2x3xi32>, tensor<2xi32> -> tensor<2x3xi1>
  return
}

// -----

// nn.cmp's result has the broadcast shape.
func.func @cmp_wrong_result(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x3xi1>' are incompatible with return type(s) of operation 'tensor<3xi1>'}}
  // expected-error @+1 {{'nn.cmp' op failed to infer returned types}}
  %0 = nn.cmp ne, %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<3xi1>
  return
}

// -----

// nn.select: the two values must broadcast together.
func.func @select_values_no_broadcast(%c: tensor<2x3xi1>, %a: tensor<2x3xf32>, %b: tensor<2xf32>) {
  // expected-error @+2 {{operand shapes [2,3] and [2] do not broadcast}}
  // expected-error @+1 {{'nn.select' op failed to infer returned types}}
  %0 = nn.select %c, %a, %b : tensor<2x3xi1>, tensor<2x3xf32>, tensor<2xf32> -> tensor<2x3xf32>
  return
}

// -----

// nn.select: the condition must broadcast against the broadcast values.
func.func @select_cond_no_broadcast(%c: tensor<4xi1>, %a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{operand shapes [4] and [2,3] do not broadcast}}
  // expected-error @+1 {{'nn.select' op failed to infer returned types}}
  %0 = nn.select %c, %a, %b : tensor<4xi1>, tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  return
}

// -----

// nn.select's result includes the dims contributed by the condition.
func.func @select_wrong_result(%c: tensor<5x1xi1>, %a: tensor<3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<5x3xf32>' are incompatible with return type(s) of operation 'tensor<3xf32>'}}
  // expected-error @+1 {{'nn.select' op failed to infer returned types}}
  %0 = nn.select %c, %a, %b : tensor<5x1xi1>, tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return
}

// -----

// Float-only unary ops reject integer tensors.
func.func @exp_int(%a: tensor<3xi32>) {
  // expected-error @+1 {{'nn.exp' op operand #0 must be statically shaped tensor of floating-point values}}
  %0 = nn.exp %a : tensor<3xi32>
  return
}

// -----

// nn.cast keeps the shape (SameOperandsAndResultShape).
func.func @cast_shape(%a: tensor<3xf32>) {
  // expected-error @+1 {{'nn.cast' op requires the same shape for all operands and results}}
  %0 = nn.cast %a : tensor<3xf32> to tensor<4xf16>
  return
}

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

// -----

// Both matmul operands need rank >= 2.
func.func @matmul_rank(%a: tensor<3xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+2 {{operands must have rank >= 2, got 1 and 2}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b : tensor<3xf32>, tensor<3x4xf32> -> tensor<4xf32>
  return
}

// -----

// The contracting dimensions (lhs last, rhs second to last) must agree.
func.func @matmul_contracting(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{contracting dimensions differ: lhs [2,3] has 3, rhs [4,5] has 4}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b : tensor<2x3xf32>, tensor<4x5xf32> -> tensor<2x5xf32>
  return
}

// -----

// transpose_rhs moves rhs's contracting dimension to the last one.
func.func @matmul_contracting_transposed(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+2 {{contracting dimensions differ: lhs [2,3] has 3, rhs [3,5] has 5}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b {transpose_rhs} : tensor<2x3xf32>, tensor<3x5xf32> -> tensor<2x3xf32>
  return
}

// -----

// transpose_lhs moves lhs's contracting dimension to the second to last one.
func.func @matmul_contracting_transposed_lhs(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+2 {{contracting dimensions differ: lhs [2,3] has 2, rhs [3,5] has 3}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b {transpose_lhs} : tensor<2x3xf32>, tensor<3x5xf32> -> tensor<3x5xf32>
  return
}

// -----

// Batch dimensions broadcast with NumPy rules.
func.func @matmul_batch(%a: tensor<2x3x4xf32>, %b: tensor<5x4x6xf32>) {
  // expected-error @+2 {{batch dimensions of [2,3,4] and [5,4,6] do not broadcast}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b : tensor<2x3x4xf32>, tensor<5x4x6xf32> -> tensor<2x3x6xf32>
  return
}

// -----

// The written result of a transposed matmul must be [m, n] of op(lhs) x op(rhs).
func.func @matmul_wrong_result(%a: tensor<4x2xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x5xf32>' are incompatible with return type(s) of operation 'tensor<4x5xf32>'}}
  // expected-error @+1 {{'nn.matmul' op failed to infer returned types}}
  %0 = nn.matmul %a, %b {transpose_lhs} : tensor<4x2xf32>, tensor<4x5xf32> -> tensor<4x5xf32>
  return
}

// -----

// matmul is float-only.
func.func @matmul_int(%a: tensor<2x2xi32>) {
  // expected-error @+1 {{'nn.matmul' op operand #0 must be statically shaped tensor of floating-point values}}
  %0 = nn.matmul %a, %a : tensor<2x2xi32>, tensor<2x2xi32> -> tensor<2x2xi32>
  return
}

//===----------------------------------------------------------------------===//
// Layer norm. These cases use the generic form so that they test the
// verifier alone: the custom form of nn.layer_norm has no written result
// type and infers it while parsing, which ops.mlir covers.
//===----------------------------------------------------------------------===//

// -----

// layer_norm's axis must be within [-rank, rank).
func.func @layer_norm_axis(%x: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'nn.layer_norm' op failed to infer returned types}}
  %0 = "nn.layer_norm"(%x, %s) <{axis = 2 : i64, epsilon = 1.0e-5 : f64}> : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// A negative axis below -rank is out of range too.
func.func @layer_norm_negative_axis(%x: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @+2 {{axis -3 is out of range for rank 2}}
  // expected-error @+1 {{'nn.layer_norm' op failed to infer returned types}}
  %0 = "nn.layer_norm"(%x, %s) <{axis = -3 : i64, epsilon = 1.0e-5 : f64}> : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// The scale has the normalized shape (input dims from axis on).
func.func @layer_norm_scale_shape(%x: tensor<2x3xf32>, %s: tensor<2x3xf32>) {
  // expected-error @+2 {{scale shape [2,3] must equal the normalized shape [3]}}
  // expected-error @+1 {{'nn.layer_norm' op failed to infer returned types}}
  %0 = "nn.layer_norm"(%x, %s) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// With axis = 0 the normalized shape is the whole input shape.
func.func @layer_norm_scale_shape_axis0(%x: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @+2 {{scale shape [3] must equal the normalized shape [2,3]}}
  // expected-error @+1 {{'nn.layer_norm' op failed to infer returned types}}
  %0 = "nn.layer_norm"(%x, %s) <{axis = 0 : i64, epsilon = 1.0e-5 : f64}> : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// The optional bias has the normalized shape too.
func.func @layer_norm_bias_shape(%x: tensor<2x3xf32>, %s: tensor<3xf32>, %b: tensor<1x3xf32>) {
  // expected-error @+2 {{bias shape [1,3] must equal the normalized shape [3]}}
  // expected-error @+1 {{'nn.layer_norm' op failed to infer returned types}}
  %0 = "nn.layer_norm"(%x, %s, %b) : (tensor<2x3xf32>, tensor<3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// epsilon = 0 is rejected.
func.func @layer_norm_epsilon_zero(%x: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @+2 {{epsilon must be positive}}
  // expected-error @+1 {{'nn.layer_norm' op failed to infer returned types}}
  %0 = "nn.layer_norm"(%x, %s) <{axis = -1 : i64, epsilon = 0.0 : f64}> : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// A negative epsilon is rejected.
func.func @layer_norm_epsilon_negative(%x: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @+2 {{epsilon must be positive}}
  // expected-error @+1 {{'nn.layer_norm' op failed to infer returned types}}
  %0 = "nn.layer_norm"(%x, %s) <{axis = -1 : i64, epsilon = -1.0e-5 : f64}> : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// layer_norm's result has the input's type.
func.func @layer_norm_wrong_result(%x: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<3x2xf32>'}}
  // expected-error @+1 {{'nn.layer_norm' op failed to infer returned types}}
  %0 = "nn.layer_norm"(%x, %s) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3x2xf32>
  return
}

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

// -----

// softmax's axis must be within [-rank, rank).
func.func @softmax_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.softmax' op axis 2 is out of range for rank 2}}
  %0 = nn.softmax %x {axis = 2 : i64} : tensor<2x3xf32>
  return
}

// -----

// log_softmax shares the axis rule; -rank - 1 is out of range.
func.func @log_softmax_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.log_softmax' op axis -3 is out of range for rank 2}}
  %0 = nn.log_softmax %x {axis = -3 : i64} : tensor<2x3xf32>
  return
}

// -----

// A rank-0 softmax has no valid axis at all.
func.func @softmax_scalar(%x: tensor<f32>) {
  // expected-error @+1 {{'nn.softmax' op axis -1 is out of range for rank 0}}
  %0 = nn.softmax %x : tensor<f32>
  return
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

// -----

// The loss input is [N, C, ...]: rank 1 is rejected.
func.func @cross_entropy_rank(%x: tensor<10xf32>, %l: tensor<1xi64>) {
  // expected-error @+2 {{input must be [N, C, ...], got [10]}}
  // expected-error @+1 {{'nn.cross_entropy' op failed to infer returned types}}
  %0 = nn.cross_entropy %x, %l : tensor<10xf32>, tensor<1xi64> -> tensor<f32>
  return
}

// -----

// Labels are [N] for a [N, C] input.
func.func @cross_entropy_labels(%x: tensor<4x10xf32>, %l: tensor<10xi64>) {
  // expected-error @+2 {{labels shape [10] must be [4] for input [4,10]}}
  // expected-error @+1 {{'nn.cross_entropy' op failed to infer returned types}}
  %0 = nn.cross_entropy %x, %l : tensor<4x10xf32>, tensor<10xi64> -> tensor<f32>
  return
}

// -----

// Labels are [N, D1, ...] for a [N, C, D1, ...] input (nll_loss shares the rule).
func.func @nll_loss_labels_spatial(%x: tensor<4x10x7xf32>, %l: tensor<4xi64>) {
  // expected-error @+2 {{labels shape [4] must be [4,7] for input [4,10,7]}}
  // expected-error @+1 {{'nn.nll_loss' op failed to infer returned types}}
  %0 = nn.nll_loss %x, %l : tensor<4x10x7xf32>, tensor<4xi64> -> tensor<f32>
  return
}

// -----

// nll_loss shares the input-rank rule.
func.func @nll_loss_rank(%x: tensor<f32>, %l: tensor<i64>) {
  // expected-error @+2 {{input must be [N, C, ...], got []}}
  // expected-error @+1 {{'nn.nll_loss' op failed to infer returned types}}
  %0 = nn.nll_loss %x, %l : tensor<f32>, tensor<i64> -> tensor<f32>
  return
}

// -----

// reduction = none returns per-sample losses, not a scalar.
func.func @cross_entropy_none_scalar(%x: tensor<4x10xf32>, %l: tensor<4xi64>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<f32>'}}
  // expected-error @+1 {{'nn.cross_entropy' op failed to infer returned types}}
  %0 = nn.cross_entropy %x, %l {reduction = #nn<reduction none>} : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  return
}

// -----

// reduction = sum (and mean, the default) returns a scalar.
func.func @nll_loss_sum_not_scalar(%x: tensor<4x10xf32>, %l: tensor<4xi64>) {
  // expected-error @+2 {{inferred type(s) 'tensor<f32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{'nn.nll_loss' op failed to infer returned types}}
  %0 = nn.nll_loss %x, %l {reduction = #nn<reduction sum>} : tensor<4x10xf32>, tensor<4xi64> -> tensor<4xf32>
  return
}

// -----

// Labels are integer class ids.
func.func @cross_entropy_float_labels(%x: tensor<4x10xf32>, %l: tensor<4xf32>) {
  // expected-error @+1 {{'nn.cross_entropy' op operand #1 must be statically shaped tensor of signless integer values}}
  %0 = nn.cross_entropy %x, %l : tensor<4x10xf32>, tensor<4xf32> -> tensor<f32>
  return
}

//===----------------------------------------------------------------------===//
// Gather, reductions, layout
//===----------------------------------------------------------------------===//

// -----

// gather needs data of rank >= 1.
func.func @gather_scalar(%d: tensor<f32>, %i: tensor<2xi64>) {
  // expected-error @+2 {{data must have rank >= 1}}
  // expected-error @+1 {{'nn.gather' op failed to infer returned types}}
  %0 = nn.gather %d, %i : tensor<f32>, tensor<2xi64> -> tensor<2xf32>
  return
}

// -----

// gather's axis must be within [-rank, rank).
func.func @gather_axis(%d: tensor<5x3xf32>, %i: tensor<2xi64>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'nn.gather' op failed to infer returned types}}
  %0 = nn.gather %d, %i {axis = 2 : i64} : tensor<5x3xf32>, tensor<2xi64> -> tensor<5x2xf32>
  return
}

// -----

// gather replaces dimension `axis` of data by the indices' shape.
func.func @gather_wrong_result(%d: tensor<5x3xf32>, %i: tensor<2x4xi64>) {
  // expected-error @+2 {{inferred type(s) 'tensor<5x2x4xf32>' are incompatible with return type(s) of operation 'tensor<2x4x3xf32>'}}
  // expected-error @+1 {{'nn.gather' op failed to infer returned types}}
  %0 = nn.gather %d, %i {axis = 1 : i64} : tensor<5x3xf32>, tensor<2x4xi64> -> tensor<2x4x3xf32>
  return
}

// -----

// A reduction axis must be within [-rank, rank).
func.func @reduce_axis(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{axis 3 is out of range for rank 3}}
  // expected-error @+1 {{'nn.reduce_sum' op failed to infer returned types}}
  %0 = nn.reduce_sum %x {axes = array<i64: 3>} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return
}

// -----

// An axis named twice (here as 2 and -1) is rejected.
func.func @reduce_twice(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{axis -1 is reduced twice}}
  // expected-error @+1 {{'nn.reduce_mean' op failed to infer returned types}}
  %0 = nn.reduce_mean %x {axes = array<i64: 2, -1>} : tensor<2x3x4xf32> -> tensor<2x3xf32>
  return
}

// -----

// keepdims keeps reduced dims as 1: dropping them is a type mismatch.
func.func @reduce_keepdims_result(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x1x4xf32>' are incompatible with return type(s) of operation 'tensor<2x4xf32>'}}
  // expected-error @+1 {{'nn.reduce_max' op failed to infer returned types}}
  %0 = nn.reduce_max %x {axes = array<i64: 1>, keepdims} : tensor<2x3x4xf32> -> tensor<2x4xf32>
  return
}

// -----

// Without keepdims the reduced dims are dropped.
func.func @reduce_no_keepdims_result(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x4xf32>' are incompatible with return type(s) of operation 'tensor<2x1x4xf32>'}}
  // expected-error @+1 {{'nn.reduce_sum' op failed to infer returned types}}
  %0 = nn.reduce_sum %x {axes = array<i64: 1>} : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
  return
}

// -----

// reshape preserves the element count.
func.func @reshape_count(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.reshape' op cannot reshape 6 elements into 8 elements}}
  %0 = nn.reshape %x : tensor<2x3xf32> -> tensor<2x4xf32>
  return
}

// -----

// reshape preserves the element type.
func.func @reshape_element_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.reshape' op failed to verify that all of {input, result} have same element type}}
  %0 = nn.reshape %x : tensor<2x3xf32> -> tensor<6xf16>
  return
}

// -----

// A permutation has one entry per dimension.
func.func @transpose_size(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{permutation has 2 entries for rank 3}}
  // expected-error @+1 {{'nn.transpose' op failed to infer returned types}}
  %0 = nn.transpose %x {permutation = array<i64: 1, 0>} : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  return
}

// -----

// A permutation names each dimension once.
func.func @transpose_repeated(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{permutation [0,0] is not a permutation of 0..1}}
  // expected-error @+1 {{'nn.transpose' op failed to infer returned types}}
  %0 = nn.transpose %x {permutation = array<i64: 0, 0>} : tensor<2x3xf32> -> tensor<2x2xf32>
  return
}

// -----

// A permutation entry must be a dimension index.
func.func @transpose_out_of_range(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{permutation [2,0] is not a permutation of 0..1}}
  // expected-error @+1 {{'nn.transpose' op failed to infer returned types}}
  %0 = nn.transpose %x {permutation = array<i64: 2, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  return
}

// -----

// Negative entries are not dimension indices either.
func.func @transpose_negative(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{permutation [-1,0] is not a permutation of 0..1}}
  // expected-error @+1 {{'nn.transpose' op failed to infer returned types}}
  %0 = nn.transpose %x {permutation = array<i64: -1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  return
}

// -----

// Result dim i of a transpose is input dim permutation[i].
func.func @transpose_wrong_result(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4x2x3xf32>' are incompatible with return type(s) of operation 'tensor<3x4x2xf32>'}}
  // expected-error @+1 {{'nn.transpose' op failed to infer returned types}}
  %0 = nn.transpose %x {permutation = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
  return
}

// -----

// start, limit and stride each have one entry per dimension.
func.func @slice_entries(%x: tensor<4x5xf32>) {
  // expected-error @+2 {{start, limit and stride need one entry per dimension (2)}}
  // expected-error @+1 {{'nn.slice' op failed to infer returned types}}
  %0 = nn.slice %x {start = array<i64: 0, 0>, limit = array<i64: 4, 5>, stride = array<i64: 1>} : tensor<4x5xf32> -> tensor<4x5xf32>
  return
}

// -----

// Strides must be positive.
func.func @slice_stride(%x: tensor<4x5xf32>) {
  // expected-error @+2 {{stride of dimension 1 must be positive}}
  // expected-error @+1 {{'nn.slice' op failed to infer returned types}}
  %0 = nn.slice %x {start = array<i64: 0, 0>, limit = array<i64: 4, 5>, stride = array<i64: 1, 0>} : tensor<4x5xf32> -> tensor<4x5xf32>
  return
}

// -----

// Negative strides are rejected too.
func.func @slice_negative_stride(%x: tensor<4x5xf32>) {
  // expected-error @+2 {{stride of dimension 0 must be positive}}
  // expected-error @+1 {{'nn.slice' op failed to infer returned types}}
  %0 = nn.slice %x {start = array<i64: 3, 0>, limit = array<i64: 0, 5>, stride = array<i64: -1, 1>} : tensor<4x5xf32> -> tensor<3x5xf32>
  return
}

// -----

// start must not exceed limit.
func.func @slice_start_after_limit(%x: tensor<4x5xf32>) {
  // expected-error @+2 {{dimension 0 slice [3, 2) is outside [0, 4]}}
  // expected-error @+1 {{'nn.slice' op failed to infer returned types}}
  %0 = nn.slice %x {start = array<i64: 3, 0>, limit = array<i64: 2, 5>, stride = array<i64: 1, 1>} : tensor<4x5xf32> -> tensor<0x5xf32>
  return
}

// -----

// limit must not exceed the dimension.
func.func @slice_limit(%x: tensor<4x5xf32>) {
  // expected-error @+2 {{dimension 1 slice [0, 6) is outside [0, 5]}}
  // expected-error @+1 {{'nn.slice' op failed to infer returned types}}
  %0 = nn.slice %x {start = array<i64: 0, 0>, limit = array<i64: 4, 6>, stride = array<i64: 1, 1>} : tensor<4x5xf32> -> tensor<4x6xf32>
  return
}

// -----

// start must not be negative.
func.func @slice_negative_start(%x: tensor<4x5xf32>) {
  // expected-error @+2 {{dimension 0 slice [-1, 4) is outside [0, 4]}}
  // expected-error @+1 {{'nn.slice' op failed to infer returned types}}
  %0 = nn.slice %x {start = array<i64: -1, 0>, limit = array<i64: 4, 5>, stride = array<i64: 1, 1>} : tensor<4x5xf32> -> tensor<5x5xf32>
  return
}

// -----

// A strided slice has ceil((limit - start) / stride) elements per dim.
func.func @slice_wrong_result(%x: tensor<4x5xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x2xf32>' are incompatible with return type(s) of operation 'tensor<2x1xf32>'}}
  // expected-error @+1 {{'nn.slice' op failed to infer returned types}}
  %0 = nn.slice %x {start = array<i64: 0, 1>, limit = array<i64: 4, 5>, stride = array<i64: 2, 3>} : tensor<4x5xf32> -> tensor<2x1xf32>
  return
}

// -----

// concat needs at least one input (generic form: the custom form cannot
// spell an empty operand list).
func.func @concat_empty() {
  // expected-error @+2 {{needs at least one input}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = "nn.concat"() <{axis = 0 : i64}> : () -> tensor<0xf32>
  return
}

// -----

// concat's axis must be within [-rank, rank).
func.func @concat_axis(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat %a, %a {axis = 2 : i64} : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x6xf32>
  return
}

// -----

// concat inputs share the element type.
func.func @concat_element_types(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) {
  // expected-error @+2 {{inputs have different element types}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat %a, %b {axis = 0 : i64} : tensor<2x3xf32>, tensor<2x3xf16> -> tensor<4x3xf32>
  return
}

// -----

// concat inputs share the rank.
func.func @concat_ranks(%a: tensor<2x3xf32>, %b: tensor<2x3x1xf32>) {
  // expected-error @+2 {{inputs have different ranks}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat %a, %b {axis = 0 : i64} : tensor<2x3xf32>, tensor<2x3x1xf32> -> tensor<4x3xf32>
  return
}

// -----

// concat inputs agree on every dim except the concatenation axis.
func.func @concat_shapes(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) {
  // expected-error @+2 {{input shapes [2,3] and [4,3] differ outside the concatenation axis}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat %a, %b {axis = 1 : i64} : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<2x6xf32>
  return
}

// -----

// concat's result dim along the axis is the sum of the inputs'.
func.func @concat_wrong_result(%a: tensor<2x3xf32>, %b: tensor<5x3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<7x3xf32>' are incompatible with return type(s) of operation 'tensor<5x3xf32>'}}
  // expected-error @+1 {{'nn.concat' op failed to infer returned types}}
  %0 = nn.concat %a, %b {axis = -2 : i64} : tensor<2x3xf32>, tensor<5x3xf32> -> tensor<5x3xf32>
  return
}

// -----

// broadcast rejects target shapes that are incompatible with the input.
func.func @broadcast_incompatible(%x: tensor<3xf32>) {
  // expected-error @+1 {{'nn.broadcast' op cannot broadcast [3] to [2,4]}}
  %0 = nn.broadcast %x : tensor<3xf32> -> tensor<2x4xf32>
  return
}

// -----

// broadcast cannot shrink: the target must be the broadcast of both shapes.
func.func @broadcast_shrink(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.broadcast' op cannot broadcast [2,3] to [3]}}
  %0 = nn.broadcast %x : tensor<2x3xf32> -> tensor<3xf32>
  return
}

// -----

// broadcast cannot turn a non-1 dim into size 1.
func.func @broadcast_to_one(%x: tensor<4x3xf32>) {
  // expected-error @+1 {{'nn.broadcast' op cannot broadcast [4,3] to [1,3]}}
  %0 = nn.broadcast %x : tensor<4x3xf32> -> tensor<1x3xf32>
  return
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

// -----

// ratio = 1 would drop everything: the interval is [0, 1).
func.func @dropout_ratio_one(%x: tensor<4xf32>) {
  // expected-error @+2 {{ratio 1.000000 must be in [0, 1)}}
  // expected-error @+1 {{'nn.dropout' op failed to infer returned types}}
  %0, %1 = nn.dropout %x {ratio = 1.0 : f64, rng_stream = 0 : i64} : tensor<4xf32> -> tensor<4xf32>, tensor<4xi1>
  return
}

// -----

// A negative ratio is rejected.
func.func @dropout_ratio_negative(%x: tensor<4xf32>) {
  // expected-error @+2 {{ratio -0.100000 must be in [0, 1)}}
  // expected-error @+1 {{'nn.dropout' op failed to infer returned types}}
  %0, %1 = nn.dropout %x {ratio = -0.1 : f64, rng_stream = 0 : i64} : tensor<4xf32> -> tensor<4xf32>, tensor<4xi1>
  return
}

// -----

// The mask has the input's shape.
func.func @dropout_mask_shape(%x: tensor<4xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4xf32>', 'tensor<4xi1>' are incompatible with return type(s) of operation 'tensor<4xf32>', 'tensor<1xi1>'}}
  // expected-error @+1 {{'nn.dropout' op failed to infer returned types}}
  %0, %1 = nn.dropout %x {ratio = 0.5 : f64, rng_stream = 0 : i64} : tensor<4xf32> -> tensor<4xf32>, tensor<1xi1>
  return
}

// -----

// ratio and rng_stream are required.
func.func @dropout_missing_stream(%x: tensor<4xf32>) {
  // expected-error @+1 {{'nn.dropout' op requires attribute 'rng_stream'}}
  %0, %1 = nn.dropout %x {ratio = 0.5 : f64} : tensor<4xf32> -> tensor<4xf32>, tensor<4xi1>
  return
}

// -----

// gather_grad's gradient must have the shape gather would produce.
func.func @gather_grad_shape(%dy: tensor<2x4x8xf32>, %i: tensor<2x3xi64>) {
  // expected-error @+1 {{'nn.gather_grad' op gradient shape [2,4,8] is not the gathered shape [2,3,8]}}
  %0 = nn.gather_grad %dy, %i : tensor<2x4x8xf32>, tensor<2x3xi64> -> tensor<10x8xf32>
  return
}

// -----

func.func @gather_grad_axis(%dy: tensor<2x3x8xf32>, %i: tensor<2x3xi64>) {
  // expected-error @+1 {{'nn.gather_grad' op axis 2 is out of range for rank 2}}
  %0 = nn.gather_grad %dy, %i {axis = 2 : i64} : tensor<2x3x8xf32>, tensor<2x3xi64> -> tensor<10x8xf32>
  return
}

// -----

func.func @gather_grad_scalar(%dy: tensor<f32>, %i: tensor<i64>) {
  // expected-error @+1 {{'nn.gather_grad' op data gradient must have rank >= 1}}
  %0 = nn.gather_grad %dy, %i : tensor<f32>, tensor<i64> -> tensor<f32>
  return
}

// -----

func.func @slice_grad_shape(%d: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.slice_grad' op gradient shape [2,3] is not the slice's result shape [2,2]}}
  %0 = nn.slice_grad %d {start = array<i64: 0, 4>, limit = array<i64: 2, 8>, stride = array<i64: 1, 2>} : tensor<2x3xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @slice_grad_rank(%d: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.slice_grad' op start, limit and stride need one entry per dimension (2)}}
  %0 = nn.slice_grad %d {start = array<i64: 0>, limit = array<i64: 2, 8>, stride = array<i64: 1, 2>} : tensor<2x3xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @slice_grad_bounds(%d: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.slice_grad' op dimension 1 slice [0, 9) step 3 is invalid for size 8}}
  %0 = nn.slice_grad %d {start = array<i64: 0, 0>, limit = array<i64: 2, 9>, stride = array<i64: 1, 3>} : tensor<2x3xf32> -> tensor<2x8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Vocabulary-parallel cross-entropy
//===----------------------------------------------------------------------===//

func.func @vocab_sums_rank(%x: tensor<2x3x4xf32>, %y: tensor<2xi64>, %m: tensor<2xf32>) {
  // expected-error @+1 {{'nn.vocab_ce_sums' op input must be [N, C], not [2,3,4]}}
  %0 = nn.vocab_ce_sums %x, %y, %m {parts = 2 : i64} : tensor<2x3x4xf32>, tensor<2xi64>, tensor<2xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @vocab_sums_parts(%x: tensor<2x4xf32>, %y: tensor<2xi64>, %m: tensor<2xf32>) {
  // expected-error @+1 {{'nn.vocab_ce_sums' op parts must be at least 1}}
  %0 = nn.vocab_ce_sums %x, %y, %m {parts = 0 : i64} : tensor<2x4xf32>, tensor<2xi64>, tensor<2xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @vocab_sums_rows(%x: tensor<2x4xf32>, %y: tensor<3xi64>, %m: tensor<2xf32>) {
  // expected-error @+1 {{'nn.vocab_ce_sums' op labels and max must be [2]}}
  %0 = nn.vocab_ce_sums %x, %y, %m {parts = 2 : i64} : tensor<2x4xf32>, tensor<3xi64>, tensor<2xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @vocab_sums_result(%x: tensor<2x4xf32>, %y: tensor<2xi64>, %m: tensor<2xf32>) {
  // expected-error @+1 {{'nn.vocab_ce_sums' op result must be [2, 2]}}
  %0 = nn.vocab_ce_sums %x, %y, %m {parts = 2 : i64} : tensor<2x4xf32>, tensor<2xi64>, tensor<2xf32> -> tensor<4xf32>
  return
}

// -----

func.func @vocab_loss_sums(%s: tensor<3x2xf32>, %m: tensor<2xf32>, %y: tensor<2xi64>) {
  // expected-error @+1 {{'nn.vocab_ce_loss' op sums must be [2, N], not [3,2]}}
  %0 = nn.vocab_ce_loss %s, %m, %y {classes = 8 : i64} : tensor<3x2xf32>, tensor<2xf32>, tensor<2xi64> -> tensor<f32>
  return
}

// -----

func.func @vocab_loss_classes(%s: tensor<2x2xf32>, %m: tensor<2xf32>, %y: tensor<2xi64>) {
  // expected-error @+1 {{'nn.vocab_ce_loss' op classes must be at least 1}}
  %0 = nn.vocab_ce_loss %s, %m, %y {classes = 0 : i64} : tensor<2x2xf32>, tensor<2xf32>, tensor<2xi64> -> tensor<f32>
  return
}

// -----

func.func @vocab_loss_rows(%s: tensor<2x2xf32>, %m: tensor<3xf32>, %y: tensor<2xi64>) {
  // expected-error @+1 {{'nn.vocab_ce_loss' op labels and max must be [2]}}
  %0 = nn.vocab_ce_loss %s, %m, %y {classes = 8 : i64} : tensor<2x2xf32>, tensor<3xf32>, tensor<2xi64> -> tensor<f32>
  return
}

// -----

func.func @vocab_loss_result(%s: tensor<2x2xf32>, %m: tensor<2xf32>, %y: tensor<2xi64>) {
  // expected-error @+1 {{'nn.vocab_ce_loss' op result must be [N]}}
  %0 = nn.vocab_ce_loss %s, %m, %y {classes = 8 : i64, reduction = #nn<reduction none>} : tensor<2x2xf32>, tensor<2xf32>, tensor<2xi64> -> tensor<f32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

func.func @conv_groups(%x: tensor<2x4x9xf32>, %w: tensor<6x3x3xf32>) {
  // expected-error @+1 {{'nn.conv' op weight [6,3,3] does not fit input channels 4 in 2 groups (it needs [O, C / groups, K...], O divisible by groups)}}
  %0 = nn.conv %x, %w {strides = array<i64: 1>, pads = array<i64: 0, 0>, dilations = array<i64: 1>, groups = 2 : i64} : tensor<2x4x9xf32>, tensor<6x3x3xf32> -> tensor<2x6x7xf32>
  return
}

// -----

func.func @conv_rank(%x: tensor<2x4x9xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+1 {{'nn.conv' op input [2,4,9], weight [6,4,3,3] and output [2,6,7] must have the same rank}}
  %0 = nn.conv %x, %w {strides = array<i64: 1>, pads = array<i64: 0, 0>, dilations = array<i64: 1>} : tensor<2x4x9xf32>, tensor<6x4x3x3xf32> -> tensor<2x6x7xf32>
  return
}

// -----

func.func @conv_output(%x: tensor<2x4x9xf32>, %w: tensor<6x4x3xf32>) {
  // expected-error @+1 {{'nn.conv' op output shape [2,6,8] is not the convolution's [2,6,4] for input [2,4,9]}}
  %0 = nn.conv %x, %w {strides = array<i64: 2>, pads = array<i64: 0, 0>, dilations = array<i64: 1>} : tensor<2x4x9xf32>, tensor<6x4x3xf32> -> tensor<2x6x8xf32>
  return
}

// -----

func.func @conv_attrs(%x: tensor<2x4x9xf32>, %w: tensor<6x4x3xf32>) {
  // expected-error @+1 {{'nn.conv' op pads (begins, then ends) needs 2 entries for 1 spatial dims, got 1}}
  %0 = nn.conv %x, %w {strides = array<i64: 1>, pads = array<i64: 0>, dilations = array<i64: 1>} : tensor<2x4x9xf32>, tensor<6x4x3xf32> -> tensor<2x6x7xf32>
  return
}

// -----

func.func @conv_stride(%x: tensor<2x4x9xf32>, %w: tensor<6x4x3xf32>) {
  // expected-error @+1 {{'nn.conv' op spatial dim 0: kernel 3, stride 0, dilation 1 must be >= 1 and pads 0, 0 >= 0}}
  %0 = nn.conv %x, %w {strides = array<i64: 0>, pads = array<i64: 0, 0>, dilations = array<i64: 1>} : tensor<2x4x9xf32>, tensor<6x4x3xf32> -> tensor<2x6x7xf32>
  return
}

// -----

func.func @conv_window(%x: tensor<2x4x2xf32>, %w: tensor<6x4x3xf32>) {
  // expected-error @+1 {{'nn.conv' op spatial dim 0: a window of 5 does not fit in size 2 padded by 1 and 1}}
  %0 = nn.conv %x, %w {strides = array<i64: 1>, pads = array<i64: 1, 1>, dilations = array<i64: 2>} : tensor<2x4x2xf32>, tensor<6x4x3xf32> -> tensor<2x6x1xf32>
  return
}

// -----

func.func @conv_input_grad_shape(%g: tensor<1x4x4x4xf32>, %w: tensor<4x3x3x3xf32>) {
  // A transposed convolution's input may exceed the floor's by less than a
  // stride, not more.
  // expected-error @+1 {{'nn.conv_input_grad' op output shape [1,4,4,4] is not the convolution's [1,4,5,5] for input [1,3,10,10]}}
  %0 = nn.conv_input_grad %g, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<1x4x4x4xf32>, tensor<4x3x3x3xf32> -> tensor<1x3x10x10xf32>
  return
}

// -----

func.func @conv_weight_grad_shape(%x: tensor<1x3x8x8xf32>, %g: tensor<1x4x4x4xf32>) {
  // expected-error @+1 {{'nn.conv_weight_grad' op weight [4,2,3,3] does not fit input channels 3 in 1 groups}}
  %0 = nn.conv_weight_grad %x, %g {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<1x4x4x4xf32> -> tensor<4x2x3x3xf32>
  return
}

// -----

func.func @max_pool_ceil(%p: tensor<1x3x7x6xf32>) {
  // Without ceil_mode the floor: 4 x 2.
  // expected-error @+1 {{'nn.max_pool' op output shape [1,3,4,3] is not the pooling's [1,3,4,2] for input [1,3,7,6]}}
  %0 = nn.max_pool %p {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 2>} : tensor<1x3x7x6xf32> -> tensor<1x3x4x3xf32>
  return
}

// -----

func.func @max_pool_spatial(%p: tensor<4x3xf32>) {
  // expected-error @+1 {{'nn.max_pool' op expects [N, C] and 1 to 3 spatial dims, got [4,3]}}
  %0 = nn.max_pool %p {kernel_shape = array<i64>, strides = array<i64>, pads = array<i64>, dilations = array<i64>} : tensor<4x3xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @max_pool_grad_shape(%p: tensor<1x3x7x6xf32>, %g: tensor<1x3x3x3xf32>) {
  // expected-error @+1 {{'nn.max_pool_grad' op output shape [1,3,3,3] is not the pooling's [1,3,4,2] for input [1,3,7,6]}}
  %0 = nn.max_pool_grad %p, %g {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 2>} : tensor<1x3x7x6xf32>, tensor<1x3x3x3xf32>
  return
}

// -----

func.func @avg_pool_kernel(%a: tensor<1x2x6xf32>) {
  // expected-error @+1 {{'nn.avg_pool' op kernel_shape needs 1 entries for 1 spatial dims, got 2}}
  %0 = nn.avg_pool %a {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2>, pads = array<i64: 1, 1>} : tensor<1x2x6xf32> -> tensor<1x2x3xf32>
  return
}

// -----

func.func @avg_pool_grad_shape(%g: tensor<1x2x4xf32>) {
  // expected-error @+1 {{'nn.avg_pool_grad' op output shape [1,2,4] is not the pooling's [1,2,3] for input [1,2,6]}}
  %0 = nn.avg_pool_grad %g {kernel_shape = array<i64: 3>, strides = array<i64: 2>, pads = array<i64: 1, 1>} : tensor<1x2x4xf32> -> tensor<1x2x6xf32>
  return
}

// -----

func.func @argmax_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.argmax' op axis 2 is out of range for rank 2 (normalized, non-negative)}}
  %0 = nn.argmax %x {axis = 2 : i64} : tensor<2x3xf32> -> tensor<2xi64>
  return
}

// -----

func.func @argmax_result(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.argmax' op result must be i64 [2,1], is 'tensor<2xi64>'}}
  %0 = nn.argmax %x {axis = 1 : i64, keepdims} : tensor<2x3xf32> -> tensor<2xi64>
  return
}

//===----------------------------------------------------------------------===//
// Fused attention
//===----------------------------------------------------------------------===//

// -----

func.func @attention_rank(%q: tensor<8xf32>, %k: tensor<8xf32>, %v: tensor<8xf32>) {
  // expected-error @+2 {{query, key and value must have one rank >= 2, got [8], [8], [8]}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0, %1 = nn.attention %q, %k, %v {scale = 1.0 : f64} : tensor<8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>, tensor<8x2xf32>
  return
}

// -----

func.func @attention_heads(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x4x8x16xf32>) {
  // expected-error @+2 {{query [2,4,8,16], key [2,2,8,16] and value [2,4,8,16] must have the same leading dimensions}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0, %1 = nn.attention %q, %k, %v {scale = 1.0 : f64} : tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>, tensor<2x4x8x2xf32>
  return
}

// -----

func.func @attention_features(%q: tensor<4x8x16xf32>, %k: tensor<4x8x8xf32>, %v: tensor<4x8x16xf32>) {
  // expected-error @+2 {{key [4,8,8] must have the query's feature size 16}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0, %1 = nn.attention %q, %k, %v {scale = 1.0 : f64} : tensor<4x8x16xf32>, tensor<4x8x8xf32>, tensor<4x8x16xf32> -> tensor<4x8x16xf32>, tensor<4x8x2xf32>
  return
}

// -----

func.func @attention_length(%q: tensor<4x8x16xf32>, %k: tensor<4x8x16xf32>, %v: tensor<4x6x16xf32>) {
  // expected-error @+2 {{value [4,6,16] must have the key's length 8}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0, %1 = nn.attention %q, %k, %v {scale = 1.0 : f64} : tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x6x16xf32> -> tensor<4x8x16xf32>, tensor<4x8x2xf32>
  return
}

// -----

func.func @attention_scale(%q: tensor<4x8x16xf32>) {
  // expected-error @+2 {{scale -1.000000 must be positive and finite}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0, %1 = nn.attention %q, %q, %q {scale = -1.0 : f64} : tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32> -> tensor<4x8x16xf32>, tensor<4x8x2xf32>
  return
}

// -----

func.func @attention_ratio(%q: tensor<4x8x16xf32>) {
  // expected-error @+2 {{ratio 1.000000 must be in [0, 1)}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0, %1 = nn.attention %q, %q, %q {scale = 1.0 : f64, ratio = 1.0 : f64} : tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32> -> tensor<4x8x16xf32>, tensor<4x8x2xf32>
  return
}

// -----

func.func @attention_bias(%q: tensor<4x8x16xf32>, %b: tensor<4x8x16xf32>) {
  // expected-error @+2 {{bias [4,8,16] must broadcast to the scores [4,8,8] and be f32}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0, %1 = nn.attention %q, %q, %q, %b {scale = 1.0 : f64} : tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32> -> tensor<4x8x16xf32>, tensor<4x8x2xf32>
  return
}

// -----

func.func @attention_bshd_rank(%q: tensor<8x16xf32>) {
  // expected-error @+2 {{query, key and value must have one rank >= 3 (bshd: [..., T, H, E]), got [8,16], [8,16], [8,16]}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0, %1 = nn.attention %q, %q, %q {scale = 1.0 : f64, bshd} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>, tensor<8x2xf32>
  return
}

// -----

func.func @attention_bshd_heads(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>) {
  // expected-error @+2 {{query [2,8,4,16], key [2,8,2,16] and value [2,8,2,16] must have the same leading dimensions and heads}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0, %1 = nn.attention %q, %k, %k {scale = 1.0 : f64, bshd} : tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32> -> tensor<2x8x4x16xf32>, tensor<2x4x8x2xf32>
  return
}

// -----

func.func @attention_grad_bshd_stats(%q: tensor<2x8x4x16xf32>, %s: tensor<2x8x4x2xf32>) {
  // expected-error @+1 {{'nn.attention_grad' op stats 'tensor<2x8x4x2xf32>' must be 'tensor<2x4x8x2xf32>'}}
  %0:3 = nn.attention_grad %q, %q, %q, %q, %s {scale = 1.0 : f64, bshd} : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x2xf32>
  return
}

// -----

func.func @attention_grad_stats(%dy: tensor<4x8x16xf32>, %q: tensor<4x8x16xf32>, %s: tensor<4x8x2xbf16>) {
  // expected-error @+1 {{'nn.attention_grad' op stats 'tensor<4x8x2xbf16>' must be 'tensor<4x8x2xf32>'}}
  %0:3 = nn.attention_grad %dy, %q, %q, %q, %s {scale = 1.0 : f64} : tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x2xbf16>
  return
}

// -----

func.func @attention_grad_grad(%dy: tensor<4x8x8xf32>, %q: tensor<4x8x16xf32>, %s: tensor<4x8x2xf32>) {
  // expected-error @+1 {{'nn.attention_grad' op grad 'tensor<4x8x8xf32>' must be the forward's result type 'tensor<4x8x16xf32>'}}
  %0:3 = nn.attention_grad %dy, %q, %q, %q, %s {scale = 1.0 : f64} : tensor<4x8x8xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x2xf32>
  return
}

// -----

func.func @attention_bias_low(%q: tensor<4x8x16xbf16>, %b: tensor<4x8x8xbf16>) {
  // expected-error @+2 {{bias [4,8,8] must broadcast to the scores [4,8,8] and be f32}}
  // expected-error @+1 {{'nn.attention' op failed to infer returned types}}
  %0, %1 = nn.attention %q, %q, %q, %b {scale = 1.0 : f64} : tensor<4x8x16xbf16>, tensor<4x8x16xbf16>, tensor<4x8x16xbf16>, tensor<4x8x8xbf16> -> tensor<4x8x16xbf16>, tensor<4x8x2xf32>
  return
}

// -----

func.func @epilogue_nothing(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) {
  // expected-error @+1 {{'nn.matmul_epilogue' op needs a bias, a scale, an addend or a column_sum (without, it is nn.matmul)}}
  %0 = nn.matmul_epilogue %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @epilogue_result(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{'nn.matmul_epilogue' op result type 'tensor<4x8xf32>' must be the product's, 'tensor<4x16xf32>'}}
  %0 = nn.matmul_epilogue %x, %w bias %b : tensor<4x8xf32>, tensor<8x16xf32> bias tensor<16xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @epilogue_contracting(%x: tensor<4x8xf32>, %w: tensor<7x16xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{contracting dimensions differ: lhs [4,8] has 8, rhs [7,16] has 7}}
  %0 = nn.matmul_epilogue %x, %w bias %b : tensor<4x8xf32>, tensor<7x16xf32> bias tensor<16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @epilogue_scale_type(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %s: tensor<4x16xf32>) {
  // expected-error @+1 {{'nn.matmul_epilogue' op scale type 'tensor<4x16xf32>' must be the result's, 'tensor<4x16xbf16>'}}
  %0 = nn.matmul_epilogue %x, %w scale %s : tensor<4x8xbf16>, tensor<8x16xbf16> scale tensor<4x16xf32> -> tensor<4x16xbf16>
  return
}

// -----

func.func @gelu_with_derivative_types(%x: tensor<4x16xbf16>) {
  // expected-error @+1 {{'nn.gelu_with_derivative' op requires the same type for all operands and results}}
  %0, %1 = "nn.gelu_with_derivative"(%x) : (tensor<4x16xbf16>) -> (tensor<4x16xbf16>, tensor<4x16xf32>)
  return
}

// -----

func.func @epilogue_bias_shape(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<4x16xf32>) {
  // expected-error @+1 {{'nn.matmul_epilogue' op bias 'tensor<4x16xf32>' must be a vector of the result's 16 columns, of 'f32'}}
  %0 = nn.matmul_epilogue %x, %w bias %b : tensor<4x8xf32>, tensor<8x16xf32> bias tensor<4x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @epilogue_bias_type(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xf32>) {
  // expected-error @+1 {{'nn.matmul_epilogue' op bias 'tensor<16xf32>' must be a vector of the result's 16 columns, of 'bf16'}}
  %0 = nn.matmul_epilogue %x, %w bias %b : tensor<4x8xbf16>, tensor<8x16xbf16> bias tensor<16xf32> -> tensor<4x16xbf16>
  return
}

// -----

func.func @epilogue_column_sum_shape(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) {
  // expected-error @+1 {{'nn.matmul_epilogue' op column_sum 'tensor<4xf32>' must be a vector of the result's 16 columns, of 'f32'}}
  %0, %1 = nn.matmul_epilogue %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32> column_sum tensor<4xf32>
  return
}

// -----

func.func @epilogue_column_sum_type(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>) {
  // expected-error @+1 {{'nn.matmul_epilogue' op column_sum 'tensor<16xf32>' must be a vector of the result's 16 columns, of 'bf16'}}
  %0, %1 = nn.matmul_epilogue %x, %w : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16> column_sum tensor<16xf32>
  return
}

// -----

func.func @epilogue_addend(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %r: tensor<1x16xf32>) {
  // expected-error @+1 {{'nn.matmul_epilogue' op addend type 'tensor<1x16xf32>' must be the result's, 'tensor<4x16xf32>'}}
  %0 = nn.matmul_epilogue %x, %w addend %r : tensor<4x8xf32>, tensor<8x16xf32> addend tensor<1x16xf32> -> tensor<4x16xf32>
  return
}
