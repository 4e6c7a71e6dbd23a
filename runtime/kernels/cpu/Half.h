//===- Half.h - bf16 / fp16 in the CPU kernels ------------------*- C++ -*-===//
//
// The kernels are templates over the element type T in {float, Bf16, Fp16}
// with float math; this header is how they see 16-bit elements:
//   * the tile policy (widened / resultIn / narrowInto, rowView / rowOut):
//     kernels with 16-bit outputs run their float code on float views, a
//     tile or a few rows at a time, converted with the bulk conversions of
//     Convert.cpp (AVX512_BF16, AVX-512F or portable, chosen at run time).
//     For float the views are the arrays themselves, so the float
//     instantiation is the float kernel as it was. Converting per element
//     inside the loops costs more than a simple op (GCC vectorizes the
//     integer rounding below into ~20 instructions per 16 elements, where
//     vcvtne2ps2bf16 narrows 32 floats in one);
//   * the element policy (toFloat / fromFloat): inlined per-element
//     conversions, used where a kernel only reads 16-bit values (reductions,
//     the embedding gradient, accumulate: a widening is a shift) and by casts
//     from and to the non-float types.
//
// The scalar conversions and their rounding (float denormals flush to zero
// in bf16; fp16 keeps its subnormals) are runtime/half/HalfBits.h's, shared
// with the CUDA kernels, the collectives and the ONNX writer.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_KERNELS_CPU_HALF_H
#define DSRT_KERNELS_CPU_HALF_H

#include "runtime/half/HalfBits.h"
#include "runtime/kernels/cpu/Internal.h"

#include <cmath>
#include <type_traits>

namespace dsrt::cpu::detail {

// The conversions sit in the innermost loops of kernels whose translation
// units instantiate them three times over; GCC's unit-growth limit would
// otherwise stop inlining them (and a call stops vectorization).
#define DSRT_INLINE inline __attribute__((always_inline))

// The scalar conversions, one definition for the CPU and CUDA kernels,
// the collectives and the ONNX writer (runtime/half/HalfBits.h).
using half::bf16Bits;
using half::bf16Value;
using half::bitsOf;
using half::f16Bits;
using half::f16Value;
using half::floatOf;
using half::pick;

//===--- the element policy ----------------------------------------------===//

template <class T>
constexpr bool kIsHalf = std::is_same_v<T, Bf16> || std::is_same_v<T, Fp16>;

DSRT_INLINE float toFloat(float v) { return v; }
DSRT_INLINE float toFloat(Bf16 v) { return bf16Value(v.bits); }
DSRT_INLINE float toFloat(Fp16 v) { return f16Value(v.bits); }

template <class T> T fromFloat(float v);
template <> DSRT_INLINE float fromFloat<float>(float v) { return v; }
template <> DSRT_INLINE Bf16 fromFloat<Bf16>(float v) { return {bf16Bits(v)}; }
template <> DSRT_INLINE Fp16 fromFloat<Fp16>(float v) { return {f16Bits(v)}; }

/// d rounded to float with round-to-odd: rounding that float to bf16 or
/// fp16 (at least two fewer significand bits) then equals rounding d
/// directly, with no double-rounding error.
inline float roundToOdd(double d) {
  float f = float(d);
  if (double(f) != d && d == d) {
    uint32_t u = bitsOf(f);
    if (std::fabs(double(f)) > std::fabs(d))
      --u; // toward zero
    f = floatOf(u | 1u);
  }
  return f;
}

//===--- bulk conversions (Convert.cpp), single-threaded -----------------===//

void convert(const float *x, Bf16 *y, int64_t n);
void convert(const Bf16 *x, float *y, int64_t n);
void convert(const float *x, Fp16 *y, int64_t n);
void convert(const Fp16 *x, float *y, int64_t n);

//===--- the tile policy --------------------------------------------------===//
// A kernel writes `const float *xs = widened(x + t0, buf, len)`, computes
// into `float *ys = resultIn(y + t0, ybuf)` and ends with `narrowInto(ys,
// y + t0, len)`: for float these are x, y and nothing.

/// Elements per tile of the elementwise kernels (two or three float
/// buffers of it on the stack, in L1).
constexpr int64_t kTile = 512;

/// A float view of x[0..n): x itself, or x widened into buf.
template <class T>
DSRT_INLINE const float *widened(const T *x, float *buf, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    (void)buf;
    (void)n;
    return x;
  } else {
    convert(x, buf, n);
    return buf;
  }
}
/// Where float results for y[0..n) go: y itself, or buf (then narrowInto).
template <class T> DSRT_INLINE float *resultIn(T *y, float *buf) {
  if constexpr (std::is_same_v<T, float>) {
    (void)buf;
    return y;
  } else {
    (void)y;
    return buf;
  }
}
template <class T>
DSRT_INLINE void narrowInto(const float *buf, T *y, int64_t n) {
  if constexpr (!std::is_same_v<T, float>)
    convert(buf, y, n);
}
/// Row-sized views (a softmax or layer-norm row can be long): the buffers
/// are per-thread scratch, one Slot per view a kernel holds at once.
template <int Slot, class T>
DSRT_INLINE const float *rowView(const T *x, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    return widened(x, nullptr, n);
  else
    return widened(x, scratch<float, Slot>(size_t(n)), n);
}
template <int Slot, class T> DSRT_INLINE float *rowOut(T *y, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    return resultIn(y, nullptr);
  else
    return resultIn(y, scratch<float, Slot>(size_t(n)));
}

