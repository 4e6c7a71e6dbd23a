//===- DsConfig.cpp - DeepSpeed ds_config.json parsing --------------------===//
//
// Strict reader for ds_config.json. Each section is read against a table of
// the keys it may hold, so an unknown key anywhere we interpret is reported
// with its full path and the nearest known key, and values are type- and
// range-checked where they are read (Section.h). This file parses the JSON
// (duplicate keys are errors) and reads the top level; the sections'
// readers are in DsConfig{Batch,Features,Optimizer,Precision}.cpp
// (Readers.h). See DsConfig.h for the DeepSpeed rules.
//
//===----------------------------------------------------------------------===//
#include "runtime/config/DsConfig.h"
#include "runtime/config/Readers.h"

#include "runtime/io/JsonLimits.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <vector>

namespace dsrt::config {
using namespace detail;
namespace {

//===--- parsing with duplicate detection ---------------------------------===//

/// One open JSON container while parsing, to name the path of a duplicate.
struct Frame {
  bool isArray = false;
  std::vector<std::string> keys; // keys seen so far (objects)
  int64_t index = -1;            // current element (arrays)
};

std::string framePath(const std::vector<Frame> &frames, size_t upTo) {
  std::string path;
  for (size_t i = 0; i < upTo; ++i) {
    const Frame &f = frames[i];
    if (f.isArray)
      path += "[" + std::to_string(f.index) + "]";
    else if (!f.keys.empty())
      path += (path.empty() ? "" : ".") + f.keys.back();
  }
  return path;
}

/// The path of the value the parser is reading when it fails: the innermost
/// array has not counted that element yet.
std::string pendingPath(const std::vector<Frame> &frames) {
  if (frames.empty())
    return "";
  const Frame &top = frames.back();
  std::string path = framePath(frames, frames.size() - 1);
  if (top.isArray)
    return path + "[" + std::to_string(top.index + 1) + "]";
  if (top.keys.empty())
    return path;
  return path + (path.empty() ? "" : ".") + top.keys.back();
}

/// "LINE:COLUMN" of a byte offset (both 1-based), as editors count them.
std::string lineColumn(const std::string &text, size_t byte) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

/// nlohmann keeps the last of duplicate keys silently; DeepSpeed rejects them
/// (dict_raise_error_on_duplicate_keys), so a parser callback tracks the open
/// containers and throws on the second occurrence of a key.
json parseStrict(const std::string &text, const std::string &source) {
  // nlohmann recurses per level when it dumps, destroys or reports on a
  // value: bound the nesting before it sees the text.
  if (std::optional<io::JsonPosition> at =
          io::findExcessNesting(text, kMaxNesting, /*comments=*/true))
    throw ConfigError(source + ":" + std::to_string(at->line) + ":" +
                      std::to_string(at->column) +
                      ": JSON nested deeper than " +
                      std::to_string(kMaxNesting) +
                      " arrays and objects (the limit for a ds_config, whose "
                      "own keys nest 4 deep)");
  std::vector<Frame> frames;
  auto noteElement = [&frames] {
    if (!frames.empty() && frames.back().isArray)
      ++frames.back().index;
  };
  json::parser_callback_t callback = [&](int, json::parse_event_t event,
                                         json &parsed) {
    switch (event) {
    case json::parse_event_t::object_start:
    case json::parse_event_t::array_start:
      noteElement();
      frames.emplace_back();
      frames.back().isArray = event == json::parse_event_t::array_start;
      break;
    case json::parse_event_t::object_end:
    case json::parse_event_t::array_end:
      frames.pop_back();
      break;
    case json::parse_event_t::key: {
      std::string key = parsed.get<std::string>();
      Frame &top = frames.back();
      if (std::find(top.keys.begin(), top.keys.end(), key) != top.keys.end()) {
        std::string parent = framePath(frames, frames.size() - 1);
        throw ConfigError(source + ": duplicate key '" +
                          (parent.empty() ? key : parent + "." + key) + "'");
      }
      top.keys.push_back(key);
      break;
    }
    case json::parse_event_t::value:
      noteElement();
      break;
    }
    return true;
  };
  try {
    return json::parse(text, callback, /*allow_exceptions=*/true,
                       /*ignore_comments=*/true);
  } catch (const json::parse_error &e) {
    // e.byte is 1-based: the byte nlohmann stopped at.
    std::string position = lineColumn(text, e.byte == 0 ? 0 : e.byte - 1);
    // Keep nlohmann's description, without its own position prefix.
    std::string what = e.what();
    size_t at = what.find("column ");
    size_t colon = at == std::string::npos ? at : what.find(": ", at);
    std::string detail =
        colon == std::string::npos ? what : what.substr(colon + 2);
    throw ConfigError(source + ":" + position + ": JSON syntax error: " +
                      detail);
  } catch (const json::out_of_range &e) {
    // A number beyond double's range (1e400): nlohmann names only the
    // token, so the open containers give its key path.
    std::string what = e.what();
    size_t open = what.find('\''), close = what.rfind('\'');
    std::string token = open < close ? what.substr(open + 1, close - open - 1)
                                     : std::string("a number");
    std::string path = pendingPath(frames);
    throw ConfigError(source + ": " + (path.empty() ? "" : "'" + path + "': ") +
                      token + " is out of range (a number must fit in a "
                              "double)");
  } catch (const json::exception &e) {
    throw ConfigError(source + ": JSON error: " + e.what());
  }
}

//===--- top level --------------------------------------------------------===//

const std::vector<std::string> kTopLevelKeys = {
    "train_batch_size",
    "train_micro_batch_size_per_gpu",
    "gradient_accumulation_steps",
    "optimizer",
    "scheduler",
    "gradient_clipping",
    "steps_per_print",
    "wall_clock_breakdown",
    "zero_optimization",
    "pipeline",
    "fp16",
    "bf16",
    "bfloat16",
    "data_types",
    "communication_data_type",
    // Read only to reject what they ask for (below).
    "torch_autocast",
    "activation_checkpointing",
    "checkpoint",
    "tensor_parallel",
};

/// Real DeepSpeed options dsc does not implement: rejected with a message
/// that says so instead of a spelling suggestion.
const std::vector<std::string> kUnsupportedDeepSpeedKeys = {
    "amp",
    "autotuning",
    "comms_logger",
    "compression_training",
    "csv_monitor",
    "curriculum_learning",
    "data_efficiency",
    "dataloader_drop_last",
    "elasticity",
    "flops_profiler",
    "gradient_predivide_factor",
    "memory_breakdown",
    "prescale_gradients",
    "sparse_attention",
    "sparse_gradients",
    "tensorboard",
    "wandb",
    "zero_allow_untested_optimizer",
    "zero_force_ds_cpu_optimizer",
};

} // namespace

//===--- public API -------------------------------------------------------===//

bool OptimizerConfig::operator==(const OptimizerConfig &o) const {
  return type == o.type && lr == o.lr && beta1 == o.beta1 && beta2 == o.beta2 &&
         eps == o.eps && weightDecay == o.weightDecay &&
         momentum == o.momentum && dampening == o.dampening &&
         nesterov == o.nesterov && decoupled == o.decoupled &&
         biasCorrection == o.biasCorrection && torchAdam == o.torchAdam;
}

double SchedulerConfig::param(const std::string &name) const {
  auto it = params.find(name);
  if (it == params.end())
    throw ConfigError("scheduler " + type + " has no parameter '" + name + "'");
  return it->second;
}

bool SchedulerConfig::operator==(const SchedulerConfig &o) const {
  return type == o.type && params == o.params && warmupType == o.warmupType &&
         staircase == o.staircase && cycleMomentum == o.cycleMomentum;
}

bool ZeroConfig::operator==(const ZeroConfig &o) const {
  return stage == o.stage && reduceBucketSize == o.reduceBucketSize &&
         allgatherBucketSize == o.allgatherBucketSize &&
         overlapComm() == o.overlapComm() &&
         contiguousGradients == o.contiguousGradients &&
         reduceScatter == o.reduceScatter &&
         stage3PrefetchBucketSize == o.stage3PrefetchBucketSize &&
         stage3ParamPersistenceThreshold == o.stage3ParamPersistenceThreshold &&
         stage3MaxLiveParameters == o.stage3MaxLiveParameters &&
         allgatherPartitions == o.allgatherPartitions &&
         roundRobinGradients == o.roundRobinGradients &&
         subGroupSize == o.subGroupSize;
}

bool Fp16Config::operator==(const Fp16Config &o) const {
  return autoCast == o.autoCast && lossScale == o.lossScale &&
         initialScalePower == o.initialScalePower &&
         lossScaleWindow == o.lossScaleWindow && hysteresis == o.hysteresis &&
         consecutiveHysteresis == o.consecutiveHysteresis &&
         minLossScale == o.minLossScale;
}

bool PrecisionConfig::operator==(const PrecisionConfig &o) const {
  return kind == o.kind && fp16 == o.fp16 && bf16 == o.bf16 &&
         gradAccumDtype() == o.gradAccumDtype() &&
         communicationDataType() == o.communicationDataType();
}

bool TrainConfig::operator==(const TrainConfig &o) const {
  return trainBatchSize == o.trainBatchSize &&
         microBatchPerGpu == o.microBatchPerGpu &&
         gradAccumSteps == o.gradAccumSteps && worldSize == o.worldSize &&
         gradientClipping == o.gradientClipping &&
         stepsPerPrint == o.stepsPerPrint && optimizer == o.optimizer &&
         scheduler == o.scheduler && zero == o.zero && pipeline == o.pipeline &&
         precision == o.precision && wallClockBreakdown == o.wallClockBreakdown &&
         recompute == o.recompute;
}

std::optional<uint64_t> parseByteSize(const std::string &text) {
  size_t i = 0;
  uint64_t n = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (n > (std::numeric_limits<uint64_t>::max() - 9) / 10)
      return std::nullopt;
    n = n * 10 + uint64_t(text[i++] - '0');
  }
  if (i == 0)
    return std::nullopt;
  std::string unit = text.substr(i);
  static const std::pair<const char *, uint64_t> units[] = {
      {"", 1},
      {"K", 1000ull},
      {"M", 1000000ull},
      {"G", 1000000000ull},
      {"T", 1000000000000ull},
      {"KiB", 1ull << 10},
      {"MiB", 1ull << 20},
      {"GiB", 1ull << 30},
      {"TiB", 1ull << 40}};
  for (auto [name, factor] : units)
    if (unit == name) {
      if (n > std::numeric_limits<uint64_t>::max() / factor)
        return std::nullopt;
      return n * factor;
    }
  return std::nullopt;
}

