//===- DType.h - element types of tensors on disk ---------------*- C++ -*-===//
//
// The element types dsrt reads and writes in .npy and safetensors files.
// Every type is little-endian on disk, as on the machines dsrt runs on.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_IO_DTYPE_H
#define DSRT_IO_DTYPE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dsrt::io {

enum class DType { F32, F64, F16, BF16, I64, I32, U16, U32, U8, Bool };

/// Bytes per element.
size_t dtypeSize(DType t);

/// Lower-case name for messages ("float32", "bool", ...).
const char *dtypeName(DType t);

/// Product of `shape` (1 for a scalar); throws IoError, naming `what`, on a
/// negative dimension or an element count that overflows int64.
int64_t numElements(const std::vector<int64_t> &shape, const std::string &what);

/// "[2, 3]" for messages.
std::string formatShape(const std::vector<int64_t> &shape);

} // namespace dsrt::io

#endif // DSRT_IO_DTYPE_H
