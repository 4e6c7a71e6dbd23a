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

namespace dsrt::cpu {

// Shared with the fused attention kernel (Attention.cpp), so that its
// probabilities and their gradient are the unfused softmax's bit for bit.
namespace detail {

/// y = exp(x - m), returns the sum of y.
float expShifted(const float *__restrict x, float m, float *__restrict y,
                 int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) {
    float e = detail::expf(x[i] - m);
    y[i] = e;
    s += e;
  }
  return s;
}

/// dr = yr * (gr - sum(yr * gr)).
void softmaxGradRow(const float *__restrict yr, const float *__restrict gr,
                    float *__restrict dr, int64_t n) {
  float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
  for (int64_t i = 0; i < n; ++i)
    dot += yr[i] * gr[i];
  for (int64_t i = 0; i < n; ++i)
    dr[i] = yr[i] * (gr[i] - dot);
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
