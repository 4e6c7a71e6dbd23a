//===- AdamScalars.h - the per-step scalars of an Adam(W) update -*- C++ -*-===//
//
// A kernel contract shared by the CPU kernel (cpu/Optim.cpp) and the CUDA
// kernel (cuda/Kernels.cu), so that both fold the decay, the L2 term and
// the bias corrections the same way.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_KERNELS_COMMON_ADAMSCALARS_H
#define DSRT_KERNELS_COMMON_ADAMSCALARS_H

#include <cmath>
#include <cstdint>

namespace dsrt::kernels {

/// p' = p * decay; g' = g + l2 * p'; m = beta1 m + c1 g'; v = beta2 v +
/// c2 g'^2; p = p' - stepSize * m / (sqrt(v) / bc2Sqrt + eps).
struct AdamScalars {
  float beta1, beta2, c1, c2, eps, decay, l2, stepSize, bc2Sqrt;
};

/// step counts from 1; decoupled: AdamW (torch.optim.AdamW's decay of p).
inline AdamScalars adamScalars(float lr, float beta1, float beta2, float eps, float weightDecay,
                               bool decoupled, bool biasCorrection, int64_t step) {
  float bc1 = 1.0f, bc2Sqrt = 1.0f;
  if (biasCorrection) {
    bc1 = float(1.0 - std::pow(double(beta1), double(step)));
    bc2Sqrt = float(std::sqrt(1.0 - std::pow(double(beta2), double(step))));
  }
  return {beta1,
          beta2,
          1.0f - beta1,
          1.0f - beta2,
          eps,
          decoupled ? 1.0f - lr * weightDecay : 1.0f,
          decoupled ? 0.0f : weightDecay,
          lr / bc1,
          bc2Sqrt};
}

#ifdef __CUDACC__
#define DSRT_HOST_DEVICE __host__ __device__
#else
#define DSRT_HOST_DEVICE
#endif

/// One element's update, in the order of torch's single-tensor Adam: the
/// CPU loop and the CUDA kernel both run exactly this.
DSRT_HOST_DEVICE inline void adamElement(float &p, float g, float &m, float &v,
                                         const AdamScalars s) {
  const float param = p * s.decay;
  const float grad = g + s.l2 * param;
  const float mi = s.beta1 * m + s.c1 * grad;
  const float vi = s.beta2 * v + s.c2 * grad * grad;
  m = mi;
  v = vi;
  p = param - s.stepSize * (mi / (sqrtf(vi) / s.bc2Sqrt + s.eps));
}

#undef DSRT_HOST_DEVICE

} // namespace dsrt::kernels

#endif // DSRT_KERNELS_COMMON_ADAMSCALARS_H
