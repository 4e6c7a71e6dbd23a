//===- Dropout.cpp - counter-based dropout --------------------------------===//
//
// The mask bit of element i is a pure function of (seed, stream, counter, i)
// so the backward pass or a recomputation can regenerate it and the result
// does not depend on how the work is split across threads: splitmix64
// mixes the key, and element i takes draw i of the splitmix64 sequence
// started at that key.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Internal.h"

#include <cmath>

namespace dsrt::cpu {
using namespace detail;

namespace {

inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

/// 1 / (1 - ratio); unused when ratio == 1 since nothing is kept.
float keepScale(float ratio) {
  return ratio < 1.0f ? 1.0f / (1.0f - ratio) : 0.0f;
}

} // namespace

void dropout(const float *x, float *y, uint8_t *mask, int64_t n, float ratio,
             uint64_t seed, uint64_t stream, uint64_t counter) {
  uint64_t key = mix64(seed);
  key = mix64(key ^ (stream * 0xd6e8feb86659fd93ULL));
  key = mix64(key ^ (counter * 0xa0761d6478bd642fULL));
  // Keep iff u >= ratio with u = top 24 hash bits / 2^24, done on integers:
  // bits >= ceil(ratio * 2^24). ratio 0 keeps all, ratio 1 none.
  const float r = std::min(std::max(ratio, 0.0f), 1.0f);
  const uint64_t threshold = uint64_t(std::ceil(double(r) * 16777216.0));
  const float s = keepScale(r);
  parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    // Locals: the byte stores to the mask could alias the closure's members.
    const uint64_t k = key, thr = threshold;
    const float sc = s;
    const float *__restrict src = x;
    float *__restrict dst = y;
    uint8_t *__restrict m = mask;
    for (int64_t i = b; i < e; ++i) {
      const bool keep = (mix64(k + uint64_t(i) * kGolden) >> 40) >= thr;
      m[i] = keep;
      dst[i] = keep ? src[i] * sc : 0.0f;
    }
  });
}

void dropoutGrad(const float *dy, const uint8_t *mask, float *dx, int64_t n,
                 float ratio) {
  const float s = keepScale(std::min(std::max(ratio, 0.0f), 1.0f));
  parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    const float sc = s;
    const float *__restrict src = dy;
    const uint8_t *__restrict m = mask;
    float *__restrict dst = dx;
    for (int64_t i = b; i < e; ++i)
      dst[i] = m[i] ? src[i] * sc : 0.0f;
  });
}

} // namespace dsrt::cpu
