//===- DropoutBits.h - which elements dropout keeps -------------*- C++ -*-===//
//
// The counter-based rule every dropout kernel draws its mask by (nn.dropout
// and the dropout inside nn.attention, on the CPU): element i of a tensor
// is kept iff the top 24 bits of splitmix64's draw i from the key of (seed,
// stream, counter) are at least ceil(ratio * 2^24). A pure function of the
// position, so a recomputation, a fused kernel or a tensor-parallel part
// (which passes its first element's index in the whole tensor) draws the
// same bits.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_KERNELS_COMMON_DROPOUTBITS_H
#define DSRT_KERNELS_COMMON_DROPOUTBITS_H

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace dsrt::kernels::dropout_bits {

inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

/// The key of (seed, stream, counter): element i draws mix64(key + i * kGolden).
inline uint64_t key(uint64_t seed, uint64_t stream, uint64_t counter) {
  uint64_t k = mix64(seed);
  k = mix64(k ^ (stream * 0xd6e8feb86659fd93ULL));
  return mix64(k ^ (counter * 0xa0761d6478bd642fULL));
}

inline float clampRatio(float ratio) { return std::min(std::max(ratio, 0.0f), 1.0f); }

/// Keep iff u >= ratio with u = top 24 hash bits / 2^24, on integers:
/// bits >= ceil(ratio * 2^24). Ratio 0 keeps all, ratio 1 none.
inline uint64_t threshold(float ratio) {
  return uint64_t(std::ceil(double(clampRatio(ratio)) * 16777216.0));
}

/// 1 / (1 - ratio); unused when ratio == 1 since nothing is kept.
inline float keepScale(float ratio) {
  const float r = clampRatio(ratio);
  return r < 1.0f ? 1.0f / (1.0f - r) : 0.0f;
}

/// Whether element `index` of the tensor is kept.
inline bool kept(uint64_t key, uint64_t index, uint64_t threshold) {
  return (mix64(key + index * kGolden) >> 40) >= threshold;
}

} // namespace dsrt::kernels::dropout_bits

#endif // DSRT_KERNELS_COMMON_DROPOUTBITS_H
