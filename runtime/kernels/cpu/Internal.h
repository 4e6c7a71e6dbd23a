//===- Internal.h - shared helpers of the dsrt CPU kernels ------*- C++ -*-===//
//
// Threading, scratch memory, a vectorizable exp and the broadcast iterator
// that the kernel sources share. Not part of the kernel contract.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_KERNELS_CPU_INTERNAL_H
#define DSRT_KERNELS_CPU_INTERNAL_H

#include "runtime/kernels/cpu/Kernels.h"

#include <omp.h>

#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

namespace dsrt::cpu::detail {

/// Elements a thread should get at least before a loop is worth threading.
constexpr int64_t kGrain = 1 << 15;

/// Runs f(begin, end) over contiguous parts of [0, n), one per thread, with
/// at most n / grain threads (grain counts iterations). Part boundaries are
/// multiples of 16 iterations so threads do not share cache lines of
/// float outputs.
template <class F> void parallelFor(int64_t n, int64_t grain, F &&f) {
  if (n <= 0)
    return;
  int64_t want =
      std::min<int64_t>(omp_get_max_threads(), n / std::max<int64_t>(grain, 1));
  if (want <= 1 || omp_in_parallel()) {
    f(int64_t(0), n);
    return;
  }
#pragma omp parallel num_threads(int(want))
  {
    int64_t parts = omp_get_num_threads();
    int64_t chunk = ((n + parts - 1) / parts + 15) / 16 * 16;
    int64_t b = std::min(n, chunk * omp_get_thread_num());
    int64_t e = std::min(n, b + chunk);
    if (b < e)
      f(b, e);
  }
}

/// Per-thread scratch that grows once and is then reused; Slot keeps the
/// buffers of one kernel apart when it needs several.
template <class T, int Slot> T *scratch(size_t n) {
  thread_local std::vector<T> buf;
  if (buf.size() < n)
    buf.resize(n);
  return buf.data();
}

/// max by value: std::max returns a reference, and when its operand lives
/// in an array GCC then fails to vectorize the loop.
inline float maxOf(float a, float b) { return b > a ? b : a; }

#ifdef __AVX512F__
/// The first `rem` (< 16) of a 16-float block: a row's last partial block.
inline __mmask16 tailMask(int64_t rem) { return __mmask16((1u << rem) - 1u); }
#endif

/// The largest of x[0, n) (-inf for none). With AVX-512 the row's last
/// partial block is one masked block, not a scalar loop (short rows: a
/// causal attention head's).
inline float rowMax(const float *x, int64_t n) {
#ifdef __AVX512F__
  __m512 acc = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    acc = _mm512_max_ps(_mm512_loadu_ps(x + i), acc); // maxOf(acc, x): a NaN x is skipped
  if (i < n) {
    const __mmask16 k = tailMask(n - i);
    acc = _mm512_mask_max_ps(acc, k, _mm512_maskz_loadu_ps(k, x + i), acc);
  }
  return _mm512_reduce_max_ps(acc);
#else
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i)
    m = maxOf(m, x[i]);
  return m;
#endif
}

/// Softmax's row steps (Softmax.cpp): y = exp(x - m), returning the sum of
/// y; and dr = yr * (gr - sum(yr * gr)).
float expShifted(const float *__restrict x, float m, float *__restrict y, int64_t n);
void softmaxGradRow(const float *__restrict yr, const float *__restrict gr,
                    float *__restrict dr, int64_t n);

inline float asFloat(int32_t i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}
inline int32_t asInt(float f) {
  int32_t i;
  std::memcpy(&i, &f, sizeof i);
  return i;
}

