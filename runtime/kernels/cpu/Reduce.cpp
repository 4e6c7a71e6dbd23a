//===- Reduce.cpp - axis reductions and the global-norm sum of squares ----===//
//
// Results never depend on the thread count: threads split the outputs (each
// output is summed in one fixed order), and whole-tensor reductions sum
// fixed-size chunks whose partials are then added in chunk order. reduce is
// a template over the input's element type (float, Bf16, Fp16); results
// and accumulators are float (double for whole-tensor sums).
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Half.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

namespace dsrt::cpu {
using namespace detail;

namespace {

constexpr int64_t kChunk = 1 << 14;

/// Dims of one kind (kept or reduced) with their strides in x, iterated
/// in row-major order.
struct Dims {
  int rank = 0;
  int64_t size[kMaxRank];
  int64_t stride[kMaxRank];

  int64_t count() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i)
      n *= size[i];
    return n;
  }
  /// Offset in x of the i-th index in row-major order.
  int64_t offset(int64_t i) const {
    int64_t off = 0;
    for (int d = rank - 1; d >= 0; --d) {
      off += (i % size[d]) * stride[d];
      i /= size[d];
    }
    return off;
  }
  /// Calls f(offset) for every index in row-major order.
  template <class F> void forEach(F &&f) const {
    int64_t idx[kMaxRank] = {}, off = 0;
    for (int64_t n = count(); n > 0; --n) {
      f(off);
      for (int d = rank - 1; d >= 0; --d) {
        off += stride[d];
        if (++idx[d] < size[d])
          break;
        off -= stride[d] * size[d];
        idx[d] = 0;
      }
    }
  }
};

template <class T> float rowSum(const T *x, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i)
    s += toFloat(x[i]);
  return s;
}

template <class T> float rowMaxT(const T *x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return rowMax(x, n);
  } else {
    float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
    for (int64_t i = 0; i < n; ++i)
      m = maxOf(m, toFloat(x[i]));
    return m;
  }
}

/// Whole-tensor reduction over fixed chunks; sums accumulate in double.
template <class T> float reduceAll(Reduce op, const T *x, int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  double *part = scratch<double, 0>(chunks);
  parallelFor(chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      const T *p = x + c * kChunk;
      const int64_t len = std::min(kChunk, n - c * kChunk);
      if (op == Reduce::Max) {
        part[c] = rowMaxT(p, len);
        continue;
      }
      double s = 0.0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < len; ++i)
        s += toFloat(p[i]);
      part[c] = s;
    }
  });
  double r = op == Reduce::Max ? -std::numeric_limits<double>::infinity() : 0.0;
  for (int64_t c = 0; c < chunks; ++c)
    r = op == Reduce::Max ? std::max(r, part[c]) : r + part[c];
  return float(op == Reduce::Mean ? r / double(n) : r);
}

/// Column sums in kColumnSumRows's order (Half.h).
template <class T> void columnSumT(const T *x, int64_t rows, int64_t cols, float *y) {
  sumColumns(columnSumTasks(rows, cols), y,
             [&](int64_t, int64_t r0, int64_t r, int64_t c0, int64_t c, float *p) {
               columnPartial(x + r0 * cols + c0, r, c, cols, p + c0);
             });
}

