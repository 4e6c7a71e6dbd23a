//===- TrainOps.td - structure of one training step ---------*- tablegen -*-===//
#ifndef DSC_TRAIN_OPS
#define DSC_TRAIN_OPS

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "dialects/train/TrainInterfaces.td"

def Train_Dialect : Dialect {
  let name = "train";
  let cppNamespace = "::dsc::train";
  let summary = "Roles, optimizer updates and the structure of a training step";
  let description = [{
    Roles are discardable attributes on the step function's arguments and
    results, checked by the dialect:
      * `train.param = "name"`: a trainable parameter (float tensor), named
        as in the source model so weights and checkpoints map back to it;
      * `train.buffer = "name"`: frozen model state (not trained);
      * `train.input = "name"`: a per-batch input read from the data;
      * `train.opt_state = "param/state"`: optimizer state (e.g. Adam's
        `exp_avg`), on an argument and on the result that updates it;
      * `train.step`: the optimizer step counter (tensor<i64>, from 1);
      * `train.loss`: on the single scalar float result, the loss;
      * `train.grad = "name"`: a result that is the gradient of parameter
        `name` (after autodiff);
      * `train.updated = "name"`: the new value of parameter `name`;
      * `train.grad_norm`, `train.lr`: the global gradient norm before
        clipping and the learning rate of the step (scalars, for metrics).
    Optimizer updates are functional: they consume a parameter, its gradient
    and its state and return the new ones, so ZeRO can partition them as
    ordinary values. Region ops mark micro-batch accumulation, recompute
    (activation checkpointing) regions and pipeline stages.
  }];
  let hasRegionArgAttrVerify = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    static constexpr ::llvm::StringLiteral kParam = "train.param";
    static constexpr ::llvm::StringLiteral kBuffer = "train.buffer";
    static constexpr ::llvm::StringLiteral kInput = "train.input";
    static constexpr ::llvm::StringLiteral kLoss = "train.loss";
    static constexpr ::llvm::StringLiteral kOptState = "train.opt_state";
    static constexpr ::llvm::StringLiteral kStep = "train.step";
    /// A step argument and result holding a parameter's bf16 / fp16
    /// working copy (the value is the parameter's name): the fused update
    /// writes it, the forward reads it, and the runtime refreshes it from
    /// the parameter whenever the parameter is loaded (fuse-optimizer).
    static constexpr ::llvm::StringLiteral kParamCopy = "train.param_copy";
    /// The f32 scalar argument holding fp16's loss scale (the runtime
    /// writes it before every step): autodiff seeds the backward pass with
    /// it and clip_grad_norm divides it out.
    static constexpr ::llvm::StringLiteral kLossScale = "train.loss_scale";
    /// Module attribute set by mixed-precision: "bf16" or "fp16".
    static constexpr ::llvm::StringLiteral kPrecision = "train.precision";
    static constexpr ::llvm::StringLiteral kGrad = "train.grad";
    static constexpr ::llvm::StringLiteral kUpdated = "train.updated";
    static constexpr ::llvm::StringLiteral kGradNorm = "train.grad_norm";
    static constexpr ::llvm::StringLiteral kLr = "train.lr";
    /// Op attributes: an op of the backward pass (autodiff); the
    /// micro-batch and phase of an op in a pipeline schedule.
    static constexpr ::llvm::StringLiteral kBackward = "train.backward";
    static constexpr ::llvm::StringLiteral kMicro = "train.micro";
    static constexpr ::llvm::StringLiteral kPhase = "train.phase";
    /// Op attribute `train.active_steps = array<i64: first, last>`: the op
    /// runs only while the optimizer step (the train.step argument's value)
    /// lies in [first, last] (last 0: no end), as a 1-bit optimizer's
    /// warm-up and compressed phases plan both programs ahead. On the other
    /// steps a dist.all_reduce (and its dist.wait) is the identity, its
    /// result a copy of its input; any other op leaves its results
    /// unwritten, so only an op that knows the phase (train.onebit_adam's
    /// `compressed`) or another op of the same steps may read them.
    static constexpr ::llvm::StringLiteral kActiveSteps = "train.active_steps";
    /// Op attribute `train.step_classes = N` (i64): the op runs only on
    /// optimizer steps whose class (plan/StepRule.h, by the rule
    /// of the function's train.zero_one_adam) is one of the bits of N, as
    /// 0/1 Adam's variance, compressed-gradient, local and sync steps are
    /// planned together. Off them it behaves as off train.active_steps.
    static constexpr ::llvm::StringLiteral kStepClasses = "train.step_classes";

    // The memory plan, as memory-plan (and offload) leave it for the plan
    // target; each verified by the dialect (verifyOperationAttribute,
    // verifyRegionArgAttribute), whichever pass sets it.
    /// Op attribute `train.offsets = array<i64: ...>`: each result's byte
    /// offset in the arena (one per result, >= 0).
    static constexpr ::llvm::StringLiteral kOffsets = "train.offsets";
    /// Op attribute `train.staging = array<i64: offset, bytes>`: the
    /// arena range a collective stages its transfer in.
    static constexpr ::llvm::StringLiteral kStaging = "train.staging";
    /// train.pipeline attributes: `train.stash = array<i64: offset,
    /// slot_bytes, slots>`, the block of the micro-batches' slots (slot s
    /// at offset + s * slot_bytes; a stash value's offset is its slot-0
    /// place), and `train.item_slots = array<i64: ...>`, the slot of each
    /// item of the schedule.
    static constexpr ::llvm::StringLiteral kStash = "train.stash";
    static constexpr ::llvm::StringLiteral kItemSlots = "train.item_slots";
    /// Function attributes (i64, >= 0): the arena's bytes, the bytes alive
    /// from the start (model state, constants), the host and NVMe tiers'
    /// bytes (offload), and the arena without recompute (for --explain).
    static constexpr ::llvm::StringLiteral kArenaBytes = "train.arena_bytes";
    static constexpr ::llvm::StringLiteral kPersistentBytes = "train.persistent_bytes";
    /// Function attribute (i64, >= 0, at most train.arena_bytes): the most
    /// bytes live at one time, the least any placement of the arena needs.
    static constexpr ::llvm::StringLiteral kPeakLiveBytes = "train.peak_live_bytes";
    static constexpr ::llvm::StringLiteral kHostTierBytes = "train.host_tier_bytes";
    static constexpr ::llvm::StringLiteral kNvmeTierBytes = "train.nvme_tier_bytes";
    /// Function attribute (i64, >= 0, at most train.nvme_tier_bytes): where
    /// the offloaded parameters' bytes begin in the NVMe tier when they
    /// live in a file of their own (offload_param.nvme_path differing from
    /// offload_optimizer.nvme_path): the tier's bytes before it are the
    /// optimizer state's file, those from it on the parameters'.
    static constexpr ::llvm::StringLiteral kNvmeParamOffset = "train.nvme_param_offset";
    static constexpr ::llvm::StringLiteral kArenaBytesWithoutRecompute =
        "train.arena_bytes_without_recompute";
    /// With dsc --fuse: the arena of the same step compiled without fusion.
    static constexpr ::llvm::StringLiteral kArenaBytesWithoutFusion =
        "train.arena_bytes_without_fusion";
    /// Op attribute (i64: its layer) on a forward op's clone that
    /// passes/Recompute.cpp placed in the backward pass.
    static constexpr ::llvm::StringLiteral kRecomputed = "train.recomputed";
    /// Argument attributes: the byte offset of an argument's buffer in the
    /// arena (i64 >= 0); an offloaded one's tier ("host" or "nvme"), its
    /// offset from the tier's start and its tile of the offloaded update
    /// (i64 >= 0).
    static constexpr ::llvm::StringLiteral kOffset = "train.offset";
    static constexpr ::llvm::StringLiteral kTier = "train.tier";
    static constexpr ::llvm::StringLiteral kTierOffset = "train.tier_offset";
    static constexpr ::llvm::StringLiteral kTile = "train.tile";
  }];
}

