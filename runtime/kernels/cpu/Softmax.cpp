//===- Softmax.cpp - softmax, log-softmax and their gradients -------------===//
//
// Tensors are [outer, n, inner] and the op runs along n. With inner == 1 a
// row is contiguous; otherwise blocks of up to kCols adjacent columns are
// processed together so that the inner loops run along contiguous memory.
// The kernels are float functions of a row or a column block; 16-bit
// tensors run them on float views (Half.h's tile policy: each slice widened
// into per-thread scratch, the result narrowed once), so the statistics
// (max, sum of exponentials, dot products) are float throughout.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Half.h"

#include <cmath>
#include <limits>

#ifdef __AVX512F__
#include <immintrin.h>
#endif

namespace dsrt::cpu {

// Shared with the fused attention kernel (Attention.cpp), so that its
// probabilities and their gradient are the unfused softmax's bit for bit.
//
// A row runs kLanes = 16 floats at a time, its last partial block as one
// more masked block rather than a scalar loop: a causal attention head's
// rows end anywhere, and the scalar tails had cost more than the vector
// body (on a causal 128-key head the three row steps took 2.4x as long).
// Each lane keeps its own partial sum, the lanes are added pairwise (8,
// 4, 2 and 1 apart: _mm512_reduce_add_ps's order), and the AVX-512 code
// and the portable code give the same bits; so does every CPU with FMA
// (detail::expf's multiply-adds contract under -march=native), whatever
// vector width the compiler would have picked.
namespace detail {

namespace {
constexpr int kLanes = 16;

/// The lanes' partial sums added pairwise into lane 0.
[[maybe_unused]] float laneSum(float *a) {
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l)
      a[l] += a[l + w];
  return a[0];
}

#ifdef __AVX512F__
/// detail::expf on 16 lanes, the same operations (and bits).
inline __m512 expLanes(__m512 x) {
  // The clamp's constants first: min/max_ps return the second operand
  // when either is NaN, so a NaN x comes through as NaN (as in expf).
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), _mm512_min_ps(_mm512_set1_ps(88.8f), x));
  const __m512 magic = _mm512_set1_ps(12582912.0f);
  const __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), magic);
  const __m512 n = _mm512_sub_ps(t, magic);
  const __m512i ni = _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_castps_si512(magic));
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  const __m512i e1 = _mm512_srai_epi32(ni, 1), e2 = _mm512_sub_epi32(ni, e1);
  const __m512i bias = _mm512_set1_epi32(127);
  const __m512 f1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(e1, bias), 23));
  const __m512 f2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(e2, bias), 23));
  return _mm512_mul_ps(_mm512_mul_ps(p, f1), f2);
}
#endif
} // namespace

/// y = exp(x - m), returns the sum of y.
float expShifted(const float *__restrict x, float m, float *__restrict y, int64_t n) {
  int64_t i = 0;
#ifdef __AVX512F__
  const __m512 mv = _mm512_set1_ps(m);
  __m512 acc = _mm512_setzero_ps();
  for (; i + kLanes <= n; i += kLanes) {
    const __m512 e = expLanes(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv));
    _mm512_storeu_ps(y + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (i < n) {
    const __mmask16 k = tailMask(n - i);
    const __m512 e = expLanes(_mm512_sub_ps(_mm512_mask_loadu_ps(mv, k, x + i), mv));
    _mm512_mask_storeu_ps(y + i, k, e);
    acc = _mm512_mask_add_ps(acc, k, acc, e);
  }
  return _mm512_reduce_add_ps(acc);
#else
  float acc[kLanes] = {};
  for (; i + kLanes <= n; i += kLanes)
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) {
      const float e = detail::expf(x[i + l] - m);
      y[i + l] = e;
      acc[l] += e;
    }
  const int64_t rem = n - i;
  if (rem > 0)
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) {
      const float e = detail::expf((l < rem ? x[i + l] : m) - m);
      if (l < rem)
        y[i + l] = e;
      acc[l] = l < rem ? acc[l] + e : acc[l];
    }
  return laneSum(acc);
#endif
}

