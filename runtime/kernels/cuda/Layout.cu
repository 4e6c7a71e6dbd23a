//===- Layout.cu - broadcasts, layouts and reductions on the GPU ----------===//
//
// The CUDA counterparts of cpu::binary / cpu::select with numpy
// broadcasting, cpu::transpose, cpu::slice(Grad) and cpu::reduce. Every
// kernel walks the elements of its result with a grid-stride loop and
// finds each operand's element through per-dimension strides (0 along a
// broadcast dimension), passed by value in a `Walk` (at most kMaxRank
// dims). Index arithmetic is 32-bit wherever every offset fits (64-bit
// division costs several times more and made these memory-bound kernels
// compute-bound), and operands that are whole, a scalar or a block of the
// result's trailing dims (a bias, a [T, T] mask under [B, H, T, T]) take a
// flat path: element i % m. Reductions over leading dims (bias and
// layer-norm gradients: [rows, cols] summed over rows) split the rows into
// slices whose double partial sums a second kernel adds in slice order:
// deterministic, and parallel enough for a few hundred columns; other
// reductions give each output element one thread adding in row-major
// order in double, as cpu::reduce does.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cuda/Internal.h"

#include <algorithm>

namespace dsrt::cuda {
namespace {

constexpr int kMaxRank = kernels::kMaxRank;

/// The result's dims and, for up to three operands, the stride of each
/// result dim in that operand (0: broadcast).
struct Walk {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t stride[3][kMaxRank] = {};
};

/// The strides of operand `xs` broadcast (numpy, right-aligned) to `os`.
void broadcastStrides(const kernels::Shape &xs, const kernels::Shape &os, int64_t *stride) {
  int off = os.rank - xs.rank;
  int64_t s = 1;
  for (int d = xs.rank - 1; d >= 0; --d) {
    stride[d + off] = xs.dims[d] == 1 ? 0 : s;
    s *= xs.dims[d];
  }
  for (int d = 0; d < off; ++d)
    stride[d] = 0;
}

Walk walkOf(const kernels::Shape &os, std::initializer_list<const kernels::Shape *> operands) {
  Walk w;
  w.rank = os.rank;
  for (int d = 0; d < os.rank; ++d)
    w.dims[d] = os.dims[d];
  int k = 0;
  for (const kernels::Shape *s : operands)
    broadcastStrides(*s, os, w.stride[k++]);
  return w;
}

/// Offsets in operands 0..K-1 of result element i, in index type I
/// (uint32_t where every offset fits).
template <int K, typename I>
__device__ __forceinline__ void offsets(const Walk &w, I i, I *off) {
  for (int k = 0; k < K; ++k)
    off[k] = 0;
  for (int d = w.rank - 1; d >= 0; --d) {
    I dim = I(w.dims[d]);
    I q = i % dim;
    i /= dim;
    for (int k = 0; k < K; ++k)
      off[k] += q * I(w.stride[k][d]);
  }
}

/// Grid-stride loop over [0, n) in index type I.
#define FOR_EACH(I, i, n)                                                                          \
  for (I i = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); i < I(n);                             \
       i += I(gridDim.x) * I(blockDim.x))

bool fits32(int64_t n) { return n < (int64_t(1) << 31); }

/// Calls launch(I{}) with the index type I of kernels whose offsets stay
/// below `extent`: uint32_t where they fit, else int64_t.
template <typename Launch> void byIndexWidth(int64_t extent, Launch &&launch) {
  if (fits32(extent))
    launch(uint32_t{});
  else
    launch(int64_t{});
}

/// Operand `xs` under result `os` read as element i % m: m = 0 when it is
/// the whole result (element i), its element count when it is a scalar
/// or the result's trailing dims (leading 1s aside); -1 otherwise.
int64_t flatMod(const kernels::Shape &xs, const kernels::Shape &os) {
  int lead = 0;
  while (lead < xs.rank && xs.dims[lead] == 1)
    ++lead;
  int r = xs.rank - lead;
  if (r > os.rank)
    return -1;
  for (int d = 0; d < r; ++d)
    if (xs.dims[lead + d] != os.dims[os.rank - r + d])
      return -1;
  int64_t m = xs.numel();
  return m == os.numel() ? 0 : m;
}

template <typename I> __device__ __forceinline__ I flatIndex(I i, I m) { return m ? i % m : i; }

template <typename I, typename T>
__global__ void binaryBroadcastKernel(kernels::Binary op, const T *a, const T *b, T *out, int64_t n,
                                      Walk w) {
  FOR_EACH(I, i, n) {
    I off[2];
    offsets<2>(w, i, off);
    out[i] = fromFloat<T>(applyBinary(op, toFloat(a[off[0]]), toFloat(b[off[1]])));
  }
}
template <typename I, typename T>
__global__ void binaryFlatKernel(kernels::Binary op, const T *a, I ma, const T *b, I mb, T *out,
                                 int64_t n) {
  FOR_EACH(I, i, n) {
    out[i] = fromFloat<T>(
        applyBinary(op, toFloat(a[flatIndex(i, ma)]), toFloat(b[flatIndex(i, mb)])));
  }
}

template <typename T>
__device__ __forceinline__ Pack<T> operandPack(const T *p, uint32_t m, uint32_t i) {
  if (m == 1) {
    Pack<T> r;
#pragma unroll
    for (int k = 0; k < Pack<T>::N; ++k)
      r.v[k] = p[0];
    return r;
  }
  return loadPack(p + (m ? i % m : i));
}
template <typename T>
__global__ void binaryPackKernel(kernels::Binary op, const T *a, uint32_t ma, const T *b,
                                 uint32_t mb, T *out, uint32_t packs) {
  constexpr int N = Pack<T>::N;
  for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < packs; p += gridDim.x * blockDim.x) {
    uint32_t i = p * N;
    Pack<T> x = operandPack(a, ma, i), y = operandPack(b, mb, i), r;
#pragma unroll
    for (int k = 0; k < N; ++k)
      r.v[k] = fromFloat<T>(applyBinary(op, toFloat(x.v[k]), toFloat(y.v[k])));
    storePack(out + i, r);
  }
}

