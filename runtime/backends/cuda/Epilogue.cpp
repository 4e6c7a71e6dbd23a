//===- Epilogue.cpp - nn.matmul_epilogue on the device, composed ----------===//
//
// The GEMM epilogue (plan/Instructions.h) bound to the kernels the unfused
// matmul and adds already run on: a cuBLAS float32 GEMM, then the bias,
// the scale and the addend by the broadcasting binary kernel, in float32. A bf16
// instruction widens its operands into the call's scratch and rounds the
// sum once, the CPU kernel's contract (runtime/kernels/cpu/MatmulHalf.cpp),
// so that fused plans stay on the GPU and agree with the CPU's roundings.
// The column sums (a second output, a bias gradient) are the reduction
// kernel's over the stored result, as nn.reduce_sum computed them.
// cuBLASLt's epilogues (bias in the GEMM's own store) belong to the GPU
// work; this composition is no faster than the unfused ops.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/DeviceState.h"

#include <algorithm>

namespace dsrt {
namespace {
using namespace ops;

/// The call's scratch carved in order, 256-byte aligned; a null base only
/// counts the bytes.
struct Carver {
  char *base = nullptr;
  size_t used = 0;
  float *take(int64_t n) {
    const size_t at = (used + 255) / 256 * 256;
    used = at + size_t(std::max<int64_t>(n, 1)) * sizeof(float);
    return base ? reinterpret_cast<float *>(base + at) : nullptr;
  }
};

struct Operands {
  const Tensor *a, *b, *bias, *scale, *addend, *out;
  bool half;
};

Operands operandsOf(const Instr &i) {
  const bool hasScale = i.ints.size() > 4 && i.ints[4] != 0;
  return {i.in[0],
          i.in[1],
          i.ints[2] ? i.in[2] : nullptr,
          hasScale ? i.in[2 + (i.ints[2] != 0)] : nullptr,
          i.ints[3] ? i.in.back() : nullptr,
          i.out[0],
          i.out[0]->dtype == plan::BF16};
}

/// Float views: the tensor itself in a float32 plan, a widened copy in
/// the scratch in a bf16 one.
const float *view(const Tensor *t, bool half, Carver &c) {
  if (!t)
    return nullptr;
  if (!half)
    return static_cast<const float *>(t->dev);
  float *to = c.take(t->numel);
  if (to)
    cuda::cast(static_cast<const cpu::Bf16 *>(t->dev), to, t->numel);
  return to;
}

/// The column sums' axes: every one of the result's but the last.
uint32_t rowAxes(const Tensor *out) { return (1u << (out->shape.rank - 1)) - 1; }

/// Whether the result is planned over the addend (memory-plan places it in
/// place when the addend dies here): the product then goes to the scratch
/// first, or the GEMM would overwrite the addend before it is read.
bool inPlace(const Operands &o) { return o.addend && o.addend->dev == o.out->dev; }

void run(const Instr &i, Context &ctx) {
  const Operands o = operandsOf(i);
  Carver c{static_cast<char *>(ctx.gpu->scratch)};
  const float *a = view(o.a, o.half, c), *b = view(o.b, o.half, c);
  const float *bias = view(o.bias, o.half, c), *scale = view(o.scale, o.half, c),
              *addend = view(o.addend, o.half, c);
  float *out = o.half || inPlace(o) ? c.take(o.out->numel) : static_cast<float *>(o.out->dev);
  const auto &os = o.out->shape;
  ctx.gpu->blas->matmul(a, o.a->shape, i.ints[0] != 0, b, o.b->shape, i.ints[1] != 0, out, os);
  if (bias)
    cuda::binary(kernels::Binary::Add, out, os, bias, o.bias->shape, out, os);
  if (scale)
    cuda::binary(kernels::Binary::Mul, out, os, scale, os, out, os);
  // In place in a float32 plan: the sum goes straight over the addend.
  float *sum = inPlace(o) && !o.half ? static_cast<float *>(o.out->dev) : out;
  if (addend)
    cuda::binary(kernels::Binary::Add, out, os, addend, os, sum, os);
  if (o.half)
    cuda::cast(out, static_cast<cpu::Bf16 *>(o.out->dev), o.out->numel);
  // The carved views are dead now: the reduction takes the scratch.
  if (i.out.size() == 2 && o.half)
    cuda::reduce(kernels::Reduce::Sum, static_cast<const cpu::Bf16 *>(o.out->dev), os,
                 rowAxes(o.out), static_cast<cpu::Bf16 *>(i.out[1]->dev), ctx.gpu->scratch);
  else if (i.out.size() == 2)
    cuda::reduce(kernels::Reduce::Sum, static_cast<const float *>(o.out->dev), os,
                 rowAxes(o.out), static_cast<float *>(i.out[1]->dev), ctx.gpu->scratch);
}

} // namespace

size_t bindCudaEpilogue(Instr &i, const std::string &where) {
  const plan::DType d = i.out[0]->dtype;
  if (d != plan::F32 && d != plan::BF16)
    throw DeviceUnsupported(where + ": no CUDA kernel for " + plan::DType_Name(d) + " " + i.op +
                            " yet");
  i.run = run;
  // The binder does not know the placement yet: the scratch allows for the
  // product in place over the addend.
  const Operands o = operandsOf(i);
  Carver c;
  if (o.half) {
    for (const Tensor *t : {o.a, o.b, o.bias, o.scale, o.addend, o.out})
      if (t)
        (void)c.take(t->numel);
  } else if (o.addend) {
    (void)c.take(o.out->numel);
  }
  if (i.out.size() == 2)
    return std::max(c.used, cuda::reduceScratchBytes(o.out->shape, rowAxes(o.out)));
  return c.used;
}

} // namespace dsrt
