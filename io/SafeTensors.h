//===- SafeTensors.h - safetensors files ------------------------*- C++ -*-===//
//
// The safetensors format: an 8-byte little-endian header length N, N bytes
// of JSON {"__metadata__": {str: str}, name: {"dtype": "F32", "shape": [..],
// "data_offsets": [begin, end]}, ...} padded with spaces to a multiple of 8,
// then the tensors' bytes, offsets relative to the end of the header.
// Reading checks what the reference implementation checks: tensors tile the
// data exactly (sorted by offset: no gap, no overlap, nothing left over) and
// each tensor's byte range matches its dtype size times its element count.
// A header nested deeper than 64 arrays and objects is refused before it is
// parsed (a valid one nests 3; the JSON library recurses per level).
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_IO_SAFETENSORS_H
#define DSRT_IO_SAFETENSORS_H

#include "io/DType.h"
#include "io/FileUtil.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace dsrt::io {

/// A named tensor's description and bytes (not owned).
struct TensorRef {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void *data;

  int64_t numel() const { return numElements(shape, name); }
  size_t nbytes() const { return size_t(numel()) * dtypeSize(dtype); }
};

/// Writes `tensors`, in order and back to back, with `metadata` as
/// "__metadata__" (omitted when empty), through `path`.tmp and a rename, so
/// an existing file is never half overwritten. Throws IoError.
void writeSafeTensors(const std::string &path,
                      const std::vector<TensorRef> &tensors,
                      const std::map<std::string, std::string> &metadata = {});

/// The metadata of the weights dsrt writes (a run's, dsrt export's): PyTorch
/// format, producer dsrt, the step they are of.
std::map<std::string, std::string> weightsMetadata(int64_t step);

/// Writes the new file `path` (never one that exists) of `tensors`, whose
/// data may be null: the header, then `writeData` streams the tensors'
/// bytes into the file in order; committed by a rename when it returns.
/// Throws IoError.
void streamSafeTensors(const std::string &path, const std::vector<TensorRef> &tensors,
                       const std::map<std::string, std::string> &metadata,
                       const std::function<void(AtomicFile &)> &writeData);

/// The first bytes of a safetensors file of `tensors` (their data may be
/// null): the 8-byte length and the padded JSON header. The tensors' bytes
/// follow in the order given. Throws IoError naming `path`.
std::string safeTensorsHeader(const std::string &path, const std::vector<TensorRef> &tensors,
                              const std::map<std::string, std::string> &metadata = {});

/// A safetensors file mapped read-only; TensorRef::data points into it.
class SafeTensorsFile {
public:
  /// Throws IoError naming the file (and the tensor, when one is at fault).
  static SafeTensorsFile open(const std::string &path);

  /// The tensors in file order (by data offset).
  const std::vector<TensorRef> &tensors() const { return tensors_; }
  /// The named tensor, or nullptr.
  const TensorRef *find(const std::string &name) const;
  /// The named tensor; throws IoError naming the file and the tensor.
  const TensorRef &at(const std::string &name) const;
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }
  const std::string &path() const { return file_.path(); }

private:
  explicit SafeTensorsFile(MappedFile file) : file_(std::move(file)) {}
  MappedFile file_;
  std::vector<TensorRef> tensors_;
  std::map<std::string, std::string> metadata_;
};

} // namespace dsrt::io

#endif // DSRT_IO_SAFETENSORS_H
