//===- Kernels.cu - the CUDA kernels of dsrt ------------------------------===//
//
// See Kernels.h. Elementwise kernels use a grid-stride loop; row kernels
// (layer norm, softmax, cross-entropy) one block per row with a block-wide
// reduction in float (a warp shuffle, then one value per warp in shared
// memory). Dropout reproduces the CPU's splitmix64 mask bit for bit.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cuda/Internal.h"

#include "runtime/kernels/common/AdamScalars.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <type_traits>

namespace dsrt::cuda {
namespace {

__device__ __forceinline__ float warpSum(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warpMax(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
/// The sum (or max) over the block, returned to every thread.
template <bool Max> __device__ float blockReduce(float v) {
  __shared__ float partial[32];
  v = Max ? warpMax(v) : warpSum(v);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  int warps = (blockDim.x + 31) / 32;
  float r = threadIdx.x < warps ? partial[threadIdx.x] : (Max ? -INFINITY : 0.0f);
  if (warp == 0)
    r = Max ? warpMax(r) : warpSum(r);
  if (threadIdx.x == 0)
    partial[0] = r;
  __syncthreads();
  r = partial[0];
  __syncthreads();
  return r;
}

//===--- elementwise ------------------------------------------------------===//

/// x Phi(x) with CUDA's normcdff, accurate in both tails (as the CPU's
/// Erf.h): 0.5 x (1 + erf(x / sqrt 2)) cancels for x << 0.
__device__ float geluErf(float v) { return v * normcdff(v); }
__device__ float geluTanh(float v) {
  float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
  return 0.5f * v * (1.0f + tanhf(u));
}

__device__ __forceinline__ float unaryValue(kernels::Unary op, float v) {
  switch (op) {
  case kernels::Unary::Neg: return -v;
  case kernels::Unary::Abs: return fabsf(v);
  case kernels::Unary::Exp: return expf(v);
  case kernels::Unary::Log: return logf(v);
  case kernels::Unary::Sqrt: return sqrtf(v);
  case kernels::Unary::Rsqrt: return rsqrtf(v);
  case kernels::Unary::Reciprocal: return 1.0f / v;
  case kernels::Unary::Tanh: return tanhf(v);
  case kernels::Unary::Erf: return erff(v);
  case kernels::Unary::Sin: return sinf(v);
  case kernels::Unary::Cos: return cosf(v);
  case kernels::Unary::Relu: return v < 0.0f ? 0.0f : v;
  case kernels::Unary::Sigmoid: return 1.0f / (1.0f + expf(-v));
  case kernels::Unary::GeluErf: return geluErf(v);
  case kernels::Unary::GeluTanh: return geluTanh(v);
  }
  return v;
}

/// gelu'(v): what geluGrad multiplies dy by, and what geluWithDerivative
/// stores for the GEMM epilogue's scale.
__device__ __forceinline__ float geluSlope(bool tanhApprox, float v) {
  if (tanhApprox) {
    float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    float t = tanhf(u);
    float du = 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * v * v);
    return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
  }
  float cdf = normcdff(v);
  float pdf = 0.3989422804014327f * expf(-0.5f * v * v);
  return cdf + v * pdf;
}
__device__ __forceinline__ float geluGradValue(bool tanhApprox, float v, float dy) {
  return dy * geluSlope(tanhApprox, v);
}

template <typename T>
__global__ void unaryKernel(kernels::Unary op, const T *x, T *y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = fromFloat<T>(unaryValue(op, toFloat(x[i])));
}
template <typename T>
__global__ void unaryPackKernel(kernels::Unary op, const T *x, T *y, uint32_t packs) {
  constexpr int N = Pack<T>::N;
  for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < packs; p += gridDim.x * blockDim.x) {
    Pack<T> a = loadPack(x + size_t(p) * N), r;
#pragma unroll
    for (int k = 0; k < N; ++k)
      r.v[k] = fromFloat<T>(unaryValue(op, toFloat(a.v[k])));
    storePack(y + size_t(p) * N, r);
  }
}

template <typename T>
__global__ void geluGradKernel(bool tanhApprox, const T *x, const T *dy, T *dx, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = fromFloat<T>(geluGradValue(tanhApprox, toFloat(x[i]), toFloat(dy[i])));
}
template <typename T>
__global__ void geluGradPackKernel(bool tanhApprox, const T *x, const T *dy, T *dx,
                                   uint32_t packs) {
  constexpr int N = Pack<T>::N;
  for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < packs; p += gridDim.x * blockDim.x) {
    Pack<T> a = loadPack(x + size_t(p) * N), d = loadPack(dy + size_t(p) * N), r;
#pragma unroll
    for (int k = 0; k < N; ++k)
      r.v[k] = fromFloat<T>(geluGradValue(tanhApprox, toFloat(a.v[k]), toFloat(d.v[k])));
    storePack(dx + size_t(p) * N, r);
  }
}

template <typename T>
__global__ void geluWithDerivativeKernel(bool tanhApprox, const T *x, T *y, T *d, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float v = toFloat(x[i]);
    y[i] = fromFloat<T>(tanhApprox ? geluTanh(v) : geluErf(v));
    d[i] = fromFloat<T>(geluSlope(tanhApprox, v));
  }
}

template <typename T>
__global__ void binaryKernel(kernels::Binary op, const T *a, const T *b, int64_t bn, T *out,
                             int64_t n, int64_t cols) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    T y = bn == n ? b[i] : bn == 1 ? b[0] : b[i % cols];
    out[i] = fromFloat<T>(applyBinary(op, toFloat(a[i]), toFloat(y)));
  }
}

//===--- rows: layer norm, softmax ---------------------------------------===//

/// A row's mean and 1 / sqrt(biased variance + eps), block-wide.
template <typename T>
__device__ void meanRstd(const T *xr, int64_t cols, float eps, float &mean, float &rstd) {
  float s = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    s += toFloat(xr[c]);
  mean = blockReduce<false>(s) / float(cols);
  float q = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float d = toFloat(xr[c]) - mean;
    q += d * d;
  }
  rstd = rsqrtf(blockReduce<false>(q) / float(cols) + eps);
}

template <typename T>
__global__ void layerNormKernel(const T *x, const float *gamma, const float *beta, T *y,
                                int64_t cols, float eps) {
  const T *xr = x + blockIdx.x * cols;
  T *yr = y + blockIdx.x * cols;
  float mean, rstd;
  meanRstd(xr, cols, eps, mean, rstd);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    yr[c] = fromFloat<T>((toFloat(xr[c]) - mean) * rstd * gamma[c] + (beta ? beta[c] : 0.0f));
}

