//===- NNOps.td - nn dialect operations --------------------*- tablegen -*-===//
#ifndef DSC_NN_OPS
#define DSC_NN_OPS

include "dialects/nn/NNBase.td"
include "dialects/nn/NNInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

// `cost` names the CostOpInterface methods the op computes itself; the rest
// use the defaults (one flop per result element, bytes of operands/results).
class NN_Op<string mnemonic, list<Trait> traits = [], list<string> cost = []>
    : Op<NN_Dialect, mnemonic, !listconcat(traits, [Pure,
          DeclareOpInterfaceMethods<NN_GradientOpInterface, ["buildGradients"]>,
          DeclareOpInterfaceMethods<NN_CostOpInterface, cost>])>;

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class NN_BinaryOp<string mnemonic, list<Trait> traits = []>
    : NN_Op<mnemonic, !listconcat(traits, [InferTypeOpAdaptor,
          AllElementTypesMatch<["lhs", "rhs", "result"]>])> {
  let summary = "elementwise " # mnemonic # " with NumPy broadcasting";
  let arguments = (ins NN_Tensor:$lhs, NN_Tensor:$rhs);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def NN_AddOp : NN_BinaryOp<"add", [Commutative]>;
def NN_SubOp : NN_BinaryOp<"sub">;
def NN_MulOp : NN_BinaryOp<"mul", [Commutative]>;
def NN_DivOp : NN_BinaryOp<"div">;
def NN_PowOp : NN_BinaryOp<"pow">;
def NN_MaxOp : NN_BinaryOp<"max", [Commutative]>;
def NN_MinOp : NN_BinaryOp<"min", [Commutative]>;

def NN_CmpOp : NN_Op<"cmp", [InferTypeOpAdaptor,
                             AllElementTypesMatch<["lhs", "rhs"]>]> {
  let summary = "elementwise comparison with NumPy broadcasting, to i1";
  let arguments = (ins NN_CmpPredicateAttr:$predicate,
                       NN_Tensor:$lhs, NN_Tensor:$rhs);
  let results = (outs NN_BoolTensor:$result);
  let assemblyFormat = [{
    $predicate `,` $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)
      `->` type($result)
  }];
}

def NN_SelectOp : NN_Op<"select", [InferTypeOpAdaptor,
                                   AllElementTypesMatch<["lhs", "rhs", "result"]>]> {
  let summary = "elementwise `cond ? lhs : rhs` with NumPy broadcasting";
  let arguments = (ins NN_BoolTensor:$cond, NN_Tensor:$lhs, NN_Tensor:$rhs);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = [{
    $cond `,` $lhs `,` $rhs attr-dict `:` type($cond) `,` type($lhs) `,`
      type($rhs) `->` type($result)
  }];
}

