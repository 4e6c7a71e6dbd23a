//===- Passes.td - every dsc pass, by flag ------------------*- tablegen -*-===//
#ifndef DSC_PASSES
#define DSC_PASSES

include "mlir/Pass/PassBase.td"

def NNCostReport : Pass<"nn-cost-report", "mlir::ModuleOp"> {
  let summary = "Print the flops and bytes of every function, by op kind";
  let description = [{
    Sums the CostOpInterface of every op per function and prints a table
    (op, count, GFLOP, MB read, MB written) and the totals. It changes
    nothing; `dsc --explain` prints the same table.
  }];
  let statistics = [
    Statistic<"numCostedOps", "costed-ops", "Ops with a cost model">,
  ];
}

def NNFusion : Pass<"nn-fusion", "mlir::func::FuncOp"> {
  let summary = "Fuse exported op chains into the kernels dsrt has";
  let description = [{
    Run on the forward graph before autodiff, so the backward pass uses the
    fused ops' gradient rules too:
      * a transpose of the two innermost dimensions feeding nn.matmul
        becomes the matmul's transpose_lhs / transpose_rhs (a linear
        layer's weight is no longer copied every step);
      * x * 0.5 * (1 + erf(x / sqrt(2))) (torch's exact GELU as ONNX
        exports it, in any operand order) becomes nn.gelu, and
        0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) becomes
        nn.gelu approximation = tanh;
      * with fuse = attention or all, scaled dot-product attention as the
        exporters write it, matmul(q, k^T) -> mul or div by a scalar ->
        a causal mask (select with a constant lower triangle, either
        polarity, or an additive 0 / -inf constant) or an additive bias
        that no parameter reaches -> softmax over the keys -> dropout
        (optional) -> matmul with v, each step used only by the next,
        becomes nn.attention (the scores are never stored). A bias that a
        parameter reaches (T5's), a mask that is not the causal triangle,
        or an intermediate with another use (need_weights) is left
        unfused.
  }];
  let options = [
    Option<"fuse", "fuse", "::dsc::FuseKind", "::dsc::FuseKind::None",
           "what to fuse beyond the layout folds", "DSC_FUSE_KIND_VALUES">,
  ];
  let statistics = [
    Statistic<"numTransposesFolded", "transposes-folded", "Transposes folded into matmuls">,
    Statistic<"numGelus", "gelus", "GELU chains fused">,
    Statistic<"numAttention", "attention", "Attention chains fused into nn.attention">,
  ];
}

