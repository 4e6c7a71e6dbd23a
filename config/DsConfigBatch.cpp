//===- DsConfigBatch.cpp - ds_config batch, zero, pipeline -===//
//
// The batch-size relation, zero_optimization and pipeline.
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

/// a * b, or nullopt when it overflows int64_t.
std::optional<int64_t> times(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

/// "9 or 12": the multiples of `unit` around `value` (only positive ones).
std::string nearMultiples(int64_t value, int64_t unit) {
  int64_t below = value / unit * unit, above;
  if (__builtin_add_overflow(below, unit, &above))
    return std::to_string(below);
  if (below > 0)
    return std::to_string(below) + " or " + std::to_string(above);
  return std::to_string(above);
}

void readBatch(const Section &top, int64_t worldSize, TrainConfig &cfg) {
  std::optional<int64_t> train =
      top.count("train_batch_size", 1, kMaxTrainBatch);
  std::optional<int64_t> micro =
      top.count("train_micro_batch_size_per_gpu", 1, kMaxMicroBatch);
  std::optional<int64_t> gas =
      top.count("gradient_accumulation_steps", 1, kMaxGradAccumSteps);
  if (!train && !micro)
    top.fail("either train_batch_size or train_micro_batch_size_per_gpu "
             "needs to be provided");

  const std::string ranks =
      "data-parallel ranks " + std::to_string(worldSize);
  auto tooLarge = [&](const std::string &product) {
    top.fail(product + " does not fit in 64 bits");
  };

  // DeepSpeedConfig._set_batch_related_parameters derives the missing value
  // by floor division and lets _batch_assertion catch the remainder; here a
  // division that is not exact is the error, stated as such.
  // A derived value is bounded like a given one: it is as much a loop count.
  auto derive = [&](const char *derived, int64_t max, const char *divisorKey,
                    int64_t divisor, const char *note) {
    std::string unitText = std::string(divisorKey) + " " +
                           std::to_string(divisor) + note + " x " + ranks;
    std::optional<int64_t> unit = times(divisor, worldSize);
    if (!unit)
      tooLarge(unitText);
    if (*train % *unit != 0)
      top.fail("train_batch_size " + std::to_string(*train) +
               " is not a multiple of " + unitText + " (= " +
               std::to_string(*unit) + "), so " + derived +
               " cannot be derived: set train_batch_size to " +
               nearMultiples(*train, *unit));
    int64_t value = *train / *unit;
    if (value > max)
      top.fail("train_batch_size " + std::to_string(*train) + " / (" +
               unitText + ") gives " + derived + " " + std::to_string(value) +
               ", but it must be between 1 and " + std::to_string(max) +
               ": lower train_batch_size or raise " + divisorKey);
    return value;
  };

  if (train && micro && !gas) {
    gas = derive("gradient_accumulation_steps", kMaxGradAccumSteps,
                 "train_micro_batch_size_per_gpu", *micro, "");
  } else if (train && !micro) {
    bool defaulted = !gas;
    if (defaulted)
      gas = 1;
    micro = derive("train_micro_batch_size_per_gpu", kMaxMicroBatch,
                   "gradient_accumulation_steps", *gas,
                   defaulted ? " (the default)" : "");
  }

  std::string productText =
      "train_micro_batch_size_per_gpu " + std::to_string(*micro) +
      " x gradient_accumulation_steps " + std::to_string(gas.value_or(1)) +
      " x " + ranks;
  std::optional<int64_t> perRank = times(*micro, gas.value_or(1));
  std::optional<int64_t> product =
      perRank ? times(*perRank, worldSize) : std::nullopt;
  if (!product)
    tooLarge(productText);
  if (*product > kMaxTrainBatch)
    top.fail(productText + " (= " + std::to_string(*product) +
             ") is more than " + std::to_string(kMaxTrainBatch) +
             ", the largest train_batch_size");
  if (!train) {
    if (!gas)
      gas = 1;
    train = *product;
  } else if (*train != *product) {
    // All three given: name every number and each single change that fits.
    std::string fix = "set train_batch_size to " + std::to_string(*product);
    if (std::optional<int64_t> unit = times(*micro, worldSize);
        unit && *train % *unit == 0)
      fix += ", or gradient_accumulation_steps to " +
             std::to_string(*train / *unit);
    if (*train % *perRank == 0)
      fix += ", or compile with --dp " + std::to_string(*train / *perRank);
    top.fail("train_batch_size " + std::to_string(*train) + " != " +
             productText + " (= " + std::to_string(*product) + "): " + fix);
  }
  cfg.trainBatchSize = *train;
  cfg.microBatchPerGpu = *micro;
  cfg.gradAccumSteps = *gas;
}

//===--- zero_optimization ------------------------------------------------===//

/// The keys ZeroConfig holds, as canonical JSON writes them.
const std::vector<std::string> kZeroKeys = {
    "stage",
    "overlap_comm",
    "reduce_bucket_size",
    "allgather_bucket_size",
    "sub_group_size",
    "stage3_prefetch_bucket_size",
    "stage3_param_persistence_threshold",
    "stage3_max_live_parameters",
    "offload_optimizer",
    "cpu_offload",
    "offload_param",
    "cpu_offload_param",
};

/// DeepSpeedConfigModel allows population by field name as well as by
/// alias: these field names read the same setting as their stage3_ alias.
const std::vector<std::pair<std::string, std::string>> kZeroSynonyms = {
    {"prefetch_bucket_size", "stage3_prefetch_bucket_size"},
    {"param_persistence_threshold", "stage3_param_persistence_threshold"},
    {"max_live_parameters", "stage3_max_live_parameters"},
};

//===--- pipeline ----------------------------------------------------------===//

void readPipeline(const Section &top, PipelineConfig &p) {
  Section pipe = top.object("pipeline");
  const std::vector<std::string> known = {
      "stages", "partition_method", "schedule", "activation_checkpoint_interval",
      "seed_layers", "pipe_partitioned", "grad_partitioned", "partition"};
  pipe.checkKeys(known, [&](const std::string &key) -> std::string {
    return "unknown key '" + pipe.path(key) + "'" + didYouMean(key, known);
  });
  p = PipelineConfig();
  if (pipe.has("stages") && !(pipe.raw("stages").is_string() &&
                              pipe.raw("stages").get<std::string>() == "auto")) {
    p.stages = *pipe.count("stages", 1, kMaxPipelineStages);
  }
  auto choice = [&](const std::string &key, std::string &field,
                    const std::vector<std::string> &options) {
    std::optional<std::string> v = pipe.string(key);
    if (!v)
      return;
    if (std::find(options.begin(), options.end(), *v) == options.end())
      pipe.fail("'" + pipe.path(key) + "' is '" + *v + "'" + didYouMean(*v, options) +
                "; supported: " + join(options));
    field = *v;
  };
  choice("partition_method", p.partitionMethod, {"uniform", "parameters", "cost"});
  choice("schedule", p.schedule, {"1f1b", "zb-h1"});
  // DeepSpeed's "partition" is the same choice as dsc's partition_method;
  // its default "best" leaves dsc's default (cost).
  std::string partition;
  choice("partition", partition, {"best", "uniform", "parameters"});
  if (!partition.empty() && partition != "best") {
    if (pipe.has("partition_method") && p.partitionMethod != partition)
      pipe.fail("'" + pipe.path("partition") + "' is '" + partition + "' but '" +
                pipe.path("partition_method") + "' is '" + p.partitionMethod +
                "': they are the same setting, give only one");
    p.partitionMethod = partition;
  }
  p.activationCheckpointInterval =
      pipe.count("activation_checkpoint_interval", 0, std::numeric_limits<int64_t>::max())
          .value_or(0);
  if (pipe.boolean("seed_layers").value_or(false))
    pipe.fail("'" + pipe.path("seed_layers") +
              "' is not supported: dsc takes the initial weights from the ONNX "
              "model instead of initializing layers; remove it or set false");
  // Activations and gradients between stages are partitioned over the
  // tensor-parallel group; without tensor parallelism (DeepSpeed's
  // is_model_parallel false) either value computes the same.
  pipe.boolean("pipe_partitioned");
  pipe.boolean("grad_partitioned");
}

/// One of zero_optimization's offload sections (`key`: offload_optimizer or
/// offload_param) and its older boolean form (`oldKey`: cpu_offload or
/// cpu_offload_param): the device and the NVMe folder. Returns the section
/// when present, for the caller's own keys (`extra`).
std::optional<Section> readOffload(const Section &zero, const std::string &key,
                                   const std::string &oldKey, std::vector<std::string> extra,
                                   ZeroConfig::OffloadDevice &device, std::string &nvmePath,
                                   std::vector<std::string> &notes) {
  using Device = ZeroConfig::OffloadDevice;
  if (zero.has(oldKey) && zero.has(key))
    zero.fail("'" + zero.path(oldKey) + "' is DeepSpeed's older name for '" +
              zero.path(key + ".device") + "': give only one (DeepSpeed refuses both too)");
  if (std::optional<bool> old = zero.boolean(oldKey)) {
    device = *old ? Device::Cpu : Device::None;
    if (*old)
      notes.push_back("'" + zero.path(oldKey) + "': true is DeepSpeed's older form of " + key +
                      ": {\"device\": \"cpu\"}, read as such");
  }
  if (!zero.has(key))
    return std::nullopt;
  Section off = zero.object(key);
  extra.insert(extra.end(), {"device", "nvme_path"});
  off.checkKeys(extra);
  std::string name = off.string("device").value_or("none");
  std::optional<std::string> path = off.string("nvme_path");
  if (name == "cpu") {
    device = Device::Cpu;
  } else if (name == "nvme") {
    // Never host memory instead, as DeepSpeed's stages 1 and 2 make it.
    if (!path || path->empty())
      off.fail("'" + off.path("device") + "' is \"nvme\": give '" + off.path("nvme_path") +
               "', the folder of the NVMe tier's files (one per rank)");
    device = Device::Nvme;
    nvmePath = *path;
  } else if (name != "none") {
    off.fail("'" + off.path("device") + "' is \"" + name +
             "\"; DeepSpeed's values are \"none\", \"cpu\" and \"nvme\" (case-sensitive)");
  }
  if (path && name != "nvme")
    notes.push_back("'" + off.path("nvme_path") + "' changes nothing in dsc: only NVMe "
                    "offload (device \"nvme\") reads it (DeepSpeed too)");
  return off;
}

void readZero(const Section &top, ZeroConfig &z, std::vector<std::string> &notes) {
  z = ZeroConfig();
  std::optional<int64_t> allgatherSize = top.count("allgather_size", 1, kMaxElements);
  if (!top.has("zero_optimization")) {
    if (allgatherSize)
      notes.push_back("'allgather_size' has no effect: DeepSpeed reads it only with the "
                      "boolean form of zero_optimization");
    return;
  }
  const json &raw = top.raw("zero_optimization");
  if (raw.is_boolean()) {
    // DeepSpeed's deprecated form (read_zero_config_deprecated): true is
    // stage 1 with allgather_size as its all-gather bucket.
    z.stage = raw.get<bool>() ? 1 : 0;
    if (z.stage)
      z.allgatherBucketSize = allgatherSize.value_or(z.allgatherBucketSize);
    notes.push_back(std::string("'zero_optimization': ") + (z.stage ? "true" : "false") +
                    " is DeepSpeed's deprecated form of {\"stage\": " +
                    (z.stage ? "1" : "0") + "}, read as such");
    return;
  }
  if (allgatherSize)
    notes.push_back("'allgather_size' has no effect: DeepSpeed reads it only with the boolean "
                    "form of zero_optimization; use zero_optimization.allgather_bucket_size");
  Section zero = top.object("zero_optimization");

  // The key table has removed DeepSpeed's other ZeRO keys (offload,
  // quantization, MiCS, ...) after checking them (KeyCheck.cpp).
  std::vector<std::string> known = kZeroKeys;
  for (const auto &[synonym, key] : kZeroSynonyms)
    known.push_back(synonym);
  zero.checkKeys(known);

  if (std::optional<int64_t> stage = zero.count("stage", 0, 3))
    z.stage = static_cast<int>(*stage);
  z.overlapCommSetting = zero.boolean("overlap_comm");

  auto size = [&](const std::string &key, int64_t &field, bool strictly) {
    std::string name = key;
    for (const auto &[synonym, canonical] : kZeroSynonyms) {
      if (canonical != key || !zero.has(synonym))
        continue;
      if (zero.has(key))
        zero.fail("'" + zero.path(synonym) + "' and '" + zero.path(key) +
                  "' are the same setting (DeepSpeed accepts either name): "
                  "give only one");
      name = synonym;
    }
    std::optional<int64_t> v = zero.count(name, 0, kMaxElements);
    if (v && *v == 0 && strictly) {
      // DeepSpeed flushes a bucket before the tensor that would overflow
      // it: a bucket of 0 elements holds one tensor at a time, as 1 does.
      notes.push_back("'" + zero.path(name) + "' is 0: each tensor is reduced on its own "
                      "(DeepSpeed's buckets then hold one tensor each), read as 1");
      v = 1;
    }
    if (v)
      field = *v;
  };
  size("reduce_bucket_size", z.reduceBucketSize, true);
  size("allgather_bucket_size", z.allgatherBucketSize, true);
  size("sub_group_size", z.subGroupSize, false);
  size("stage3_prefetch_bucket_size", z.stage3PrefetchBucketSize, false);
  size("stage3_param_persistence_threshold",
       z.stage3ParamPersistenceThreshold, false);
  size("stage3_max_live_parameters", z.stage3MaxLiveParameters, false);

  // ZeRO-Offload (offload_optimizer) and ZeRO-Infinity's parameter offload
  // (offload_param; stage 3, checked where the stage is final, since --zero
  // overrides it). The key table has checked their other keys (and removed
  // those that change nothing on a CPU tier).
  if (std::optional<Section> off = readOffload(zero, "offload_optimizer", "cpu_offload",
                                               {"pipeline_read", "pipeline_write"},
                                               z.offloadOptimizer, z.offloadNvmePath, notes)) {
    for (const char *key : {"pipeline_read", "pipeline_write"}) {
      if (!off->boolean(key).value_or(false))
        continue;
      if (z.offloadOptimizer == ZeroConfig::OffloadDevice::Nvme) {
        (std::string(key) == "pipeline_read" ? z.pipelineRead : z.pipelineWrite) = true;
        continue;
      }
      notes.push_back("'" + off->path(key) + "' is true: it changes nothing in dsc: only NVMe "
                      "offload reads it (DeepSpeed too)");
    }
  }
  // Both on NVMe under different folders: a tier file per rank in each
  // (ZeroConfig::nvmeParamPath).
  readOffload(zero, "offload_param", "cpu_offload_param", {}, z.offloadParam,
              z.offloadParamNvmePath, notes);
}

void readAio(const Section &top, AioConfig &a) {
  a = AioConfig();
  if (!top.has("aio"))
    return;
  Section aio = top.object("aio");
  aio.checkKeys({"block_size", "queue_depth", "single_submit"});
  if (std::optional<int64_t> b = aio.count("block_size", 4096, int64_t(1) << 30)) {
    if (*b % 4096)
      aio.fail("'" + aio.path("block_size") + "' is " + std::to_string(*b) +
               ": the NVMe tier's requests are O_DIRECT, in multiples of 4096 bytes");
    a.blockSize = *b;
  }
  a.queueDepth = aio.count("queue_depth", 1, 4096).value_or(a.queueDepth);
  a.singleSubmit = aio.boolean("single_submit").value_or(a.singleSubmit);
}

} // namespace dsrt::config::detail
