//===- Layout.cpp - gather, transpose, slice and concat -------------------===//
//
// Data movement kernels. They work on rows of the innermost dim (memcpy
// where contiguous); transposes that move the innermost dim go through
// cache-sized tiles. gatherGrad buckets the indices per table row so every
// table row is summed by one thread in index order (deterministic).
// Each kernel is a template over the element type (float, Bf16, Fp16);
// gatherGrad sums 16-bit rows into a float table.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Half.h"

namespace dsrt::cpu {
using namespace detail;

namespace {

/// A row-major index space with an element stride into x and one into y
/// per dim.
struct Index {
  int rank = 0;
  int64_t size[kMaxRank];
  int64_t xStride[kMaxRank];
  int64_t yStride[kMaxRank];

  void add(int64_t n, int64_t xs, int64_t ys) {
    size[rank] = n;
    xStride[rank] = xs;
    yStride[rank++] = ys;
  }
  int64_t count() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d)
      n *= size[d];
    return n;
  }
  /// Offsets of the i-th index in row-major order.
  void offsets(int64_t i, int64_t &xo, int64_t &yo) const {
    xo = yo = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t k = i % size[d];
      i /= size[d];
      xo += k * xStride[d];
      yo += k * yStride[d];
    }
  }
};

/// Copies rows of `len` elements from x (element stride xs) to contiguous
/// y, one row per index of `rows`.
template <class T>
void copyRows(const T *x, T *y, const Index &rows, int64_t len, int64_t xs) {
  parallelFor(rows.count(), std::max<int64_t>(1, kGrain / len),
              [&](int64_t b, int64_t e) {
                for (int64_t r = b; r < e; ++r) {
                  int64_t xo, yo;
                  rows.offsets(r, xo, yo);
                  const T *__restrict src = x + xo;
                  T *__restrict dst = y + yo;
                  if (xs == 1) {
                    std::memcpy(dst, src, len * sizeof(T));
                  } else {
                    for (int64_t j = 0; j < len; ++j)
                      dst[j] = src[j * xs];
                  }
                }
              });
}

/// The rows (all dims but the innermost) of the slice ys of xs, with the
/// x stride along the innermost dim; returns the x offset of the first
/// element.
int64_t sliceRows(const Shape &xs, const int64_t *start, const int64_t *stride,
                  const Shape &ys, Index &rows, int64_t &innerStride) {
  int64_t xStride[kMaxRank], s = 1;
  for (int d = xs.rank - 1; d >= 0; --d) {
    xStride[d] = s;
    s *= xs.dims[d];
  }
  int64_t base = 0;
  for (int d = 0; d < xs.rank; ++d)
    base += start[d] * xStride[d];
  int64_t yStride[kMaxRank];
  yStride[ys.rank - 1] = 1;
  for (int d = ys.rank - 2; d >= 0; --d)
    yStride[d] = yStride[d + 1] * ys.dims[d + 1];
  for (int d = 0; d < ys.rank - 1; ++d)
    rows.add(ys.dims[d], stride[d] * xStride[d], yStride[d]);
  innerStride = stride[xs.rank - 1];
  return base;
}

/// Rows [first, first + A) of a table of `whole` rows (a vocabulary-parallel
/// part; first = 0, whole = A for the whole table): an index is normalized
/// with `whole`, rows of other parts read as zeros.
template <class T>
int64_t gatherT(const T *data, const int64_t *idx, T *out, int64_t outer,
                int64_t A, int64_t inner, int64_t nIdx, int64_t first = 0,
                int64_t whole = -1) {
  if (whole < 0)
    whole = A;
  int64_t bad = 0;
  for (int64_t j = 0; j < nIdx; ++j)
    bad += idx[j] < -whole || idx[j] >= whole;
  parallelFor(outer * nIdx, std::max<int64_t>(1, kGrain / inner),
              [&](int64_t b, int64_t e) {
                for (int64_t w = b; w < e; ++w) {
                  const int64_t o = w / nIdx;
                  int64_t k = idx[w % nIdx];
                  k += k < 0 ? whole : 0;
                  k -= first;
                  T *dst = out + w * inner;
                  if (k < 0 || k >= A)
                    std::memset(dst, 0, inner * sizeof(T));
                  else
                    std::memcpy(dst, data + (o * A + k) * inner,
                                inner * sizeof(T));
                }
              });
  return bad;
}

