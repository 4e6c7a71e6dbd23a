//===- Staging.h - the staging bytes a plan reserves per collective -*- C++ -*-===//
//
// Part of the plan format (with plan.proto and Version.h): Instr.staging_bytes
// of a dist collective is at least collectiveStagingBytes() of it, the bytes
// dsrt's MPI backend packs and reduces the bucket in. dsc's memory-plan
// reserves them in the arena (so the arena is the whole peak and the
// staging shares bytes with activations whose lifetimes do not overlap);
// dsrt's MPI communicator works in them and refuses a plan that reserved
// fewer. A backend that needs no staging (NCCL reduces in place) ignores
// them; one that needed more would reserve its own at load, as dsrt does
// for a plan that reserved none. Header-only and dependency-free: the
// compiler reads the contract, not the runtime's communicators.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_PLAN_STAGING_H
#define DSRT_PLAN_STAGING_H

#include <cstddef>
#include <cstdint>

namespace dsrt::staging {

enum class Collective { AllReduce = 0, ReduceScatter = 1, AllGather = 2, AllToAll = 3 };
constexpr int kNumCollectives = 4;

/// Elements of each of `size` chunks of an n-element tensor.
inline int64_t chunkOf(int64_t n, int64_t size) { return (n + size - 1) / size; }

/// Bytes a plan reserves for a collective of k tensors (what the MPI
/// communicator stages it in), over
/// `size` ranks; in(j) / out(j) give tensor j's input and output elements,
/// width(j) its element bytes (4; an all_gather may move 2-byte bf16/fp16
/// tensors). All-reduce and reduce-scatter run as rings in `size` blocks of
/// the packed, zero-padded tensors plus one block to receive into; an
/// all-gather is packed only when it is a bucket or drops padding; an
/// all-to-all (each tensor `size` equal chunks, chunk r to rank r) only
/// when it is a bucket, into the blocks it sends and the blocks it
/// receives. The result is rounded up to whole floats (the staging's unit).
template <typename In, typename Out, typename Width>
int64_t collectiveStagingBytes(Collective kind, int64_t size, size_t k, In in, Out out, Width width) {
  int64_t total = 0;
  switch (kind) {
  case Collective::AllReduce:
    for (size_t j = 0; j < k; ++j)
      total += in(j);
    return (width(0) * (size + 1) * chunkOf(total, size) + 3) / 4 * 4;
  case Collective::ReduceScatter:
    for (size_t j = 0; j < k; ++j)
      total += chunkOf(in(j), size);
    return (width(0) * (size + 1) * total + 3) / 4 * 4;
  case Collective::AllGather: {
    bool padded = false;
    for (size_t j = 0; j < k; ++j) {
      padded |= out(j) != in(j) * size;
      total += in(j) * size * width(j);
    }
    return k == 1 && !padded ? 0 : (total + 3) / 4 * 4;
  }
  case Collective::AllToAll:
    for (size_t j = 0; j < k; ++j)
      total += in(j) * width(j);
    return k == 1 ? 0 : (2 * total + 3) / 4 * 4;
  }
  return 0;
}

} // namespace dsrt::staging

#endif // DSRT_PLAN_STAGING_H