class Train_Op<string mnemonic, list<Trait> traits = []>
    : Op<Train_Dialect, mnemonic, traits>;

def Train_FloatTensor : StaticShapeTensorOf<[AnyFloat]>;
// Buildable, so the assembly format need not spell out their types.
def Train_ScalarF32 : 0DTensorOf<[F32]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;
def Train_ScalarI64 : 0DTensorOf<[I64]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getI64Type())">;

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

// Updates with optimizer states declare which operands they are.
defvar OptimizerUpdate = DeclareOpInterfaceMethods<Train_OptimizerUpdateOpInterface>;

def Train_SgdOp : Train_Op<"sgd", [Pure, OptimizerUpdate,
    AllTypesMatch<["param", "grad", "new_param"]>]> {
  let summary = "SGD step with optional momentum, dampening, Nesterov and L2 decay";
  let description = [{
    torch.optim.SGD semantics (DeepSpeed uses it as is): with weight decay
    `g += wd * p`; with momentum `buf = momentum * buf + (1 - dampening) * g`
    and `g = nesterov ? g + momentum * buf : buf`; then `p -= lr * g`.
    The momentum buffer operand and result exist exactly when momentum > 0.
  }];
  let arguments = (ins Train_FloatTensor:$param, Train_FloatTensor:$grad,
                       Train_ScalarF32:$lr,
                       Optional<Train_FloatTensor>:$momentum_buffer,
                       DefaultValuedAttr<F64Attr, "0.0">:$momentum,
                       DefaultValuedAttr<F64Attr, "0.0">:$dampening,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       UnitAttr:$nesterov);
  let results = (outs Train_FloatTensor:$new_param,
                      Optional<Train_FloatTensor>:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $lr (`buffer` $momentum_buffer^ `:` type($momentum_buffer))?
      attr-dict `:` type($param) (`->` type($new_momentum_buffer)^)?
  }];
  let hasVerifier = 1;
}

def Train_AdamOp : Train_Op<"adam", [Pure, OptimizerUpdate,
    AllTypesMatch<["param", "grad", "exp_avg", "exp_avg_sq",
                   "new_param", "new_exp_avg", "new_exp_avg_sq"]>]> {
  let summary = "Adam / AdamW step with DeepSpeed's semantics";
  let description = [{
    `m = b1 m + (1-b1) g`, `v = b2 v + (1-b2) g^2`; with bias correction
    `m_hat = m / (1 - b1^step)`, `v_hat = v / (1 - b2^step)`;
    `p -= lr * (m_hat / (sqrt(v_hat) + eps) + wd * p)` when
    `decoupled_weight_decay` (AdamW), otherwise `g += wd * p` first (Adam
    with L2). `eps` is added after the square root, as in torch and
    DeepSpeed's FusedAdam. `step` counts from 1.
  }];
  let arguments = (ins Train_FloatTensor:$param, Train_FloatTensor:$grad,
                       Train_FloatTensor:$exp_avg, Train_FloatTensor:$exp_avg_sq,
                       Train_ScalarF32:$lr, Train_ScalarI64:$step,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1e-8">:$eps,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       UnitAttr:$decoupled_weight_decay,
                       DefaultValuedAttr<BoolAttr, "true">:$bias_correction);
  let results = (outs Train_FloatTensor:$new_param,
                      Train_FloatTensor:$new_exp_avg,
                      Train_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $lr `,` $step attr-dict
      `:` type($param)
  }];
  let hasVerifier = 1;
}

def Train_LionOp : Train_Op<"lion", [Pure, OptimizerUpdate,
    AllTypesMatch<["param", "grad", "exp_avg", "new_param", "new_exp_avg"]>]> {
  let summary = "Lion step with DeepSpeed's FusedLion semantics";
  let description = [{
    `c = b1 m + (1-b1) g`; `p = p (1 - lr wd) + (c > 0 ? -lr : lr)`;
    `m = b2 m + (1-b2) g`, in float32 as DeepSpeed's FusedLion kernel
    (edaa722 csrc/lion/multi_tensor_lion.cu): a `c` of zero (or NaN) moves
    the parameter by +lr, and the decay multiplies even when wd is 0.
  }];
  let arguments = (ins Train_FloatTensor:$param, Train_FloatTensor:$grad,
                       Train_FloatTensor:$exp_avg, Train_ScalarF32:$lr,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay);
  let results = (outs Train_FloatTensor:$new_param, Train_FloatTensor:$new_exp_avg);
  let assemblyFormat = "$param `,` $grad `,` $exp_avg `,` $lr attr-dict `:` type($param)";
  let hasVerifier = 1;
}

def Train_AdagradOp : Train_Op<"adagrad", [Pure, OptimizerUpdate,
    AllTypesMatch<["param", "grad", "sum", "new_param", "new_sum"]>]> {
  let summary = "Adagrad step with torch.optim.Adagrad's semantics";
  let description = [{
    What DeepSpeed builds for "Adagrad" without offload: with weight decay
    `g += wd p`; `clr = lr / (1 + (step-1) lr_decay)`; `sum += g^2`;
    `p -= clr g / (sqrt(sum) + eps)`. `step` counts from 1.
  }];
  let arguments = (ins Train_FloatTensor:$param, Train_FloatTensor:$grad,
                       Train_FloatTensor:$sum, Train_ScalarF32:$lr, Train_ScalarI64:$step,
                       DefaultValuedAttr<F64Attr, "1e-10">:$eps,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       DefaultValuedAttr<F64Attr, "0.0">:$lr_decay);
  let results = (outs Train_FloatTensor:$new_param, Train_FloatTensor:$new_sum);
  let assemblyFormat = "$param `,` $grad `,` $sum `,` $lr `,` $step attr-dict `:` type($param)";
  let hasVerifier = 1;
}

