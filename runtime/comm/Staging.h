//===- Staging.h - the staging bytes of a collective ------------*- C++ -*-===//
//
// Header-only, so that dsc's memory-plan (which reserves the bytes in the
// arena) and dsrt's MPI communicator (which works in them) share one
// definition of how many a collective needs.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_COMM_STAGING_H
#define DSRT_COMM_STAGING_H

#include <cstddef>
#include <cstdint>

namespace dsrt::comm {

enum class Kind { AllReduce = 0, ReduceScatter = 1, AllGather = 2 };
constexpr int kNumKinds = 3;

/// Elements of each of `size` chunks of an n-element tensor.
inline int64_t chunkOf(int64_t n, int64_t size) { return (n + size - 1) / size; }

/// Bytes the MPI communicator stages a collective of k tensors in, over
/// `size` ranks; in(j) / out(j) give tensor j's input and output elements,
/// width(j) its element bytes (4; an all_gather may move 2-byte bf16/fp16
/// tensors). All-reduce and reduce-scatter run as rings in `size` blocks of
/// the packed, zero-padded tensors plus one block to receive into; an
/// all-gather is packed only when it is a bucket or drops padding. The
/// result is rounded up to whole floats (the staging's unit).
template <typename In, typename Out, typename Width>
int64_t mpiStagingBytes(Kind kind, int64_t size, size_t k, In in, Out out, Width width) {
  int64_t total = 0;
  switch (kind) {
  case Kind::AllReduce:
    for (size_t j = 0; j < k; ++j)
      total += in(j);
    return (width(0) * (size + 1) * chunkOf(total, size) + 3) / 4 * 4;
  case Kind::ReduceScatter:
    for (size_t j = 0; j < k; ++j)
      total += chunkOf(in(j), size);
    return (width(0) * (size + 1) * total + 3) / 4 * 4;
  case Kind::AllGather: {
    bool padded = false;
    for (size_t j = 0; j < k; ++j) {
      padded |= out(j) != in(j) * size;
      total += in(j) * size * width(j);
    }
    return k == 1 && !padded ? 0 : (total + 3) / 4 * 4;
  }
  }
  return 0;
}

} // namespace dsrt::comm

#endif // DSRT_COMM_STAGING_H
