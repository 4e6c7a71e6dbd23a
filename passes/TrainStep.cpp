//===- TrainStep.cpp - the training step compiled from a resolved config --===//

#include "passes/TrainStep.h"

#include "passes/Pipeline.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace dsc {

uint64_t plannedPeak(mlir::ModuleOp module) {
  uint64_t peak = 0;
  for (auto fn : module.getOps<mlir::func::FuncOp>())
    if (auto a = fn->getAttrOfType<mlir::IntegerAttr>(train::TrainDialect::kArenaBytes))
      peak = std::max<uint64_t>(peak, uint64_t(a.getInt()));
  return peak;
}

std::optional<dsrt::config::RecomputeConfig>
chooseRecompute(mlir::MLIRContext &ctx, mlir::ModuleOp module,
                const dsrt::config::TrainConfig &cfg, llvm::raw_ostream &diag) {
  struct Try {
    dsrt::config::RecomputeConfig rc;
    uint64_t peak = 0;
    double flops = 0;
    int64_t layers = 0;
  };
  auto attempt = [&](dsrt::config::RecomputeConfig rc) -> std::optional<Try> {
    dsrt::config::TrainConfig c = cfg;
    c.recompute = rc;
    mlir::OwningOpRef<mlir::ModuleOp> copy = module.clone();
    mlir::PassManager pm(&ctx);
    buildTrainPipeline(pm, c);
    if (mlir::failed(pm.run(*copy)))
      return std::nullopt;
    Try t{rc, plannedPeak(*copy), 0, 0};
    if (auto d = (*copy)->getAttrOfType<mlir::DictionaryAttr>("train.recompute"))
      if (auto f = d.getAs<mlir::FloatAttr>("flops"))
        t.flops = f.getValueAsDouble();
    if (auto l = (*copy)->getAttrOfType<mlir::IntegerAttr>("train.recompute_layers"))
      t.layers = l.getInt();
    return t;
  };
  uint64_t budget = cfg.recompute.memoryBudget;
  dsrt::config::RecomputeConfig base = cfg.recompute;
  base.mode = "none";
  std::optional<Try> none = attempt(base);
  if (!none)
    return std::nullopt;
  auto say = [&](const Try &t, const std::string &what) {
    diag << "dsc: note: --recompute auto: " << what << ": planned peak " << t.peak
                 << " bytes <= --memory-budget " << budget << " (without recompute: "
                 << none->peak << ")\n";
    return t.rc;
  };
  if (none->peak <= budget)
    return say(*none, "nothing to recompute");
  dsrt::config::RecomputeConfig rc = base;
  rc.mode = "selective";
  std::optional<Try> selective = attempt(rc);
  rc.mode = "layers";
  rc.limit = 0;
  std::optional<Try> layers = attempt(rc);
  if (!selective || !layers)
    return std::nullopt;
  std::vector<Try> fit;
  if (selective->peak <= budget)
    fit.push_back(*selective);
  if (layers->peak > budget) {
    if (fit.empty()) {
      diag << "dsc: error: --memory-budget " << budget
                   << " bytes: no recomputation fits it; the smallest planned peak is "
                   << std::min(layers->peak, selective->peak) << " bytes (--recompute "
                   << (layers->peak <= selective->peak ? "layers" : "selective")
                   << "; without recompute " << none->peak << ")\n";
      return std::nullopt;
    }
  } else {
    fit.push_back(*layers);
    // The fewest first layers that fit.
    int64_t lo = 1, hi = std::max<int64_t>(1, layers->layers - 1);
    std::optional<Try> best;
    while (lo <= hi) {
      int64_t mid = (lo + hi) / 2;
      rc.limit = mid;
      std::optional<Try> t = attempt(rc);
      if (!t)
        return std::nullopt;
      if (t->peak <= budget) {
        best = t;
        hi = mid - 1;
      } else {
        lo = mid + 1;
      }
    }
    if (best)
      fit.push_back(*best);
  }
  const Try *pick = &fit.front();
  for (const Try &t : fit)
    if (t.flops < pick->flops)
      pick = &t;
  std::string what = pick->rc.mode == "selective" ? std::string("selective")
                     : pick->rc.limit > 0
                         ? "layers on the first " + std::to_string(pick->rc.limit) + " of " +
                               std::to_string(layers->layers) + " layers"
                         : std::string("layers");
  char flops[64];
  std::snprintf(flops, sizeof flops, ", %.3f GFLOP recomputed per micro-batch",
                pick->flops / 1e9);
  return say(*pick, what + flops);
}

