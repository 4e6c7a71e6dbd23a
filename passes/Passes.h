//===- Passes.h - dsc passes ------------------------------------*- C++ -*-===//
#ifndef DSC_PASSES_PASSES_H
#define DSC_PASSES_PASSES_H

#include "passes/PassEnums.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/Support/raw_ostream.h"

namespace dsc {
#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// Writes the per-function cost table of `module` (shared with --explain).
void printCostReport(mlir::ModuleOp module, llvm::raw_ostream &os);

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"
} // namespace dsc

#endif // DSC_PASSES_PASSES_H
