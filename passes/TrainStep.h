//===- TrainStep.h - the training step compiled from a resolved config ---*- C++ -*-===//
//
// What dsc runs between import and emission: the training-step pipeline
// (Pipeline.h) with the options of a resolved ds_config, where
// `--recompute auto` first searches the recomputation that fits the
// memory budget (each candidate a compile of a clone), the budget is
// checked against the planned peak, and, for a plan with recompute, the
// same step without it is compiled to state the arena it saves.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PASSES_TRAINSTEP_H
#define DSC_PASSES_TRAINSTEP_H

#include "config/DsConfig.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>

namespace dsc {

/// The planned peak per rank of a compiled module: its largest arena (a
/// pipeline's stages each have theirs).
uint64_t plannedPeak(mlir::ModuleOp module);

/// --recompute auto: compiles the step with the candidates of one family,
/// none, selective, and layers on the first j layers (j = 1..L; the first
/// layers' activations live longest, so they go first), and keeps the one
/// with the fewest recomputed flops whose planned peak fits
/// cfg.recompute.memoryBudget. j is found by bisection (the peak does not
/// grow with j), so it takes about 3 + log2(L) compiles. Optimal within
/// that family to one layer; not over every keep set (a mix of selective
/// and layers, or keeping particular tensors, can beat it: finding that is
/// the Checkmate ILP). Notes and errors go to `diag` ("dsc: note: ...");
/// nullopt when no candidate compiles or fits.
std::optional<dsrt::config::RecomputeConfig>
chooseRecompute(mlir::MLIRContext &ctx, mlir::ModuleOp module,
                const dsrt::config::TrainConfig &cfg, llvm::raw_ostream &diag);

/// Compiles the imported forward `module` into the training step of `cfg`
/// in place: the recompute search when cfg.recompute.mode is "auto", the
/// pipeline, the memory budget's check, and with `statePlain` (a plan is
/// emitted) the arena of the same step without recompute on each step
/// function (train.arena_bytes_without_recompute). Errors go to `diag`.
mlir::LogicalResult compileTrainStep(mlir::MLIRContext &ctx, mlir::ModuleOp module,
                                     const dsrt::config::TrainConfig &cfg, bool statePlain,
                                     llvm::raw_ostream &diag);

} // namespace dsc

#endif // DSC_PASSES_TRAINSTEP_H