/// dx per row; the rows' contributions to dgamma / dbeta go to `partial`
/// ([rows, 2 * cols]) and are summed by columnSums (no atomics: a fixed
/// order, the same in every run).
template <typename T>
__global__ void layerNormGradKernel(const T *dy, const T *x, const float *gamma, T *dx,
                                    float *partial, int64_t cols, float eps) {
  const T *xr = x + blockIdx.x * cols, *dyr = dy + blockIdx.x * cols;
  T *dxr = dx + blockIdx.x * cols;
  float mean, rstd;
  meanRstd(xr, cols, eps, mean, rstd);
  float a = 0, b = 0; // sum(dy * gamma), sum(dy * gamma * xhat)
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float d = toFloat(dyr[c]);
    float xh = (toFloat(xr[c]) - mean) * rstd, g = d * gamma[c];
    a += g;
    b += g * xh;
    partial[blockIdx.x * 2 * cols + c] = d * xh;
    partial[blockIdx.x * 2 * cols + cols + c] = d;
  }
  a = blockReduce<false>(a) / float(cols);
  b = blockReduce<false>(b) / float(cols);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float xh = (toFloat(xr[c]) - mean) * rstd;
    dxr[c] = fromFloat<T>(rstd * (toFloat(dyr[c]) * gamma[c] - a - xh * b));
  }
}

/// The row's maximum and sum of exp(x - max), block-wide.
struct RowStats {
  float max, sum;
};
template <typename T> __device__ RowStats rowStats(const T *xr, int64_t n) {
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
    m = fmaxf(m, toFloat(xr[c]));
  m = blockReduce<true>(m);
  float s = 0;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
    s += expf(toFloat(xr[c]) - m);
  return {m, blockReduce<false>(s)};
}

template <typename T> __global__ void softmaxKernel(const T *x, T *y, int64_t n) {
  const T *xr = x + blockIdx.x * n;
  T *yr = y + blockIdx.x * n;
  RowStats st = rowStats(xr, n);
  float inv = 1.0f / st.sum;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
    yr[c] = fromFloat<T>(expf(toFloat(xr[c]) - st.max) * inv);
}

template <typename T>
__global__ void softmaxGradKernel(const T *y, const T *dy, T *dx, int64_t n) {
  const T *yr = y + blockIdx.x * n, *dyr = dy + blockIdx.x * n;
  T *dxr = dx + blockIdx.x * n;
  float s = 0;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
    s += toFloat(dyr[c]) * toFloat(yr[c]);
  s = blockReduce<false>(s);
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
    dxr[c] = fromFloat<T>(toFloat(yr[c]) * (toFloat(dyr[c]) - s));
}

/// Elements of T in 16 bytes (the row kernels' vector loads).
template <typename T> constexpr int kVec = Pack<T>::N;

/// maskedSoftmax's element before the softmax: x * scale rounded to T (as
/// nn.mul rounds), then the fill where the mask selects it (nn.select).
template <typename T> struct MaskedRow {
  const T *x;
  const uint8_t *cond; // this row's flags, or null
  bool fillWhen, scaled;
  float scale, fill;
  bool condAligned = false; // the flags load V at a time
  __device__ float operator[](int64_t c) const {
    float v = toFloat(x[c]);
    if (scaled)
      v = toFloat(fromFloat<T>(v * scale));
    if (cond && (cond[c] != 0) == fillWhen)
      v = fill;
    return v;
  }
  /// Elements c .. c + V - 1 (16 bytes of x, 16-byte aligned).
  template <int V> __device__ void load(int64_t c, float *v) const;
};

/// softmaxKernel over MaskedRow: the same sums in the same order.
template <typename T>
__global__ void maskedSoftmaxKernel(const T *x, const T *scale, SoftmaxMask mask, const T *fill,
                                    T *y, int64_t n) {
  const int64_t row = blockIdx.x;
  MaskedRow<T> xr{x + row * n, mask.cond ? mask.cond + (row % mask.condRows) * n : nullptr,
                  mask.fillWhen, scale != nullptr, scale ? toFloat(*scale) : 1.0f,
                  mask.cond ? toFloat(*fill) : 0.0f};
  T *yr = y + row * n;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
    m = fmaxf(m, xr[c]);
  m = blockReduce<true>(m);
  float s = 0;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
    s += expf(xr[c] - m);
  s = blockReduce<false>(s);
  float inv = 1.0f / s;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
    yr[c] = fromFloat<T>(expf(xr[c] - m) * inv);
}

/// softmaxGradKernel, then the select's fill (rounded as nn.select copies)
/// and the scale (rounded as nn.mul).
template <typename T>
__global__ void maskedSoftmaxGradKernel(const T *y, const T *dy, SoftmaxMask mask, const T *fill,
                                        const T *scale, T *dx, int64_t n) {
  const int64_t row = blockIdx.x;
  const T *yr = y + row * n, *dyr = dy + row * n;
  const uint8_t *cr = mask.cond ? mask.cond + (row % mask.condRows) * n : nullptr;
  const float f = cr ? toFloat(*fill) : 0.0f, sc = scale ? toFloat(*scale) : 1.0f;
  T *dxr = dx + row * n;
  float s = 0;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
    s += toFloat(dyr[c]) * toFloat(yr[c]);
  s = blockReduce<false>(s);
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    float g = toFloat(fromFloat<T>(toFloat(yr[c]) * (toFloat(dyr[c]) - s)));
    if (cr && (cr[c] != 0) == mask.fillWhen)
      g = f;
    dxr[c] = fromFloat<T>(scale ? g * sc : g);
  }
}

//===--- softmax rows of up to 1024: one warp per row ---------------------===//
//
// The row lives in registers (lane l holds columns l, l + 32, ...): one
// read of x, one write of y, and warp shuffles for the max and the sum,
// no block barrier. The plain softmax and the fused one (MaskedRow) share
// these kernels, so that they add in the same order and give the same bits.

constexpr int kMaxWarpCols = 1024;

template <typename T> struct PlainRow {
  const T *x;
  __device__ float operator[](int64_t c) const { return toFloat(x[c]); }
};
template <typename T> struct PlainRows {
  const T *x;
  int64_t n;
  __device__ PlainRow<T> operator()(int64_t row) const { return {x + row * n}; }
};
template <typename T> struct MaskedRows {
  const T *x, *scale, *fill;
  SoftmaxMask mask;
  int64_t n;
  __device__ MaskedRow<T> operator()(int64_t row) const {
    return {x + row * n,
            mask.cond ? mask.cond + (row % mask.condRows) * n : nullptr,
            mask.fillWhen,
            scale != nullptr,
            scale ? toFloat(*scale) : 1.0f,
            mask.cond ? toFloat(*fill) : 0.0f,
            reinterpret_cast<uintptr_t>(mask.cond) % kVec<T> == 0 && n % kVec<T> == 0};
  }
};

/// 16 bytes of T (V = 16 / sizeof(T) elements) to float and back, in one
/// load or store.
template <typename T> __device__ __forceinline__ void load16(const T *p, float *out) {
  uint4 raw = *reinterpret_cast<const uint4 *>(p);
  const T *e = reinterpret_cast<const T *>(&raw);
#pragma unroll
  for (int k = 0; k < kVec<T>; ++k)
    out[k] = toFloat(e[k]);
}
template <typename T> __device__ __forceinline__ void store16(T *p, const T *in) {
  *reinterpret_cast<uint4 *>(p) = *reinterpret_cast<const uint4 *>(in);
}
/// Calls f(i, c) for each V-element chunk i that lane `lane` holds of a row
/// of n elements: columns c = (lane + 32 i) V < n, i < C.
template <int C, typename T, typename F>
__device__ __forceinline__ void forChunks(int lane, int64_t n, F &&f) {
#pragma unroll
  for (int i = 0; i < C; ++i) {
    const int64_t c = int64_t(lane + 32 * i) * kVec<T>;
    if (c < n)
      f(i, c);
  }
}
/// Stores the chunks lane `lane` holds of a row, element k of chunk i
/// being value(i, k, c), a T, in one 16-byte store per chunk.
template <int C, typename T, typename F>
__device__ __forceinline__ void storeChunks(T *row, int lane, int64_t n, F &&value) {
  forChunks<C, T>(lane, n, [&](int i, int64_t c) {
    alignas(16) T o[kVec<T>];
#pragma unroll
    for (int k = 0; k < kVec<T>; ++k)
      o[k] = value(i, k, c);
    store16(row + c, o);
  });
}

