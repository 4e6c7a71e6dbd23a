//===- DsConfigFeatures.cpp - ds_config recompute, checkpoint, tp -===//
//
// activation_checkpointing, checkpoint and tensor_parallel.
//
//===----------------------------------------------------------------------===//
#include "config/Readers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace dsrt::config {

bool jobNameStaysInside(const std::string &j) {
  return !(j.empty() || j == "." || j.front() == '/' || j == ".." || j.rfind("../", 0) == 0 ||
           j.find("/../") != std::string::npos ||
           (j.size() >= 3 && j.compare(j.size() - 3, 3, "/..") == 0));
}

} // namespace dsrt::config

namespace dsrt::config::detail {

/// Whether a section without dsc's "recompute" asks for checkpoints: a
/// DeepSpeed key away from its default, or dsc's interval / memory_budget.
/// Lightning writes the section with DeepSpeed's defaults into every config;
/// that asks for nothing.
bool asksForCheckpoints(const Section &ac) {
  for (const char *key : {"partition_activations", "cpu_checkpointing",
                          "contiguous_memory_optimization", "synchronize_checkpoint_boundary",
                          "profile"})
    if (ac.has(key) && ac.raw(key).is_boolean() && ac.raw(key).get<bool>())
      return true;
  for (const char *key : {"number_checkpoints", "interval", "memory_budget"})
    if (ac.has(key) && !ac.raw(key).is_null())
      return true;
  return false;
}

/// "activation_checkpointing" (see RecomputeConfig). DeepSpeed's keys are
/// read with their meaning where dsc has one and a note where it has none;
/// a DeepSpeed key set to a value that asks for something dsc cannot do is
/// a note too, never silently dropped.
void readActivationCheckpointing(const Section &top, TrainConfig &cfg) {
  Section ac = top.object("activation_checkpointing");
  ac.checkKeys({"recompute", "memory_budget", "interval", "number_checkpoints",
                "partition_activations",
                "cpu_checkpointing", "contiguous_memory_optimization",
                "synchronize_checkpoint_boundary", "profile"});
  RecomputeConfig &r = cfg.recompute;
  const std::vector<std::string> modes = {"none", "layers", "selective", "auto"};
  if (std::optional<std::string> m = ac.string("recompute")) {
    if (std::find(modes.begin(), modes.end(), *m) == modes.end())
      ac.fail("'" + ac.path("recompute") + "' is '" + *m + "'" + didYouMean(*m, modes) +
              "; supported: " + join(modes));
    r.mode = *m;
  } else if (asksForCheckpoints(ac)) {
    r.mode = "layers";
    cfg.notes.push_back("'activation_checkpointing' without dsc's 'recompute' key: dsc "
                        "recomputes every layer (it sees the graph, not the blocks wrapped in "
                        "deepspeed.checkpointing.checkpoint); set 'recompute' to layers, "
                        "selective or none to choose");
  }
  if (ac.has("memory_budget")) {
    const auto &v = ac.raw("memory_budget");
    std::optional<uint64_t> bytes;
    if (v.is_number_unsigned())
      bytes = v.get<uint64_t>();
    else if (v.is_string())
      bytes = parseByteSize(v.get<std::string>());
    if (!bytes || *bytes == 0)
      ac.fail("'" + ac.path("memory_budget") + "' must be a positive byte count: a number, or "
              "a string such as \"6GiB\" (K, M, G, T: powers of 1000; KiB, MiB, GiB, TiB: of "
              "1024)");
    r.memoryBudget = *bytes;
  }
  if (r.mode == "auto" && !r.memoryBudget)
    ac.fail("'" + ac.path("recompute") + "' is 'auto' but there is no '" +
            ac.path("memory_budget") + "': auto chooses what to recompute to fit it");
  if (std::optional<int64_t> k = ac.count("interval", 1, std::numeric_limits<int64_t>::max()))
    r.interval = *k;
  if (std::optional<int64_t> n =
          ac.count("number_checkpoints", 1, std::numeric_limits<int64_t>::max()))
    r.numberCheckpoints = *n;
  if (ac.has("interval") && ac.has("number_checkpoints"))
    ac.fail("'" + ac.path("interval") + "' and '" + ac.path("number_checkpoints") +
            "' both choose which layer inputs are kept: give only one");
  // They choose what layer recompute keeps: with none there is nothing to
  // choose, so they would be accepted and ignored.
  for (const char *key : {"interval", "number_checkpoints"})
    if (r.mode == "none" && ac.has(key) && !ac.raw(key).is_null())
      ac.fail("'" + ac.path(key) + "' chooses which layer inputs recompute keeps, but '" +
              ac.path("recompute") + "' is 'none': set it to layers (or selective), or remove '" +
              key + "'");
  auto note = [&](const char *key, const std::string &why) {
    if (ac.boolean(key).value_or(false))
      cfg.notes.push_back("'" + ac.path(key) + "' has no effect in dsc: " + why);
  };
  note("partition_activations",
       "DeepSpeed splits each checkpointed activation over the tensor-parallel group; dsc "
       "keeps the layer inputs it checkpoints whole on every tensor-parallel rank "
       "(--sequence-parallel splits the activations of the layer-norm regions instead)");
  note("cpu_checkpointing",
       "dsrt runs on the CPU, where the checkpoints already are");
  note("contiguous_memory_optimization",
       "dsc's memory plan places every checkpoint in the one arena at a planned offset");
  note("synchronize_checkpoint_boundary",
       "it synchronizes CUDA streams at checkpoint boundaries, and dsrt runs on the CPU");
  note("profile", "use dsrt --profile (or wall_clock_breakdown) for per-op timing");
}

/// "checkpoint": DeepSpeed's keys, where they apply to dsrt's checkpoints
/// (docs/checkpoints.md); what dsrt always does anyway is a note.
void readMonitor(const Section &top, const std::string &key, MonitorConfig &m) {
  Section c = top.object(key);
  c.checkKeys({"enabled", "output_path", "job_name"});
  m.enabled = c.boolean("enabled").value_or(false);
  m.outputPath = c.string("output_path").value_or("");
  m.jobName = c.string("job_name").value_or(m.jobName);
  // DeepSpeed joins output_path and job_name; a job name that leaves the
  // folder (absolute, "..", empty) would put the files somewhere else.
  if (!jobNameStaysInside(m.jobName))
    c.fail("'" + c.path("job_name") + "' is '" + m.jobName +
           "': it names the folder for the monitor's files inside output_path; give a relative "
           "name that stays inside it, such as \"DeepSpeedJobName\"");
}

const std::vector<std::string> &commsLoggerOps() {
  // DeepSpeed's timed ops (deepspeed/comm/comm.py @timed_op) that dsrt
  // issues, by the names prof_ops takes.
  static const std::vector<std::string> ops = {
      "all_reduce",        "all_reduce_coalesced",  "inference_all_reduce",
      "all_gather",        "all_gather_into_tensor", "all_gather_base",
      "reduce_scatter",    "reduce_scatter_tensor",  "reduce_scatter_base",
      "all_to_all_single", "all_to_all",             "send",
      "isend",             "recv",                   "irecv"};
  return ops;
}

void readCommsLogger(const Section &top, CommsLoggerConfig &c) {
  Section s = top.object("comms_logger");
  s.checkKeys({"enabled", "verbose", "prof_all", "prof_ops", "debug"});
  c.enabled = s.boolean("enabled").value_or(false);
  c.verbose = s.boolean("verbose").value_or(false);
  c.profAll = s.boolean("prof_all").value_or(true);
  c.debug = s.boolean("debug").value_or(false);
  if (s.has("prof_ops")) {
    const json &ops = s.raw("prof_ops");
    if (!ops.is_array())
      s.fail("'" + s.path("prof_ops") + "' must be a list of op names, such as "
             "[\"all_reduce\", \"all_gather_into_tensor\"]");
    // DeepSpeed's ops that a dsrt plan never issues: nothing to time.
    const std::vector<std::string> never = {"broadcast", "reduce", "gather", "scatter",
                                            "barrier", "monitored_barrier",
                                            "all_gather_coalesced"};
    std::vector<std::string> known = commsLoggerOps();
    known.insert(known.end(), never.begin(), never.end());
    for (const json &op : ops) {
      if (!op.is_string())
        s.fail("'" + s.path("prof_ops") + "' must hold op names (strings), got " + op.dump());
      std::string name = op.get<std::string>();
      if (std::find(known.begin(), known.end(), name) == known.end())
        s.fail("'" + s.path("prof_ops") + "' names '" + name + "', not an op DeepSpeed's "
               "comms logger times" + didYouMean(name, known) + "; dsrt's: " +
               join(commsLoggerOps()));
      c.profOps.push_back(name);
    }
  }
  if (c.enabled && !c.profAll && c.profOps.empty())
    s.fail("'" + s.path("prof_all") + "' is false and '" + s.path("prof_ops") +
           "' names no op: the logger would time nothing (DeepSpeed starts it from Python, "
           "which a dsrt run has not); set prof_all true or list ops, such as "
           "[\"all_reduce\"]");
}

void readFlopsProfiler(const Section &top, FlopsProfilerConfig &f) {
  Section s = top.object("flops_profiler");
  s.checkKeys({"enabled", "recompute_fwd_factor", "profile_step", "module_depth", "top_modules",
               "detailed", "output_file"});
  f.enabled = s.boolean("enabled").value_or(false);
  f.profileStep = s.count("profile_step", 1, int64_t(1) << 53).value_or(1);
  f.moduleDepth = s.count("module_depth", -1, 1024).value_or(-1);
  f.topModules = s.count("top_modules", 1, int64_t(1) << 20).value_or(1);
  f.detailed = s.boolean("detailed").value_or(true);
  if (s.has("output_file") && !s.raw("output_file").is_null())
    f.outputFile = s.string("output_file").value_or("");
  if (s.has("output_file") && s.raw("output_file").is_string() && f.outputFile.empty())
    s.fail("'" + s.path("output_file") + "' is empty: give a file name, or null for stdout");
  // DeepSpeed multiplies the forward flops by 2 + recompute_fwd_factor for
  // the backward; dsrt counts the backward's and the recomputed forward's
  // instructions themselves, so a factor would be a second, guessed count.
  if (std::optional<double> r = s.number("recompute_fwd_factor"); r && *r != 0.0)
    s.fail("'" + s.path("recompute_fwd_factor") + "' is " + std::to_string(*r) +
           ": dsrt counts the flops of the backward pass and of the recomputed forward from "
           "the plan's own instructions (dsc --recompute), so no factor is needed; leave it "
           "out or 0.0");
}

void readCheckpoint(const Section &top, TrainConfig &cfg) {
  Section c = top.object("checkpoint");
  c.checkKeys({"tag_validation", "load_universal", "use_node_local_storage", "parallel_write"});
  if (std::optional<std::string> v = c.string("tag_validation")) {
    // DeepSpeed compares it upper-cased.
    std::string upper = *v;
    std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
    const std::vector<std::string> modes = {"Ignore", "Warn", "Fail"};
    if (upper != "IGNORE" && upper != "WARN" && upper != "FAIL")
      c.fail("'" + c.path("tag_validation") + "' is '" + *v + "'" + didYouMean(*v, modes) +
             "; DeepSpeed's values: " + join(modes));
    if (upper != "IGNORE")
      cfg.notes.push_back("'" + c.path("tag_validation") +
                          "' checks that every rank saves under the same tag; dsrt's ranks "
                          "all name the tag after the step, so it always holds");
  }
  if (!c.boolean("load_universal").value_or(true))
    cfg.notes.push_back("'" + c.path("load_universal") +
                        "' is false, but every dsc checkpoint is universal: dsrt --resume "
                        "loads it into any dp, pp, ZeRO stage and precision");
  cfg.checkpointNodeLocal = c.boolean("use_node_local_storage").value_or(false);
  if (c.has("parallel_write")) {
    Section pw = c.object("parallel_write");
    pw.checkKeys({"pipeline_stage"});
    if (!pw.boolean("pipeline_stage").value_or(false))
      cfg.notes.push_back("'" + pw.path("pipeline_stage") +
                          "' is false, but dsrt always writes in parallel: every rank its own "
                          "file, pipeline stages included");
  }
}

/// "tensor_parallel": DeepSpeed's autotp_size is dsc's --tp. The other keys
/// configure AutoTP's module replacement, which dsc has no use for.
void readTensorParallel(const Section &top, TrainConfig &cfg) {
  Section t = top.object("tensor_parallel");
  t.checkKeys({"autotp_size"}, [&](const std::string &key) -> std::string {
    static const std::vector<std::string> autoTp = {
        "tp", "tp_size", "tp_grain_size", "partition_config", "injection_policy_tuple",
        "keep_module_on_host", "replace_with_kernel_inject", "tp_overlap_comm"};
    if (std::find(autoTp.begin(), autoTp.end(), key) == autoTp.end())
      return "";
    return "'" + t.path(key) + "' configures DeepSpeed's AutoTP (which modules to replace and "
           "how); dsc finds the GEMM pairs in the graph itself: give only 'autotp_size' "
           "(or dsc --tp)";
  });
  // DeepSpeed's default 0 means no tensor parallelism, as 1 does.
  if (std::optional<int64_t> n = t.count("autotp_size", 0, std::numeric_limits<int32_t>::max()))
    cfg.tensorParallel = std::max<int64_t>(*n, 1);
}

} // namespace dsrt::config::detail
