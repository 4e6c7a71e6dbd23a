//===- Softmax.cpp - softmax, log-softmax and their gradients -------------===//
//
// Tensors are [outer, n, inner] and the op runs along n. With inner == 1 a
// row is contiguous; otherwise blocks of up to kCols adjacent columns are
// processed together so that the inner loops run along contiguous memory.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Internal.h"

#include <cmath>
#include <limits>

namespace dsrt::cpu {
using namespace detail;

namespace {

constexpr int64_t kCols = 128;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// Calls row(offset) for each contiguous row when inner == 1, otherwise
/// cols(offset, len) for each [n, len] column block at element `offset`.
template <class Row, class Cols>
void forEachSlice(int64_t outer, int64_t n, int64_t inner, Row &&row,
                  Cols &&cols) {
  if (inner == 1) {
    parallelFor(outer, std::max<int64_t>(1, kGrain / n),
                [&](int64_t b, int64_t e) {
                  for (int64_t o = b; o < e; ++o)
                    row(o * n);
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

void colMax(const float *__restrict x, int64_t n, int64_t inner, int64_t len,
            float *__restrict m) {
  for (int64_t j = 0; j < len; ++j)
    m[j] = kNegInf;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < len; ++j)
      m[j] = maxOf(m[j], x[i * inner + j]);
}

} // namespace

void softmax(const float *x, float *y, int64_t outer, int64_t n,
             int64_t inner) {
  forEachSlice(
      outer, n, inner,
      [&](int64_t off) {
        const float *__restrict xr = x + off;
        float *__restrict yr = y + off;
        const float inv = 1.0f / expShifted(xr, rowMax(xr, n), yr, n);
        for (int64_t i = 0; i < n; ++i)
          yr[i] *= inv;
      },
      [&](int64_t off, int64_t len) {
        const float *__restrict xs = x + off;
        float *__restrict ys = y + off;
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
      });
}

void logSoftmax(const float *x, float *y, int64_t outer, int64_t n,
                int64_t inner) {
  forEachSlice(
      outer, n, inner,
      [&](int64_t off) {
        const float *__restrict xr = x + off;
        float *__restrict yr = y + off;
        const float m = rowMax(xr, n);
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < n; ++i)
          s += detail::expf(xr[i] - m);
        const float logS = std::log(s);
        for (int64_t i = 0; i < n; ++i)
          yr[i] = (xr[i] - m) - logS;
      },
      [&](int64_t off, int64_t len) {
        const float *__restrict xs = x + off;
        float *__restrict ys = y + off;
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
      });
}

void softmaxGrad(const float *y, const float *dy, float *dx, int64_t outer,
                 int64_t n, int64_t inner) {
  forEachSlice(
      outer, n, inner,
      [&](int64_t off) {
        const float *__restrict yr = y + off;
        const float *__restrict gr = dy + off;
        float *__restrict dr = dx + off;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t i = 0; i < n; ++i)
          dot += yr[i] * gr[i];
        for (int64_t i = 0; i < n; ++i)
          dr[i] = yr[i] * (gr[i] - dot);
      },
      [&](int64_t off, int64_t len) {
        const float *__restrict ys = y + off;
        const float *__restrict gs = dy + off;
        float *__restrict ds = dx + off;
        float dot[kCols];
        for (int64_t j = 0; j < len; ++j)
          dot[j] = 0.0f;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < len; ++j)
            dot[j] += ys[i * inner + j] * gs[i * inner + j];
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < len; ++j)
            ds[i * inner + j] =
                ys[i * inner + j] * (gs[i * inner + j] - dot[j]);
      });
}

void logSoftmaxGrad(const float *y, const float *dy, float *dx, int64_t outer,
                    int64_t n, int64_t inner) {
  forEachSlice(
      outer, n, inner,
      [&](int64_t off) {
        const float *__restrict yr = y + off;
        const float *__restrict gr = dy + off;
        float *__restrict dr = dx + off;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < n; ++i)
          s += gr[i];
        for (int64_t i = 0; i < n; ++i)
          dr[i] = gr[i] - detail::expf(yr[i]) * s;
      },
      [&](int64_t off, int64_t len) {
        const float *__restrict ys = y + off;
        const float *__restrict gs = dy + off;
        float *__restrict ds = dx + off;
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
      });
}

} // namespace dsrt::cpu