/// V mask bytes in one load (V of 4 or 8; the row and c V-aligned).
template <int V> struct MaskBytes;
template <> struct MaskBytes<4> {
  __device__ static void load(const uint8_t *p, uint8_t *out) {
    *reinterpret_cast<uint32_t *>(out) = *reinterpret_cast<const uint32_t *>(p);
  }
};
template <> struct MaskBytes<8> {
  __device__ static void load(const uint8_t *p, uint8_t *out) {
    *reinterpret_cast<uint2 *>(out) = *reinterpret_cast<const uint2 *>(p);
  }
};

template <typename T>
template <int V>
__device__ void MaskedRow<T>::load(int64_t c, float *v) const {
  load16(x + c, v);
  alignas(8) uint8_t flags[V] = {};
  if (cond && condAligned)
    MaskBytes<V>::load(cond + c, flags);
  else if (cond)
#pragma unroll
    for (int k = 0; k < V; ++k)
      flags[k] = cond[c + k];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    if (scaled)
      v[k] = toFloat(fromFloat<T>(v[k] * scale));
    if (cond && (flags[k] != 0) == fillWhen)
      v[k] = fill;
  }
}
template <typename T> __device__ void loadRow(const PlainRow<T> &r, int64_t c, float *v) {
  load16(r.x + c, v);
}
template <typename T> __device__ void loadRow(const MaskedRow<T> &r, int64_t c, float *v) {
  r.template load<kVec<T>>(c, v);
}

/// softmaxWarpKernel with 16-byte loads and stores: lane l holds the
/// V-element chunks l, l + 32, ... (n a multiple of V, rows 16-byte
/// aligned), C chunks at most.
template <int C, typename T, typename Rows>
__global__ void softmaxVecKernel(Rows rowsOf, T *y, int64_t rows, int64_t n) {
  constexpr int V = kVec<T>;
  const int lane = threadIdx.x & 31;
  const int64_t row = blockIdx.x * int64_t(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= rows)
    return;
  const auto xr = rowsOf(row);
  float v[C][V];
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < C; ++i) {
    const int64_t c = int64_t(lane + 32 * i) * V;
    if (c < n) {
      loadRow(xr, c, v[i]);
#pragma unroll
      for (int k = 0; k < V; ++k)
        m = fmaxf(m, v[i][k]);
    }
  }
  m = warpMax(m);
  float s = 0;
#pragma unroll
  for (int i = 0; i < C; ++i)
    if (int64_t(lane + 32 * i) * V < n)
#pragma unroll
      for (int k = 0; k < V; ++k) {
        v[i][k] = expf(v[i][k] - m);
        s += v[i][k];
      }
  s = warpSum(s);
  const float inv = 1.0f / s;
  T *yr = y + row * n;
  storeChunks<C>(yr, lane, n,
                 [&](int i, int k, int64_t) { return fromFloat<T>(v[i][k] * inv); });
}

template <int J, typename T, typename Rows>
__global__ void softmaxWarpKernel(Rows rowsOf, T *y, int64_t rows, int64_t n) {
  const int lane = threadIdx.x & 31;
  const int64_t row = blockIdx.x * int64_t(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= rows)
    return;
  const auto xr = rowsOf(row);
  float v[J];
  float m = -INFINITY;
#pragma unroll
  for (int j = 0; j < J; ++j) {
    int64_t c = lane + 32 * j;
    v[j] = c < n ? xr[c] : -INFINITY;
    m = fmaxf(m, v[j]);
  }
  m = warpMax(m);
  float s = 0;
#pragma unroll
  for (int j = 0; j < J; ++j)
    if (lane + 32 * j < n) {
      v[j] = expf(v[j] - m);
      s += v[j];
    }
  s = warpSum(s);
  const float inv = 1.0f / s;
  T *yr = y + row * n;
#pragma unroll
  for (int j = 0; j < J; ++j)
    if (lane + 32 * j < n)
      yr[lane + 32 * j] = fromFloat<T>(v[j] * inv);
}

/// The gradient's epilogues: plain (the rounded y (dy - s)), or then the
/// mask's fill and the scale, each rounded as nn.select and nn.mul round.
template <typename T> struct PlainGradOut {
  __device__ T operator()(int64_t, int64_t, float g) const { return fromFloat<T>(g); }
};
template <typename T> struct MaskedGradOut {
  SoftmaxMask mask;
  const T *fill, *scale;
  int64_t n;
  __device__ T operator()(int64_t row, int64_t c, float g) const {
    g = toFloat(fromFloat<T>(g));
    if (mask.cond && (mask.cond[(row % mask.condRows) * n + c] != 0) == mask.fillWhen)
      g = toFloat(*fill);
    return fromFloat<T>(scale ? g * toFloat(*scale) : g);
  }
};

template <int J, typename T, typename Out>
__global__ void softmaxGradWarpKernel(const T *y, const T *dy, T *dx, int64_t rows, int64_t n,
                                      Out out) {
  const int lane = threadIdx.x & 31;
  const int64_t row = blockIdx.x * int64_t(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= rows)
    return;
  const T *yr = y + row * n, *dyr = dy + row * n;
  float yv[J], dv[J];
  float s = 0;
#pragma unroll
  for (int j = 0; j < J; ++j) {
    int64_t c = lane + 32 * j;
    yv[j] = c < n ? toFloat(yr[c]) : 0.0f;
    dv[j] = c < n ? toFloat(dyr[c]) : 0.0f;
    s += dv[j] * yv[j];
  }
  s = warpSum(s);
  T *dxr = dx + row * n;
#pragma unroll
  for (int j = 0; j < J; ++j)
    if (lane + 32 * j < n)
      dxr[lane + 32 * j] = out(row, lane + 32 * j, yv[j] * (dv[j] - s));
}

/// softmaxGradWarpKernel with 16-byte loads and stores (as softmaxVecKernel).
template <int C, typename T, typename Out>
__global__ void softmaxGradVecKernel(const T *y, const T *dy, T *dx, int64_t rows, int64_t n,
                                     Out out) {
  constexpr int V = kVec<T>;
  const int lane = threadIdx.x & 31;
  const int64_t row = blockIdx.x * int64_t(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= rows)
    return;
  const T *yr = y + row * n, *dyr = dy + row * n;
  float yv[C][V], dv[C][V];
  float s = 0;
  forChunks<C, T>(lane, n, [&](int i, int64_t c) {
    load16(yr + c, yv[i]);
    load16(dyr + c, dv[i]);
#pragma unroll
    for (int k = 0; k < V; ++k)
      s += dv[i][k] * yv[i][k];
  });
  s = warpSum(s);
  T *dxr = dx + row * n;
  storeChunks<C>(dxr, lane, n, [&](int i, int k, int64_t c) {
    return out(row, c + k, yv[i][k] * (dv[i][k] - s));
  });
}

