//===- AttentionTest.cpp - the fused attention kernel ---------------------===//
//
// nn.attention's CPU kernel against the unfused chain the exporters write,
// run with the same CPU kernels the plan would run (matmul with the key
// transposed, mul or div by the scale, the causal mask or the additive
// bias, softmax, dropout, matmul) and against a float64 reference; its
// gradient against the unfused backward (dropout_grad, softmax_grad, the
// scale's and the GEMMs' gradients). Bitwise where the unfused plan's
// scores GEMM takes the key with the transpose flag (nn-fusion folds a
// swap of the last two dimensions into it: Hugging Face's and SDPA's
// exports); within 1e-6 (absolute, on outputs below 1) where the key
// arrives explicitly transposed (nanoGPT's [0, 2, 3, 1] permutation),
// since the GEMM library may then add in another order.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "runtime/kernels/cpu/Half.h"

namespace dsrt::cpu::test {
namespace {

struct Case {
  int64_t B, H, T, S, E, F;
  bool divides, causal, bias;
  float scale, ratio;
};

/// What the unfused plan computes, with its intermediates.
struct Unfused {
  std::vector<float> x, p, dropped, out;
  std::vector<uint8_t> mask;
};

Attention attentionOf(const Case &c, const std::vector<float> &bias, const Shape &biasShape) {
  Attention a;
  a.heads = c.B * c.H;
  a.T = c.T, a.S = c.S, a.E = c.E, a.F = c.F;
  a.scale = c.scale, a.divides = c.divides, a.causal = c.causal;
  a.scores = shape({c.B, c.H, c.T, c.S});
  if (c.bias) {
    a.bias = bias.data();
    a.biasShape = biasShape;
  }
  a.ratio = c.ratio, a.seed = 11, a.stream = 3, a.counter = 5;
  return a;
}

/// `explicitKey`: the scores GEMM takes k^T as a tensor (nanoGPT's form),
/// else k with the transpose flag.
Unfused forwardUnfused(const Case &c, const std::vector<float> &q, const std::vector<float> &k,
                       const std::vector<float> &v, const std::vector<float> &bias,
                       const Shape &biasShape, bool explicitKey = false) {
  const int64_t heads = c.B * c.H, n = heads * c.T * c.S;
  Shape qs = shape({c.B, c.H, c.T, c.E}), ks = shape({c.B, c.H, c.S, c.E});
  Shape kts = shape({c.B, c.H, c.E, c.S}), ss = shape({c.B, c.H, c.T, c.S});
  Shape vs = shape({c.B, c.H, c.S, c.F}), os = shape({c.B, c.H, c.T, c.F});
  std::vector<float> kt(k.size()), s(n);
  const int64_t perm[] = {0, 1, 3, 2};
  if (explicitKey) {
    transpose(k.data(), ks, perm, kt.data());
    matmul(q.data(), qs, false, kt.data(), kts, false, s.data(), ss);
  } else {
    matmul(q.data(), qs, false, k.data(), ks, true, s.data(), ss);
  }
  Unfused u;
  u.x.resize(n);
  binary(c.divides ? Binary::Div : Binary::Mul, s.data(), ss, &c.scale, Shape{}, u.x.data(), ss);
  if (c.causal)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < c.T; ++i)
        for (int64_t j = i + 1; j < c.S; ++j)
          u.x[(h * c.T + i) * c.S + j] = -std::numeric_limits<float>::infinity();
  if (c.bias) {
    std::vector<float> y(n);
    binary(Binary::Add, u.x.data(), ss, bias.data(), biasShape, y.data(), ss);
    u.x = y;
  }
  u.p.resize(n);
  softmax(u.x.data(), u.p.data(), heads * c.T, c.S, 1);
  u.dropped.resize(n);
  u.mask.resize(n);
  dropout(u.p.data(), u.dropped.data(), u.mask.data(), n, c.ratio, 11, 3, 5);
  u.out.resize(heads * c.T * c.F);
  matmul(u.dropped.data(), ss, false, v.data(), vs, false, u.out.data(), os);
  return u;
}

/// The float64 forward from the definition.
std::vector<double> reference(const Case &c, const std::vector<float> &q,
                              const std::vector<float> &k, const std::vector<float> &v,
                              const std::vector<float> &bias, const Shape &biasShape,
                              const std::vector<uint8_t> &mask) {
  const int64_t heads = c.B * c.H;
  Shape ss = shape({c.B, c.H, c.T, c.S});
  std::vector<double> out(heads * c.T * c.F, 0.0), row(c.S);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < c.T; ++i) {
      double m = -INFINITY, sum = 0;
      for (int64_t j = 0; j < c.S; ++j) {
        double d = 0;
        for (int64_t e = 0; e < c.E; ++e)
          d += double(q[(h * c.T + i) * c.E + e]) * k[(h * c.S + j) * c.E + e];
        d = c.divides ? d / c.scale : d * c.scale;
        if (c.bias)
          d += bias[broadcastIndex(unravel((h * c.T + i) * c.S + j, ss), biasShape)];
        if (c.causal && j > i)
          d = -INFINITY;
        row[j] = d;
        m = std::max(m, d);
      }
      for (int64_t j = 0; j < c.S; ++j)
        sum += (row[j] = std::exp(row[j] - m));
      for (int64_t j = 0; j < c.S; ++j) {
        const int64_t at = (h * c.T + i) * c.S + j;
        const double p = mask[at] ? row[j] / sum / (1.0 - c.ratio) : 0.0;
        for (int64_t f = 0; f < c.F; ++f)
          out[(h * c.T + i) * c.F + f] += p * v[(h * c.S + j) * c.F + f];
      }
    }
  return out;
}

