//===- OnnxImporter.h - ONNX training graph -> nn dialect -------*- C++ -*-===//
#ifndef DSC_FRONTENDS_ONNX_ONNXIMPORTER_H
#define DSC_FRONTENDS_ONNX_ONNXIMPORTER_H

#include "frontends/common/ImportOptions.h"
#include "frontends/common/Names.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace dsc::onnx_import {

using frontend::ImportOptions;

/// The model metadata (metadata_props) key that names the trainable
/// initializers: a JSON array of initializer names, written by
/// models/export_common.py from requires_grad. Floating-point initializers
/// it does not name are frozen (train.buffer).
inline constexpr const char *kTrainableKey = "dsc.trainable";
/// The metadata key of a file without its weights (models/*.py
/// --no-weights): a JSON array of the graph inputs that are the model's
/// parameters, whose values the file does not hold. dsc imports them as
/// initializers and the plan it writes holds no weights for them.
inline constexpr const char *kNoWeightsKey = "dsc.no_weights";

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
/// With `skeleton`, also serializes into it the model as written with the
/// data of the initializers in `strip` (default: `names`) removed: what dsrt
/// --export-onnx fills back in.
llvm::Error readFloatInitializers(
    const std::string &path, const ImportOptions &options,
    const std::set<std::string> &names,
    const std::function<void(const std::string &, const std::vector<int64_t> &,
                             const std::vector<float> &)> &consume,
    std::string *skeleton = nullptr, const std::set<std::string> *strip = nullptr);

/// Op types the importer accepts, sorted; for error messages and --help.
const std::vector<std::string> &supportedOps();

/// The opsets of the default domain dsc imports.
inline constexpr int64_t kMinOpset = 13, kMaxOpset = 22;

/// An op the importer accepts and the opsets it accepts it in: from the
/// first opset in 13-22 that defines it (LayerNormalization 17, Gelu 20)
/// to 22. For dsc --list-onnx-ops and docs/onnx-ops.md.
struct OpRange {
  std::string op;
  int64_t first = kMinOpset, last = kMaxOpset;
};
const std::vector<OpRange> &supportedOpRanges();

using frontend::compactNames;

} // namespace dsc::onnx_import

#endif // DSC_FRONTENDS_ONNX_ONNXIMPORTER_H
