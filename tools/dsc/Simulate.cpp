//===- Simulate.cpp - dsc's --simulate and --hardware ----------------------===//
#include "tools/dsc/Simulate.h"

#include "config/CliChecks.h"
#include "io/OutputDir.h"

#include <CLI/CLI.hpp>

namespace dsc::driver {

void Simulation::addOptions(CLI::App &app) {
  app.add_flag("--simulate", simulate_,
               "predict the step time, per stage and per instruction kind, and the MFU on the "
               "machine --hardware describes (no -o: the plan is built in memory only)");
  app.add_option("--hardware", hardwarePath_,
                 "a hardware file (JSON: rates, links; docs/planning-at-scale.md), or the name "
                 "of one in the source tree's hardware/ folder (a100-sxm, h100-sxm, gaudi2)")
      ->check(dsrt::cli::nonEmpty());
  app.add_option("--timeline", timelineDir_,
                 "with --simulate: write the predicted step of each stage's first rank to DIR "
                 "as dsrt --timeline does (draw it with tools/timeline/render_timeline.py DIR)")
      ->check(dsrt::cli::nonEmpty());
}

bool Simulation::configure(bool autoSearch, bool emitGiven, std::string &emit,
                           llvm::raw_ostream &errs) {
  const bool simulate = simulate_ || autoSearch;
  const char *flag = autoSearch ? "--auto" : "--simulate";
  const std::string &hardwarePath = hardwarePath_;
  if (!hardwarePath.empty() && !simulate) {
    errs << "dsc: error: --hardware: is read by --simulate and --auto only; add one or drop "
            "the flag\n";
    return false;
  }
  if (!timelineDir_.empty() && !simulate_) {
    errs << "dsc: error: --timeline: is written by --simulate only; add it or drop the flag\n";
    return false;
  }
  if (!simulate)
    return true;
  if (emitGiven && emit != "plan") {
    errs << "dsc: error: " << flag << " runs the plan's instructions: it takes no --emit="
         << emit << "\n";
    return false;
  }
  if (hardwarePath.empty()) {
    errs << "dsc: error: " << flag << " needs --hardware FILE: one of "
         << sim::shippedHardware() << ", or this machine's, which bench/calibrate.py measures\n";
    return false;
  }
  try {
    hardware_ = sim::readHardware(sim::resolveHardware(hardwarePath));
  } catch (const sim::HardwareError &e) {
    errs << "dsc: error: --hardware: " << e.what() << "\n";
    return false;
  }
  emit = "plan";
  return true;
}

std::function<void(const plan::Plan &)> Simulation::inspector() {
  if (!hardware_)
    return {};
  return [this](const plan::Plan &plan) {
    try {
      sim::SimulateOptions options;
      options.timeline = !timelineDir_.empty();
      report_ = sim::simulate(plan, *hardware_, options);
    } catch (const sim::SimulationError &e) {
      error_ = e.what();
    }
  };
}

bool Simulation::finish(bool afterExplain, llvm::raw_ostream &outs,
                        llvm::raw_ostream &errs) const {
  if (!error_.empty()) {
    errs << "dsc: error: --simulate: " << error_ << "\n";
    return false;
  }
  if (report_) {
    if (afterExplain)
      outs << "\n";
    sim::printReport(*report_, *hardware_, outs);
  }
  if (report_ && !timelineDir_.empty()) {
    // Written beside DIR and moved into place whole; DIR may be new, empty
    // or an earlier output of dsc (io/OutputDir.h).
    try {
      dsrt::io::StagedDir dir(timelineDir_, "--timeline");
      sim::writeTimeline(*report_, dir.path());
      dir.commit();
    } catch (const std::exception &e) {
      errs << "dsc: error: " << e.what() << "\n";
      return false;
    }
    outs << "timeline:         " << timelineDir_ << "/timeline.rank-*.csv (draw it: "
         << "tools/timeline/render_timeline.py " << timelineDir_ << ")\n";
  }
  return true;
}

} // namespace dsc::driver
