//===- pt2_import.cpp - fuzz the .pt2 reader and the ATen importer ---------===//
//
// Input: either a whole archive (bytes starting with "PK", written as they
// are), or the program's models/model.json, which the harness packs into an
// archive with archive_format, archive_version, byteorder and the tensors
// of a 4x3 Linear (lin.weight, lin.bias) beside it, so that mutations reach
// the schema parser and the op table rather than the zip's checksums.
// importModel must return a verified module or an error naming the file;
// an "internal error" is a finding, and so is an error that does not start
// with the file's name. A fresh single-threaded MLIRContext per input.
//
//===----------------------------------------------------------------------===//
#include "frontends/ModelFile.h"
#include "test/fuzz/ImportFuzz.h"

#include "mlir/IR/MLIRContext.h"

#include <zip.h>

#include <cstring>
#include <list>
#include <string>

namespace {

/// libzip reads the buffers when the archive is closed: `keep` holds them
/// until then (a list: its strings never move).
bool addEntry(zip_t *z, std::list<std::string> &keep, const std::string &name,
              const std::string &bytes) {
  keep.push_back(bytes);
  zip_source_t *s = zip_source_buffer(z, keep.back().data(), keep.back().size(), 0);
  if (!s)
    return false;
  if (zip_file_add(z, name.c_str(), s, ZIP_FL_OVERWRITE) < 0) {
    zip_source_free(s);
    return false;
  }
  return true;
}

std::string packProgram(const uint8_t *data, size_t size) {
  std::string path = dsc::fuzz::scratchDir() + "/model.pt2";
  int code = 0;
  zip_t *z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
  if (!z)
    std::abort();
  const char *weights =
      R"({"config": {"lin.weight": {"path_name": "weight_0", "is_param": true, "use_pickle": false,)"
      R"( "tensor_meta": {"dtype": 7, "sizes": [{"as_int": 4}, {"as_int": 3}], "requires_grad": true,)"
      R"( "strides": [{"as_int": 3}, {"as_int": 1}], "storage_offset": {"as_int": 0}}},)"
      R"( "lin.bias": {"path_name": "weight_1", "is_param": true, "use_pickle": false,)"
      R"( "tensor_meta": {"dtype": 7, "sizes": [{"as_int": 4}], "requires_grad": true,)"
      R"( "strides": [{"as_int": 1}], "storage_offset": {"as_int": 0}}}}})";
  std::list<std::string> keep;
  bool ok = addEntry(z, keep, "m/archive_format", "pt2") &&
            addEntry(z, keep, "m/archive_version", "0") &&
            addEntry(z, keep, "m/byteorder", "little") &&
            addEntry(z, keep, "m/models/model.json", std::string((const char *)data, size)) &&
            addEntry(z, keep, "m/data/weights/model_weights_config.json", weights) &&
            addEntry(z, keep, "m/data/weights/weight_0", std::string(48, '\0')) &&
            addEntry(z, keep, "m/data/weights/weight_1", std::string(16, '\0'));
  if (!ok || zip_close(z) != 0)
    std::abort();
  return path;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = size >= 2 && data[0] == 'P' && data[1] == 'K'
                         ? dsc::fuzz::writeScratch("model.pt2", data, size)
                         : packProgram(data, size);
  mlir::MLIRContext ctx(mlir::MLIRContext::Threading::DISABLED);
  ctx.printOpOnDiagnostic(false);
  dsc::frontend::ImportOptions options;
  dsc::fuzz::judgeImport("pt2_import", path, [&] {
    return dsc::frontend::importModel(ctx, path, options);
  });
  return 0;
}