const Case kCases[] = {
    // GPT: causal, multiplied, dropout; T = S.
    {2, 3, 16, 16, 8, 8, false, true, false, 0.35355339f, 0.1f},
    // BERT: divided, a [B, 1, 1, S] pad bias, dropout.
    {2, 4, 12, 12, 16, 16, true, false, true, 4.0f, 0.1f},
    // T != S, F != E, no dropout, bias over [T, S].
    {1, 2, 7, 9, 5, 6, false, false, true, 0.5f, 0.0f},
};

Shape biasShapeOf(const Case &c, int which) {
  return which == 1 ? shape({c.B, 1, 1, c.S}) : shape({c.T, c.S});
}

TEST(Attention, ForwardIsTheUnfusedChain) {
  ThreadCount threads(2);
  int which = 0;
  for (const Case &c : kCases) {
    SCOPED_TRACE("case " + std::to_string(which));
    const int64_t heads = c.B * c.H;
    auto q = uniform(heads * c.T * c.E, 100 + which, -2, 2);
    auto k = uniform(heads * c.S * c.E, 200 + which, -2, 2);
    auto v = uniform(heads * c.S * c.F, 300 + which);
    Shape bs = biasShapeOf(c, which);
    auto bias = uniform(bs.numel(), 400 + which, -3, 0);
    Unfused u = forwardUnfused(c, q, k, v, bias, bs);
    Attention a = attentionOf(c, bias, bs);
    std::vector<float> out(heads * c.T * c.F), stats(heads * c.T * 2);
    attention(q.data(), k.data(), v.data(), out.data(), stats.data(), a);
    EXPECT_TRUE(bitEqual(out, u.out));
    // The stats are the rows' maxima and reciprocal sums.
    for (int64_t r = 0; r < heads * c.T; ++r) {
      float m = -INFINITY;
      double sum = 0;
      for (int64_t j = 0; j < c.S; ++j)
        m = std::max(m, u.x[r * c.S + j]);
      for (int64_t j = 0; j < c.S; ++j)
        sum += std::exp(double(u.x[r * c.S + j]) - m);
      ASSERT_EQ(stats[2 * r], m) << "row " << r;
      ASSERT_NEAR(stats[2 * r + 1], 1.0 / sum, 1e-6 / sum) << "row " << r;
    }
    EXPECT_TRUE(near(out, reference(c, q, k, v, bias, bs, u.mask), 1e-5, 1e-6));
    Unfused e = forwardUnfused(c, q, k, v, bias, bs, /*explicitKey=*/true);
    EXPECT_TRUE(near(out, toDouble(e.out), 0.0, 1e-6));
    ++which;
  }
}

