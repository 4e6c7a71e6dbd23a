//===- DistOps.td - ordered communication ------------------*- tablegen -*-===//
#ifndef DSC_DIST_OPS
#define DSC_DIST_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "dialects/nn/NNInterfaces.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let cppNamespace = "::dsc::dist";
  let summary = "Ordered collectives and point-to-point communication";
  let description = [{
    Every op reads and writes the communication resource, so no rewrite may
    drop, merge or reorder two of them: all ranks must issue the same
    collectives in the same order or the job hangs. Each op names its
    communicator group: an axis of the dp x pp x tp grid and its size.
    Variadic operands are the bucketed (fused) form: one call moves them all.
  }];
  let useDefaultAttributePrinterParser = 1;
  // The layout the passes record for one another and the plan target,
  // verified by the dialect (DistDialect::verifyOperationAttribute)
  // whichever pass sets it; other dist.* names are left to their passes.
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Module attributes (i64): data-parallel ranks (>= 1), the ZeRO stage
    /// (0-3), pipeline stages (>= 1), micro-batches per step (>= 1),
    /// tensor-parallel ranks (>= 1; on an op, `dist.tp` is
    /// tensor-parallel's mark of its split, a string).
    static constexpr ::llvm::StringLiteral kDp = "dist.dp";
    static constexpr ::llvm::StringLiteral kZeroStage = "dist.zero_stage";
    static constexpr ::llvm::StringLiteral kPp = "dist.pp";
    static constexpr ::llvm::StringLiteral kMicroBatches = "dist.micro_batches";
    static constexpr ::llvm::StringLiteral kTp = "dist.tp";
    /// Function attribute (i64 >= 0): the pipeline stage a function is.
    static constexpr ::llvm::StringLiteral kStage = "dist.stage";
    /// Module attribute: the pipeline schedule, "1f1b" or "zb-h1".
    static constexpr ::llvm::StringLiteral kSchedule = "dist.schedule";
  }];
}

def Dist_Axis : I32EnumAttr<"Axis", "axis of the device grid", [
    I32EnumAttrCase<"dp", 0>, I32EnumAttrCase<"pp", 1>,
    I32EnumAttrCase<"tp", 2>, I32EnumAttrCase<"world", 3>]> {
  let cppNamespace = "::dsc::dist";
  let genSpecializedAttr = 0;
}
def Dist_AxisAttr : EnumAttr<Dist_Dialect, Dist_Axis, "axis">;

def Dist_ReduceKind : I32EnumAttr<"ReduceKind", "reduction of a collective", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"avg", 1>,
    I32EnumAttrCase<"max", 2>, I32EnumAttrCase<"min", 3>]> {
  let cppNamespace = "::dsc::dist";
  let genSpecializedAttr = 0;
}
def Dist_ReduceKindAttr : EnumAttr<Dist_Dialect, Dist_ReduceKind, "reduce">;

def Dist_GroupAttr : AttrDef<Dist_Dialect, "Group"> {
  let mnemonic = "group";
  let summary = "a communicator: one axis of the device grid and its size";
  let parameters = (ins EnumParameter<Dist_Axis>:$axis, "int64_t":$size);
  let assemblyFormat = "`<` $axis `,` $size `>`";
  let genVerifyDecl = 1;
}

def Dist_CommResource : Resource<"::dsc::dist::CommResource">;

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, !listconcat(traits, [
        MemoryEffects<[MemRead<Dist_CommResource>, MemWrite<Dist_CommResource>]>])>;

def Dist_Tensor : StaticShapeTensorOf<[AnyType]>;

def Dist_AllReduceOp : Dist_Op<"all_reduce"> {
  let summary = "every rank of the group gets the reduction of all ranks' values";
  let arguments = (ins Variadic<Dist_Tensor>:$inputs, Dist_GroupAttr:$group,
                       Dist_ReduceKindAttr:$reduce);
  let results = (outs Variadic<Dist_Tensor>:$results);
  let assemblyFormat = [{
    $reduce $inputs attr-dict `:` type($inputs) `->` type($results)
  }];
  let hasVerifier = 1;
}

