//===- CompileConfig.h - dsc's flags and ds_config, resolved ----*- C++ -*-===//
//
// What dsc compiles is decided by its flags and the ds_config together:
// DeepSpeed's defaults, the config's values, its "auto" values filled in
// from the flags and the model, then the flags that override the config,
// and the combinations that cannot compile refused with the flag or key.
// Two phases, because a dynamic batch dimension takes the configured
// micro-batch while an "auto" micro-batch takes the model's:
//
//   CompileInput in = readCompileInput(flags);       // before the import
//   ... import the model with in.importBatch(flags) ...
//   TrainConfig cfg = resolveCompileConfig(flags, in, model, notes);
//
// Both throw ConfigError with the message dsc prints after "dsc: error: ".
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_CONFIG_COMPILECONFIG_H
#define DSRT_CONFIG_COMPILECONFIG_H

#include "config/DsConfig.h"

#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace dsrt::config {

/// dsc's flags that decide the training step (each already checked alone by
/// the command line's validators).
struct CompileFlags {
  std::string configPath; // --config ("": none)
  int64_t dp = 1;         // --dp
  int64_t batchSize = 0;  // --batch-size (0: not given)
  std::optional<int64_t> zeroStage, pp, tp, microBatches;
  bool sequenceParallel = false;
  std::optional<std::string> schedule, partition, precision, recompute, fuse;
  std::optional<uint64_t> memoryBudget; // --memory-budget, bytes
};

/// Adds the pipeline and kernel-fusion flags (--micro-batches, --schedule,
/// --partition, --fuse) to dsc's command line.
void addStepOptions(CLI::App &app, CompileFlags &flags);

/// What the model tells (after its import).
struct ModelFacts {
  int64_t batch = 0; // the batch dimension of its inputs (0: none)
  std::optional<int64_t> hiddenSize;
};

/// The config as read before the model is imported.
struct CompileInput {
  bool haveConfig = false;
  std::string text;                   // the ds_config's JSON
  std::vector<std::string> autoPaths; // its "auto" keys
  bool autoMicro = false;             // the micro-batch is "auto" or not given
  TrainConfig first;                  // read with stand-ins for the model's values
  std::vector<std::string> notes;     // the first reading's (when nothing is "auto")
  /// The batch a dynamic batch dimension of the model's inputs takes
  /// (0: none, keep it dynamic).
  int64_t importBatch(const CompileFlags &flags) const;
};

/// Reads --config (when given) a first time. Throws ConfigError.
CompileInput readCompileInput(const CompileFlags &flags);

/// The config read again with the model's values for its "auto" keys (its
/// notes appended to `notes`); the first reading when nothing is "auto".
TrainConfig readWithModel(const CompileFlags &flags, const CompileInput &input,
                          const ModelFacts &model, std::vector<std::string> &notes);

/// The config read as for --dp `dp` (an elastic plan's smaller size).
TrainConfig readForDp(const CompileFlags &flags, const CompileInput &input,
                      const ModelFacts &model, int64_t dp, std::vector<std::string> &notes);

/// `cfg` (readWithModel's) for a training step: the model's batch checked
/// against the config's micro-batch, dsc's defaults without a config, the
/// flags' overrides and the checks of their combination.
TrainConfig applyCompileFlags(TrainConfig cfg, const CompileFlags &flags,
                              const CompileInput &input, const ModelFacts &model);

/// Both: the configuration dsc compiles: the config read with the model's values
/// for its "auto" keys (its notes appended to `notes`), or dsc's defaults
/// without one, then the flags' overrides and the checks of their
/// combination. Throws ConfigError.
TrainConfig resolveCompileConfig(const CompileFlags &flags, const CompileInput &input,
                                 const ModelFacts &model, std::vector<std::string> &notes);

} // namespace dsrt::config

#endif // DSRT_CONFIG_COMPILECONFIG_H
