//===- Simulate.cpp - dsc's --simulate and --hardware ----------------------===//
#include "tools/dsc/Simulate.h"

#include "config/CliChecks.h"

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
      report_ = sim::simulate(plan, *hardware_);
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
  return true;
}

} // namespace dsc::driver
