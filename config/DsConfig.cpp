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
#include "config/DsConfig.h"
#include "config/KeyTable.h"
#include "config/Readers.h"

#include "io/JsonLimits.h"

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

} // namespace

/// nlohmann keeps the last of duplicate keys silently; DeepSpeed rejects them
/// (dict_raise_error_on_duplicate_keys), so a parser callback tracks the open
/// containers and throws on the second occurrence of a key.
json detail::parseStrict(const std::string &text, const std::string &source) {
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

namespace {

//===--- hjson's leniencies ------------------------------------------------===//

/// DeepSpeed reads configs with hjson, which takes a comma before a closing
/// bracket; real configs have them (a pipeline example in DeepSpeedExamples).
/// Each such comma becomes a space, so positions in later errors stay right.
/// Strings and comments are skipped as the parser will skip them.
std::string dropTrailingCommas(const std::string &text) {
  std::string out = text;
  enum class State { Json, String, Escape, LineComment, BlockComment } state = State::Json;
  size_t pendingComma = std::string::npos;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i], next = i + 1 < text.size() ? text[i + 1] : '\0';
    switch (state) {
    case State::String:
      state = c == '\\' ? State::Escape : c == '"' ? State::Json : State::String;
      continue;
    case State::Escape:
      state = State::String;
      continue;
    case State::LineComment:
      if (c == '\n')
        state = State::Json;
      continue;
    case State::BlockComment:
      if (c == '*' && next == '/') {
        state = State::Json;
        ++i;
      }
      continue;
    case State::Json:
      break;
    }
    if (c == '/' && next == '/') {
      state = State::LineComment;
      ++i;
    } else if (c == '/' && next == '*') {
      state = State::BlockComment;
      ++i;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      // whitespace keeps a pending comma pending
    } else if ((c == '}' || c == ']') && pendingComma != std::string::npos) {
      out[pendingComma] = ' ';
      pendingComma = std::string::npos;
    } else {
      pendingComma = c == ',' ? i : std::string::npos;
      if (c == '"')
        state = State::String;
    }
  }
  return out;
}

/// The unquoted word at `byte` (an identifier, not true/false/null), if
/// the parser stopped on one: a template placeholder such as CONFIG_CL_MIN
/// that a launch script fills in with sed.
std::optional<std::string> bareWordAt(const std::string &text, size_t byte) {
  size_t b = byte;
  auto isWord = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  while (b > 0 && isWord(text[b - 1]))
    --b;
  size_t e = b;
  while (e < text.size() && isWord(text[e]))
    ++e;
  if (e == b || std::isdigit(static_cast<unsigned char>(text[b])))
    return std::nullopt;
  std::string word = text.substr(b, e - b);
  if (word == "true" || word == "false" || word == "null")
    return std::nullopt;
  return word;
}

} // namespace

std::string readDsConfigText(const std::string &path) {
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
      throw ConfigError(path + ": larger than " + std::to_string(kMaxConfigBytes >> 20) +
                        " MiB, not a DeepSpeed config");
  }
  if (in.bad())
    throw ConfigError(path + ": cannot read the DeepSpeed config");
  return text;
}

namespace {

/// The text parsed as DeepSpeed reads it (JSON with comments and trailing
/// commas), its top level an object.
json parseRoot(const std::string &jsonText, const std::string &sourceName) {
  std::string text = dropTrailingCommas(jsonText);
  json root;
  try {
    root = parseStrict(text, sourceName);
  } catch (const ConfigError &e) {
    // A placeholder: say so rather than "invalid literal".
    std::string what = e.what();
    size_t colon = what.find(": JSON syntax error");
    if (colon != std::string::npos) {
      std::string pos = what.substr(sourceName.size() + 1, colon - sourceName.size() - 1);
      size_t sep = pos.find(':');
      if (sep != std::string::npos) {
        size_t line = std::stoul(pos.substr(0, sep)), column = std::stoul(pos.substr(sep + 1));
        size_t byte = 0;
        for (size_t l = 1; l < line && byte < text.size(); ++byte)
          if (text[byte] == '\n')
            ++l;
        byte += column - 1;
        if (byte < text.size())
          if (std::optional<std::string> word = bareWordAt(text, byte))
            throw ConfigError(sourceName + ":" + pos + ": unquoted word '" + *word +
                              "': a template placeholder that a launch script fills in "
                              "(hjson would read it as the string \"" + *word +
                              ",\" and DeepSpeed fail later); substitute the value first");
      }
    }
    throw;
  }
  if (!root.is_object())
    throw ConfigError(sourceName + ": the top level must be a JSON object, " + "got " +
                      shown(root));
  return root;
}

void collectAuto(const json &obj, const std::string &path, std::vector<std::string> &out) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    std::string p = path.empty() ? it.key() : path + "." + it.key();
    if (it.value().is_object())
      collectAuto(it.value(), p, out);
    else if (it.value().is_string() && it.value() == "auto")
      out.push_back(p);
  }
}

} // namespace