const char *precisionName(Precision p) {
  switch (p) {
  case Precision::FP32:
    return "fp32";
  case Precision::BF16:
    return "bf16";
  case Precision::FP16:
    return "fp16";
  }
  return "fp32";
}

Precision precisionFromFlag(const std::string &value) {
  // Lightning's Trainer(precision=...) names (fabric precision.py
  // _PRECISION_INPUT_STR): "-mixed" keeps fp32 weights, as dsc does.
  static const std::vector<std::pair<std::string, Precision>> names = {
      {"fp32", Precision::FP32},       {"bf16", Precision::BF16},
      {"fp16", Precision::FP16},       {"32-true", Precision::FP32},
      {"bf16-mixed", Precision::BF16}, {"16-mixed", Precision::FP16},
  };
  for (const auto &[name, p] : names)
    if (value == name)
      return p;
  std::string accepted = "fp32, bf16, fp16 (or Lightning's 32-true, "
                         "bf16-mixed, 16-mixed)";
  if (value == "bf16-true" || value == "16-true" || value == "64-true")
    throw ConfigError("'" + value + "' is not supported: Lightning's -true " +
                      "modes keep the weights in that type, dsc keeps fp32 " +
                      "master weights; accepted: " + accepted);
  std::vector<std::string> all;
  for (const auto &[name, p] : names)
    all.push_back(name);
  throw ConfigError("'" + value + "' is not a precision" +
                    didYouMean(value, all) + "; accepted: " + accepted);
}

