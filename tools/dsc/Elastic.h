//===- Elastic.h - the plans of an elastic job's smaller sizes -*- C++ -*-===//
//
// A ds_config with elasticity enabled (DeepSpeed's batch rules, read in
// config/DsConfigElastic.cpp) is valid on several data-parallel sizes with
// one global batch. dsc compiles the plan for the size asked (--dp) and,
// beside it, one for each smaller valid size: PLAN/elastic/dpN, each with
// its own gradient accumulation, without weights (a restart resumes from a
// checkpoint). dsrt --max-restarts chooses among them when hosts are lost.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TOOLS_ELASTIC_H
#define DSC_TOOLS_ELASTIC_H

#include "tools/dsc/CompileConfig.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace dsc::driver {

class ElasticPlans {
public:
  /// Keeps a copy of `module` as imported, before the train step is
  /// compiled into it.
  ElasticPlans(mlir::ModuleOp module, const dsrt::config::CompileFlags &flags,
               const dsrt::config::CompileInput &input, const dsrt::config::ModelFacts &facts,
               const dsrt::config::TrainConfig &cfg);

  /// Compiles the smaller sizes' plans into `planDir`/elastic and adds
  /// their lines to `planDir`/manifest.txt (and to `explain`, when given).
  /// False after an error, which was printed.
  bool compile(mlir::MLIRContext &ctx, const std::string &planDir, llvm::raw_ostream *explain,
               llvm::raw_ostream &errs);

private:
  mlir::OwningOpRef<mlir::ModuleOp> pristine_;
  dsrt::config::CompileFlags flags_;
  const dsrt::config::CompileInput &input_;
  dsrt::config::ModelFacts facts_;
  dsrt::config::TrainConfig cfg_;
};

} // namespace dsc::driver

#endif // DSC_TOOLS_ELASTIC_H
