//===- Attention.cpp - nn.attention on the device, from existing kernels ---===//
//
// The fused attention instructions (plan/Instructions.h) bound to the CUDA
// kernels the unfused chain already runs on: a cuBLAS GEMM for the scores
// [heads, T, S] into the call's scratch, the scale (and the additive bias)
// by the binary kernels, the causal flags and the masked softmax of
// FuseSoftmax's chains, dropout with nn.dropout's bits, and a GEMM with the
// values. The scores live in the scratch for the call only, as the CPU
// kernel's live in per-thread scratch: the arena keeps no [T, S] tensor
// and the backward recomputes the probabilities from query and key (the
// stats output is zeroed, not read). All of it runs in float32; bf16
// operands are widened into the scratch and the result and gradients
// rounded once, the CPU kernel's contract (runtime/kernels/cpu/
// Attention.cpp). This is the composition that keeps fused plans on the
// GPU; the fast kernels (cuDNN's fused attention, FlashAttention's tiles)
// belong to the GPU work. A bshd call (operands [..., T, H, E], the
// projections' layout) permutes its operands into head-major scratch and
// its results back, as the permutes the CPU kernel's gather replaces did.
// Not on the device: a tensor-parallel part (tp plans are for several
// ranks, which --device cuda does not run yet) and fp16.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/DeviceState.h"

#include <limits>
#include <vector>