TEST(Attention, GradientIsTheUnfusedBackward) {
  ThreadCount threads(2);
  int which = 0;
  for (const Case &c : kCases) {
    SCOPED_TRACE("case " + std::to_string(which));
    const int64_t heads = c.B * c.H, n = heads * c.T * c.S;
    auto q = uniform(heads * c.T * c.E, 100 + which, -2, 2);
    auto k = uniform(heads * c.S * c.E, 200 + which, -2, 2);
    auto v = uniform(heads * c.S * c.F, 300 + which);
    auto dO = uniform(heads * c.T * c.F, 500 + which);
    Shape bs = biasShapeOf(c, which);
    auto bias = uniform(bs.numel(), 400 + which, -3, 0);
    Unfused u = forwardUnfused(c, q, k, v, bias, bs);

    // The unfused backward, as autodiff writes it.
    Shape qs = shape({c.B, c.H, c.T, c.E});
    Shape ss = shape({c.B, c.H, c.T, c.S}), vs = shape({c.B, c.H, c.S, c.F});
    Shape os = shape({c.B, c.H, c.T, c.F}), ks = shape({c.B, c.H, c.S, c.E});
    std::vector<float> dv(v.size()), dP(n), dPd(n), dS(n), dX(n), dq(q.size()), dk(k.size());
    matmul(u.dropped.data(), ss, true, dO.data(), os, false, dv.data(), vs);
    matmul(dO.data(), os, false, v.data(), vs, true, dP.data(), ss);
    dropoutGrad(dP.data(), u.mask.data(), dPd.data(), n, c.ratio);
    softmaxGrad(u.p.data(), dPd.data(), dS.data(), heads * c.T, c.S, 1);
    if (c.causal)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < c.T; ++i)
          for (int64_t j = i + 1; j < c.S; ++j)
            dS[(h * c.T + i) * c.S + j] = 0.0f;
    binary(c.divides ? Binary::Div : Binary::Mul, dS.data(), ss, &c.scale, Shape{}, dX.data(),
           ss);
    // matmul(q, k, transpose_rhs)'s gradients: dq = dX k, dk = dX^T q.
    matmul(dX.data(), ss, false, k.data(), ks, false, dq.data(), qs);
    matmul(dX.data(), ss, true, q.data(), qs, false, dk.data(), ks);

    Attention a = attentionOf(c, bias, bs);
    std::vector<float> out(heads * c.T * c.F), stats(heads * c.T * 2);
    attention(q.data(), k.data(), v.data(), out.data(), stats.data(), a);
    std::vector<float> fq(q.size()), fk(k.size()), fv(v.size());
    attentionGrad(dO.data(), q.data(), k.data(), v.data(), stats.data(), fq.data(), fk.data(),
                  fv.data(), a);
    EXPECT_TRUE(bitEqual(fv, dv));
    EXPECT_TRUE(bitEqual(fq, dq));
    EXPECT_TRUE(bitEqual(fk, dk));
    ++which;
  }
}

/// x as type V (rounded to bf16 / fp16), and back to float.
template <class V> std::vector<V> asType(const std::vector<float> &x) {
  std::vector<V> y(x.size());
  if constexpr (std::is_same_v<V, float>)
    y = x;
  else
    detail::convert(x.data(), y.data(), int64_t(x.size()));
  return y;
}
template <class V> std::vector<float> asFloat(const std::vector<V> &x) {
  std::vector<float> y(x.size());
  if constexpr (std::is_same_v<V, float>)
    y = x;
  else
    detail::convert(x.data(), y.data(), int64_t(x.size()));
  return y;
}

