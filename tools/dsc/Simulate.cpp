//===- Simulate.cpp - dsc's --simulate and --hardware ----------------------===//
#include "tools/dsc/Simulate.h"

namespace dsc::driver {

bool Simulation::configure(bool simulate, const std::string &hardwarePath, bool emitGiven,
                           std::string &emit, llvm::raw_ostream &errs) {
  if (!hardwarePath.empty() && !simulate) {
    errs << "dsc: error: --hardware: is read by --simulate only; add it or drop the flag\n";
    return false;
  }
  if (!simulate)
    return true;
  if (emitGiven && emit != "plan") {
    errs << "dsc: error: --simulate runs the plan's instructions: it takes no --emit=" << emit
         << "\n";
    return false;
  }
  if (hardwarePath.empty()) {
    errs << "dsc: error: --simulate needs --hardware FILE: one of " << sim::shippedHardware()
         << ", or this machine's, which bench/calibrate.py measures\n";
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
