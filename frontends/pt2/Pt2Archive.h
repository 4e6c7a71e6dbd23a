//===- Pt2Archive.h - torch.export.save archives (.pt2) ---------*- C++ -*-===//
//
// A .pt2 file is a zip (stored, not compressed) holding one folder:
//   archive_format ("pt2"), archive_version, byteorder
//   models/model.json            the ExportedProgram: the graph as ATen
//                                calls, its signature, tensor types
//   data/weights/...             each parameter and persistent buffer as raw
//                                bytes, described by model_weights_config.json
//   data/constants/...           non-persistent buffers and tensor constants,
//                                described by model_constants_config.json
// The reader needs no Python: libzip for the zip, nlohmann::json for the
// schema (torch/_export/serde/schema.py). Every size is checked before it
// is read; a crafted archive gets an error naming the entry.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_FRONTENDS_PT2_PT2ARCHIVE_H
#define DSC_FRONTENDS_PT2_PT2ARCHIVE_H

#include "frontends/aten/AtenProgram.h"

#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace dsc::pt2 {

/// The torch.export serialization schema versions this reader knows.
inline constexpr int kSchemaMajor = 8;

class Archive {
public:
  ~Archive();
  /// Opens and validates `path`, parsing the program.
  static llvm::Expected<std::unique_ptr<Archive>> open(const std::string &path);

  const aten::Program &program() const { return program_; }

  /// The tensor a parameter, buffer or constant name (wte.weight) stands
  /// for: its type and raw little-endian bytes.
  llvm::Expected<std::string> readTensor(const std::string &name, aten::TensorMeta &meta) const;
  /// The same, converted to float32 (float16, bfloat16, float64 widen).
  llvm::Error readFloat(const std::string &name, std::vector<int64_t> &shape,
                        std::vector<float> &values) const;

private:
  Archive() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  aten::Program program_;
};

/// What a file that is a zip holds, for the message that says what it is:
/// "pt2", "torchscript", "torch.save", "" for another zip, or
/// "unreadable: WHY" for one libzip cannot open (truncated, corrupt).
std::string zipKind(const std::string &path);

} // namespace dsc::pt2

#endif // DSC_FRONTENDS_PT2_PT2ARCHIVE_H
