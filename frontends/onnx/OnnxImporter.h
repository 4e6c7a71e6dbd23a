//===- OnnxImporter.h - ONNX training graph -> nn dialect -------*- C++ -*-===//
#ifndef DSC_FRONTENDS_ONNX_ONNXIMPORTER_H
#define DSC_FRONTENDS_ONNX_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace dsc::onnx_import {

struct ImportOptions {
  /// Graph output to train on; empty: the single scalar output.
  std::string lossName;
  /// Value for a dynamic dimension 0 of every graph input (0: none).
  int64_t batchSize = 0;
  /// Full static shapes for named graph inputs.
  std::map<std::string, std::vector<int64_t>> inputShapes;
};

/// Reads a binary (.onnx) or textual (.onnxtxt, ONNX's own syntax) model,
/// validates it (checker, opset 13-17, external data confined to the model's
/// folder, static shapes, shape inference) and imports it as a module with a
/// `func.func @forward` that returns the loss. Errors name the file and the
/// node, input or tensor at fault.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importOnnxFile(mlir::MLIRContext &ctx, const std::string &path,
               const ImportOptions &options);

/// Reads the initializers named in `names` (floating point) from the model
/// and hands each to `consume` as float32 with its shape. Errors name the
/// file and the tensor; a name that is not an initializer is an error.
/// With `skeleton`, also serializes into it the model as written with those
/// initializers' data removed (what dsrt --export-onnx fills back in).
llvm::Error readFloatInitializers(
    const std::string &path, const ImportOptions &options,
    const std::set<std::string> &names,
    const std::function<void(const std::string &, const std::vector<int64_t> &,
                             const std::vector<float> &)> &consume,
    std::string *skeleton = nullptr);

/// Op types the importer accepts, sorted; for error messages and --help.
const std::vector<std::string> &supportedOps();

} // namespace dsc::onnx_import

#endif // DSC_FRONTENDS_ONNX_ONNXIMPORTER_H