def Train_OneBitAdamOp : Train_Op<"onebit_adam", [Pure, OptimizerUpdate,
    AllTypesMatch<["param", "grad", "exp_avg", "exp_avg_sq",
                   "new_param", "new_exp_avg", "new_exp_avg_sq"]>]> {
  let summary = "DeepSpeed's OnebitAdam update, in all three of its phases";
  let description = [{
    DeepSpeed's OnebitAdam (edaa722 runtime/fp16/onebit/adam.py) with
    `t = step + step_offset` its call count (step_offset 1 where DeepSpeed's
    fp16 wrapper spent the first call at construction) and
    `last = max(freeze_step, 2)` its last warm-up call:
    t = 1 only initialises (nothing changes); 1 < t <= last is Adam without
    bias correction on `grad`: `m = b1 m + (1-b1) g`, `v = b2 v + (1-b2) g^2`;
    after `last` the momentum is `compressed` (the error-compensated 1-bit
    average over the data-parallel ranks of `b1 m + (1-b1) g`, which the
    onebit-compression pass builds) or, without it (one rank), `b1 m +
    (1-b1) g` itself, and v stays frozen. Every phase but the first then
    does `p -= lr (m / (sqrt(v) + eps) + wd p)`. `compressed` is read only
    after `last`: its producers may run only then (train.active_steps).
  }];
  let arguments = (ins Train_FloatTensor:$param, Train_FloatTensor:$grad,
                       Train_FloatTensor:$exp_avg, Train_FloatTensor:$exp_avg_sq,
                       Train_ScalarF32:$lr, Train_ScalarI64:$step,
                       Optional<Train_FloatTensor>:$compressed,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1e-8">:$eps,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       I64Attr:$freeze_step,
                       DefaultValuedAttr<I64Attr, "0">:$step_offset);
  let results = (outs Train_FloatTensor:$new_param,
                      Train_FloatTensor:$new_exp_avg,
                      Train_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $lr `,` $step
      (`compressed` `(` $compressed^ `:` type($compressed) `)`)? attr-dict `:` type($param)
  }];
  let extraClassDeclaration = [{
    /// DeepSpeed's last uncompressed call, max(freeze_step, 2): the switch
    /// happens at the end of a call with t >= freeze_step after the first.
    int64_t lastWarmupCall() { return std::max<int64_t>(getFreezeStepAttr().getInt(), 2); }
  }];
  let hasVerifier = 1;
}

def Train_ZeroOneAdamOp : Train_Op<"zero_one_adam", [Pure, OptimizerUpdate,
    AllTypesMatch<["param", "grad", "exp_avg", "exp_avg_sq", "momentum_accumulator",
                   "new_param", "new_exp_avg", "new_exp_avg_sq", "new_momentum_accumulator"]>,
    AllTypesMatch<["lrs", "new_lrs"]>]> {
  let summary = "DeepSpeed's ZeroOneAdam (0/1 Adam) update, in every class of step";
  let description = [{
    DeepSpeed's ZeroOneAdam (edaa722 runtime/fp16/onebit/zoadam.py) with
    `t = step + step_offset` its call count, whose class
    (plan/StepRule.h, from the policy attributes) says what it does:
    initialising (t = 1): nothing; variance: `m = b1 m + (1-b1) g`, `v = b2
    v + (1-b2) g^2` on the averaged gradient; compressed gradient: `m = b1 m
    + (1-b1) compressed` (the 1-bit all-reduce of the local gradient; without
    `compressed`, one rank, m stays); then both do `p -= lr (m / (sqrt(v) +
    eps) + wd p)`. Local (after var_freeze_step): `m = b1 m + (1-b1) g`,
    `lrs += lr`, `upd = m / (sqrt(v) + eps) + wd p`, `p -= lr upd`, `u -= lr
    upd`; a sync step then does `p -= u`, `c = compressed` (the 1-bit
    all-reduce of `u (sqrt(v) + eps)`, which train.zero_one_payload makes;
    one rank: that itself), `m = -c / lrs`, `p += c / (sqrt(v) + eps)`, `u =
    0`, `lrs = 0`. `compressed` is read only on compressed-gradient and
    sync steps: its producers may run only then (train.step_classes).
  }];
  let arguments = (ins Train_FloatTensor:$param, Train_FloatTensor:$grad,
                       Train_FloatTensor:$exp_avg, Train_FloatTensor:$exp_avg_sq,
                       Train_FloatTensor:$momentum_accumulator, Train_ScalarF32:$lrs,
                       Train_ScalarF32:$lr, Train_ScalarI64:$step,
                       Optional<Train_FloatTensor>:$compressed,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1e-8">:$eps,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       I64Attr:$var_freeze_step,
                       DefaultValuedAttr<I64Attr, "16">:$var_update_scaler,
                       DefaultValuedAttr<I64Attr, "32678">:$local_step_scaler,
                       DefaultValuedAttr<I64Attr, "16">:$local_step_clipper,
                       DefaultValuedAttr<I64Attr, "0">:$step_offset);
  let results = (outs Train_FloatTensor:$new_param,
                      Train_FloatTensor:$new_exp_avg,
                      Train_FloatTensor:$new_exp_avg_sq,
                      Train_FloatTensor:$new_momentum_accumulator,
                      Train_ScalarF32:$new_lrs);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $momentum_accumulator `,` $lrs `,` $lr
      `,` $step (`compressed` `(` $compressed^ `:` type($compressed) `)`)? attr-dict `:`
      type($param)
  }];
  let extraClassDeclaration = [{
    /// The policy of its steps' classes.
    ::dsrt::ZeroOneRule rule();
  }];
  let hasVerifier = 1;
}

def Train_ZeroOneAdamPayloadOp : Train_Op<"zero_one_payload", [Pure,
    AllTypesMatch<["param", "grad", "exp_avg", "exp_avg_sq", "momentum_accumulator",
                   "payload"]>]> {
  let summary = "what 0/1 Adam's compressed all-reduce carries on this step";
  let description = [{
    The input of `update`'s (a train.zero_one_adam of the same operands)
    1-bit all-reduce: on a compressed-gradient step the local gradient `g`;
    on a sync step `u' (sqrt(v) + eps)`, with `u'` the momentum accumulator
    after the step's local update (`u - lr (m' / (sqrt(v) + eps) + wd p)`,
    `m' = b1 m + (1-b1) g`), computed as the update computes it. Runs on
    those two classes only (train.step_classes); its attributes are the
    update's.
  }];
  let arguments = (ins Train_FloatTensor:$param, Train_FloatTensor:$grad,
                       Train_FloatTensor:$exp_avg, Train_FloatTensor:$exp_avg_sq,
                       Train_FloatTensor:$momentum_accumulator,
                       Train_ScalarF32:$lr, Train_ScalarI64:$step,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "1e-8">:$eps,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       I64Attr:$var_freeze_step,
                       DefaultValuedAttr<I64Attr, "16">:$var_update_scaler,
                       DefaultValuedAttr<I64Attr, "32678">:$local_step_scaler,
                       DefaultValuedAttr<I64Attr, "16">:$local_step_clipper,
                       DefaultValuedAttr<I64Attr, "0">:$step_offset);
  let results = (outs Train_FloatTensor:$payload);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $momentum_accumulator `,` $lr `,` $step
      attr-dict `:` type($param)
  }];
  let extraClassDeclaration = [{
    ::dsrt::ZeroOneRule rule();
  }];
  let hasVerifier = 1;
}

