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
#include "runtime/kernels/cpu/Half.h"
#include "runtime/kernels/cpu/Internal.h"
#include "plan/StepRule.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

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
/// LAMB's partial sums per chunk: kLanes divides kLambChunk and the
/// gradient blocks' 512 elements (16 lanes measured no faster than 8).
constexpr int kLanes = 8;

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

// One tensor's LAMB is the fused kernels' on it (which only read p, m and v
// for the sums).
void lambStats(const float *p, const float *g, const float *m, const float *v, int64_t n,
               float beta1, float beta2, float eps, float weightDecay, float sums[2]) {
  const AdamTensor t{const_cast<float *>(p), g, AdamTensor::Grad::F32, const_cast<float *>(m),
                     const_cast<float *>(v), n};
  float *const out[] = {sums};
  fusedLambStats(&t, 1, 1.0f, beta1, beta2, eps, weightDecay, out);
}

void lamb(float *p, const float *g, float *m, float *v, int64_t n, float lr, float beta1,
          float beta2, float eps, float weightDecay, bool biasCorrection, float maxCoeff,
          float minCoeff, int64_t step, const float sums[2]) {
  const AdamTensor t{p, g, AdamTensor::Grad::F32, m, v, n};
  const float *const in[] = {sums};
  fusedLamb(&t, 1, in, 1.0f, lr, beta1, beta2, eps, weightDecay, biasCorrection, maxCoeff,
            minCoeff, step);
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

namespace {
/// sqrt(sum x^2) of float32 values, rounded to float (torch's
/// x.pow(2).sum().sqrt() on a float32 tensor, to its rounding).
template <typename F> float norm2(int64_t n, F &&value) {
  double sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const double x = value(i);
    sum += x * x;
  }
  return float(std::sqrt(sum));
}
} // namespace

namespace {
/// One element of 1-bit LAMB's compressed step, in DeepSpeed's order: the
/// new momentum (the compressed one over its scale, or on one rank
/// ((b1 m + (1-b1) g) scale) / scale), the fresh variance from the gradient
/// it implies, u0 = m / (sqrt(v) + eps), u = u0 (+ wd p), and
/// (sqrt(v) + eps) / (sqrt(v_fresh) + eps).
struct LambElement {
  float m, vFresh, prelim, u, ratio;
};
inline LambElement lambCompressed(float old, float g, const float *compressed, float v,
                                  float vFresh, float p, float scale,
                                  const OneBitLambParams &a) {
  const float b1 = a.beta1, oneMinusB1 = float(1.0 - double(a.beta1)),
              oneMinusB2 = float(1.0 - double(a.beta2));
  LambElement e;
  if (compressed) {
    e.m = *compressed / scale;
  } else {
    const float scaled = old * b1, step = oneMinusB1 * g;
    e.m = ((scaled + step) * scale) / scale;
  }
  const float rec = (e.m - old * b1) / oneMinusB1;
  const float scaled2 = vFresh * a.beta2, term = oneMinusB2 * rec * rec;
  e.vFresh = scaled2 + term;
  const float denom = std::sqrt(v) + a.eps;
  e.prelim = e.m / denom;
  e.u = e.prelim;
  if (a.weightDecay > 0) {
    const float decay = a.weightDecay * p;
    e.u = e.prelim + decay;
  }
  e.ratio = denom / (std::sqrt(e.vFresh) + a.eps);
  return e;
}
} // namespace

