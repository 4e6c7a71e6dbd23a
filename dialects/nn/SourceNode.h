//===- SourceNode.h - the model node an op comes from -----------*- C++ -*-===//
//
// The importers name each op they create after its node in the model (a
// NameLoc: the ONNX node's name, the ATen node's), and passes that fuse or
// derive ops keep those names in FusedLoc / CallSiteLoc. sourceNode finds
// the first of them: what an error about the op names for the user, and
// what the plan records as Instr.source.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_DIALECTS_NN_SOURCENODE_H
#define DSC_DIALECTS_NN_SOURCENODE_H

#include "mlir/IR/Location.h"

#include <string>

namespace dsc::nn {

/// The first node name in `loc`, or "" when it holds none.
inline std::string sourceNode(mlir::Location loc) {
  if (auto name = mlir::dyn_cast<mlir::NameLoc>(loc))
    return name.getName().str();
  if (auto fused = mlir::dyn_cast<mlir::FusedLoc>(loc))
    for (mlir::Location l : fused.getLocations())
      if (std::string s = sourceNode(l); !s.empty())
        return s;
  if (auto site = mlir::dyn_cast<mlir::CallSiteLoc>(loc))
    return sourceNode(site.getCallee());
  return {};
}

} // namespace dsc::nn

#endif // DSC_DIALECTS_NN_SOURCENODE_H
