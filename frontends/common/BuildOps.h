//===- BuildOps.h - creating nn ops for an importer -------------*- C++ -*-===//
//
// What every importer does when it creates an op: infer its result types or
// verify it, and erase it on failure so that the node's error (the captured
// diagnostic) is reported instead of a module that does not verify.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_FRONTENDS_COMMON_BUILDOPS_H
#define DSC_FRONTENDS_COMMON_BUILDOPS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

namespace dsc::frontend {

/// Sets `op`'s result types from its InferTypeOpInterface; on failure
/// erases it.
mlir::LogicalResult inferResultTypes(mlir::Operation *op);
/// Verifies `op`; on failure erases it.
mlir::LogicalResult verifyOrErase(mlir::Operation *op);
/// A splat constant of `type` (float or integer) without materializing it.
mlir::Value splatConstant(mlir::OpBuilder &b, mlir::Location loc, mlir::RankedTensorType type,
                          double v);

} // namespace dsc::frontend

#endif // DSC_FRONTENDS_COMMON_BUILDOPS_H