void onebitLamb(float *p, const float *g, float *m, float *v, float *vFresh,
                float *lambCoeffFreeze, float *lastFactor, float scalingCoeff,
                const float *compressed, int64_t n, const OneBitLambParams &a, OneBitPhase phase,
                bool freezeNow, bool firstCompressed, const float *stats) {
  if (phase == OneBitPhase::Init)
    return;
  const float oneMinusB1 = float(1.0 - double(a.beta1)),
              oneMinusB2 = float(1.0 - double(a.beta2));
  const float eps = a.eps, wd = a.weightDecay;
  auto update = [&](int64_t i) { // m / (sqrt(v) + eps) (+ wd p), DeepSpeed's u
    float u = m[i] / (std::sqrt(v[i]) + eps);
    if (wd > 0) {
      const float decay = wd * p[i];
      u = u + decay;
    }
    return u;
  };
  if (phase == OneBitPhase::Warmup) {
    parallelFor(n, kGrain / 4, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const float scaled = m[i] * a.beta1, step = oneMinusB1 * g[i];
        m[i] = scaled + step;
        const float scaled2 = v[i] * a.beta2, term = oneMinusB2 * g[i] * g[i];
        v[i] = scaled2 + term;
        if (freezeNow)
          vFresh[i] = v[i];
      }
    });
    // One flat tensor's (stats: every tensor's), or this tensor's.
    const float weightNorm =
        stats ? std::sqrt(stats[0]) : norm2(n, [&](int64_t i) { return p[i]; });
    const float updateNorm = stats ? std::sqrt(stats[1]) : norm2(n, update);
    double coeff = 1.0;
    if (weightNorm != 0 && updateNorm != 0)
      coeff = std::min(std::max(double(weightNorm / updateNorm), a.minCoeff), a.maxCoeff);
    if (coeff != 1.0)
      *lambCoeffFreeze =
          float(a.coeffBeta * double(*lambCoeffFreeze) + (1 - a.coeffBeta) * coeff);
    const float scale = float(-double(a.lr) * coeff);
    parallelFor(n, kGrain / 4, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        p[i] = p[i] + scale * update(i);
    });
    return;
  }
  // Compressed: the new momentum, the fresh variance from the gradient it
  // implies, and the factor's reductions (max of denom / denom_real, the
  // norms of u0 and u), in one pass.
  float factorMax = 0;
  double prelimSq = 0, updateSq = 0;
#pragma omp parallel for reduction(max : factorMax) reduction(+ : prelimSq, updateSq) \
    schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const LambElement e = lambCompressed(m[i], g[i], compressed ? compressed + i : nullptr,
                                         v[i], vFresh[i], p[i], scalingCoeff, a);
    m[i] = e.m;
    vFresh[i] = e.vFresh;
    prelimSq += double(e.prelim) * e.prelim;
    updateSq += double(e.u) * e.u;
    factorMax = std::max(factorMax, e.ratio);
  }
  if (stats) { // every tensor's, as one flat tensor's
    factorMax = stats[0];
    prelimSq = stats[1];
    updateSq = stats[2];
  }
  double factor = factorMax;
  if (wd > 0) {
    const double ratio =
        std::min(1.0, double(float(std::sqrt(prelimSq)) / float(std::sqrt(updateSq))));
    factor = factor * ratio + (1.0 - ratio);
  }
  const double last = firstCompressed ? 1.0 : double(*lastFactor);
  factor = std::min(std::max(factor, a.factorMin), a.factorMax);
  factor = std::min(factor, last * (1.0 + a.factorThreshold));
  factor = std::max(factor, last * (1.0 - a.factorThreshold));
  *lastFactor = float(factor);
  const float scale = float(-double(a.lr) * (double(*lambCoeffFreeze) * factor));
  parallelFor(n, kGrain / 4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      p[i] = p[i] + scale * update(i);
  });
}

void onebitLambStats(const float *p, const float *g, const float *m, const float *v,
                     const float *vFresh, const float *compressed, int64_t n,
                     const OneBitLambParams &a, OneBitPhase phase, double stats[3]) {
  if (phase == OneBitPhase::Init)
    return;
  const float b1 = a.beta1, oneMinusB1 = float(1.0 - double(a.beta1)),
              oneMinusB2 = float(1.0 - double(a.beta2));
  const float eps = a.eps, wd = a.weightDecay;
  double first = 0, second = 0;
  float ratio = float(stats[0]);
  if (phase == OneBitPhase::Warmup) {
#pragma omp parallel for reduction(+ : first, second) schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) {
      const float scaled = m[i] * b1, step = oneMinusB1 * g[i];
      const float mi = scaled + step;
      const float scaled2 = v[i] * a.beta2, term = oneMinusB2 * g[i] * g[i];
      const float vi = scaled2 + term;
      float u = mi / (std::sqrt(vi) + eps);
      if (wd > 0) {
        const float decay = wd * p[i];
        u = u + decay;
      }
      first += double(p[i]) * p[i];
      second += double(u) * u;
    }
    stats[0] += first;
    stats[1] += second;
    return;
  }
  double third = 0;