template <class T>
void reduceT(Reduce op, const T *x, const Shape &xs, uint32_t axesMask,
             float *y) {
  // Merge adjacent dims of the same kind and drop size-1 dims; x's strides
  // follow from the merged sizes since x is dense.
  int rank = 0;
  int64_t size[kMaxRank];
  bool reduced[kMaxRank];
  int64_t outCount = 1, redCount = 1;
  for (int d = 0; d < xs.rank; ++d) {
    const bool r = (axesMask >> d) & 1;
    (r ? redCount : outCount) *= xs.dims[d];
    if (xs.dims[d] == 1)
      continue;
    if (rank > 0 && reduced[rank - 1] == r) {
      size[rank - 1] *= xs.dims[d];
    } else {
      size[rank] = xs.dims[d];
      reduced[rank++] = r;
    }
  }
  if (outCount == 0)
    return;
  if (redCount == 0) {
    const float empty = op == Reduce::Sum ? 0.0f
                        : op == Reduce::Mean
                            ? std::nanf("")
                            : -std::numeric_limits<float>::infinity();
    fill(y, outCount, empty);
    return;
  }
  if (redCount == 1) {
    if constexpr (std::is_same_v<T, float>)
      std::memcpy(y, x, outCount * sizeof(float));
    else
      cast(x, std::is_same_v<T, Bf16> ? DType::BF16 : DType::F16, y, DType::F32,
           outCount);
    return;
  }
  if (outCount == 1) {
    y[0] = reduceAll(op, x, redCount);
    return;
  }

  Dims kept, red;
  int64_t stride = 1;
  int64_t strides[kMaxRank];
  for (int d = rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= size[d];
  }
  for (int d = 0; d < rank; ++d) {
    Dims &g = reduced[d] ? red : kept;
    g.size[g.rank] = size[d];
    g.stride[g.rank++] = strides[d];
  }
  const bool mean = op == Reduce::Mean;
  const float count = float(redCount);

  if (rank == 2 && reduced[0] && op != Reduce::Max) {
    // A [rows, cols] matrix's column sums (a bias gradient): the order the
    // GEMM epilogue's column sums share.
    columnSumT(x, size[0], size[1], y);
    if (mean)
      for (int64_t c = 0; c < size[1]; ++c)
        y[c] /= count;
    return;
  }

  if (reduced[rank - 1]) {
    // Innermost dim reduced: every output is a sum of contiguous runs.
    const int64_t run = red.size[--red.rank];
    parallelFor(outCount, std::max<int64_t>(1, kGrain / redCount),
                [&](int64_t b, int64_t e) {
                  for (int64_t o = b; o < e; ++o) {
                    const T *base = x + kept.offset(o);
                    float acc = op == Reduce::Max
                                    ? -std::numeric_limits<float>::infinity()
                                    : 0.0f;
                    red.forEach([&](int64_t off) {
                      acc = op == Reduce::Max
                                ? std::max(acc, rowMaxT(base + off, run))
                                : acc + rowSum(base + off, run);
                    });
                    y[o] = mean ? acc / count : acc;
                  }
                });
    return;
  }

  // Innermost dim kept: accumulate whole rows of it, threads splitting the
  // output rows and, when there are few of them, the columns.
  const int64_t cols = kept.size[--kept.rank];
  const int64_t outRows = outCount / cols;
  const int threads = omp_get_max_threads();
  int64_t colBlock = cols;
  if (outRows < threads)
    colBlock = std::max<int64_t>(64, (cols * outRows / threads + 15) / 16 * 16);
  const int64_t colBlocks = (cols + colBlock - 1) / colBlock;
  const int64_t work = outRows * colBlocks;
  parallelFor(work, std::max<int64_t>(1, kGrain / (redCount * colBlock)),
              [&](int64_t b, int64_t e) {
                for (int64_t w = b; w < e; ++w) {
                  const int64_t o = w / colBlocks;
                  const int64_t c0 = (w % colBlocks) * colBlock;
                  const int64_t len = std::min(colBlock, cols - c0);
                  const T *base = x + kept.offset(o) + c0;
                  float *__restrict out = y + o * cols + c0;
                  const float init =
                      op == Reduce::Max
                          ? -std::numeric_limits<float>::infinity()
                          : 0.0f;
                  for (int64_t i = 0; i < len; ++i)
                    out[i] = init;
                  red.forEach([&](int64_t off) {
                    const T *__restrict in = base + off;
                    if (op == Reduce::Max) {
                      for (int64_t i = 0; i < len; ++i)
                        out[i] = maxOf(out[i], toFloat(in[i]));
                    } else {
                      for (int64_t i = 0; i < len; ++i)
                        out[i] += toFloat(in[i]);
                    }
                  });
                  if (mean) {
                    const float divisor = count; // not aliased by out
                    for (int64_t i = 0; i < len; ++i)
                      out[i] /= divisor;
                  }
                }
              });
}

} // namespace

