//===- Instructions.h - the plan format's instruction vocabulary -*- C++ -*-===//
//
// Part of the plan format (with plan.proto, Version.h and Staging.h): every
// name an Instr.op may hold, and the layout of each one's attributes
// (Instr.ints, Instr.floats). The names are spelled like the dsc ops most
// of them come from, but they are fixed here, not taken from the dialects:
// emit-plan maps each op class to its instruction (target/plan/EmitPlan.cpp,
// instructionOf) and writes its attributes in the order declared here, so
// renaming an op in a dialect changes no plan. dsrt's CPU op table
// implements exactly this set and checks each instruction's attribute
// counts against its layout (runtime/core/Ops.cpp, Check::layout;
// PlanValidationTest checks both). Adding a name or an attribute is a
// format change (docs/architecture.md, "Plan format versions"); renaming or
// removing one, or reordering attributes, breaks older plans.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_PLAN_INSTRUCTIONS_H
#define DSRT_PLAN_INSTRUCTIONS_H

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>

namespace dsrt {

/// One instruction and its attributes: `ints` names Instr.ints and
/// `floats` Instr.floats, in order, separated by ", " ("" for none).
///  * `name[length]` is a list whose length follows from the operands
///    (`r`: the spatial dims of a window, `rank`: the operand's rank); the
///    binder checks the count against the shapes.
///  * `[a, b]` is an optional trailing group, present whole or not at all
///    (what older plans lack, or what a variant of the instruction adds).
/// Flags are 0 or 1; axes are non-negative.
///
/// `dtypes` is what its data operand (output 0; input 0 of an instruction
/// without outputs) may hold: dtype names as plan.proto spells them, in
/// lower case ("f32", "bf16", "f16", "i64", "i32", "bool", "u8", "f64"),
/// "float" for f32, bf16 and f16, "any" for all of them; "" for no
/// operand. It is the contract between the two ends: emit-plan refuses an
/// instruction whose data operand holds anything else, naming the op
/// (target/plan/EmitPlan.cpp), and KernelCoverageTest binds every
/// instruction on every dtype listed here on every backend (the CPU must
/// bind each; another backend binds it or refuses it by name, and the
/// executor then stays on the CPU).
struct InstructionLayout {
  std::string_view name;
  std::string_view ints;
  std::string_view floats;
  std::string_view dtypes;
};

/// The vocabulary, sorted by name: an instruction's index here is its id
/// (instructionId).
inline constexpr InstructionLayout kInstructionLayouts[] = {
    // out += in; from format 17 a bf16 / fp16 input may be summed into an
    // f32 output (widened as it is added).
    {"accumulate", "", "", "float"},
    // group_size: the ranks of the group Instr.axis names; handle: what
    // dist.wait completes (0 to 65535); reduce: 0 sum, 1 avg, 2 max, 3 min.
    {"dist.all_gather", "group_size, handle", "", "float u8"},
    {"dist.all_reduce", "group_size, reduce, handle", "", "float"},
    {"dist.all_to_all", "group_size, handle", "", "float u8"},
    {"dist.chunk", "group_size", "", "any"},
    // peer: the rank that many steps along the group (non-zero).
    {"dist.recv", "group_size, peer, tag, handle", "", "any"},
    {"dist.reduce_scatter", "group_size, reduce, handle", "", "float"},
    {"dist.send", "group_size, peer, tag, handle", "", "any"},
    {"dist.wait", "handle", "", ""},
    {"fill", "", "value", "float"},
    // micro_batch: m in [0, pipeline_micro_batches).
    {"load_batch", "micro_batch", "", "any"},
    {"nn.abs", "", "", "float"},
    {"nn.add", "", "", "float"},
    {"nn.argmax", "axis", "", "i64"},
    // inputs query, key, value[, bias]; the flags 0 or 1 (bshd: operands
    // [..., T, H, E], from format 17; dsrt reads older plans' as 0); ratio:
    // dropout's; on a tensor-parallel part, the heads' split as
    // nn.dropout's.
    {"nn.attention", "scale_divides, causal, rng_stream, bshd, [tp_dim, tp_blocks, tp_size]",
     "scale, ratio", "float"},
    {"nn.attention_grad",
     "scale_divides, causal, rng_stream, bshd, [tp_dim, tp_blocks, tp_size]", "scale, ratio",
     "float"},
    // r: the spatial dims (1 to 3); pads: the begins, then the ends.
    {"nn.avg_pool", "kernel[r], strides[r], pads[2r], count_include_pad", "", "f32"},
    {"nn.avg_pool_grad", "kernel[r], strides[r], pads[2r], count_include_pad", "", "f32"},
    {"nn.broadcast", "", "", "any"},
    {"nn.cast", "", "", "any"},
    // predicate: eq ne lt le gt ge = 0..5.
    {"nn.cmp", "predicate", "", "bool"},
    {"nn.concat", "axis", "", "float i64"},
    {"nn.conv", "strides[r], pads[2r], dilations[r], groups", "", "f32"},
    {"nn.conv_input_grad", "strides[r], pads[2r], dilations[r], groups", "", "f32"},
    {"nn.conv_weight_grad", "strides[r], pads[2r], dilations[r], groups", "", "f32"},
    {"nn.cos", "", "", "float"},
    // reduction: 0 none, 1 sum, 2 mean.
    {"nn.cross_entropy", "reduction, has_ignore_index, ignore_index", "", "f32"},
    // From format 19 the logits may be bf16 / fp16 (and the gradient in
    // their type; the loss's gradient and the cross-entropy's loss stay f32).
    {"nn.cross_entropy_grad", "reduction, has_ignore_index, ignore_index", "", "float"},
    {"nn.div", "", "", "float"},
    // On a tensor-parallel part, the split of the whole tensor (whose mask
    // bits the part draws): its dim, blocks and tp size.
    {"nn.dropout", "rng_stream, [tp_dim, tp_blocks, tp_size]", "ratio", "float"},
    {"nn.dropout_grad", "", "ratio", "float"},
    {"nn.erf", "", "", "float"},
    {"nn.exp", "", "", "float"},
    // parts: on a vocabulary-parallel part of the table (axis 0, float32),
    // the number of parts.
    {"nn.gather", "axis, [parts]", "", "f32 i64"},
    {"nn.gather_grad", "axis, [parts]", "", "f32"},
    {"nn.gelu", "tanh_approximation", "", "float"},
    {"nn.gelu_grad", "tanh_approximation", "", "float"},
    // outputs: the GELU and its derivative (format 20).
    {"nn.gelu_with_derivative", "tanh_approximation", "", "float"},
    {"nn.layer_norm", "axis", "epsilon", "float"},
    {"nn.layer_norm_grad", "axis", "epsilon", "float"},
    {"nn.log", "", "", "float"},
    {"nn.log_softmax", "axis", "", "float"},
    {"nn.log_softmax_grad", "axis", "", "float"},
    {"nn.matmul", "transpose_lhs, transpose_rhs", "", "float"},
    // inputs lhs, rhs[, bias][, scale][, addend]; has_bias 1: the third
    // input is the bias [N]; has_scale 1 (format 20; absent: 0): then the
    // elementwise scale (the result's shape); has_addend 1: the last one
    // is the addend (the result's shape); at least one of them or the
    // second output (format 21): the result's column sums [N], in float
    // rounded once, in nn.reduce_sum's order (a bias gradient).
    // result = (lhs rhs + bias) * scale + addend.
    {"nn.matmul_epilogue", "transpose_lhs, transpose_rhs, has_bias, has_addend, [has_scale]", "",
     "float"},
    {"nn.max", "", "", "float"},
    {"nn.max_pool", "kernel[r], strides[r], pads[2r], dilations[r]", "", "f32"},
    {"nn.max_pool_grad", "kernel[r], strides[r], pads[2r], dilations[r]", "", "f32"},
    {"nn.min", "", "", "float"},
    {"nn.mul", "", "", "float"},
    {"nn.neg", "", "", "float"},
    {"nn.nll_loss", "reduction, has_ignore_index, ignore_index", "", "f32"},
    {"nn.nll_loss_grad", "reduction, has_ignore_index, ignore_index", "", "f32"},
    {"nn.not", "", "", "bool"},
    {"nn.pow", "", "", "float"},
    {"nn.reciprocal", "", "", "float"},
    // The reduced axes (a mask: one written twice counts once).
    {"nn.reduce_max", "axes[<= rank]", "", "float"},
    {"nn.reduce_mean", "axes[<= rank]", "", "float"},
    {"nn.reduce_sum", "axes[<= rank]", "", "float"},
    {"nn.relu", "", "", "float"},
    {"nn.rsqrt", "", "", "float"},
    {"nn.select", "", "", "float"},
    {"nn.sigmoid", "", "", "float"},
    {"nn.sin", "", "", "float"},
    // rank: the sliced (larger) operand's.
    {"nn.slice", "start[rank], stride[rank]", "", "float i64"},
    {"nn.slice_grad", "start[rank], stride[rank]", "", "float"},
    {"nn.softmax", "axis", "", "float"},
    {"nn.softmax_grad", "axis", "", "float"},
    {"nn.sqrt", "", "", "float"},
    {"nn.sub", "", "", "float"},
    {"nn.tanh", "", "", "float"},
    {"nn.transpose", "permutation[rank]", "", "float i64"},
    // classes: the whole vocabulary; then as the losses.
    {"nn.vocab_ce_loss", "classes, reduction, has_ignore_index, ignore_index", "", "f32"},
    {"nn.vocab_ce_loss_grad", "classes, reduction, has_ignore_index, ignore_index", "", "f32"},
    // parts: the number of vocabulary-parallel parts of the logits.
    {"nn.vocab_ce_sums", "parts", "", "f32"},
    {"nn.vocab_ce_sums_grad", "parts", "", "f32"},
    {"tier.fetch", "tile", "", "f32"},
    {"tier.store", "tile", "", "f32"},
    {"train.adagrad", "", "eps, weight_decay, lr_decay", "f32"},
    {"train.adam", "decoupled, bias_correction", "beta1, beta2, eps, weight_decay", "f32"},
    {"train.assign", "", "", "f32"},
    // N gradients (f32, bf16 or f16), [sum_sq], [loss_scale] -> norm, coef
    // (the layout's dtype is the norm's).
    {"train.clip_coef", "has_sum_sq, has_loss_scale", "max_norm", "f32"},
    // max_norm 0: only the norm. Older plans lack the flags (then a sum of
    // squares input exactly when there is one more input than outputs - 1).
    {"train.clip_grad_norm", "[has_sum_sq, has_loss_scale]", "max_norm", "f32"},
    // N params, N grads (f32/bf16/f16), N exp_avg, N exp_avg_sq, lr, step
    // [, coef] -> N params, N exp_avg, N exp_avg_sq, in place (the
    // layout's dtype is the parameters'; the gradients may be narrower).
    // From format 19, copy_of: the parameters (by index) whose bf16 / fp16
    // working copies follow the inputs and the outputs, written in place.
    {"train.fused_adam", "decoupled, bias_correction, has_coef, copy_of[copies]",
     "beta1, beta2, eps, weight_decay", "f32"},
    // N params, N grads (f32/bf16/f16), N exp_avg, N exp_avg_sq, N stats,
    // lr, step [, coef] -> N params, N exp_avg, N exp_avg_sq, in place.
    {"train.fused_lamb", "bias_correction, has_coef, copy_of[copies]",
     "beta1, beta2, eps, weight_decay, max_coeff, min_coeff", "f32"},
    // N params, N grads (f32/bf16/f16), N exp_avg, N exp_avg_sq [, coef]
    // -> N sums (2 each).
    {"train.fused_lamb_stats", "has_coef", "beta1, beta2, eps, weight_decay", "f32"},
    {"train.lamb", "bias_correction", "beta1, beta2, eps, weight_decay, max_coeff, min_coeff", "f32"},
    {"train.lamb_stats", "", "beta1, beta2, eps, weight_decay", "f32"},
    {"train.lion", "", "beta1, beta2, weight_decay", "f32"},
    // The schedule is Plan.lr_schedule (format 2: the baked config's).
    {"train.lr_schedule", "", "", "f32"},
    {"train.onebit_adam", "freeze_step, step_offset", "beta1, beta2, eps, weight_decay", "f32"},
    {"train.onebit_compress", "", "", "u8"},
    {"train.onebit_expand", "", "", "f32"},
    // has_compressed, has_stats: whether those inputs follow the step.
    {"train.onebit_lamb", "freeze_step, step_offset, has_compressed, has_stats",
     "beta1, beta2, eps, weight_decay, max_coeff, min_coeff, coeff_beta, factor_max, "
     "factor_min, factor_threshold", "f32"},
    // at: the optimizer step the coefficients are set on.
    {"train.onebit_lamb_scaling", "at", "", "f32"},
    // params: n, the number of parameters (of each kind of input).
    {"train.onebit_lamb_stats", "freeze_step, step_offset, has_compressed, params",
     "beta1, beta2, eps, weight_decay", "f32"},
    {"train.onebit_server", "", "", "u8"},
    // at: the optimizer step the input is zeroed on.
    {"train.reset_at", "at", "", "f32"},
    {"train.sgd", "nesterov", "momentum, dampening, weight_decay", "f32"},
    {"train.sum_sq", "", "", "f32"},
    // ZeroOneAdam's policy (dsrt::ZeroOneRule, Plan.step_rule's fields).
    {"train.zero_one_adam",
     "var_freeze_step, var_update_scaler, local_step_scaler, local_step_clipper, step_offset",
     "beta1, beta2, eps, weight_decay", "f32"},
    {"train.zero_one_payload",
     "var_freeze_step, var_update_scaler, local_step_scaler, local_step_clipper, step_offset",
     "beta1, eps, weight_decay", "f32"},
};

/// How many attributes of one kind a layout string allows.
struct AttributeCounts {
  /// Bit k set: exactly k attributes are right.
  uint64_t allowed = 0;
  /// A list whose length follows from the operands: any count passes here,
  /// the binder checks it against the shapes.
  bool operandDependent = false;
  /// Whether the string follows InstructionLayout's form (checked below).
  bool wellFormed = true;

