//===- BuildOps.cpp - creating nn ops for an importer --------------------===//
#include "frontends/common/BuildOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

using namespace mlir;

namespace dsc::frontend {

LogicalResult inferResultTypes(Operation *op) {
  auto infer = cast<InferTypeOpInterface>(op);
  SmallVector<Type> types;
  if (failed(infer.inferReturnTypes(op->getContext(), op->getLoc(), op->getOperands(),
                                    op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
                                    op->getRegions(), types))) {
    op->erase();
    return failure();
  }
  for (auto [result, type] : llvm::zip(op->getResults(), types))
    result.setType(type);
  return success();
}

LogicalResult verifyOrErase(Operation *op) {
  if (succeeded(verify(op)))
    return success();
  op->erase();
  return failure();
}

Value splatConstant(OpBuilder &b, Location loc, RankedTensorType type, double v) {
  Type et = type.getElementType();
  Attribute element;
  if (auto ft = dyn_cast<FloatType>(et))
    element = FloatAttr::get(ft, v);
  else
    element = IntegerAttr::get(et, APInt(et.getIntOrFloatBitWidth(), (uint64_t)(int64_t)v,
                                         true, true));
  return arith::ConstantOp::create(b, loc, SplatElementsAttr::get(type, element));
}

} // namespace dsc::frontend