#pragma omp parallel for reduction(max : ratio) reduction(+ : second, third) schedule(static) \
    if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const LambElement e = lambCompressed(m[i], g[i], compressed ? compressed + i : nullptr,
                                         v[i], vFresh[i], p[i], 1.0f, a);
    second += double(e.prelim) * e.prelim;
    third += double(e.u) * e.u;
    ratio = std::max(ratio, e.ratio);
  }
  stats[0] = ratio;
  stats[1] += second;
  stats[2] += third;
}

void onebitLambScaling(const float *const *m, const int64_t *n, int k, float *coeff) {
  std::vector<double> scales(static_cast<size_t>(k));
  double sum = 0;
  for (int j = 0; j < k; ++j) {
    const float *mj = m[j];
    const float norm = norm2(n[j], [&](int64_t i) { return mj[i]; });
    scales[size_t(j)] = double(norm / float(std::sqrt(double(n[j]))));
    sum += scales[size_t(j)];
  }
  const double united = sum / k;
  for (int j = 0; j < k; ++j)
    coeff[j] = float(united / scales[size_t(j)]);
}

namespace {
/// 0/1 Adam's local step on element i: m = b1 m + (1-b1) g, then
/// DeepSpeed's `update = m / (sqrt(v) + eps)` (+= wd p) and the delta
/// `-lr * update` that both p and u take. Returns the delta.
struct ZeroOneLocal {
  float beta1, oneMinusB1, negLr, eps, weightDecay;
  float step(float p, float g, float &m, float v) const {
    const float scaled = m * beta1, term = oneMinusB1 * g;
    m = scaled + term;
    const float denom = std::sqrt(v) + eps;
    float upd = m / denom;
    if (weightDecay > 0) {
      const float decay = weightDecay * p;
      upd = upd + decay;
    }
    return negLr * upd;
  }
};
} // namespace

void zeroOneAdam(float *p, const float *g, float *m, float *v, float *u, float *lrs,
                 const float *compressed, int64_t n, float lr, float beta1, float beta2,
                 float eps, float weightDecay, uint32_t cls) {
  if (cls & kStepInit)
    return;
  const float oneMinusB1 = float(1.0 - double(beta1)), oneMinusB2 = float(1.0 - double(beta2));
  const ZeroOneLocal local{beta1, oneMinusB1, -lr, eps, weightDecay};
  if (cls & kStepLocal) {
    // lrs += lr (DeepSpeed sums them in double; here in float).
    const float sum = *lrs + lr;
    const bool sync = cls & kStepSync;
    parallelFor(n, kGrain / 4, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const float delta = local.step(p[i], g[i], m[i], v[i]);
        p[i] = p[i] + delta;
        u[i] = u[i] + delta;
        if (!sync)
          continue;
        // p -= u; c = C(u (sqrt(v) + eps)); m = -c / lrs; p += c / (sqrt(v) + eps).
        const float denom = std::sqrt(v[i]) + eps;
        const float c = compressed ? compressed[i] : u[i] * denom;
        p[i] = p[i] + (-1.0f * u[i]);
        m[i] = -(c / sum);
        p[i] = p[i] + c / denom;
        u[i] = 0;
      }
    });
    *lrs = sync ? 0.0f : sum;
    return;
  }
  const bool variance = cls & kStepVariance;
  parallelFor(n, kGrain / 4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if (variance) {
        const float scaled = m[i] * beta1, term = oneMinusB1 * g[i];
        m[i] = scaled + term;
        const float scaled2 = v[i] * beta2, term2 = oneMinusB2 * g[i] * g[i];
        v[i] = scaled2 + term2;
      } else if (compressed) { // one rank: m stays (DeepSpeed compresses only with several)
        const float scaled = m[i] * beta1, term = oneMinusB1 * compressed[i];
        m[i] = scaled + term;
      }
      const float denom = std::sqrt(v[i]) + eps;
      float upd = m[i] / denom;
      if (weightDecay > 0) {
        const float decay = weightDecay * p[i];
        upd = upd + decay;
      }
      p[i] = p[i] + (-lr) * upd;
    }
  });
}

