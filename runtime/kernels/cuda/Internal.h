//===- Internal.h - what the CUDA kernel files share (internal) -*- C++ -*-===//
//
// Error checks, the launch geometry of the grid-stride kernels and the
// binary ops' arithmetic, for Kernels.cu and Layout.cu (CUDA sources only).
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_KERNELS_CUDA_INTERNAL_H
#define DSRT_KERNELS_CUDA_INTERNAL_H

#include "runtime/half/HalfBits.h"
#include "runtime/kernels/cuda/Kernels.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace dsrt::cuda {

inline void check(cudaError_t e, const char *what) {
  if (e != cudaSuccess)
    throw CudaError(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}
/// After a launch: a bad configuration or an earlier asynchronous fault.
inline void launched(const char *what) { check(cudaGetLastError(), what); }

inline cudaStream_t asStream(void *s) { return static_cast<cudaStream_t>(s); }

constexpr int kThreads = 256;

/// 16 bytes of elements, moved by one vector load or store: memory-bound
/// kernels on bf16 reach about a third of the H200's bandwidth with 2-byte
/// accesses. The packed paths compute every element as the scalar ones do
/// (the same bits); they run where the element count is a multiple of
/// N and the pointers are 16-byte aligned (the arena's buffers are), and
/// the scalar kernels elsewhere.
template <typename T> struct alignas(16) Pack {
  static constexpr int N = int(16 / sizeof(T));
  T v[N];
};
template <typename T> __device__ __forceinline__ Pack<T> loadPack(const T *p) {
  Pack<T> r;
  *reinterpret_cast<uint4 *>(&r) = *reinterpret_cast<const uint4 *>(p);
  return r;
}
template <typename T> __device__ __forceinline__ void storePack(T *p, const Pack<T> &r) {
  *reinterpret_cast<uint4 *>(p) = *reinterpret_cast<const uint4 *>(&r);
}
inline bool aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }
/// Whether the packed paths may run (DSRT_CUDA_VECTOR=0: never, to
/// measure them; setVectorized for the tests).
bool vectorized();
/// n elements of T in whole packs, every pointer aligned, offsets 32-bit.
template <typename T> bool packable(int64_t n, std::initializer_list<const void *> ptrs) {
  if (!vectorized() || n <= 0 || n % Pack<T>::N || n >= (int64_t(1) << 31))
    return false;
  for (const void *p : ptrs)
    if (!aligned16(p))
      return false;
  return true;
}

/// Blocks of a grid-stride loop over n elements.
inline int blocksFor(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return int(b < 65535 * 8 ? (b < 1 ? 1 : b) : 65535 * 8);
}

/// Elements in float: float as is; bf16 (kernels::Bf16, its bits) widened
/// exactly and narrowed by runtime/half/HalfBits.h, the CPU kernels' own
/// rounding, so that a rounding on the GPU gives the CPU's bits.
__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(kernels::Bf16 v) { return half::bf16Value(v.bits); }
template <typename T> __device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ float fromFloat<float>(float v) { return v; }
template <> __device__ __forceinline__ kernels::Bf16 fromFloat<kernels::Bf16>(float f) {
  return kernels::Bf16{half::bf16Bits(f)};
}

__device__ __forceinline__ float applyBinary(kernels::Binary op, float x, float y) {
  switch (op) {
  case kernels::Binary::Add: return x + y;
  case kernels::Binary::Sub: return x - y;
  case kernels::Binary::Mul: return x * y;
  case kernels::Binary::Div: return x / y;
  case kernels::Binary::Pow: return powf(x, y);
  // NaN propagates, as torch.maximum / torch.minimum and the CPU kernel.
  case kernels::Binary::Max: return (x > y || x != x) ? x : y;
  case kernels::Binary::Min: return (x < y || x != x) ? x : y;
  }
  return 0.0f;
}

/// out = a op b over n elements on the packed path, the operands read as
/// element i % m (m = 0: i; m = 1: a scalar): false, launching nothing,
/// where sizes or alignment do not allow it (Layout.cu).
template <typename T>
bool binaryPacked(kernels::Binary op, const T *a, int64_t ma, const T *b, int64_t mb, T *out,
                  int64_t n, void *stream);

/// out[c] (c < split; out2[c - split] beyond, when out2 is not null) =
/// the sum over rows of x[r * cols + c], divided by `divisor`: double
/// partial sums over row slices, then added in slice order (Layout.cu).
size_t columnSumScratchBytes(int64_t rows, int64_t cols);
template <typename TIn, typename TOut>
void columnSums(const TIn *x, int64_t rows, int64_t cols, double divisor, TOut *out, int64_t split,
                TOut *out2, void *scratch, void *stream);

} // namespace dsrt::cuda

#endif // DSRT_KERNELS_CUDA_INTERNAL_H
