//===- ModelFile.h - the front door: any model file dsc takes ---*- C++ -*-===//
//
// dsc takes a forward+loss model as ONNX (opsets 13-22; PyTorch's legacy
// and dynamo exporters) or as a torch.export archive (.pt2). Which frontend
// reads a file is decided by its contents, not its name; a file that is
// neither gets an error saying what it is (a TorchScript archive, a
// torch.save checkpoint, a safetensors file) and what to export instead.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_FRONTENDS_MODELFILE_H
#define DSC_FRONTENDS_MODELFILE_H

#include "frontends/common/ImportOptions.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace dsc::frontend {

enum class ModelFormat { Onnx, Pt2, TorchScript };

/// The format of `path`, or an error saying what the file is instead.
llvm::Expected<ModelFormat> modelFormat(const std::string &path);

/// Imports `path` as a module with `func.func @forward` returning the loss.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importModel(mlir::MLIRContext &ctx, const std::string &path, const ImportOptions &options);

/// Hands each float model tensor in `names` to `consume` as float32 with
/// its shape. For ONNX, `skeleton` (if given) receives the model without the
/// data of `strip` (dsrt --export-onnx fills it back in); for other formats
/// it stays empty.
llvm::Error readFloatWeights(
    const std::string &path, const ImportOptions &options, const std::set<std::string> &names,
    const std::function<void(const std::string &, const std::vector<int64_t> &,
                             const std::vector<float> &)> &consume,
    std::string *skeleton = nullptr, const std::set<std::string> *strip = nullptr);

} // namespace dsc::frontend

#endif // DSC_FRONTENDS_MODELFILE_H
