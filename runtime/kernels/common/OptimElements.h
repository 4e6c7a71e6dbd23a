//===- OptimElements.h - one element of Lion, Adagrad and LAMB -*- C++ -*-===//
//
// The per-element arithmetic of DeepSpeed's FusedLion and FusedLamb and of
// torch.optim.Adagrad, in float in their kernels' order, for the CPU loops
// (cpu/Optim.cpp) and any device kernel that must agree with them.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_KERNELS_COMMON_OPTIMELEMENTS_H
#define DSRT_KERNELS_COMMON_OPTIMELEMENTS_H

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define DSRT_HOST_DEVICE __host__ __device__
#else
#define DSRT_HOST_DEVICE
#endif

namespace dsrt::kernels {

/// FusedLion (DeepSpeed edaa722 csrc/lion/multi_tensor_lion.cu):
/// c = b1 m + (1-b1) g; p = p (1 - lr wd) + (c > 0 ? -lr : lr);
/// m = b2 m + (1-b2) g. A c of 0 or NaN moves p by +lr, as there.
struct LionScalars {
  float beta1, beta2, c1, c2, lr, afterDecay;
};
inline LionScalars lionScalars(float lr, float beta1, float beta2, float weightDecay) {
  return {beta1, beta2, 1.0f - beta1, 1.0f - beta2, lr, 1.0f - lr * weightDecay};
}
DSRT_HOST_DEVICE inline void lionElement(float &p, float g, float &m, const LionScalars s) {
  const float c = s.beta1 * m + s.c1 * g;
  p = p * s.afterDecay + (c > 0.0f ? -s.lr : s.lr);
  m = s.beta2 * m + s.c2 * g;
}

/// torch.optim.Adagrad (_single_tensor_adagrad): g += wd p; sum += g^2;
/// p += -clr * g / (sqrt(sum) + eps), clr = lr / (1 + (step-1) lr_decay)
/// computed in double as Python does.
DSRT_HOST_DEVICE inline void adagradElement(float &p, float g, float &sum, float negClr,
                                            float eps, float weightDecay) {
  const float grad = g + weightDecay * p;
  const float s = sum + grad * grad;
  sum = s;
  p = p + negClr * (grad / (sqrtf(s) + eps));
}
inline float adagradNegClr(float lr, float lrDecay, int64_t step) {
  return float(-(double(lr) / (1.0 + double(step - 1) * double(lrDecay))));
}

/// FusedLamb (DeepSpeed edaa722 csrc/lamb/fused_lamb_cuda_kernel.cu, eps
/// outside the square root): the new moments and the update
/// u = m / (sqrt(v) + eps) + wd p, without bias correction.
struct LambScalars {
  float beta1, beta2, c1, c2, eps, weightDecay;
};
inline LambScalars lambScalars(float beta1, float beta2, float eps, float weightDecay) {
  return {beta1, beta2, 1.0f - beta1, 1.0f - beta2, eps, weightDecay};
}
DSRT_HOST_DEVICE inline float lambUpdate(float p, float g, float &m, float &v,
                                         const LambScalars s) {
  m = s.beta1 * m + s.c1 * g;
  v = s.beta2 * v + s.c2 * g * g;
  return m / (sqrtf(v) + s.eps) + s.weightDecay * p;
}
/// The step applied to u: lr * sqrt(1 - b2^t) / (1 - b1^t) (bias
/// correction, its factors rounded to float as FusedLamb's host code does)
/// times the trust ratio |p| / |u| clamped to [min, max], or 1 when either
/// norm is 0. sumP2 and sumU2 are the whole tensor's sums of squares.
inline float lambStepSize(float lr, float beta1, float beta2, bool biasCorrection, int64_t step,
                          double sumP2, double sumU2, float minCoeff, float maxCoeff) {
  float stepSize = lr;
  if (biasCorrection) {
    const float bc1 = float(1.0 - std::pow(double(beta1), double(step)));
    const float bc2 = float(1.0 - std::pow(double(beta2), double(step)));
    stepSize = lr * std::sqrt(bc2) / bc1;
  }
  const float wNorm = std::sqrt(float(sumP2)), uNorm = std::sqrt(float(sumU2));
  float coeff = 1.0f;
  if (wNorm != 0.0f && uNorm != 0.0f) {
    coeff = wNorm / uNorm;
    if (coeff > maxCoeff)
      coeff = maxCoeff;
    if (coeff < minCoeff)
      coeff = minCoeff;
  }
  return stepSize * coeff;
}

} // namespace dsrt::kernels

#undef DSRT_HOST_DEVICE

#endif // DSRT_KERNELS_COMMON_OPTIMELEMENTS_H