/// dr = yr * (gr - sum(yr * gr)).
void softmaxGradRow(const float *__restrict yr, const float *__restrict gr, float *__restrict dr,
                    int64_t n) {
  int64_t i = 0;
  const int64_t full = n - n % kLanes;
#ifdef __AVX512F__
  __m512 acc = _mm512_setzero_ps();
  for (; i < full; i += kLanes)
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(yr + i), _mm512_loadu_ps(gr + i), acc);
  const __mmask16 k = tailMask(n - full);
  if (full < n)
    acc = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(k, yr + full),
                                _mm512_maskz_loadu_ps(k, gr + full), acc, k);
  const __m512 dot = _mm512_set1_ps(_mm512_reduce_add_ps(acc));
  for (i = 0; i < full; i += kLanes)
    _mm512_storeu_ps(dr + i, _mm512_mul_ps(_mm512_loadu_ps(yr + i),
                                           _mm512_sub_ps(_mm512_loadu_ps(gr + i), dot)));
  if (full < n)
    _mm512_mask_storeu_ps(dr + full, k,
                          _mm512_mul_ps(_mm512_maskz_loadu_ps(k, yr + full),
                                        _mm512_sub_ps(_mm512_maskz_loadu_ps(k, gr + full), dot)));
#else
  float acc[kLanes] = {};
  for (; i < full; i += kLanes)
#pragma omp simd
    for (int l = 0; l < kLanes; ++l)
      acc[l] = std::fma(yr[i + l], gr[i + l], acc[l]);
  const int64_t rem = n - full;
#pragma omp simd
  for (int l = 0; l < kLanes; ++l)
    acc[l] = l < rem ? std::fma(yr[full + l], gr[full + l], acc[l]) : acc[l];
  const float dot = laneSum(acc);
#pragma omp simd
  for (i = 0; i < n; ++i)
    dr[i] = yr[i] * (gr[i] - dot);
#endif
}

} // namespace detail
using namespace detail;

namespace {

constexpr int64_t kCols = 128;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// Calls rows(first, count) for runs of contiguous rows when inner == 1
/// (runs of about kRun elements, or single rows when `single`), otherwise
/// cols(offset, len) for each [n, len] column block at element `offset`.
constexpr int64_t kRun = 2048;
template <class Rows, class Cols>
void forEachSlice(int64_t outer, int64_t n, int64_t inner, bool single,
                  Rows &&rows, Cols &&cols) {
  if (inner == 1) {
    const int64_t run = single ? 1 : std::max<int64_t>(1, kRun / n);
    parallelFor(outer, std::max<int64_t>(1, kGrain / n),
                [&](int64_t b, int64_t e) {
                  for (int64_t o = b; o < e; o += run)
                    rows(o, std::min(run, e - o));
                });
    return;
  }
  const int64_t blocks = (inner + kCols - 1) / kCols;
  parallelFor(outer * blocks, std::max<int64_t>(1, kGrain / (n * kCols)),
              [&](int64_t b, int64_t e) {
                for (int64_t w = b; w < e; ++w) {
                  const int64_t o = w / blocks, c0 = (w % blocks) * kCols;
                  cols(o * n * inner + c0, std::min(kCols, inner - c0));
                }
              });
}

/// Scratch slots of the 16-bit views (no other kernel runs inside these).
enum : int { kIn0 = 40, kIn1 = 41, kOut = 42 };

/// A float view of a [n, len] column block whose rows are `stride` apart:
/// the block itself for float, else a contiguous [n, len] copy.
template <int Slot, class T>
const float *blockView(const T *x, int64_t n, int64_t stride, int64_t len) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    float *b = scratch<float, Slot>(size_t(n * len));
    for (int64_t i = 0; i < n; ++i)
      convert(x + i * stride, b + i * len, len);
    return b;
  }
}

