//===- ForwardFunction.h - ending an imported forward+loss function -*- C++ -*-===//
//
// Every frontend builds `func.func @forward` the same way: user inputs are
// arguments marked train.input, the model's float tensors are arguments
// marked "dsc.initializer" with their name. finishForward ends it the same
// way for all of them, so that a model gives the same IR whichever file it
// came in.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_FRONTENDS_COMMON_FORWARDFUNCTION_H
#define DSC_FRONTENDS_COMMON_FORWARDFUNCTION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dsc::frontend {

/// The argument attribute naming a model tensor until it is classified.
inline constexpr const char *kInitializerAttr = "dsc.initializer";

/// Returns `loss` from `fn` (marked train.loss), drops what the loss does
/// not depend on and the model tensors nothing uses, and marks each model
/// tensor train.param when the loss has a differentiable path to it and
/// `trainable(name)`, train.buffer otherwise; `trained` gets the parameters'
/// names. Returns why that is impossible, or "".
std::string finishForward(mlir::func::FuncOp fn, mlir::Value loss, mlir::Location loc,
                          llvm::function_ref<bool(llvm::StringRef)> trainable,
                          std::vector<std::string> &trained);

/// The model's micro-batch: dim 0 of the imported forward's inputs (all
/// agree), or 0 when no input has one.
int64_t forwardBatch(mlir::ModuleOp module);

/// The model's hidden size, as the Hugging Face integration reads
/// config.hidden_size to fill "auto" bucket sizes: the most common length
/// among the 1-D parameters (layer-norm weights and biases, most biases),
/// the larger on a tie; without 1-D parameters, the most common dimension.
std::optional<int64_t> forwardHiddenSize(mlir::ModuleOp module);

} // namespace dsc::frontend

#endif // DSC_FRONTENDS_COMMON_FORWARDFUNCTION_H