void reduce(Reduce op, const float *x, const Shape &xs, uint32_t axesMask,
            float *y) {
  reduceT(op, x, xs, axesMask, y);
}
void reduce(Reduce op, const Bf16 *x, const Shape &xs, uint32_t axesMask,
            float *y) {
  reduceT(op, x, xs, axesMask, y);
}
void reduce(Reduce op, const Fp16 *x, const Shape &xs, uint32_t axesMask,
            float *y) {
  reduceT(op, x, xs, axesMask, y);
}

namespace {
/// One chunk's sum of squares. Not inlined, so that every element type
/// runs this same code over float values (a narrow chunk widened first)
/// and sums in the same order: the narrow sums are bitwise the widened
/// ones on every CPU, whatever the compiler would make of each loop.
__attribute__((noinline)) double chunkSquares(const float *p, int64_t len) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < len; ++i)
    s += double(p[i]) * double(p[i]);
  return s;
}
/// Chunk c of x (n elements): its sum of squares.
template <class T> double chunkOf(const T *x, int64_t n, int64_t c) {
  const T *p = x + c * kChunk;
  const int64_t len = std::min(kChunk, n - c * kChunk);
  if constexpr (std::is_same_v<T, float>) {
    return chunkSquares(p, len);
  } else {
    float *wide = scratch<float, 1>(size_t(kChunk));
    for (int64_t i = 0; i < len; ++i)
      wide[i] = detail::toFloat(p[i]);
    return chunkSquares(wide, len);
  }
}
double chunkOf(const SquaresOf &t, int64_t c) {
  switch (t.type) {
  case DType::BF16:
    return chunkOf(static_cast<const Bf16 *>(t.data), t.n, c);
  case DType::F16:
    return chunkOf(static_cast<const Fp16 *>(t.data), t.n, c);
  default:
    return chunkOf(static_cast<const float *>(t.data), t.n, c);
  }
}
int64_t chunksOf(int64_t n) { return (n + kChunk - 1) / kChunk; }

} // namespace

double sumSquares(const SquaresOf *ts, size_t k) {
  // first[j]: the index of tensor j's first chunk among all of them.
  // Per-thread scratch: a step allocates nothing (MpiExecutor.StepsDoNotAllocate).
  int64_t *first = scratch<int64_t, 0>(k + 1);
  first[0] = 0;
  for (size_t j = 0; j < k; ++j)
    first[j + 1] = first[j] + chunksOf(ts[j].n);
  double *part = scratch<double, 0>(size_t(first[k]));
  parallelFor(first[k], 1, [&](int64_t b, int64_t e) {
    size_t j = size_t(std::upper_bound(first, first + k + 1, b) - first) - 1;
    for (int64_t c = b; c < e; ++c) {
      while (c >= first[j + 1])
        ++j;
      part[c] = chunkOf(ts[j], c - first[j]);
    }
  });
  double sq = 0.0;
  for (size_t j = 0; j < k; ++j) {
    double r = 0.0; // one tensor's chunks in order, then the tensors in order
    for (int64_t c = first[j]; c < first[j + 1]; ++c)
      r += part[c];
    sq += r;
  }
  return sq;
}

// One tensor is the multi-tensor sum of one.
double sumSquares(const float *x, int64_t n) {
  const SquaresOf t{x, DType::F32, n};
  return sumSquares(&t, 1);
}
double sumSquares(const Bf16 *x, int64_t n) {
  const SquaresOf t{x, DType::BF16, n};
  return sumSquares(&t, 1);
}
double sumSquares(const Fp16 *x, int64_t n) {
  const SquaresOf t{x, DType::F16, n};
  return sumSquares(&t, 1);
}

} // namespace dsrt::cpu
