//===- Npy.h - NumPy .npy files ---------------------------------*- C++ -*-===//
//
// Reads .npy files of format versions 1.0, 2.0 and 3.0 holding a C-ordered,
// little-endian array of one of: <f4 <f8 <f2 <i8 <i4 <u2 <u4 |b1 |u1. The
// file is memory-mapped; the array's bytes are read in place. Writes any of
// those types (all but bfloat16, which .npy cannot name) the way np.save
// does: version 1.0, header padded so the data starts at a multiple of 64.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_IO_NPY_H
#define DSRT_IO_NPY_H

#include "io/DType.h"
#include "io/FileUtil.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dsrt::io {

struct NpyArray {
  DType dtype;
  std::vector<int64_t> shape; // empty for a 0-d array
  /// Where the array's bytes start in the file.
  size_t dataOffset;
  /// Keeps the bytes mapped for as long as the array lives.
  MappedFile file;

  int64_t numel() const;
  size_t nbytes() const { return size_t(numel()) * dtypeSize(dtype); }
  const void *data() const { return file.data() + dataOffset; }
};

/// Throws IoError naming `path` and the problem (bad magic, version,
/// Fortran order, big-endian or unsupported dtype, truncated data, a bool
/// element that is not 0 or 1...).
NpyArray readNpy(const std::string &path);

/// Checks that `a`, read from `path`, can fill the model input `input` of
/// element type `need`: the same dtype, or int32 for an int64 input. Throws
/// IoError naming the file, its dtype, the input and the dtype it needs
/// otherwise. Returns whether the elements must be widened (int32 -> int64).
bool checkInputDType(const NpyArray &a, const std::string &path, DType need,
                     const std::string &input);

/// Writes a C-ordered array of `shape` from `data` (numel * size bytes),
/// atomically (see writeFileAtomically).
void writeNpy(const std::string &path, DType dtype,
              const std::vector<int64_t> &shape, const void *data);

} // namespace dsrt::io

#endif // DSRT_IO_NPY_H
