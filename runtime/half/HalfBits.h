//===- HalfBits.h - the one float <-> bf16 / fp16 rounding ------*- C++ -*-===//
//
// Scalar conversions between float and the 16-bit float formats, one
// definition for everything in dsrt that rounds: the CPU kernels (Half.h
// builds its tile and element policies on these), the CUDA kernels (host
// and device: the same functions compile for both), the collectives'
// 16-bit staging, and the ONNX writer. Dependency-free (no OpenMP, no
// kernel headers), so any target can include it.
//
// The rounding (the same bits as the hardware: checked over all 2^32 floats
// against vcvtneps2bf16 and vcvtps2ph, with and without FTZ/DAZ, by
// test/runtime/kernels/HalfTest.cpp, and on the GPU by CudaKernelsTest):
//   * float -> bf16: round to nearest even; NaN stays NaN (quieted, sign
//     and top payload kept); float denormals FLUSH to a zero of the same
//     sign (AVX512_BF16's vcvtneps2bf16 does that whatever MXCSR says), on
//     every path, the ONNX writer's bf16 initializers included;
//   * float -> fp16: IEEE round to nearest even, fp16 subnormals kept
//     (nothing flushes), overflow to inf, NaN quieted;
//   * bf16 / fp16 -> float: exact.
// Branch-free, so that loops calling them vectorize.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_HALF_HALFBITS_H
#define DSRT_HALF_HALFBITS_H

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define DSRT_HALF_INLINE __host__ __device__ __forceinline__
#else
// Innermost loops of kernels instantiated three times over: GCC's
// unit-growth limit would otherwise stop inlining (and a call stops
// vectorization).
#define DSRT_HALF_INLINE inline __attribute__((always_inline))
#endif

namespace dsrt::half {

DSRT_HALF_INLINE uint32_t bitsOf(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
DSRT_HALF_INLINE float floatOf(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}
/// c ? a : b on integers, as a mask (GCC if-converts this reliably).
DSRT_HALF_INLINE uint32_t pick(bool c, uint32_t a, uint32_t b) {
  const uint32_t m = 0u - uint32_t(c);
  return (a & m) | (b & ~m);
}

DSRT_HALF_INLINE uint16_t bf16Bits(float f) {
  const uint32_t u = bitsOf(f), a = u & 0x7fffffffu;
  uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  r = pick((u & 0x7f800000u) == 0, (u >> 16) & 0x8000u, r);
  r = pick(a > 0x7f800000u, (u >> 16) | 0x40u, r);
  return uint16_t(r);
}
DSRT_HALF_INLINE float bf16Value(uint16_t h) { return floatOf(uint32_t(h) << 16); }

DSRT_HALF_INLINE uint16_t f16Bits(float f) {
  const uint32_t u = bitsOf(f), sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  // Normal fp16: rebias the exponent, round at bit 13.
  const uint32_t an = a - (112u << 23);
  const uint32_t normal = (an + 0xfffu + ((an >> 13) & 1u)) >> 13;
  // Below 2^-14: adding 0.5f rounds (to nearest even) at the 2^-24 unit.
  const uint32_t sub = bitsOf(floatOf(a) + 0.5f) - 0x3f000000u;
  uint32_t h = pick(a < 0x38800000u, sub, normal);
  h = pick(a >= 0x477ff000u, 0x7c00u, h); // rounds past 65504
  h = pick(a > 0x7f800000u, 0x7e00u | ((a >> 13) & 0x3ffu), h);
  return uint16_t(sign | h);
}
DSRT_HALF_INLINE float f16Value(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, a = h & 0x7fffu;
  const uint32_t normal = (a + (112u << 10)) << 13;
  const uint32_t special =
      0x7f800000u | ((a & 0x3ffu) << 13) | (uint32_t(a > 0x7c00u) << 22);
  // Subnormal: a * 2^-24, exact in float.
  const uint32_t sub = bitsOf(float(int32_t(a)) * 5.9604644775390625e-8f);
  return floatOf(sign |
                 pick(a < 0x400u, sub, pick(a >= 0x7c00u, special, normal)));
}

} // namespace dsrt::half

#endif // DSRT_HALF_HALFBITS_H