TrainConfig defaultConfig() { return TrainConfig(); }

TrainConfig parseDsConfig(const std::string &jsonText,
                          const std::string &sourceName, int64_t worldSize) {
  if (worldSize < 1)
    throw ConfigError(sourceName + ": world size must be >= 1, got " +
                      std::to_string(worldSize));
  json root = parseStrict(jsonText, sourceName);
  if (!root.is_object())
    throw ConfigError(sourceName + ": the top level must be a JSON object, " +
                      "got " + shown(root));
  Section top(sourceName, root, "");
  top.checkKeys(kTopLevelKeys, [&](const std::string &key) -> std::string {
    if (std::find(kUnsupportedDeepSpeedKeys.begin(),
                  kUnsupportedDeepSpeedKeys.end(),
                  key) != kUnsupportedDeepSpeedKeys.end())
      return "'" + key + "' is a DeepSpeed option dsc does not support";
    return "";
  });

  TrainConfig cfg;
  cfg.worldSize = worldSize;
  readBatch(top, worldSize, cfg);
  cfg.gradientClipping = top.number("gradient_clipping").value_or(0.0);
  top.atLeast("gradient_clipping", cfg.gradientClipping, 0);
  cfg.stepsPerPrint = top.count("steps_per_print", 1, kMaxSteps).value_or(0);
  if (top.has("optimizer"))
    readOptimizer(top, cfg.optimizer);
  if (top.has("scheduler"))
    readScheduler(top, cfg.optimizer, cfg.scheduler);
  if (top.has("zero_optimization"))
    readZero(top, cfg.zero);
  if (top.has("pipeline"))
    readPipeline(top, cfg.pipeline);
  cfg.wallClockBreakdown =
      top.boolean("wall_clock_breakdown").value_or(false);
  readPrecision(top, cfg.precision, cfg.notes);
  if (top.has("activation_checkpointing"))
    readActivationCheckpointing(top, cfg);
  if (top.has("checkpoint"))
    readCheckpoint(top, cfg);
  if (top.has("tensor_parallel"))
    readTensorParallel(top, cfg);
  // pipeline.activation_checkpoint_interval (DeepSpeed's PipelineModule:
  // checkpoint every k layers, 0 off).
  if (cfg.pipeline.activationCheckpointInterval > 0) {
    bool section = top.has("activation_checkpointing");
    if (section && top.object("activation_checkpointing").has("interval") &&
        cfg.recompute.interval != cfg.pipeline.activationCheckpointInterval)
      top.fail("'pipeline.activation_checkpoint_interval' and "
               "'activation_checkpointing.interval' differ: they are the same setting, give "
               "only one");
    if (cfg.recompute.mode == "none" && section &&
        top.object("activation_checkpointing").has("recompute"))
      top.fail("'pipeline.activation_checkpoint_interval' asks for checkpoints but "
               "'activation_checkpointing.recompute' is 'none'");
    if (cfg.recompute.mode == "none")
      cfg.recompute.mode = "layers";
    cfg.recompute.interval = cfg.pipeline.activationCheckpointInterval;
  }
  return cfg;
}

