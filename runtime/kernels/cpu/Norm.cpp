//===- Norm.cpp - layer norm forward and backward -------------------------===//
//
// The backward pass sums dgamma/dbeta over fixed blocks of kBlock rows
// (partials in scratch) and then over the blocks in order, so the result
// does not depend on the thread count while x and dy are read only once.
// x, y, dy, dx may be 16-bit: the same code runs on float views of each row
// (Half.h's tile policy); gamma, beta, their gradients and all statistics
// are float.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Half.h"

#include <cmath>
#include <cstring>

namespace dsrt::cpu {
using namespace detail;

namespace {

constexpr int64_t kBlock = 32;

struct Moments {
  float mean, rstd;
};

/// Scratch slots of the 16-bit row views.
enum : int { kX = 40, kDy = 41, kOut = 42 };

/// Rows per conversion of 16-bit rows: runs of about 2048 elements (8 KiB
/// float views: fewer calls, still in L1); one row at a time for float.
template <class T> int64_t rowRun(int64_t cols) {
  return std::is_same_v<T, float> ? 1 : std::max<int64_t>(1, 2048 / cols);
}

// Internal helpers, always inlined: no ABI crosses them where the target
// lacks AVX (GCC's -Wpsabi note on a -march=x86-64 build).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
/// A row's sums run in 32 lanes, four 8-float accumulators: four
/// independent add chains where one `omp simd` accumulator waited on each
/// add (layer norm's gradient on [1024, 384] was bound by that latency),
/// and one order, whatever the CPU's vector width. Then the lanes in a
/// fixed tree, then the tail in order.
using V8 = float __attribute__((vector_size(32)));
inline __attribute__((always_inline)) V8 at8(const float *p) {
  V8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline __attribute__((always_inline)) float lanes(const V8 &a, const V8 &b, const V8 &c,
                                                  const V8 &d) {
  const V8 s = (a + b) + (c + d);
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}
/// sum over i < n of f(i), f taking a lane block's start and returning
/// its 8 values (fv) or one value (f1) for the tail.
template <class FV, class F1> float rowSum32(int64_t n, FV fv, F1 f1) {
  V8 a = {}, b = {}, c = {}, d = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a += fv(i);
    b += fv(i + 8);
    c += fv(i + 16);
    d += fv(i + 24);
  }
  float s = lanes(a, b, c, d);
  for (; i < n; ++i)
    s += f1(i);
  return s;
}

/// Biased mean and 1/sqrt(var + eps) of a row, two-pass in float.
Moments rowMoments(const float *x, int64_t n, float eps) {
  const float s = rowSum32(
      n, [&](int64_t i) { return at8(x + i); }, [&](int64_t i) { return x[i]; });
  const float mean = s / float(n);
  const float q = rowSum32(
      n,
      [&](int64_t i) {
        const V8 v = at8(x + i) - mean;
        return v * v;
      },
      [&](int64_t i) { return (x[i] - mean) * (x[i] - mean); });
  return {mean, 1.0f / std::sqrt(q / float(n) + eps)};
}

template <class T>
void layerNormT(const T *x, const float *gamma, const float *beta, T *y,
                int64_t rows, int64_t cols, float eps) {
  const int64_t run = rowRun<T>(cols);
  parallelFor(
      rows, std::max<int64_t>(1, kGrain / cols), [&](int64_t b, int64_t e) {
        for (int64_t r0 = b; r0 < e; r0 += run) {
          const int64_t len = std::min(run, e - r0) * cols;
          const float *xs = rowView<kX>(x + r0 * cols, len);
          float *ys = rowOut<kOut>(y + r0 * cols, len);
          for (int64_t k = 0; k < len; k += cols) {
            const float *__restrict xr = xs + k;
            float *__restrict yr = ys + k;
            const Moments mo = rowMoments(xr, cols, eps);
            if (beta) {
              for (int64_t i = 0; i < cols; ++i)
                yr[i] = (xr[i] - mo.mean) * mo.rstd * gamma[i] + beta[i];
            } else {
              for (int64_t i = 0; i < cols; ++i)
                yr[i] = (xr[i] - mo.mean) * mo.rstd * gamma[i];
            }
          }
          narrowInto(ys, y + r0 * cols, len);
        }
      });
}

template <class T>
void layerNormGradT(const T *dy, const T *x, const float *gamma, T *dx,
                    float *dgamma, float *dbeta, int64_t rows, int64_t cols,
                    float eps) {
  const int64_t blocks = (rows + kBlock - 1) / kBlock;
  const int64_t run = rowRun<T>(cols);
  float *partGamma = scratch<float, 0>(blocks * cols);
  float *partBeta = dbeta ? scratch<float, 1>(blocks * cols) : nullptr;
  const float invCols = 1.0f / float(cols);

  parallelFor(
      blocks, std::max<int64_t>(1, kGrain / (kBlock * cols)),
      [&](int64_t b, int64_t e) {
        for (int64_t blk = b; blk < e; ++blk) {
          float *__restrict pg = partGamma + blk * cols;
          float *__restrict pb = dbeta ? partBeta + blk * cols : nullptr;
          for (int64_t i = 0; i < cols; ++i)
            pg[i] = 0.0f;
          if (pb)
            for (int64_t i = 0; i < cols; ++i)
              pb[i] = 0.0f;
          const int64_t blockEnd = std::min(rows, (blk + 1) * kBlock);
          for (int64_t r0 = blk * kBlock; r0 < blockEnd; r0 += run) {
            const int64_t len = (std::min(blockEnd, r0 + run) - r0) * cols;
            const float *xs = rowView<kX>(x + r0 * cols, len);
            const float *gs = rowView<kDy>(dy + r0 * cols, len);
            float *ds = rowOut<kOut>(dx + r0 * cols, len);
            for (int64_t k = 0; k < len; k += cols) {
              const float *__restrict xr = xs + k;
              const float *__restrict gr = gs + k;
              float *__restrict dr = ds + k;
              const Moments mo = rowMoments(xr, cols, eps);
              // dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy * gamma.
              const float sumG = rowSum32(
                  cols, [&](int64_t i) { return at8(gr + i) * at8(gamma + i); },
                  [&](int64_t i) { return gr[i] * gamma[i]; });
              const float sumGX = rowSum32(
                  cols,
                  [&](int64_t i) {
                    return (at8(gr + i) * at8(gamma + i)) * ((at8(xr + i) - mo.mean) * mo.rstd);
                  },
                  [&](int64_t i) { return (gr[i] * gamma[i]) * ((xr[i] - mo.mean) * mo.rstd); });
              const float meanG = sumG * invCols, meanGX = sumGX * invCols;
              for (int64_t i = 0; i < cols; ++i) {
                const float xhat = (xr[i] - mo.mean) * mo.rstd;
                dr[i] = mo.rstd * (gr[i] * gamma[i] - meanG - xhat * meanGX);
                pg[i] += gr[i] * xhat;
              }
              if (pb)
                for (int64_t i = 0; i < cols; ++i)
                  pb[i] += gr[i];
            }
            narrowInto(ds, dx + r0 * cols, len);
          }
        }
      });

  parallelFor(cols, std::max<int64_t>(16, kGrain / blocks),
              [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e; ++i)
                  dgamma[i] = 0.0f;
                for (int64_t blk = 0; blk < blocks; ++blk)
                  for (int64_t i = b; i < e; ++i)
                    dgamma[i] += partGamma[blk * cols + i];
                if (!dbeta)
                  return;
                for (int64_t i = b; i < e; ++i)
                  dbeta[i] = 0.0f;
                for (int64_t blk = 0; blk < blocks; ++blk)
                  for (int64_t i = b; i < e; ++i)
                    dbeta[i] += partBeta[blk * cols + i];
              });
}

} // namespace