//===--- public API -------------------------------------------------------===//

bool OptimizerConfig::operator==(const OptimizerConfig &o) const {
  return type == o.type && lr == o.lr && beta1 == o.beta1 && beta2 == o.beta2 &&
         eps == o.eps && weightDecay == o.weightDecay &&
         momentum == o.momentum && dampening == o.dampening &&
         nesterov == o.nesterov && decoupled == o.decoupled &&
         biasCorrection == o.biasCorrection && torchAdam == o.torchAdam &&
         maxCoeff == o.maxCoeff && minCoeff == o.minCoeff && lrDecay == o.lrDecay &&
         freezeStep == o.freezeStep && varUpdateScaler == o.varUpdateScaler &&
         localStepScaler == o.localStepScaler && localStepClipper == o.localStepClipper &&
         coeffBeta == o.coeffBeta && factorMax == o.factorMax && factorMin == o.factorMin &&
         factorThreshold == o.factorThreshold;
}

double SchedulerConfig::param(const std::string &name) const {
  auto it = params.find(name);
  if (it == params.end())
    throw ConfigError("scheduler " + type + " has no parameter '" + name + "'");
  return it->second;
}

bool SchedulerConfig::operator==(const SchedulerConfig &o) const {
  if (totalStepsFromRun != o.totalStepsFromRun)
    return false;
  // A stand-in total_num_steps does not compare.
  std::map<std::string, double> a = params, b = o.params;
  if (totalStepsFromRun) {
    a.erase("total_num_steps");
    b.erase("total_num_steps");
  }
  return type == o.type && a == b && warmupType == o.warmupType &&
         staircase == o.staircase && cycleMomentum == o.cycleMomentum;
}

