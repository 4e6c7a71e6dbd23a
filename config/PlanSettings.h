//===- PlanSettings.h - the ds_config's settings as plan data -----*- C++ -*-===//
//
// What dsrt reads of a ds_config, typed: the precision and fp16's loss
// scaler, the lr schedule, the monitors and what a run prints. dsc writes
// them into the plan (plan.proto's Precision, LossScaler, LrSchedule and
// RunSettings, format 9) with the digests of the settings compiled into the
// program; dsrt reads them back, and `dsrt --config` turns a run-time
// ds_config into the same settings, refusing one whose compiled-in groups
// differ from the plan's. The one conversion between the two
// representations, used by both drivers.
//
// A plan of format 1-8 has no typed settings, only its recorded ds_config
// (Plan.ds_config): readPlanSettings reads them from that record once, as
// those plans meant.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_CONFIG_PLANSETTINGS_H
#define DSRT_CONFIG_PLANSETTINGS_H

#include "config/DsConfig.h"

#include <map>
#include <string>
#include <vector>

namespace dsc::plan {
class Plan;
}

namespace dsrt::config {

/// Every ds_config setting dsrt reads.
struct PlanSettings {
  Precision precision = Precision::FP32;
  /// fp16's loss scaler (read when precision is FP16).
  Fp16Config fp16;
  /// The lr schedule; scheduler.cycleMomentum is whether the betas cycle
  /// (OneCycle's cycle_momentum on an optimizer with betas).
  SchedulerConfig scheduler;
  /// The optimizer's lr, which the schedule starts from (or scales).
  double lr = 1e-3;
  /// Run-time settings (dsrt --config may change them with the schedule).
  int64_t stepsPerPrint = 0; // 0: dsrt's default
  bool wallClockBreakdown = false;
  bool checkpointNodeLocal = false; // checkpoint.use_node_local_storage
  MonitorConfig csvMonitor;
  MonitorConfig tensorboard;
  CommsLoggerConfig commsLogger;
  FlopsProfilerConfig flopsProfiler;
  /// The settings compiled into the program: group -> SHA-256 (hex) of
  /// the group's canonical form (compiledGroups()).
  std::map<std::string, std::string> compiled;
};

/// The compiled-in groups in the order they are checked, each with the
/// words an error names it by ("the optimizer settings").
struct CompiledGroup {
  const char *name;        // "optimizer"
  const char *description; // "the optimizer settings"
};
const std::vector<CompiledGroup> &compiledGroups();

/// The settings of a parsed ds_config (its compiled-in groups digested).
PlanSettings planSettingsOf(const TrainConfig &cfg);

/// Writes `s` into `p` as format-9 messages: precision, loss_scaler (fp16),
/// lr_schedule, run_settings and compiled_settings.
void writePlanSettings(const PlanSettings &s, dsc::plan::Plan &p);

/// The settings of plan `p` (a whole plan or a pipeline stage's), checked;
/// a format 1-8 plan's from its recorded ds_config. Throws ConfigError
/// starting with `name`.
PlanSettings readPlanSettings(const dsc::plan::Plan &p, const std::string &name);

/// The first compiled-in group whose digest differs between `plan` and
/// `given` (its description), or "" when they agree.
std::string firstDifferingGroup(const PlanSettings &plan, const PlanSettings &given);

} // namespace dsrt::config

#endif // DSRT_CONFIG_PLANSETTINGS_H
