//===- EmitPlan.h - write a planned step as a dsrt plan ---------*- C++ -*-===//
//
// The plan target: a planned training step (the module after memory-plan)
// written as the plan directory dsrt runs (plan/plan.proto), with its
// manifest (PlanManifest.h). Not a pass: it ends the compile. It reads no
// model file; the driver hands it the initial weights (WeightSource).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TARGET_PLAN_EMITPLAN_H
#define DSC_TARGET_PLAN_EMITPLAN_H

#include "config/DsConfig.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace dsc {
namespace plan {
class Plan;
}

/// Receives one initial weight: its name, shape and values (float32).
using WeightConsumer = std::function<void(const std::string &, const std::vector<int64_t> &,
                                          const std::vector<float> &)>;

/// Where the initial weights come from (dsc: the model file it imported,
/// frontend::readFloatWeights). Hands `consume` the weights named in
/// `names`; with `skeleton`, also the source model without the data of the
/// weights in `strip` (an ONNX model, for dsrt --export-onnx; left empty for
/// a model without one).
using WeightSource = std::function<llvm::Error(const std::set<std::string> &names,
                                               const WeightConsumer &consume,
                                               std::string *skeleton,
                                               const std::set<std::string> *strip)>;


struct EmitPlanOptions {
  std::string dir;                          // the plan directory ("": none, see inspect)
  dsrt::config::TrainConfig config;         // its settings, typed, and the record
  WeightSource weights;                     // the initial weights
  llvm::raw_ostream *manifest = nullptr;    // also print the manifest here
  /// Called with the whole plan before anything is written (dsc
  /// --simulate). With `dir` empty, nothing is written and no weight read.
  std::function<void(const plan::Plan &)> inspect;
};

/// Writes `dir`/plan.pb, weights.safetensors and manifest.txt for the
/// training step in `module` (after memory-plan). Diagnostics on failure.
mlir::LogicalResult emitPlan(mlir::ModuleOp module, const EmitPlanOptions &options);

} // namespace dsc

#endif // DSC_TARGET_PLAN_EMITPLAN_H
