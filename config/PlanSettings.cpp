//===- PlanSettings.cpp - the ds_config's settings as plan data -----------===//

#include "config/PlanSettings.h"

#include "config/LrSchedule.h"
#include "io/FileUtil.h"
#include "plan.pb.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iterator>
#include <utility>

namespace dsrt::config {
namespace {

using ordered_json = nlohmann::ordered_json;
namespace plan = dsc::plan;

/// The top-level keys of each compiled-in group in toJson()'s canonical
/// form, in compiledGroups()' order.
const std::vector<std::vector<const char *>> &groupKeys() {
  static const std::vector<std::vector<const char *>> keys = {
      {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"},
      {"optimizer"},
      {"gradient_clipping"},
      {"zero_optimization", "aio"},
      {"pipeline"},
      {"fp16", "bf16", "data_types", "communication_data_type"},
      {"activation_checkpointing"},
      {"tensor_parallel"},
  };
  return keys;
}

std::map<std::string, std::string> compiledDigests(const TrainConfig &cfg) {
  // toJson is the canonical form (every default written, a setting spelled
  // one way), so equal settings give equal text.
  ordered_json canonical = ordered_json::parse(toJson(cfg));
  std::map<std::string, std::string> digests;
  for (size_t g = 0; g < compiledGroups().size(); ++g) {
    ordered_json part = ordered_json::object();
    for (const char *key : groupKeys()[g])
      part[key] = canonical.contains(key) ? canonical[key] : ordered_json(nullptr);
    std::string text = part.dump();
    digests[compiledGroups()[g].name] = io::sha256Hex(text.data(), text.size());
  }
  return digests;
}

/// The plan's precision of each config precision (one table, both ways).
constexpr std::pair<Precision, plan::Precision> kPrecisions[] = {
    {Precision::FP32, plan::PRECISION_FP32},
    {Precision::BF16, plan::PRECISION_BF16},
    {Precision::FP16, plan::PRECISION_FP16},
};

plan::Precision toPlan(Precision p) {
  for (auto [config, planned] : kPrecisions)
    if (config == p)
      return planned;
  return plan::PRECISION_FP32;
}

void writeMonitor(const MonitorConfig &m, plan::Monitor &out) {
  out.set_enabled(m.enabled);
  out.set_output_path(m.outputPath);
  out.set_job_name(m.jobName);
}

MonitorConfig readMonitor(const plan::Monitor &m, const std::string &where) {
  MonitorConfig c;
  c.enabled = m.enabled();
  c.outputPath = m.output_path();
  c.jobName = m.job_name();
  if (!jobNameStaysInside(c.jobName))
    throw ConfigError(where + ".job_name '" + c.jobName +
                      "' leaves its output_path (it must be a relative name inside it)");
  return c;
}

void checkRange(int64_t value, int64_t low, int64_t high, const std::string &what) {
  if (value < low || value > high)
    throw ConfigError(what + " " + std::to_string(value) + " must lie in [" +
                      std::to_string(low) + ", " + std::to_string(high) + "]");
}

/// A format-9 plan's own messages.
PlanSettings readTyped(const plan::Plan &p, const std::string &name) {
  PlanSettings s;
  const auto *known = std::find_if(std::begin(kPrecisions), std::end(kPrecisions),
                                   [&](const auto &e) { return e.second == p.precision(); });
  if (known == std::end(kPrecisions))
    throw ConfigError(name + ": precision " + std::to_string(int(p.precision())) +
                      " is not one this dsrt knows (fp32 0, bf16 1, fp16 2)");
  s.precision = known->first;
  if (s.precision == Precision::FP16) {
    if (!p.has_loss_scaler())
      throw ConfigError(name + ": an fp16 plan has no loss_scaler");
    const plan::LossScaler &l = p.loss_scaler();
    s.fp16.lossScale = l.loss_scale();
    s.fp16.initialScalePower = l.initial_scale_power();
    s.fp16.lossScaleWindow = l.loss_scale_window();
    s.fp16.hysteresis = l.hysteresis();
    s.fp16.consecutiveHysteresis = l.consecutive_hysteresis();
    s.fp16.minLossScale = l.min_loss_scale();
  } else if (p.has_loss_scaler()) {
    throw ConfigError(name + ": a loss_scaler in a plan that does not train in fp16");
  }
  if (!p.has_run_settings())
    throw ConfigError(name + ": a format-" + std::to_string(p.format_version()) +
                      " plan has no run_settings");
  const plan::RunSettings &r = p.run_settings();
  checkRange(r.steps_per_print(), 0, kMaxSteps, name + ": run_settings.steps_per_print");
  s.stepsPerPrint = r.steps_per_print();
  s.wallClockBreakdown = r.wall_clock_breakdown();
  s.checkpointNodeLocal = r.checkpoint_node_local();
  s.csvMonitor = readMonitor(r.csv_monitor(), name + ": run_settings.csv_monitor");
  s.tensorboard = readMonitor(r.tensorboard(), name + ": run_settings.tensorboard");
  const plan::CommsLogger &c = r.comms_logger();
  s.commsLogger.enabled = c.enabled();
  s.commsLogger.verbose = c.verbose();
  s.commsLogger.profAll = c.prof_all();
  s.commsLogger.profOps.assign(c.prof_ops().begin(), c.prof_ops().end());
  s.commsLogger.debug = c.debug();
  const plan::FlopsProfiler &f = r.flops_profiler();
  std::string fp = name + ": run_settings.flops_profiler.";
  checkRange(f.profile_step(), 1, kMaxSteps, fp + "profile_step");
  checkRange(f.module_depth(), -1, 1024, fp + "module_depth");
  checkRange(f.top_modules(), 1, int64_t(1) << 20, fp + "top_modules");
  s.flopsProfiler.enabled = f.enabled();
  s.flopsProfiler.profileStep = f.profile_step();
  s.flopsProfiler.moduleDepth = f.module_depth();
  s.flopsProfiler.topModules = f.top_modules();
  s.flopsProfiler.detailed = f.detailed();
  s.flopsProfiler.outputFile = f.output_file();
  s.compiled = std::map<std::string, std::string>(p.compiled_settings().begin(),
                                                  p.compiled_settings().end());
  for (const CompiledGroup &g : compiledGroups())
    if (!s.compiled.count(g.name))
      throw ConfigError(name + ": compiled_settings has no '" + g.name + "' digest");
  return s;
}

} // namespace

const std::vector<CompiledGroup> &compiledGroups() {
  static const std::vector<CompiledGroup> groups = {
      {"batch", "the batch sizes / gradient_accumulation_steps"},
      {"optimizer", "the optimizer settings"},
      {"gradient_clipping", "the gradient_clipping settings"},
      {"zero", "the zero_optimization / aio settings"},
      {"pipeline", "the pipeline settings"},
      {"precision", "the bf16 / fp16 / data_types / communication_data_type settings"},
      {"recompute", "the activation_checkpointing settings"},
      {"tensor_parallel", "the tensor_parallel.autotp_size settings"},
  };
  return groups;
}

PlanSettings planSettingsOf(const TrainConfig &cfg) {
  PlanSettings s;
  s.precision = cfg.precision.kind;
  s.fp16 = cfg.precision.fp16;
  s.scheduler = cfg.scheduler;
  s.scheduler.cycleMomentum = cyclesBetas(cfg);
  s.lr = cfg.optimizer.lr;
  s.stepsPerPrint = cfg.stepsPerPrint;
  s.wallClockBreakdown = cfg.wallClockBreakdown;
  s.checkpointNodeLocal = cfg.checkpointNodeLocal;
  s.csvMonitor = cfg.csvMonitor;
  s.tensorboard = cfg.tensorboard;
  s.commsLogger = cfg.commsLogger;
  s.flopsProfiler = cfg.flopsProfiler;
  s.compiled = compiledDigests(cfg);
  return s;
}

void writePlanSettings(const PlanSettings &s, plan::Plan &p) {
  p.set_precision(toPlan(s.precision));
  if (s.precision == Precision::FP16) {
    plan::LossScaler *l = p.mutable_loss_scaler();
    l->set_loss_scale(s.fp16.lossScale);
    l->set_initial_scale_power(s.fp16.initialScalePower);
    l->set_loss_scale_window(s.fp16.lossScaleWindow);
    l->set_hysteresis(s.fp16.hysteresis);
    l->set_consecutive_hysteresis(s.fp16.consecutiveHysteresis);
    l->set_min_loss_scale(s.fp16.minLossScale);
  } else {
    p.clear_loss_scaler();
  }
  plan::LrSchedule *l = p.mutable_lr_schedule();
  l->Clear();
  l->set_type(s.scheduler.type);
  for (const auto &[name, value] : s.scheduler.params)
    (*l->mutable_params())[name] = value;
  l->set_lr(s.lr);
  l->set_warmup_type(s.scheduler.warmupType);
  l->set_staircase(s.scheduler.staircase);
  l->set_cycle_momentum(s.scheduler.cycleMomentum);
  l->set_total_steps_from_run(s.scheduler.totalStepsFromRun);
  plan::RunSettings *r = p.mutable_run_settings();
  r->set_steps_per_print(s.stepsPerPrint);
  r->set_wall_clock_breakdown(s.wallClockBreakdown);
  r->set_checkpoint_node_local(s.checkpointNodeLocal);
  writeMonitor(s.csvMonitor, *r->mutable_csv_monitor());
  writeMonitor(s.tensorboard, *r->mutable_tensorboard());
  plan::CommsLogger *c = r->mutable_comms_logger();
  c->set_enabled(s.commsLogger.enabled);
  c->set_verbose(s.commsLogger.verbose);
  c->set_prof_all(s.commsLogger.profAll);
  c->clear_prof_ops();
  for (const std::string &op : s.commsLogger.profOps)
    c->add_prof_ops(op);
  c->set_debug(s.commsLogger.debug);
  plan::FlopsProfiler *f = r->mutable_flops_profiler();
  f->set_enabled(s.flopsProfiler.enabled);
  f->set_profile_step(s.flopsProfiler.profileStep);
  f->set_module_depth(s.flopsProfiler.moduleDepth);
  f->set_top_modules(s.flopsProfiler.topModules);
  f->set_detailed(s.flopsProfiler.detailed);
  f->set_output_file(s.flopsProfiler.outputFile);
  p.clear_compiled_settings();
  for (const auto &[group, digest] : s.compiled)
    (*p.mutable_compiled_settings())[group] = digest;
}

PlanSettings readPlanSettings(const plan::Plan &p, const std::string &name) {
  PlanSettings s;
  if (p.format_version() >= 9) {
    s = readTyped(p, name);
  } else {
    // Format 1-8: the settings are the recorded ds_config's (its
    // total_num_steps may be left to the run).
    AutoValues autos;
    autos.runLengthAtRun = true;
    TrainConfig cfg = p.ds_config().empty()
                          ? defaultConfig()
                          : parseDsConfig(p.ds_config(), name + " (baked config)",
                                          std::max<int64_t>(1, p.dp()), autos);
    s = planSettingsOf(cfg);
    // Format 3-8: the lr schedule is the plan's own; its cycle_momentum
    // was written as configured, whatever the optimizer.
    if (p.format_version() >= 3) {
      TrainConfig withSchedule = cfg;
      withSchedule.scheduler.cycleMomentum = p.lr_schedule().cycle_momentum();
      s.scheduler.cycleMomentum = cyclesBetas(withSchedule);
    }
  }
  // Format 3 on: the lr schedule is plan data.
  if (p.format_version() >= 3) {
    if (!p.has_lr_schedule())
      throw ConfigError(name + ": a format-" + std::to_string(p.format_version()) +
                        " plan has no lr_schedule");
    const plan::LrSchedule &l = p.lr_schedule();
    bool cycles = s.scheduler.cycleMomentum;
    s.scheduler.type = l.type();
    s.scheduler.params = std::map<std::string, double>(l.params().begin(), l.params().end());
    s.scheduler.warmupType = l.warmup_type();
    s.scheduler.staircase = l.staircase();
    s.scheduler.cycleMomentum = p.format_version() >= 9 ? l.cycle_momentum() : cycles;
    s.scheduler.totalStepsFromRun = l.total_steps_from_run();
    s.lr = l.lr();
  }
  return s;
}

std::string firstDifferingGroup(const PlanSettings &plan, const PlanSettings &given) {
  for (const CompiledGroup &g : compiledGroups()) {
    auto a = plan.compiled.find(g.name), b = given.compiled.find(g.name);
    if (a == plan.compiled.end() || b == given.compiled.end() || a->second != b->second)
      return g.description;
  }
  return "";
}

} // namespace dsrt::config
