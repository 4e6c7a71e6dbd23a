//===- Optim.cpp - in-place optimizer steps ------------------------------===//
//
// Single fused pass per parameter tensor, float arithmetic in the order of
// torch's CPU single-tensor implementations. The per-range loops take every
// scalar by value: the float stores could otherwise alias scalars captured
// by reference, which keeps GCC from vectorizing.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/common/AdamScalars.h"
#include "runtime/kernels/common/OptimElements.h"
#include "runtime/kernels/cpu/Internal.h"

#include <algorithm>
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

void lionRange(float *__restrict p, const float *__restrict g, float *__restrict m, int64_t b,
               int64_t e, const kernels::LionScalars s) {
  for (int64_t i = b; i < e; ++i)
    kernels::lionElement(p[i], g[i], m[i], s);
}

void adagradRange(float *__restrict p, const float *__restrict g, float *__restrict sum,
                  int64_t b, int64_t e, const float negClr, const float eps, const float wd) {
  for (int64_t i = b; i < e; ++i)
    kernels::adagradElement(p[i], g[i], sum[i], negClr, eps, wd);
}

/// LAMB's sums in fixed chunks, added in chunk order: the same on every
/// thread count.
constexpr int64_t kLambChunk = 1 << 14;

} // namespace

void lion(float *p, const float *g, float *m, int64_t n, float lr, float beta1, float beta2,
          float weightDecay) {
  const kernels::LionScalars s = kernels::lionScalars(lr, beta1, beta2, weightDecay);
  parallelFor(n, kGrain / 4, [&](int64_t b, int64_t e) { lionRange(p, g, m, b, e, s); });
}

void adagrad(float *p, const float *g, float *sum, int64_t n, float lr, float eps,
             float weightDecay, float lrDecay, int64_t step) {
  const float negClr = kernels::adagradNegClr(lr, lrDecay, step);
  parallelFor(n, kGrain / 4, [&](int64_t b, int64_t e) {
    adagradRange(p, g, sum, b, e, negClr, eps, weightDecay);
  });
}

void lambStats(const float *p, const float *g, const float *m, const float *v, int64_t n,
               float beta1, float beta2, float eps, float weightDecay, float sums[2]) {
  const kernels::LambScalars s = kernels::lambScalars(beta1, beta2, eps, weightDecay);
  const int64_t chunks = (n + kLambChunk - 1) / kLambChunk;
  double *part = scratch<double, 0>(2 * std::max<int64_t>(chunks, 1));
  parallelFor(chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      const int64_t lo = c * kLambChunk, hi = std::min(n, lo + kLambChunk);
      double w2 = 0.0, u2 = 0.0;
      for (int64_t i = lo; i < hi; ++i) {
        float mi = m[i], vi = v[i];
        const float u = kernels::lambUpdate(p[i], g[i], mi, vi, s);
        w2 += double(p[i]) * double(p[i]);
        u2 += double(u) * double(u);
      }
      part[2 * c] = w2;
      part[2 * c + 1] = u2;
    }
  });
  double w2 = 0.0, u2 = 0.0;
  for (int64_t c = 0; c < chunks; ++c) {
    w2 += part[2 * c];
    u2 += part[2 * c + 1];
  }
  sums[0] = float(w2);
  sums[1] = float(u2);
}

void lamb(float *p, const float *g, float *m, float *v, int64_t n, float lr, float beta1,
          float beta2, float eps, float weightDecay, bool biasCorrection, float maxCoeff,
          float minCoeff, int64_t step, const float sums[2]) {
  const kernels::LambScalars s = kernels::lambScalars(beta1, beta2, eps, weightDecay);
  const float scale = kernels::lambStepSize(lr, beta1, beta2, biasCorrection, step, sums[0],
                                            sums[1], minCoeff, maxCoeff);
  parallelFor(n, kGrain / 4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float u = kernels::lambUpdate(p[i], g[i], m[i], v[i], s);
      p[i] = p[i] - scale * u;
    }
  });
}

void onebitAdam(float *p, const float *g, float *m, float *v, const float *compressed,
                int64_t n, float lr, float beta1, float beta2, float eps, float weightDecay,
                OneBitPhase phase) {
  if (phase == OneBitPhase::Init)
    return;
  // DeepSpeed's tensor ops in their order, each rounded to float:
  // m.mul_(b1).add_(g, alpha=1-b1), v.mul_(b2).addcmul_(g, g, value=1-b2),
  // update = m / (v.sqrt() + eps) (+= wd p), p.add_(-lr * update).
  const float oneMinusB1 = float(1.0 - double(beta1)), oneMinusB2 = float(1.0 - double(beta2));
  const float negLr = -lr;
  const bool warmup = phase == OneBitPhase::Warmup;
  // One loop per case, without branches inside (so the compiler vectorizes).
  auto update = [&](float *__restrict pp, const float *__restrict mm,
                    const float *__restrict vv, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float root = std::sqrt(vv[i]), denom = root + eps;
      float u = mm[i] / denom;
      if (weightDecay > 0) { // loop-invariant: unswitched
        const float decay = weightDecay * pp[i];
        u = u + decay;
      }
      const float delta = negLr * u;
      pp[i] = pp[i] + delta;
    }
  };
  parallelFor(n, kGrain / 4, [&](int64_t b, int64_t e) {
    float *__restrict mm = m;
    float *__restrict vv = v;
    if (warmup) {
      for (int64_t i = b; i < e; ++i) {
        const float scaled = mm[i] * beta1, step = oneMinusB1 * g[i];
        mm[i] = scaled + step;
        const float scaled2 = vv[i] * beta2, term = oneMinusB2 * g[i] * g[i];
        vv[i] = scaled2 + term;
      }
    } else if (compressed) {
      for (int64_t i = b; i < e; ++i)
        mm[i] = compressed[i];
    } else {
      for (int64_t i = b; i < e; ++i) {
        const float scaled = mm[i] * beta1, step = oneMinusB1 * g[i];
        mm[i] = scaled + step;
      }
    }
    update(p, m, v, b, e);
  });
}

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
