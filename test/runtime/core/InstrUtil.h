//===- InstrUtil.h - one instruction built in a test ------------*- C++ -*-===//
#ifndef DSRT_TEST_CORE_INSTRUTIL_H
#define DSRT_TEST_CORE_INSTRUTIL_H

#include "runtime/core/Executor.h"

#include <cstdint>
#include <memory>
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

/// Tensors laid out as the memory plan lays them out: `at` places a
/// tensor at a byte offset (the same offset twice: in place, or a view).
/// As when a plan is bound, before the arena exists, they have offsets
/// and no addresses (data stays null).
struct Arena {
  std::vector<std::unique_ptr<Tensor>> tensors;
  Tensor *at(size_t offset, std::vector<int64_t> dims,
             dsc::plan::DType d = dsc::plan::BF16) {
    auto t = std::make_unique<Tensor>();
    t->dtype = d;
    t->shape.rank = int(dims.size());
    t->numel = 1;
    for (size_t k = 0; k < dims.size(); ++k)
      t->numel *= t->shape.dims[k] = dims[k];
    t->offset = offset;
    tensors.push_back(std::move(t));
    return tensors.back().get();
  }
};

/// A tensor for bindInstr, over zeroed storage of its own when small (the
/// shape checks never read it).
struct Buf : Tensor {
  std::vector<uint64_t> storage;
  explicit Buf(std::vector<int64_t> dims, dsc::plan::DType type = dsc::plan::F32) {
    static uint64_t nextOffset = 0;
    dtype = type;
    numel = 1;
    for (int64_t d : dims) {
      shape.dims[shape.rank++] = d;
      numel *= d;
    }
    offset = nextOffset += 1 << 20; // distinct: nothing is in place by accident
    if (numel <= (1 << 20)) {
      storage.assign(size_t(numel) + 1, 0);
      data = storage.data();
    }
  }
  float *f() const { return f32(); }
};

} // namespace dsrt::test

#endif // DSRT_TEST_CORE_INSTRUTIL_H