/// f(begin, end) over [b, e): once for float, in tiles of kTile otherwise.
template <class T, class F>
DSRT_INLINE void forTiles(int64_t b, int64_t e, F &&f) {
  if constexpr (std::is_same_v<T, float>) {
    f(b, e);
  } else {
    for (int64_t t = b; t < e; t += kTile)
      f(t, std::min(e, t + kTile));
  }
}

//===--- column sums ------------------------------------------------------===//

// The order of a [rows, cols] matrix's column sums is kColumnSumRows's
// (Kernels.h); these are its steps.

/// p[c] = the sum of rows [0, rows) of column c of x (row stride ld), for
/// c in [0, cols): one block's partials.
template <class T>
void columnPartial(const T *__restrict x, int64_t rows, int64_t cols, int64_t ld,
                   float *__restrict p) {
  for (int64_t c = 0; c < cols; ++c)
    p[c] = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const T *__restrict row = x + r * ld;
    for (int64_t c = 0; c < cols; ++c)
      p[c] += toFloat(row[c]);
  }
}

/// The tasks of a [rows, cols] matrix cut into blocks of `blockRows` rows
/// and shares of `chunk` columns (the last of each may be shorter): task
/// t is block t / chunks, share t % chunks.
struct RowTasks {
  int64_t rows, cols, blockRows, chunk, blocks, chunks;
  RowTasks(int64_t rows, int64_t cols, int64_t blockRows, int64_t chunk)
      : rows(rows), cols(cols), blockRows(blockRows), chunk(chunk),
        blocks((rows + blockRows - 1) / blockRows), chunks((cols + chunk - 1) / chunk) {}
  int64_t count() const { return blocks * chunks; }
  /// The threads that run them (in a parallel region when more than one);
  /// one, the caller, when it already runs in a parallel region (a nested
  /// region would only add libgomp's cost of a team of one).
  int team() const {
    return omp_in_parallel() ? 1 : int(std::min<int64_t>(omp_get_max_threads(), count()));
  }
  /// f(b, r0, r, c0, c) for every task: block b's r rows from r0, the c
  /// columns from c0; the tasks shared statically among team() threads.
  template <class F> void run(F &&f) const {
    const int n = team();
#pragma omp parallel for schedule(static) num_threads(n) if (n > 1)
    for (int64_t t = 0; t < count(); ++t) {
      const int64_t b = t / chunks, r0 = b * blockRows, c0 = (t % chunks) * chunk;
      f(b, r0, std::min(blockRows, rows - r0), c0, std::min(chunk, cols - c0));
    }
  }
};

/// The columns one task of a column sum takes: all of them, or, where
/// there are fewer row blocks than threads, a share (a multiple of 16, at
/// least 64) so that every thread gets work.
inline int64_t columnChunk(int64_t blocks, int64_t cols) {
  const int64_t threads = omp_get_max_threads();
  const int64_t want = std::min((threads + blocks - 1) / blocks, std::max<int64_t>(1, cols / 64));
  if (want <= 1)
    return cols;
  return std::min(cols, ((cols + want - 1) / want + 15) / 16 * 16);
}

/// The tasks of a column sum of a [rows, cols] matrix: blocks of
/// kColumnSumRows rows (the sum's order) and columnChunk's shares.
inline RowTasks columnSumTasks(int64_t rows, int64_t cols) {
  return RowTasks(rows, cols, kColumnSumRows,
                  columnChunk((rows + kColumnSumRows - 1) / kColumnSumRows, cols));
}

/// y (tasks.cols floats) = the column sums in kColumnSumRows's order:
/// task(b, r0, r, c0, c, p) writes block b's partial sums of columns
/// [c0, c0 + c) to p[c0, c0 + c) (columnPartial); the blocks' partials are
/// then added in order (one block's are y itself). Scratch slot 27.
template <class F> void sumColumns(const RowTasks &tasks, float *__restrict y, F &&task) {
  const int64_t cols = tasks.cols;
  float *partial = tasks.blocks > 1 ? scratch<float, 27>(size_t(tasks.blocks * cols)) : y;
  tasks.run([&](int64_t b, int64_t r0, int64_t r, int64_t c0, int64_t c) {
    task(b, r0, r, c0, c, partial + b * cols);
  });
  if (tasks.blocks == 1)
    return;
  for (int64_t c = 0; c < cols; ++c)
    y[c] = partial[c];
  for (int64_t b = 1; b < tasks.blocks; ++b)
    for (int64_t c = 0; c < cols; ++c)
      y[c] += partial[b * cols + c];
}

} // namespace dsrt::cpu::detail

#endif // DSRT_KERNELS_CPU_HALF_H