template <typename I, typename T>
__global__ void selectKernel(const uint8_t *cond, const T *a, const T *b, T *out, int64_t n,
                             Walk w) {
  FOR_EACH(I, i, n) {
    I off[3];
    offsets<3>(w, i, off);
    out[i] = cond[off[0]] ? a[off[1]] : b[off[2]];
  }
}
template <typename I, typename T>
__global__ void selectFlatKernel(const uint8_t *cond, I mc, const T *a, I ma, const T *b, I mb,
                                 T *out, int64_t n) {
  FOR_EACH(I, i, n) {
    out[i] = cond[flatIndex(i, mc)] ? a[flatIndex(i, ma)] : b[flatIndex(i, mb)];
  }
}

/// y[i] = x[offset of i]: a transpose or a slice (strides and a base in x).
template <typename I, typename T>
__global__ void stridedCopyKernel(const T *x, int64_t base, T *y, int64_t n, Walk w) {
  const T *xb = x + base;
  FOR_EACH(I, i, n) {
    I off[1];
    offsets<1>(w, i, off);
    y[i] = xb[off[0]];
  }
}

/// dx[base + offset of i] = dy[i] (dx zeroed first): a slice's gradient.
template <typename I, typename T>
__global__ void stridedScatterKernel(const T *dy, T *dx, int64_t base, int64_t n, Walk w) {
  T *db = dx + base;
  FOR_EACH(I, i, n) {
    I off[1];
    offsets<1>(w, i, off);
    db[off[0]] = dy[i];
  }
}

/// Walk 0: the kept dims (their strides in x); walk 1: the reduced ones.
template <typename T>
__global__ void reduceKernel(kernels::Reduce op, const T *x, T *y, int64_t kept, int64_t reduced,
                             Walk keptW, Walk reducedW) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < kept;
       o += int64_t(gridDim.x) * blockDim.x) {
    int64_t base[1];
    offsets<1, int64_t>(keptW, o, base);
    double r = op == kernels::Reduce::Max ? -INFINITY : 0.0;
    for (int64_t j = 0; j < reduced; ++j) {
      int64_t off[1];
      offsets<1, int64_t>(reducedW, j, off);
      double v = toFloat(x[base[0] + off[0]]);
      r = op == kernels::Reduce::Max ? fmax(r, v) : r + v;
    }
    if (op == kernels::Reduce::Mean)
      r /= double(reduced);
    y[o] = fromFloat<T>(float(r));
  }
}

