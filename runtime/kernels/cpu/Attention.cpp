//===- Attention.cpp - scaled dot-product attention, fused -----------------===//
//
// One head at a time per thread: its scores [T, S] live in per-thread
// scratch and never in the arena, the forward keeps each row's maximum and
// reciprocal sum (8 bytes a row), and the backward recomputes the
// probabilities from them. Each step is the unfused op's arithmetic: the
// GEMMs are the single-head GEMMs the batched matmul runs for
// matmul(q, k, transpose_rhs) and its gradients, the row steps are
// softmax's own functions (Softmax.cpp) and the dropout bits are
// nn.dropout's (common/DropoutBits.h). The result and the three gradients
// are that unfused chain's bit for bit (test/runtime/kernels/
// AttentionTest.cpp); where the exported key arrives explicitly transposed
// (nanoGPT), the unfused GEMM takes another operand layout and may add in
// another order.
//
// A bshd plan's operands ([lead, T, H, E], the projections' layout) are
// gathered a head at a time into scratch, and the results scattered back:
// the GEMMs see the values a permute to [lead, H, T, E] would have
// written, so the layout changes nothing of the arithmetic.
//
// bf16 and fp16 operands (a mixed-precision plan) go to the GEMMs as they
// are, with float accumulation and float results (AMX or AVX512-BF16 dot
// products where the CPU has them); the probabilities and the scores'
// gradient, computed in float32, are rounded to the operands' type where
// a GEMM reads them, as FlashAttention does and as the unfused bf16 chain
// rounds its probabilities; the GEMMs apply the scale, and a causal head's
// rows stop at the mask. Every row step stays float32, and the result and
// gradients are rounded once. The unfused chain also rounds the
// scores and the scaled scores (test/e2e/fuse-attention.test states the
// bound).
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/common/DropoutBits.h"
#include "runtime/kernels/cpu/Half.h"
#include "runtime/kernels/cpu/Internal.h"

#include <cmath>
#include <limits>