void zeroOnePayload(float *out, const float *p, const float *g, const float *m, const float *v,
                    const float *u, int64_t n, float lr, float beta1, float eps,
                    float weightDecay, uint32_t cls) {
  if (!(cls & kStepSync)) {
    if (out != g)
      std::memcpy(out, g, size_t(n) * sizeof(float));
    return;
  }
  const ZeroOneLocal local{beta1, float(1.0 - double(beta1)), -lr, eps, weightDecay};
  parallelFor(n, kGrain / 4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float mm = m[i];
      const float delta = local.step(p[i], g[i], mm, v[i]);
      const float acc = u[i] + delta;
      out[i] = acc * (std::sqrt(v[i]) + eps);
    }
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

namespace {
/// The working copy of t's elements [o, o + len), from their new values
/// (in L1: the update just wrote them).
void writeCopy(const AdamTensor &t, int64_t o, int64_t len) {
  if (t.copyType == AdamTensor::Copy::BF16)
    detail::convert(t.p + o, static_cast<Bf16 *>(t.copy) + o, len);
  else if (t.copyType == AdamTensor::Copy::F16)
    detail::convert(t.p + o, static_cast<Fp16 *>(t.copy) + o, len);
}

/// Calls f(o, len, gs) for consecutive pieces [o, o + len) of [b, e) of
/// tensor t's gradient, gs holding them as float (widened, and multiplied
/// by gradScale unless it is 1). A widened or scaled gradient goes through
/// a block in L1 first: computed in the update's expression, the product
/// could be contracted into an FMA with the L2 term, which rounds
/// differently from the clipped gradient the unfused update reads. A float
/// gradient read as it is comes whole, unless a working copy is written
/// behind the update (then in blocks, so that the copy reads the new
/// values from L1).
template <class F>
void gradientBlocks(const AdamTensor &t, int64_t b, int64_t e, float gradScale, F &&f) {
  auto blocks = [&](const auto *g) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(g)>>;
    if (std::is_same_v<T, float> && gradScale == 1.0f && !t.copy)
      return f(b, e - b, reinterpret_cast<const float *>(g) + b);
    constexpr int64_t kBlock = 512;
    alignas(64) float gs[kBlock];
    for (int64_t o = b; o < e; o += kBlock) {
      const int64_t len = std::min(kBlock, e - o);
      if (gradScale == 1.0f)
        for (int64_t i = 0; i < len; ++i)
          gs[i] = detail::toFloat(g[o + i]);
      else
        for (int64_t i = 0; i < len; ++i)
          gs[i] = detail::toFloat(g[o + i]) * gradScale;
      f(o, len, static_cast<const float *>(gs));
    }
  };
  switch (t.grad) {
  case AdamTensor::Grad::F32:
    return blocks(static_cast<const float *>(t.g));
  case AdamTensor::Grad::BF16:
    return blocks(static_cast<const Bf16 *>(t.g));
  case AdamTensor::Grad::F16:
    return blocks(static_cast<const Fp16 *>(t.g));
  }
}

/// The first element of each tensor of `t` end to end, and the total.
std::vector<int64_t> tensorStarts(const AdamTensor *t, size_t count,
                                  int64_t (*size)(const AdamTensor &)) {
  std::vector<int64_t> start(count + 1, 0);
  for (size_t k = 0; k < count; ++k)
    start[k + 1] = start[k] + size(t[k]);
  return start;
}

/// The tensor of `start` (tensorStarts) that element x falls in.
size_t tensorAt(const std::vector<int64_t> &start, int64_t x) {
  return size_t(std::upper_bound(start.begin(), start.end(), x) - start.begin()) - 1;
}

/// f(tensor, k, lo, hi) for the pieces [lo, hi) of tensor k that make up
/// the elements of all of `t`'s tensors, end to end, split across the
/// threads.
template <class F> void forEachElementRange(const AdamTensor *t, size_t count, F &&f) {
  const std::vector<int64_t> start =
      tensorStarts(t, count, [](const AdamTensor &x) { return x.n; });
  parallelFor(start[count], kGrain / 4, [&](int64_t b, int64_t e) {
    for (size_t k = tensorAt(start, b); k < count && start[k] < e; ++k) {
      const int64_t lo = std::max(b, start[k]) - start[k], hi = std::min(e, start[k + 1]) - start[k];
      if (lo < hi)
        f(t[k], k, lo, hi);
    }
  });
}
} // namespace

void fusedAdam(const AdamTensor *t, size_t count, float gradScale, float lr, float beta1,
               float beta2, float eps, float weightDecay, bool decoupled, bool biasCorrection,
               int64_t step) {
  const kernels::AdamScalars s =
      kernels::adamScalars(lr, beta1, beta2, eps, weightDecay, decoupled, biasCorrection, step);
  forEachElementRange(t, count, [&](const AdamTensor &a, size_t, int64_t lo, int64_t hi) {
    gradientBlocks(a, lo, hi, gradScale, [&](int64_t o, int64_t len, const float *g) {
      float *__restrict p = a.p + o, *__restrict m = a.m + o, *__restrict v = a.v + o;
      for (int64_t i = 0; i < len; ++i)
        kernels::adamElement(p[i], g[i], m[i], v[i], s);
      writeCopy(a, o, len);
    });
  });
}

