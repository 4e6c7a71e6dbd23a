//===- ModelLoader.h - read and validate an ONNX model ----------*- C++ -*-===//
#ifndef DSC_FRONTENDS_ONNX_MODELLOADER_H
#define DSC_FRONTENDS_ONNX_MODELLOADER_H

#include "frontends/onnx/OnnxImporter.h"
#include "onnx/onnx_pb.h"

#include <map>
#include <memory>
#include <set>
#include <string>

namespace dsc::onnx_import {

struct LoadedModel {
  onnx::ModelProto model;
  std::string path;      // as given by the user
  std::string directory; // canonical folder that external data must stay in
  int64_t opset = 0;     // default-domain opset
  /// Validated external data of initializers, by tensor name: byte range
  /// inside a file under `directory`. Read on demand.
  struct ExternalRange {
    std::string file;
    int64_t offset = 0, length = 0;
  };
  std::map<std::string, ExternalRange> external;
  /// Only when loadModel was given names to strip: the model as written,
  /// before validation made its inputs static, with the data of those
  /// initializers removed and every other external tensor brought inline.
  std::unique_ptr<onnx::ModelProto> skeleton;
};

/// Parses, checks and shape-infers the model; every error message starts
/// with the file name. With `strip`, also keeps the model's skeleton (see
/// LoadedModel::skeleton) without the data of the initializers it names.
llvm::Expected<std::unique_ptr<LoadedModel>>
loadModel(const std::string &path, const ImportOptions &options,
          const std::set<std::string> *strip = nullptr);

/// Reads the bytes of a validated external tensor.
llvm::Expected<std::string> readExternal(const LoadedModel::ExternalRange &range);

} // namespace dsc::onnx_import

#endif // DSC_FRONTENDS_ONNX_MODELLOADER_H