/// Case `which`'s operands in type V: query, key, value, the result's
/// gradient, and its bias.
template <class V> struct Operands {
  std::vector<V> q, k, v, dO;
  Shape bs;
  std::vector<float> bias;
};
template <class V> Operands<V> operandsOf(const Case &c, int which) {
  const int64_t heads = c.B * c.H;
  Operands<V> o;
  o.q = asType<V>(uniform(heads * c.T * c.E, 100 + which, -2, 2));
  o.k = asType<V>(uniform(heads * c.S * c.E, 200 + which, -2, 2));
  o.v = asType<V>(uniform(heads * c.S * c.F, 300 + which));
  o.dO = asType<V>(uniform(heads * c.T * c.F, 500 + which));
  o.bs = biasShapeOf(c, which);
  o.bias = uniform(o.bs.numel(), 400 + which, -3, 0);
  return o;
}

/// The forward's result and stats and the backward's three gradients of
/// one call on `o`'s query, key, value and result gradient.
template <class V> struct Outputs {
  std::vector<V> out, dq, dk, dv;
  std::vector<float> stats;
};
template <class V> Outputs<V> run(const Operands<V> &o, const Case &c, const Attention &a) {
  const int64_t heads = c.B * c.H;
  Outputs<V> r;
  r.out.resize(heads * c.T * c.F), r.stats.resize(heads * c.T * 2);
  r.dq.resize(o.q.size()), r.dk.resize(o.k.size()), r.dv.resize(o.v.size());
  attention(o.q.data(), o.k.data(), o.v.data(), r.out.data(), r.stats.data(), a);
  attentionGrad(o.dO.data(), o.q.data(), o.k.data(), o.v.data(), r.stats.data(), r.dq.data(),
                r.dk.data(), r.dv.data(), a);
  return r;
}

/// Whether every element of x lies within `tol` times the largest
/// magnitude of `ref` of ref's.
bool withinOfScale(const std::vector<float> &x, const std::vector<float> &ref, double tol) {
  double scale = 0.0, worst = 0.0;
  for (float r : ref)
    scale = std::max(scale, double(std::fabs(r)));
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::fabs(double(x[i]) - double(ref[i])));
  EXPECT_LE(worst, tol * scale) << "largest |ref| " << scale;
  return worst <= tol * scale;
}

// bf16 and fp16 operands: the GEMMs read them as they are and read the
// probabilities and the scores' gradient rounded to their type (as
// FlashAttention does); everything else is the float kernel's. Against the
// float kernel on the widened operands: the row statistics within float
// summation order (the 16-bit GEMM adds the exact products in its own
// order), the result and gradients within a few roundings of the type
// (each probability and score gradient is off by at most half an ulp, so
// a sum of them times bounded values is off by at most that share of its
// largest term) of their largest magnitude; a wrong operand or transpose
// would be off by the magnitude itself.
template <class H> void halfRoundsWhereTheGemmsRead() {
  ThreadCount threads(2);
  const double eps = std::is_same_v<H, Bf16> ? 1.0 / 256 : 1.0 / 2048;
  int which = 0;
  for (const Case &c : kCases) {
    SCOPED_TRACE("case " + std::to_string(which));
    auto widen = [](const std::vector<H> &h) { return asFloat(h); };
    Operands<H> o = operandsOf<H>(c, which);
    Attention a = attentionOf(c, o.bias, o.bs);
    Operands<float> wide{widen(o.q), widen(o.k), widen(o.v), widen(o.dO), o.bs, o.bias};
    Outputs<float> f = run(wide, c, a);
    Outputs<H> h = run(o, c, a);
    EXPECT_TRUE(withinOfScale(h.stats, f.stats, 1e-5));
    EXPECT_TRUE(withinOfScale(widen(h.out), f.out, 4 * eps));
    EXPECT_TRUE(withinOfScale(widen(h.dq), f.dq, 4 * eps));
    EXPECT_TRUE(withinOfScale(widen(h.dk), f.dk, 4 * eps));
    EXPECT_TRUE(withinOfScale(widen(h.dv), f.dv, 4 * eps));
    ++which;
  }
}

TEST(Attention, Bf16RoundsWhereTheGemmsRead) { halfRoundsWhereTheGemmsRead<Bf16>(); }
TEST(Attention, Fp16RoundsWhereTheGemmsRead) { halfRoundsWhereTheGemmsRead<Fp16>(); }