def Train_ResetAtOp : Train_Op<"reset_at", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "a state read as zeros on one optimizer step";
  let description = [{
    `result` is zeros when the step (the train.step argument's value) is
    `at`, else `input`: 0/1 Adam zeroes its error buffers once, when its
    local steps begin (DeepSpeed's reinitial_error_buffer).
  }];
  let arguments = (ins 1DTensorOf<[F32]>:$input, Train_ScalarI64:$step, I64Attr:$at);
  let results = (outs 1DTensorOf<[F32]>:$result);
  let assemblyFormat = "$input `,` $step attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Train_OneBitLambOp : Train_Op<"onebit_lamb", [Pure, OptimizerUpdate, AttrSizedOperandSegments,
    AllTypesMatch<["param", "grad", "exp_avg", "exp_avg_sq", "exp_avg_sq_fresh",
                   "new_param", "new_exp_avg", "new_exp_avg_sq", "new_exp_avg_sq_fresh"]>,
    AllTypesMatch<["lamb_coeff_freeze", "last_factor", "scaling_coeff",
                   "new_lamb_coeff_freeze", "new_last_factor"]>]> {
  let summary = "DeepSpeed's OnebitLamb update, in all three of its phases";
  let description = [{
    DeepSpeed's OnebitLamb (edaa722 runtime/fp16/onebit/lamb.py) with `t =
    step + step_offset` its call count and `last = max(freeze_step, 2)` its
    last warm-up call: t = 1 only initialises; 1 < t <= last is LAMB
    without bias correction on `grad` (`m`, `v` as Adam's; at t =
    freeze_step `v_fresh = v`; `u = m / (sqrt(v) + eps) + wd p`, `c =
    clamp(|p| / |u|, min_coeff, max_coeff)` or 1 if either norm is 0,
    `lamb_coeff_freeze = coeff_beta lamb_coeff_freeze + (1 - coeff_beta) c`
    if c != 1, `p -= lr c u`); after `last`, `m = compressed /
    scaling_coeff` (the 1-bit all-reduce of `(b1 m + (1-b1) g)
    scaling_coeff`, which the onebit-compression pass builds; on one rank
    that itself), `v_fresh` from the reconstructed gradient `(m - b1 m_old)
    / (1 - b1)`, v frozen, and `p -= lr lamb_coeff_freeze factor u` with
    the factor from `max((sqrt(v) + eps) / (sqrt(v_fresh) + eps))` clamped
    to [factor_min, factor_max] and to `last_factor` (1 -+
    factor_threshold) (`last_factor` counts as 1 on the first such call).
    `compressed` is read only after `last`. With `stats` (bf16 / fp16:
    DeepSpeed's wrapper hands OnebitLamb one flat tensor of every
    parameter) the norms and the maximum are those of train.onebit_lamb_stats
    over all the tensors, so every update takes the one trust ratio, and
    keeps its own, equal, copy of `lamb_coeff_freeze` and `last_factor`.
  }];
  let arguments = (ins Train_FloatTensor:$param, Train_FloatTensor:$grad,
                       Train_FloatTensor:$exp_avg, Train_FloatTensor:$exp_avg_sq,
                       Train_FloatTensor:$exp_avg_sq_fresh,
                       Train_ScalarF32:$lamb_coeff_freeze, Train_ScalarF32:$last_factor,
                       Train_ScalarF32:$scaling_coeff,
                       Train_ScalarF32:$lr, Train_ScalarI64:$step,
                       Optional<Train_FloatTensor>:$compressed,
                       Optional<1DTensorOf<[F32]>>:$stats,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1e-8">:$eps,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       DefaultValuedAttr<F64Attr, "10.0">:$max_coeff,
                       DefaultValuedAttr<F64Attr, "0.01">:$min_coeff,
                       DefaultValuedAttr<F64Attr, "0.9">:$coeff_beta,
                       DefaultValuedAttr<F64Attr, "4.0">:$factor_max,
                       DefaultValuedAttr<F64Attr, "0.5">:$factor_min,
                       DefaultValuedAttr<F64Attr, "0.1">:$factor_threshold,
                       I64Attr:$freeze_step,
                       DefaultValuedAttr<I64Attr, "0">:$step_offset);
  let results = (outs Train_FloatTensor:$new_param,
                      Train_FloatTensor:$new_exp_avg,
                      Train_FloatTensor:$new_exp_avg_sq,
                      Train_FloatTensor:$new_exp_avg_sq_fresh,
                      Train_ScalarF32:$new_lamb_coeff_freeze,
                      Train_ScalarF32:$new_last_factor);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $exp_avg_sq_fresh `,` $lamb_coeff_freeze
      `,` $last_factor `,` $scaling_coeff `,` $lr `,` $step
      (`compressed` `(` $compressed^ `:` type($compressed) `)`)?
      (`stats` `(` $stats^ `:` type($stats) `)`)? attr-dict `:` type($param)
  }];
  let extraClassDeclaration = [{
    /// DeepSpeed's last uncompressed call, max(freeze_step, 2).
    int64_t lastWarmupCall() { return std::max<int64_t>(getFreezeStepAttr().getInt(), 2); }
  }];
  let hasVerifier = 1;
}

def Train_OneBitLambStatsOp : Train_Op<"onebit_lamb_stats", [Pure,
    AttrSizedOperandSegments]> {
  let summary = "1-bit LAMB's norms over every tensor, as one flat tensor's";
  let description = [{
    What train.onebit_lamb reduces over its tensor, reduced over all of them
    (DeepSpeed's bf16 / fp16 wrapper hands OnebitLamb one flat tensor), from
    the values the updates are about to compute, without writing them: in
    the warm-up `[|p|^2, |u|^2, 0]`, after it `[max((sqrt(v) + eps) /
    (sqrt(v_fresh) + eps)), |u0|^2, |u|^2]` (the train.onebit_lamb op's
    names). `compressed` (one per tensor, or none on one rank) as the
    updates'; the attributes are theirs.
  }];
  let arguments = (ins Variadic<Train_FloatTensor>:$params, Variadic<Train_FloatTensor>:$grads,
                       Variadic<Train_FloatTensor>:$exp_avgs,
                       Variadic<Train_FloatTensor>:$exp_avg_sqs,
                       Variadic<Train_FloatTensor>:$exp_avg_sq_freshes,
                       Variadic<Train_FloatTensor>:$compressed,
                       Train_ScalarI64:$step,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1e-8">:$eps,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       I64Attr:$freeze_step,
                       DefaultValuedAttr<I64Attr, "0">:$step_offset);
  let results = (outs 1DTensorOf<[F32]>:$stats);
  let assemblyFormat = [{
    `(` $params `:` type($params) `)` `grads` `(` $grads `:` type($grads) `)`
      `exp_avgs` `(` $exp_avgs `:` type($exp_avgs) `)`
      `exp_avg_sqs` `(` $exp_avg_sqs `:` type($exp_avg_sqs) `)`
      `exp_avg_sq_freshes` `(` $exp_avg_sq_freshes `:` type($exp_avg_sq_freshes) `)`
      (`compressed` `(` $compressed^ `:` type($compressed) `)`)? `,` $step attr-dict
      `->` type($stats)
  }];
  let hasVerifier = 1;
}

def Train_OneBitLambScalingOp : Train_Op<"onebit_lamb_scaling", [Pure,
    SameVariadicOperandSize]> {
  let summary = "1-bit LAMB's momentum scaling coefficients, set once";
  let description = [{
    On optimizer step `at` (the train.step argument's value: DeepSpeed's
    first compressed call), each tensor's coefficient becomes `mean_q
    rms(m_q) / rms(m_p)`, rms(m) = |m| / sqrt(numel), over the momenta
    `exp_avgs`, so that the compressed all-reduce sees momenta of one
    scale; on the other steps the coefficients are as they were.
  }];
  let arguments = (ins Variadic<Train_FloatTensor>:$exp_avgs,
                       Variadic<Train_ScalarF32>:$coeffs, Train_ScalarI64:$step,
                       I64Attr:$at);
  let results = (outs Variadic<Train_ScalarF32>:$new_coeffs);
  let assemblyFormat = [{
    `(` $exp_avgs `:` type($exp_avgs) `)` `coeffs` `(` $coeffs `)` `,` $step attr-dict `->`
      type($new_coeffs)
  }];
  let hasVerifier = 1;
}

//===--- 1-bit compression: the compressed all-reduce's local steps -------===//
// DeepSpeed's compressed_allreduce (edaa722 deepspeed/runtime/comm/nccl.py)
// between its collectives: a worker compresses its buffer with error
// feedback, dist.all_to_all sends chunk r of the bits to rank r, the
// server of each chunk averages the workers' signs with its own error and
// compresses again, dist.all_gather returns every chunk, and each rank
// expands them. Bits are i8 tensors, eight elements a byte, the first in
// the most significant bit (numpy's packbits); scales are tensor<1xf32>
// so that dist.all_gather can collect them.

// A scale of the compressed all-reduce: tensor<1xf32>, printed by implication.
def Train_Scale : 1DTensorOf<[F32]>,
    BuildableType<"::mlir::RankedTensorType::get({1}, $_builder.getF32Type())">;

def Train_OneBitCompressOp : Train_Op<"onebit_compress", [Pure,
    AllTypesMatch<["input", "error", "new_error"]>]> {
  let summary = "a worker's error-feedback sign compression";
  let description = [{
    `x = input + error`, `scale = |x| / sqrt(n)`, `bits = x >= 0` (NaN, 0
    and -0 count as positive, as DeepSpeed's sign().add_(1).bool()),
    `new_error = x - scale sgn(x)`. n, the input's length, is a multiple of
    8 (the padding makes it so).
  }];
  let arguments = (ins 1DTensorOf<[F32]>:$input, 1DTensorOf<[F32]>:$error);
  let results = (outs 1DTensorOf<[I8]>:$bits, Train_Scale:$scale,
                      1DTensorOf<[F32]>:$new_error);
  let assemblyFormat = [{
    $input `,` $error attr-dict `:` type($input) `->` type($bits)
  }];
  let builders = [OpBuilder<(ins "::mlir::Value":$input, "::mlir::Value":$error)>];
  let hasVerifier = 1;
}

def Train_OneBitServerOp : Train_Op<"onebit_server", [Pure,
    AllTypesMatch<["error", "new_error"]>]> {
  let summary = "the server of one chunk: the workers' signs averaged, compressed again";
  let description = [{
    `bits` holds the W workers' bits of this rank's chunk back to back (what
    dist.all_to_all delivers), `scales` their W scales. With n = the
    error's length: `c = sum_w sgn_w (scale_w / W) + error`, `scale_out =
    |c| / sqrt(n)`, `bits_out = c >= 0`, `new_error = c - scale_out sgn(c)`.
  }];
  let arguments = (ins 1DTensorOf<[I8]>:$bits, 1DTensorOf<[F32]>:$scales,
                       1DTensorOf<[F32]>:$error);
  let results = (outs 1DTensorOf<[I8]>:$bits_out, Train_Scale:$scale_out,
                      1DTensorOf<[F32]>:$new_error);
  let assemblyFormat = [{
    $bits `,` $scales `,` $error attr-dict `:` type($bits) `,` type($scales) `,` type($error)
    `->` type($bits_out)
  }];
  let builders = [OpBuilder<(ins "::mlir::Value":$bits, "::mlir::Value":$scales,
                                 "::mlir::Value":$error)>];
  let hasVerifier = 1;
}

def Train_OneBitExpandOp : Train_Op<"onebit_expand", [Pure]> {
  let summary = "every chunk's signs times its scale";
  let description = [{
    `bits` holds W chunks of n / (8 W) bytes (what dist.all_gather of the
    servers' bits delivers) and `scales` their W scales: element i of chunk
    w is `scales[w]` or `-scales[w]` as its bit says. The result has n
    elements.
  }];
  let arguments = (ins 1DTensorOf<[I8]>:$bits, 1DTensorOf<[F32]>:$scales);
  let results = (outs 1DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $bits `,` $scales attr-dict `:` type($bits) `,` type($scales) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Train_LambStatsOp : Train_Op<"lamb_stats", [Pure,
    AllTypesMatch<["param", "grad", "exp_avg", "exp_avg_sq"]>]> {
  let summary = "the sums of squares behind one LAMB trust ratio";
  let description = [{
    `[sum(p^2), sum(u^2)]` over the elements given, where
    `u = m' / (sqrt(v') + eps) + wd p` and `m'`, `v'` are the moments
    train.lamb will write (it computes them again; this op writes nothing).
    Over a chunk (ZeRO) or a tensor-parallel part the sums are partial and
    the passes all-reduce them before train.lamb reads them.
  }];
  let arguments = (ins Train_FloatTensor:$param, Train_FloatTensor:$grad,
                       Train_FloatTensor:$exp_avg, Train_FloatTensor:$exp_avg_sq,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps, F64Attr:$weight_decay);
  let results = (outs 1DTensorOf<[F32]>:$sums);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq attr-dict `:` type($param) `->` type($sums)
  }];
  let hasVerifier = 1;
}

def Train_LambOp : Train_Op<"lamb", [Pure, OptimizerUpdate,
    AllTypesMatch<["param", "grad", "exp_avg", "exp_avg_sq",
                   "new_param", "new_exp_avg", "new_exp_avg_sq"]>]> {
  let summary = "LAMB step with DeepSpeed's FusedLamb semantics";
  let description = [{
    DeepSpeed's FusedLamb (edaa722 csrc/lamb/fused_lamb_cuda_kernel.cu):
    `m = b1 m + (1-b1) g`, `v = b2 v + (1-b2) g^2`,
    `u = m / (sqrt(v) + eps) + wd p`; the trust ratio
    `r = clamp(|p| / |u|, min_coeff, max_coeff)`, or 1 when either norm is
    0, from `stats` = `[|p|^2, |u|^2]` of the whole tensor
    (train.lamb_stats, summed over the ranks that hold parts of it); then
    `p -= step_size r u` with `step_size = lr sqrt(1 - b2^t) / (1 - b1^t)`
    under bias correction, `lr` without. `step` counts from 1.
  }];
  let arguments = (ins Train_FloatTensor:$param, Train_FloatTensor:$grad,
                       Train_FloatTensor:$exp_avg, Train_FloatTensor:$exp_avg_sq,
                       Train_ScalarF32:$lr, Train_ScalarI64:$step,
                       1DTensorOf<[F32]>:$stats,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1e-8">:$eps,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       DefaultValuedAttr<BoolAttr, "true">:$bias_correction,
                       DefaultValuedAttr<F64Attr, "10.0">:$max_coeff,
                       DefaultValuedAttr<F64Attr, "0.01">:$min_coeff);
  let results = (outs Train_FloatTensor:$new_param,
                      Train_FloatTensor:$new_exp_avg,
                      Train_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $lr `,` $step `,` $stats attr-dict
      `:` type($param) `,` type($stats)
  }];
  let hasVerifier = 1;
}

def Train_ClipGradNormOp : Train_Op<"clip_grad_norm", [Pure, AttrSizedOperandSegments]> {
  let summary = "scale all gradients so their global L2 norm is at most max_norm";
  let description = [{
    Returns the clipped gradients and the global norm before clipping
    (DeepSpeed's `gradient_clipping`; the norm is what it logs). With
    `max_norm` = 0 the gradients pass unchanged and only the norm is computed.
    With `sum_sq`, the gradients are shards (ZeRO) and the norm is
    sqrt(sum_sq), the sum of squares over every rank's shards.

    With `loss_scale` (fp16), the gradients are those of the loss multiplied
    by it: the norm is computed on them and divided by the scale, and the
    results are unscaled and clipped in one multiplication by
    min(1, max_norm / (norm + 1e-6)) / loss_scale (DeepSpeed's
    `combined_scale`). A non-finite scaled norm is an overflow: the results
    are left as they are and the runtime skips this step's parameter
    updates (train.adam / train.sgd) and does not advance the step, as
    DeepSpeed's loss scaler does. Without `loss_scale` a non-finite norm
    stops the run before any update.
  }];
  let arguments = (ins Variadic<Train_FloatTensor>:$grads,
                       Optional<Train_ScalarF32>:$sum_sq,
                       Optional<Train_ScalarF32>:$loss_scale, F64Attr:$max_norm);
  let results = (outs Variadic<Train_FloatTensor>:$clipped, Train_ScalarF32:$norm);
  let assemblyFormat = [{
    $grads (`sum_sq` `(` $sum_sq^ `)`)? (`loss_scale` `(` $loss_scale^ `)`)? attr-dict `:`
    type($grads) `->` type($clipped)
  }];
  let builders = [OpBuilder<(ins "::mlir::ValueRange":$grads, "::mlir::Value":$lossScale,
                                "double":$maxNorm)>];
  let hasVerifier = 1;
}

def Train_ClipCoefOp : Train_Op<"clip_coef", [Pure, AttrSizedOperandSegments]> {
  let summary = "the global gradient norm and the factor that clips the gradients";
  let description = [{
    `train.clip_grad_norm` without writing the clipped gradients: the same
    operands, norm and decision (an fp16 overflow skips the step's updates;
    otherwise a non-finite norm stops the run), and `coef`, the factor
    clip_grad_norm would multiply every gradient by:
    min(1, max_norm / (norm + 1e-6)) / loss_scale, or 1 / loss_scale when
    max_norm is 0. The updates that read the gradients apply it as they
    read them (`train.fused_adam ... coef`, train.fused_lamb_stats and train.fused_lamb). The gradients may be bf16 or
    fp16: their squares are summed from the exactly widened values, so the
    norm is the one clip_grad_norm computes on their fp32 casts. The
    fuse-optimizer pass makes it from a clip_grad_norm whose every result
    feeds fused updates.
  }];
  let arguments = (ins Variadic<Train_FloatTensor>:$grads,
                       Optional<Train_ScalarF32>:$sum_sq,
                       Optional<Train_ScalarF32>:$loss_scale, F64Attr:$max_norm);
  let results = (outs Train_ScalarF32:$norm, Train_ScalarF32:$coef);
  let assemblyFormat = [{
    $grads (`sum_sq` `(` $sum_sq^ `)`)? (`loss_scale` `(` $loss_scale^ `)`)? attr-dict `:`
    type($grads)
  }];
  let hasVerifier = 1;
}

def Train_FusedAdamOp : Train_Op<"fused_adam", [Pure, AttrSizedOperandSegments,
    InferTypeOpAdaptor,
    RangedTypesMatchWith<"exp_avgs have the parameters' types", "params", "exp_avgs", "$_self">,
    RangedTypesMatchWith<"exp_avg_sqs have the parameters' types", "params", "exp_avg_sqs",
                         "$_self">]> {
  let summary = "one Adam / AdamW step over many parameters, clipping and gradient casts folded in";
  let description = [{
    `train.adam` applied to each (param, grad, exp_avg, exp_avg_sq) in
    turn, with the same attributes, learning rate and step, as one
    instruction over all of them: the runtime splits the elements of every
    tensor into equal pieces across its threads, so small tensors (biases,
    norms) cost no call of their own. With `coef` (a `train.clip_coef`),
    each gradient is multiplied by it as it is read, which is
    `train.clip_grad_norm`'s clipping (and fp16 unscaling) without its
    writes. A gradient may be bf16 or fp16 beside an fp32 parameter: it is
    widened as it is read, which is an `nn.cast` to fp32 without its
    buffer. Every element's arithmetic is train.adam's, in its order, so
    the results are bitwise those of the unfused ops.

    With `copies` (bf16 or fp16, `copy_of` naming each one's parameter by
    its index), the update also writes each such parameter's new value,
    rounded, into its copy: the working copy the next step's forward reads
    (a `train.param_copy` argument), which is an `nn.cast` of the new
    parameter in the same pass.

    The results are the new parameters, then the new exp_avgs, then the new
    exp_avg_sqs, then the new copies, each in place of its operand
    (getNewParams, getNewExpAvgs, getNewExpAvgSqs, getNewCopies). Made by
    the fuse-optimizer pass after every other transformation of the step;
    no pass changes it after.
  }];
  let arguments = (ins Variadic<Train_FloatTensor>:$params,
                       Variadic<Train_FloatTensor>:$grads,
                       Variadic<Train_FloatTensor>:$exp_avgs,
                       Variadic<Train_FloatTensor>:$exp_avg_sqs,
                       Train_ScalarF32:$lr, Train_ScalarI64:$step,
                       Optional<Train_ScalarF32>:$coef,
                       Variadic<Train_FloatTensor>:$copies,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1e-8">:$eps,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       UnitAttr:$decoupled_weight_decay,
                       DefaultValuedAttr<BoolAttr, "true">:$bias_correction,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$copy_of);
  let results = (outs Variadic<Train_FloatTensor>:$updated);
  let assemblyFormat = [{
    `(` $params `)` `grads` `(` $grads `)` `states` `(` $exp_avgs `)` `(` $exp_avg_sqs `)` `,`
      $lr `,` $step (`coef` `(` $coef^ `)`)? (`copies` `(` $copies^ `:` type($copies) `)`)?
      attr-dict `:` `(` type($params) `)` `grads` `(` type($grads) `)`
  }];
  let extraClassDeclaration = [{
    ::mlir::ResultRange getNewParams() {
      return getUpdated().take_front(getParams().size());
    }
    ::mlir::ResultRange getNewExpAvgs() {
      return getUpdated().slice(getParams().size(), getParams().size());
    }
    ::mlir::ResultRange getNewExpAvgSqs() {
      return getUpdated().slice(2 * getParams().size(), getParams().size());
    }
    ::mlir::ResultRange getNewCopies() { return getUpdated().drop_front(3 * getParams().size()); }
  }];
  let hasVerifier = 1;
}

def Train_FusedLambStatsOp : Train_Op<"fused_lamb_stats", [Pure, AttrSizedOperandSegments,
    InferTypeOpAdaptor,
    RangedTypesMatchWith<"exp_avgs have the parameters' types", "params", "exp_avgs", "$_self">,
    RangedTypesMatchWith<"exp_avg_sqs have the parameters' types", "params", "exp_avg_sqs",
                         "$_self">]> {
  let summary = "train.lamb_stats over many tensors in one pass, clipping and gradient casts "
                "folded in";
  let description = [{
    `train.lamb_stats` of each (param, grad, exp_avg, exp_avg_sq) with the
    same rates, as one instruction over all of them: result k is tensor k's
    `[sum(p^2), sum(u^2)]` (tensor<2xf32>), each summed exactly as
    train.lamb_stats sums it, so bitwise its result. With `coef` (a
    `train.clip_coef`) each gradient is multiplied by it as it is read; a
    gradient may be bf16 or fp16 beside an fp32 parameter and is widened as
    it is read, as in `train.fused_adam`. Made by the fuse-optimizer pass;
    its results feed `train.fused_lamb`, directly or through the all-reduce
    that completes the sums of a sharded or split tensor.
  }];
  let arguments = (ins Variadic<Train_FloatTensor>:$params,
                       Variadic<Train_FloatTensor>:$grads,
                       Variadic<Train_FloatTensor>:$exp_avgs,
                       Variadic<Train_FloatTensor>:$exp_avg_sqs,
                       Optional<Train_ScalarF32>:$coef,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps, F64Attr:$weight_decay);
  let results = (outs Variadic<1DTensorOf<[F32]>>:$sums);
  let assemblyFormat = [{
    `(` $params `)` `grads` `(` $grads `)` `states` `(` $exp_avgs `)` `(` $exp_avg_sqs `)`
      (`coef` `(` $coef^ `)`)? attr-dict `:` `(` type($params) `)` `grads` `(` type($grads) `)`
  }];
  let hasVerifier = 1;
}

def Train_FusedLambOp : Train_Op<"fused_lamb", [Pure, AttrSizedOperandSegments,
    InferTypeOpAdaptor,
    RangedTypesMatchWith<"exp_avgs have the parameters' types", "params", "exp_avgs", "$_self">,
    RangedTypesMatchWith<"exp_avg_sqs have the parameters' types", "params", "exp_avg_sqs",
                         "$_self">]> {
  let summary = "one LAMB step over many parameters, clipping and gradient casts folded in";
  let description = [{
    `train.lamb` applied to each (param, grad, exp_avg, exp_avg_sq, stats)
    in turn, with the same attributes, learning rate and step, as one
    instruction over all of them (the elements of every tensor split
    evenly across the threads): each tensor's trust ratio comes from its
    own `stats` (tensor<2xf32>, train.fused_lamb_stats' or the all-reduced
    sums). `coef` and narrow gradients as in `train.fused_adam`. Every
    element's arithmetic is train.lamb's, so the results are bitwise those
    of the unfused ops. `copies` and `copy_of` as in `train.fused_adam`.
    The results are the new parameters, then the new exp_avgs, then the
    new exp_avg_sqs, then the new copies, each in place of its operand.
    Made by the fuse-optimizer pass.
  }];
  let arguments = (ins Variadic<Train_FloatTensor>:$params,
                       Variadic<Train_FloatTensor>:$grads,
                       Variadic<Train_FloatTensor>:$exp_avgs,
                       Variadic<Train_FloatTensor>:$exp_avg_sqs,
                       Variadic<1DTensorOf<[F32]>>:$stats,
                       Train_ScalarF32:$lr, Train_ScalarI64:$step,
                       Optional<Train_ScalarF32>:$coef,
                       Variadic<Train_FloatTensor>:$copies,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1e-8">:$eps,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       DefaultValuedAttr<BoolAttr, "true">:$bias_correction,
                       DefaultValuedAttr<F64Attr, "10.0">:$max_coeff,
                       DefaultValuedAttr<F64Attr, "0.01">:$min_coeff,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$copy_of);
  let results = (outs Variadic<Train_FloatTensor>:$updated);
  let assemblyFormat = [{
    `(` $params `)` `grads` `(` $grads `)` `states` `(` $exp_avgs `)` `(` $exp_avg_sqs `)`
      `stats` `(` $stats `)` `,` $lr `,` $step (`coef` `(` $coef^ `)`)?
      (`copies` `(` $copies^ `:` type($copies) `)`)? attr-dict `:`
      `(` type($params) `)` `grads` `(` type($grads) `)` `stats` `(` type($stats) `)`
  }];
  let extraClassDeclaration = [{
    ::mlir::ResultRange getNewParams() {
      return getUpdated().take_front(getParams().size());
    }
    ::mlir::ResultRange getNewExpAvgs() {
      return getUpdated().slice(getParams().size(), getParams().size());
    }
    ::mlir::ResultRange getNewExpAvgSqs() {
      return getUpdated().slice(2 * getParams().size(), getParams().size());
    }
    ::mlir::ResultRange getNewCopies() { return getUpdated().drop_front(3 * getParams().size()); }
  }];
  let hasVerifier = 1;
}

def Train_SumSqOp : Train_Op<"sum_sq", [Pure]> {
  let summary = "the sum of the squares of every element of several tensors";
  let description = [{
    One rank's part of a global gradient norm when gradients are sharded:
    the ranks' sums are all-reduced and fed to `clip_grad_norm ... sum_sq`.
  }];
  let arguments = (ins Variadic<Train_FloatTensor>:$inputs);
  let results = (outs Train_ScalarF32:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs)";
}

def Train_LrScheduleOp : Train_Op<"lr_schedule", [Pure]> {
  let summary = "the learning rate of an optimizer step (DeepSpeed schedules)";
  let description = [{
    `kind` is a DeepSpeed scheduler type (`WarmupLR`, `WarmupDecayLR`,
    `WarmupCosineLR`, `OneCycle`, `LRRangeTest`) or `constant`; `params`
    holds its parameters with DeepSpeed's names and defaults filled in
    (`lr` for constant). `step` counts optimizer steps from 1; the runtime
    evaluates the formula on the host, once per step.
  }];
  let arguments = (ins Train_ScalarI64:$step, StrAttr:$kind, DictionaryAttr:$params);
  let results = (outs Train_ScalarF32:$lr);
  let assemblyFormat = "$kind $params `,` $step attr-dict";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Step structure
//===----------------------------------------------------------------------===//

def Train_YieldOp : Train_Op<"yield", [Pure, Terminator, ReturnLike,
    ParentOneOf<["AccumulateOp", "PipelineOp"]>]> {
  let summary = "values produced by a train region";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

def Train_AccumulateOp : Train_Op<"accumulate", [
    SingleBlock, RecursiveMemoryEffects]> {
  let summary = "run the body once per micro-batch and sum what it yields";
  let description = [{
    Gradient accumulation: the body runs `count` times with the micro-batch
    index as its block argument; results are the elementwise sums of the
    yielded values, accumulated in place. A bf16 or fp16 value may be
    yielded for an f32 sum of its shape: it is widened as it is added (the
    sum of its nn.cast to f32, without the cast's buffer).

    Lowered (memory-plan, emit-plan), a yielded value is added to its sum as
    soon as the body has computed it and nothing else in the body reads it,
    not at the yield, so a micro-batch's gradients do not all stay live
    until the backward pass ends. With one micro-batch a value computed in
    the body is its sum: no zero fill and no addition.
  }];
  let arguments = (ins I64Attr:$count);
  let results = (outs Variadic<Train_FloatTensor>:$sums);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$count (`->` type($sums)^)? $body attr-dict";
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The op of the body after which yielded value `i` is added to its
    /// sum: its definition or its last other reader in the body; null for
    /// a value from outside the body (added at the yield).
    ::mlir::Operation *getSumPoint(unsigned i);
    /// Whether sum `i` is yielded value `i` itself: one micro-batch, the
    /// value computed in the body (and, yielded several times, its first).
    bool isSumInPlace(unsigned i);
  }];
}

def Train_PipelineOp : Train_Op<"pipeline", [
    SingleBlock, RecursiveMemoryEffects]> {
  let summary = "one pipeline stage's micro-batches, in the order of its schedule";
  let description = [{
    The body is one micro-batch of a pipeline stage: its block argument is
    the micro-batch index, and every op in it carries `train.phase`, the
    part of the micro-batch it belongs to: 1 the forward (F), 2 the input
    gradient (B), 3 the weight gradient (W, zero-bubble schedules only). An
    op reads values of its own phase or an earlier one; what a later phase
    reads of an earlier one is what the stage keeps for each micro-batch in
    flight.

    `schedule` lists the items the stage runs as (phase, micro-batch)
    pairs, flattened: each micro-batch of `count` runs its F, then its B,
    then (when the body has W ops) its W, once each. An item runs the body's
    ops of its phase, in body order, for that micro-batch.

    Results are the sums over the micro-batches of the yielded values;
    `sum_phases` gives, per yielded value, the item after which a
    micro-batch's value is added to its sum (1 F, 2 B, 3 W). As for
    train.accumulate, a bf16 or fp16 value may be yielded for an f32 sum of
    its shape, widened as it is added.

    A dist.send's dist.wait in the body completes the send before the next
    send on the same channel (peer and tag) of a later item, or once the
    last item is done, not where it stands: sends never block the schedule.
    pipeline-expand unrolls the op into the ops of every item.
  }];
  let arguments = (ins I64Attr:$count, DenseI64ArrayAttr:$schedule,
                       DenseI64ArrayAttr:$sum_phases);
  let results = (outs Variadic<Train_FloatTensor>:$sums);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $count `schedule` $schedule `sum_phases` $sum_phases (`->` type($sums)^)? $body attr-dict
  }];
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The phase of a body op (0 when it has none).
    static int64_t phaseOf(::mlir::Operation *op);
    /// The op of the body after which a micro-batch's yielded value `i`
    /// is added to its sum, once lowered (memory-plan, emit-plan): as
    /// train.accumulate's getSumPoint. Null for a value from outside the
    /// body (added at the end of the item).
    ::mlir::Operation *getSumPoint(unsigned i);
    /// Gives each body op without `train.phase` (one a later pass added,
    /// such as tensor-parallel-lower's collectives) the earliest phase of
    /// its readers in the body, or else the latest of the body values it
    /// reads, or else F: it runs in the first item that needs it.
    void inferPhases();
  }];
}

def Train_LoadBatchOp : Train_Op<"load_batch"> {
  let summary = "the model inputs of one micro-batch of the step";
  let description = [{
    A pipeline schedule runs several micro-batches at once, so each needs
    its own inputs: the runtime's data loader fills the results with
    micro-batch `micro` of the step (0-based), in the order of the step's
    `train.input` arguments, and runs the micro-batch's dropout with that
    micro-batch's random stream. In the body of train.pipeline the
    micro-batch is the body's index argument, given as the operand instead
    of the attribute: `train.load_batch %k ["x"]`. It has side effects: it
    is never merged or removed.
  }];
  let arguments = (ins OptionalAttr<I64Attr>:$micro, Optional<Index>:$index,
                       StrArrayAttr:$names);
  let results = (outs Variadic<AnyRankedTensor>:$inputs);
  let assemblyFormat = [{
    custom<MicroBatch>($micro, $index) $names attr-dict (`:` type($inputs)^)?
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Model state the forward pass updates
//===----------------------------------------------------------------------===//

def Train_AssignOp : Train_Op<"assign"> {
  let summary = "writes a new value into a model buffer (BatchNorm's running statistics)";
  let description = [{
    `buffer` is a step argument with `train.buffer`: model state that the
    optimizer does not train but the forward pass updates, as PyTorch's
    batch norm updates its running mean and variance in training mode.
    The assignment happens where the op is, once per micro-batch inside
    `train.accumulate` (as every forward call updates the statistics), and
    the buffer's later readers see the new value. It has side effects: it
    is never merged, moved, recomputed or removed; it has no gradient.
  }];
  let arguments = (ins Train_FloatTensor:$buffer, Train_FloatTensor:$value);
  let assemblyFormat = "$value `to` $buffer attr-dict `:` type($value) `to` type($buffer)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Memory tiers (ZeRO-Offload)
//===----------------------------------------------------------------------===//

def Train_TierFetchOp : Train_Op<"tier_fetch"> {
  let summary = "copies state from its memory tier into the arena for an update";
  let description = [{
    `homes` are step arguments whose storage is a memory tier outside the
    arena (`train.tier`, set by the offload pass: optimizer state ZeRO-Offload
    keeps in host memory). The results are working copies in the arena,
    which the tile's optimizer updates read and write; `train.tier_store`
    writes them back. `tile` numbers the offloaded step's tiles
    (DeepSpeed's sub-groups) in order. It has side effects: it is never
    merged, moved or removed.
  }];
  let arguments = (ins Variadic<Train_FloatTensor>:$homes, I64Attr:$tile);
  let results = (outs Variadic<Train_FloatTensor>:$staged);
  let assemblyFormat = "$homes attr-dict `:` type($homes) `->` type($staged)";
  let builders = [OpBuilder<(ins "::mlir::ValueRange":$homes, "int64_t":$tile)>];
  let hasVerifier = 1;
}

def Train_TierStoreOp : Train_Op<"tier_store", [AttrSizedOperandSegments]> {
  let summary = "writes updated state back to its memory tier";
  let description = [{
    Writes each of `values` (arena working copies, updated) to the tier
    storage of the matching step argument in `homes`; the step then returns
    that argument as the state's new value, whose bytes the store wrote.
  }];
  let arguments = (ins Variadic<Train_FloatTensor>:$values,
                       Variadic<Train_FloatTensor>:$homes, I64Attr:$tile);
  let assemblyFormat = "$values `to` $homes attr-dict `:` type($values) `to` type($homes)";
  let hasVerifier = 1;
}

#endif // DSC_TRAIN_OPS
