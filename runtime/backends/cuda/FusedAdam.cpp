//===- FusedAdam.cpp - the fused optimizer step on the device, composed ---===//
//
// train.clip_coef and train.fused_adam (plan/Instructions.h) bound to the
// kernels the unfused clip_grad_norm and adam run on: the sum of squares
// per gradient, the decision on the host (OpsInternal.h's, the CPU's),
// and per parameter the Adam kernel over a float32 gradient. A bf16
// gradient is widened into the call's scratch first, and with a factor
// the gradient is multiplied by it there (the binary kernel against the
// factor's one element), so the gradient itself is never written. A
// multi-tensor kernel (one launch for every parameter) belongs to the GPU
// work; this keeps fused plans on the device with the CPU's arithmetic.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/DeviceState.h"

#include <algorithm>

namespace dsrt {
namespace {
using namespace ops;

/// The gradients: every input but the sum of squares and the loss scale.
size_t gradients(const Instr &i) { return i.in.size() - size_t(i.g[0]) - size_t(i.g[1]); }

void runClipCoef(const Instr &i, Context &ctx) {
  DeviceState &g = *ctx.gpu;
  const size_t n = gradients(i);
  double sq = 0;
  if (i.g[0]) {
    cuda::copyToHost(i.in[n]->data, i.in[n]->dev, sizeof(float));
    sq = *i.in[n]->f32();
  } else {
    cuda::zero(g.sumSq, sizeof(double));
    float *wide = static_cast<float *>(g.scratch);
    for (size_t k = 0; k < n; ++k) {
      const Tensor *t = i.in[k];
      const float *x = static_cast<const float *>(t->dev);
      if (t->dtype == plan::BF16) { // widened exactly: the float32 cast's squares
        cuda::cast(static_cast<const cpu::Bf16 *>(t->dev), wide, t->numel);
        x = wide;
      }
      cuda::sumSquares(x, t->numel, g.sumSq);
    }
    cuda::copyToHost(&sq, g.sumSq, sizeof sq); // waits for the backward pass
  }
  if (i.g[1])
    cuda::copyToHost(i.in[n + i.g[0]]->data, i.in[n + i.g[0]]->dev, sizeof(float));
  clipCoef(i, ctx, sq);
  for (const Tensor *out : i.out)
    cuda::copyToDevice(out->dev, out->data, sizeof(float));
}

void runFusedAdam(const Instr &i, Context &ctx) {
  if (ctx.overflow) // fp16: the loss scaler skips this step
    return;
  const size_t n = fusedParameters(i, 3);
  // Parameter k's bf16 working copy, where it has one.
  std::vector<Tensor *> copy(n, nullptr);
  for (size_t j = 3; j < i.ints.size(); ++j)
    copy[size_t(i.ints[j])] = i.out[3 * n + (j - 3)];
  const bool coef = i.ints[2] != 0;
  const float *factor = coef ? static_cast<const float *>(i.in[4 * n + 2]->dev) : nullptr;
  float *wide = static_cast<float *>(ctx.gpu->scratch);
  auto [beta1, beta2] = stepBetas(i, ctx);
  for (size_t k = 0; k < n; ++k) {
    const Tensor *g = i.in[n + k];
    const float *grad = static_cast<const float *>(g->dev);
    if (g->dtype == plan::BF16) {
      cuda::cast(static_cast<const cpu::Bf16 *>(g->dev), wide, g->numel);
      grad = wide;
    }
    if (factor) { // the clipped gradient, where clip_grad_norm wrote it
      cuda::binary(kernels::Binary::Mul, grad, factor, 1, wide, g->numel, 1);
      grad = wide;
    }
    cuda::adam(static_cast<float *>(i.out[k]->dev), grad,
               static_cast<float *>(i.out[n + k]->dev),
               static_cast<float *>(i.out[2 * n + k]->dev), g->numel, *i.in[4 * n]->f32(), beta1,
               beta2, (float)i.floats[2], (float)i.floats[3], i.ints[0] != 0, i.ints[1] != 0,
               *i.in[4 * n + 1]->i64());
    if (copy[k]) // the cast nn.cast would make of the new value
      cuda::cast(static_cast<const float *>(i.out[k]->dev),
                 static_cast<cpu::Bf16 *>(copy[k]->dev), g->numel);
  }
}

/// The scratch for the widest gradient widened or scaled, when any is.
size_t widest(const std::vector<Tensor *> &grads, bool always) {
  size_t bytes = 0;
  for (const Tensor *g : grads)
    if (always || g->dtype != plan::F32)
      bytes = std::max(bytes, size_t(g->numel) * sizeof(float));
  return bytes;
}

void refuseF16(const std::vector<Tensor *> &ts, const std::string &where) {
  for (const Tensor *t : ts)
    if (t->dtype == plan::F16)
      throw DeviceUnsupported(where + ": no CUDA kernels for F16 yet (fp16 plans run on the CPU)");
}

} // namespace

size_t bindCudaClipCoef(Instr &i, const std::string &where) {
  refuseF16(i.in, where);
  i.run = runClipCoef;
  const size_t n = gradients(i);
  return widest({i.in.begin(), i.in.begin() + long(n)}, false);
}

size_t bindCudaFusedAdam(Instr &i, const std::string &where) {
  const size_t n = fusedParameters(i, 3);
  const std::vector<Tensor *> grads(i.in.begin() + long(n), i.in.begin() + long(2 * n));
  refuseF16(grads, where);
  refuseF16({i.out.begin() + long(3 * n), i.out.end()}, where);
  i.run = runFusedAdam;
  return widest(grads, i.ints[2] != 0);
}

} // namespace dsrt