class NN_UnaryOp<string mnemonic, Type type = NN_FloatTensor,
                 list<Trait> traits = [], list<string> cost = []>
    : NN_Op<mnemonic, !listconcat(traits, [SameOperandsAndResultType]), cost> {
  let summary = "elementwise " # mnemonic;
  let arguments = (ins type:$input);
  let results = (outs type:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def NN_NegOp : NN_UnaryOp<"neg", NN_Tensor>;
def NN_AbsOp : NN_UnaryOp<"abs", NN_Tensor>;
def NN_ExpOp : NN_UnaryOp<"exp">;
def NN_LogOp : NN_UnaryOp<"log">;
def NN_SqrtOp : NN_UnaryOp<"sqrt">;
def NN_RsqrtOp : NN_UnaryOp<"rsqrt">;
def NN_ReciprocalOp : NN_UnaryOp<"reciprocal">;
def NN_TanhOp : NN_UnaryOp<"tanh">;
def NN_SinOp : NN_UnaryOp<"sin">;
def NN_CosOp : NN_UnaryOp<"cos">;
def NN_ErfOp : NN_UnaryOp<"erf">;
def NN_ReluOp : NN_UnaryOp<"relu">;
def NN_SigmoidOp : NN_UnaryOp<"sigmoid">;
def NN_NotOp : NN_UnaryOp<"not", NN_BoolTensor>;

def NN_GeluOp : NN_Op<"gelu", [SameOperandsAndResultType], ["getFlops"]> {
  let summary = "Gaussian error linear unit, exact (erf) or tanh-approximated";
  let arguments = (ins NN_FloatTensor:$input,
      DefaultValuedAttr<NN_GeluApproximationAttr,
                        "::dsc::nn::GeluApproximation::none">:$approximation);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input (`approximation` `=` $approximation^)? attr-dict `:` type($input)";
}

def NN_GeluWithDerivativeOp : NN_Op<"gelu_with_derivative", [SameOperandsAndResultType],
                                     ["getFlops"]> {
  let summary = "gelu and its derivative at the same input, for the backward's GEMM";
  let description = [{
    `result` = gelu(input) as nn.gelu computes it, and `derivative` =
    gelu'(input), the factor nn.gelu_grad multiplies the output gradient
    by, from the same evaluation of the normal CDF (or tanh). The
    matmul-epilogue pass makes it where the GELU's input is read only by
    the GELU and its gradient: the backward then needs the derivative, not
    the input, and multiplies it into the GEMM that makes the output
    gradient (nn.matmul_epilogue's `scale`), so no separate gradient pass
    reads the input and the GEMM's result again. Made after autodiff, it
    has no gradient rule.
  }];
  let arguments = (ins NN_FloatTensor:$input,
      DefaultValuedAttr<NN_GeluApproximationAttr,
                        "::dsc::nn::GeluApproximation::none">:$approximation);
  let results = (outs NN_FloatTensor:$result, NN_FloatTensor:$derivative);
  let assemblyFormat = "$input (`approximation` `=` $approximation^)? attr-dict `:` type($input)";
}

def NN_CastOp : NN_Op<"cast", [SameOperandsAndResultShape]> {
  let summary = "elementwise conversion to another element type";
  let arguments = (ins NN_Tensor:$input);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
}

//===----------------------------------------------------------------------===//
// Contractions and normalizations
//===----------------------------------------------------------------------===//

def NN_MatmulOp : NN_Op<"matmul", [InferTypeOpAdaptor,
                                   AllElementTypesMatch<["lhs", "rhs", "result"]>],
                        ["getFlops"]> {
  let summary = "batched matrix product with broadcast batch dimensions";
  let description = [{
    `result[..., m, n] = sum_k op(lhs)[..., m, k] * op(rhs)[..., k, n]` where
    `op` transposes the two innermost dimensions when `transpose_lhs` /
    `transpose_rhs` is set. Leading (batch) dimensions broadcast, so a rank-2
    weight multiplies every sequence of a rank-3 activation.
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def NN_LayerNormOp : NN_Op<"layer_norm", [InferTypeOpAdaptor,
                                          AllElementTypesMatch<["input", "result"]>],
                           ["getFlops"]> {
  let summary = "layer normalization over the dimensions from `axis` on";
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$scale,
                       Optional<NN_FloatTensor>:$bias,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale (`,` $bias^)? attr-dict `:` type($input) `,` type($scale)
      (`,` type($bias)^)? `->` type($result)
  }];
}

class NN_SoftmaxLikeOp<string mnemonic>
    : NN_Op<mnemonic, [SameOperandsAndResultType], ["getFlops"]> {
  let summary = mnemonic # " along `axis`";
  let arguments = (ins NN_FloatTensor:$input,
                       DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}
def NN_SoftmaxOp : NN_SoftmaxLikeOp<"softmax">;
def NN_LogSoftmaxOp : NN_SoftmaxLikeOp<"log_softmax">;

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

class NN_LossOp<string mnemonic, string what>
    : NN_Op<mnemonic, [InferTypeOpAdaptor], ["getFlops"]> {
  let summary = what # " over class dimension 1";
  let description = [{
    `input` is [N, C] or [N, C, D1, ...]; `labels` is [N] or [N, D1, ...]
    with integer class ids. Samples whose label equals `ignore_index` add
    nothing and are not counted by the `mean` reduction (PyTorch semantics).
    A bf16 / fp16 input is read widened (exactly) and the loss is f32.
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_IntTensor:$labels,
      DefaultValuedAttr<NN_ReductionAttr, "::dsc::nn::Reduction::mean">:$reduction,
      OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $labels attr-dict `:` type($input) `,` type($labels) `->` type($result)
  }];
}
def NN_CrossEntropyOp : NN_LossOp<"cross_entropy", "softmax cross-entropy">;
def NN_NllLossOp : NN_LossOp<"nll_loss", "negative log-likelihood of log-probabilities">;

// Vocabulary-parallel cross-entropy (Megatron's): the logits of a
// tensor-parallel rank are its part of the classes; the tp group combines
// the parts' maxima (dist.tp_max) and sums (dist.tp_reduce) in between.

def NN_VocabCeSumsOp : NN_Op<"vocab_ce_sums", [], ["getFlops"]> {
  let summary = "a vocabulary part's softmax sums and label logits";
  let description = [{
    `input` [N, C] holds classes [r * C, (r + 1) * C) of `parts` * C, where
    r is this rank in the tensor-parallel group; `max` [N] is every row's
    maximum over all parts. The result [2, N] holds per row the sum of
    exp(input - max) over this part, and the label's logit where this part
    holds the label (else 0): summed over the group they give the
    log-sum-exp and the label's logit.
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_IntTensor:$labels, NN_FloatTensor:$max,
                       I64Attr:$parts);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $labels `,` $max attr-dict `:` type($input) `,` type($labels) `,` type($max)
      `->` type($result)
  }];
  let hasVerifier = 1;
}

def NN_VocabCeLossOp : NN_Op<"vocab_ce_loss", [], ["getFlops"]> {
  let summary = "cross-entropy from the summed vocabulary-part sums";
  let description = [{
    `sums` [2, N] are nn.vocab_ce_sums summed over the parts, `max` [N] the
    rows' maxima: the loss of row n is log(sums[0, n]) + max[n] - sums[1, n].
    Labels outside [0, classes) (the whole vocabulary) or equal to
    `ignore_index` add nothing, as in nn.cross_entropy.
  }];
  let arguments = (ins NN_FloatTensor:$sums, NN_FloatTensor:$max, NN_IntTensor:$labels,
      I64Attr:$classes,
      DefaultValuedAttr<NN_ReductionAttr, "::dsc::nn::Reduction::mean">:$reduction,
      OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $sums `,` $max `,` $labels attr-dict `:` type($sums) `,` type($max) `,` type($labels)
      `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Indexing, reductions and layout
//===----------------------------------------------------------------------===//

def NN_GatherOp : NN_Op<"gather", [InferTypeOpAdaptor], ["getFlops", "getBytesRead"]> {
  let summary = "take slices of `data` along `axis` at `indices` (an embedding at axis 0)";
  let arguments = (ins NN_Tensor:$data, NN_IntTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = [{
    $data `,` $indices attr-dict `:` type($data) `,` type($indices) `->` type($result)
  }];
}

class NN_ReduceOp<string mnemonic>
    : NN_Op<mnemonic, [InferTypeOpAdaptor], ["getFlops"]> {
  let summary = mnemonic # " over `axes`";
  let arguments = (ins NN_Tensor:$input, DenseI64ArrayAttr:$axes,
                       UnitAttr:$keepdims);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}
def NN_ReduceSumOp : NN_ReduceOp<"reduce_sum">;
def NN_ReduceMeanOp : NN_ReduceOp<"reduce_mean">;
def NN_ReduceMaxOp : NN_ReduceOp<"reduce_max">;

def NN_ArgMaxOp : NN_Op<"argmax", [], ["getFlops"]> {
  let summary = "index of the maximum along `axis` (the first of equal maxima; NaN wins)";
  let description = [{
    PyTorch's argmax: int64 indices, the axis removed (kept as 1 with
    `keepdims`). Not differentiable: routing decisions (a mixture of
    experts' gate) take no gradient.
  }];
  let arguments = (ins NN_FloatTensor:$input, I64Attr:$axis, UnitAttr:$keepdims);
  let results = (outs NN_IntTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def NN_ReshapeOp : NN_Op<"reshape", [AllElementTypesMatch<["input", "result"]>],
                         ["getFlops", "getBytesRead", "getBytesWritten"]> {
  let summary = "reinterpret the elements with another static shape (a view)";
  let arguments = (ins NN_Tensor:$input);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def NN_TransposeOp : NN_Op<"transpose", [InferTypeOpAdaptor], ["getFlops"]> {
  let summary = "permute dimensions: result dim i is input dim permutation[i]";
  let arguments = (ins NN_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def NN_SliceOp : NN_Op<"slice", [InferTypeOpAdaptor], ["getFlops"]> {
  let summary = "strided slice: per dimension start (inclusive), limit (exclusive), stride > 0";
  let arguments = (ins NN_Tensor:$input, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$limit, DenseI64ArrayAttr:$stride);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def NN_ConcatOp : NN_Op<"concat", [InferTypeOpAdaptor], ["getFlops"]> {
  let summary = "join tensors along `axis`";
  let arguments = (ins Variadic<NN_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs) `->` type($result)";
}

def NN_BroadcastOp : NN_Op<"broadcast", [AllElementTypesMatch<["input", "result"]>],
                           ["getFlops"]> {
  let summary = "broadcast to a larger shape with NumPy rules (ONNX Expand)";
  let arguments = (ins NN_Tensor:$input);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Convolution and pooling: layout [N, C, S...] with 1 to 3 spatial dims S.
// Window attributes follow ONNX: per spatial dim `strides`, `dilations` and
// (pooling) `kernel_shape`; `pads` holds the begins then the ends. Result
// shapes are explicit and verified (conv_input_grad and ceil-mode pooling
// have more than one consistent shape).
//===----------------------------------------------------------------------===//

def NN_ConvOp : NN_Op<"conv", [AllElementTypesMatch<["input", "weight", "result"]>],
                      ["getFlops"]> {
  let summary = "N-d cross-correlation (ONNX Conv without its bias)";
  let description = [{
    `input` [N, C, S...] and `weight` [O, C / groups, K...] give `result`
    [N, O, R...] with R = floor((S + pad_begin + pad_end - ((K - 1) *
    dilation + 1)) / stride) + 1. The bias is a separate broadcast add.
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `,` type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

def NN_ConvInputGradOp : NN_Op<"conv_input_grad",
    [AllElementTypesMatch<["grad", "weight", "input_grad"]>], ["getFlops"]> {
  let summary = "the input gradient of conv (also ONNX ConvTranspose without its bias)";
  let description = [{
    The transposed convolution: `grad` [N, O, R...] and `weight`
    [O, C / groups, K...] give `input_grad` [N, C, S...], any S for which
    conv of S has R (ConvTranspose's output_padding picks among them).
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$weight,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs NN_FloatTensor:$input_grad);
  let assemblyFormat = [{
    $grad `,` $weight attr-dict `:` type($grad) `,` type($weight) `->` type($input_grad)
  }];
  let hasVerifier = 1;
}

def NN_ConvWeightGradOp : NN_Op<"conv_weight_grad",
    [AllElementTypesMatch<["input", "grad", "weight_grad"]>], ["getFlops"]> {
  let summary = "the weight gradient of conv: sum over N and R of grad x input windows";
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$grad,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs NN_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $input `,` $grad attr-dict `:` type($input) `,` type($grad) `->` type($weight_grad)
  }];
  let hasVerifier = 1;
}

def NN_MaxPoolOp : NN_Op<"max_pool", [AllElementTypesMatch<["input", "result"]>],
                         ["getFlops"]> {
  let summary = "max over each window (padding never wins; the first maximum in a tie)";
  let arguments = (ins NN_FloatTensor:$input, DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations, UnitAttr:$ceil_mode);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def NN_MaxPoolGradOp : NN_Op<"max_pool_grad",
    [AllTypesMatch<["input", "input_grad"]>, AllElementTypesMatch<["input", "grad"]>],
    ["getFlops"]> {
  let summary = "max_pool's input gradient: each window's gradient to its first maximum";
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$grad,
                       DenseI64ArrayAttr:$kernel_shape, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                       UnitAttr:$ceil_mode);
  let results = (outs NN_FloatTensor:$input_grad);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($input) `,` type($grad)";
  let hasVerifier = 1;
}

def NN_AvgPoolOp : NN_Op<"avg_pool", [AllElementTypesMatch<["input", "result"]>],
                         ["getFlops"]> {
  let summary = "mean over each window";
  let description = [{
    The divisor is PyTorch's: with `count_include_pad` the window's extent
    inside the padded input (a ceil-mode window past the padding counts
    less), otherwise the number of input elements it covers.
  }];
  let arguments = (ins NN_FloatTensor:$input, DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       UnitAttr:$ceil_mode, UnitAttr:$count_include_pad);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def NN_AvgPoolGradOp : NN_Op<"avg_pool_grad",
    [AllElementTypesMatch<["grad", "input_grad"]>], ["getFlops"]> {
  let summary = "avg_pool's input gradient: each window's gradient / divisor to its elements";
  let arguments = (ins NN_FloatTensor:$grad, DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       UnitAttr:$ceil_mode, UnitAttr:$count_include_pad);
  let results = (outs NN_FloatTensor:$input_grad);
  let assemblyFormat = "$grad attr-dict `:` type($grad) `->` type($input_grad)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Randomness
//===----------------------------------------------------------------------===//

def NN_DropoutOp : NN_Op<"dropout", [InferTypeOpAdaptor], ["getFlops"]> {
  let summary = "inverted dropout with an explicit counter-based RNG key";
  let description = [{
    Zeroes each element with probability `ratio` and scales the rest by
    1/(1-ratio). The mask is a pure function of (run seed, optimizer step,
    micro-batch, `rng_stream`, element index) through a counter-based
    generator (Philox), so a recomputed dropout (activation checkpointing)
    draws exactly the same mask, and every rank of a data-parallel group
    draws its own by folding the rank into the counter. `rng_stream` is
    unique per dropout op in a module. Returns the output and the kept-mask.
  }];
  let arguments = (ins NN_FloatTensor:$input, F64Attr:$ratio, I64Attr:$rng_stream);
  let results = (outs NN_FloatTensor:$result, NN_BoolTensor:$mask);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result) `,` type($mask)";
}

//===----------------------------------------------------------------------===//
// Fused attention (made by nn-fusion from the exported op chain)
//===----------------------------------------------------------------------===//

def NN_AttentionOp : NN_Op<"attention", [InferTypeOpAdaptor,
    AllElementTypesMatch<["query", "key", "value", "result"]>], ["getFlops"]> {
  let summary = "scaled dot-product attention that keeps no scores";
  let description = [{
    `result = dropout(softmax(mask(scale(query key^T)) + bias)) value` over
    the two innermost dimensions: query [..., T, E], key [..., S, E] and
    value [..., S, F] give [..., T, F]; the leading dimensions are equal.
    `scale` multiplies the scores, or divides them with `scale_divides`
    (x / sqrt(96) and x * (1 / sqrt(96)) round differently). `causal` masks
    the keys after each query (key j > query i, PyTorch's is_causal): their
    probabilities are exactly 0, whatever value the exported mask filled in.
    The optional `bias` (f32) is added to the scaled scores and broadcasts
    to [..., T, S]; it receives no gradient (nn-fusion fuses only a bias that
    no parameter reaches). With `ratio` > 0, dropout draws the bits
    nn.dropout with `rng_stream` draws at the same positions of the
    [..., T, S] probabilities.

    With `bshd` the operands and the result keep the heads after the
    sequence, as the projections lay them out: query [..., T, H, E], key
    [..., S, H, E] and value [..., S, H, F] give [..., T, H, F] (cuDNN's
    BSHD layout), and the heads of the scores, the bias and the dropout
    positions are those of the permuted [..., H, T, E] operands
    (attention-layout reads the permutes around the op this way).

    The scores are never stored: `stats` [..., T, 2] (f32; [..., H, T, 2]
    with `bshd`) keeps each row's maximum and the reciprocal of its sum of
    exponentials, from which the backward (nn.attention_grad) recomputes
    the probabilities bit for bit.
    In f32 every step rounds where the unfused ops would; with bf16 or f16
    operands (mixed precision) the scores, probabilities and products are
    float32 and only the result (and the gradients) are rounded, once.
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
                       NN_FloatTensor:$value, Optional<NN_FloatTensor>:$bias,
                       F64Attr:$scale, UnitAttr:$scale_divides, UnitAttr:$causal,
                       DefaultValuedAttr<F64Attr, "0.0">:$ratio,
                       DefaultValuedAttr<I64Attr, "0">:$rng_stream, UnitAttr:$bshd);
  let results = (outs NN_FloatTensor:$result, NN_FloatTensor:$stats);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`,` $bias^)? attr-dict `:` type($query) `,` type($key) `,`
      type($value) (`,` type($bias)^)? `->` type($result) `,` type($stats)
  }];
}

//===----------------------------------------------------------------------===//
// GEMM epilogues (made by matmul-epilogue on the planned step)
//===----------------------------------------------------------------------===//

def NN_MatmulEpilogueOp : NN_Op<"matmul_epilogue", [AttrSizedOperandSegments,
    AllElementTypesMatch<["lhs", "rhs", "result"]>], ["getFlops"]> {
  let summary = "matmul whose bias, scale and addend are applied before it is stored";
  let description = [{
    `result = (op(lhs) op(rhs) + bias) * scale + addend`, nn.matmul's
    product (with its transposes and broadcast batch dimensions) followed
    by the optional `bias` [N], broadcast over the rows, the optional
    elementwise `scale` and the optional `addend`, both of the result's
    type (the scale: a GELU's derivative, which makes the product the
    GELU's input gradient; the addend: a residual, or a gradient the
    product is summed into). At least one is present. The result is formed
    from the float32 accumulator and rounded to the result type once: in
    f32 that equals nn.matmul then the elementwise ops up to the
    accumulator's summation order; in bf16 and f16 the unfused chain
    rounds after each op. The optional second result `column_sum` [N] is
    the stored result summed over all its rows (a bias gradient), in
    float32 and rounded once, in nn.reduce_sum's order (blocks of 256 rows,
    each summed row by row, then the blocks' sums in order): the same bits
    as nn.reduce_sum of the result, read while the rows are still in cache.
    matmul-epilogue makes it after autodiff, so it has no gradient rule.
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs,
                       Optional<NN_FloatTensor>:$bias, Optional<NN_FloatTensor>:$scale,
                       Optional<NN_FloatTensor>:$addend,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs NN_FloatTensor:$result, Optional<NN_FloatTensor>:$column_sum);
  let assemblyFormat = [{
    $lhs `,` $rhs (`bias` $bias^)? (`scale` $scale^)? (`addend` $addend^)? attr-dict `:`
      type($lhs) `,` type($rhs) (`bias` type($bias)^)? (`scale` type($scale)^)?
      (`addend` type($addend)^)? `->` type($result) (`column_sum` type($column_sum)^)?
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Gradient ops (made by autodiff; fused kernels for the backward pass)
//===----------------------------------------------------------------------===//

def NN_LayerNormGradOp : NN_Op<"layer_norm_grad", [
    AllTypesMatch<["grad", "input", "input_grad"]>,
    AllTypesMatch<["scale", "scale_grad", "bias_grad"]>]> {
  let summary = "gradients of layer_norm w.r.t. input, scale and bias";
  let description = [{
    Recomputes the row statistics from `input` (no saved mean/rstd, so the
    forward keeps nothing extra alive).
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$input,
                       NN_FloatTensor:$scale,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs NN_FloatTensor:$input_grad, NN_FloatTensor:$scale_grad,
                      NN_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $scale attr-dict `:` type($input) `,` type($scale)
  }];
}

class NN_SoftmaxGradLikeOp<string mnemonic, string of>
    : NN_Op<mnemonic, [SameOperandsAndResultType]> {
  let summary = "input gradient of " # of # " from its output and output gradient";
  let arguments = (ins NN_FloatTensor:$output, NN_FloatTensor:$grad,
                       DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs NN_FloatTensor:$input_grad);
  let assemblyFormat = "$output `,` $grad attr-dict `:` type($output)";
}
def NN_SoftmaxGradOp : NN_SoftmaxGradLikeOp<"softmax_grad", "softmax">;
def NN_LogSoftmaxGradOp : NN_SoftmaxGradLikeOp<"log_softmax_grad", "log_softmax">;

class NN_LossGradOp<string mnemonic, string of>
    : NN_Op<mnemonic, [AllTypesMatch<["input", "input_grad"]>]> {
  let summary = "input gradient of " # of;
  let description = [{
    `grad` is the gradient of the loss result (a scalar for sum and mean
    reductions). Same `reduction` and `ignore_index` as the forward op.
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_IntTensor:$labels,
      NN_FloatTensor:$grad,
      DefaultValuedAttr<NN_ReductionAttr, "::dsc::nn::Reduction::mean">:$reduction,
      OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs NN_FloatTensor:$input_grad);
  let assemblyFormat = [{
    $input `,` $labels `,` $grad attr-dict `:` type($input) `,` type($labels)
      `,` type($grad)
  }];
}
def NN_CrossEntropyGradOp : NN_LossGradOp<"cross_entropy_grad", "cross_entropy">;

def NN_VocabCeSumsGradOp : NN_Op<"vocab_ce_sums_grad", [
    AllTypesMatch<["input", "input_grad"]>]> {
  let summary = "input gradient of vocab_ce_sums";
  let description = [{
    input_grad = grad[0, n] * exp(input - max) plus grad[1, n] at the
    label's column where this part holds it.
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_IntTensor:$labels, NN_FloatTensor:$max,
                       NN_FloatTensor:$grad, I64Attr:$parts);
  let results = (outs NN_FloatTensor:$input_grad);
  let assemblyFormat = [{
    $input `,` $labels `,` $max `,` $grad attr-dict `:` type($input) `,` type($labels) `,`
      type($max) `,` type($grad)
  }];
}

def NN_VocabCeLossGradOp : NN_Op<"vocab_ce_loss_grad", [
    AllTypesMatch<["sums", "sums_grad"]>]> {
  let summary = "sums gradient of vocab_ce_loss";
  let arguments = (ins NN_FloatTensor:$sums, NN_IntTensor:$labels, NN_FloatTensor:$grad,
      I64Attr:$classes,
      DefaultValuedAttr<NN_ReductionAttr, "::dsc::nn::Reduction::mean">:$reduction,
      OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs NN_FloatTensor:$sums_grad);
  let assemblyFormat = [{
    $sums `,` $labels `,` $grad attr-dict `:` type($sums) `,` type($labels) `,` type($grad)
  }];
}
def NN_NllLossGradOp : NN_LossGradOp<"nll_loss_grad", "nll_loss">;

def NN_GeluGradOp : NN_Op<"gelu_grad", [SameOperandsAndResultType]> {
  let summary = "input gradient of gelu from its input and output gradient";
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$grad,
      DefaultValuedAttr<NN_GeluApproximationAttr,
                        "::dsc::nn::GeluApproximation::none">:$approximation);
  let results = (outs NN_FloatTensor:$input_grad);
  let assemblyFormat = [{
    $input `,` $grad (`approximation` `=` $approximation^)? attr-dict `:` type($input)
  }];
}

def NN_GatherGradOp : NN_Op<"gather_grad", [
    AllElementTypesMatch<["grad", "data_grad"]>]> {
  let summary = "scatter-add of gather's output gradient into a zero `data` gradient";
  let description = [{
    The embedding backward: rows gathered several times receive the sum of
    their gradients. The result type is the gathered tensor's type.
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_IntTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs NN_FloatTensor:$data_grad);
  let assemblyFormat = [{
    $grad `,` $indices attr-dict `:` type($grad) `,` type($indices) `->` type($data_grad)
  }];
  let hasVerifier = 1;
}

def NN_SliceGradOp : NN_Op<"slice_grad", [
    AllElementTypesMatch<["grad", "input_grad"]>]> {
  let summary = "the input gradient of slice: zeros with `grad` at the sliced positions";
  let arguments = (ins NN_FloatTensor:$grad, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$limit, DenseI64ArrayAttr:$stride);
  let results = (outs NN_FloatTensor:$input_grad);
  let assemblyFormat = "$grad attr-dict `:` type($grad) `->` type($input_grad)";
  let hasVerifier = 1;
}

def NN_AttentionGradOp : NN_Op<"attention_grad", [
    AllTypesMatch<["query", "query_grad"]>, AllTypesMatch<["key", "key_grad"]>,
    AllTypesMatch<["value", "value_grad"]>], ["getFlops"]> {
  let summary = "gradients of nn.attention w.r.t. query, key and value";
  let description = [{
    Recomputes the scores, probabilities and dropout bits block by block
    from the operands and the forward's `stats`, with the forward's
    attributes; `grad` is the result's gradient, and the gradients have
    the operands' layout (`bshd` as the forward).
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$query, NN_FloatTensor:$key,
                       NN_FloatTensor:$value, NN_FloatTensor:$stats,
                       Optional<NN_FloatTensor>:$bias,
                       F64Attr:$scale, UnitAttr:$scale_divides, UnitAttr:$causal,
                       DefaultValuedAttr<F64Attr, "0.0">:$ratio,
                       DefaultValuedAttr<I64Attr, "0">:$rng_stream, UnitAttr:$bshd);
  let results = (outs NN_FloatTensor:$query_grad, NN_FloatTensor:$key_grad,
                      NN_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $grad `,` $query `,` $key `,` $value `,` $stats (`,` $bias^)? attr-dict `:` type($grad) `,`
      type($query) `,` type($key) `,` type($value) `,` type($stats) (`,` type($bias)^)?
  }];
  let hasVerifier = 1;
}

def NN_DropoutGradOp : NN_Op<"dropout_grad", [
    AllTypesMatch<["grad", "input_grad"]>, AllShapesMatch<["grad", "mask"]>]> {
  let summary = "input gradient of dropout: grad * mask / (1 - ratio)";
  let arguments = (ins NN_FloatTensor:$grad, NN_BoolTensor:$mask, F64Attr:$ratio);
  let results = (outs NN_FloatTensor:$input_grad);
  let assemblyFormat = "$grad `,` $mask attr-dict `:` type($grad) `,` type($mask)";
}

#endif // DSC_NN_OPS
