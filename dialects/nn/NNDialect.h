//===- NNDialect.h - the nn dialect -----------------------------*- C++ -*-===//
//
// Tensor compute ops at runtime-kernel granularity, with static shapes.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_DIALECTS_NN_NNDIALECT_H
#define DSC_DIALECTS_NN_NNDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace dsc::nn {
/// True for a ranked tensor of floating-point elements.
bool isFloatTensor(mlir::Type type);
/// Number of elements of a statically shaped tensor (1 for a scalar).
int64_t numElements(mlir::Type type);
/// Bytes of a statically shaped tensor (i1 counts as one byte).
int64_t byteSize(mlir::Type type);
/// Sum of result elements / operand bytes / result bytes: cost defaults.
int64_t resultElements(mlir::Operation *op);
int64_t operandBytes(mlir::Operation *op);
int64_t resultBytes(mlir::Operation *op);
/// "[2,16,32]": shapes in diagnostics.
std::string formatShape(llvm::ArrayRef<int64_t> shape);
/// NumPy broadcast of two static shapes; failure if incompatible.
mlir::FailureOr<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

/// Extent of one spatial dim after a conv / pooling window: floor((in +
/// padBegin + padEnd - ((kernel - 1) * dilation + 1)) / stride) + 1, or with
/// `ceil` PyTorch's ceil_mode (rounded up, but the last window must start
/// inside the input or its begin padding). May be <= 0: nothing fits.
int64_t windowExtent(int64_t in, int64_t kernel, int64_t stride, int64_t padBegin,
                     int64_t padEnd, int64_t dilation, bool ceil);
/// The spatial result dims of a window over `input` [N, C, S...]; fails
/// with the reason (attribute sizes or values, a window that does not fit).
mlir::FailureOr<llvm::SmallVector<int64_t>>
windowOutputDims(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> kernel,
                 llvm::ArrayRef<int64_t> strides, llvm::ArrayRef<int64_t> pads,
                 llvm::ArrayRef<int64_t> dilations, bool ceil, std::string &why);
} // namespace dsc::nn

#include "dialects/nn/NNDialect.h.inc"
#include "dialects/nn/NNEnums.h.inc"
#define GET_ATTRDEF_CLASSES
#include "dialects/nn/NNAttrs.h.inc"
#include "dialects/nn/NNInterfaces.h.inc"
#define GET_OP_CLASSES
#include "dialects/nn/NNOps.h.inc"

#endif // DSC_DIALECTS_NN_NNDIALECT_H