def Dist_ReduceScatterOp : Dist_Op<"reduce_scatter"> {
  let summary = "reduce, then rank r keeps the r-th of `size` equal chunks of dimension 0";
  let description = [{
    A 1-D input of n elements is zero-padded to `size` chunks of
    ceil(n / size): ZeRO shards a flattened tensor of any length.
  }];
  let arguments = (ins Variadic<Dist_Tensor>:$inputs, Dist_GroupAttr:$group,
                       Dist_ReduceKindAttr:$reduce);
  let results = (outs Variadic<Dist_Tensor>:$results);
  let assemblyFormat = [{
    $reduce $inputs attr-dict `:` type($inputs) `->` type($results)
  }];
  let hasVerifier = 1;
}

def Dist_AllGatherOp : Dist_Op<"all_gather"> {
  let summary = "concatenate every rank's tensor along dimension 0, in rank order";
  let description = [{
    For 1-D tensors the result may have any length n with
    ceil(n / size) = the chunk length: the padding that a reduce_scatter or
    chunk of n elements added is dropped.
  }];
  let arguments = (ins Variadic<Dist_Tensor>:$inputs, Dist_GroupAttr:$group);
  let results = (outs Variadic<Dist_Tensor>:$results);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs) `->` type($results)";
  let hasVerifier = 1;
}

def Dist_AllToAllOp : Dist_Op<"all_to_all"> {
  let summary = "rank r gets chunk r of every rank's tensor, in rank order";
  let description = [{
    Dimension 0 of each tensor is `size` equal chunks: chunk r goes to rank
    r, and chunk q of the result is what rank q sent. The result has the
    input's type. The 1-bit optimizers' compressed all-reduce sends each
    worker's compressed chunk to the rank that averages it this way.
  }];
  let arguments = (ins Variadic<Dist_Tensor>:$inputs, Dist_GroupAttr:$group);
  let results = (outs Variadic<Dist_Tensor>:$results);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs) `->` type($results)";
  let hasVerifier = 1;
}

