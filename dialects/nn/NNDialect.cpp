//===- NNDialect.cpp - nn dialect registration and helpers ---------------===//
#include "dialects/nn/NNDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace dsc::nn;

#include "dialects/nn/NNDialect.cpp.inc"
#include "dialects/nn/NNEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "dialects/nn/NNAttrs.cpp.inc"
#include "dialects/nn/NNInterfaces.cpp.inc"

void NNDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/nn/NNOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/nn/NNAttrs.cpp.inc"
      >();
}

bool dsc::nn::isFloatTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType());
}

int64_t dsc::nn::numElements(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape() ? tensor.getNumElements() : 0;
}

int64_t dsc::nn::byteSize(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return 0;
  int64_t bits = tensor.getElementType().getIntOrFloatBitWidth();
  return numElements(type) * std::max<int64_t>(1, bits / 8);
}

int64_t dsc::nn::resultElements(Operation *op) {
  int64_t n = 0;
  for (Type t : op->getResultTypes())
    n += numElements(t);
  return n;
}

int64_t dsc::nn::operandBytes(Operation *op) {
  int64_t n = 0;
  for (Type t : op->getOperandTypes())
    n += byteSize(t);
  return n;
}

int64_t dsc::nn::resultBytes(Operation *op) {
  int64_t n = 0;
  for (Type t : op->getResultTypes())
    n += byteSize(t);
  return n;
}

std::string dsc::nn::formatShape(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? "," : "") + std::to_string(d);
  return s + "]";
}

FailureOr<SmallVector<int64_t>> dsc::nn::broadcastShapes(ArrayRef<int64_t> a,
                                                         ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return failure();
    out[i] = da == 1 ? db : da;
  }
  return out;
}
