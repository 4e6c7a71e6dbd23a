//===- Instructions.h - the plan format's instruction vocabulary -*- C++ -*-===//
//
// Part of the plan format (with plan.proto, Version.h and Staging.h): every
// name an Instr.op may hold. The names are spelled like the dsc ops most of
// them come from, but they are fixed here, not taken from the dialects:
// emit-plan maps each op class to its instruction (passes/EmitPlan.cpp,
// instructionOf), so renaming an op in a dialect changes no plan. dsrt's
// CPU op table implements exactly this set (PlanValidationTest checks it).
// Adding a name is a format change (docs/architecture.md, "Plan format
// versions"); renaming or removing one breaks older plans.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_PLAN_INSTRUCTIONS_H
#define DSRT_PLAN_INSTRUCTIONS_H

#include <algorithm>
#include <array>
#include <string_view>

namespace dsrt {

inline constexpr std::array<std::string_view, 94> kPlanInstructions = {
    "accumulate",
    "dist.all_gather",
    "dist.all_reduce",
    "dist.all_to_all",
    "dist.chunk",
    "dist.recv",
    "dist.reduce_scatter",
    "dist.send",
    "dist.wait",
    "fill",
    "load_batch",
    "nn.abs",
    "nn.add",
    "nn.argmax",
    "nn.avg_pool",
    "nn.avg_pool_grad",
    "nn.broadcast",
    "nn.cast",
    "nn.cmp",
    "nn.concat",
    "nn.conv",
    "nn.conv_input_grad",
    "nn.conv_weight_grad",
    "nn.cos",
    "nn.cross_entropy",
    "nn.cross_entropy_grad",
    "nn.div",
    "nn.dropout",
    "nn.dropout_grad",
    "nn.erf",
    "nn.exp",
    "nn.gather",
    "nn.gather_grad",
    "nn.gelu",
    "nn.gelu_grad",
    "nn.layer_norm",
    "nn.layer_norm_grad",
    "nn.log",
    "nn.log_softmax",
    "nn.log_softmax_grad",
    "nn.matmul",
    "nn.max",
    "nn.max_pool",
    "nn.max_pool_grad",
    "nn.min",
    "nn.mul",
    "nn.neg",
    "nn.nll_loss",
    "nn.nll_loss_grad",
    "nn.not",
    "nn.pow",
    "nn.reciprocal",
    "nn.reduce_max",
    "nn.reduce_mean",
    "nn.reduce_sum",
    "nn.relu",
    "nn.rsqrt",
    "nn.select",
    "nn.sigmoid",
    "nn.sin",
    "nn.slice",
    "nn.slice_grad",
    "nn.softmax",
    "nn.softmax_grad",
    "nn.sqrt",
    "nn.sub",
    "nn.tanh",
    "nn.transpose",
    "nn.vocab_ce_loss",
    "nn.vocab_ce_loss_grad",
    "nn.vocab_ce_sums",
    "nn.vocab_ce_sums_grad",
    "tier.fetch",
    "tier.store",
    "train.adagrad",
    "train.adam",
    "train.assign",
    "train.clip_grad_norm",
    "train.lamb",
    "train.lamb_stats",
    "train.lion",
    "train.lr_schedule",
    "train.onebit_adam",
    "train.onebit_compress",
    "train.onebit_expand",
    "train.onebit_lamb",
    "train.onebit_lamb_scaling",
    "train.onebit_lamb_stats",
    "train.onebit_server",
    "train.reset_at",
    "train.sgd",
    "train.sum_sq",
    "train.zero_one_adam",
    "train.zero_one_payload",
};

/// The index of `op` in kPlanInstructions (dsrt's id of the instruction,
/// assigned once when a plan is loaded), or -1 for a name not in it.
inline int instructionId(std::string_view op) {
  auto it = std::lower_bound(kPlanInstructions.begin(), kPlanInstructions.end(), op);
  return it != kPlanInstructions.end() && *it == op ? int(it - kPlanInstructions.begin()) : -1;
}

/// Whether `op` is an instruction of the plan format.
inline bool isPlanInstruction(std::string_view op) {
  return std::binary_search(kPlanInstructions.begin(), kPlanInstructions.end(), op);
}

} // namespace dsrt

#endif // DSRT_PLAN_INSTRUCTIONS_H