/// Whether rows of n elements at these pointers take the 16-byte kernels.
template <typename T> bool vecRows(int64_t n, std::initializer_list<const void *> ptrs) {
  if (n % kVec<T> != 0 || n > kMaxWarpCols)
    return false;
  for (const void *p : ptrs)
    if (!aligned16(p))
      return false;
  return true;
}
/// Calls launch(std::integral_constant<int, C>) with the least C of 1, 2,
/// 4, 8 that holds n <= 32 C V.
template <typename T, typename Launch> void byChunks(int64_t n, Launch &&launch) {
  constexpr int V = kVec<T>;
  if (n <= 32 * V)
    launch(std::integral_constant<int, 1>{});
  else if (n <= 64 * V)
    launch(std::integral_constant<int, 2>{});
  else if (n <= 128 * V)
    launch(std::integral_constant<int, 4>{});
  else
    launch(std::integral_constant<int, 8>{});
}

/// Calls launch(std::integral_constant<int, J>) with the least J of 1, 2,
/// 4, ..., 32 that holds n <= 32 J.
template <typename Launch> void byRowWidth(int64_t n, Launch &&launch) {
  if (n <= 32)
    launch(std::integral_constant<int, 1>{});
  else if (n <= 64)
    launch(std::integral_constant<int, 2>{});
  else if (n <= 128)
    launch(std::integral_constant<int, 4>{});
  else if (n <= 256)
    launch(std::integral_constant<int, 8>{});
  else if (n <= 512)
    launch(std::integral_constant<int, 16>{});
  else
    launch(std::integral_constant<int, 32>{});
}
constexpr int kWarpRowsPerBlock = 8;
unsigned warpRowBlocks(int64_t rows) {
  return unsigned((rows + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock);
}

//===--- layer norm rows of up to 1024: one warp per row ------------------===//
//
// As the softmax's warp kernels: lane l holds the V-element chunks l,
// l + 32, ... of the row (16-byte loads and stores), the mean and variance
// come from warp shuffles, and no block barrier is needed. The same
// formulas as layerNormKernel / layerNormGradKernel (their sums in another
// order); the gradient writes the same per-row partials for columnSums.

template <int C, typename T>
__device__ __forceinline__ void warpMeanRstd(float (&xv)[C][kVec<T>], const T *xr, int64_t cols,
                                             float eps, int lane, float &mean, float &rstd) {
  constexpr int V = kVec<T>;
  float s = 0;
  forChunks<C, T>(lane, cols, [&](int i, int64_t c) {
    load16(xr + c, xv[i]);
#pragma unroll
    for (int k = 0; k < V; ++k)
      s += xv[i][k];
  });
  mean = warpSum(s) / float(cols);
  float q = 0;
  forChunks<C, T>(lane, cols, [&](int i, int64_t) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float d = xv[i][k] - mean;
      q += d * d;
    }
  });
  rstd = rsqrtf(warpSum(q) / float(cols) + eps);
}

template <int C, typename T>
__global__ void layerNormWarpKernel(const T *x, const float *gamma, const float *beta, T *y,
                                    int64_t rows, int64_t cols, float eps) {
  constexpr int V = kVec<T>;
  const int lane = threadIdx.x & 31;
  const int64_t row = blockIdx.x * int64_t(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= rows)
    return;
  float xv[C][V], mean, rstd;
  warpMeanRstd<C, T>(xv, x + row * cols, cols, eps, lane, mean, rstd);
  T *yr = y + row * cols;
  storeChunks<C>(yr, lane, cols, [&](int i, int k, int64_t c) {
    return fromFloat<T>((xv[i][k] - mean) * rstd * gamma[c + k] + (beta ? beta[c + k] : 0.0f));
  });
}

/// The gradient: each warp takes rows warp, warp + W, ... (W = the grid's
/// warps) and sums its rows' dgamma / dbeta terms in registers (a lane's
/// columns are the same in every row); the block adds its warps' sums in
/// warp order in shared memory and writes one partial row per block for
/// columnSums. Writing a partial row per input row instead (8 bytes per
/// element, 4x the bf16 input's bytes) made the kernel several times its
/// bytes' time.
template <int C, typename T>
__global__ void layerNormGradWarpKernel(const T *dy, const T *x, const float *gamma, T *dx,
                                        float *partial, int64_t rows, int64_t cols, float eps) {
  constexpr int V = kVec<T>;
  __shared__ float sums[2 * kMaxWarpCols];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  float gs[C][V], bs[C][V]; // this lane's sums of dy * xhat and dy
#pragma unroll
  for (int i = 0; i < C; ++i)
#pragma unroll
    for (int k = 0; k < V; ++k)
      gs[i][k] = bs[i][k] = 0.0f;
  const int64_t stride = int64_t(gridDim.x) * warps;
  for (int64_t row = int64_t(blockIdx.x) * warps + warp; row < rows; row += stride) {
    float xv[C][V], dv[C][V], mean, rstd;
    warpMeanRstd<C, T>(xv, x + row * cols, cols, eps, lane, mean, rstd);
    const T *dyr = dy + row * cols;
    float a = 0, b = 0; // sum(dy * gamma), sum(dy * gamma * xhat)
    forChunks<C, T>(lane, cols, [&](int i, int64_t c) {
      load16(dyr + c, dv[i]);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        float xh = (xv[i][k] - mean) * rstd, g = dv[i][k] * gamma[c + k];
        a += g;
        b += g * xh;
        xv[i][k] = xh;
        gs[i][k] += dv[i][k] * xh;
        bs[i][k] += dv[i][k];
      }
    });
    a = warpSum(a) / float(cols);
    b = warpSum(b) / float(cols);
    T *dxr = dx + row * cols;
    storeChunks<C>(dxr, lane, cols, [&](int i, int k, int64_t c) {
      return fromFloat<T>(rstd * (dv[i][k] * gamma[c + k] - a - xv[i][k] * b));
    });
  }
  // The block's sums, warp by warp (a fixed order: the same bits every run).
  for (int w = 0; w < warps; ++w) {
    if (warp == w)
      forChunks<C, T>(lane, cols, [&](int i, int64_t c) {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          sums[c + k] = (w ? sums[c + k] : 0.0f) + gs[i][k];
          sums[cols + c + k] = (w ? sums[cols + c + k] : 0.0f) + bs[i][k];
        }
      });
    __syncthreads();
  }
  float *pr = partial + int64_t(blockIdx.x) * 2 * cols;
  for (int64_t c = threadIdx.x; c < 2 * cols; c += blockDim.x)
    pr[c] = sums[c];
}

//===--- cross-entropy ----------------------------------------------------===//

