//===- DistDialect.h - the dist dialect -------------------------*- C++ -*-===//
#ifndef DSC_DIALECTS_DIST_DISTDIALECT_H
#define DSC_DIALECTS_DIST_DISTDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/nn/NNDialect.h"

namespace dsc::dist {
/// The network: every collective reads and writes it, which orders them.
struct CommResource
    : public mlir::SideEffects::Resource::Base<CommResource> {
  llvm::StringRef getName() final { return "dist.comm"; }
};
} // namespace dsc::dist

#include "dialects/dist/DistDialect.h.inc"
#include "dialects/dist/DistEnums.h.inc"
#define GET_ATTRDEF_CLASSES
#include "dialects/dist/DistAttrs.h.inc"
#define GET_OP_CLASSES
#include "dialects/dist/DistOps.h.inc"

#endif // DSC_DIALECTS_DIST_DISTDIALECT_H