__global__ void scaleKernel(float *x, int64_t n, float s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] *= s;
}

__global__ void fillKernel(float *x, int64_t n, float v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = v;
}

__global__ void causalFlagsKernel(uint8_t *cond, int64_t T, int64_t S) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < T * S;
       i += int64_t(gridDim.x) * blockDim.x)
    cond[i] = (i % S) > (i / S) ? 1 : 0;
}

/// Column sums, pass 1: block (x, s) sums columns [32 x, + 32) over row
/// slice s; thread (c, r) adds rows r, r + 8, ... of its column in double,
/// then the 8 partials are added in order.
constexpr int kSumRows = 8;
template <typename T>
__global__ void columnPartialKernel(const T *x, int64_t rows, int64_t cols, int64_t rowsPer,
                                    double *partial) {
  __shared__ double part[kSumRows][32];
  int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x;
  int64_t r0 = int64_t(blockIdx.y) * rowsPer, r1 = min(rows, r0 + rowsPer);
  double s = 0;
  if (c < cols)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kSumRows)
      s += toFloat(x[r * cols + c]);
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    double t = 0;
    for (int k = 0; k < kSumRows; ++k)
      t += part[k][threadIdx.x];
    partial[int64_t(blockIdx.y) * cols + c] = t;
  }
}
/// Pass 2: the slices' partials in slice order; column c < split goes to
/// out[c], the others to out2[c - split] (when out2 is not null).
template <typename T>
__global__ void columnFinalKernel(const double *partial, int64_t slices, int64_t cols,
                                  double divisor, T *out, int64_t split, T *out2) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < cols;
       c += int64_t(gridDim.x) * blockDim.x) {
    double t = 0;
    for (int64_t s = 0; s < slices; ++s)
      t += partial[s * cols + c];
    T v = fromFloat<T>(float(t / divisor));
    if (c < split)
      out[c] = v;
    else if (out2)
      out2[c - split] = v;
  }
}

/// Row slices for `cols` columns: enough blocks to fill the GPU (about two
/// per SM of an H100), each slice at least kSumRows rows. (Eight per SM
/// changed nothing measurable: the layer-norm gradient with its column
/// sums took 150 us per call on GPT-2 small's [8192, 768] either way,
/// H200.)
int64_t columnSlices(int64_t rows, int64_t cols) {
  int64_t colBlocks = (cols + 31) / 32;
  int64_t want = (264 + colBlocks - 1) / colBlocks;
  int64_t most = std::max<int64_t>(1, (rows + kSumRows - 1) / kSumRows);
  return std::max<int64_t>(1, std::min<int64_t>(std::min(want, most), 65535));
}

/// The leading reduced dims of a reduction over a prefix of dims (rows),
/// 0 when the reduced axes are not a leading prefix.
int leadingPrefix(const kernels::Shape &xs, uint32_t mask) {
  int p = 0;
  while (p < xs.rank && ((mask >> p) & 1u))
    ++p;
  return p > 0 && (mask >> p) == 0 ? p : 0;
}

} // namespace

size_t columnSumScratchBytes(int64_t rows, int64_t cols) {
  return size_t(columnSlices(rows, cols)) * size_t(cols) * sizeof(double);
}

template <typename TIn, typename TOut>
void columnSums(const TIn *x, int64_t rows, int64_t cols, double divisor, TOut *out, int64_t split,
                TOut *out2, void *scratch, void *stream) {
  if (cols == 0)
    return;
  int64_t slices = columnSlices(rows, cols);
  int64_t rowsPer = (rows + slices - 1) / slices;
  auto *partial = static_cast<double *>(scratch);
  dim3 grid(unsigned((cols + 31) / 32), unsigned(slices)), block(32, kSumRows);
  columnPartialKernel<<<grid, block, 0, asStream(stream)>>>(x, rows, cols, rowsPer, partial);
  launched("column sums");
  columnFinalKernel<<<blocksFor(cols), kThreads, 0, asStream(stream)>>>(
      partial, slices, cols, divisor, out, split, out2);
  launched("column sums (final)");
}

template void columnSums<float, float>(const float *, int64_t, int64_t, double, float *, int64_t,
                                       float *, void *, void *);

