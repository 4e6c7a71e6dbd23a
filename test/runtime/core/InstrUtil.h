//===- InstrUtil.h - one instruction built in a test ------------*- C++ -*-===//
#ifndef DSRT_TEST_CORE_INSTRUTIL_H
#define DSRT_TEST_CORE_INSTRUTIL_H

#include "runtime/core/Executor.h"

#include <string>
#include <vector>

namespace dsrt::test {

/// An instruction of `op` over `in` and `out` (not yet bound: bindInstr
/// checks it and chooses its kernel).
inline Instr makeInstr(const std::string &op, std::vector<Tensor *> in,
                       std::vector<Tensor *> out, std::vector<int64_t> ints = {},
                       std::vector<double> floats = {}) {
  Instr i;
  i.op = op;
  i.in = std::move(in);
  i.out = std::move(out);
  i.ints = std::move(ints);
  i.floats = std::move(floats);
  return i;
}

} // namespace dsrt::test

#endif // DSRT_TEST_CORE_INSTRUTIL_H
