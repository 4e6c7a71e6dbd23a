//===- Simulate.h - dsc's --simulate and --hardware -------------*- C++ -*-===//
//
// The driver's side of the simulator (target/sim/Simulator.h): the flags'
// checks, the hardware file, and the report of the plan emit-plan builds.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TOOLS_DSC_SIMULATE_H
#define DSC_TOOLS_DSC_SIMULATE_H

#include "target/sim/Simulator.h"

#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <optional>
#include <string>

namespace CLI {
class App;
}

namespace dsc::driver {

class Simulation {
public:
  /// --simulate and --hardware.
  void addOptions(CLI::App &app);
  /// Checks --simulate and --hardware against --emit (`emitGiven`: the
  /// flag was given) and --auto (which also reads the hardware file), and
  /// reads the file; --simulate makes the emitted form a plan. False after
  /// printing the error.
  bool configure(bool autoSearch, bool emitGiven, std::string &emit, llvm::raw_ostream &errs);
  bool enabled() const { return hardware_.has_value(); }
  const sim::Hardware &hardware() const { return *hardware_; }
  /// What emit-plan calls with the plan it built.
  std::function<void(const plan::Plan &)> inspector();
  /// Prints the report (after a blank line when --explain printed first).
  /// False after printing the simulation's error.
  bool finish(bool afterExplain, llvm::raw_ostream &outs, llvm::raw_ostream &errs) const;

private:
  bool simulate_ = false;
  std::string hardwarePath_, timelineDir_;
  std::optional<sim::Hardware> hardware_;
  std::optional<sim::Report> report_;
  std::string error_;
};

} // namespace dsc::driver

#endif // DSC_TOOLS_DSC_SIMULATE_H