bool ZeroConfig::operator==(const ZeroConfig &o) const {
  return stage == o.stage && reduceBucketSize == o.reduceBucketSize &&
         allgatherBucketSize == o.allgatherBucketSize &&
         overlapComm() == o.overlapComm() &&
         stage3PrefetchBucketSize == o.stage3PrefetchBucketSize &&
         stage3ParamPersistenceThreshold == o.stage3ParamPersistenceThreshold &&
         stage3MaxLiveParameters == o.stage3MaxLiveParameters &&
         subGroupSize == o.subGroupSize && offloadOptimizer == o.offloadOptimizer &&
         offloadNvmePath == o.offloadNvmePath && offloadParam == o.offloadParam &&
         offloadParamNvmePath == o.offloadParamNvmePath && pipelineRead == o.pipelineRead &&
         pipelineWrite == o.pipelineWrite;
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
         checkpointNodeLocal == o.checkpointNodeLocal && elastic == o.elastic &&
         recompute == o.recompute && tensorParallel == o.tensorParallel && aio == o.aio &&
         csvMonitor == o.csvMonitor && tensorboard == o.tensorboard &&
         commsLogger == o.commsLogger && flopsProfiler == o.flopsProfiler;
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
      {"KB", 1000ull},
      {"MB", 1000000ull},
      {"GB", 1000000000ull},
      {"TB", 1000000000000ull},
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

std::vector<std::string> autoKeys(const std::string &jsonText, const std::string &sourceName) {
  std::vector<std::string> out;
  json root = parseRoot(jsonText, sourceName);
  collectAuto(root, "", out);
  // No batch size at all: the micro-batch is filled in too (unless an
  // enabled elasticity section chooses it).
  bool elastic = root.contains("elasticity") && root["elasticity"].is_object() &&
                 root["elasticity"].value("enabled", false) == true;
  if (!root.contains("train_batch_size") && !root.contains("train_micro_batch_size_per_gpu") &&
      !elastic)
    out.push_back("train_micro_batch_size_per_gpu");
  return out;
}

TrainConfig parseDsConfig(const std::string &jsonText, const std::string &sourceName,
                          int64_t worldSize, const AutoValues &autos) {
  if (worldSize < 1)
    throw ConfigError(sourceName + ": world size must be >= 1, got " +
                      std::to_string(worldSize));
  TrainConfig cfg;
  cfg.worldSize = worldSize;
  // The key table first: what remains is what the section readers read.
  bool totalFromRun = false;
  json root = checkAgainstKeyTable(parseRoot(jsonText, sourceName), sourceName, autos, cfg.notes,
                                   totalFromRun);
  Section top(sourceName, root, "");
  std::vector<std::string> implemented;
  for (const std::string &key : childKeys(""))
    if (findKey(key)->kind == KeyKind::Implemented)
      implemented.push_back(key);
  top.checkKeys(implemented);

  // An enabled elasticity section decides the batch (DeepSpeed's rules).
  if (!readElasticity(top, worldSize, cfg, cfg.notes))
    readBatch(top, worldSize, cfg);
  cfg.gradientClipping = top.number("gradient_clipping").value_or(cfg.gradientClipping);
  top.atLeast("gradient_clipping", cfg.gradientClipping, 0);
  cfg.stepsPerPrint = top.count("steps_per_print", 1, kMaxSteps).value_or(0);
  if (top.has("optimizer"))
    readOptimizer(top, cfg.optimizer, cfg.notes);
  if (top.has("scheduler"))
    readScheduler(top, cfg.optimizer, cfg.scheduler);
  cfg.scheduler.totalStepsFromRun = totalFromRun;
  readZero(top, cfg.zero, cfg.notes);
  readAio(top, cfg.aio);
  // The aio section tunes the NVMe tier's requests: without a tier it
  // changes nothing, which is said rather than accepted silently.
  if (top.has("aio") && cfg.zero.nvmeTierPath().empty())
    cfg.notes.push_back("'aio' sets how the NVMe tier's requests reach the disk, and this "
                        "config offloads nothing to NVMe (zero_optimization.offload_optimizer "
                        "or offload_param with device \"nvme\"): it changes nothing");
  if (top.has("pipeline"))
    readPipeline(top, cfg.pipeline);
  cfg.wallClockBreakdown =
      top.boolean("wall_clock_breakdown").value_or(false);
  readPrecision(top, cfg.precision, cfg.notes);
  // engine.py _do_sanity_check: "DeepSpeed {Lamb, OneBitLamb} optimizer
  // requires dynamic loss scaling" (fp16's loss_scale 0).
  if ((cfg.optimizer.type == "Lamb" || cfg.optimizer.type == "OneBitLamb") &&
      cfg.precision.kind == Precision::FP16 && !cfg.precision.fp16.dynamicLossScale())
    top.object("fp16").fail("'fp16.loss_scale' is " +
                            formatNumber(cfg.precision.fp16.lossScale) + ": DeepSpeed's " +
                            cfg.optimizer.type +
                            " optimizer requires dynamic loss scaling (DeepSpeed asserts the "
                            "same); set it to 0");
  if (top.has("activation_checkpointing"))
    readActivationCheckpointing(top, cfg);
  if (top.has("checkpoint"))
    readCheckpoint(top, cfg);
  if (top.has("csv_monitor"))
    readMonitor(top, "csv_monitor", cfg.csvMonitor);
  if (top.has("tensorboard"))
    readMonitor(top, "tensorboard", cfg.tensorboard);
  if (top.has("comms_logger"))
    readCommsLogger(top, cfg.commsLogger);
  if (top.has("flops_profiler"))
    readFlopsProfiler(top, cfg.flopsProfiler);
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

TrainConfig loadDsConfig(const std::string &path, int64_t worldSize, const AutoValues &autos) {
  return parseDsConfig(readDsConfigText(path), path, worldSize, autos);
}

std::string toJson(const TrainConfig &cfg) {
  ordered_json root;
  if (const ElasticConfig &e = cfg.elastic; e.enabled) {
    // The section decides the batch keys, which it would refuse beside it.
    root["elasticity"] = {{"enabled", true},
                          {"max_train_batch_size", e.maxTrainBatch},
                          {"micro_batch_sizes", e.microBatchSizes},
                          {"min_gpus", e.minGpus},
                          {"max_gpus", e.maxGpus},
                          {"min_time", e.minTime},
                          {"version", e.version},
                          {"prefer_larger_batch", e.preferLargerBatch},
                          {"model_parallel_size", e.modelParallelSize},
                          {"num_gpus_per_node", e.gpusPerNode}};
  } else {
    root["train_batch_size"] = cfg.trainBatchSize;
    root["train_micro_batch_size_per_gpu"] = cfg.microBatchPerGpu;
    root["gradient_accumulation_steps"] = cfg.gradAccumSteps;
  }
  root["gradient_clipping"] = cfg.gradientClipping;
  if (cfg.stepsPerPrint > 0)
    root["steps_per_print"] = cfg.stepsPerPrint;
  root["wall_clock_breakdown"] = cfg.wallClockBreakdown;
  if (cfg.checkpointNodeLocal)
    root["checkpoint"] = {{"use_node_local_storage", true}};
  for (auto [key, m] : {std::pair{"csv_monitor", &cfg.csvMonitor},
                        std::pair{"tensorboard", &cfg.tensorboard}})
    if (m->enabled)
      root[key] = {{"enabled", true}, {"output_path", m->outputPath}, {"job_name", m->jobName}};
  if (const CommsLoggerConfig &c = cfg.commsLogger; c.enabled)
    root["comms_logger"] = {{"enabled", true}, {"verbose", c.verbose}, {"prof_all", c.profAll},
                            {"prof_ops", c.profOps}, {"debug", c.debug}};
  if (const FlopsProfilerConfig &f = cfg.flopsProfiler; f.enabled)
    root["flops_profiler"] = {
        {"enabled", true},         {"profile_step", f.profileStep},
        {"module_depth", f.moduleDepth}, {"top_modules", f.topModules},
        {"detailed", f.detailed},
        {"output_file", f.outputFile.empty() ? ordered_json(nullptr) : ordered_json(f.outputFile)}};

  const OptimizerConfig &o = cfg.optimizer;
  ordered_json op;
  op["lr"] = o.lr;
  if (o.type == "SGD") {
    op["momentum"] = o.momentum;
    op["dampening"] = o.dampening;
    op["weight_decay"] = o.weightDecay;
    op["nesterov"] = o.nesterov;
  } else if (o.type == "Lamb") {
    op["betas"] = {o.beta1, o.beta2};
    op["eps"] = o.eps;
    op["weight_decay"] = o.weightDecay;
    op["bias_correction"] = o.biasCorrection;
    op["max_coeff"] = o.maxCoeff;
    op["min_coeff"] = o.minCoeff;
  } else if (o.type == "Lion") {
    op["betas"] = {o.beta1, o.beta2};
    op["weight_decay"] = o.weightDecay;
  } else if (o.type == "OneBitAdam") {
    op["betas"] = {o.beta1, o.beta2};
    op["eps"] = o.eps;
    op["weight_decay"] = o.weightDecay;
    op["freeze_step"] = o.freezeStep;
  } else if (o.type == "ZeroOneAdam") {
    op["betas"] = {o.beta1, o.beta2};
    op["eps"] = o.eps;
    op["weight_decay"] = o.weightDecay;
    op["var_freeze_step"] = o.freezeStep;
    op["var_update_scaler"] = o.varUpdateScaler;
    op["local_step_scaler"] = o.localStepScaler;
    op["local_step_clipper"] = o.localStepClipper;
  } else if (o.type == "OneBitLamb") {
    op["betas"] = {o.beta1, o.beta2};
    op["eps"] = o.eps;
    op["weight_decay"] = o.weightDecay;
    op["freeze_step"] = o.freezeStep;
    op["max_coeff"] = o.maxCoeff;
    op["min_coeff"] = o.minCoeff;
    op["coeff_beta"] = o.coeffBeta;
    op["factor_max"] = o.factorMax;
    op["factor_min"] = o.factorMin;
    op["factor_threshold"] = o.factorThreshold;
  } else if (o.type == "Adagrad") {
    op["lr_decay"] = o.lrDecay;
    op["weight_decay"] = o.weightDecay;
    op["eps"] = o.eps;
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
  if (std::optional<ordered_json> sp = schedulerParamsJson(s)) {
    if (s.totalStepsFromRun)
      (*sp)["total_num_steps"] = "auto";
    root["scheduler"] = {{"type", s.type}, {"params", *sp}};
  }
  const ZeroConfig &z = cfg.zero;
  ordered_json zj;
  zj["stage"] = z.stage;
  zj["overlap_comm"] = z.overlapComm();
  zj["reduce_bucket_size"] = z.reduceBucketSize;
  zj["allgather_bucket_size"] = z.allgatherBucketSize;
  zj["sub_group_size"] = z.subGroupSize;
  zj["stage3_prefetch_bucket_size"] = z.stage3PrefetchBucketSize;
  zj["stage3_param_persistence_threshold"] = z.stage3ParamPersistenceThreshold;
  zj["stage3_max_live_parameters"] = z.stage3MaxLiveParameters;
  if (z.offloadOptimizer == ZeroConfig::OffloadDevice::Cpu)
    zj["offload_optimizer"] = ordered_json{{"device", "cpu"}};
  else if (z.offloadOptimizer == ZeroConfig::OffloadDevice::Nvme)
    zj["offload_optimizer"] = ordered_json{{"device", "nvme"},
                                           {"nvme_path", z.offloadNvmePath},
                                           {"pipeline_read", z.pipelineRead},
                                           {"pipeline_write", z.pipelineWrite}};
  if (z.offloadParam == ZeroConfig::OffloadDevice::Cpu)
    zj["offload_param"] = ordered_json{{"device", "cpu"}};
  else if (z.offloadParam == ZeroConfig::OffloadDevice::Nvme)
    zj["offload_param"] = ordered_json{{"device", "nvme"}, {"nvme_path", z.offloadParamNvmePath}};
  root["zero_optimization"] = zj;
  // The aio section whenever it is in effect (an NVMe tier), defaults
  // included: --print-config shows the config that runs.
  if (!(cfg.aio == AioConfig()) || !cfg.zero.nvmeTierPath().empty())
    root["aio"] = ordered_json{{"block_size", cfg.aio.blockSize},
                               {"queue_depth", cfg.aio.queueDepth},
                               {"single_submit", cfg.aio.singleSubmit}};
  // Also without stages: a schedule or partition method asked for (the
  // plan compiled with --pp later keeps them) must read back the same.
  if (cfg.pipeline.stages > 1 || !(cfg.pipeline == PipelineConfig())) {
    ordered_json pj;
    pj["stages"] = cfg.pipeline.stages;
    pj["partition_method"] = cfg.pipeline.partitionMethod;
    pj["schedule"] = cfg.pipeline.schedule;
    root["pipeline"] = pj;
  }
  // Also under --tp: dsrt --config compares it with the plan's.
  if (cfg.tensorParallel > 1)
    root["tensor_parallel"] = {{"autotp_size", cfg.tensorParallel}};
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
  // Settings that change nothing in dsc (a note when given) are written
  // only when away from their defaults: --print-config's text, fed back,
  // draws no note for a key its user never set.
  if (p.fp16.autoCast)
    fp16["auto_cast"] = true;
  fp16["loss_scale"] = p.fp16.lossScale;
  fp16["initial_scale_power"] = p.fp16.initialScalePower;
  fp16["loss_scale_window"] = p.fp16.lossScaleWindow;
  fp16["hysteresis"] = p.fp16.hysteresis;
  fp16["consecutive_hysteresis"] = p.fp16.consecutiveHysteresis;
  fp16["min_loss_scale"] = p.fp16.minLossScale;
  root["fp16"] = fp16;
  ordered_json bf16;
  bf16["enabled"] = p.kind == Precision::BF16;
  if (p.bf16.immediateGradUpdate != Bf16Config().immediateGradUpdate)
    bf16["immediate_grad_update"] = p.bf16.immediateGradUpdate;
  if (p.bf16.checkGradOverflow != Bf16Config().checkGradOverflow)
    bf16["check_grad_overflow"] = p.bf16.checkGradOverflow;
  root["bf16"] = bf16;
  root["data_types"] = {
      {"grad_accum_dtype", precisionName(p.gradAccumDtype())}};
  root["communication_data_type"] = precisionName(p.communicationDataType());
  return root.dump(2);
}

} // namespace dsrt::config