template <class T>
int64_t gatherGradT(const T *dy, const int64_t *idx, float *dtable,
                    int64_t outer, int64_t A, int64_t inner, int64_t nIdx,
                    int64_t part = 0, int64_t whole = -1) {
  if (whole < 0)
    whole = A;
  // Counting sort of the positions j by table row; stable, so each row's
  // contributions are added in increasing j.
  int64_t *first = scratch<int64_t, 0>(A + 1);
  int64_t *order = scratch<int64_t, 1>(nIdx);
  std::fill(first, first + A + 1, 0);
  int64_t bad = 0;
  for (int64_t j = 0; j < nIdx; ++j) {
    const int64_t k = idx[j] + (idx[j] < 0 ? whole : 0) - part;
    if (idx[j] < -whole || idx[j] >= whole)
      ++bad;
    else if (k >= 0 && k < A)
      ++first[k + 1];
  }
  for (int64_t a = 0; a < A; ++a)
    first[a + 1] += first[a];
  for (int64_t j = 0; j < nIdx; ++j) {
    const int64_t k = idx[j] + (idx[j] < 0 ? whole : 0) - part;
    if (idx[j] >= -whole && idx[j] < whole && k >= 0 && k < A)
      order[first[k]++] = j;
  }
  // first[a] now holds the end of row a's bucket; its start is first[a-1].
  parallelFor(outer * A, std::max<int64_t>(1, kGrain / inner),
              [&](int64_t b, int64_t e) {
                for (int64_t w = b; w < e; ++w) {
                  const int64_t o = w / A, a = w % A;
                  float *__restrict dst = dtable + w * inner;
                  for (int64_t i = 0; i < inner; ++i)
                    dst[i] = 0.0f;
                  for (int64_t t = a ? first[a - 1] : 0; t < first[a]; ++t) {
                    const T *__restrict src =
                        dy + (o * nIdx + order[t]) * inner;
                    for (int64_t i = 0; i < inner; ++i)
                      dst[i] += toFloat(src[i]);
                  }
                }
              });
  return bad;
}

template <class T>
void transposeT(const T *x, const Shape &xs, const int64_t *perm, T *y) {
  const int64_t n = xs.numel();
  if (n == 0)
    return;
  // Drop size-1 dims and merge runs of input dims that stay adjacent in the
  // output into groups; `group[k]` is the input-order rank of output group k.
  int newDim[kMaxRank], rank = 0;
  for (int d = 0; d < xs.rank; ++d)
    newDim[d] = xs.dims[d] == 1 ? -1 : rank++;
  int64_t size[kMaxRank];
  int outFirst[kMaxRank], groups = 0, prev = -2;
  for (int i = 0; i < xs.rank; ++i) {
    const int d = newDim[perm[i]];
    if (d < 0)
      continue;
    if (d != prev + 1 || groups == 0) {
      outFirst[groups] = d;
      size[groups++] = 1;
    }
    size[groups - 1] *= xs.dims[perm[i]];
    prev = d;
  }
  if (groups <= 1) {
    std::memcpy(y, x, n * sizeof(T));
    return;
  }
  // Input stride of each group: the product of the sizes of the groups that
  // start after it in input order.
  int64_t xStride[kMaxRank], yStride[kMaxRank];
  for (int k = 0; k < groups; ++k) {
    xStride[k] = 1;
    for (int l = 0; l < groups; ++l)
      if (outFirst[l] > outFirst[k])
        xStride[k] *= size[l];
  }
  yStride[groups - 1] = 1;
  for (int k = groups - 2; k >= 0; --k)
    yStride[k] = yStride[k + 1] * size[k + 1];

  const int last = groups - 1;
  if (xStride[last] == 1) {
    Index rows;
    for (int k = 0; k < last; ++k)
      rows.add(size[k], xStride[k], yStride[k]);
    copyRows(x, y, rows, size[last], 1);
    return;
  }
  // The innermost dim moves: transpose tiles of (p, last), p being the
  // output group that is innermost in x.
  int p = 0;
  while (xStride[p] != 1)
    ++p;
  Index outer;
  for (int k = 0; k < last; ++k)
    if (k != p)
      outer.add(size[k], xStride[k], yStride[k]);
  constexpr int64_t kTile = 32;
  const int64_t P = size[p], L = size[last], s = xStride[last];
  const int64_t yP = yStride[p];
  const int64_t tilesP = (P + kTile - 1) / kTile;
  const int64_t tilesL = (L + kTile - 1) / kTile;
  const int64_t tiles = tilesP * tilesL;
  parallelFor(outer.count() * tiles,
              std::max<int64_t>(1, kGrain / (kTile * kTile)),
              [&](int64_t b, int64_t e) {
                for (int64_t w = b; w < e; ++w) {
                  int64_t xo, yo;
                  outer.offsets(w / tiles, xo, yo);
                  const int64_t i0 = (w % tiles) / tilesL * kTile;
                  const int64_t j0 = (w % tiles) % tilesL * kTile;
                  const int64_t i1 = std::min(P, i0 + kTile);
                  const int64_t j1 = std::min(L, j0 + kTile);
                  const T *__restrict src = x + xo;
                  T *__restrict dst = y + yo;
                  for (int64_t i = i0; i < i1; ++i)
                    for (int64_t j = j0; j < j1; ++j)
                      dst[i * yP + j] = src[i + j * s];
                }
              });
}