template <typename T>
bool binaryPacked(kernels::Binary op, const T *a, int64_t ma, const T *b, int64_t mb, T *out,
                  int64_t n, void *stream) {
  constexpr int N = Pack<T>::N;
  auto whole = [](int64_t m) { return m == 0 || (m > 1 && m % N == 0); };
  if (!(whole(ma) || ma == 1) || !(whole(mb) || mb == 1) || !packable<T>(n, {out}) ||
      (ma != 1 && !aligned16(a)) || (mb != 1 && !aligned16(b)))
    return false;
  uint32_t packs = uint32_t(n / N);
  binaryPackKernel<T><<<blocksFor(packs), kThreads, 0, asStream(stream)>>>(
      op, a, uint32_t(ma), b, uint32_t(mb), out, packs);
  launched("binary (packed)");
  return true;
}

template <typename T>
void binary(kernels::Binary op, const T *a, const kernels::Shape &as, const T *b, const kernels::Shape &bs,
            T *out, const kernels::Shape &os, void *stream) {
  int64_t n = os.numel();
  if (n == 0)
    return;
  int64_t ma = flatMod(as, os), mb = flatMod(bs, os);
  if (ma >= 0 && mb >= 0 && binaryPacked(op, a, ma, b, mb, out, n, stream))
    return;
  if (fits32(n) && ma >= 0 && mb >= 0)
    binaryFlatKernel<uint32_t, T><<<blocksFor(n), kThreads, 0, asStream(stream)>>>(
        op, a, uint32_t(ma), b, uint32_t(mb), out, n);
  else
    byIndexWidth(n, [&](auto index) {
      binaryBroadcastKernel<decltype(index), T><<<blocksFor(n), kThreads, 0, asStream(stream)>>>(
          op, a, b, out, n, walkOf(os, {&as, &bs}));
    });
  launched("binary (broadcast)");
}

template <typename T>
void select(const uint8_t *cond, const kernels::Shape &cs, const T *a, const kernels::Shape &as,
            const T *b, const kernels::Shape &bs, T *out, const kernels::Shape &os, void *stream) {
  int64_t n = os.numel();
  if (n == 0)
    return;
  int64_t mc = flatMod(cs, os), ma = flatMod(as, os), mb = flatMod(bs, os);
  if (fits32(n) && mc >= 0 && ma >= 0 && mb >= 0)
    selectFlatKernel<uint32_t, T><<<blocksFor(n), kThreads, 0, asStream(stream)>>>(
        cond, uint32_t(mc), a, uint32_t(ma), b, uint32_t(mb), out, n);
  else
    byIndexWidth(n, [&](auto index) {
      selectKernel<decltype(index), T><<<blocksFor(n), kThreads, 0, asStream(stream)>>>(
          cond, a, b, out, n, walkOf(os, {&cs, &as, &bs}));
    });
  launched("select");
}

/// The walk over 16-byte packs of T instead of elements: where the walk's
/// innermost dim is contiguous in the strided operand (stride 1), and its
/// extent, the other strides and `base` are multiples of a pack, and both
/// pointers are aligned. Rescales w, base and n and returns true.
template <typename T>
bool packWalk(Walk &w, int64_t &base, int64_t &n, const void *x, const void *y) {
  constexpr int N = Pack<T>::N;
  int r = w.rank - 1;
  if (!vectorized() || r < 0 || w.stride[0][r] != 1 || w.dims[r] % N || base % N ||
      !aligned16(x) || !aligned16(y))
    return false;
  for (int d = 0; d < r; ++d)
    if (w.stride[0][d] % N)
      return false;
  w.dims[r] /= N;
  for (int d = 0; d < r; ++d)
    w.stride[0][d] /= N;
  base /= N;
  n /= N;
  return true;
}

/// y[i] = x[base + offset of i] over the walk: 16-byte packs where
/// packWalk allows, else elements; offsets within `extent` elements.
template <typename T>
void stridedCopy(const T *x, int64_t base, T *y, int64_t n, Walk w, int64_t extent,
                 void *stream) {
  if (packWalk<T>(w, base, n, x, y)) {
    byIndexWidth(extent, [&](auto index) {
      stridedCopyKernel<decltype(index), uint4><<<blocksFor(n), kThreads, 0, asStream(stream)>>>(
          reinterpret_cast<const uint4 *>(x), base, reinterpret_cast<uint4 *>(y), n, w);
    });
    return;
  }
  byIndexWidth(extent, [&](auto index) {
    stridedCopyKernel<decltype(index), T><<<blocksFor(n), kThreads, 0, asStream(stream)>>>(
        x, base, y, n, w);
  });
}

