//===- ModelLoader.h - read and validate an ONNX model ----------*- C++ -*-===//
#ifndef DSC_FRONTENDS_ONNX_MODELLOADER_H
#define DSC_FRONTENDS_ONNX_MODELLOADER_H

#include "frontends/onnx/OnnxImporter.h"
#include "onnx/onnx_pb.h"

#include <map>
#include <memory>
#include <optional>
#include <vector>
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

  /// The opset the file declares; `opset` is what the converters see (17
  /// for a file of opsets 18-22, after bridgeToOpset17).
  int64_t sourceOpset = 0;
  /// Where PyTorch's dynamo exporter says a node came from, by the node's
  /// first output: "make_exports.py:39, module layers.0.n1".
  std::map<std::string, std::string> origins;
  /// The initializers the exporter's torch.export signature says are
  /// parameters (or were folded from parameters); none without a signature.
  std::optional<std::set<std::string>> exporterTrainable;
  /// What reading the exporter's metadata changed, for the user.
  std::vector<std::string> exporterNotes;
  /// The parameters the file holds no values for (kNoWeightsKey): graph
  /// inputs in the file, initializers without data once loaded.
  std::set<std::string> weightless;

  std::string originOf(const onnx::NodeProto &node) const {
    if (node.output_size() == 0)
      return "";
    auto it = origins.find(node.output(0));
    return it == origins.end() ? "" : it->second;
  }
  void copyOrigin(const onnx::NodeProto &from, const onnx::NodeProto &to) {
    std::string o = originOf(from);
    if (!o.empty() && to.output_size())
      origins[to.output(0)] = o;
  }
};

/// Parses, checks and shape-infers the model; every error message starts
/// with the file name. With `strip`, also keeps the model's skeleton (see
/// LoadedModel::skeleton) without the data of the initializers it names.
llvm::Expected<std::unique_ptr<LoadedModel>>
loadModel(const std::string &path, const ImportOptions &options,
          const std::set<std::string> *strip = nullptr);

/// Reads what torch.onnx's dynamo exporter records (per-node source
/// locations, the torch.export signature, folded constants), untying the
/// parameters its optimizer merged because their values were equal.
llvm::Error readExporterMetadata(LoadedModel &m);

/// The model's metadata `key` as a flat JSON array of strings (naming
/// `what` in its errors); none when the model has no such key
/// (Trainable.cpp).
llvm::Expected<std::optional<std::set<std::string>>>
readNameList(const LoadedModel &m, const char *key, const char *what);

/// Expands every call of a model-local ONNX function in place
/// (LocalFunctions.cpp).
llvm::Error inlineLocalFunctions(LoadedModel &m);

/// Rewrites a model of opset 18-22 to opset 17 forms (OpsetBridge.cpp):
/// Debian's ONNX 1.12 checks and infers shapes up to 17.
llvm::Error bridgeToOpset17(LoadedModel &m);
/// Ops that exist only from a newer opset and that the bridge lowers to
/// opset-17 forms (Gelu, 20), with that opset.
const std::map<std::string, int64_t> &opsBridgedFromNewerOpsets();

/// Reads the bytes of a validated external tensor.
llvm::Expected<std::string> readExternal(const LoadedModel::ExternalRange &range);

} // namespace dsc::onnx_import

#endif // DSC_FRONTENDS_ONNX_MODELLOADER_H