/// rowStats in one pass over the row (an online softmax: each thread's
/// running maximum rescales its running sum), for the cross-entropy's
/// vocabulary-wide rows, which are read from memory once instead of
/// twice. -inf logits add nothing; a NaN makes the sum NaN.
template <typename T> __device__ RowStats rowStatsOnline(const T *xr, int64_t n) {
  float m = -INFINITY, s = 0.0f;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    float x = toFloat(xr[c]);
    if (x > m) {
      s = s * expf(m - x) + 1.0f;
      m = x;
    } else if (x != -INFINITY) {
      s += expf(x - m);
    }
  }
  float top = blockReduce<true>(m);
  float mine = m == -INFINITY ? 0.0f : s * expf(m - top);
  return {top, blockReduce<false>(mine)};
}

__device__ bool validLabel(int64_t l, int64_t C, bool hasIgnore, int64_t ignore) {
  return !(hasIgnore && l == ignore) && l >= 0 && l < C;
}

/// per[n] = logsumexp(x_n) - x_n[label] (0 where skipped).
template <typename T>
__global__ void crossEntropyRows(const T *logits, const int64_t *labels, float *per, int64_t C,
                                 bool hasIgnore, int64_t ignore) {
  int64_t n = blockIdx.x;
  int64_t l = labels[n];
  if (!validLabel(l, C, hasIgnore, ignore)) {
    if (threadIdx.x == 0)
      per[n] = 0.0f;
    return;
  }
  const T *xr = logits + n * C;
  RowStats st = rowStatsOnline(xr, C);
  if (threadIdx.x == 0)
    per[n] = logf(st.sum) + st.max - toFloat(xr[l]);
}

/// One block: the counts and the reduced loss (double, in index order per
/// thread then over the block: deterministic).
__global__ void crossEntropyReduce(const float *per, const int64_t *labels, float *loss,
                                   int64_t N, int64_t C, int reduction, bool hasIgnore,
                                   int64_t ignore, int64_t *bad) {
  __shared__ double sums[kThreads];
  __shared__ long long valid[kThreads], badCount[kThreads];
  double s = 0;
  long long v = 0, b = 0;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    int64_t l = labels[i];
    if (hasIgnore && l == ignore)
      continue;
    if (l >= 0 && l < C) {
      ++v;
      s += per[i];
    } else {
      ++b;
    }
  }
  sums[threadIdx.x] = s;
  valid[threadIdx.x] = v;
  badCount[threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0;
    long long tv = 0, tb = 0;
    for (int k = 0; k < blockDim.x; ++k) {
      t += sums[k];
      tv += valid[k];
      tb += badCount[k];
    }
    if (reduction != 0)
      loss[0] = float(reduction == 2 ? t / double(tv) : t);
    if (bad)
      *bad += tb;
  }
}

template <typename T, typename TOut>
__global__ void crossEntropyGradRows(const T *logits, const int64_t *labels, const float *dloss,
                                     TOut *dlogits, int64_t N, int64_t C, int reduction,
                                     bool hasIgnore, int64_t ignore,
                                     const long long *validCount) {
  int64_t n = blockIdx.x;
  int64_t l = labels[n];
  TOut *d = dlogits + n * C;
  if (!validLabel(l, C, hasIgnore, ignore)) {
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      d[c] = fromFloat<TOut>(0.0f);
    return;
  }
  const T *xr = logits + n * C;
  RowStats st = rowStatsOnline(xr, C);
  float m = st.max, s = st.sum;
  float g = reduction == 0   ? dloss[n]
            : reduction == 2 ? dloss[0] / float(*validCount)
                             : dloss[0];
  float k = g / s;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
    d[c] = fromFloat<TOut>(expf(toFloat(xr[c]) - m) * k - (c == l ? g : 0.0f));
}

__global__ void countValid(const int64_t *labels, int64_t N, int64_t C, bool hasIgnore,
                           int64_t ignore, long long *out) {
  __shared__ long long counts[kThreads];
  long long v = 0;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x)
    v += validLabel(labels[i], C, hasIgnore, ignore);
  counts[threadIdx.x] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    long long t = 0;
    for (int k = 0; k < blockDim.x; ++k)
      t += counts[k];
    *out = t;
  }
}

//===--- dropout (cpu::dropout's splitmix64 mask) -------------------------===//

__host__ __device__ inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

template <typename T>
__global__ void dropoutKernel(const T *x, T *y, uint8_t *mask, int64_t n, uint64_t key,
                              uint64_t threshold, float scale, uint64_t first) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    bool keep = (mix64(key + (first + uint64_t(i)) * kGolden) >> 40) >= threshold;
    mask[i] = keep;
    y[i] = fromFloat<T>(keep ? toFloat(x[i]) * scale : 0.0f);
  }
}

template <typename T>
__global__ void dropoutGradKernel(const T *dy, const uint8_t *mask, T *dx, int64_t n,
                                  float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = fromFloat<T>(mask[i] ? toFloat(dy[i]) * scale : 0.0f);
}

//===--- embedding, optimizer, norm ---------------------------------------===//

/// The table row of an index (negative ones count from the end), or -1
/// outside [-A, A).
__device__ __forceinline__ int64_t tableRow(int64_t k, int64_t A) {
  k += k < 0 ? A : 0;
  return k >= 0 && k < A ? k : -1;
}

__global__ void gatherKernel(const float *table, const int64_t *idx, float *out, int64_t A,
                             int64_t inner, int64_t nIdx, unsigned long long *bad) {
  int64_t total = nIdx * inner;
  for (int64_t w = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; w < total;
       w += int64_t(gridDim.x) * blockDim.x) {
    int64_t k = tableRow(idx[w / inner], A);
    out[w] = k >= 0 ? table[k * inner + w % inner] : 0.0f;
    // Each index once: at its row's first element.
    if (k < 0 && bad && w % inner == 0)
      atomicAdd(bad, 1ull);
  }
}

__global__ void gatherGradKernel(const float *dy, const int64_t *idx, float *dtable, int64_t A,
                                 int64_t inner, int64_t nIdx) {
  int64_t total = nIdx * inner;
  for (int64_t w = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; w < total;
       w += int64_t(gridDim.x) * blockDim.x) {
    int64_t k = tableRow(idx[w / inner], A);
    if (k >= 0)
      atomicAdd(dtable + k * inner + w % inner, dy[w]);
  }
}

__global__ void adamKernel(float *p, const float *g, float *m, float *v, int64_t n,
                           kernels::AdamScalars s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    kernels::adamElement(p[i], g[i], m[i], v[i], s);
}

/// Each block's double sum of squares (its warps' sums added in shared
/// memory), then one atomic addition per block.
__global__ void sumSquaresKernel(const float *x, int64_t n, double *out) {
  __shared__ double partial[32];
  double s = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    s += double(x[i]) * double(x[i]);
  for (int o = 16; o > 0; o >>= 1)
    s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0)
    partial[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0;
    for (int w = 0; w < int(blockDim.x >> 5); ++w)
      t += partial[w];
    atomicAdd(out, t);
  }
}

int rowThreads(int64_t cols) {
  int t = 32;
  while (t < 1024 && t < cols)
    t *= 2;
  return t;
}

int &vectorFlag() {
  static int on = [] {
    const char *e = std::getenv("DSRT_CUDA_VECTOR");
    return e && std::string(e) == "0" ? 0 : 1;
  }();
  return on;
}

} // namespace

bool vectorized() { return vectorFlag() != 0; }
void setVectorized(bool on) { vectorFlag() = on ? 1 : 0; }

