//===- CompileConfig.cpp - dsc's flags and ds_config, resolved ------------===//
#include "tools/dsc/CompileConfig.h"

#include "config/CliChecks.h"

#include <CLI/CLI.hpp>

#include <algorithm>

namespace dsrt::config {

namespace {

/// --fuse's value in its one spelling: "all", "none", or the fusions of
/// kFusions it names, in that order and once each; an error names what is
/// not one.
constexpr const char *kFusions[] = {"attention", "epilogues", "optimizer"};
std::string fuseSetting(const std::string &value) {
  if (value == "all" || value == "none")
    return value;
  std::vector<bool> on(std::size(kFusions), false);
  size_t from = 0;
  while (from <= value.size()) {
    size_t comma = std::min(value.find(',', from), value.size());
    std::string part = value.substr(from, comma - from);
    auto it = std::find(std::begin(kFusions), std::end(kFusions), part);
    if (it == std::end(kFusions))
      throw ConfigError("'" + part + "' is not a fusion; give all, none, or a comma-separated "
                        "list of attention, epilogues and optimizer");
    on[size_t(it - std::begin(kFusions))] = true;
    from = comma + 1;
  }
  if (std::all_of(on.begin(), on.end(), [](bool b) { return b; }))
    return "all";
  std::string out;
  for (size_t k = 0; k < on.size(); ++k)
    if (on[k])
      out += (out.empty() ? "" : ",") + std::string(kFusions[k]);
  return out;
}

AutoValues flagAutos(const CompileFlags &f) {
  AutoValues autos;
  autos.gradAccumSteps = f.microBatches;
  autos.runLengthAtRun = true; // dsrt --steps gives total_num_steps
  if (f.precision)
    autos.precision = precisionFromFlag(*f.precision);
  return autos;
}

} // namespace

int64_t CompileInput::importBatch(const CompileFlags &flags) const {
  if (flags.batchSize)
    return flags.batchSize;
  return haveConfig && !autoMicro ? first.microBatchPerGpu : 0;
}

CompileInput readCompileInput(const CompileFlags &flags) {
  CompileInput in;
  in.haveConfig = !flags.configPath.empty();
  if (!in.haveConfig)
    return in;
  in.text = readDsConfigText(flags.configPath);
  in.autoPaths = autoKeys(in.text, flags.configPath);
  in.autoMicro = std::find(in.autoPaths.begin(), in.autoPaths.end(),
                           "train_micro_batch_size_per_gpu") != in.autoPaths.end();
  AutoValues first = flagAutos(flags);
  if (!in.autoPaths.empty()) {
    // Stand-ins for what only the model tells; read again once it is
    // imported.
    first.microBatch = flags.batchSize ? flags.batchSize : 1;
    first.hiddenSize = 1;
    first.totalSteps = 1;
  }
  in.first = parseDsConfig(in.text, flags.configPath, flags.dp, first);
  if (in.autoPaths.empty())
    in.notes = in.first.notes;
  return in;
}

TrainConfig readWithModel(const CompileFlags &f, const CompileInput &in, const ModelFacts &model,
                          std::vector<std::string> &notes) {
  if (in.autoPaths.empty())
    return in.first;
  AutoValues autos = flagAutos(f);
  if (model.batch)
    autos.microBatch = model.batch;
  autos.hiddenSize = model.hiddenSize;
  TrainConfig cfg = parseDsConfig(in.text, f.configPath, f.dp, autos);
  notes.insert(notes.end(), cfg.notes.begin(), cfg.notes.end());
  return cfg;
}

TrainConfig readForDp(const CompileFlags &f, const CompileInput &in, const ModelFacts &model,
                      int64_t dp, std::vector<std::string> &notes) {
  CompileFlags other = f;
  other.dp = dp;
  if (!in.autoPaths.empty())
    return readWithModel(other, in, model, notes);
  TrainConfig cfg = parseDsConfig(in.text, f.configPath, dp, flagAutos(other));
  notes.insert(notes.end(), cfg.notes.begin(), cfg.notes.end());
  return cfg;
}

TrainConfig applyCompileFlags(TrainConfig cfg, const CompileFlags &f, const CompileInput &in,
                              const ModelFacts &model) {
  if (in.haveConfig && model.batch && model.batch != cfg.microBatchPerGpu)
    throw ConfigError(f.configPath + ": train_micro_batch_size_per_gpu is " +
                      std::to_string(cfg.microBatchPerGpu) +
                      " but the model's inputs have batch size " + std::to_string(model.batch) +
                      " (export the model with that batch, or with a dynamic batch dimension)");
  if (!in.haveConfig) {
    // No ds_config: the model's batch is the micro-batch, one per step,
    // and DeepSpeed's defaults for the rest (AdamW, lr 1e-3).
    cfg = defaultConfig();
    cfg.microBatchPerGpu = model.batch ? model.batch : 1;
    cfg.gradAccumSteps = 1;
    cfg.worldSize = f.dp;
    cfg.trainBatchSize = cfg.microBatchPerGpu * f.dp;
  }
  if (f.zeroStage)
    cfg.zero.stage = int(*f.zeroStage);
  if (f.pp)
    cfg.pipeline.stages = *f.pp;
  if (f.tp)
    cfg.tensorParallel = *f.tp;
  if (f.sequenceParallel) {
    if (cfg.tensorParallel < 2)
      throw ConfigError("--sequence-parallel splits the tokens over the tensor-parallel group: "
                        "give --tp 2 or more (or tensor_parallel.autotp_size)");
    cfg.sequenceParallel = true;
  }
  if (f.schedule)
    cfg.pipeline.schedule = *f.schedule;
  if (f.partition)
    cfg.pipeline.partitionMethod = *f.partition;
  // The flag wins over the config's bf16.enabled / fp16.enabled.
  if (f.precision)
    cfg.precision.kind = precisionFromFlag(*f.precision);
  if (f.recompute)
    cfg.recompute.mode = *f.recompute;
  if (f.fuse)
    cfg.fuse = fuseSetting(*f.fuse);
  if (f.memoryBudget)
    cfg.recompute.memoryBudget = *f.memoryBudget;
  if (cfg.recompute.mode == "auto" && !cfg.recompute.memoryBudget)
    throw ConfigError("--recompute auto needs --memory-budget (or the config's "
                      "activation_checkpointing.memory_budget): auto chooses what to recompute "
                      "to fit it");
  // Gradients accumulate in fp32 unless data_types.grad_accum_dtype says
  // bf16 / fp16 (DeepSpeed >= 0.17.5 defaults to the model's dtype; dsc
  // keeps BF16_Optimizer's fp32). A 16-bit sum is supported where the
  // gradients are summed before any reduction.
  if (auto setting = cfg.precision.gradAccumDtypeSetting;
      setting && *setting != Precision::FP32 &&
      (cfg.zero.stage >= 2 || cfg.pipeline.stages > 1))
    throw ConfigError((in.haveConfig ? f.configPath : std::string("--config")) +
                      ": data_types.grad_accum_dtype " + precisionName(*setting) +
                      " is supported with ZeRO stages 0-1 without a pipeline (stages 2-3 "
                      "reduce-scatter each micro-batch's gradient and pipelines sum them in "
                      "their schedule, both in fp32); give \"fp32\" or leave it out");
  // DeepSpeed reads offload_param only at stage 3 (and ignores it below):
  // only there are the parameters each rank's shards, read by gathers.
  if (cfg.zero.offloadParam != ZeroConfig::OffloadDevice::None && cfg.zero.stage != 3)
    throw ConfigError(
        (in.haveConfig ? f.configPath : std::string("--config")) +
        ": zero_optimization.offload_param (device \"" +
        (cfg.zero.offloadParam == ZeroConfig::OffloadDevice::Cpu ? "cpu" : "nvme") +
        "\") offloads ZeRO-3's parameter shards: it needs ZeRO stage 3, this plan has stage " +
        std::to_string(cfg.zero.stage) + (f.zeroStage ? " (--zero)" : "") +
        " (DeepSpeed ignores it below stage 3; dsc does not accept what it would ignore): set "
        "zero_optimization.stage to 3 (or --zero 3), or remove offload_param");
  // LAMB's trust ratio reads the whole tensor's moments before its update
  // writes them; the offload tiers fetch a state for its update alone.
  if (cfg.optimizer.type == "Lamb" && cfg.zero.offloadOptimizer != ZeroConfig::OffloadDevice::None)
    throw ConfigError((in.haveConfig ? f.configPath : std::string("--config")) +
                      ": optimizer Lamb with zero_optimization.offload_optimizer: dsc does not "
                      "offload LAMB's moments yet (its trust ratio reads them before the update "
                      "that the offload tier fetches them for; DeepSpeed has no CPU LAMB "
                      "either). Keep the optimizer states on the device (remove "
                      "offload_optimizer), or use Adam, AdamW, SGD, Lion or Adagrad with it");
  // The 1-bit optimizers keep error-feedback buffers that every step's
  // compression reads and writes beside the moments (and 0/1 Adam's local
  // steps read them between updates): the offload tiers fetch a state for
  // its update alone. DeepSpeed's 1-bit optimizers have no offload either.
  const std::string &opt = cfg.optimizer.type;
  if ((opt == "OneBitAdam" || opt == "ZeroOneAdam" || opt == "OneBitLamb") &&
      (cfg.zero.offloadOptimizer != ZeroConfig::OffloadDevice::None ||
       cfg.zero.offloadParam != ZeroConfig::OffloadDevice::None))
    throw ConfigError((in.haveConfig ? f.configPath : std::string("--config")) +
                      ": optimizer " + opt + " with zero_optimization." +
                      (cfg.zero.offloadOptimizer != ZeroConfig::OffloadDevice::None
                           ? "offload_optimizer"
                           : "offload_param") +
                      ": dsc does not offload a 1-bit optimizer's state (its compression "
                      "reads and writes the error-feedback buffers beside the moments every "
                      "step; DeepSpeed's 1-bit optimizers do not offload either). Keep the "
                      "state on the device (remove the offload section), or use Adam or "
                      "AdamW with offload");
  if ((f.schedule || f.partition) && cfg.pipeline.stages <= 1)
    throw ConfigError(std::string(f.schedule ? "--schedule" : "--partition") +
                      ": applies to a pipeline; give --pp P (or pipeline.stages in the "
                      "config) with P >= 2");
  if (f.microBatches && cfg.elastic.enabled)
    throw ConfigError("--micro-batches: " + f.configPath +
                      " enables elasticity, which decides gradient_accumulation_steps (" +
                      std::to_string(cfg.gradAccumSteps) + " on " +
                      std::to_string(cfg.worldSize) + " data-parallel ranks); leave it out");
  // Micro-batches: --micro-batches, else gradient_accumulation_steps; a
  // pipeline compiled without a config runs 2 x pp of them.
  int64_t m = f.microBatches                             ? *f.microBatches
              : (!in.haveConfig && cfg.pipeline.stages > 1) ? 2 * cfg.pipeline.stages
                                                          : cfg.gradAccumSteps;
  if (m != cfg.gradAccumSteps) {
    cfg.gradAccumSteps = m;
    cfg.trainBatchSize = cfg.microBatchPerGpu * m * cfg.worldSize;
  }
  return cfg;
}

TrainConfig resolveCompileConfig(const CompileFlags &f, const CompileInput &in,
                                 const ModelFacts &model, std::vector<std::string> &notes) {
  return applyCompileFlags(readWithModel(f, in, model, notes), f, in, model);
}

void addStepOptions(CLI::App &app, CompileFlags &flags) {
  app.add_option("--micro-batches", flags.microBatches,
                 "micro-batches per step (overrides gradient_accumulation_steps; with --pp "
                 "and no config the default is 2 x pp)")
      ->check(cli::integer<int64_t>(1, kMaxGradAccumSteps));
  app.add_option("--schedule", flags.schedule,
                 "pipeline schedule: 1f1b (the default) or zb-h1 (zero-bubble H1)")
      ->check(CLI::IsMember({"1f1b", "zb-h1"}));
  app.add_option("--partition", flags.partition,
                 "pipeline partition method: cost (the default), parameters or uniform")
      ->check(CLI::IsMember({"uniform", "parameters", "cost"}));
  app.add_option("--fuse", flags.fuse,
                 "kernel fusion beyond the layout folds: all (the default), none (the exported "
                 "ops as they are), or a comma-separated list of attention (scaled dot-product "
                 "attention as one op that keeps no T x T scores), epilogues (each GEMM's bias "
                 "and residual added in its epilogue, the GELU's gradient multiplied into "
                 "its GEMM, a bias gradient summed by its GEMM) and optimizer (one Adam update over all "
                 "parameters, with the clipping and the gradients' casts folded in)")
      ->check(CLI::Validator(
          [](std::string &v) {
            try {
              fuseSetting(v);
            } catch (const ConfigError &e) {
              return std::string(e.what());
            }
            return std::string();
          },
          "FUSIONS"));
}

} // namespace dsrt::config