template <typename T>
void transpose(const T *x, const kernels::Shape &xs, const int64_t *perm, T *y, void *stream) {
  int64_t n = xs.numel();
  if (n == 0)
    return;
  // Result dim d is x's dim perm[d]: its stride is that dim's stride in x.
  int64_t xStride[kMaxRank];
  int64_t s = 1;
  for (int d = xs.rank - 1; d >= 0; --d) {
    xStride[d] = s;
    s *= xs.dims[d];
  }
  Walk w;
  w.rank = xs.rank;
  for (int d = 0; d < xs.rank; ++d) {
    w.dims[d] = xs.dims[perm[d]];
    w.stride[0][d] = xStride[perm[d]];
  }
  stridedCopy(x, 0, y, n, w, n, stream);
  launched("transpose");
}

namespace {
/// The walk of a slice's elements in the big tensor: dims of the small
/// one, strides of the big one times the step; `base` the first element.
Walk sliceWalk(const kernels::Shape &big, const kernels::Shape &small, const int64_t *start,
               const int64_t *step, int64_t &base) {
  Walk w;
  w.rank = small.rank;
  int64_t s = 1;
  base = 0;
  for (int d = big.rank - 1; d >= 0; --d) {
    w.dims[d] = small.dims[d];
    w.stride[0][d] = s * step[d];
    base += start[d] * s;
    s *= big.dims[d];
  }
  return w;
}
} // namespace

template <typename T>
void slice(const T *x, const kernels::Shape &xs, const int64_t *start, const int64_t *step, T *y,
           const kernels::Shape &ys, void *stream) {
  int64_t n = ys.numel();
  if (n == 0)
    return;
  int64_t base;
  Walk w = sliceWalk(xs, ys, start, step, base);
  // Offsets run over the big tensor.
  stridedCopy(x, base, y, n, w, xs.numel(), stream);
  launched("slice");
}

namespace {
/// dy [ys] written at the positions of dx [xs] a slice (start, step)
/// reads; the other positions are left as they are.
template <typename T>
void scatterSlice(const T *dy, const kernels::Shape &ys, const int64_t *start, const int64_t *step,
                  T *dx, const kernels::Shape &xs, void *stream) {
  int64_t n = ys.numel();
  if (n == 0)
    return;
  int64_t base;
  Walk w = sliceWalk(xs, ys, start, step, base);
  if (packWalk<T>(w, base, n, dx, dy))
    byIndexWidth(xs.numel(), [&](auto index) {
      stridedScatterKernel<decltype(index), uint4>
          <<<blocksFor(n), kThreads, 0, asStream(stream)>>>(
              reinterpret_cast<const uint4 *>(dy), reinterpret_cast<uint4 *>(dx), base, n, w);
    });
  else
    byIndexWidth(xs.numel(), [&](auto index) {
      stridedScatterKernel<decltype(index), T><<<blocksFor(n), kThreads, 0, asStream(stream)>>>(
          dy, dx, base, n, w);
    });
}
} // namespace

template <typename T>
void sliceGrad(const T *dy, const kernels::Shape &ys, const int64_t *start, const int64_t *step, T *dx,
               const kernels::Shape &xs, void *stream) {
  check(cudaMemsetAsync(dx, 0, size_t(xs.numel()) * sizeof(T), asStream(stream)),
        "slice_grad zero");
  scatterSlice(dy, ys, start, step, dx, xs, stream);
  launched("slice_grad");
}

template <typename T>
void concat(const T *const *xs, const kernels::Shape *shapes, int count, int axis, T *y,
            const kernels::Shape &ys, void *stream) {
  int64_t start[kernels::kMaxRank] = {}, step[kernels::kMaxRank];
  for (int d = 0; d < ys.rank; ++d)
    step[d] = 1;
  // Each input is the slice of the result at its offset along the axis.
  for (int k = 0; k < count; ++k) {
    scatterSlice(xs[k], shapes[k], start, step, y, ys, stream);
    start[axis] += shapes[k].dims[axis];
  }
  launched("concat");
}