mlir::LogicalResult compileTrainStep(mlir::MLIRContext &ctx, mlir::ModuleOp module,
                                     const dsrt::config::TrainConfig &cfg, bool statePlain,
                                     llvm::raw_ostream &diag) {
  // --recompute auto: the mode (and layer limit) that fits the budget.
  dsrt::config::TrainConfig compiled = cfg;
  if (cfg.recompute.mode == "auto") {
    std::optional<dsrt::config::RecomputeConfig> chosen =
        chooseRecompute(ctx, module, cfg, diag);
    if (!chosen)
      return mlir::failure();
    compiled.recompute = *chosen;
  }
  // With recompute, the same step without it gives the arena it saves
  // (--explain and the manifest state both).
  mlir::OwningOpRef<mlir::ModuleOp> without, unfused;
  if (compiled.recompute.mode != "none" && statePlain)
    without = module.clone();
  // With fusion, the same step unfused gives the arena fusion saves.
  if (compiled.fuse != "none" && statePlain)
    unfused = module.clone();
  mlir::PassManager pm(&ctx);
  buildTrainPipeline(pm, compiled);
  if (mlir::failed(pm.run(module)))
    return mlir::failure();
  // offload_param that tiers no parameter (all under the persistence
  // threshold) changes nothing: a note, not silence.
  if (cfg.zero.offloadParam != dsrt::config::ZeroConfig::OffloadDevice::None) {
    int64_t params = 0, tiered = 0;
    for (auto fn : module.getOps<mlir::func::FuncOp>())
      for (mlir::BlockArgument a : fn.getArguments())
        if (fn.getArgAttr(a.getArgNumber(), train::TrainDialect::kParam)) {
          ++params;
          tiered += bool(fn.getArgAttr(a.getArgNumber(), train::TrainDialect::kTier));
        }
    if (params && !tiered)
      diag << "dsc: note: zero_optimization.offload_param offloads no parameter: the "
           << params << " parameter tensors are all under "
           << "stage3_param_persistence_threshold ("
           << cfg.zero.stage3ParamPersistenceThreshold
           << "), which ZeRO-3 keeps whole in device memory; lower the threshold to offload "
              "them\n";
  }
  if (uint64_t budget = cfg.recompute.memoryBudget) {
    uint64_t peak = plannedPeak(module);
    if (peak > budget) {
      diag << "dsc: error: the planned peak per rank, " << peak
           << " bytes, exceeds --memory-budget " << budget
           << " bytes (--recompute auto chooses what to recompute to fit it)\n";
      return mlir::failure();
    }
  }
  // The copy compiled with `plain`: each function's arena, as `attr` on
  // the compiled step's.
  auto arenaOf = [&](mlir::ModuleOp copy, const dsrt::config::TrainConfig &plain,
                     llvm::StringRef attr) {
    mlir::PassManager pmPlain(&ctx);
    buildTrainPipeline(pmPlain, plain);
    if (mlir::failed(pmPlain.run(copy)))
      return mlir::failure();
    for (auto fn : copy.getOps<mlir::func::FuncOp>())
      if (auto arena = fn->getAttrOfType<mlir::IntegerAttr>(train::TrainDialect::kArenaBytes))
        if (auto same = module.lookupSymbol<mlir::func::FuncOp>(fn.getSymName()))
          same->setAttr(attr, arena);
    return mlir::success();
  };
  if (without) {
    dsrt::config::TrainConfig plain = compiled;
    plain.recompute.mode = "none";
    if (mlir::failed(arenaOf(*without, plain, train::TrainDialect::kArenaBytesWithoutRecompute)))
      return mlir::failure();
  }
  // Fusion that found nothing to fuse (a model without attention) saves
  // nothing: its unfused step is not compiled again.
  if (unfused) {
    bool fused = false;
    module.walk([&](nn::AttentionOp) { fused = true; });
    if (!fused)
      unfused = nullptr;
  }
  if (unfused) {
    dsrt::config::TrainConfig plain = compiled;
    plain.fuse = "none";
    if (mlir::failed(arenaOf(*unfused, plain, train::TrainDialect::kArenaBytesWithoutFusion)))
      return mlir::failure();
  }
  return mlir::success();
}

} // namespace dsc