  constexpr bool allows(size_t n) const {
    return operandDependent || (n < 64 && ((allowed >> n) & 1) != 0);
  }
};

/// The counts `layout` (an InstructionLayout's ints or floats) allows.
constexpr AttributeCounts attributeCounts(std::string_view layout) {
  AttributeCounts c{};
  size_t total = 0;      // attributes up to the current entry
  bool group = false;    // an optional group seen: only groups may follow
  size_t pos = 0;
  if (!layout.empty() && layout.back() == ',')
    c.wellFormed = false;
  while (pos < layout.size()) {
    // One entry: up to the next comma outside brackets.
    size_t end = pos;
    int depth = 0;
    while (end < layout.size() && (depth > 0 || layout[end] != ',')) {
      depth += layout[end] == '[' ? 1 : layout[end] == ']' ? -1 : 0;
      ++end;
    }
    std::string_view entry = layout.substr(pos, end - pos);
    while (!entry.empty() && entry.front() == ' ')
      entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ')
      entry.remove_suffix(1);
    if (entry.empty() || depth != 0 || total >= 64) {
      c.wellFormed = false;
    } else if (entry.front() == '[') {
      // [a, b]: the plan may stop before it, or hold all of it.
      std::string_view names =
          entry.size() >= 2 ? entry.substr(1, entry.size() - 2) : std::string_view();
      if (names.empty() || entry.back() != ']' || names.find('[') != std::string_view::npos)
        c.wellFormed = false;
      size_t n = 1;
      for (size_t k = 0; k < names.size(); ++k)
        n += names[k] == ',' ? 1 : 0;
      c.allowed |= uint64_t(1) << total;
      total += n;
      group = true;
    } else if (group) {
      c.wellFormed = false; // a required attribute after an optional one
    } else if (entry.find('[') != std::string_view::npos) {
      // name[length]
      if (entry.back() != ']')
        c.wellFormed = false;
      c.operandDependent = true;
    } else {
      ++total;
    }
    pos = end + 1;
  }
  if (total >= 64)
    c.wellFormed = false;
  else
    c.allowed |= uint64_t(1) << total;
  return c;
}

/// Whether `t` is sorted by name (instructionId's binary search), each name
/// once, and every layout string in InstructionLayout's form.
/// The dtype names a layout's `dtypes` may use.
inline constexpr std::string_view kLayoutDTypeNames[] = {"f32", "bf16", "f16", "i64", "i32",
                                                         "bool", "u8", "f64", "float", "any"};

/// `dtypes` is words of kLayoutDTypeNames, one space apart.
constexpr bool dtypesWellFormed(std::string_view list) {
  while (!list.empty()) {
    size_t end = list.find(' ');
    std::string_view word = list.substr(0, end);
    bool known = false;
    for (std::string_view name : kLayoutDTypeNames)
      known |= word == name;
    if (!known)
      return false;
    if (end == std::string_view::npos)
      break;
    list = list.substr(end + 1);
    if (list.empty())
      return false; // a trailing space
  }
  return true;
}

constexpr bool instructionLayoutsWellFormed(const InstructionLayout *t, size_t n) {
  for (size_t k = 0; k < n; ++k) {
    if (t[k].name.empty() || (k > 0 && !(t[k - 1].name < t[k].name)))
      return false;
    if (!attributeCounts(t[k].ints).wellFormed || !attributeCounts(t[k].floats).wellFormed)
      return false;
    if (!dtypesWellFormed(t[k].dtypes))
      return false;
  }
  return true;
}

/// The names of `t`, in its order.
template <size_t N>
constexpr std::array<std::string_view, N> instructionNamesOf(const InstructionLayout (&t)[N]) {
  std::array<std::string_view, N> names{};
  for (size_t k = 0; k < N; ++k)
    names[k] = t[k].name;
  return names;
}

static_assert(instructionLayoutsWellFormed(kInstructionLayouts, std::size(kInstructionLayouts)),
              "kInstructionLayouts: names sorted and unique, layouts and dtypes in "
              "InstructionLayout's form");
static_assert(std::size(kInstructionLayouts) == 102,
              "adding an instruction is a plan format change (docs/architecture.md, \"Plan "
              "format versions\"); removing one breaks older plans");

/// Every name an Instr.op may hold, sorted (kInstructionLayouts' names).
inline constexpr std::array<std::string_view, std::size(kInstructionLayouts)> kPlanInstructions =
    instructionNamesOf(kInstructionLayouts);

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

/// The attribute layout of instruction `op`, or null for a name that is
/// not an instruction.
inline const InstructionLayout *instructionLayout(std::string_view op) {
  int id = instructionId(op);
  return id < 0 ? nullptr : &kInstructionLayouts[id];
}

/// Whether instruction `op`'s data operand may hold `dtype` (a plan.proto
/// DType name, in either case): its layout's `dtypes`.
inline bool instructionTakes(std::string_view op, std::string_view dtype) {
  const InstructionLayout *l = instructionLayout(op);
  if (!l)
    return false;
  auto lower = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size())
      return false;
    for (size_t k = 0; k < a.size(); ++k)
      if ((a[k] >= 'A' && a[k] <= 'Z' ? char(a[k] - 'A' + 'a') : a[k]) != b[k])
        return false;
    return true;
  };
  constexpr std::string_view kAny[] = {"f32", "bf16", "f16", "i64", "i32", "bool", "u8", "f64"};
  std::string_view list = l->dtypes;
  while (!list.empty()) {
    size_t end = list.find(' ');
    std::string_view word = list.substr(0, end);
    list = end == std::string_view::npos ? std::string_view() : list.substr(end + 1);
    if (word == "any" || word == "float") {
      for (std::string_view d : kAny) {
        if (word == "float" && d != "f32" && d != "bf16" && d != "f16")
          continue;
        if (lower(dtype, d))
          return true;
      }
    } else if (lower(dtype, word)) {
      return true;
    }
  }
  return false;
}

} // namespace dsrt

#endif // DSRT_PLAN_INSTRUCTIONS_H
