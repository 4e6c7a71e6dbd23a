//===- ElementBytes.h - the size of a plan dtype's element ------*- C++ -*-===//
//
// One table for dsc (the memory report) and dsrt (buffer sizes).
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_PLAN_ELEMENTBYTES_H
#define DSRT_PLAN_ELEMENTBYTES_H

#include "io/DType.h"

#include "plan.pb.h"

#include <cstdint>

namespace dsrt::plan_util {

/// Bytes of one element of `d` (BOOL, U8 and unknown dtypes: 1).
inline int64_t elementBytes(dsc::plan::DType d) {
  switch (d) {
  case dsc::plan::F64:
  case dsc::plan::I64:
    return 8;
  case dsc::plan::F32:
  case dsc::plan::I32:
    return 4;
  case dsc::plan::BF16:
  case dsc::plan::F16:
    return 2;
  default:
    return 1;
  }
}

/// The element type of a plan dtype in runtime/io's vocabulary (files,
/// loaders and collectives use it; the plan format keeps its own enum).
inline io::DType ioDType(dsc::plan::DType d) {
  switch (d) {
  case dsc::plan::F32: return io::DType::F32;
  case dsc::plan::F64: return io::DType::F64;
  case dsc::plan::I64: return io::DType::I64;
  case dsc::plan::I32: return io::DType::I32;
  case dsc::plan::BF16: return io::DType::BF16;
  case dsc::plan::F16: return io::DType::F16;
  case dsc::plan::U8: return io::DType::U8;
  default: return io::DType::Bool;
  }
}

} // namespace dsrt::plan_util

#endif // DSRT_PLAN_ELEMENTBYTES_H