namespace dsrt {
namespace {
using namespace ops;
using Shape = decltype(Tensor::shape);

/// The call's shapes, head-major: query [..., T, E], key [..., S, E], value
/// [..., S, F], the scores [..., T, S] and the result [..., T, F] (a bshd
/// call's operands are [..., T, H, E]: these are their permutes).
struct Geometry {
  int64_t heads = 0, T = 0, S = 0, E = 0, F = 0;
  bool half = false, causal = false, divides = false, mayDrop = false, bshd = false;
  const Tensor *bias = nullptr;
  Shape qs, ks, vs, ss, os;
  int64_t scores() const { return heads * T * S; }
};

/// A bshd operand's shape [..., T, H, E] as [..., H, T, E] (and back);
/// others as they are.
Shape headMajor(const Geometry &g, Shape s) {
  if (g.bshd)
    std::swap(s.dims[s.rank - 3], s.dims[s.rank - 2]);
  return s;
}

Geometry geometryOf(const Instr &i, bool grad) {
  const int o = grad ? 1 : 0;
  const Tensor *q = i.in[o], *k = i.in[o + 1], *v = i.in[o + 2];
  Geometry g;
  const int r = q->shape.rank;
  g.bshd = i.ints[3] != 0;
  g.qs = headMajor(g, q->shape), g.ks = headMajor(g, k->shape), g.vs = headMajor(g, v->shape);
  g.T = g.qs.dims[r - 2], g.E = g.qs.dims[r - 1];
  g.S = g.ks.dims[r - 2], g.F = g.vs.dims[r - 1];
  g.heads = q->shape.numel() / std::max<int64_t>(g.T * g.E, 1);
  g.ss = g.qs, g.ss.dims[r - 1] = g.S;
  g.os = g.qs, g.os.dims[r - 1] = g.F;
  g.half = q->dtype == plan::BF16;
  g.divides = i.ints[0] != 0, g.causal = i.ints[1] != 0;
  g.mayDrop = i.floats[1] > 0;
  const size_t biasAt = grad ? 5 : 3;
  g.bias = i.in.size() > biasAt ? i.in[biasAt] : nullptr;
  return g;
}

/// The call's scratch carved in order, each region 256-byte aligned; with
/// a null base it only counts the bytes.
struct Carver {
  char *base = nullptr;
  size_t used = 0;
  template <class T> T *take(int64_t n) {
    const size_t at = (used + 255) / 256 * 256;
    used = at + size_t(std::max<int64_t>(n, 1)) * sizeof(T);
    return base ? reinterpret_cast<T *>(base + at) : nullptr;
  }
};

/// Float views of the operands (the tensors themselves in a float32 plan,
/// widened copies of bf16 ones) and the work buffers.
struct Buffers {
  float *q = nullptr, *k = nullptr, *v = nullptr, *dO = nullptr;
  float *out = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;
  float *x = nullptr, *p = nullptr, *pd = nullptr, *d = nullptr;
  float *scalars = nullptr; // the scale, -inf (the mask's fill) and 0
  uint8_t *mask = nullptr, *cond = nullptr;
  cpu::Bf16 *permuted = nullptr; // a bf16 bshd operand or result, permuted
};

/// Carves the buffers of forward (`grad` false) or backward; a head-major
/// float operand is used in place.
Buffers carve(Carver &c, const Geometry &g, const Instr &i, bool grad) {
  Buffers b;
  auto view = [&](const Tensor *t, int64_t n) {
    return g.half || g.bshd ? c.take<float>(n) : static_cast<float *>(t->dev);
  };
  const int o = grad ? 1 : 0;
  b.q = view(i.in[o], g.heads * g.T * g.E);
  b.k = view(i.in[o + 1], g.heads * g.S * g.E);
  b.v = view(i.in[o + 2], g.heads * g.S * g.F);
  if (grad) {
    b.dO = view(i.in[0], g.heads * g.T * g.F);
    b.dq = view(i.out[0], g.heads * g.T * g.E);
    b.dk = view(i.out[1], g.heads * g.S * g.E);
    b.dv = view(i.out[2], g.heads * g.S * g.F);
  } else {
    b.out = view(i.out[0], g.heads * g.T * g.F);
  }
  const int64_t n = g.scores();
  b.x = c.take<float>(n);
  b.p = c.take<float>(n);
  if (g.mayDrop) {
    b.pd = c.take<float>(n);
    b.mask = c.take<uint8_t>(n);
  }
  if (g.causal)
    b.cond = c.take<uint8_t>(g.T * g.S);
  b.scalars = c.take<float>(3);
  if (grad)
    b.d = c.take<float>(n);
  if (g.bshd && g.half)
    b.permuted = c.take<cpu::Bf16>(g.heads * std::max(g.T, g.S) * std::max(g.E, g.F));
  return b;
}

size_t scratchBytes(const Geometry &g, const Instr &i, bool grad) {
  Carver c;
  (void)carve(c, g, i, grad);
  return c.used;
}

/// x = q k^T, scaled, biased and masked; p = softmax(x); pd = dropout(p)
/// with nn.dropout's bits when the ratio is above 0 (returns whether).
bool probabilities(const Instr &i, Context &ctx, const Geometry &g, const Buffers &b) {
  const int64_t n = g.scores();
  ctx.gpu->blas->matmul(b.q, g.qs, false, b.k, g.ks, true, b.x, g.ss);
  float *scale = b.scalars, *negInf = b.scalars + 1, *zero = b.scalars + 2;
  cuda::fill(scale, 1, float(i.floats[0]));
  cuda::fill(negInf, 1, -std::numeric_limits<float>::infinity());
  cuda::fill(zero, 1, 0.0f);
  // The softmax multiplies by its scale itself; a division, or a bias
  // added after the scale, is done first.
  const bool scaledHere = g.divides || g.bias;
  if (scaledHere)
    cuda::binary(g.divides ? kernels::Binary::Div : kernels::Binary::Mul, b.x, scale, 1, b.x, n,
                 1);
  if (g.bias)
    cuda::binary(kernels::Binary::Add, b.x, g.ss, static_cast<const float *>(g.bias->dev),
                 g.bias->shape, b.x, g.ss);
  cuda::SoftmaxMask mask;
  if (g.causal) {
    // -inf at the keys after each query, where the CPU kernel fills it
    // (before or after the bias: -inf either way).
    cuda::causalFlags(b.cond, g.T, g.S);
    mask.cond = b.cond, mask.condRows = g.T, mask.fillWhen = true;
  }
  cuda::maskedSoftmax<float>(b.x, scaledHere ? nullptr : scale, mask, negInf, b.p, g.heads * g.T,
                             g.S);
  const float ratio = ctx.eval ? 0.0f : float(i.floats[1]);
  if (ratio <= 0.0f)
    return false;
  cuda::dropout<float>(b.p, b.pd, b.mask, n, ratio, ctx.seed, uint64_t(i.ints[2]),
                       ctx.rngCounter);
  return true;
}

/// The swap of dimensions r-3 and r-2 (its own inverse).
std::vector<int64_t> headSwap(int rank) {
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d)
    perm[size_t(d)] = d;
  std::swap(perm[size_t(rank - 3)], perm[size_t(rank - 2)]);
  return perm;
}

/// Operand t as head-major float in `to` (nothing to do for a head-major
/// float operand, which `to` is).
void load(const Geometry &g, const Buffers &b, const Tensor *t, float *to) {
  if (!g.bshd) {
    if (g.half)
      cuda::cast(static_cast<const cpu::Bf16 *>(t->dev), to, t->numel);
    return;
  }
  const std::vector<int64_t> perm = headSwap(t->shape.rank);
  if (g.half) {
    cuda::transpose(static_cast<const cpu::Bf16 *>(t->dev), t->shape, perm.data(), b.permuted);
    cuda::cast(b.permuted, to, t->numel);
  } else {
    cuda::transpose(static_cast<const float *>(t->dev), t->shape, perm.data(), to);
  }
}

/// The head-major float result `from` into t (in place already for a
/// head-major float result).
void store(const Geometry &g, const Buffers &b, const float *from, const Tensor *t) {
  if (!g.bshd) {
    if (g.half)
      cuda::cast(from, static_cast<cpu::Bf16 *>(t->dev), t->numel);
    return;
  }
  const Shape hm = headMajor(g, t->shape);
  const std::vector<int64_t> perm = headSwap(t->shape.rank);
  if (g.half) {
    cuda::cast(from, b.permuted, t->numel);
    cuda::transpose(static_cast<const cpu::Bf16 *>(b.permuted), hm, perm.data(),
                    static_cast<cpu::Bf16 *>(t->dev));
  } else {
    cuda::transpose(from, hm, perm.data(), static_cast<float *>(t->dev));
  }
}

void forward(const Instr &i, Context &ctx) {
  const Geometry g = geometryOf(i, false);
  Carver c{static_cast<char *>(ctx.gpu->scratch)};
  const Buffers b = carve(c, g, i, false);
  load(g, b, i.in[0], b.q);
  load(g, b, i.in[1], b.k);
  load(g, b, i.in[2], b.v);
  const bool dropped = probabilities(i, ctx, g, b);
  ctx.gpu->blas->matmul(dropped ? b.pd : b.p, g.ss, false, b.v, g.vs, false, b.out, g.os);
  store(g, b, b.out, i.out[0]);
  cuda::zero(i.out[1]->dev, size_t(i.out[1]->numel) * sizeof(float));
}

void backward(const Instr &i, Context &ctx) {
  const Geometry g = geometryOf(i, true);
  Carver c{static_cast<char *>(ctx.gpu->scratch)};
  const Buffers b = carve(c, g, i, true);
  load(g, b, i.in[0], b.dO);
  load(g, b, i.in[1], b.q);
  load(g, b, i.in[2], b.k);
  load(g, b, i.in[3], b.v);
  const int64_t n = g.scores();
  const bool dropped = probabilities(i, ctx, g, b);
  cuda::Blas &blas = *ctx.gpu->blas;
  // dV = P'^T dO; dP' = dO V^T, through dropout to dP.
  blas.matmul(dropped ? b.pd : b.p, g.ss, true, b.dO, g.os, false, b.dv, g.vs);
  blas.matmul(b.dO, g.os, false, b.v, g.vs, true, b.d, g.ss);
  if (dropped)
    cuda::dropoutGrad<float>(b.d, b.mask, b.d, n, float(i.floats[1]));
  // dS = softmax_grad(P, dP), 0 at the masked keys, through the scale.
  cuda::SoftmaxMask mask;
  if (g.causal)
    mask.cond = b.cond, mask.condRows = g.T, mask.fillWhen = true;
  float *scale = b.scalars, *zero = b.scalars + 2;
  cuda::maskedSoftmaxGrad<float>(b.p, b.d, mask, zero, g.divides ? nullptr : scale, b.x,
                                 g.heads * g.T, g.S);
  if (g.divides)
    cuda::binary(kernels::Binary::Div, b.x, scale, 1, b.x, n, 1);
  // dQ = dS K, dK = dS^T Q.
  blas.matmul(b.x, g.ss, false, b.k, g.ks, false, b.dq, g.qs);
  blas.matmul(b.x, g.ss, true, b.q, g.qs, false, b.dk, g.ks);
  store(g, b, b.dq, i.out[0]);
  store(g, b, b.dk, i.out[1]);
  store(g, b, b.dv, i.out[2]);
}

} // namespace

size_t bindCudaAttention(Instr &i, const std::string &where) {
  const bool grad = i.op == "nn.attention_grad";
  if (i.ints.size() == 7)
    throw DeviceUnsupported(where + ": no CUDA kernel for attention on a tensor-parallel part "
                                    "yet");
  const Tensor *q = i.in[grad ? 1 : 0];
  if (q->dtype != plan::F32 && q->dtype != plan::BF16)
    throw DeviceUnsupported(where + ": no CUDA kernel for " + plan::DType_Name(q->dtype) + " " +
                            i.op + " yet");
  i.run = grad ? backward : forward;
  return scratchBytes(geometryOf(i, grad), i, grad);
}

} // namespace dsrt
