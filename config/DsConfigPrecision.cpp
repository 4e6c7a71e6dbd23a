//===- DsConfigPrecision.cpp - ds_config fp16 / bf16 / data_types -===//
//
// The mixed-precision sections (fp16, bf16, data_types, torch_autocast).
//
//===----------------------------------------------------------------------===//
#include "config/Readers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace dsrt::config::detail {

//===--- mixed precision --------------------------------------------------===//

/// DeepSpeed's spellings of the three dtypes (config.py DtypeEnum, which
/// data_types.grad_accum_dtype goes through; case-sensitive there).
std::optional<Precision> dtypeFromDeepSpeedName(const std::string &name) {
  static const std::vector<std::pair<std::string, Precision>> names = {
      {"fp32", Precision::FP32},           {"float32", Precision::FP32},
      {"float", Precision::FP32},          {"torch.float32", Precision::FP32},
      {"bf16", Precision::BF16},           {"bfloat16", Precision::BF16},
      {"torch.bfloat16", Precision::BF16}, {"fp16", Precision::FP16},
      {"float16", Precision::FP16},        {"half", Precision::FP16},
      {"torch.float16", Precision::FP16},
  };
  for (const auto &[spelling, dtype] : names)
    if (name == spelling)
      return dtype;
  return std::nullopt;
}

const std::vector<std::string> kDtypeNames = {"fp32", "bf16", "fp16"};

/// A dtype-valued key whose DeepSpeed default is None: absent or null
/// leaves `field` unset. `caseInsensitive`: communication_data_type is
/// lower-cased by DeepSpeed and takes only the three short names.
void readDtype(const Section &section, const std::string &key,
               bool caseInsensitive, std::optional<Precision> &field) {
  if (!section.has(key) || section.raw(key).is_null())
    return;
  std::string name = *section.string(key);
  std::optional<Precision> dtype;
  if (caseInsensitive) {
    for (Precision p : {Precision::FP32, Precision::BF16, Precision::FP16})
      if (lower(name) == precisionName(p))
        dtype = p;
  } else {
    dtype = dtypeFromDeepSpeedName(name);
  }
  if (!dtype)
    section.fail("'" + section.path(key) + "' is \"" + name + "\"" +
                 didYouMean(name, kDtypeNames) +
                 "; supported: " + join(kDtypeNames));
  field = dtype;
}

/// A DeepSpeed boolean dsc does not honour: its default (false) is
/// accepted, true is an error giving `reason`.
void refuseTrue(const Section &section, const std::string &key,
                const std::string &reason) {
  if (section.boolean(key).value_or(false))
    section.fail("'" + section.path(key) + "' is not supported by dsc: " +
                 reason + "; remove it or set false");
}

/// "fp16" (DeepSpeedFP16Config). Every value is range-checked whether or
/// not fp16 is enabled: dsc --precision fp16 may enable it later.
void readFp16(const Section &top, Fp16Config &f, bool &enabled,
              std::vector<std::string> &notes) {
  Section fp16 = top.object("fp16");
  fp16.checkKeys({"enabled", "auto_cast", "loss_scale", "initial_scale_power",
                  "loss_scale_window", "hysteresis", "consecutive_hysteresis",
                  "min_loss_scale", "fp16_master_weights_and_grads"});
  enabled = fp16.boolean("enabled").value_or(false);
  f.autoCast = fp16.boolean("auto_cast").value_or(f.autoCast);
  if (fp16.has("auto_cast"))
    notes.push_back("'" + fp16.path("auto_cast") +
                    "' changes nothing in dsc: dsrt feeds the model's float inputs in "
                    "fp32 and the mixed-precision pass casts them where an fp16 op reads "
                    "them, with auto_cast true or false");
  f.lossScale = fp16.number("loss_scale").value_or(f.lossScale);
  fp16.atLeast("loss_scale", f.lossScale, 0);
  f.initialScalePower =
      fp16.count("initial_scale_power", kMinScalePower, kMaxScalePower)
          .value_or(f.initialScalePower);
  f.lossScaleWindow =
      fp16.count("loss_scale_window", 1, kMaxSteps).value_or(f.lossScaleWindow);
  f.hysteresis = fp16.count("hysteresis", 1, kMaxSteps).value_or(f.hysteresis);
  f.consecutiveHysteresis =
      fp16.boolean("consecutive_hysteresis").value_or(f.consecutiveHysteresis);
  f.minLossScale = fp16.count("min_loss_scale", 1, kMaxMinLossScale)
                       .value_or(f.minLossScale);
  refuseTrue(fp16, "fp16_master_weights_and_grads",
             "dsc keeps the master weights and gradients in fp32 (DeepSpeed "
             "keeps them in fp16 only with ZeRO-Offload and DeepSpeedCPUAdam)");
}

