//===- EmitPlan.h - write a planned step as a dsrt plan ---------*- C++ -*-===//
#ifndef DSC_PASSES_EMITPLAN_H
#define DSC_PASSES_EMITPLAN_H

#include "frontends/common/ImportOptions.h"
#include "config/DsConfig.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace dsc {


struct EmitPlanOptions {
  std::string dir;                          // the plan directory
  dsrt::config::TrainConfig config;         // baked in (as JSON) and the lr schedule
  frontend::ImportOptions importOptions;    // to re-read the weights
  llvm::raw_ostream *manifest = nullptr;    // also print the manifest here
};

/// Writes `dir`/plan.pb, weights.safetensors and manifest.txt for the
/// training step in `module` (after memory-plan). Diagnostics on failure.
mlir::LogicalResult emitPlan(mlir::ModuleOp module, const EmitPlanOptions &options);

} // namespace dsc

#endif // DSC_PASSES_EMITPLAN_H