bool deviceAvailable(std::string *why) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    if (why)
      *why = e != cudaSuccess ? std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e)
                              : std::string("no CUDA device");
    cudaGetLastError(); // clear it
    return false;
  }
  return true;
}

std::string deviceName() {
  int dev = 0;
  cudaDeviceProp prop;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  return prop.name;
}

void deviceMemory(size_t *freeBytes, size_t *totalBytes) {
  check(cudaMemGetInfo(freeBytes, totalBytes), "cudaMemGetInfo");
}

void zero(void *p, size_t bytes, void *stream) {
  check(cudaMemsetAsync(p, 0, bytes, asStream(stream)), "zero");
}

void *deviceAlloc(size_t bytes) {
  void *p = nullptr;
  check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
  return p;
}
void deviceFree(void *p) { cudaFree(p); }
void copyToDevice(void *dst, const void *src, size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "copy to the device");
}
void copyToHost(void *dst, const void *src, size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "copy to the host");
}
void synchronize(void *stream) { check(cudaStreamSynchronize(asStream(stream)), "synchronize"); }

Events::Events(size_t n) : events_(n, nullptr) {
  for (void *&e : events_) {
    cudaEvent_t ev;
    check(cudaEventCreate(&ev), "cudaEventCreate");
    e = ev;
  }
}
Events::~Events() {
  for (void *e : events_)
    cudaEventDestroy(static_cast<cudaEvent_t>(e));
}
void Events::record(size_t k, void *stream) {
  check(cudaEventRecord(static_cast<cudaEvent_t>(events_.at(k)), asStream(stream)),
        "cudaEventRecord");
}
float Events::elapsedMs(size_t from, size_t to) const {
  float ms = 0;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(events_.at(from)),
                             static_cast<cudaEvent_t>(events_.at(to))),
        "cudaEventElapsedTime");
  return ms;
}

template <typename T> void unary(kernels::Unary op, const T *x, T *y, int64_t n, void *stream) {
  if (packable<T>(n, {x, y})) {
    uint32_t packs = uint32_t(n / Pack<T>::N);
    unaryPackKernel<<<blocksFor(packs), kThreads, 0, asStream(stream)>>>(op, x, y, packs);
  } else {
    unaryKernel<<<blocksFor(n), kThreads, 0, asStream(stream)>>>(op, x, y, n);
  }
  launched("unary");
}

template <typename T>
void geluGrad(bool tanhApprox, const T *x, const T *dy, T *dx, int64_t n, void *stream) {
  if (packable<T>(n, {x, dy, dx})) {
    uint32_t packs = uint32_t(n / Pack<T>::N);
    geluGradPackKernel<<<blocksFor(packs), kThreads, 0, asStream(stream)>>>(tanhApprox, x, dy,
                                                                            dx, packs);
  } else {
    geluGradKernel<<<blocksFor(n), kThreads, 0, asStream(stream)>>>(tanhApprox, x, dy, dx, n);
  }
  launched("gelu_grad");
}

template <typename T>
void geluWithDerivative(bool tanhApprox, const T *x, T *y, T *d, int64_t n, void *stream) {
  if (n == 0)
    return;
  geluWithDerivativeKernel<<<blocksFor(n), kThreads, 0, asStream(stream)>>>(tanhApprox, x, y, d,
                                                                            n);
  launched("gelu_with_derivative");
}

template <typename T>
void binary(kernels::Binary op, const T *a, const T *b, int64_t bElements, T *out, int64_t n,
            int64_t cols, void *stream) {
  if (bElements != n && bElements != 1 && bElements != cols)
    throw CudaError("binary: the second operand must have n, cols or 1 elements");
  if (n && binaryPacked(op, a, 0, b, bElements == n ? 0 : bElements, out, n, stream))
    return;
  binaryKernel<<<blocksFor(n), kThreads, 0, asStream(stream)>>>(op, a, b, bElements, out, n,
                                                               cols);
  launched("binary");
}

template <typename T>
void layerNorm(const T *x, const float *gamma, const float *beta, T *y, int64_t rows,
               int64_t cols, float eps, void *stream) {
  if (rows == 0)
    return;
  if (vectorized() && vecRows<T>(cols, {x, y})) {
    byChunks<T>(cols, [&](auto c) {
      layerNormWarpKernel<decltype(c)::value, T>
          <<<warpRowBlocks(rows), 32 * kWarpRowsPerBlock, 0, asStream(stream)>>>(
              x, gamma, beta, y, rows, cols, eps);
    });
    launched("layer_norm");
    return;
  }
  layerNormKernel<<<unsigned(rows), rowThreads(cols), 0, asStream(stream)>>>(x, gamma, beta, y,
                                                                            cols, eps);
  launched("layer_norm");
}

/// Blocks of `threads` threads of `kernel` that the GPU holds at once
/// (its SMs times the occupancy), at least 1; asked once per kernel.
template <auto Kernel> int64_t residentBlocks(int threads) {
  static const int64_t blocks = [&] {
    int device = 0, sms = 0, perSm = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
          "cudaDeviceGetAttribute(multiProcessorCount)");
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, Kernel, threads, 0),
          "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    return std::max<int64_t>(1, int64_t(sms) * perSm);
  }();
  return blocks;
}

template <typename T>
void layerNormGrad(const T *dy, const T *x, const float *gamma, T *dx, float *dgamma,
                   float *dbeta, int64_t rows, int64_t cols, float eps, void *scratch,
                   void *stream) {
  if (rows == 0)
    return;
  // The per-row partial products for the column sums.
  float *partial = static_cast<float *>(scratch);
  int64_t partialRows = rows; // one per row, or one per block of the warp kernel
  if (vectorized() && vecRows<T>(cols, {dy, x, dx}))
    byChunks<T>(cols, [&](auto c) {
      constexpr auto kernel = layerNormGradWarpKernel<decltype(c)::value, T>;
      // One wave of blocks, as many as fit on the GPU at once.
      partialRows = std::min<int64_t>(warpRowBlocks(rows),
                                      residentBlocks<kernel>(32 * kWarpRowsPerBlock));
      kernel<<<unsigned(partialRows), 32 * kWarpRowsPerBlock, 0, asStream(stream)>>>(
          dy, x, gamma, dx, partial, rows, cols, eps);
    });
  else
    layerNormGradKernel<<<unsigned(rows), rowThreads(cols), 0, asStream(stream)>>>(
        dy, x, gamma, dx, partial, cols, eps);
  launched("layer_norm_grad");
  // dgamma | dbeta: the partials' column sums (in row slices, then in order).
  columnSums(partial, partialRows, 2 * cols, 1.0, dgamma, cols, dbeta,
             partial + size_t(partialRows) * size_t(2 * cols), stream);
}

size_t layerNormGradScratchBytes(int64_t rows, int64_t cols) {
  return size_t(rows) * size_t(2 * cols) * sizeof(float) + columnSumScratchBytes(rows, 2 * cols);
}