/// "bf16" or its older name "bfloat16" (DeepSpeedBF16Config).
void readBf16(const Section &top, const std::string &name, Bf16Config &b,
              bool &enabled, std::vector<std::string> &notes) {
  Section bf16 = top.object(name);
  bf16.checkKeys({"enabled", "immediate_grad_update", "check_grad_overflow",
                  "bf16_master_weights_and_grads", "bf16_optimizer_states"});
  enabled = bf16.boolean("enabled").value_or(false);
  b.immediateGradUpdate =
      bf16.boolean("immediate_grad_update").value_or(b.immediateGradUpdate);
  b.checkGradOverflow =
      bf16.boolean("check_grad_overflow").value_or(b.checkGradOverflow);
  if (bf16.has("immediate_grad_update"))
    notes.push_back("'" + bf16.path("immediate_grad_update") +
                    "' changes nothing in dsc: every micro-batch's gradients are added to "
                    "the fp32 accumulators as the step's plan orders them (the memory plan "
                    "decides when the bf16 gradients are freed)");
  if (bf16.has("check_grad_overflow"))
    notes.push_back("'" + bf16.path("check_grad_overflow") +
                    "' changes nothing in dsc: a bf16 run always checks the gradient norm "
                    "and stops at the first non-finite one, keeping the last finite weights "
                    "(bf16 has no loss scale to lower, so an overflow means divergence; "
                    "DeepSpeed >= 0.19.3 skips the step instead)");
  refuseTrue(bf16, "bf16_master_weights_and_grads",
             "dsc keeps the master weights and gradients in fp32");
  refuseTrue(bf16, "bf16_optimizer_states",
             "dsc keeps the optimizer states in fp32");
}

/// "data_types": grad_accum_dtype. param_dtype and buffer_dtype (FSDP's
/// MixedPrecisionPolicy) are accepted only as their default, null.
void readDataTypes(const Section &top, PrecisionConfig &p) {
  Section types = top.object("data_types");
  types.checkKeys({"grad_accum_dtype", "param_dtype", "buffer_dtype"});
  readDtype(types, "grad_accum_dtype", /*caseInsensitive=*/false,
            p.gradAccumDtypeSetting);
  for (const char *key : {"param_dtype", "buffer_dtype"})
    if (types.has(key) && !types.raw(key).is_null())
      types.fail("'" + types.path(key) +
                 "' is not supported by dsc: parameters compute in the "
                 "precision bf16/fp16 enables and buffers keep the model's "
                 "dtype; remove it or set null");
}

/// DeepSpeed's torch_autocast wraps the forward in torch.autocast; dsc has
/// no such per-module mode (bf16/fp16 are its mixed precision), so a section
/// that enables it is an error; one that asks for nothing is accepted.
void readTorchAutocast(const Section &top) {
  Section section = top.object("torch_autocast");
  section.checkKeys({"enabled", "dtype", "lower_precision_safe_modules"});
  if (section.boolean("enabled").value_or(false))
    section.fail("'" + section.path("enabled") +
                 "' is true, but dsc has no torch.autocast mode; use \"bf16\": "
                 "{\"enabled\": true} (or fp16) for mixed precision, and "
                 "remove the section or set \"enabled\": false");
}

void readPrecision(const Section &top, PrecisionConfig &p, std::vector<std::string> &notes) {
  if (top.has("bf16") && top.has("bfloat16"))
    top.fail("'bf16' and 'bfloat16' are the same section (DeepSpeed's older "
             "name): give only one");
  bool fp16 = false, bf16 = false;
  if (top.has("fp16"))
    readFp16(top, p.fp16, fp16, notes);
  std::string bf16Name = top.has("bfloat16") ? "bfloat16" : "bf16";
  if (top.has(bf16Name))
    readBf16(top, bf16Name, p.bf16, bf16, notes);
  // config.py: "bfloat16 and fp16 modes cannot be simultaneously enabled".
  if (fp16 && bf16)
    top.fail("'" + bf16Name + ".enabled' and 'fp16.enabled' are both true: "
             "bf16 and fp16 mixed precision cannot both be enabled; set one "
             "to false");
  p.kind = fp16 ? Precision::FP16 : bf16 ? Precision::BF16 : Precision::FP32;
  if (top.has("data_types"))
    readDataTypes(top, p);
  readDtype(top, "communication_data_type", /*caseInsensitive=*/true,
            p.communicationDataTypeSetting);
  if (top.has("torch_autocast"))
    readTorchAutocast(top);
}

} // namespace dsrt::config::detail