def Dist_BroadcastOp : Dist_Op<"broadcast", [AllTypesMatch<["input", "result"]>]> {
  let summary = "every rank gets the value of rank `root` of the group";
  let arguments = (ins Dist_Tensor:$input, Dist_GroupAttr:$group, I64Attr:$root);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Dist_SendOp : Dist_Op<"send", [AllTypesMatch<["input", "handle"]>]> {
  let summary = "send to the rank `peer` steps away along the group's axis";
  let description = [{
    `peer` is relative (+1 = next pipeline stage), so one program serves
    every rank of a role. A send pairs with the recv of the same `tag`
    on the peer; several messages with one tag arrive in order. The send is
    non-blocking: its result is a handle (a view of the input) that
    `dist.wait` completes; until then the input must stay intact.
  }];
  let arguments = (ins Dist_Tensor:$input, Dist_GroupAttr:$group,
                       I64Attr:$peer, I64Attr:$tag);
  let results = (outs Dist_Tensor:$handle);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Dist_RecvOp : Dist_Op<"recv"> {
  let summary = "receive from the rank `peer` steps away along the group's axis";
  let description = [{
    Non-blocking: the result is readable after `dist.wait` on it.
  }];
  let arguments = (ins Dist_GroupAttr:$group, I64Attr:$peer, I64Attr:$tag);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Dist_WaitOp : Dist_Op<"wait", [DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "completes a collective, send or recv: its results are ready to read";
  let description = [{
    Collectives are non-blocking: `dist.all_reduce` and its kin start the
    transfer, `dist.wait` on all of their results completes it and returns
    them, ready. Until the wait, the collective's inputs must stay intact and
    its results unread: the memory plan keeps the inputs alive up to the wait
    and the wait's results share the collective's buffers. Passes place the
    wait (overlap moves it as late as the uses allow).
  }];
  let arguments = (ins Variadic<Dist_Tensor>:$inputs);
  let results = (outs Variadic<Dist_Tensor>:$results);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The collective whose results this completes.
    ::mlir::Operation *getCollective();
  }];
}

def Dist_ChunkOp : Dist_Op<"chunk"> {
  let summary = "this rank's chunk of a flat tensor (a local copy)";
  let description = [{
    Rank r of the group gets elements [r * c, (r + 1) * c) of the 1-D input
    zero-padded to `size` chunks of c = ceil(n / size): the part of a
    parameter a ZeRO rank updates. No data
    moves between ranks; the op is in `dist` because its result depends on
    the rank.
  }];
  let arguments = (ins Dist_Tensor:$input, Dist_GroupAttr:$group);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===--- tensor parallelism: Megatron's f and g ---------------------------===//

def Dist_TpCopyOp : Dist_Op<"tp_copy", [AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<NN_GradientOpInterface, ["buildGradients"]>]> {
  let summary = "enter a tensor-parallel region: identity forward, all-reduce backward";
  let description = [{
    Megatron's f (copy_to_tensor_model_parallel_region): the input is the
    same on every rank of the tensor-parallel group and every rank computes
    its part of the region from it, so the input's gradient is the sum of
    the ranks' gradients. Its gradient rule emits `dist.tp_reduce`.
    Lowered after autodiff (tensor-parallel-lower): the op disappears.
  }];
  let arguments = (ins Dist_Tensor:$input, Dist_GroupAttr:$group);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Dist_TpReduceOp : Dist_Op<"tp_reduce", [AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<NN_GradientOpInterface, ["buildGradients"]>]> {
  let summary = "leave a tensor-parallel region: all-reduce forward, identity backward";
  let description = [{
    Megatron's g (reduce_from_tensor_model_parallel_region): each rank holds
    a partial sum (a row-parallel GEMM's), every rank gets the total. The
    result is the same on every rank, so its gradient passes through
    unchanged; the gradient rule emits `dist.tp_copy`. Lowered after
    autodiff (tensor-parallel-lower) to dist.all_reduce sum + dist.wait.
  }];
  let arguments = (ins Dist_Tensor:$input, Dist_GroupAttr:$group);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Dist_TpMaxOp : Dist_Op<"tp_max", [AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<NN_GradientOpInterface, ["buildGradients"]>]> {
  let summary = "the elementwise maximum over the tensor-parallel group";
  let description = [{
    The row maxima of a vocabulary-parallel cross-entropy: each rank has its
    part's, every rank gets the whole vocabulary's. They only shift the
    exponent, so nothing depends on them to first order: no gradient.
    Lowered after autodiff (tensor-parallel-lower) to dist.all_reduce max +
    dist.wait.
  }];
  let arguments = (ins Dist_Tensor:$input, Dist_GroupAttr:$group);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

//===--- sequence parallelism (Korthikanti et al. 2022) -------------------===//

def Dist_SpGatherOp : Dist_Op<"sp_gather", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface, ["buildGradients"]>]> {
  let summary = "leave a token-split region: all-gather forward";
  let description = [{
    The input is this rank's contiguous part of the tokens (dimension `dim`
    cut into `size` parts, every dimension before it of size 1): the result
    is the whole tensor, all parts in rank order. Backward, with `reduce`
    (entering a tensor-parallel region: Megatron's f under sequence
    parallelism, each rank's gradient partial) the gradient is
    reduce-scattered; without it (a consumer every rank computes alike)
    each rank keeps its part. The gradient rule emits `dist.sp_scatter`
    with the same `reduce`.
  }];
  let arguments = (ins Dist_Tensor:$input, Dist_GroupAttr:$group, I64Attr:$dim,
                       UnitAttr:$reduce);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Dist_SpScatterOp : Dist_Op<"sp_scatter", [
    DeclareOpInterfaceMethods<NN_GradientOpInterface, ["buildGradients"]>]> {
  let summary = "enter a token-split region: reduce-scatter or take this rank's part";
  let description = [{
    The result is this rank's contiguous part of dimension `dim` (every
    dimension before it of size 1). With `reduce` the inputs are partial
    sums (a row-parallel GEMM's: Megatron's g under sequence parallelism)
    and are reduce-scattered; without it the input is the same on every
    rank and the part is a local copy. The gradient rule emits
    `dist.sp_gather` with the same `reduce`: backward, the parts are
    all-gathered.
  }];
  let arguments = (ins Dist_Tensor:$input, Dist_GroupAttr:$group, I64Attr:$dim,
                       UnitAttr:$reduce);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

#endif // DSC_DIST_OPS
