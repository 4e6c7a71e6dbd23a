//===- DType.cpp - element types of tensors on disk -----------------------===//
#include "io/DType.h"

#include "io/FileUtil.h"

#include <limits>

namespace dsrt::io {

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::F32:
  case DType::I32:
  case DType::U32:
    return 4;
  case DType::F16:
  case DType::BF16:
  case DType::U16:
    return 2;
  case DType::U8:
  case DType::Bool:
    return 1;
  }
  return 0;
}

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "float32";
  case DType::F64:
    return "float64";
  case DType::F16:
    return "float16";
  case DType::BF16:
    return "bfloat16";
  case DType::I64:
    return "int64";
  case DType::I32:
    return "int32";
  case DType::U16:
    return "uint16";
  case DType::U32:
    return "uint32";
  case DType::U8:
    return "uint8";
  case DType::Bool:
    return "bool";
  }
  return "?";
}

int64_t numElements(const std::vector<int64_t> &shape,
                    const std::string &what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw IoError(what + ": negative dimension in shape " +
                    formatShape(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      throw IoError(what + ": shape " + formatShape(shape) +
                    " has too many elements");
    n *= d;
  }
  return n;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace dsrt::io
