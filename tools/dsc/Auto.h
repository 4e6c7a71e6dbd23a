//===- Auto.h - dsc --auto: the layout search ------------------*- C++ -*-===//
//
// dsc MODEL --auto --ranks N --device-memory SIZE --hardware FILE searches
// the layouts of N ranks (tensor, pipeline and data parallelism, the ZeRO
// stage, activation recomputation, offload, and a dynamic-batch model's
// micro-batch size) for the one with the shortest predicted
// step, with no trial run: each candidate is compiled (the plan's exact
// memory per rank), dropped when it does not fit SIZE, and simulated
// (target/sim). Layout flags given with --auto fix that part of the
// search. docs/planning-at-scale.md ("Choosing the layout") says how the
// candidates are chosen and pruned.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TOOLS_DSC_AUTO_H
#define DSC_TOOLS_DSC_AUTO_H

#include "frontends/common/ImportOptions.h"
#include "tools/dsc/CompileConfig.h"
#include "target/sim/Hardware.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace dsc::driver {

struct AutoOptions {
  bool enabled = false;
  int64_t ranks = 0;
  std::string deviceMemoryText;
  uint64_t deviceMemory = 0;
  std::string hostMemoryText; // --host-memory: one node's (0: not checked)
  uint64_t hostMemory = 0;
  int64_t top = 5; // plans listed
};

/// --auto, --ranks, --device-memory, --host-memory, --top.
void addAutoOptions(CLI::App &app, AutoOptions &options);

/// Checks the flags that go with --auto (false after printing the error).
bool checkAutoOptions(const CLI::App &app, AutoOptions &options, llvm::raw_ostream &errs);

/// Runs the search over the imported `module` (left as it is) and prints
/// the best plans; returns dsc's exit status. Every layout trains the
/// samples per step of `allData`, the configuration read with all ranks
/// data-parallel. `args`: dsc's command line, for the printed commands.
/// A model with a dynamic batch is imported again (`importOptions`) at
/// each micro-batch size the search tries.
int runAuto(mlir::MLIRContext &ctx, mlir::ModuleOp module, const std::string &model,
            const dsc::frontend::ImportOptions &importOptions,
            const dsrt::config::CompileFlags &flags, const dsrt::config::ModelFacts &facts,
            const AutoOptions &options, const sim::Hardware &hardware,
            const dsrt::config::TrainConfig &allData, const std::vector<std::string> &args,
            llvm::raw_ostream &outs, llvm::raw_ostream &errs);

} // namespace dsc::driver

#endif // DSC_TOOLS_DSC_AUTO_H