namespace dsrt::cpu {
using namespace detail;

namespace {

namespace bits = kernels::dropout_bits;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// C = op(A) op(B) in float, A and B float or 16-bit: one single-threaded
/// GEMM (inside the heads' parallel loop the GEMM library does not thread).
template <class V>
void gemm(bool tA, bool tB, int64_t M, int64_t N, int64_t K, const V *A, const V *B, float *C,
          float alpha = 1.0f) {
  Shape as{2, {tA ? K : M, tA ? M : K}}, bs{2, {tB ? N : K, tB ? K : N}}, cs{2, {M, N}};
  matmul(A, as, tA, B, bs, tB, C, cs, alpha);
}

/// The bias's offset for head `h`: the scores' leading dimensions
/// decomposed, with the bias's strides (0 where it broadcasts).
int64_t biasOffset(const Attention &a, int64_t h) {
  const Shape &sc = a.scores, &bs = a.biasShape;
  int64_t offset = 0, stride = bs.rank >= 2 ? bs.dims[bs.rank - 1] * bs.dims[bs.rank - 2] : 1;
  for (int d = sc.rank - 3; d >= 0; --d) {
    const int64_t idx = h % sc.dims[d];
    h /= sc.dims[d];
    const int j = d - (sc.rank - bs.rank);
    if (j < 0)
      break;
    if (bs.dims[j] != 1)
      offset += idx * stride;
    stride *= bs.dims[j];
  }
  return offset;
}

/// x = x * scale, or x / scale, over a head's [T, S] (the forward's scale
/// and, by the chain rule, its gradient's).
void scaleScores(const Attention &a, float *__restrict x) {
  const int64_t n = a.T * a.S;
  const float c = a.scale;
  if (a.divides) {
    for (int64_t i = 0; i < n; ++i)
      x[i] = x[i] / c;
  } else {
    for (int64_t i = 0; i < n; ++i)
      x[i] = x[i] * c;
  }
}

/// x = v at the keys after each query (a causal head's masked scores).
void fillMasked(const Attention &a, float *__restrict x, float v) {
  for (int64_t i = 0; i < a.T; ++i)
    for (int64_t j = i + 1; j < a.S; ++j)
      x[i * a.S + j] = v;
}

/// The scale as the GEMM's alpha (the 16-bit path: x / c as x * (1 / c)).
float gemmScale(const Attention &a) { return a.divides ? 1.0f / a.scale : a.scale; }

/// The keys row i of a head reads: all S, or with a causal mask on the
/// 16-bit path the first i + 1 (the float path runs the unfused chain's
/// full rows, masked to -inf, for its bits).
template <class T> int64_t liveKeys(const Attention &a, int64_t i) {
  if constexpr (std::is_same_v<T, float>)
    return a.S;
  else
    return a.causal ? std::min(a.S, i + 1) : a.S;
}

/// x = the scaled, masked or biased scores of head h ([T, S], from q k^T in x).
/// With `gemmScaled` (the 16-bit path) the GEMM applied the scale and the
/// rows stop at their live keys, so neither is applied here.
void scoresOf(const Attention &a, int64_t h, float *__restrict x, bool gemmScaled = false) {
  const int64_t T = a.T, S = a.S;
  if (!gemmScaled) {
    scaleScores(a, x);
    if (a.causal)
      fillMasked(a, x, kNegInf);
  }
  if (a.bias) {
    const Shape &bs = a.biasShape;
    const float *b = a.bias + biasOffset(a, h);
    const int64_t rows = bs.rank >= 2 ? bs.dims[bs.rank - 2] : 1, cols = bs.dims[bs.rank - 1];
    for (int64_t i = 0; i < T; ++i) {
      const float *br = b + (rows == 1 ? 0 : i * cols);
      float *xr = x + i * S;
      if (cols == 1)
        for (int64_t j = 0; j < S; ++j)
          xr[j] = xr[j] + br[0];
      else
        for (int64_t j = 0; j < S; ++j)
          xr[j] = xr[j] + br[j];
    }
  }
}

/// p = e * inv over a row's n live keys and 0 over the masked rest of its
/// S: one pass of selects that vectorizes whole, where a loop to n would
/// end in a scalar tail (the rows of a causal head end anywhere). The keys
/// past n hold no exponential yet (scratch), and only the select reads them.
void normalizeRow(float *__restrict p, float inv, int64_t n, int64_t S) {
#pragma omp simd
  for (int64_t j = 0; j < S; ++j)
    p[j] = j < n ? p[j] * inv : 0.0f;
}

/// Head h's index in the whole tensor (a tensor-parallel part's map).
int64_t wholeHead(const Attention &a, int64_t h) {
  if (a.tpLocal <= 0)
    return h;
  const int64_t t = h % a.tpTrailing, rest = h / a.tpTrailing;
  const int64_t i = rest % a.tpLocal, o = rest / a.tpLocal;
  return (o * a.tpWhole + a.tpOffset + i) * a.tpTrailing + t;
}

/// p = dropout(p) in place for head h: kept values times 1 / (1 - ratio).
void dropIn(const Attention &a, int64_t h, float *__restrict p, uint64_t key, uint64_t thr,
            float keepScale) {
  const uint64_t base = a.first + uint64_t(wholeHead(a, h)) * uint64_t(a.T * a.S);
  for (int64_t i = 0; i < a.T * a.S; ++i)
    p[i] = bits::kept(key, base + uint64_t(i), thr) ? p[i] * keepScale : 0.0f;
}

/// Dropout's key, threshold and scale for the whole call.
struct Drop {
  bool on;
  uint64_t key, threshold;
  float keep;
  explicit Drop(const Attention &a)
      : on(a.ratio > 0.0f), key(bits::key(a.seed, a.stream, a.counter)),
        threshold(bits::threshold(a.ratio)), keep(bits::keepScale(a.ratio)) {}
};

template <class F> void forHeads(const Attention &a, F &&f) {
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < a.heads; ++h)
    f(h);
}

/// Where head h's [rows, cols] block lies in an operand: contiguous from
/// h * rows * cols, or (bshd) rows of cols at a stride of H * cols.
struct Block {
  int64_t offset, stride;
};
Block blockOf(const Attention &a, int64_t h, int64_t rows, int64_t cols) {
  if (!a.bshd)
    return {h * rows * cols, cols};
  return {(h / a.H) * rows * a.H * cols + (h % a.H) * cols, a.H * cols};
}

/// One row of n values from float.
template <class T> void rowOut(const float *x, T *y, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    std::copy(x, x + n, y);
  else
    convert(x, y, n);
}

/// Head h's [rows, cols] operand, contiguous in its own type: in place for
/// a head-major operand, else gathered into scratch slot Slot. The values
/// are the operand's: the GEMMs see what the head-major copy the permute
/// made would hold.
template <int Slot, class T>
const T *headIn(const T *x, const Attention &a, int64_t h, int64_t rows, int64_t cols) {
  const Block b = blockOf(a, h, rows, cols);
  if (!a.bshd)
    return x + b.offset;
  T *w = scratch<T, Slot>(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    std::copy(x + b.offset + r * b.stride, x + b.offset + r * b.stride + cols, w + r * cols);
  return w;
}

/// x [n], computed in float, as a GEMM operand beside operands of type T:
/// x itself for float, else rounded to T in scratch slot Slot.
template <int Slot, class T> const T *operandOf(const float *x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    T *w = scratch<T, Slot>(size_t(n));
    convert(x, w, n);
    return w;
  }
}

/// Where head h's [rows, cols] result is computed: in place for a
/// head-major float result, else float scratch slot Slot that headOut then
/// rounds (and scatters) into y.
template <int Slot, class T>
float *headResult(T *y, const Attention &a, int64_t h, int64_t rows, int64_t cols) {
  if constexpr (std::is_same_v<T, float>)
    if (!a.bshd)
      return y + blockOf(a, h, rows, cols).offset;
  return scratch<float, Slot>(size_t(rows * cols));
}
template <class T>
void headOut(const float *x, T *y, const Attention &a, int64_t h, int64_t rows, int64_t cols) {
  if constexpr (std::is_same_v<T, float>)
    if (!a.bshd)
      return;
  const Block b = blockOf(a, h, rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    rowOut(x + r * cols, y + b.offset + r * b.stride, cols);
}

} // namespace

template <class T>
void attention(const T *q, const T *k, const T *v, T *result, float *stats, const Attention &a) {
  const int64_t T_ = a.T, S = a.S, E = a.E, F = a.F;
  constexpr bool kHalf = !std::is_same_v<T, float>;
  const Drop drop(a);
  forHeads(a, [&](int64_t h) {
    float *x = scratch<float, 0>(size_t(T_ * S));
    float *p = scratch<float, 1>(size_t(T_ * S));
    const T *qh = headIn<3>(q, a, h, T_, E);
    const T *kh = headIn<4>(k, a, h, S, E);
    const T *vh = headIn<5>(v, a, h, S, F);
    float *out = headResult<6>(result, a, h, T_, F);
    gemm(false, true, T_, S, E, qh, kh, x, kHalf ? gemmScale(a) : 1.0f);
    scoresOf(a, h, x, kHalf);
    float *st = stats + h * T_ * 2;
    for (int64_t i = 0; i < T_; ++i) {
      // softmaxRow over the live keys, keeping its maximum and reciprocal
      // sum; a masked key's probability is 0.
      const int64_t n = liveKeys<T>(a, i);
      const float m = rowMax(x + i * S, n);
      const float inv = 1.0f / expShifted(x + i * S, m, p + i * S, n);
      normalizeRow(p + i * S, inv, n, S);
      st[2 * i] = m;
      st[2 * i + 1] = inv;
    }
    if (drop.on)
      dropIn(a, h, p, drop.key, drop.threshold, drop.keep);
    gemm(false, false, T_, F, S, operandOf<1, T>(p, T_ * S), vh, out);
    headOut(out, result, a, h, T_, F);
  });
}

template <class T>
void attentionGrad(const T *dresult, const T *q, const T *k, const T *v, const float *stats,
                   T *dq, T *dk, T *dv, const Attention &a) {
  const int64_t T_ = a.T, S = a.S, E = a.E, F = a.F;
  constexpr bool kHalf = !std::is_same_v<T, float>;
  const Drop drop(a);
  forHeads(a, [&](int64_t h) {
    float *x = scratch<float, 0>(size_t(T_ * S));
    float *p = scratch<float, 1>(size_t(T_ * S));
    float *d = scratch<float, 2>(size_t(T_ * S));
    const T *qh = headIn<3>(q, a, h, T_, E);
    const T *kh = headIn<4>(k, a, h, S, E);
    const T *vh = headIn<5>(v, a, h, S, F);
    const T *dO = headIn<6>(dresult, a, h, T_, F);
    // The probabilities, as the forward computed them.
    gemm(false, true, T_, S, E, qh, kh, x, kHalf ? gemmScale(a) : 1.0f);
    scoresOf(a, h, x, kHalf);
    const float *st = stats + h * T_ * 2;
    for (int64_t i = 0; i < T_; ++i) {
      const int64_t n = liveKeys<T>(a, i);
      (void)expShifted(x + i * S, st[2 * i], p + i * S, n);
      normalizeRow(p + i * S, st[2 * i + 1], n, S);
    }
    // dV = P'^T dO, with P' the dropped probabilities (in x).
    if (drop.on) {
      for (int64_t i = 0; i < T_ * S; ++i)
        x[i] = p[i];
      dropIn(a, h, x, drop.key, drop.threshold, drop.keep);
    }
    float *dvh = headResult<7>(dv, a, h, S, F);
    gemm(true, false, S, F, T_, operandOf<1, T>(drop.on ? x : p, T_ * S), dO, dvh);
    headOut(dvh, dv, a, h, S, F);
    // dP = dropout_grad(dO V^T), then dS = softmax_grad(P, dP) (in d).
    gemm(false, true, T_, S, F, dO, vh, x);
    if (drop.on)
      dropIn(a, h, x, drop.key, drop.threshold, drop.keep);
    for (int64_t i = 0; i < T_; ++i) {
      const int64_t n = liveKeys<T>(a, i);
      softmaxGradRow(p + i * S, x + i * S, d + i * S, n);
      std::fill(d + i * S + n, d + (i + 1) * S, 0.0f);
    }
    // Through the mask (masked scores get none) and the scale (the 16-bit
    // path: the rows stopped at the mask, the GEMMs apply the scale).
    if (!kHalf) {
      if (a.causal)
        fillMasked(a, d, 0.0f);
      scaleScores(a, d);
    }
    const float alpha = kHalf ? gemmScale(a) : 1.0f;
    const T *ds = operandOf<2, T>(d, T_ * S);
    float *dqh = headResult<7>(dq, a, h, T_, E);
    gemm(false, false, T_, E, S, ds, kh, dqh, alpha);
    headOut(dqh, dq, a, h, T_, E);
    float *dkh = headResult<7>(dk, a, h, S, E);
    gemm(true, false, S, E, T_, ds, qh, dkh, alpha);
    headOut(dkh, dk, a, h, S, E);
  });
}

#define DSRT_ATTENTION(T)                                                                          \
  template void attention<T>(const T *, const T *, const T *, T *, float *, const Attention &);    \
  template void attentionGrad<T>(const T *, const T *, const T *, const T *, const float *, T *,  \
                                 T *, T *, const Attention &);
DSRT_ATTENTION(float)
DSRT_ATTENTION(Bf16)
DSRT_ATTENTION(Fp16)
#undef DSRT_ATTENTION

} // namespace dsrt::cpu
