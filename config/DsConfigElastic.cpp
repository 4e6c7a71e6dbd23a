//===- DsConfigElastic.cpp - DeepSpeed's elasticity section ---------------===//
//
// DeepSpeed's rules (deepspeed/elasticity/elasticity.py at edaa72212) for
// the global batch of an elastic job and the data-parallel sizes that keep
// it, and the section's reader. Version 0.1 chooses, among candidate
// batches (each micro-batch size, and their least common multiple, times
// the largest highly composite number that stays under
// max_train_batch_size), the one that the most GPU counts in
// [min_gpus, max_gpus] divide into whole micro-batches; 0.2 does the same
// per node and, for a world size outside the valid list, falls back to the
// largest batch that size divides.
//
//===----------------------------------------------------------------------===//
#include "config/Readers.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace dsrt::config {

namespace {

// elasticity.py's HCN_LIST.
constexpr int64_t kHighlyComposite[] = {
    1,      2,      4,      6,      12,     24,     36,     48,    60,    120,
    180,    240,    360,    720,    840,    1260,   1680,   2520,  5040,  7560,
    10080,  15120,  20160,  25200,  27720,  45360,  50400,  55440, 83160, 110880,
    166320, 221760, 277200, 332640, 498960, 554400, 665280, 720720};

std::string listText(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/// get_valid_gpus: every count that divides batch / mb for a micro-batch
/// size mb dividing batch, within [minGpus, maxGpus].
std::vector<int64_t> validGpus(int64_t batch, const std::vector<int64_t> &mbs, int64_t minGpus,
                               int64_t maxGpus) {
  std::set<int64_t> out;
  for (int64_t mb : mbs) {
    if (batch % mb)
      continue;
    int64_t n = batch / mb;
    for (int64_t d = 1; d * d <= n; ++d)
      if (n % d == 0)
        for (int64_t g : {d, n / d})
          if (g >= minGpus && g <= maxGpus)
            out.insert(g);
  }
  return {out.begin(), out.end()};
}

/// _get_compatible_gpus_v01: the chosen batch and its valid counts.
std::pair<int64_t, std::vector<int64_t>> compatibleV01(const std::vector<int64_t> &mbs,
                                                       int64_t maxBatch, int64_t minGpus,
                                                       int64_t maxGpus, bool preferLarger,
                                                       const std::string &source) {
  int64_t smallest = *std::min_element(mbs.begin(), mbs.end());
  minGpus = minGpus ? minGpus : 1;
  maxGpus = maxGpus ? maxGpus : maxBatch / smallest;
  for (int64_t mb : mbs)
    if (mb > maxBatch)
      throw ConfigError((source.empty() ? "" : source + ": ") +
                        "elasticity: every micro-batch size must be at most "
                        "max_train_batch_size " +
                        std::to_string(maxBatch) + ", and " + listText(mbs) + " has " +
                        std::to_string(mb));
  std::vector<int64_t> bases = mbs;
  int64_t lcm = 1;
  for (int64_t mb : mbs) {
    lcm = std::lcm(lcm, mb);
    if (lcm > maxBatch)
      break;
  }
  bases.push_back(lcm);
  std::set<int64_t> candidates;
  for (int64_t base : bases) {
    if (base > maxBatch)
      continue;
    if (base == maxBatch) {
      candidates.insert(base);
      continue;
    }
    // The largest highly composite number at most maxBatch / base.
    int64_t v = maxBatch / base, hcn = 1;
    for (int64_t h : kHighlyComposite)
      if (h <= v)
        hcn = h;
    candidates.insert(hcn * base);
  }
  // The most valid counts; a tie goes to the larger batch (the smaller
  // with prefer_larger_batch false).
  size_t most = 0;
  std::vector<int64_t> valid;
  int64_t final = smallest;
  for (int64_t b : candidates) {
    std::vector<int64_t> g = validGpus(b, mbs, minGpus, maxGpus);
    if (g.size() > most ||
        (g.size() == most && ((preferLarger && b > final) || (!preferLarger && b < final)))) {
      most = g.size();
      valid = g;
      final = b;
    }
  }
  return {final, valid};
}

} // namespace

ElasticBatch computeElasticBatch(const ElasticConfig &e, int64_t worldSize,
                                 const std::string &source) {
  auto fail = [&](const std::string &what) -> void {
    throw ConfigError((source.empty() ? "" : source + ": ") + "elasticity: " + what);
  };
  ElasticBatch out;
  if (e.version == 0.1) {
    if (e.modelParallelSize > 1)
      fail("version 0.1 does not support model parallelism (model_parallel_size " +
           std::to_string(e.modelParallelSize) + "): use version 0.2");
    auto [b, valid] = compatibleV01(e.microBatchSizes, e.maxTrainBatch, e.minGpus, e.maxGpus,
                                    e.preferLargerBatch, source);
    out.trainBatch = b;
    out.validSizes = valid;
  } else {
    // Version 0.2: the same search per node, scaled by the data-parallel
    // ranks a node holds.
    if (e.gpusPerNode % e.modelParallelSize)
      fail("num_gpus_per_node " + std::to_string(e.gpusPerNode) +
           " must be divisible by model_parallel_size " + std::to_string(e.modelParallelSize));
    int64_t perNode = e.gpusPerNode / e.modelParallelSize;
    auto [b, nodes] =
        compatibleV01(e.microBatchSizes, e.maxTrainBatch / perNode, e.minGpus / e.gpusPerNode,
                      e.maxGpus / e.gpusPerNode, e.preferLargerBatch, source);
    out.trainBatch = b * perNode;
    for (int64_t n : nodes)
      out.validSizes.push_back(n * perNode);
    if (!std::count(out.validSizes.begin(), out.validSizes.end(),
                    worldSize / e.modelParallelSize)) {
      // Another size: the largest (smallest) batch it divides.
      double dp = double(worldSize) / double(e.gpusPerNode) * double(perNode);
      std::optional<int64_t> chosen;
      for (int64_t mb : e.microBatchSizes) {
        int64_t c =
            int64_t(std::floor(double(e.maxTrainBatch) / (double(mb) * dp)) * double(mb) * dp);
        if (!chosen || (e.preferLargerBatch ? c > *chosen : c < *chosen))
          chosen = c;
      }
      out.trainBatch = *chosen;
      out.validSizes = {int64_t(dp)};
    }
  }
  if (!std::count(out.validSizes.begin(), out.validSizes.end(), worldSize))
    fail("data-parallel size " + std::to_string(worldSize) +
         " is not valid with the current list of valid GPU counts " + listText(out.validSizes) +
         " (global batch " + std::to_string(out.trainBatch) + "): compile with --dp one of them");
  // The largest micro-batch size that divides the per-rank batch.
  std::vector<int64_t> sizes = e.microBatchSizes;
  std::sort(sizes.rbegin(), sizes.rend());
  for (int64_t mb : sizes)
    if (out.trainBatch / worldSize % mb == 0) {
      out.microBatch = mb;
      break;
    }
  if (!out.microBatch)
    fail("no micro-batch size of " + listText(e.microBatchSizes) + " divides the global batch " +
         std::to_string(out.trainBatch) + " over " + std::to_string(worldSize) + " ranks");
  if (out.trainBatch <= 0 || out.trainBatch % (out.microBatch * worldSize))
    fail("the global batch " + std::to_string(out.trainBatch) + " is not micro-batch " +
         std::to_string(out.microBatch) + " x gradient accumulation steps x " +
         std::to_string(worldSize) + " ranks");
  return out;
}

namespace detail {

bool readElasticity(const Section &top, int64_t worldSize, TrainConfig &cfg,
                    std::vector<std::string> &notes) {
  cfg.elastic = ElasticConfig();
  if (!top.has("elasticity"))
    return false;
  Section el = top.object("elasticity");
  el.checkKeys({"enabled", "max_train_batch_size", "micro_batch_sizes", "min_gpus", "max_gpus",
                "min_time", "version", "prefer_larger_batch", "ignore_non_elastic_batch_info",
                "model_parallel_size", "num_gpus_per_node"});
  ElasticConfig &e = cfg.elastic;
  e.enabled = el.boolean("enabled").value_or(false);
  if (!e.enabled)
    return false;
  // Required once enabled (ElasticityConfig's "missing" errors).
  for (const char *key : {"max_train_batch_size", "micro_batch_sizes"})
    if (!el.has(key))
      el.fail("'" + el.path(key) + "' is missing: elasticity needs it once enabled");
  e.maxTrainBatch = *el.count("max_train_batch_size", 1, kMaxTrainBatch);
  const json &mbs = el.raw("micro_batch_sizes");
  if (!mbs.is_array() || mbs.empty())
    el.fail("'" + el.path("micro_batch_sizes") +
            "' must be a non-empty list of micro-batch "
            "sizes, got " +
            shown(mbs));
  e.microBatchSizes.clear();
  for (const json &v : mbs) {
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMaxMicroBatch)
      el.fail("'" + el.path("micro_batch_sizes") + "' must hold integers between 1 and " +
              std::to_string(kMaxMicroBatch) + ", got " + shown(v));
    e.microBatchSizes.push_back(v.get<int64_t>());
  }
  e.minGpus = el.count("min_gpus", 1, kMaxTrainBatch).value_or(e.minGpus);
  e.maxGpus = el.count("max_gpus", 1, kMaxTrainBatch).value_or(e.maxGpus);
  if (e.maxGpus < e.minGpus)
    el.fail("'" + el.path("min_gpus") + "' " + std::to_string(e.minGpus) +
            " is more than 'max_gpus' " + std::to_string(e.maxGpus));
  e.minTime = el.count("min_time", 0, int64_t(1) << 40).value_or(0);
  if (e.minTime)
    notes.push_back("'elasticity.min_time' is " + std::to_string(e.minTime) +
                    ": DeepSpeed checks it and reads it nowhere else; it changes nothing");
  e.version = el.number("version").value_or(e.version);
  if (e.version != 0.1 && e.version != 0.2)
    el.fail("'" + el.path("version") + "' is " + formatNumber(e.version) +
            ": DeepSpeed has elasticity versions 0.1 and 0.2");
  e.preferLargerBatch = el.boolean("prefer_larger_batch").value_or(true);
  e.ignoreNonElasticBatchInfo = el.boolean("ignore_non_elastic_batch_info").value_or(false);
  e.modelParallelSize = el.count("model_parallel_size", 1, 1 << 20).value_or(1);
  e.gpusPerNode = el.count("num_gpus_per_node", 1, 1 << 20).value_or(1);