TrainConfig loadDsConfig(const std::string &path, int64_t worldSize) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(path + ": is a directory, not a DeepSpeed config");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ConfigError(path + ": cannot open the DeepSpeed config");
  // Read through a bound rather than by size: --config <(...) is a pipe, and
  // /dev/zero would otherwise be read until memory runs out.
  std::string text;
  char chunk[65536];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxConfigBytes)
      throw ConfigError(path + ": larger than " +
                        std::to_string(kMaxConfigBytes >> 20) +
                        " MiB, not a DeepSpeed config");
  }
  if (in.bad())
    throw ConfigError(path + ": cannot read the DeepSpeed config");
  return parseDsConfig(text, path, worldSize);
}

std::string toJson(const TrainConfig &cfg) {
  ordered_json root;
  root["train_batch_size"] = cfg.trainBatchSize;
  root["train_micro_batch_size_per_gpu"] = cfg.microBatchPerGpu;
  root["gradient_accumulation_steps"] = cfg.gradAccumSteps;
  root["gradient_clipping"] = cfg.gradientClipping;
  if (cfg.stepsPerPrint > 0)
    root["steps_per_print"] = cfg.stepsPerPrint;
  root["wall_clock_breakdown"] = cfg.wallClockBreakdown;

  const OptimizerConfig &o = cfg.optimizer;
  ordered_json op;
  op["lr"] = o.lr;
  if (o.type == "SGD") {
    op["momentum"] = o.momentum;
    op["dampening"] = o.dampening;
    op["weight_decay"] = o.weightDecay;
    op["nesterov"] = o.nesterov;
  } else {
    op["betas"] = {o.beta1, o.beta2};
    op["eps"] = o.eps;
    op["weight_decay"] = o.weightDecay;
    op["adam_w_mode"] = o.decoupled;
    op["torch_adam"] = o.torchAdam;
    if (!o.torchAdam)
      op["bias_correction"] = o.biasCorrection;
  }
  root["optimizer"] = {{"type", o.type}, {"params", op}};

  const SchedulerConfig &s = cfg.scheduler;
  if (std::optional<ordered_json> sp = schedulerParamsJson(s))
    root["scheduler"] = {{"type", s.type}, {"params", *sp}};
  const ZeroConfig &z = cfg.zero;
  ordered_json zj;
  zj["stage"] = z.stage;
  zj["overlap_comm"] = z.overlapComm();
  zj["contiguous_gradients"] = z.contiguousGradients;
  zj["reduce_scatter"] = z.reduceScatter;
  zj["reduce_bucket_size"] = z.reduceBucketSize;
  zj["allgather_bucket_size"] = z.allgatherBucketSize;
  zj["allgather_partitions"] = z.allgatherPartitions;
  zj["round_robin_gradients"] = z.roundRobinGradients;
  zj["sub_group_size"] = z.subGroupSize;
  zj["stage3_prefetch_bucket_size"] = z.stage3PrefetchBucketSize;
  zj["stage3_param_persistence_threshold"] = z.stage3ParamPersistenceThreshold;
  zj["stage3_max_live_parameters"] = z.stage3MaxLiveParameters;
  root["zero_optimization"] = zj;
  // Also without stages: a schedule or partition method asked for (the
  // plan compiled with --pp later keeps them) must read back the same.
  if (cfg.pipeline.stages > 1 || !(cfg.pipeline == PipelineConfig())) {
    ordered_json pj;
    pj["stages"] = cfg.pipeline.stages;
    pj["partition_method"] = cfg.pipeline.partitionMethod;
    pj["schedule"] = cfg.pipeline.schedule;
    root["pipeline"] = pj;
  }
  if (cfg.recompute.mode != "none" || cfg.recompute.memoryBudget) {
    ordered_json aj;
    aj["recompute"] = cfg.recompute.mode;
    if (cfg.recompute.memoryBudget)
      aj["memory_budget"] = cfg.recompute.memoryBudget;
    if (cfg.recompute.numberCheckpoints > 0)
      aj["number_checkpoints"] = cfg.recompute.numberCheckpoints;
    else
      aj["interval"] = cfg.recompute.interval;
    root["activation_checkpointing"] = aj;
  }
  const PrecisionConfig &p = cfg.precision;
  ordered_json fp16;
  fp16["enabled"] = p.kind == Precision::FP16;
  fp16["auto_cast"] = p.fp16.autoCast;
  fp16["loss_scale"] = p.fp16.lossScale;
  fp16["initial_scale_power"] = p.fp16.initialScalePower;
  fp16["loss_scale_window"] = p.fp16.lossScaleWindow;
  fp16["hysteresis"] = p.fp16.hysteresis;
  fp16["consecutive_hysteresis"] = p.fp16.consecutiveHysteresis;
  fp16["min_loss_scale"] = p.fp16.minLossScale;
  root["fp16"] = fp16;
  ordered_json bf16;
  bf16["enabled"] = p.kind == Precision::BF16;
  bf16["immediate_grad_update"] = p.bf16.immediateGradUpdate;
  bf16["check_grad_overflow"] = p.bf16.checkGradOverflow;
  root["bf16"] = bf16;
  root["data_types"] = {
      {"grad_accum_dtype", precisionName(p.gradAccumDtype())}};
  root["communication_data_type"] = precisionName(p.communicationDataType());
  return root.dump(2);
}

} // namespace dsrt::config
