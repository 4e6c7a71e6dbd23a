//===- Explain.h - dsc --explain's summary of a module ----------*- C++ -*-===//
#ifndef DSC_PASSES_EXPLAIN_H
#define DSC_PASSES_EXPLAIN_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace dsc {

/// dsc --explain's summary of an imported or compiled module: the model,
/// its inputs, parameters, buffers (frozen, or updated in the forward) and
/// loss, then the cost per op kind (nn-cost-report's table).
void explainModule(mlir::ModuleOp module, llvm::raw_ostream &os);

} // namespace dsc

#endif // DSC_PASSES_EXPLAIN_H