  ElasticBatch b;
  try {
    b = computeElasticBatch(e, worldSize, "");
  } catch (const ConfigError &err) {
    top.fail(err.what()); // named after the config file
  }
  e.validSizes = b.validSizes;
  // DeepSpeed takes control of the batch keys; one the user also set is an
  // error unless ignore_non_elastic_batch_info says to override it.
  std::vector<std::string> given;
  for (const char *key :
       {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"})
    if (top.has(key))
      given.push_back(key);
  if (!given.empty() && !e.ignoreNonElasticBatchInfo) {
    std::string list;
    for (const std::string &k : given)
      list += (list.empty() ? "'" : ", '") + k + "'";
    top.fail(list + (given.size() > 1 ? " are" : " is") +
             " set, but elasticity is enabled and decides the batch (here train_batch_size " +
             std::to_string(b.trainBatch) + ", micro-batch " + std::to_string(b.microBatch) +
             " on " + std::to_string(worldSize) + " data-parallel ranks): remove " +
             (given.size() > 1 ? "them" : "it") +
             ", or set 'elasticity.ignore_non_elastic_batch_info' to true to have them "
             "overridden");
  }
  cfg.trainBatchSize = b.trainBatch;
  cfg.microBatchPerGpu = b.microBatch;
  cfg.gradAccumSteps = b.trainBatch / (b.microBatch * worldSize);
  for (const std::string &k : given)
    notes.push_back("'" + k +
                    "' is overridden by elasticity (ignore_non_elastic_batch_info): "
                    "train_batch_size " +
                    std::to_string(cfg.trainBatchSize) + ", micro-batch " +
                    std::to_string(cfg.microBatchPerGpu) + ", gradient_accumulation_steps " +
                    std::to_string(cfg.gradAccumSteps));
  return true;
}

} // namespace detail
} // namespace dsrt::config