template <class T>
void sliceT(const T *x, const Shape &xs, const int64_t *start,
            const int64_t *stride, T *y, const Shape &ys) {
  if (ys.numel() == 0)
    return;
  Index rows;
  int64_t innerStride;
  const int64_t base = sliceRows(xs, start, stride, ys, rows, innerStride);
  copyRows(x + base, y, rows, ys.dims[ys.rank - 1], innerStride);
}

template <class T>
void sliceGradT(const T *dy, const Shape &ys, const int64_t *start,
                const int64_t *stride, T *dx, const Shape &xs) {
  // All-zero bits are +0 in every element type.
  parallelFor(xs.numel(), kGrain, [&](int64_t b, int64_t e) {
    std::memset(dx + b, 0, (e - b) * sizeof(T));
  });
  if (ys.numel() == 0)
    return;
  Index rows;
  int64_t innerStride;
  const int64_t base = sliceRows(xs, start, stride, ys, rows, innerStride);
  const int64_t len = ys.dims[ys.rank - 1];
  parallelFor(rows.count(), std::max<int64_t>(1, kGrain / len),
              [&](int64_t b, int64_t e) {
                for (int64_t r = b; r < e; ++r) {
                  int64_t xo, yo;
                  rows.offsets(r, xo, yo);
                  const T *__restrict src = dy + yo;
                  T *__restrict dst = dx + base + xo;
                  for (int64_t j = 0; j < len; ++j)
                    dst[j * innerStride] = src[j];
                }
              });
}

template <class T>
void concatT(const T *const *inputs, const Shape *shapes, int count, int axis,
             T *out, const Shape &os) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d)
    outer *= os.dims[d];
  for (int d = axis + 1; d < os.rank; ++d)
    inner *= os.dims[d];
  const int64_t outRow = os.dims[axis] * inner;
  if (outer == 0 || outRow == 0)
    return;
  // Offset of each input within an output row.
  int64_t *offset = scratch<int64_t, 0>(count + 1);
  offset[0] = 0;
  for (int i = 0; i < count; ++i)
    offset[i + 1] = offset[i] + shapes[i].dims[axis] * inner;
  parallelFor(outer * count, std::max<int64_t>(1, kGrain * count / outRow),
              [&](int64_t b, int64_t e) {
                for (int64_t w = b; w < e; ++w) {
                  const int64_t o = w / count, i = w % count;
                  const int64_t len = offset[i + 1] - offset[i];
                  if (len > 0) // an empty input may have no storage (nullptr)
                    std::memcpy(out + o * outRow + offset[i],
                                inputs[i] + o * len, len * sizeof(T));
                }
              });
}

} // namespace

