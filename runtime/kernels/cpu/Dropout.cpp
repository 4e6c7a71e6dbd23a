//===- Dropout.cpp - counter-based dropout --------------------------------===//
//
// The mask bit of element i is a pure function of (seed, stream, counter, i)
// so the backward pass or a recomputation can regenerate it and the result
// does not depend on how the work is split across threads: splitmix64
// mixes the key, and element i takes draw i of the splitmix64 sequence
// started at that key. The 16-bit variants draw the same mask and round
// each kept value once.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/common/DropoutBits.h"
#include "runtime/kernels/cpu/Half.h"

#include <cmath>

namespace dsrt::cpu {
using namespace detail;

namespace {

namespace bits = kernels::dropout_bits;
using bits::kGolden;
using bits::keepScale;

/// The float kernel's mask, element for element, for any element type.
template <class T>
void dropoutT(const T *x, T *y, uint8_t *mask, int64_t n, float ratio,
              uint64_t seed, uint64_t stream, uint64_t counter, uint64_t first) {
  const uint64_t key = bits::key(seed, stream, counter), threshold = bits::threshold(ratio);
  const float s = keepScale(ratio);
  parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    float xb[kTile], yb[kTile];
    forTiles<T>(b, e, [&](int64_t t0, int64_t t1) {
      // Locals: the byte stores to the mask could alias the closure's
      // members. Element t0 + i draws hash first + t0 + i.
      const int64_t len = t1 - t0;
      const uint64_t k = key + (first + uint64_t(t0)) * kGolden, thr = threshold;
      const float sc = s;
      const float *__restrict src = widened(x + t0, xb, len);
      float *__restrict dst = resultIn(y + t0, yb);
      uint8_t *__restrict m = mask + t0;
      for (int64_t i = 0; i < len; ++i) {
        const bool keep = (bits::mix64(k + uint64_t(i) * kGolden) >> 40) >= thr;
        m[i] = keep;
        dst[i] = keep ? src[i] * sc : 0.0f;
      }
      narrowInto(dst, y + t0, len);
    });
  });
}

template <class T>
void dropoutGradT(const T *dy, const uint8_t *mask, T *dx, int64_t n,
                  float ratio) {
  const float s = keepScale(ratio);
  parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    float gb[kTile], db[kTile];
    forTiles<T>(b, e, [&](int64_t t0, int64_t t1) {
      const int64_t len = t1 - t0;
      const float sc = s;
      const float *__restrict src = widened(dy + t0, gb, len);
      const uint8_t *__restrict m = mask + t0;
      float *__restrict dst = resultIn(dx + t0, db);
      for (int64_t i = 0; i < len; ++i)
        dst[i] = m[i] ? src[i] * sc : 0.0f;
      narrowInto(dst, dx + t0, len);
    });
  });
}

} // namespace

void dropout(const float *x, float *y, uint8_t *mask, int64_t n, float ratio,
             uint64_t seed, uint64_t stream, uint64_t counter, uint64_t first) {
  dropoutT(x, y, mask, n, ratio, seed, stream, counter, first);
}
void dropout(const Bf16 *x, Bf16 *y, uint8_t *mask, int64_t n, float ratio,
             uint64_t seed, uint64_t stream, uint64_t counter, uint64_t first) {
  dropoutT(x, y, mask, n, ratio, seed, stream, counter, first);
}
void dropout(const Fp16 *x, Fp16 *y, uint8_t *mask, int64_t n, float ratio,
             uint64_t seed, uint64_t stream, uint64_t counter, uint64_t first) {
  dropoutT(x, y, mask, n, ratio, seed, stream, counter, first);
}

void dropoutGrad(const float *dy, const uint8_t *mask, float *dx, int64_t n,
                 float ratio) {
  dropoutGradT(dy, mask, dx, n, ratio);
}
void dropoutGrad(const Bf16 *dy, const uint8_t *mask, Bf16 *dx, int64_t n,
                 float ratio) {
  dropoutGradT(dy, mask, dx, n, ratio);
}
void dropoutGrad(const Fp16 *dy, const uint8_t *mask, Fp16 *dx, int64_t n,
                 float ratio) {
  dropoutGradT(dy, mask, dx, n, ratio);
}

} // namespace dsrt::cpu
