//===- Elastic.cpp - the plans of an elastic job's smaller sizes ----------===//
#include "tools/dsc/Elastic.h"

#include "passes/TrainStep.h"
#include "target/plan/EmitPlan.h"

#include "mlir/IR/Builders.h"

#include <fstream>

namespace dsc::driver {

using dsrt::config::TrainConfig;

ElasticPlans::ElasticPlans(mlir::ModuleOp module, const dsrt::config::CompileFlags &flags,
                           const dsrt::config::CompileInput &input,
                           const dsrt::config::ModelFacts &facts, const TrainConfig &cfg)
    : pristine_(module.clone()), flags_(flags), input_(input), facts_(facts), cfg_(cfg) {}

bool ElasticPlans::compile(mlir::MLIRContext &ctx, const std::string &planDir,
                           llvm::raw_ostream *explain, llvm::raw_ostream &errs) {
  const std::string &source = flags_.configPath;
  std::vector<std::string> lines;
  std::string sizes;
  for (int64_t s : cfg_.elastic.validSizes)
    sizes += (sizes.empty() ? "" : ", ") + std::to_string(s);
  lines.push_back("elastic:        global batch " + std::to_string(cfg_.trainBatchSize) +
                  " on data-parallel sizes " + sizes + " (DeepSpeed's elasticity " +
                  (cfg_.elastic.version == 0.1 ? "0.1" : "0.2") + "); this plan: dp " +
                  std::to_string(cfg_.worldSize) + ", micro-batch " +
                  std::to_string(cfg_.microBatchPerGpu) + " x " +
                  std::to_string(cfg_.gradAccumSteps) + " accumulation steps");
  // The smaller sizes, largest first: the ones a restart on fewer hosts
  // can continue on with the same global batch.
  for (auto it = cfg_.elastic.validSizes.rbegin(); it != cfg_.elastic.validSizes.rend(); ++it) {
    int64_t dp = *it;
    if (dp >= cfg_.worldSize)
      continue;
    std::string name = "elastic/dp" + std::to_string(dp);
    TrainConfig cfg;
    try {
      std::vector<std::string> notes; // the main plan's reading said them
      cfg = dsrt::config::applyCompileFlags(
          dsrt::config::readForDp(flags_, input_, facts_, dp, notes), flags_, input_, facts_);
    } catch (const std::exception &e) {
      // A model whose batch is fixed cannot take another size's micro-batch.
      lines.push_back("  dp " + std::to_string(dp) + ": not compiled: " + e.what());
      errs << "dsc: note: " << source << ": elasticity: dp " << dp
           << " is not compiled: " << e.what() << "\n";
      continue;
    }
    mlir::OwningOpRef<mlir::ModuleOp> module = pristine_->clone();
    // Without weights: a restart resumes from a checkpoint.
    (*module)->setAttr("dsc.no_weights", mlir::UnitAttr::get(&ctx));
    if (mlir::failed(compileTrainStep(ctx, *module, cfg, true, errs)))
      return false;
    EmitPlanOptions options;
    options.dir = planDir + "/" + name;
    options.config = cfg;
    options.weights = [](const std::set<std::string> &, const WeightConsumer &, std::string *,
                         const std::set<std::string> *) { return llvm::Error::success(); };
    if (mlir::failed(emitPlan(*module, options)))
      return false;
    lines.push_back("  " + name + ": dp " + std::to_string(dp) + ", micro-batch " +
                    std::to_string(cfg.microBatchPerGpu) + " x " +
                    std::to_string(cfg.gradAccumSteps) +
                    " accumulation steps (the same global batch), no weights: dsrt "
                    "--max-restarts continues on it from a checkpoint");
  }
  std::ofstream manifest(planDir + "/manifest.txt", std::ios::app);
  for (const std::string &line : lines) {
    manifest << line << "\n";
    if (explain)
      *explain << line << "\n";
  }
  manifest.flush();
  if (!manifest) {
    errs << "dsc: error: cannot write " << planDir << "/manifest.txt\n";
    return false;
  }
  return true;
}

} // namespace dsc::driver