/// x [B, H, X, Y] as [B, X, H, Y] (the permute the exporters write around
/// attention; applied to [B, X, H, Y] it swaps back when H and X are
/// exchanged by the caller).
template <class V> std::vector<V> swapHeads(const std::vector<V> &x, int64_t B, int64_t H,
                                            int64_t X, int64_t Y) {
  std::vector<V> y(x.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < X; ++i)
        for (int64_t j = 0; j < Y; ++j)
          y[((b * X + i) * H + h) * Y + j] = x[((b * H + h) * X + i) * Y + j];
  return y;
}

// bshd operands ([B, T, H, E], the projections' layout): the results are
// the head-major call's, permuted, bit for bit, in float and bf16 (each
// head is gathered and scattered, its arithmetic unchanged), dropout and
// the bias at the head-major positions.
template <class V> void bshdIsThePermutedCall() {
  ThreadCount threads(2);
  int which = 0;
  for (const Case &c : kCases) {
    SCOPED_TRACE("case " + std::to_string(which));
    Operands<V> o = operandsOf<V>(c, which);
    Attention a = attentionOf(c, o.bias, o.bs);
    Outputs<V> hm = run(o, c, a);

    Attention b = a;
    b.bshd = true, b.H = c.H;
    Operands<V> ob = o;
    ob.q = swapHeads(o.q, c.B, c.H, c.T, c.E), ob.k = swapHeads(o.k, c.B, c.H, c.S, c.E);
    ob.v = swapHeads(o.v, c.B, c.H, c.S, c.F), ob.dO = swapHeads(o.dO, c.B, c.H, c.T, c.F);
    Outputs<V> bo = run(ob, c, b);
    auto bits = [](const std::vector<V> &x) { return asFloat(x); };
    EXPECT_TRUE(bitEqual(bo.stats, hm.stats));
    EXPECT_TRUE(bitEqual(bits(bo.out), bits(swapHeads(hm.out, c.B, c.H, c.T, c.F))));
    EXPECT_TRUE(bitEqual(bits(bo.dq), bits(swapHeads(hm.dq, c.B, c.H, c.T, c.E))));
    EXPECT_TRUE(bitEqual(bits(bo.dk), bits(swapHeads(hm.dk, c.B, c.H, c.S, c.E))));
    EXPECT_TRUE(bitEqual(bits(bo.dv), bits(swapHeads(hm.dv, c.B, c.H, c.S, c.F))));
    ++which;
  }
}

TEST(Attention, BshdIsThePermutedCall) { bshdIsThePermutedCall<float>(); }
TEST(Attention, BshdBf16IsThePermutedCall) { bshdIsThePermutedCall<Bf16>(); }

// A part of the heads (a tensor-parallel rank's) draws the whole tensor's
// dropout bits when given its first probability's index.
TEST(Attention, PartDrawsTheWholeMask) {
  const Case c{1, 4, 8, 8, 4, 4, false, true, false, 0.5f, 0.5f};
  const int64_t heads = c.B * c.H;
  auto q = uniform(heads * c.T * c.E, 1), k = uniform(heads * c.S * c.E, 2),
       v = uniform(heads * c.S * c.F, 3);
  Attention a = attentionOf(c, {}, Shape{});
  std::vector<float> whole(heads * c.T * c.F), stats(heads * c.T * 2);
  attention(q.data(), k.data(), v.data(), whole.data(), stats.data(), a);
  // Heads 2 and 3 alone.
  Attention part = a;
  part.heads = 2;
  part.first = uint64_t(2 * c.T * c.S);
  std::vector<float> out(2 * c.T * c.F), st(2 * c.T * 2);
  attention(q.data() + 2 * c.T * c.E, k.data() + 2 * c.S * c.E, v.data() + 2 * c.S * c.F,
            out.data(), st.data(), part);
  EXPECT_TRUE(bitEqual(out, std::vector<float>(whole.begin() + 2 * c.T * c.F, whole.end())));
}

} // namespace
} // namespace dsrt::cpu::test
