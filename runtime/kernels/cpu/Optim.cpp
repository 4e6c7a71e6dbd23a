//===- Optim.cpp - in-place Adam(W) and SGD steps
//--------------------------===//
//
// Single fused pass per parameter tensor, float arithmetic in the order of
// torch's CPU single-tensor implementations. The per-range loops take every
// scalar by value: the float stores could otherwise alias scalars captured
// by reference, which keeps GCC from vectorizing.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/common/AdamScalars.h"
#include "runtime/kernels/cpu/Internal.h"

#include <cmath>

namespace dsrt::cpu {
using namespace detail;

namespace {

void adamRange(float *__restrict p, const float *__restrict g,
               float *__restrict m, float *__restrict v, int64_t b, int64_t e,
               const kernels::AdamScalars s) {
  for (int64_t i = b; i < e; ++i)
    kernels::adamElement(p[i], g[i], m[i], v[i], s);
}

void sgdRange(float *__restrict p, const float *__restrict g,
              float *__restrict buf, int64_t b, int64_t e, const float lr,
              const float momentum, const float damp, const float wd,
              const bool nesterov, const bool firstStep) {
  if (!buf) {
    for (int64_t i = b; i < e; ++i)
      p[i] -= lr * (g[i] + wd * p[i]);
    return;
  }
  for (int64_t i = b; i < e; ++i) {
    const float grad = g[i] + wd * p[i];
    const float bi = firstStep ? grad : momentum * buf[i] + damp * grad;
    buf[i] = bi;
    p[i] -= lr * (nesterov ? grad + momentum * bi : bi);
  }
}

} // namespace

void adam(float *p, const float *g, float *m, float *v, int64_t n, float lr,
          float beta1, float beta2, float eps, float weightDecay,
          bool decoupled, bool biasCorrection, int64_t step) {
  const kernels::AdamScalars s =
      kernels::adamScalars(lr, beta1, beta2, eps, weightDecay, decoupled, biasCorrection, step);
  parallelFor(n, kGrain / 4,
              [&](int64_t b, int64_t e) { adamRange(p, g, m, v, b, e, s); });
}

void sgd(float *p, const float *g, float *buf, int64_t n, float lr,
         float momentum, float dampening, float weightDecay, bool nesterov,
         bool firstStep) {
  float *momentumBuf = momentum == 0.0f ? nullptr : buf;
  parallelFor(n, kGrain / 4, [&](int64_t b, int64_t e) {
    sgdRange(p, g, momentumBuf, b, e, lr, momentum, 1.0f - dampening,
             weightDecay, nesterov, firstStep);
  });
}

} // namespace dsrt::cpu
