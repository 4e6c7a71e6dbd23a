//===- torchscript_import.cpp - fuzz the TorchScript reader ---------------===//
//
// Input: either a whole archive (bytes starting with "PK", written as they
// are), or the text of the forward's TorchScript code, which the harness
// puts in place of code/__torch__.py in the committed traced MLP
// (corpus/torchscript_import/mlp-trace.pt; its debug info dropped), so
// that mutations reach libtorch's TorchScript compiler, dsc's graph
// lowering (GetAttr chains, constants, mutation, size expressions) and the
// op table rather than the zip's checksums. importModel (with the seed's
// input shapes, x=4x8 and y=4) must return a verified module or an error
// naming the file; an "internal error" is a finding, and so is an error
// that does not start with the file's name.
//
//===----------------------------------------------------------------------===//
#include "frontends/ModelFile.h"
#include "test/fuzz/ImportFuzz.h"

#include "mlir/IR/MLIRContext.h"

#include <zip.h>

#include <cstring>
#include <string>

namespace {

/// The template archive with its code entry replaced by `code`.
std::string packCode(const uint8_t *data, size_t size) {
  std::string path = dsc::fuzz::scratchDir() + "/model.pt";
  static const std::string templ = DSC_FUZZ_TORCHSCRIPT_TEMPLATE;
  {
    FILE *in = std::fopen(templ.c_str(), "rb");
    if (!in)
      std::abort();
    std::string bytes;
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, in)) > 0)
      bytes.append(buf, n);
    std::fclose(in);
    dsc::fuzz::writeScratch("model.pt", bytes.data(), bytes.size());
  }
  int code = 0;
  zip_t *z = zip_open(path.c_str(), 0, &code);
  if (!z)
    std::abort();
  static std::string text;
  text.assign(reinterpret_cast<const char *>(data), size);
  zip_int64_t entries = zip_get_num_entries(z, 0);
  for (zip_int64_t k = 0; k < entries; ++k) {
    const char *name = zip_get_name(z, zip_uint64_t(k), 0);
    if (!name)
      continue;
    std::string entry(name);
    if (entry.size() >= 9 && entry.compare(entry.size() - 9, 9, ".debug_pkl") == 0) {
      zip_delete(z, zip_uint64_t(k));
    } else if (entry.size() >= 17 &&
               entry.compare(entry.size() - 17, 17, "code/__torch__.py") == 0) {
      zip_source_t *s = zip_source_buffer(z, text.data(), text.size(), 0);
      if (!s || zip_file_replace(z, zip_uint64_t(k), s, 0) < 0)
        std::abort();
    }
  }
  if (zip_close(z) != 0)
    std::abort();
  return path;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = size >= 2 && data[0] == 'P' && data[1] == 'K'
                         ? dsc::fuzz::writeScratch("model.pt", data, size)
                         : packCode(data, size);
  mlir::MLIRContext ctx(mlir::MLIRContext::Threading::DISABLED);
  ctx.printOpOnDiagnostic(false);
  dsc::frontend::ImportOptions options;
  options.inputShapes["x"] = {4, 8};
  options.inputShapes["y"] = {4};
  dsc::fuzz::judgeImport("torchscript_import", path, [&] {
    return dsc::frontend::importModel(ctx, path, options);
  });
  return 0;
}