template <typename T> void softmax(const T *x, T *y, int64_t rows, int64_t n, void *stream) {
  if (rows == 0)
    return;
  if (vecRows<T>(n, {x, y}))
    byChunks<T>(n, [&](auto c) {
      softmaxVecKernel<decltype(c)::value, T>
          <<<warpRowBlocks(rows), 32 * kWarpRowsPerBlock, 0, asStream(stream)>>>(
              PlainRows<T>{x, n}, y, rows, n);
    });
  else if (n <= kMaxWarpCols)
    byRowWidth(n, [&](auto j) {
      softmaxWarpKernel<decltype(j)::value, T>
          <<<warpRowBlocks(rows), 32 * kWarpRowsPerBlock, 0, asStream(stream)>>>(
              PlainRows<T>{x, n}, y, rows, n);
    });
  else
    softmaxKernel<<<unsigned(rows), rowThreads(n), 0, asStream(stream)>>>(x, y, n);
  launched("softmax");
}

template <typename T>
void softmaxGrad(const T *y, const T *dy, T *dx, int64_t rows, int64_t n, void *stream) {
  if (rows == 0)
    return;
  if (vecRows<T>(n, {y, dy, dx}))
    byChunks<T>(n, [&](auto c) {
      softmaxGradVecKernel<decltype(c)::value, T>
          <<<warpRowBlocks(rows), 32 * kWarpRowsPerBlock, 0, asStream(stream)>>>(
              y, dy, dx, rows, n, PlainGradOut<T>{});
    });
  else if (n <= kMaxWarpCols)
    byRowWidth(n, [&](auto j) {
      softmaxGradWarpKernel<decltype(j)::value, T>
          <<<warpRowBlocks(rows), 32 * kWarpRowsPerBlock, 0, asStream(stream)>>>(
              y, dy, dx, rows, n, PlainGradOut<T>{});
    });
  else
    softmaxGradKernel<<<unsigned(rows), rowThreads(n), 0, asStream(stream)>>>(y, dy, dx, n);
  launched("softmax_grad");
}

template <typename T>
void maskedSoftmax(const T *x, const T *scale, SoftmaxMask mask, const T *fill, T *y,
                   int64_t rows, int64_t n, void *stream) {
  if (rows == 0)
    return;
  if (mask.cond && mask.condRows <= 0)
    throw CudaError("masked softmax: the mask needs at least one row");
  if (vecRows<T>(n, {x, y}))
    byChunks<T>(n, [&](auto c) {
      softmaxVecKernel<decltype(c)::value, T>
          <<<warpRowBlocks(rows), 32 * kWarpRowsPerBlock, 0, asStream(stream)>>>(
              MaskedRows<T>{x, scale, fill, mask, n}, y, rows, n);
    });
  else if (n <= kMaxWarpCols)
    byRowWidth(n, [&](auto j) {
      softmaxWarpKernel<decltype(j)::value, T>
          <<<warpRowBlocks(rows), 32 * kWarpRowsPerBlock, 0, asStream(stream)>>>(
              MaskedRows<T>{x, scale, fill, mask, n}, y, rows, n);
    });
  else
    maskedSoftmaxKernel<<<unsigned(rows), rowThreads(n), 0, asStream(stream)>>>(x, scale, mask,
                                                                               fill, y, n);
  launched("masked softmax");
}

template <typename T>
void maskedSoftmaxGrad(const T *y, const T *dy, SoftmaxMask mask, const T *fill, const T *scale,
                       T *dx, int64_t rows, int64_t n, void *stream) {
  if (rows == 0)
    return;
  if (mask.cond && mask.condRows <= 0)
    throw CudaError("masked softmax gradient: the mask needs at least one row");
  if (vecRows<T>(n, {y, dy, dx}))
    byChunks<T>(n, [&](auto c) {
      softmaxGradVecKernel<decltype(c)::value, T>
          <<<warpRowBlocks(rows), 32 * kWarpRowsPerBlock, 0, asStream(stream)>>>(
              y, dy, dx, rows, n, MaskedGradOut<T>{mask, fill, scale, n});
    });
  else if (n <= kMaxWarpCols)
    byRowWidth(n, [&](auto j) {
      softmaxGradWarpKernel<decltype(j)::value, T>
          <<<warpRowBlocks(rows), 32 * kWarpRowsPerBlock, 0, asStream(stream)>>>(
              y, dy, dx, rows, n, MaskedGradOut<T>{mask, fill, scale, n});
    });
  else
    maskedSoftmaxGradKernel<<<unsigned(rows), rowThreads(n), 0, asStream(stream)>>>(
        y, dy, mask, fill, scale, dx, n);
  launched("masked softmax gradient");
}

template <typename T>
void crossEntropy(const T *logits, const int64_t *labels, float *loss, int64_t N, int64_t C,
                  int reduction, bool hasIgnore, int64_t ignoreIndex, int64_t *bad,
                  void *scratch, void *stream) {
  float *per = reduction == 0 ? loss : static_cast<float *>(scratch);
  if (N > 0)
    crossEntropyRows<<<unsigned(N), rowThreads(C), 0, asStream(stream)>>>(logits, labels, per, C,
                                                                         hasIgnore, ignoreIndex);
  launched("cross_entropy rows");
  crossEntropyReduce<<<1, kThreads, 0, asStream(stream)>>>(per, labels, loss, N, C, reduction,
                                                           hasIgnore, ignoreIndex, bad);
  launched("cross_entropy reduce");
}

size_t crossEntropyScratchBytes(int64_t N) { return size_t(N) * sizeof(float); }

template <typename T, typename TOut>
void crossEntropyGrad(const T *logits, const int64_t *labels, const float *dloss, TOut *dlogits,
                      int64_t N, int64_t C, int reduction, bool hasIgnore, int64_t ignoreIndex,
                      void *scratch, void *stream) {
  auto *valid = static_cast<long long *>(scratch);
  countValid<<<1, kThreads, 0, asStream(stream)>>>(labels, N, C, hasIgnore, ignoreIndex, valid);
  launched("cross_entropy_grad count");
  if (N > 0)
    crossEntropyGradRows<<<unsigned(N), rowThreads(C), 0, asStream(stream)>>>(
        logits, labels, dloss, dlogits, N, C, reduction, hasIgnore, ignoreIndex, valid);
  launched("cross_entropy_grad");
}

size_t crossEntropyGradScratchBytes() { return sizeof(long long); }

template <typename T>
void dropout(const T *x, T *y, uint8_t *mask, int64_t n, float ratio, uint64_t seed,
             uint64_t rngStream, uint64_t counter, uint64_t first, void *stream) {
  uint64_t key = mix64(seed);
  key = mix64(key ^ (rngStream * 0xd6e8feb86659fd93ULL));
  key = mix64(key ^ (counter * 0xa0761d6478bd642fULL));
  float r = std::fmin(std::fmax(ratio, 0.0f), 1.0f);
  uint64_t threshold = uint64_t(std::ceil(double(r) * 16777216.0));
  float scale = r < 1.0f ? 1.0f / (1.0f - r) : 0.0f;
  dropoutKernel<<<blocksFor(n), kThreads, 0, asStream(stream)>>>(x, y, mask, n, key, threshold,
                                                                scale, first);
  launched("dropout");
}

template <typename T>
void dropoutGrad(const T *dy, const uint8_t *mask, T *dx, int64_t n, float ratio, void *stream) {
  float r = std::fmin(std::fmax(ratio, 0.0f), 1.0f);
  float scale = r < 1.0f ? 1.0f / (1.0f - r) : 0.0f;
  dropoutGradKernel<<<blocksFor(n), kThreads, 0, asStream(stream)>>>(dy, mask, dx, n, scale);
  launched("dropout_grad");
}

