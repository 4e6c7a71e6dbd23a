//===- Norm.cpp - layer norm forward and backward -------------------------===//
//
// The backward pass sums dgamma/dbeta over fixed blocks of kBlock rows
// (partials in scratch) and then over the blocks in order, so the result
// does not depend on the thread count while x and dy are read only once.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Internal.h"

#include <cmath>

namespace dsrt::cpu {
using namespace detail;

namespace {

constexpr int64_t kBlock = 32;

struct Moments {
  float mean, rstd;
};

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

} // namespace

void layerNorm(const float *x, const float *gamma, const float *beta, float *y,
               int64_t rows, int64_t cols, float eps) {
  parallelFor(rows, std::max<int64_t>(1, kGrain / cols),
              [&](int64_t b, int64_t e) {
                for (int64_t r = b; r < e; ++r) {
                  const float *__restrict xr = x + r * cols;
                  float *__restrict yr = y + r * cols;
                  const Moments mo = rowMoments(xr, cols, eps);
                  if (beta) {
                    for (int64_t i = 0; i < cols; ++i)
                      yr[i] = (xr[i] - mo.mean) * mo.rstd * gamma[i] + beta[i];
                  } else {
                    for (int64_t i = 0; i < cols; ++i)
                      yr[i] = (xr[i] - mo.mean) * mo.rstd * gamma[i];
                  }
                }
              });
}

void layerNormGrad(const float *dy, const float *x, const float *gamma,
                   float *dx, float *dgamma, float *dbeta, int64_t rows,
                   int64_t cols, float eps) {
  const int64_t blocks = (rows + kBlock - 1) / kBlock;
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
          for (int64_t r = blk * kBlock; r < std::min(rows, (blk + 1) * kBlock);
               ++r) {
            const float *__restrict xr = x + r * cols;
            const float *__restrict gr = dy + r * cols;
            float *__restrict dr = dx + r * cols;
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

} // namespace dsrt::cpu