size_t reduceScratchBytes(const kernels::Shape &xs, uint32_t axesMask) {
  int p = leadingPrefix(xs, axesMask);
  if (!p)
    return 0;
  int64_t rows = 1;
  for (int d = 0; d < p; ++d)
    rows *= xs.dims[d];
  return columnSumScratchBytes(rows, xs.numel() / std::max<int64_t>(rows, 1));
}

template <typename T>
void reduce(kernels::Reduce op, const T *x, const kernels::Shape &xs, uint32_t axesMask, T *y,
            void *scratch, void *stream) {
  if (int p = leadingPrefix(xs, axesMask); p && op != kernels::Reduce::Max) {
    int64_t rows = 1;
    for (int d = 0; d < p; ++d)
      rows *= xs.dims[d];
    if (rows == 0 || xs.numel() == 0) {
      // An empty sum is 0 (a mean of nothing, NaN, as 0.0 / 0).
      int64_t cols = 1;
      for (int d = p; d < xs.rank; ++d)
        cols *= xs.dims[d];
      check(cudaMemsetAsync(y, 0, size_t(cols) * sizeof(T), asStream(stream)), "empty sum");
      return;
    }
    columnSums(x, rows, xs.numel() / rows, op == kernels::Reduce::Mean ? double(rows) : 1.0, y,
               INT64_MAX, static_cast<T *>(nullptr), scratch, stream);
    return;
  }
  Walk keptW, reducedW;
  int64_t s = 1, kept = 1, reduced = 1;
  int64_t stride[kMaxRank];
  for (int d = xs.rank - 1; d >= 0; --d) {
    stride[d] = s;
    s *= xs.dims[d];
  }
  for (int d = 0; d < xs.rank; ++d) {
    Walk &w = (axesMask >> d) & 1u ? reducedW : keptW;
    w.dims[w.rank] = xs.dims[d];
    w.stride[0][w.rank] = stride[d];
    ++w.rank;
    ((axesMask >> d) & 1u ? reduced : kept) *= xs.dims[d];
  }
  if (kept == 0)
    return;
  reduceKernel<T><<<blocksFor(kept), kThreads, 0, asStream(stream)>>>(op, x, y, kept, reduced,
                                                                     keptW, reducedW);
  launched("reduce");
}

#define DSRT_CUDA_INSTANTIATE(T)                                                                   \
  template bool binaryPacked<T>(kernels::Binary, const T *, int64_t, const T *, int64_t, T *,       \
                                int64_t, void *);                                                 \
  template void binary<T>(kernels::Binary, const T *, const kernels::Shape &, const T *,                  \
                          const kernels::Shape &, T *, const kernels::Shape &, void *);                   \
  template void select<T>(const uint8_t *, const kernels::Shape &, const T *, const kernels::Shape &,     \
                          const T *, const kernels::Shape &, T *, const kernels::Shape &, void *);        \
  template void transpose<T>(const T *, const kernels::Shape &, const int64_t *, T *, void *);        \
  template void slice<T>(const T *, const kernels::Shape &, const int64_t *, const int64_t *, T *,    \
                         const kernels::Shape &, void *);                                             \
  template void sliceGrad<T>(const T *, const kernels::Shape &, const int64_t *, const int64_t *,     \
                             T *, const kernels::Shape &, void *);                                    \
  template void concat<T>(const T *const *, const kernels::Shape *, int, int, T *,                    \
                          const kernels::Shape &, void *);                                            \
  template void reduce<T>(kernels::Reduce, const T *, const kernels::Shape &, uint32_t, T *, void *,      \
                          void *);
DSRT_CUDA_INSTANTIATE(float)
DSRT_CUDA_INSTANTIATE(kernels::Bf16)
#undef DSRT_CUDA_INSTANTIATE

void scale(float *x, int64_t n, float s, void *stream) {
  if (n == 0)
    return;
  scaleKernel<<<blocksFor(n), kThreads, 0, asStream(stream)>>>(x, n, s);
  launched("scale");
}