void gather(const float *table, const int64_t *idx, float *out, int64_t A, int64_t inner,
            int64_t nIdx, int64_t *bad, void *stream) {
  if (nIdx * inner == 0)
    return;
  gatherKernel<<<blocksFor(nIdx * inner), kThreads, 0, asStream(stream)>>>(
      table, idx, out, A, inner, nIdx, reinterpret_cast<unsigned long long *>(bad));
  launched("gather");
}

void gatherGrad(const float *dy, const int64_t *idx, float *dtable, int64_t A, int64_t inner,
                int64_t nIdx, void *stream) {
  check(cudaMemsetAsync(dtable, 0, size_t(A * inner) * sizeof(float), asStream(stream)),
        "gather_grad zero");
  if (nIdx * inner == 0)
    return;
  gatherGradKernel<<<blocksFor(nIdx * inner), kThreads, 0, asStream(stream)>>>(dy, idx, dtable,
                                                                              A, inner, nIdx);
  launched("gather_grad");
}

void adam(float *p, const float *g, float *m, float *v, int64_t n, float lr, float beta1,
          float beta2, float eps, float weightDecay, bool decoupled, bool biasCorrection,
          int64_t step, void *stream) {
  kernels::AdamScalars s =
      kernels::adamScalars(lr, beta1, beta2, eps, weightDecay, decoupled, biasCorrection, step);
  adamKernel<<<blocksFor(n), kThreads, 0, asStream(stream)>>>(p, g, m, v, n, s);
  launched("adam");
}

// The element types of the templated kernels: float and bf16.
#define DSRT_CUDA_INSTANTIATE(T)                                                                   \
  template void unary<T>(kernels::Unary, const T *, T *, int64_t, void *);                            \
  template void geluGrad<T>(bool, const T *, const T *, T *, int64_t, void *);                    \
  template void geluWithDerivative<T>(bool, const T *, T *, T *, int64_t, void *);               \
  template void binary<T>(kernels::Binary, const T *, const T *, int64_t, T *, int64_t, int64_t,      \
                          void *);                                                                \
  template void layerNorm<T>(const T *, const float *, const float *, T *, int64_t, int64_t,      \
                             float, void *);                                                      \
  template void layerNormGrad<T>(const T *, const T *, const float *, T *, float *, float *,      \
                                 int64_t, int64_t, float, void *, void *);                        \
  template void softmax<T>(const T *, T *, int64_t, int64_t, void *);                             \
  template void softmaxGrad<T>(const T *, const T *, T *, int64_t, int64_t, void *);              \
  template void maskedSoftmax<T>(const T *, const T *, SoftmaxMask, const T *, T *, int64_t,    \
                                 int64_t, void *);                                                \
  template void maskedSoftmaxGrad<T>(const T *, const T *, SoftmaxMask, const T *, const T *,    \
                                     T *, int64_t, int64_t, void *);                              \
  template void dropout<T>(const T *, T *, uint8_t *, int64_t, float, uint64_t, uint64_t,         \
                           uint64_t, uint64_t, void *);                                           \
  template void dropoutGrad<T>(const T *, const uint8_t *, T *, int64_t, float, void *);
DSRT_CUDA_INSTANTIATE(float)
DSRT_CUDA_INSTANTIATE(kernels::Bf16)
#undef DSRT_CUDA_INSTANTIATE
template void crossEntropy<float>(const float *, const int64_t *, float *, int64_t, int64_t, int,
                                  bool, int64_t, int64_t *, void *, void *);
template void crossEntropy<kernels::Bf16>(const kernels::Bf16 *, const int64_t *, float *, int64_t,
                                          int64_t, int, bool, int64_t, int64_t *, void *, void *);
template void crossEntropyGrad<float, float>(const float *, const int64_t *, const float *, float *,
                                             int64_t, int64_t, int, bool, int64_t, void *, void *);
template void crossEntropyGrad<kernels::Bf16, kernels::Bf16>(const kernels::Bf16 *, const int64_t *,
                                                             const float *, kernels::Bf16 *, int64_t,
                                                             int64_t, int, bool, int64_t, void *,
                                                             void *);

namespace {
__global__ void castToBf16Kernel(const float *x, kernels::Bf16 *y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = fromFloat<kernels::Bf16>(x[i]);
}
__global__ void castToFloatKernel(const kernels::Bf16 *x, float *y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = toFloat(x[i]);
}
/// Eight elements per thread: two float packs, one bf16 pack.
__global__ void castToBf16PackKernel(const float *x, kernels::Bf16 *y, uint32_t packs) {
  for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < packs; p += gridDim.x * blockDim.x) {
    Pack<float> lo = loadPack(x + size_t(p) * 8), hi = loadPack(x + size_t(p) * 8 + 4);
    Pack<kernels::Bf16> r;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      r.v[k] = fromFloat<kernels::Bf16>(lo.v[k]);
      r.v[k + 4] = fromFloat<kernels::Bf16>(hi.v[k]);
    }
    storePack(y + size_t(p) * 8, r);
  }
}
__global__ void castToFloatPackKernel(const kernels::Bf16 *x, float *y, uint32_t packs) {
  for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < packs; p += gridDim.x * blockDim.x) {
    Pack<kernels::Bf16> a = loadPack(x + size_t(p) * 8);
    Pack<float> lo, hi;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      lo.v[k] = toFloat(a.v[k]);
      hi.v[k] = toFloat(a.v[k + 4]);
    }
    storePack(y + size_t(p) * 8, lo);
    storePack(y + size_t(p) * 8 + 4, hi);
  }
}
} // namespace

void cast(const float *x, kernels::Bf16 *y, int64_t n, void *stream) {
  if (n == 0)
    return;
  if (packable<kernels::Bf16>(n, {x, y})) {
    uint32_t packs = uint32_t(n / 8);
    castToBf16PackKernel<<<blocksFor(packs), kThreads, 0, asStream(stream)>>>(x, y, packs);
    launched("cast to bf16");
    return;
  }
  castToBf16Kernel<<<blocksFor(n), kThreads, 0, asStream(stream)>>>(x, y, n);
  launched("cast to bf16");
}
void cast(const kernels::Bf16 *x, float *y, int64_t n, void *stream) {
  if (n == 0)
    return;
  if (packable<kernels::Bf16>(n, {x, y})) {
    uint32_t packs = uint32_t(n / 8);
    castToFloatPackKernel<<<blocksFor(packs), kThreads, 0, asStream(stream)>>>(x, y, packs);
    launched("cast to float");
    return;
  }
  castToFloatKernel<<<blocksFor(n), kThreads, 0, asStream(stream)>>>(x, y, n);
  launched("cast to float");
}

void sumSquares(const float *x, int64_t n, double *out, void *stream) {
  if (n == 0)
    return;
  // Enough blocks to fill the GPU, few enough atomics on one address.
  sumSquaresKernel<<<std::min(blocksFor(n), 1024), kThreads, 0, asStream(stream)>>>(x, n, out);
  launched("sum_sq");
}

} // namespace dsrt::cuda