/// exp(x) with a relative error below 1e-7 on the normal range (Cephes
/// polynomial), written so that loops calling it auto-vectorize (glibc's
/// expf does not without -ffast-math). Overflows to inf, underflows to 0
/// (denormal results are approximate), propagates NaN. Always inlined: a
/// call would stop the vectorization, and GCC's unit-growth limit refuses
/// inlining in the sources that instantiate kernels for several types.
inline __attribute__((always_inline)) float expf(float x) {
  float xc = x < -104.0f ? -104.0f : (x > 88.8f ? 88.8f : x);
  // Adding 1.5 * 2^23 rounds to an integer held in the low mantissa bits.
  const float magic = 12582912.0f;
  float t = xc * 1.44269504088896341f + magic;
  float n = t - magic;
  int32_t ni = asInt(t) - asInt(magic);
  float r = xc - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  // 2^n in two factors so that n in [-150, 128] never leaves the normal
  // exponent range before the final rounding. Shifted unsigned: for a NaN x,
  // ni is meaningless and may be negative (a signed shift would be UB).
  int32_t e1 = ni >> 1, e2 = ni - e1;
  return p * asFloat(int32_t(uint32_t(e1 + 127) << 23)) *
         asFloat(int32_t(uint32_t(e2 + 127) << 23));
}

/// Numpy broadcasting of NIn inputs to an output shape, with size-1 output
/// dims dropped and adjacent dims merged where every input is contiguous
/// (or broadcast) across them. Strides are in elements, 0 = broadcast; the
/// innermost stride of every input is 0 or 1.
template <int NIn> struct Broadcast {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[NIn][kMaxRank] = {};

  Broadcast(const Shape &os, const Shape *const (&in)[NIn]) {
    int64_t contig[NIn][kMaxRank];
    for (int k = 0; k < NIn; ++k) {
      int64_t s = 1;
      for (int d = in[k]->rank - 1; d >= 0; --d) {
        contig[k][d] = s;
        s *= in[k]->dims[d];
      }
    }
    for (int d = 0; d < os.rank; ++d) {
      int64_t size = os.dims[d];
      if (size == 1)
        continue;
      int64_t st[NIn];
      for (int k = 0; k < NIn; ++k) {
        int j = d - (os.rank - in[k]->rank);
        st[k] = (j < 0 || in[k]->dims[j] == 1) ? 0 : contig[k][j];
      }
      bool merge = rank > 0;
      for (int k = 0; k < NIn && merge; ++k)
        merge = strides[k][rank - 1] == st[k] * size;
      if (!merge)
        ++rank;
      dims[rank - 1] = merge ? dims[rank - 1] * size : size;
      for (int k = 0; k < NIn; ++k)
        strides[k][rank - 1] = st[k];
    }
    if (rank == 0) {
      rank = 1;
      dims[0] = 1;
    }
  }

  /// Calls row(outOffset, inOffsets, inInnerStrides, length) over the output
  /// in rows of the innermost dim, threaded when large.
  template <class Row> void forEachRow(Row &&row) const {
    const int64_t inner = dims[rank - 1];
    int64_t innerStride[NIn];
    for (int k = 0; k < NIn; ++k)
      innerStride[k] = strides[k][rank - 1];
    if (rank == 1) {
      parallelFor(inner, kGrain, [&](int64_t b, int64_t e) {
        int64_t off[NIn];
        for (int k = 0; k < NIn; ++k)
          off[k] = b * innerStride[k];
        row(b, off, innerStride, e - b);
      });
      return;
    }
    int64_t rows = 1;
    for (int d = 0; d < rank - 1; ++d)
      rows *= dims[d];
    parallelFor(rows, std::max<int64_t>(1, kGrain / inner),
                [&](int64_t b, int64_t e) {
                  int64_t idx[kMaxRank], off[NIn] = {};
                  int64_t r = b;
                  for (int d = rank - 2; d >= 0; --d) {
                    idx[d] = r % dims[d];
                    r /= dims[d];
                    for (int k = 0; k < NIn; ++k)
                      off[k] += idx[d] * strides[k][d];
                  }
                  for (int64_t i = b; i < e; ++i) {
                    row(i * inner, off, innerStride, inner);
                    for (int d = rank - 2; d >= 0; --d) {
                      for (int k = 0; k < NIn; ++k)
                        off[k] += strides[k][d];
                      if (++idx[d] < dims[d])
                        break;
                      for (int k = 0; k < NIn; ++k)
                        off[k] -= strides[k][d] * dims[d];
                      idx[d] = 0;
                    }
                  }
                });
  }
};

} // namespace dsrt::cpu::detail

#endif // DSRT_KERNELS_CPU_INTERNAL_H