void fill(float *x, int64_t n, float v, void *stream) {
  if (n == 0)
    return;
  fillKernel<<<blocksFor(n), kThreads, 0, asStream(stream)>>>(x, n, v);
  launched("fill");
}

void causalFlags(uint8_t *cond, int64_t T, int64_t S, void *stream) {
  if (T * S == 0)
    return;
  causalFlagsKernel<<<blocksFor(T * S), kThreads, 0, asStream(stream)>>>(cond, T, S);
  launched("causalFlags");
}

namespace {
__global__ void unpadRowsKernel(const uint16_t *src, int64_t srcRows, int64_t srcCols,
                                uint16_t *dst, int64_t rows, int64_t cols, int64_t total) {
  for (int64_t r = blockIdx.y; r < total; r += gridDim.y) {
    const int64_t b = r / rows, rr = r - b * rows;
    const uint16_t *sr = src + (b * srcRows + rr) * srcCols;
    uint16_t *dr = dst + r * cols;
    for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < cols;
         c += int64_t(gridDim.x) * blockDim.x)
      dr[c] = sr[c];
  }
}
/// Row `r` of `rows` (all batches' rows back to back) per y-block, its
/// columns over x: dst[r][c] = r's row in src, c < cols, else 0; eight
/// elements a thread, one 16-byte store of a padded row's chunk (padded
/// rows are multiples of 8 long). It halved the vocabulary head's
/// dh and dw GEMMs with their copies (2.5 to 1.3 ms each, GPT-2 small,
/// H200). Unpadding the same way (a 16-byte load, eight 2-byte stores into
/// the unaligned rows) made the logits GEMM slower (2.3 to 2.8 ms): the
/// unpad stays element by element, every store coalesced.
__global__ void padRowsKernel(const uint16_t *src, int64_t rows, int64_t cols, int64_t srcRows,
                              uint16_t *dst, int64_t dstRows, int64_t dstCols, int64_t total) {
  for (int64_t r = blockIdx.y; r < total; r += gridDim.y) {
    const int64_t b = r / dstRows, rr = r - b * dstRows;
    const uint16_t *sr = src + (b * srcRows + rr) * cols;
    uint16_t *dr = dst + r * dstCols;
    const bool inside = rr < rows;
    for (int64_t c = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * 8; c < dstCols;
         c += int64_t(gridDim.x) * blockDim.x * 8) {
      alignas(16) uint16_t v[8];
#pragma unroll
      for (int k = 0; k < 8; ++k)
        v[k] = inside && c + k < cols ? sr[c + k] : uint16_t(0);
      *reinterpret_cast<uint4 *>(dr + c) = *reinterpret_cast<const uint4 *>(v);
    }
  }
}
dim3 rowsGrid(int64_t rows, int64_t cols) {
  int64_t x = std::min<int64_t>((cols + kThreads - 1) / kThreads, 64);
  return dim3(unsigned(std::max<int64_t>(x, 1)), unsigned(std::min<int64_t>(rows, 65535)));
}
} // namespace

void padMatrices16(const void *src, int64_t batches, int64_t rows, int64_t cols, void *dst,
                   int64_t dstRows, int64_t dstCols, void *stream) {
  int64_t total = batches * dstRows;
  if (total == 0 || dstCols == 0)
    return;
  if (dstCols % 8 != 0 || !aligned16(dst))
    throw CudaError("pad matrices: the padded rows must be multiples of 8 elements, 16-byte "
                    "aligned");
  padRowsKernel<<<rowsGrid(total, dstCols / 8), kThreads, 0, asStream(stream)>>>(
      static_cast<const uint16_t *>(src), rows, cols, rows, static_cast<uint16_t *>(dst),
      dstRows, dstCols, total);
  launched("pad matrices");
}

void unpadMatrices16(const void *src, int64_t srcRows, int64_t srcCols, int64_t batches,
                     int64_t rows, int64_t cols, void *dst, void *stream) {
  int64_t total = batches * rows;
  if (total == 0 || cols == 0)
    return;
  unpadRowsKernel<<<rowsGrid(total, cols), kThreads, 0, asStream(stream)>>>(
      static_cast<const uint16_t *>(src), srcRows, srcCols, static_cast<uint16_t *>(dst), rows,
      cols, total);
  launched("unpad matrices");
}

} // namespace dsrt::cuda
