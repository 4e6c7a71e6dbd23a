//===- Version.h - plan.proto's format version ------------------*- C++ -*-===//
//
// The one definition of the plan format's version, for dsc (which writes
// kPlanFormatVersion) and dsrt (which runs versions kOldestPlanFormatVersion
// to kPlanFormatVersion and refuses the others, naming both). The rule for
// bumping it is in docs/architecture.md ("Plan format versions"): bump when
// a plan this dsc writes could be run wrongly by a dsrt of the previous
// version (a new field or op whose meaning an older dsrt would ignore, a
// changed meaning); keep an older version runnable while this dsrt runs it
// exactly as it was meant. Independently of the version, dsrt refuses a
// plan with a field its plan.proto does not define (proto3 would keep and
// ignore it).
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_PLAN_VERSION_H
#define DSRT_PLAN_VERSION_H

#include <string>

namespace dsrt {

/// Version 1: the first format (data parallelism, ZeRO, pipelines).
/// Version 2: the format of tensor parallelism (Buffer.tp_split, axis 2),
/// fp16 loss scaling (LOSS_SCALE buffers, clipping's has_loss_scale) and
/// recompute, which plans have used while still saying 1; a dsrt of
/// version 1 refuses them now. dsrt still runs version-1 plans: their
/// fields mean what they meant.
/// Version 3: the lr schedule is plan data (Plan.lr_schedule), which a dsrt
/// of version 2 would not read (it took the baked config's). dsrt runs
/// version-2 plans with their recorded ds_config's scheduler, as they meant.
/// Version 4: memory tiers (Buffer.tier, Plan.host_tier_bytes and the
/// tier.fetch / tier.store instructions of ZeRO-Offload), which an older
/// dsrt would take for arena offsets. Plans without offload are unchanged.
/// Version 5: instructions of a range of optimizer steps
/// (Instr.first_step / last_step: the 1-bit optimizers' two phases), which
/// an older dsrt would run on every step.
/// Version 6: the evaluation program (Instr.eval, Plan.eval_refused). A
/// version-5 dsrt would run the plan's training alike, but this dsrt must
/// know whether a plan marks its evaluation slice: --eval-data refuses a
/// plan older than 6.
/// Version 7: instructions of step classes (Instr.step_classes with
/// Plan.step_rule: 0/1 Adam's variance, compressed-gradient, local and
/// sync steps), which an older dsrt would run on every step.
/// Version 8: Buffer.ignore_index, the label a loss skips, which the data
/// check of a version-7 dsrt would not know (it refuses the field).
/// Version-7 plans run as they meant; their .npy inputs are not checked
/// before training.
/// Version 9: the settings dsrt reads are typed plan data (Plan.precision,
/// loss_scaler, run_settings and the compiled_settings digests; the lr
/// schedule's cycle_momentum says whether the betas cycle), and field 4 is
/// an opaque record of the ds_config that dsrt no longer reads. A
/// version-8 dsrt would take its settings from that record and ignore the
/// typed ones. Plans of versions 1-8 run as they meant: their settings are
/// read from the record once at load (config/PlanSettings.cpp).
/// Version 10: the NVMe tier may be two files per rank
/// (NvmeTier.param_path and param_offset: offload_param and
/// offload_optimizer on different nvme_paths), which a version-9 dsrt
/// would refuse as an unknown field. Plans of version 9 are unchanged.
/// Version 11: what the memory plan knows of its bytes in use
/// (Plan.peak_live_bytes, which the manifest prints against the arena, and
/// Buffer.view_of, which dsrt --timeline's planned bytes follow through
/// reshapes), fields a version-10 dsrt would refuse as unknown. Plans of
/// version 10 are unchanged.
/// Version 12: plans without their weights (Plan.no_weights), which a
/// version-11 dsrt would refuse as an unknown field. Plans of version 11
/// are unchanged.
/// Version 13: a pipeline stage's micro-batches as each phase's
/// instructions once and the schedule of items that runs them
/// (Program.pipeline, Buffer.slotted), fields a version-12 dsrt would
/// refuse as unknown. Plans of version 12 (the items unrolled into the
/// prologue) run unchanged.
/// Version 14: the fused attention instructions (nn.attention,
/// nn.attention_grad), which a version-13 dsrt refuses by name. Plans of
/// version 13 are unchanged.
/// Version 15: the GEMM epilogue instruction (nn.matmul_epilogue), which a
/// version-14 dsrt refuses by name. Plans of version 14 are unchanged.
/// Version 16: the fused optimizer instructions (train.fused_adam,
/// train.clip_coef), which a version-15 dsrt refuses by name. Plans of
/// version 15 are unchanged.
/// Version 17: nn.attention and nn.attention_grad say their layout (the
/// bshd flag, the fourth integer), which a version-16 dsrt would take for
/// the tensor-parallel split or read head-major; Plan.attention_bshd. dsrt
/// reads the flag of an older plan's attention as 0 (head-major), as it
/// was meant. Also from 17: `accumulate` may sum a bf16 / fp16 gradient
/// into an f32 sum, which a version-16 dsrt refuses (its operands' types
/// differ).
/// Version 18: the fused LAMB instructions (train.fused_lamb,
/// train.fused_lamb_stats), which a version-17 dsrt refuses by name;
/// Plan.fused_lamb_updates. Plans of version 17 are unchanged.
/// Version 19: the parameters' bf16 / fp16 working copies (Role
/// PARAM_COPY, a buffer named like its parameter plus kParamCopySuffix)
/// and the fused updates' copy_of integers, which write them; a version-18
/// dsrt refuses the role. Also from 19: nn.cross_entropy may read bf16 /
/// fp16 logits and nn.cross_entropy_grad write its gradient in their type,
/// which a version-18 dsrt refuses by dtype. Plans of version 18 are
/// unchanged.
/// Version 20: the GELU's derivative multiplied into a GEMM: the
/// instruction nn.gelu_with_derivative, which a version-19 dsrt refuses by
/// name, and nn.matmul_epilogue's has_scale (a fifth integer, 0 when
/// absent, so version-19 epilogues read unchanged); Plan.epilogue_scales.
/// Version 21: nn.matmul_epilogue may have a second output, the column
/// sums of its result (a bias gradient), which a version-20 dsrt refuses
/// by its output count; Plan.epilogue_column_sums.
constexpr unsigned kPlanFormatVersion = 21;

/// A PARAM_COPY buffer's name: its parameter's and this.
inline constexpr const char *kParamCopySuffix = ".copy";
/// The parameter a PARAM_COPY buffer named `copy` belongs to, or "" when
/// the name is not a parameter's plus kParamCopySuffix.
inline std::string copiedParameter(const std::string &copy) {
  const std::string suffix = kParamCopySuffix;
  if (copy.size() <= suffix.size() ||
      copy.compare(copy.size() - suffix.size(), suffix.size(), suffix) != 0)
    return {};
  return copy.substr(0, copy.size() - suffix.size());
}
constexpr unsigned kOldestPlanFormatVersion = 1;

} // namespace dsrt

#endif // DSRT_PLAN_VERSION_H