/// Runs the float kernel on float views of each slice: f(in..., out, n)
/// on rows, g(in..., out, n, stride, len) on column blocks. 16-bit rows are
/// converted in runs of several rows (fewer, longer conversions).
template <class T, class Row, class Cols>
void onSlices(const T *x, T *y, int64_t outer, int64_t n, int64_t inner, Row f,
              Cols g) {
  forEachSlice(
      outer, n, inner, std::is_same_v<T, float>,
      [&](int64_t first, int64_t count) {
        const int64_t off = first * n, len = count * n;
        const float *xs = rowView<kIn0>(x + off, len);
        float *ys = rowOut<kOut>(y + off, len);
        for (int64_t r = 0; r < count; ++r)
          f(xs + r * n, ys + r * n, n);
        narrowInto(ys, y + off, len);
      },
      [&](int64_t off, int64_t len) {
        if constexpr (std::is_same_v<T, float>) {
          g(x + off, y + off, n, inner, len);
        } else {
          float *ys = scratch<float, kOut>(size_t(n * len));
          g(blockView<kIn0>(x + off, n, inner, len), ys, n, len, len);
          for (int64_t i = 0; i < n; ++i)
            convert(ys + i * len, y + off + i * inner, len);
        }
      });
}
template <class T, class Row, class Cols>
void onSlices(const T *a, const T *b, T *y, int64_t outer, int64_t n,
              int64_t inner, Row f, Cols g) {
  forEachSlice(
      outer, n, inner, std::is_same_v<T, float>,
      [&](int64_t first, int64_t count) {
        const int64_t off = first * n, len = count * n;
        const float *as = rowView<kIn0>(a + off, len);
        const float *bs = rowView<kIn1>(b + off, len);
        float *ys = rowOut<kOut>(y + off, len);
        for (int64_t r = 0; r < count; ++r)
          f(as + r * n, bs + r * n, ys + r * n, n);
        narrowInto(ys, y + off, len);
      },
      [&](int64_t off, int64_t len) {
        if constexpr (std::is_same_v<T, float>) {
          g(a + off, b + off, y + off, n, inner, len);
        } else {
          float *ys = scratch<float, kOut>(size_t(n * len));
          g(blockView<kIn0>(a + off, n, inner, len),
            blockView<kIn1>(b + off, n, inner, len), ys, n, len, len);
          for (int64_t i = 0; i < n; ++i)
            convert(ys + i * len, y + off + i * inner, len);
        }
      });
}

//===--- the float kernels, on a row or on a [n, len] block of columns ----===//

void colMax(const float *__restrict x, int64_t n, int64_t inner, int64_t len,
            float *__restrict m) {
  for (int64_t j = 0; j < len; ++j)
    m[j] = kNegInf;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < len; ++j)
      m[j] = maxOf(m[j], x[i * inner + j]);
}

void softmaxRow(const float *__restrict xr, float *__restrict yr, int64_t n) {
  const float inv = 1.0f / expShifted(xr, rowMax(xr, n), yr, n);
  for (int64_t i = 0; i < n; ++i)
    yr[i] *= inv;
}

void softmaxCols(const float *__restrict xs, float *__restrict ys, int64_t n,
                 int64_t inner, int64_t len) {
  float m[kCols], s[kCols];
  colMax(xs, n, inner, len, m);
  for (int64_t j = 0; j < len; ++j)
    s[j] = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < len; ++j) {
      float e = detail::expf(xs[i * inner + j] - m[j]);
      ys[i * inner + j] = e;
      s[j] += e;
    }
  for (int64_t j = 0; j < len; ++j)
    s[j] = 1.0f / s[j];
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < len; ++j)
      ys[i * inner + j] *= s[j];
}

void logSoftmaxRow(const float *__restrict xr, float *__restrict yr,
                   int64_t n) {
  const float m = rowMax(xr, n);
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i)
    s += detail::expf(xr[i] - m);
  const float logS = std::log(s);
  for (int64_t i = 0; i < n; ++i)
    yr[i] = (xr[i] - m) - logS;
}

void logSoftmaxCols(const float *__restrict xs, float *__restrict ys, int64_t n,
                    int64_t inner, int64_t len) {
  float m[kCols], s[kCols];
  colMax(xs, n, inner, len, m);
  for (int64_t j = 0; j < len; ++j)
    s[j] = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < len; ++j)
      s[j] += detail::expf(xs[i * inner + j] - m[j]);
  for (int64_t j = 0; j < len; ++j)
    s[j] = std::log(s[j]);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < len; ++j)
      ys[i * inner + j] = (xs[i * inner + j] - m[j]) - s[j];
}