def FuseOptimizer : Pass<"fuse-optimizer", "mlir::func::FuncOp"> {
  let summary = "One Adam update over many parameters, with clipping and gradient casts";
  let description = [{
    Runs on the finished step, after every pass that adds, moves or
    splits updates (optimizer, ZeRO, compression, tensor-parallel
    lowering, offload) and before memory-plan, with fuse = all. Each run of
    train.adam (train.lamb) ops in a block with the same learning rate and
    step values, the same attributes and gradients from the same
    clip_grad_norm (or none) becomes one train.fused_adam
    (train.fused_lamb), and LAMB's train.lamb_stats with the same rates
    and clip one train.fused_lamb_stats where everything that reads their
    sums (the update, or the all-reduce that completes a sharded or split
    tensor's) comes after the last of them. A
    clip_grad_norm whose every clipped gradient is read only as the
    gradient of such ops becomes train.clip_coef (the norm and the
    factor), and the updates multiply each gradient by the factor as they
    read it instead of reading a clipped copy; a lone update is fused for
    that too. An nn.cast from bf16/fp16 to f32 of a gradient that only the
    clip and the updates read is read through: they widen the narrow
    gradient themselves. With one micro-batch (train.accumulate 1, whose
    sum is the yielded value) a gradient widened in the body only to be
    yielded, and read after only by the clip and the updates, is yielded
    narrow and widened after the accumulate, so that it is read through
    too. With several micro-batches a gradient widened in the body only
    to be yielded is yielded narrow for the f32 sum: the accumulate widens
    it as it adds it. The per-element arithmetic is the unfused ops', so
    the step is bitwise the unfused one. A run steps over pure ops that
    read none of its results (ZeRO's dist.chunk of the next parameter's
    shard) and its fused op goes after them, at its last update; other
    ops between updates (offload's tier copies, a gather of an updated
    parameter) end it. Last, a parameter whose bf16 / fp16 copy the step
    casts at its top and whose new value a fused update in that block
    returns keeps the copy across steps: a `train.param_copy` argument the
    forward reads instead of the cast and the update writes in the same
    pass as the parameter (`copies`), returned as a `train.param_copy`
    result; the runtime fills it from the parameter whenever it loads one.
  }];
  let statistics = [
    Statistic<"numFused", "fused", "train.fused_adam, fused_lamb and fused_lamb_stats ops made">,
    Statistic<"numUpdates", "updates", "train.adam and train.lamb ops fused">,
    Statistic<"numClips", "clips", "clip_grad_norm ops folded into clip_coef">,
    Statistic<"numCasts", "casts", "gradient widenings read through">,
    Statistic<"numYields", "yields", "gradients an accumulate yields narrow">,
    Statistic<"numCopies", "copies", "bf16 / fp16 working copies the updates write">,
  ];
}

def MatmulEpilogue : Pass<"matmul-epilogue", "mlir::func::FuncOp"> {
  let summary = "Add a GEMM's bias and residual before its result is stored";
  let description = [{
    Runs on the differentiated step (after tensor parallelism, mixed
    precision and autodiff, before recompute, so that every recompute mode
    clones or keeps the same ops), with fuse = all. An nn.add of an
    nn.matmul whose only use it is, in the same block and the same phase
    (train.backward), becomes nn.matmul_epilogue:
      * with a vector of the matmul's N columns and its element type (a
        linear layer's bias): the epilogue's bias;
      * with a value of the matmul's type (a residual in the forward pass,
        a gradient summed with the product's in the backward pass): its
        addend, also after a bias was folded.
    The fused op takes the matmul's place, so no operand lives longer than
    it did: a bias or addend made after the matmul (a gradient summed with
    the other branch's, computed later) is left as an add. A product with
    another use (it is stored anyway), a sum over another broadcast, or a
    matmul whose tensor-parallel all-reduce comes before the bias (a
    row-parallel layer) is left alone. The unfused ops' gradients
    were built before this pass, so the epilogue has no gradient rule.
    Also the casts around a mixed-precision head's loss: a cast of
    bf16 / fp16 logits to f32 that only nn.cross_entropy and
    nn.cross_entropy_grad read, each gradient read only by a cast back,
    goes: the loss reads the 16-bit logits (the widening is exact) and the
    gradient is written in their type (computed in float, rounded once, as
    the cast back rounded it), so the step is bitwise the same.
    And the GELU's gradient: nn.gelu_grad(h, dy), where h is read only by
    one nn.gelu and this gradient and dy is the only use of a GEMM in the
    same block and phase, becomes that GEMM with the scale epilogue, the
    GELU nn.gelu_with_derivative: the backward keeps gelu'(h) instead of h
    and multiplies it into the product. In f32 each element is the same
    product of the same two factors, the GEMM's sum up to its order; in
    bf16 / fp16 the product is no longer rounded before the multiply, the
    derivative is (stored in the 16-bit type).
    Last, the bias gradient: nn.reduce_sum over every axis but the last of
    a GEMM's result (an nn.matmul or an epilogue, lhs not transposed, same
    block and phase, same element type) becomes that GEMM's column_sum
    result. The GEMM sums its rows as it stores them, in the reduction's
    order, so the sum has the same bits and the pass over the product goes.
  }];
  let statistics = [
    Statistic<"numBiases", "biases", "Bias adds folded into a GEMM">,
    Statistic<"numGeluGrads", "gelu-grads", "GELU gradients multiplied into their GEMM">,
    Statistic<"numAddends", "addends", "Residual or gradient adds folded into a GEMM">,
    Statistic<"numLossCasts", "loss-casts", "Widenings of 16-bit logits the loss reads through">,
    Statistic<"numColumnSums", "column-sums", "Bias gradients summed by their GEMM">,
  ];
}

def AttentionLayout : Pass<"attention-layout", "mlir::func::FuncOp"> {
  let summary = "Read attention's heads where the projections put them";
  let description = [{
    Runs on the differentiated step (after autodiff, with fuse = attention
    or all). The exporters permute each projection [..., T, H, D] to
    [..., H, T, D] before attention and the result back after it; the
    backward permutes the result's gradient in and the three gradients
    out. An nn.attention whose query, key and value are such permutes
    (a transpose swapping dimensions r-3 and r-2) and whose result is read
    only through the permute back becomes nn.attention with `bshd`,
    reading the unpermuted values; likewise an nn.attention_grad whose
    four operands are permutes and whose gradients are read only through
    permutes back. The stats are head-major in both layouts, so the
    forward and each gradient op are rewritten independently. The
    permutes no longer read are erased. A tensor-parallel split of the
    heads (dist.tp_split on dimension r-3) moves to dimension r-2. The
    arithmetic is unchanged: the kernels gather each head's rows as the
    permute laid them out.
  }];
  let statistics = [
    Statistic<"numAttention", "attention", "nn.attention ops made bshd">,
    Statistic<"numGrads", "grads", "nn.attention_grad ops made bshd">,
    Statistic<"numPermutes", "permutes", "Head permutes erased">,
  ];
}

def MixedPrecision : Pass<"mixed-precision", "mlir::ModuleOp"> {
  let summary = "Compute in bf16 (or fp16) over fp32 master weights";
  let description = [{
    On the forward graph, before autodiff and pipeline-split. Parameters
    stay fp32; each op that computes in the low precision reads a
    low-precision copy (one nn.cast per parameter, at the top; the
    gradient-accumulation pass hoists it out of the micro-batch body).
    Matmuls, elementwise ops, activations, dropout, softmax and layer_norm
    compute in `dtype` (softmax and layer_norm with fp32 statistics,
    layer_norm's scale and bias fp32); the losses, log_softmax,
    exp/log/pow/sqrt, the reductions and the embedding gather compute in
    fp32;
    layout ops, select and cmp follow their inputs. Autodiff then gives
    fp32 gradients of the parameters (the gradient of a cast is a cast
    back). The module is marked `train.precision`. See MixedPrecision.cpp
    for the op table and how it compares with PyTorch's autocast.
  }];
  let options = [
    Option<"dtype", "dtype", "::dsc::FloatKind", "::dsc::FloatKind::BF16",
           "the low precision: bf16 or fp16", "DSC_LOW_FLOAT_KIND_VALUES">,
  ];
  let statistics = [
    Statistic<"numCasts", "casts", "Casts inserted (parameter copies and conversions)">,
    Statistic<"numLowered", "lowered-ops", "Ops computing in the low precision">,
  ];
}

def Autodiff : Pass<"autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of the loss w.r.t. every parameter";
  let description = [{
    For each function with a `train.loss` result, walks its ops backwards
    from the loss (seed 1.0) and emits each op's gradient rule
    (GradientOpInterface::buildGradients). Gradients reaching a value from
    several uses are summed, so a parameter used twice (a tied embedding
    and LM head) gets the sum of both contributions. Operands that are not
    differentiable (indices, masks, integer inputs) receive nothing. The
    function gains one result per `train.param` argument, marked
    `train.grad = "name"`; a parameter the loss does not depend on is an
    error. Dead forward values are removed afterwards.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numGradientOps", "gradient-ops", "Ops emitted for the backward pass">,
  ];
}

def TensorParallel : Pass<"tensor-parallel", "mlir::ModuleOp"> {
  let summary = "Megatron tensor parallelism: split GEMM pairs over the tp group";
  let description = [{
    On the forward graph, before mixed-precision and autodiff. A GEMM with a
    parameter weight and a whole input becomes column parallel (its input
    through dist.tp_copy, Megatron's f); the split follows elementwise ops,
    transposes, reshapes, block-aligned slices (a fused QKV projection's
    q, k, v), attention's batched GEMMs (by heads), softmax and layer norm
    over other dimensions, to a GEMM that contracts it with a parameter
    weight: row parallel, followed by dist.tp_reduce (Megatron's g). A split
    that reaches anything else rolls back the GEMMs it came from, which
    stay whole with `dist.tp_reason`. The result is the per-rank program:
    split parameters typed by their local part with `dist.tp_split = [dim,
    blocks, tp]`. See TensorParallel.cpp.
  }];
  let dependentDialects = ["::dsc::dist::DistDialect"];
  let options = [
    Option<"tp", "tp", "int64_t", "1", "ranks of the tensor-parallel group">,
  ];
  let statistics = [
    Statistic<"numColumn", "column-gemms", "GEMMs split column parallel">,
    Statistic<"numRow", "row-gemms", "GEMMs split row parallel">,
    Statistic<"numVocabHeads", "vocab-heads", "LM heads and cross-entropies split over the vocabulary">,
  ];
}

def SequenceParallel : Pass<"sequence-parallel", "mlir::ModuleOp"> {
  let summary = "Sequence parallelism: token-split layer norm / dropout / residual regions";
  let description = [{
    Right after tensor-parallel, on the forward graph (Korthikanti et al.
    2022): the token-wise ops outside the tensor-parallel regions compute on
    this rank's part of the tokens. g (dist.tp_reduce) becomes
    dist.sp_scatter {reduce} (reduce-scatter forward, all-gather backward),
    f (dist.tp_copy) dist.sp_gather {reduce} (all-gather forward,
    reduce-scatter backward); values entering the region go through
    dist.sp_scatter (a local part), values leaving it through dist.sp_gather.
    Parameters the region reads are marked `dist.sp_partial` (their
    gradients are summed over the group by tensor-parallel-lower); dropout
    in the region `dist.tp_split`. See SequenceParallel.cpp.
  }];
  let dependentDialects = ["::dsc::dist::DistDialect"];
  let statistics = [
    Statistic<"numSplit", "token-split-ops", "ops computing on this rank's tokens">,
  ];
}

def TensorParallelLower : Pass<"tensor-parallel-lower", "mlir::ModuleOp"> {
  let summary = "Lower Megatron's f and g to tp-group collectives; the split gradient norm";
  let description = [{
    After autodiff, the optimizer and the data-parallel passes (the
    gradients are dp-reduced, their buckets fused): dist.tp_copy disappears,
    dist.tp_reduce becomes dist.all_reduce sum + dist.wait on the
    tensor-parallel group, dist.sp_gather / dist.sp_scatter become
    all-gathers, reduce-scatters or local chunks of the flattened tensor,
    the gradients of `dist.sp_partial` parameters are all-reduced (sum) on
    the group, and train.clip_grad_norm's sum of squares counts the split
    parameters' gradients summed over the group plus the whole parameters'
    once (every rank holds the same).
  }];
  let dependentDialects = ["::dsc::dist::DistDialect", "::dsc::nn::NNDialect"];
}

def Recompute : Pass<"recompute", "mlir::ModuleOp"> {
  let summary = "Activation checkpointing: recompute forward activations in the backward pass";
  let description = [{
    After autodiff, before gradient-accumulation (or, on pipeline stages,
    pipeline-schedule). Keeps a set of forward values chosen by `mode` and
    clones the forward ops that produce every other activation the backward
    pass reads right before its first backward use (marked
    `train.recomputed = <layer>`, and `train.backward` on a pipeline
    stage), so the originals die after the forward pass. `layers`: keep
    each layer's input (the cut points pipeline-split uses, passes/Layers.h),
    every `interval`-th; `selective`: keep the layer inputs and the outputs
    of the GEMMs with a weight, recompute attention scores, softmax,
    dropout, GELU, layer norm and elementwise ops. Values of arguments and
    constants only (parameters' copies, masks) and the last layer are
    always kept. Clones compute the same bits (dropout redraws its mask
    from its counter-based key). The module gets `train.recompute = {mode,
    ops, flops}`. See Recompute.cpp.
  }];
  let options = [
    Option<"mode", "mode", "::dsc::RecomputeMode", "::dsc::RecomputeMode::Layers",
           "none, layers or selective", "DSC_RECOMPUTE_MODE_VALUES">,
    Option<"interval", "interval", "int64_t", "1",
           "layers: keep the input of every interval-th layer">,
    Option<"checkpoints", "checkpoints", "int64_t", "0",
           "layers: keep this many layer inputs, evenly spread (DeepSpeed's "
           "number_checkpoints; 0: use interval)">,
    Option<"limit", "limit", "int64_t", "0",
           "layers: recompute only the first `limit` layers (whose activations live "
           "longest); 0: all (dsc --recompute auto searches it)">,
  ];
  let statistics = [
    Statistic<"numRecomputed", "recomputed-ops", "Forward ops cloned into the backward pass">,
  ];
}

def GradientAccumulation : Pass<"gradient-accumulation", "mlir::ModuleOp"> {
  let summary = "Run forward and backward once per micro-batch and sum the gradients";
  let description = [{
    Wraps the body of a differentiated step (loss and `train.grad` results)
    in `train.accumulate steps`, so the runtime runs it once per micro-batch
    and adds each micro-batch's gradients in place into one buffer per
    parameter. Afterwards the sums are scaled by 1/steps: the loss is the
    mean over micro-batches and the gradients are those of the mean loss,
    as DeepSpeed's `gradient_accumulation_steps` gives. Casts of the
    function's arguments (mixed-precision's parameter copies) are hoisted
    before the body: once per step, not once per micro-batch.
  }];
  let options = [
    Option<"steps", "steps", "int64_t", "1", "micro-batches per optimizer step">,
    Option<"accumDtype", "accum-dtype", "::dsc::FloatKind", "::dsc::FloatKind::FP32",
           "the type the gradients are summed in (grad_accum_dtype): fp32, bf16 or fp16; "
           "a 16-bit sum is cast to fp32 once, after the micro-batches",
           "DSC_FLOAT_KIND_VALUES">,
  ];
  let statistics = [
    Statistic<"numAccumulated", "gradients-accumulated", "Gradients summed over micro-batches">,
  ];
}

def PipelineSplit : Pass<"pipeline-split", "mlir::ModuleOp"> {
  let summary = "Cut the forward graph into pipeline stages joined by send/recv";
  let description = [{
    Before autodiff. Cuts the ops of the step into layers where the fewest
    activations are live, partitions the layers into `stages` contiguous
    groups (`uniform`: equal layer counts; `parameters`: balanced parameter
    elements; `cost`: balanced cost-interface flops, the default) and makes
    one function per stage (`dist.stage`), with `dist.send` / `dist.recv`
    on the pp group for every activation a later stage reads. Ops that read
    only inputs and constants are recomputed on each stage that needs them.
    A parameter used on several stages is held by each (`dist.tied_copy`
    on all but the first). See PipelineSplit.cpp.
  }];
  let dependentDialects = ["::dsc::dist::DistDialect", "::mlir::arith::ArithDialect"];
  let options = [
    Option<"stages", "stages", "int64_t", "2", "pipeline stages">,
    Option<"method", "method", "::dsc::PartitionMethod", "::dsc::PartitionMethod::Cost",
           "partition method: uniform | parameters | cost", "DSC_PARTITION_METHOD_VALUES">,
  ];
  let statistics = [
    Statistic<"numLayers", "layers", "Layers the step was cut into">,
    Statistic<"numChannels", "channels", "Activations sent between stages">,
  ];
}

def PipelineSchedule : Pass<"pipeline-schedule", "mlir::ModuleOp"> {
  let summary = "Schedule each stage's micro-batches in 1F1B (or zero-bubble) order";
  let description = [{
    After autodiff, instead of gradient-accumulation. Each stage function's
    micro-batch moves into a `train.pipeline` op whose schedule runs
    `micro-batches` forward and backward parts in order (`1f1b`:
    PipeDream-Flush; `zb-h1`: the backward split into input (B) and weight
    (W) gradients, weight gradients filling the bubble), each micro-batch
    reading `train.load_batch` of its index; the op sums the gradients over
    micro-batches, which are scaled once after it, tied parameters'
    gradients summed over their stages. A parameter's low-precision copy is
    made once before the micro-batches. Records the predicted bubble
    fraction as `dist.bubble`. See PipelineSchedule.cpp.
  }];
  let dependentDialects = ["::dsc::dist::DistDialect", "::mlir::arith::ArithDialect"];
  let options = [
    Option<"microBatches", "micro-batches", "int64_t", "1", "micro-batches per step (M)">,
    Option<"schedule", "schedule", "::dsc::PipelineScheduleKind",
           "::dsc::PipelineScheduleKind::OneFOneB", "1f1b | zb-h1",
           "DSC_PIPELINE_SCHEDULE_VALUES">,
  ];
}

def PipelineExpand : Pass<"pipeline-expand", "mlir::ModuleOp"> {
  let summary = "Unroll each train.pipeline into its schedule's items";
  let description = [{
    Each item (phase, k) of a stage's schedule becomes the body's ops of
    that phase for micro-batch k (marked `train.micro` and `train.phase`),
    reading `train.load_batch k`; each yielded value is added to its sum
    right after it is computed, and each send completes before the next
    send on its channel. See PipelineExpand.cpp.
  }];
}

def PipelineGradNorm : Pass<"pipeline-grad-norm", "mlir::ModuleOp"> {
  let summary = "Make the gradient norm of a pipeline stage global over the stages";
  let description = [{
    After optimizer and data-parallel / zero: every stage's
    `train.clip_grad_norm` takes the sum of squares of its own gradients
    (a `dist.tied_copy` parameter counted on its first stage only),
    all-reduced over the pp group, so every stage clips by, and reports,
    the norm of the whole model.
  }];
  let dependentDialects = ["::dsc::dist::DistDialect"];
}

def Optimizer : Pass<"optimizer", "mlir::ModuleOp"> {
  let summary = "Add the optimizer update, gradient clipping and the learning-rate schedule";
  let description = [{
    Turns a step that returns the loss and the gradients into one that
    returns updated parameters and optimizer states: a `train.lr_schedule`
    (DeepSpeed's scheduler types and parameter names), `train.clip_grad_norm`
    by global norm when `clip` > 0 (DeepSpeed's `gradient_clipping`), and
    one update per parameter with DeepSpeed's semantics (`train.adam`,
    `train.sgd`, `train.lion`, `train.adagrad`, or `train.lamb` after the
    `train.lamb_stats` of its trust ratio). Adds `train.opt_state` arguments and results and the
    `train.step` argument; returns the loss, the gradient norm and the lr.
  }];
  let options = [
    Option<"type", "type", "::dsc::OptimizerKind", "::dsc::OptimizerKind::AdamW",
           "adam | adamw | sgd | lamb | lion | adagrad | onebitadam | zerooneadam | onebitlamb",
           "DSC_OPTIMIZER_KIND_VALUES">,
    Option<"lr", "lr", "double", "1e-3", "learning rate (or the schedule's)">,
    Option<"beta1", "beta1", "double", "0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", "0.999", "Adam beta2">,
    Option<"eps", "eps", "double", "1e-8", "Adam epsilon (added after the square root)">,
    Option<"weightDecay", "weight-decay", "double", "0.0", "weight decay">,
    Option<"biasCorrection", "bias-correction", "bool", "true", "Adam bias correction">,
    Option<"momentum", "momentum", "double", "0.0", "SGD momentum">,
    Option<"dampening", "dampening", "double", "0.0", "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", "false", "SGD Nesterov momentum">,
    Option<"maxCoeff", "max-coeff", "double", "10.0", "LAMB's largest trust ratio">,
    Option<"minCoeff", "min-coeff", "double", "0.01", "LAMB's smallest trust ratio">,
    Option<"lrDecay", "lr-decay", "double", "0.0", "Adagrad's lr decay">,
    Option<"freezeStep", "freeze-step", "int64_t", "100000",
           "OnebitAdam's last uncompressed step (DeepSpeed's freeze_step); ZeroOneAdam's "
           "var_freeze_step">,
    Option<"varUpdateScaler", "var-update-scaler", "int64_t", "16",
           "ZeroOneAdam's var_update_scaler (variance steps per var_interval)">,
    Option<"localStepScaler", "local-step-scaler", "int64_t", "32678",
           "ZeroOneAdam's local_step_scaler (local steps per local_step_interval)">,
    Option<"localStepClipper", "local-step-clipper", "int64_t", "16",
           "ZeroOneAdam's local_step_clipper (the largest local_step_interval)">,
    Option<"coeffBeta", "coeff-beta", "double", "0.9",
           "OnebitLamb's coeff_beta (the frozen trust ratio's moving average)">,
    Option<"factorMax", "factor-max", "double", "4.0", "OnebitLamb's factor_max">,
    Option<"factorMin", "factor-min", "double", "0.5", "OnebitLamb's factor_min">,
    Option<"factorThreshold", "factor-threshold", "double", "0.1",
           "OnebitLamb's factor_threshold (the factor's largest relative change a step)">,
    Option<"clip", "clip", "double", "0.0", "max global gradient norm (0: no clipping)">,
    Option<"schedule", "schedule", "::dsc::LrScheduleKind", "::dsc::LrScheduleKind::Constant",
           "lr schedule: constant or a DeepSpeed scheduler type", "DSC_LR_SCHEDULE_VALUES">,
    ListOption<"scheduleParams", "schedule-params", "std::string",
               "schedule parameters as name:value">,
  ];
  let statistics = [
    Statistic<"numUpdates", "parameter-updates", "Parameter updates added">,
  ];
}

def OneBitCompression : Pass<"onebit-compression", "mlir::ModuleOp"> {
  let summary = "Plan 1-bit Adam's warm-up and compressed phases (DeepSpeed's OnebitAdam)";
  let description = [{
    On a data-parallel step (ZeRO stage 0) with `train.onebit_adam`
    updates: marks the gradient all-reduces to run in the warm-up steps
    only (`train.active_steps`), makes the clipping norm the mean of the
    ranks' local norms in the compressed steps, and gives each update its
    compressed momentum: `b1 m + (1-b1) g` padded, `train.onebit_compress`
    with the worker error, `dist.all_to_all` of the packed signs and
    `dist.all_gather` of the scales, `train.onebit_server` with the server
    error, `dist.all_gather` of the servers' signs and scales,
    `train.onebit_expand`, sliced back; all of them in the compressed steps
    only. The worker and server errors become `train.opt_state` arguments
    and results (`NAME/worker_error`, `NAME/server_error`). Under bf16 /
    fp16 (the module's `train.precision`: DeepSpeed's FP16_Optimizer
    wrapper) the momenta are compressed as one flat concatenation
    (`fp32_flat_group/...` errors), and the clipping norm is each rank's
    own, its sum of squares plus 0 x the all-reduced sum so that every
    rank sees any rank's overflow.
  }];
  let options = [
    Option<"dp", "dp", "int64_t", "2", "data-parallel ranks (at least 2)">,
  ];
  let statistics = [
    Statistic<"numCompressed", "compressed-momenta", "Momenta given a 1-bit all-reduce">,
  ];
  let dependentDialects = ["::dsc::dist::DistDialect", "::dsc::nn::NNDialect",
                           "::mlir::arith::ArithDialect"];
}

def DataParallel : Pass<"data-parallel", "mlir::ModuleOp"> {
  let summary = "Average the gradients over the data-parallel ranks (ZeRO stage 0)";
  let description = [{
    After `optimizer`: every gradient reaching `train.clip_grad_norm` is
    averaged over the `dp` ranks by a `dist.all_reduce avg` (and its
    `dist.wait`) once per optimizer step, at the accumulation boundary: on
    the gradient sums after `train.accumulate`, or, with one micro-batch,
    inside it on the gradient as the backward pass produces it (so it can
    overlap the rest of the backward pass). Each rank reads its own slice of
    the global batch (the runtime's data loader); the module records
    `dist.dp` and `dist.zero_stage = 0`.
  }];
  let dependentDialects = ["::dsc::dist::DistDialect"];
  let options = [
    Option<"dp", "dp", "int64_t", "2", "data-parallel ranks">,
    Option<"commDtype", "comm-dtype", "::dsc::FloatKind", "::dsc::FloatKind::FP32",
           "the type gradients are all-reduced in (communication_data_type): fp32, bf16 "
           "or fp16; cast before the reduction and back after", "DSC_FLOAT_KIND_VALUES">,
  ];
  let statistics = [
    Statistic<"numReduced", "gradients-reduced", "Gradients all-reduced">,
  ];
}

def Zero : Pass<"zero", "mlir::ModuleOp"> {
  let summary = "Partition optimizer states, gradients and parameters over the ranks (ZeRO 1-3)";
  let description = [{
    After `optimizer`. Every tensor is partitioned as a flat vector of n
    elements zero-padded to `dp` chunks of ceil(n / dp); rank r owns chunk r
    (a `dist.shard_of` argument attribute gives the full shape).
      * stage 1: optimizer states are chunks. The gradient sums are
        reduce-scattered (avg) after the accumulation; each rank updates its
        chunk of the parameter (`dist.chunk`) and the chunks are all-gathered
        back into the parameter. Clipping uses the global norm: each rank's
        `train.sum_sq` of its chunks, all-reduced.
      * stage 2: also the gradients: the reduce-scatter moves into the
        micro-batch, right after each gradient is produced, and only the
        chunk is accumulated.
      * stage 3: also the parameters, except those of fewer than
        `persistence-threshold` elements (DeepSpeed's
        stage3_param_persistence_threshold), which are handled as in stage 2.
        A partitioned parameter is all-gathered before its first use in the
        forward pass and again before its first use in the backward pass;
        the optimizer updates the chunk in place.
    Collectives come as start + `dist.wait` pairs, one per tensor;
    `comm-fusion` buckets them and `overlap` moves them.
  }];
  let dependentDialects = ["::dsc::dist::DistDialect"];
  let options = [
    Option<"stage", "stage", "int64_t", "1", "ZeRO stage (1, 2 or 3)">,
    Option<"dp", "dp", "int64_t", "2", "data-parallel ranks">,
    Option<"persistenceThreshold", "persistence-threshold", "int64_t", "100000",
           "stage 3: parameters with fewer elements stay whole on every rank">,
    Option<"commDtype", "comm-dtype", "::dsc::FloatKind", "::dsc::FloatKind::FP32",
           "the type gradients are reduce-scattered in (communication_data_type): fp32, "
           "bf16 or fp16; cast before the reduction and back after", "DSC_FLOAT_KIND_VALUES">,
  ];
  let statistics = [
    Statistic<"numChunkUpdates", "chunk-updates", "Parameter updates made on a chunk">,
    Statistic<"numPartitioned", "partitioned-params",
              "Parameters held as chunks between steps (stage 3; fp32 master weights of a "
              "mixed-precision step)">,
  ];
}

def VerifyZero : Pass<"verify-zero", "mlir::ModuleOp"> {
  let summary = "Check that a step is partitioned as its ZeRO stage requires";
  let description = [{
    Runs after `zero` in dsc's pipeline, and on any IR in tests. With
    `dist.zero_stage` = s and `dist.dp` = n on the module: at s >= 1 every
    optimizer state is a chunk (`dist.shard_of`, ceil(numel / n) elements);
    at s >= 2 every gradient sum of `train.accumulate` is a chunk; at s = 3
    every parameter above the persistence threshold is a chunk. Collectives
    must use a group of size n and be completed by a `dist.wait`.
  }];
}

def VerifyDifferentiated : Pass<"verify-differentiated", "mlir::ModuleOp"> {
  let summary = "Check that a differentiated step has one gradient per parameter";
  let description = [{
    Runs after autodiff (and recompute) in dsc's pipeline: every function
    returning gradients returns exactly one `train.grad` per `train.param`
    argument, named after it and of the parameter's type, and every
    gradient names a parameter. The passes after it pair gradients with
    parameters by these names and types.
  }];
  let statistics = [
    Statistic<"numGradients", "gradients", "Gradients checked">,
  ];
}

def VerifyPlanned : Pass<"verify-planned", "mlir::func::FuncOp"> {
  let summary = "Check that every value of a planned step has its bytes in the arena";
  let description = [{
    Runs after memory-plan in dsc's pipeline, before emit-plan: a function
    with `train.arena_bytes` has a `train.offset` on every argument and
    `train.offsets` (one per result) on every op with results, and each
    tensor's bytes and each collective's `train.staging` range lie inside the
    arena.
  }];
  let statistics = [
    Statistic<"numValues", "values", "Values checked">,
  ];
}

def CommFusion : Pass<"comm-fusion", "mlir::func::FuncOp"> {
  let summary = "Fuse collectives of the same kind into buckets";
  let description = [{
    Collectives of the same kind, group, reduction and element type that
    follow each other in a block are fused into one variadic collective (a
    bucket) while their elements fit in the bucket size: `reduce-bucket`
    elements for all_reduce and reduce_scatter (DeepSpeed's
    reduce_bucket_size), `allgather-bucket` for all_gather
    (allgather_bucket_size, or stage3_prefetch_bucket_size for the
    parameter gathers of stage 3). A bucket sits at its last member when no
    member's result is used before it (gradients), or at its first member
    when every later member's inputs are already available there
    (parameters). The order is the program order, the same on every rank.
  }];
  let options = [
    Option<"reduceBucket", "reduce-bucket", "int64_t", "500000000",
           "elements per all_reduce / reduce_scatter bucket">,
    Option<"allgatherBucket", "allgather-bucket", "int64_t", "500000000",
           "elements per all_gather bucket">,
  ];
  let statistics = [
    Statistic<"numBuckets", "buckets", "Buckets formed (two or more collectives fused)">,
    Statistic<"numFused", "collectives-fused", "Collectives merged into buckets">,
  ];
}

def Overlap : Pass<"overlap", "mlir::func::FuncOp"> {
  let summary = "Start collectives early and wait for them late";
  let description = [{
    Each `dist.wait` moves down to just before the first use of its results,
    but not past the start of the next collective of the same kind (one
    bucket in flight per kind, as DeepSpeed's double-buffered buckets, so
    the bytes held by pending buckets stay bounded). An all_gather of
    parameters (stage 3) moves up to just after the wait of the previous
    all_gather: it prefetches one bucket ahead. Compute between start and
    wait runs while the bucket is in flight.
  }];
}

def Offload : Pass<"offload", "mlir::ModuleOp"> {
  let summary = "ZeRO-Offload / ZeRO-Infinity: optimizer state and parameters in memory tiers";
  let description = [{
    Gives the optimizer state (Adam's `exp_avg` and `exp_avg_sq`, SGD's
    momentum; ZeRO shards where ZeRO partitioned them) a memory tier
    outside the arena: the host (DeepSpeed's `offload_optimizer.device:
    cpu`), or a file per rank on NVMe (`device: nvme`, ZeRO-Infinity's
    optimizer offload). The optimizer updates are cut into tiles in program order as
    DeepSpeed cuts its sub-groups: parameters are added to a tile until its
    elements reach `sub-group-size` (0: one parameter per tile). Each tile's
    state is fetched into arena working copies (`train.tier_fetch`) right
    before its updates and written back (`train.tier_store`) right after,
    so the arena holds one tile's state at a time and memory-plan reuses
    the working copies' bytes from tile to tile. The state arguments get
    `train.tier`, `train.tier_offset` (bytes from the tier's start, each
    tensor aligned to `alignment`) and `train.tile`; the function
    `train.host_tier_bytes` and/or `train.nvme_tier_bytes`. The step returns the state arguments themselves
    as their new values: the stores wrote them. The math is unchanged.

    With `param-device` (ZeRO-3's `offload_param`), the parameters a tile
    updates (the fp32 masters, each rank's shard; those under
    `persistence-threshold` elements stay in the arena, as ZeRO-3 keeps
    them whole) join that tile's fetch and store, and every other reader
    of a parameter (its all-gathers, its 16-bit cast, a layer using it
    whole) reads a working copy fetched by a `train.tier_fetch` of its own
    right before it: inside the micro-batch's body, once per micro-batch,
    as ZeRO-3 fetches a layer's parameters before its forward and its
    backward. Parameter offload needs the updated parameters to be read
    by nothing but the step's return (ZeRO stage 3).

    With `param-nvme-file` (`offload_param.nvme_path` differing from
    `offload_optimizer.nvme_path`: the parameters on a drive of their own,
    as DeepSpeed's separate swappers allow), the parameters on NVMe are
    laid out after all the optimizer state, and the function gets
    `train.nvme_param_offset`: the NVMe tier's bytes before it are one file
    per rank under the optimizer's folder, those from it on one under the
    parameters'. Tiles and transfers are unchanged.
  }];
  let options = [
    Option<"device", "device", "::dsc::OffloadTier", "::dsc::OffloadTier::Cpu",
           "the optimizer state's tier: cpu (host memory), nvme (a file per rank) or none",
           "DSC_OFFLOAD_TIER_VALUES">,
    Option<"paramDevice", "param-device", "::dsc::OffloadTier", "::dsc::OffloadTier::None",
           "the parameters' tier (ZeRO-3's offload_param): none, cpu or nvme",
           "DSC_OFFLOAD_TIER_VALUES">,
    Option<"persistenceThreshold", "persistence-threshold", "int64_t", "0",
           "parameters with fewer elements stay in the arena (stage3_param_persistence_threshold)">,
    Option<"subGroupSize", "sub-group-size", "int64_t", "1000000000",
           "parameters per tile at least (DeepSpeed's sub_group_size; 0: one per tile)">,
    Option<"alignment", "alignment", "int64_t", "4096",
           "byte alignment of each tensor in the tier">,
    Option<"paramNvmeFile", "param-nvme-file", "bool", "false",
           "the parameters on NVMe in a file of their own, after the optimizer state's "
           "(offload_param.nvme_path differing from offload_optimizer.nvme_path)">,
  ];
  let statistics = [
    Statistic<"numTiles", "tiles", "Tiles of the offloaded optimizer step">,
    Statistic<"numTiered", "tiered", "State tensors placed in a tier">,
    Statistic<"numParamFetches", "param-fetches", "Working copies of parameters fetched for their readers">,
  ];
}

def MemoryPlan : Pass<"memory-plan", "mlir::func::FuncOp"> {
  let summary = "Linear schedule, buffer lifetimes and one static arena with offsets";
  let description = [{
    Numbers the ops of the step in execution order (the micro-batch body of
    `train.accumulate` once; values from outside it stay live across it),
    computes each buffer's lifetime, and assigns every tensor an offset in
    one arena: model state (parameters, gradient sums, optimizer states,
    constants, inputs) first, then the transient activations placed
    largest first at the lowest offset free for their lifetime, so buffers
    whose lifetimes do not overlap share memory. Views (reshape) share their
    operand's bytes; optimizer updates and clipping run in place; an
    elementwise op writes over an operand that dies there. A pipeline
    stage's `train.pipeline` runs its items one at a time: what a
    micro-batch keeps from one item to a later one (its stash) is laid out
    once, within a slot, and the slots (as many as the schedule has
    micro-batches in flight) are one block held through the items
    (`train.stash`, `train.item_slots`); each channel's sends copy into a
    buffer of their own (`train.staging` on the send). Annotates
    `train.offsets` on ops, `train.offset` on arguments, and
    `train.arena_bytes` / `train.persistent_bytes` / `train.peak_live_bytes`
    (the most bytes live at one time, the least any placement needs) on the
    function.
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", "64", "byte alignment of every buffer">,
  ];
  let statistics = [
    Statistic<"numBuffers", "buffers", "Buffers placed in the arena (views share theirs)">,
    Statistic<"numInPlace", "in-place",
              "Values placed in place (over a dying operand, or into their argument)">,
    Statistic<"numStaging", "staging", "Collective staging ranges placed">,
  ];
}

#endif // DSC_PASSES