int64_t gather(const int64_t *data, const int64_t *idx, int64_t *out, int64_t outer,
               int64_t A, int64_t inner, int64_t nIdx) {
  return gatherT(data, idx, out, outer, A, inner, nIdx);
}
int64_t gather(const float *data, const int64_t *idx, float *out, int64_t outer,
               int64_t A, int64_t inner, int64_t nIdx) {
  return gatherT(data, idx, out, outer, A, inner, nIdx);
}
int64_t gatherPart(const float *data, const int64_t *idx, float *out, int64_t A,
                   int64_t inner, int64_t nIdx, int64_t first, int64_t whole) {
  return gatherT(data, idx, out, 1, A, inner, nIdx, first, whole);
}
int64_t gatherGradPart(const float *dy, const int64_t *idx, float *dtable, int64_t A,
                       int64_t inner, int64_t nIdx, int64_t first, int64_t whole) {
  return gatherGradT(dy, idx, dtable, 1, A, inner, nIdx, first, whole);
}
int64_t gather(const Bf16 *data, const int64_t *idx, Bf16 *out, int64_t outer,
               int64_t A, int64_t inner, int64_t nIdx) {
  return gatherT(data, idx, out, outer, A, inner, nIdx);
}
int64_t gather(const Fp16 *data, const int64_t *idx, Fp16 *out, int64_t outer,
               int64_t A, int64_t inner, int64_t nIdx) {
  return gatherT(data, idx, out, outer, A, inner, nIdx);
}
int64_t gatherGrad(const float *dy, const int64_t *idx, float *dtable,
                   int64_t outer, int64_t A, int64_t inner, int64_t nIdx) {
  return gatherGradT(dy, idx, dtable, outer, A, inner, nIdx);
}
int64_t gatherGrad(const Bf16 *dy, const int64_t *idx, float *dtable,
                   int64_t outer, int64_t A, int64_t inner, int64_t nIdx) {
  return gatherGradT(dy, idx, dtable, outer, A, inner, nIdx);
}
int64_t gatherGrad(const Fp16 *dy, const int64_t *idx, float *dtable,
                   int64_t outer, int64_t A, int64_t inner, int64_t nIdx) {
  return gatherGradT(dy, idx, dtable, outer, A, inner, nIdx);
}
void transpose(const float *x, const Shape &xs, const int64_t *perm, float *y) {
  transposeT(x, xs, perm, y);
}
void transpose(const int64_t *x, const Shape &xs, const int64_t *perm, int64_t *y) {
  transposeT(x, xs, perm, y);
}
void transpose(const Bf16 *x, const Shape &xs, const int64_t *perm, Bf16 *y) {
  transposeT(x, xs, perm, y);
}
void transpose(const Fp16 *x, const Shape &xs, const int64_t *perm, Fp16 *y) {
  transposeT(x, xs, perm, y);
}
void slice(const float *x, const Shape &xs, const int64_t *start,
           const int64_t *stride, float *y, const Shape &ys) {
  sliceT(x, xs, start, stride, y, ys);
}
void slice(const Bf16 *x, const Shape &xs, const int64_t *start,
           const int64_t *stride, Bf16 *y, const Shape &ys) {
  sliceT(x, xs, start, stride, y, ys);
}
void slice(const Fp16 *x, const Shape &xs, const int64_t *start,
           const int64_t *stride, Fp16 *y, const Shape &ys) {
  sliceT(x, xs, start, stride, y, ys);
}
void slice(const int64_t *x, const Shape &xs, const int64_t *start,
           const int64_t *stride, int64_t *y, const Shape &ys) {
  sliceT(x, xs, start, stride, y, ys);
}
void sliceGrad(const float *dy, const Shape &ys, const int64_t *start,
               const int64_t *stride, float *dx, const Shape &xs) {
  sliceGradT(dy, ys, start, stride, dx, xs);
}
void sliceGrad(const Bf16 *dy, const Shape &ys, const int64_t *start,
               const int64_t *stride, Bf16 *dx, const Shape &xs) {
  sliceGradT(dy, ys, start, stride, dx, xs);
}
void sliceGrad(const Fp16 *dy, const Shape &ys, const int64_t *start,
               const int64_t *stride, Fp16 *dx, const Shape &xs) {
  sliceGradT(dy, ys, start, stride, dx, xs);
}
void concat(const float *const *inputs, const Shape *shapes, int count,
            int axis, float *out, const Shape &os) {
  concatT(inputs, shapes, count, axis, out, os);
}
void concat(const Bf16 *const *inputs, const Shape *shapes, int count, int axis,
            Bf16 *out, const Shape &os) {
  concatT(inputs, shapes, count, axis, out, os);
}
void concat(const Fp16 *const *inputs, const Shape *shapes, int count, int axis,
            Fp16 *out, const Shape &os) {
  concatT(inputs, shapes, count, axis, out, os);
}
void concat(const int64_t *const *inputs, const Shape *shapes, int count, int axis,
            int64_t *out, const Shape &os) {
  concatT(inputs, shapes, count, axis, out, os);
}

} // namespace dsrt::cpu
