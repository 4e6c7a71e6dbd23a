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
          NN_GradientOpInterface,
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

#endif // DSC_NN_OPS
