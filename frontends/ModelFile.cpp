//===- ModelFile.cpp - the front door: any model file dsc takes ----------===//
#include "frontends/ModelFile.h"
#include "frontends/aten/AtenImporter.h"
#include "frontends/onnx/OnnxImporter.h"
#include "frontends/pt2/Pt2Archive.h"
#ifdef DSC_HAVE_TORCHSCRIPT
#include "frontends/torchscript/TorchScriptArchive.h"
#endif

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstring>

namespace dsc::frontend {

namespace {

llvm::Error err(const std::string &path, const llvm::Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), path + ": " + why.str());
}

const char *const kExportAdvice =
    "export the model's forward+loss with torch.export.save(torch.export.export(model, "
    "args), 'model.pt2') or torch.onnx.export(model, args, 'model.onnx', dynamo=True)";

/// The program of a .pt2 or TorchScript archive, through the ATen table.
template <typename Archive>
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importArchive(mlir::MLIRContext &ctx, const Archive &a, const ImportOptions &options) {
  aten::TensorSource tensors = [&](const std::string &name, aten::TensorMeta &meta) {
    return a.readTensor(name, meta);
  };
  return aten::importProgram(ctx, a.program(), tensors, options);
}

/// Every tensor of `names`, as float32, from an archive.
template <typename Archive>
llvm::Error readAllFloats(
    const Archive &a, const std::set<std::string> &names,
    const std::function<void(const std::string &, const std::vector<int64_t> &,
                             const std::vector<float> &)> &consume) {
  std::vector<int64_t> shape;
  std::vector<float> values;
  for (const std::string &name : names) {
    if (auto e = a.readFloat(name, shape, values))
      return e;
    consume(name, shape, values);
  }
  return llvm::Error::success();
}

#ifdef DSC_HAVE_TORCHSCRIPT
/// The TorchScript archive importModel loaded last, and its path, which
/// readFloatWeights takes over instead of loading it again.
std::pair<std::string, std::unique_ptr<torchscript::Archive>> &lastTorchScript() {
  static std::pair<std::string, std::unique_ptr<torchscript::Archive>> last;
  return last;
}
#endif

} // namespace

llvm::Expected<ModelFormat> modelFormat(const std::string &path) {
  // The first bytes say what a file is; missing or unreadable files are
  // reported by the ONNX reader, which names the cause.
  auto head = llvm::MemoryBuffer::getFileSlice(path, 16, 0);
  bool pt2Name = llvm::sys::path::extension(path) == ".pt2";
  const char *notZip = "not a .pt2 archive: a .pt2 is a zip file, and this one is not "
                       "(truncated, or not written by torch.export.save)";
  if (!head || (*head)->getBufferSize() < 4)
    return pt2Name && head ? llvm::Expected<ModelFormat>(err(path, notZip)) : ModelFormat::Onnx;
  llvm::StringRef bytes = (*head)->getBuffer();
  if (bytes.starts_with("PK\x03\x04") || bytes.starts_with("PK\x05\x06")) {
    std::string kind = pt2::zipKind(path);
    if (kind == "pt2")
      return ModelFormat::Pt2;
    if (llvm::StringRef(kind).starts_with("unreadable: "))
      return err(path, "a zip archive that cannot be read (truncated or corrupt): " +
                           llvm::StringRef(kind).drop_front(12));
    if (kind == "torchscript") {
#ifdef DSC_HAVE_TORCHSCRIPT
      return ModelFormat::TorchScript;
#else
      return err(path, llvm::Twine("a TorchScript archive (torch.jit.save), which this dsc "
                                   "cannot read: it was built without libtorch (install "
                                   "libtorch-dev and build again); or ") + kExportAdvice);
#endif
    }
    if (kind == "torch.save")
      return err(path, llvm::Twine("a torch.save file (a state dict or pickled module): it holds "
                                   "weights but no graph; ") + kExportAdvice);
    return err(path, "a zip archive that is not a torch.export program (.pt2): it has no "
                     "archive_format entry");
  }
  // Pickle protocol 2-5 (torch.save's legacy format, or a plain pickle).
  if ((unsigned char)bytes[0] == 0x80 && bytes[1] >= 2 && bytes[1] <= 5)
    return err(path, llvm::Twine("a Python pickle (torch.save's legacy format): it holds "
                                 "weights but no graph; ") + kExportAdvice);
  // safetensors: an 8-byte little-endian header length, then '{'.
  if (bytes.size() >= 9 && bytes[8] == '{') {
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    if (n > 1 && n < (uint64_t(1) << 32))
      return err(path, llvm::Twine("a safetensors file: it holds weights but no graph; ") +
                           kExportAdvice);
  }
  if (pt2Name)
    return err(path, notZip);
  return ModelFormat::Onnx;
}

llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importModel(mlir::MLIRContext &ctx, const std::string &path, const ImportOptions &options) {
  auto format = modelFormat(path);
  if (!format)
    return format.takeError();
  if (*format != ModelFormat::TorchScript && !options.inputDTypes.empty())
    return err(path, "--input-shape " + options.inputDTypes.begin()->first + "=...:" +
                         options.inputDTypes.begin()->second +
                         " gives a dtype, which only a TorchScript archive needs (this model "
                         "file declares its inputs' types); drop the :DTYPE");
  if (*format == ModelFormat::Onnx)
    return onnx_import::importOnnxFile(ctx, path, options);
#ifdef DSC_HAVE_TORCHSCRIPT
  if (*format == ModelFormat::TorchScript) {
    auto archive = torchscript::Archive::open(path, options.inputShapes, options.inputDTypes);
    if (!archive)
      return archive.takeError();
    auto module = importArchive(ctx, **archive, options);
    // The weights are read from the same archive (readFloatWeights):
    // loading one again would cost libtorch another read and check.
    lastTorchScript() = {path, std::move(*archive)};
    return module;
  }
#endif
  auto archive = pt2::Archive::open(path);
  if (!archive)
    return archive.takeError();
  return importArchive(ctx, **archive, options);
}

llvm::Error readFloatWeights(
    const std::string &path, const ImportOptions &options, const std::set<std::string> &names,
    const std::function<void(const std::string &, const std::vector<int64_t> &,
                             const std::vector<float> &)> &consume,
    std::string *skeleton, const std::set<std::string> *strip) {
  auto format = modelFormat(path);
  if (!format)
    return format.takeError();
  if (*format == ModelFormat::Onnx)
    return onnx_import::readFloatInitializers(path, options, names, consume, skeleton, strip);
  if (skeleton)
    skeleton->clear();
#ifdef DSC_HAVE_TORCHSCRIPT
  if (*format == ModelFormat::TorchScript) {
    auto [imported, archive] = std::move(lastTorchScript());
    if (!archive || imported != path) {
      auto opened = torchscript::Archive::open(path, options.inputShapes, options.inputDTypes);
      if (!opened)
        return opened.takeError();
      archive = std::move(*opened);
    }
    return readAllFloats(*archive, names, consume);
  }
#endif
  auto archive = pt2::Archive::open(path);
  if (!archive)
    return archive.takeError();
  return readAllFloats(**archive, names, consume);
}

} // namespace dsc::frontend