void softmaxGradCols(const float *__restrict ys, const float *__restrict gs,
                     float *__restrict ds, int64_t n, int64_t inner,
                     int64_t len) {
  float dot[kCols];
  for (int64_t j = 0; j < len; ++j)
    dot[j] = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < len; ++j)
      dot[j] += ys[i * inner + j] * gs[i * inner + j];
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < len; ++j)
      ds[i * inner + j] = ys[i * inner + j] * (gs[i * inner + j] - dot[j]);
}

void logSoftmaxGradRow(const float *__restrict yr, const float *__restrict gr,
                       float *__restrict dr, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i)
    s += gr[i];
  for (int64_t i = 0; i < n; ++i)
    dr[i] = gr[i] - detail::expf(yr[i]) * s;
}

void logSoftmaxGradCols(const float *__restrict ys, const float *__restrict gs,
                        float *__restrict ds, int64_t n, int64_t inner,
                        int64_t len) {
  float s[kCols];
  for (int64_t j = 0; j < len; ++j)
    s[j] = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < len; ++j)
      s[j] += gs[i * inner + j];
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < len; ++j)
      ds[i * inner + j] =
          gs[i * inner + j] - detail::expf(ys[i * inner + j]) * s[j];
}

} // namespace

void softmax(const float *x, float *y, int64_t outer, int64_t n,
             int64_t inner) {
  onSlices(x, y, outer, n, inner, softmaxRow, softmaxCols);
}
void softmax(const Bf16 *x, Bf16 *y, int64_t outer, int64_t n, int64_t inner) {
  onSlices(x, y, outer, n, inner, softmaxRow, softmaxCols);
}
void softmax(const Fp16 *x, Fp16 *y, int64_t outer, int64_t n, int64_t inner) {
  onSlices(x, y, outer, n, inner, softmaxRow, softmaxCols);
}

void logSoftmax(const float *x, float *y, int64_t outer, int64_t n,
                int64_t inner) {
  onSlices(x, y, outer, n, inner, logSoftmaxRow, logSoftmaxCols);
}
void logSoftmax(const Bf16 *x, Bf16 *y, int64_t outer, int64_t n,
                int64_t inner) {
  onSlices(x, y, outer, n, inner, logSoftmaxRow, logSoftmaxCols);
}
void logSoftmax(const Fp16 *x, Fp16 *y, int64_t outer, int64_t n,
                int64_t inner) {
  onSlices(x, y, outer, n, inner, logSoftmaxRow, logSoftmaxCols);
}

void softmaxGrad(const float *y, const float *dy, float *dx, int64_t outer,
                 int64_t n, int64_t inner) {
  onSlices(y, dy, dx, outer, n, inner, softmaxGradRow, softmaxGradCols);
}
void softmaxGrad(const Bf16 *y, const Bf16 *dy, Bf16 *dx, int64_t outer,
                 int64_t n, int64_t inner) {
  onSlices(y, dy, dx, outer, n, inner, softmaxGradRow, softmaxGradCols);
}
void softmaxGrad(const Fp16 *y, const Fp16 *dy, Fp16 *dx, int64_t outer,
                 int64_t n, int64_t inner) {
  onSlices(y, dy, dx, outer, n, inner, softmaxGradRow, softmaxGradCols);
}

void logSoftmaxGrad(const float *y, const float *dy, float *dx, int64_t outer,
                    int64_t n, int64_t inner) {
  onSlices(y, dy, dx, outer, n, inner, logSoftmaxGradRow, logSoftmaxGradCols);
}
void logSoftmaxGrad(const Bf16 *y, const Bf16 *dy, Bf16 *dx, int64_t outer,
                    int64_t n, int64_t inner) {
  onSlices(y, dy, dx, outer, n, inner, logSoftmaxGradRow, logSoftmaxGradCols);
}
void logSoftmaxGrad(const Fp16 *y, const Fp16 *dy, Fp16 *dx, int64_t outer,
                    int64_t n, int64_t inner) {
  onSlices(y, dy, dx, outer, n, inner, logSoftmaxGradRow, logSoftmaxGradCols);
}

} // namespace dsrt::cpu
