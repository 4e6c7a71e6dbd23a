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

/// Biased mean and 1/sqrt(var + eps) of a row, two-pass in float.
Moments rowMoments(const float *x, int64_t n, float eps) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i)
    s += x[i];
  const float mean = s / float(n);
  float q = 0.0f;
#pragma omp simd reduction(+ : q)
  for (int64_t i = 0; i < n; ++i)
    q += (x[i] - mean) * (x[i] - mean);
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
              float sumG = 0.0f, sumGX = 0.0f;
#pragma omp simd reduction(+ : sumG, sumGX)
              for (int64_t i = 0; i < cols; ++i) {
                const float g = gr[i] * gamma[i];
                sumG += g;
                sumGX += g * ((xr[i] - mo.mean) * mo.rstd);
              }
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
