//===- Weights.cpp - initial weights of a model, for the plan ------------===//
//
// The IR names parameters but does not carry their values (a GPT-2 has
// 500 MB of them); the plan emitter reads them here, from the same file and
// through the same validation (external data confined to the model folder)
// as the importer.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/HostTensor.h"
#include "frontends/onnx/ModelLoader.h"

namespace dsc::onnx_import {

llvm::Error readFloatInitializers(
    const std::string &path, const ImportOptions &options,
    const std::set<std::string> &names,
    const std::function<void(const std::string &, const std::vector<int64_t> &,
                             const std::vector<float> &)> &consume,
    std::string *skeleton, const std::set<std::string> *strip) {
  auto loaded = loadModel(path, options, skeleton ? (strip ? strip : &names) : nullptr);
  if (!loaded)
    return loaded.takeError();
  const LoadedModel &model = **loaded;
  std::set<std::string> missing = names;
  std::vector<float> values;
  for (const onnx::TensorProto &t : model.model.graph().initializer()) {
    if (!names.count(t.name()))
      continue;
    if (model.weightless.count(t.name())) {
      missing.erase(t.name()); // the file has no value for it
      continue;
    }
    std::string bytes;
    const std::string *external = nullptr;
    if (auto ext = model.external.find(t.name()); ext != model.external.end()) {
      auto read = readExternal(ext->second);
      if (!read)
        return read.takeError();
      bytes = std::move(*read);
      external = &bytes;
    }
    HostTensor host;
    if (auto e = decodeTensor(t, external, host))
      return llvm::createStringError(path + ": initializer '" + t.name() + "': " + *e);
    if (!host.isFloat())
      return llvm::createStringError(path + ": initializer '" + t.name() +
                                     "' is not a floating-point tensor");
    values.assign(host.f.begin(), host.f.end());
    consume(t.name(), host.shape, values);
    missing.erase(t.name());
  }
  if (!missing.empty())
    return llvm::createStringError(path + ": no initializer named '" +
                                   *missing.begin() + "'");
  if (skeleton && !model.skeleton->SerializeToString(skeleton))
    return llvm::createStringError(path + ": the model without its parameters is still "
                                          "over 2 GiB (large constants?); protobuf cannot "
                                          "hold it");
  return llvm::Error::success();
}

} // namespace dsc::onnx_import
