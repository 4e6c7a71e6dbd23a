//===- AtenProgram.cpp - torch's element types ----------------------------===//
#include "frontends/aten/AtenProgram.h"

namespace dsc::aten {

std::string scalarTypeName(int code) {
  switch (ScalarType(code)) {
  case ScalarType::Byte: return "uint8";
  case ScalarType::Char: return "int8";
  case ScalarType::Short: return "int16";
  case ScalarType::Int: return "int32";
  case ScalarType::Long: return "int64";
  case ScalarType::Half: return "float16";
  case ScalarType::Float: return "float32";
  case ScalarType::Double: return "float64";
  case ScalarType::Bool: return "bool";
  case ScalarType::BFloat16: return "bfloat16";
  }
  return "dtype " + std::to_string(code);
}

int64_t scalarTypeBytes(int code) {
  switch (ScalarType(code)) {
  case ScalarType::Byte: case ScalarType::Char: case ScalarType::Bool: return 1;
  case ScalarType::Short: case ScalarType::Half: case ScalarType::BFloat16: return 2;
  case ScalarType::Int: case ScalarType::Float: return 4;
  case ScalarType::Long: case ScalarType::Double: return 8;
  }
  return 0;
}

std::string formatSizes(const std::vector<int64_t> &sizes) {
  std::string s = "[";
  for (size_t k = 0; k < sizes.size(); ++k)
    s += (k ? ", " : "") + std::to_string(sizes[k]);
  return s + "]";
}

} // namespace dsc::aten