void fusedLambStats(const AdamTensor *t, size_t count, float gradScale, float beta1,
                    float beta2, float eps, float weightDecay, float *const *sums) {
  const kernels::LambScalars s = kernels::lambScalars(beta1, beta2, eps, weightDecay);
  // lambStats' chunks of every tensor end to end: chunk c of tensor k is
  // global chunk first[k] + c, its sums part[2 x] and part[2 x + 1].
  const std::vector<int64_t> first = tensorStarts(t, count, [](const AdamTensor &x) {
    return std::max<int64_t>((x.n + kLambChunk - 1) / kLambChunk, 1);
  });
  double *part = scratch<double, 0>(2 * size_t(first[count]));
  parallelFor(first[count], 1, [&](int64_t b, int64_t e) {
    for (int64_t x = b; x < e; ++x) {
      const size_t k = tensorAt(first, x);
      const AdamTensor &a = t[k];
      const int64_t lo = (x - first[k]) * kLambChunk, hi = std::min(a.n, lo + kLambChunk);
      // kLanes sums of every kLanes-th element (from the chunk's first;
      // the gradient's blocks start at multiples of kLanes), added in lane
      // order at the end: vectorizable, and the same on every thread count.
      alignas(64) double w2[kLanes] = {}, u2[kLanes] = {};
      gradientBlocks(a, lo, hi, gradScale, [&](int64_t o, int64_t len, const float *g) {
        const float *p = a.p + o, *m = a.m + o, *v = a.v + o;
        int64_t i = 0;
        for (; i + kLanes <= len; i += kLanes)
          for (int j = 0; j < kLanes; ++j) {
            float mi = m[i + j], vi = v[i + j];
            const float u = kernels::lambUpdate(p[i + j], g[i + j], mi, vi, s);
            w2[j] += double(p[i + j]) * double(p[i + j]);
            u2[j] += double(u) * double(u);
          }
        for (int j = 0; i < len; ++i, ++j) {
          float mi = m[i], vi = v[i];
          const float u = kernels::lambUpdate(p[i], g[i], mi, vi, s);
          w2[j] += double(p[i]) * double(p[i]);
          u2[j] += double(u) * double(u);
        }
      });
      part[2 * x] = part[2 * x + 1] = 0.0;
      for (int j = 0; j < kLanes; ++j) {
        part[2 * x] += w2[j];
        part[2 * x + 1] += u2[j];
      }
    }
  });
  for (size_t k = 0; k < count; ++k) {
    double w2 = 0.0, u2 = 0.0;
    for (int64_t x = first[k]; x < first[k + 1]; ++x) {
      w2 += part[2 * x];
      u2 += part[2 * x + 1];
    }
    sums[k][0] = float(w2);
    sums[k][1] = float(u2);
  }
}

void fusedLamb(const AdamTensor *t, size_t count, const float *const *sums, float gradScale,
               float lr, float beta1, float beta2, float eps, float weightDecay,
               bool biasCorrection, float maxCoeff, float minCoeff, int64_t step) {
  const kernels::LambScalars s = kernels::lambScalars(beta1, beta2, eps, weightDecay);
  std::vector<float> scale(count);
  for (size_t k = 0; k < count; ++k)
    scale[k] = kernels::lambStepSize(lr, beta1, beta2, biasCorrection, step, sums[k][0],
                                     sums[k][1], minCoeff, maxCoeff);
  forEachElementRange(t, count, [&](const AdamTensor &a, size_t k, int64_t lo, int64_t hi) {
    const float step = scale[k];
    gradientBlocks(a, lo, hi, gradScale, [&](int64_t o, int64_t len, const float *g) {
      float *__restrict p = a.p + o, *__restrict m = a.m + o, *__restrict v = a.v + o;
      for (int64_t i = 0; i < len; ++i) {
        const float u = kernels::lambUpdate(p[i], g[i], m[i], v[i], s);
        p[i] = p[i] - step * u;
      }
      writeCopy(a, o, len);
    });
  });
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