void layerNorm(const float *x, const float *gamma, const float *beta, float *y,
               int64_t rows, int64_t cols, float eps) {
  layerNormT(x, gamma, beta, y, rows, cols, eps);
}
void layerNorm(const Bf16 *x, const float *gamma, const float *beta, Bf16 *y,
               int64_t rows, int64_t cols, float eps) {
  layerNormT(x, gamma, beta, y, rows, cols, eps);
}
void layerNorm(const Fp16 *x, const float *gamma, const float *beta, Fp16 *y,
               int64_t rows, int64_t cols, float eps) {
  layerNormT(x, gamma, beta, y, rows, cols, eps);
}

void layerNormGrad(const float *dy, const float *x, const float *gamma,
                   float *dx, float *dgamma, float *dbeta, int64_t rows,
                   int64_t cols, float eps) {
  layerNormGradT(dy, x, gamma, dx, dgamma, dbeta, rows, cols, eps);
}
void layerNormGrad(const Bf16 *dy, const Bf16 *x, const float *gamma, Bf16 *dx,
                   float *dgamma, float *dbeta, int64_t rows, int64_t cols,
                   float eps) {
  layerNormGradT(dy, x, gamma, dx, dgamma, dbeta, rows, cols, eps);
}
void layerNormGrad(const Fp16 *dy, const Fp16 *x, const float *gamma, Fp16 *dx,
                   float *dgamma, float *dbeta, int64_t rows, int64_t cols,
                   float eps) {
  layerNormGradT(dy, x, gamma, dx, dgamma, dbeta, rows, cols, eps);
}

} // namespace dsrt::cpu
