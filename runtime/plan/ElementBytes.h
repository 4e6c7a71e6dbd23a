//===- ElementBytes.h - the size of a plan dtype's element ------*- C++ -*-===//
//
// One table for dsc (the memory report) and dsrt (buffer sizes).
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_PLAN_ELEMENTBYTES_H
#define DSRT_PLAN_ELEMENTBYTES_H

#include "plan.pb.h"

#include <cstdint>

namespace dsrt::plan_util {

/// Bytes of one element of `d` (BOOL and unknown dtypes: 1).
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

} // namespace dsrt::plan_util

#endif // DSRT_PLAN_ELEMENTBYTES_H
