//===- HalfOpsTest.cpp - bf16 / fp16 variants of the transformer's ops ----===//
//
// Every 16-bit kernel against a float64 reference computed from the same
// 16-bit inputs (exact in double), for bf16 and fp16 alike (typed tests).
//
// Tolerances, one rule: a kernel computes in float and rounds each output
// once to its storage type, so it gets the float kernel's own tolerance
// (its test states why) plus one rounding of the output: relative u
// (2^-8 bf16, 2^-11 fp16) and absolute `tiny` below the normal range
// (2^-126 bf16, which flushes float denormals; 2^-25 fp16, half its
// smallest subnormal). Float outputs (dgamma, dbeta, the embedding
// gradient, reductions) get the float tolerance alone. Tests marked "float
// statistics" use inputs where a 16-bit accumulator would be far off (bf16
// cannot count past 256: 256 + 1 rounds back to 256).
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace dsrt::cpu::test {
namespace {

template <class T> class HalfOps : public ::testing::Test {
protected:
  static constexpr double u = Fmt<T>::u, tiny = Fmt<T>::tiny;
};
using HalfTypes = ::testing::Types<Bf16, Fp16>;
TYPED_TEST_SUITE(HalfOps, HalfTypes, HalfNames);

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kSqrt2OverPi = 0.79788456080286535588;

//===--- elementwise ------------------------------------------------------===//

struct BinCase {
  Shape a, b, o;
};
const BinCase kBinCases[] = {
    {{1, {1000}}, {1, {1000}}, {1, {1000}}},            // same shape
    {{2, {33, 65}}, {0, {}}, {2, {33, 65}}},            // scalar operand
    {{3, {4, 33, 384}}, {1, {384}}, {3, {4, 33, 384}}}, // bias
    {{3, {5, 1, 7}}, {2, {3, 1}}, {3, {5, 3, 7}}},      // both ways
    {{1, {1 << 17}}, {1, {1 << 17}}, {1, {1 << 17}}},   // threaded
};

// Tolerance: the float kernel's (relative 1e-6, pow 1e-5; absolute 1e-7)
// plus one rounding.
TYPED_TEST(HalfOps, BinaryBroadcast) {
  using T = TypeParam;
  unsigned seed = 5000;
  for (const BinCase &k : kBinCases)
    for (Binary op : {Binary::Add, Binary::Sub, Binary::Mul, Binary::Div,
                      Binary::Pow, Binary::Max, Binary::Min}) {
      const bool positive = op == Binary::Div || op == Binary::Pow;
      auto a = uniformIn<T>(k.a.numel(), seed++, positive ? 0.5f : -2, 2);
      auto b = uniformIn<T>(k.b.numel(), seed++, positive ? 0.5f : -2, 2);
      std::vector<T> out(k.o.numel());
      binary(op, a.data(), k.a, b.data(), k.b, out.data(), k.o);
      auto ad = widenD(a), bd = widenD(b);
      std::vector<double> ref(out.size());
      for (int64_t i = 0; i < k.o.numel(); ++i) {
        auto idx = unravel(i, k.o);
        const double x = ad[broadcastIndex(idx, k.a)];
        const double y = bd[broadcastIndex(idx, k.b)];
        switch (op) {
        case Binary::Add:
          ref[i] = x + y;
          break;
        case Binary::Sub:
          ref[i] = x - y;
          break;
        case Binary::Mul:
          ref[i] = x * y;
          break;
        case Binary::Div:
          ref[i] = x / y;
          break;
        case Binary::Pow:
          ref[i] = std::pow(x, y);
          break;
        case Binary::Max:
          ref[i] = std::max(x, y);
          break;
        case Binary::Min:
          ref[i] = std::min(x, y);
          break;
        }
      }
      const double rtol = (op == Binary::Pow ? 1e-5 : 1e-6) + TestFixture::u;
      EXPECT_TRUE(near(out, ref, rtol, 1e-7 + TestFixture::tiny))
          << "op " << int(op) << " " << str(k.a) << " " << str(k.b);
    }
}

double geluErf(double x) { return 0.5 * x * (1 + std::erf(x * kInvSqrt2)); }
double geluTanh(double x) {
  return 0.5 * x * (1 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
}

// Tolerance: the float kernel's (relative 1e-5, absolute 1e-6) plus one
// rounding.
TYPED_TEST(HalfOps, UnaryAndGelu) {
  using T = TypeParam;
  struct U {
    Unary op;
    std::function<double(double)> f;
  };
  const U ops[] = {
      {Unary::GeluErf, geluErf},
      {Unary::GeluTanh, geluTanh},
      {Unary::Exp, [](double x) { return std::exp(x); }},
      {Unary::Tanh, [](double x) { return std::tanh(x); }},
      {Unary::Sin, [](double x) { return std::sin(x); }},
      {Unary::Cos, [](double x) { return std::cos(x); }},
      {Unary::Sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {Unary::Relu, [](double x) { return x < 0 ? 0.0 : x; }},
      {Unary::Neg, [](double x) { return -x; }},
  };
  unsigned seed = 5100;
  for (const U &c : ops)
    for (int64_t n : {1, 37, 100003}) {
      auto x = uniformIn<T>(n, seed++, -6, 6);
      std::vector<T> y(n);
      unary(c.op, x.data(), y.data(), n);
      std::vector<double> ref(n);
      auto xd = widenD(x);
      for (int64_t i = 0; i < n; ++i)
        ref[i] = c.f(xd[i]);
      EXPECT_TRUE(near(y, ref, 1e-5 + TestFixture::u, 1e-6 + TestFixture::tiny))
          << "op " << int(c.op) << " n " << n;
      // In place.
      unary(c.op, x.data(), x.data(), n);
      EXPECT_TRUE(bitEqual(x, y));
    }
}

// Tolerance: against the analytic float64 derivative, the float kernel's
// (relative 1e-5, absolute 1e-6) plus one rounding.
// 16-bit: the GELU is the 16-bit GELU's bits, the derivative the float
// kernel's on the widened input, rounded once.
TYPED_TEST(HalfOps, GeluWithDerivative) {
  using T = TypeParam;
  for (bool tanhApprox : {false, true}) {
    const int64_t n = 100003;
    auto x = uniformIn<T>(n, 5300 + tanhApprox, -6, 6);
    std::vector<T> y(n), d(n), gelu(n);
    geluWithDerivative(tanhApprox, x.data(), y.data(), d.data(), n);
    unary(tanhApprox ? Unary::GeluTanh : Unary::GeluErf, x.data(), gelu.data(), n);
    auto xf = widen(x);
    std::vector<float> yf(n), df(n);
    geluWithDerivative(tanhApprox, xf.data(), yf.data(), df.data(), n);
    EXPECT_EQ(widen(y), widen(gelu)) << "tanh " << tanhApprox;
    EXPECT_EQ(widen(d), widen(narrowTo<T>(df))) << "tanh " << tanhApprox;
  }
}

TYPED_TEST(HalfOps, GeluGrad) {
  using T = TypeParam;
  unsigned seed = 5200;
  for (bool tanhApprox : {false, true})
    for (int64_t n : {5, 100003}) {
      auto x = uniformIn<T>(n, seed++, -6, 6), dy = uniformIn<T>(n, seed++);
      std::vector<T> dx(n);
      geluGrad(tanhApprox, x.data(), dy.data(), dx.data(), n);
      auto xd = widenD(x), dyd = widenD(dy);
      std::vector<double> ref(n);
      for (int64_t i = 0; i < n; ++i) {
        const double v = xd[i];
        double d;
        if (tanhApprox) {
          const double u = kSqrt2OverPi * (v + 0.044715 * v * v * v);
          const double du = kSqrt2OverPi * (1 + 3 * 0.044715 * v * v);
          const double t = std::tanh(u);
          d = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * du;
        } else {
          d = 0.5 * (1 + std::erf(v * kInvSqrt2)) +
              v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
        }
        ref[i] = dyd[i] * d;
      }
      EXPECT_TRUE(
          near(dx, ref, 1e-5 + TestFixture::u, 1e-6 + TestFixture::tiny))
          << "tanh " << tanhApprox << " n " << n;
    }
}

TYPED_TEST(HalfOps, SelectMovesBits) {
  using T = TypeParam;
  const Shape cs = shape({4, 1, 64}), as = shape({4, 3, 64}), bs = shape({});
  std::vector<uint8_t> cond(cs.numel());
  for (size_t i = 0; i < cond.size(); ++i)
    cond[i] = (i * 7) % 3 == 0;
  auto a = uniformIn<T>(as.numel(), 5300);
  auto b = narrowTo<T>({-std::numeric_limits<float>::infinity()});
  std::vector<T> out(as.numel());
  select(cond.data(), cs, a.data(), as, b.data(), bs, out.data(), as);
  auto af = widen(a), bf = widen(b);
  std::vector<float> ref(as.numel());
  select(cond.data(), cs, af.data(), as, bf.data(), bs, ref.data(), as);
  EXPECT_TRUE(bitEqual(widen(out), ref));
}

// Comparisons by value: the float kernel's masks on the widened values,
// with -0 / +0 and NaN among the inputs.
TYPED_TEST(HalfOps, CompareByValue) {
  using T = TypeParam;
  const Shape as = shape({3, 40}), bs = shape({40});
  auto af = uniform(as.numel(), 5350, -2, 2);
  auto bf = uniform(bs.numel(), 5351, -2, 2);
  for (int i = 0; i < 40; i += 4) {
    af[i] = bf[i]; // equal values
    af[i + 1] = -0.0f;
    bf[i + 1] = 0.0f;
    af[i + 2] = std::nanf("");
  }
  auto a = narrowTo<T>(af), b = narrowTo<T>(bf);
  auto aw = widen(a), bw = widen(b);
  for (Cmp op : {Cmp::Eq, Cmp::Ne, Cmp::Lt, Cmp::Le, Cmp::Gt, Cmp::Ge}) {
    std::vector<uint8_t> got(as.numel()), want(as.numel());
    compare(op, a.data(), as, b.data(), bs, got.data(), as);
    compare(op, aw.data(), as, bw.data(), bs, want.data(), as);
    EXPECT_EQ(got, want) << "op " << int(op);
  }
}

// Tolerance: float additions of exact inputs, relative 1e-6.
TYPED_TEST(HalfOps, AccumulateIntoFloat) {
  using T = TypeParam;
  const int64_t n = 100003;
  auto x = uniformIn<T>(n, 5400);
  auto y = uniform(n, 5401);
  std::vector<double> ref = toDouble(y), xd = widenD(x);
  for (int64_t i = 0; i < n; ++i)
    ref[i] += xd[i];
  accumulate(x.data(), y.data(), n);
  EXPECT_TRUE(near(y, ref, 1e-6, 1e-7));
}

//===--- dropout ----------------------------------------------------------===//

// The mask is the float kernel's for the same key, element for element,
// with any thread count; kept values x / (1 - ratio) within relative
// 1e-6 + u.
TYPED_TEST(HalfOps, DropoutMaskEqualsFloatKernel) {
  using T = TypeParam;
  for (int threads : {1, 2}) {
    ThreadCount tc(threads);
    for (int64_t n : {1, 33, 100003})
      for (float ratio : {0.0f, 0.1f, 0.5f, 1.0f}) {
        auto x = uniformIn<T>(n, 5500);
        auto xf = widen(x);
        std::vector<T> y(n);
        std::vector<float> yf(n);
        std::vector<uint8_t> m(n), mf(n);
        dropout(x.data(), y.data(), m.data(), n, ratio, 42, 7, 1234);
        dropout(xf.data(), yf.data(), mf.data(), n, ratio, 42, 7, 1234);
        ASSERT_EQ(m, mf) << "n " << n << " ratio " << ratio;
        std::vector<double> ref(n);
        for (int64_t i = 0; i < n; ++i)
          ref[i] = m[i] ? double(xf[i]) / (1.0 - ratio) : 0.0;
        EXPECT_TRUE(near(y, ref, 1e-6 + TestFixture::u, TestFixture::tiny));

        auto dy = uniformIn<T>(n, 5501);
        auto dyd = widenD(dy);
        std::vector<T> dx(n);
        dropoutGrad(dy.data(), m.data(), dx.data(), n, ratio);
        for (int64_t i = 0; i < n; ++i)
          ref[i] = m[i] ? dyd[i] / (1.0 - ratio) : 0.0;
        EXPECT_TRUE(near(dx, ref, 1e-6 + TestFixture::u, TestFixture::tiny));
      }
  }
  // Ratio 0 is the identity, bit for bit.
  auto x = uniformIn<T>(1000, 5502);
  std::vector<T> y(1000);
  std::vector<uint8_t> m(1000);
  dropout(x.data(), y.data(), m.data(), 1000, 0.0f, 1, 2, 3);
  EXPECT_TRUE(bitEqual(x, y));
}

//===--- softmax ----------------------------------------------------------===//

const Dims3 kSoftmaxShapes[] = {{1, 1, 1},  {3, 7, 1},   {5, 129, 1},
                                {2, 33, 7}, {3, 5, 129}, {64, 128, 1},
                                {2, 7, 300}};

// Tolerance: the float kernel's (relative 1e-5; absolute 1e-6 softmax,
// 1e-5 log-softmax) plus one rounding; masked (-inf) entries included.
TYPED_TEST(HalfOps, SoftmaxForward) {
  using T = TypeParam;
  unsigned seed = 5600;
  for (const Dims3 &d : kSoftmaxShapes) {
    auto xf = uniform(d.outer * d.n * d.inner, seed++, -8, 8);
    if (d.n > 1)
      for (size_t i = 3; i < xf.size(); i += 5)
        xf[i] = -std::numeric_limits<float>::infinity();
    for (int64_t o = 0; o < d.outer; ++o)
      for (int64_t j = 0; j < d.inner; ++j)
        xf[o * d.n * d.inner + j] = 0.5f;
    auto x = narrowTo<T>(xf);
    std::vector<T> y(x.size()), ly(x.size());
    softmax(x.data(), y.data(), d.outer, d.n, d.inner);
    logSoftmax(x.data(), ly.data(), d.outer, d.n, d.inner);
    auto xd = widenD(x);
    EXPECT_TRUE(near(y, refSoftmax(xd, d, false), 1e-5 + TestFixture::u,
                     1e-6 + TestFixture::tiny))
        << d.outer << "x" << d.n << "x" << d.inner;
    EXPECT_TRUE(near(ly, refSoftmax(xd, d, true), 1e-5 + TestFixture::u,
                     1e-5 + TestFixture::tiny))
        << d.outer << "x" << d.n << "x" << d.inner;
  }
}

// Float statistics: 4096 equal logits give exactly 2^-12 each (the sum of
// exponentials is 4096; a bf16 sum would stop at 256 and give 2^-8).
TYPED_TEST(HalfOps, SoftmaxFloatStatistics) {
  using T = TypeParam;
  for (int64_t inner : {1, 3}) {
    const int64_t n = 4096;
    auto x = narrowTo<T>(std::vector<float>(n * inner, 0.75f));
    std::vector<T> y(x.size()), ly(x.size());
    softmax(x.data(), y.data(), 1, n, inner);
    logSoftmax(x.data(), ly.data(), 1, n, inner);
    for (float v : widen(y))
      ASSERT_EQ(v, 0x1p-12f);
    EXPECT_TRUE(near(ly, std::vector<double>(x.size(), -std::log(4096.0)),
                     1e-6 + TestFixture::u, 0));
  }
}

// Tolerance: the float kernel's (relative 1e-5, absolute 1e-6) plus one
// rounding, against the analytic float64 gradients of the same y and dy.
TYPED_TEST(HalfOps, SoftmaxGrad) {
  using T = TypeParam;
  unsigned seed = 5700;
  for (const Dims3 &d : kSoftmaxShapes)
    for (bool log : {false, true}) {
      const int64_t total = d.outer * d.n * d.inner;
      auto x = uniformIn<T>(total, seed++, -4, 4);
      std::vector<T> y(total);
      if (log)
        logSoftmax(x.data(), y.data(), d.outer, d.n, d.inner);
      else
        softmax(x.data(), y.data(), d.outer, d.n, d.inner);
      auto dy = uniformIn<T>(total, seed++);
      std::vector<T> dx(total);
      if (log)
        logSoftmaxGrad(y.data(), dy.data(), dx.data(), d.outer, d.n, d.inner);
      else
        softmaxGrad(y.data(), dy.data(), dx.data(), d.outer, d.n, d.inner);
      auto yd = widenD(y), gd = widenD(dy);
      std::vector<double> ref(total);
      for (int64_t o = 0; o < d.outer; ++o)
        for (int64_t j = 0; j < d.inner; ++j) {
          auto at = [&](int64_t i) { return (o * d.n + i) * d.inner + j; };
          double s = 0;
          for (int64_t i = 0; i < d.n; ++i)
            s += log ? gd[at(i)] : gd[at(i)] * yd[at(i)];
          for (int64_t i = 0; i < d.n; ++i)
            ref[at(i)] = log ? gd[at(i)] - std::exp(yd[at(i)]) * s
                             : yd[at(i)] * (gd[at(i)] - s);
        }
      EXPECT_TRUE(
          near(dx, ref, 1e-5 + TestFixture::u, 1e-6 + TestFixture::tiny))
          << "log " << log << " " << d.outer << "x" << d.n << "x" << d.inner;
    }
}

//===--- layer norm -------------------------------------------------------===//

const std::pair<int64_t, int64_t> kNormShapes[] = {
    {1, 1}, {7, 7}, {33, 33}, {5, 129}, {3, 768}, {257, 65}, {1024, 384}};

struct LnRef {
  std::vector<double> y, mean, rstd;
};
LnRef refLayerNorm(const std::vector<double> &x, const std::vector<double> &g,
                   const std::vector<double> &b, int64_t rows, int64_t cols,
                   double eps) {
  LnRef r{std::vector<double>(x.size()), std::vector<double>(rows),
          std::vector<double>(rows)};
  for (int64_t i = 0; i < rows; ++i) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < cols; ++c)
      m += x[i * cols + c];
    m /= cols;
    for (int64_t c = 0; c < cols; ++c)
      v += (x[i * cols + c] - m) * (x[i * cols + c] - m);
    r.mean[i] = m;
    r.rstd[i] = 1 / std::sqrt(v / cols + eps);
    for (int64_t c = 0; c < cols; ++c)
      r.y[i * cols + c] = (x[i * cols + c] - m) * r.rstd[i] * g[c] + b[c];
  }
  return r;
}

// Tolerance: the float kernel's (relative 1e-5, absolute 1e-5) plus one
// rounding. gamma and beta are float (the master parameters).
TYPED_TEST(HalfOps, LayerNormForward) {
  using T = TypeParam;
  unsigned seed = 5800;
  for (auto [rows, cols] : kNormShapes) {
    auto x = uniformIn<T>(rows * cols, seed++, 2, 5);
    auto g = uniform(cols, seed++, 0.5f, 1.5f), b = uniform(cols, seed++);
    std::vector<T> y(x.size());
    layerNorm(x.data(), g.data(), b.data(), y.data(), rows, cols, 1e-5f);
    auto ref =
        refLayerNorm(widenD(x), toDouble(g), toDouble(b), rows, cols, 1e-5);
    EXPECT_TRUE(near(y, ref.y, 1e-5 + TestFixture::u, 1e-5 + TestFixture::tiny))
        << rows << "x" << cols;
    // No beta.
    layerNorm(x.data(), g.data(), nullptr, y.data(), rows, cols, 1e-5f);
    ref = refLayerNorm(widenD(x), toDouble(g), std::vector<double>(cols, 0),
                       rows, cols, 1e-5);
    EXPECT_TRUE(near(y, ref.y, 1e-5 + TestFixture::u, 1e-5 + TestFixture::tiny))
        << rows << "x" << cols << " no beta";
  }
}

// Float statistics: rows with a large mean and a small spread (1024 + 8k,
// representable in both formats) normalize as accurately as any row.
TYPED_TEST(HalfOps, LayerNormFloatStatistics) {
  using T = TypeParam;
  const int64_t rows = 4, cols = 384;
  std::vector<float> xf(rows * cols);
  for (size_t i = 0; i < xf.size(); ++i)
    xf[i] = 1024.0f + 8.0f * float((i * 5) % 16);
  auto x = narrowTo<T>(xf);
  ASSERT_TRUE(bitEqual(widen(x), xf));
  std::vector<float> g(cols, 1.0f), b(cols, 0.0f);
  std::vector<T> y(x.size());
  layerNorm(x.data(), g.data(), b.data(), y.data(), rows, cols, 1e-5f);
  auto ref =
      refLayerNorm(toDouble(xf), toDouble(g), toDouble(b), rows, cols, 1e-5);
  EXPECT_TRUE(near(y, ref.y, 1e-5 + TestFixture::u, 1e-5));
}

// Tolerance: dx the float kernel's (relative 1e-4, absolute 1e-5) plus one
// rounding; dgamma / dbeta are float sums over rows of exact products: the
// float kernel's tolerance alone (relative 1e-4, absolute 1e-5 + 1e-6 rows).
TYPED_TEST(HalfOps, LayerNormGrad) {
  using T = TypeParam;
  unsigned seed = 5900;
  for (auto [rows, cols] : kNormShapes) {
    const int64_t n = rows * cols;
    auto x = uniformIn<T>(n, seed++, -2, 2), dy = uniformIn<T>(n, seed++);
    auto g = uniform(cols, seed++, 0.5f, 1.5f);
    std::vector<T> dx(n);
    std::vector<float> dg(cols), db(cols);
    layerNormGrad(dy.data(), x.data(), g.data(), dx.data(), dg.data(),
                  db.data(), rows, cols, 1e-5f);
    auto xd = widenD(x), gd = toDouble(g), dyd = widenD(dy);
    auto fwd =
        refLayerNorm(xd, gd, std::vector<double>(cols, 0), rows, cols, 1e-5);
    std::vector<double> rdx(n), rdg(cols, 0), rdb(cols, 0);
    for (int64_t i = 0; i < rows; ++i) {
      double a = 0, c2 = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double xh = (xd[i * cols + c] - fwd.mean[i]) * fwd.rstd[i];
        a += dyd[i * cols + c] * gd[c];
        c2 += dyd[i * cols + c] * gd[c] * xh;
        rdg[c] += dyd[i * cols + c] * xh;
        rdb[c] += dyd[i * cols + c];
      }
      for (int64_t c = 0; c < cols; ++c) {
        const double xh = (xd[i * cols + c] - fwd.mean[i]) * fwd.rstd[i];
        rdx[i * cols + c] = fwd.rstd[i] * (dyd[i * cols + c] * gd[c] -
                                           a / cols - xh * c2 / cols);
      }
    }
    const double paramTol = 1e-5 + 1e-6 * double(rows);
    EXPECT_TRUE(near(dx, rdx, 1e-4 + TestFixture::u, 1e-5 + TestFixture::tiny))
        << rows << "x" << cols;
    EXPECT_TRUE(near(dg, rdg, 1e-4, paramTol)) << rows << "x" << cols;
    EXPECT_TRUE(near(db, rdb, 1e-4, paramTol)) << rows << "x" << cols;

    // Same bits with one thread; dbeta may be null.
    ThreadCount one(1);
    std::vector<T> dx1(n);
    std::vector<float> dg1(cols);
    layerNormGrad(dy.data(), x.data(), g.data(), dx1.data(), dg1.data(),
                  nullptr, rows, cols, 1e-5f);
    EXPECT_TRUE(bitEqual(dx, dx1));
    EXPECT_TRUE(bitEqual(dg, dg1));
  }
}

//===--- embedding, reductions, layout ------------------------------------===//

TYPED_TEST(HalfOps, GatherCopiesRows) {
  using T = TypeParam;
  const int64_t A = 50, inner = 24;
  auto table = uniformIn<T>(A * inner, 6000);
  const std::vector<int64_t> idx = {0, 49, -1, 7, 50, -51, 7};
  std::vector<T> out(idx.size() * inner);
  EXPECT_EQ(gather(table.data(), idx.data(), out.data(), 1, A, inner,
                   int64_t(idx.size())),
            2);
  auto tf = widen(table);
  std::vector<float> ref(out.size());
  gather(tf.data(), idx.data(), ref.data(), 1, A, inner, int64_t(idx.size()));
  EXPECT_TRUE(bitEqual(widen(out), ref));
}

// Tolerance: float sums of exact inputs, relative 1e-6, absolute 1e-6 per
// summed row. Float statistics: 1000 rows of ones into one table row sum
// to exactly 1000.
TYPED_TEST(HalfOps, GatherGradAccumulatesInFloat) {
  using T = TypeParam;
  const int64_t A = 40, inner = 16, nIdx = 3000;
  std::vector<int64_t> idx(nIdx);
  for (int64_t j = 0; j < nIdx; ++j)
    idx[j] = (j * 7919) % A - (j % 3 == 0 ? A : 0);
  auto dy = uniformIn<T>(nIdx * inner, 6100);
  std::vector<float> dt(A * inner);
  for (int threads : {1, 2}) {
    ThreadCount tc(threads);
    EXPECT_EQ(gatherGrad(dy.data(), idx.data(), dt.data(), 1, A, inner, nIdx),
              0);
    auto dyd = widenD(dy);
    std::vector<double> ref(A * inner, 0);
    for (int64_t j = 0; j < nIdx; ++j) {
      const int64_t k = idx[j] < 0 ? idx[j] + A : idx[j];
      for (int64_t i = 0; i < inner; ++i)
        ref[k * inner + i] += dyd[j * inner + i];
    }
    EXPECT_TRUE(near(dt, ref, 1e-6, 1e-6 * double(nIdx) / double(A)));
  }
  const std::vector<int64_t> zeros(1000, 0);
  auto ones = narrowTo<T>(std::vector<float>(1000 * inner, 1.0f));
  gatherGrad(ones.data(), zeros.data(), dt.data(), 1, A, inner, 1000);
  for (int64_t i = 0; i < inner; ++i)
    EXPECT_EQ(dt[i], 1000.0f);
}

// Tolerance: the float reduction's (sums: relative 1e-5, absolute 1e-6 per
// summed value; max exact), the inputs being exact. Float statistics: the
// bias gradient of 4096 rows of ones is exactly 4096.
TYPED_TEST(HalfOps, ReduceIntoFloat) {
  using T = TypeParam;
  struct R {
    Shape s;
    uint32_t mask;
  };
  const R cases[] = {{shape({1024, 384}), 1}, {shape({8, 128, 96}), 3},
                     {shape({7, 33}), 2},     {shape({3, 5, 7}), 5},
                     {shape({1 << 16}), 1},   {shape({4, 1, 6}), 2}};
  unsigned seed = 6200;
  for (const R &c : cases)
    for (Reduce op : {Reduce::Sum, Reduce::Mean, Reduce::Max}) {
      auto x = uniformIn<T>(c.s.numel(), seed++);
      auto xd = widenD(x);
      Shape ys;
      int64_t count = 1;
      for (int d = 0; d < c.s.rank; ++d)
        if ((c.mask >> d) & 1)
          count *= c.s.dims[d];
        else
          ys.dims[ys.rank++] = c.s.dims[d];
      std::vector<double> ref(
          c.s.numel() / count,
          op == Reduce::Max ? -std::numeric_limits<double>::infinity() : 0.0);
      for (int64_t i = 0; i < c.s.numel(); ++i) {
        auto idx = unravel(i, c.s);
        int64_t o = 0;
        for (int d = 0; d < c.s.rank; ++d)
          if (!((c.mask >> d) & 1))
            o = o * c.s.dims[d] + idx[d];
        ref[o] = op == Reduce::Max ? std::max(ref[o], xd[i]) : ref[o] + xd[i];
      }
      if (op == Reduce::Mean)
        for (double &v : ref)
          v /= double(count);
      std::vector<float> y(ref.size());
      reduce(op, x.data(), c.s, c.mask, y.data());
      const double atol = op == Reduce::Max   ? 0
                          : op == Reduce::Sum ? 1e-6 * double(count)
                                              : 1e-6;
      EXPECT_TRUE(near(y, ref, op == Reduce::Max ? 0 : 1e-5, atol))
          << "op " << int(op) << " " << str(c.s) << " mask " << c.mask;
    }
  auto ones = narrowTo<T>(std::vector<float>(4096 * 8, 1.0f));
  std::vector<float> y(8);
  reduce(Reduce::Sum, ones.data(), shape({4096, 8}), 1, y.data());
  EXPECT_EQ(y, std::vector<float>(8, 4096.0f));
}

/// Data movement has no arithmetic: the 16-bit kernels must move exactly
/// the bits the float kernels move.
TYPED_TEST(HalfOps, TransposeSliceConcatMoveBits) {
  using T = TypeParam;
  const Shape xs = shape({2, 33, 4, 17});
  auto x = uniformIn<T>(xs.numel(), 6300);
  auto xf = widen(x);
  for (const std::vector<int64_t> &perm : std::vector<std::vector<int64_t>>{
           {0, 2, 1, 3}, {3, 1, 2, 0}, {0, 1, 3, 2}, {0, 1, 2, 3}}) {
    std::vector<T> y(x.size());
    std::vector<float> yf(x.size());
    transpose(x.data(), xs, perm.data(), y.data());
    transpose(xf.data(), xs, perm.data(), yf.data());
    EXPECT_TRUE(bitEqual(widen(y), yf)) << perm[0] << perm[1] << perm[2];
  }
  const int64_t start[] = {1, 2, 0, 3}, stride[] = {1, 3, 1, 2};
  const Shape ys = shape({1, 10, 4, 7});
  std::vector<T> s(ys.numel()), ds(xs.numel());
  std::vector<float> sf(ys.numel()), dsf(xs.numel());
  slice(x.data(), xs, start, stride, s.data(), ys);
  slice(xf.data(), xs, start, stride, sf.data(), ys);
  EXPECT_TRUE(bitEqual(widen(s), sf));
  sliceGrad(s.data(), ys, start, stride, ds.data(), xs);
  sliceGrad(sf.data(), ys, start, stride, dsf.data(), xs);
  EXPECT_TRUE(bitEqual(widen(ds), dsf));

  const Shape in[2] = {shape({2, 3, 17}), shape({2, 5, 17})};
  auto a = uniformIn<T>(in[0].numel(), 6301),
       b = uniformIn<T>(in[1].numel(), 6302);
  auto af = widen(a), bf = widen(b);
  const T *ptrs[2] = {a.data(), b.data()};
  const float *fptrs[2] = {af.data(), bf.data()};
  std::vector<T> c(2 * 8 * 17);
  std::vector<float> cf(c.size());
  concat(ptrs, in, 2, 1, c.data(), shape({2, 8, 17}));
  concat(fptrs, in, 2, 1, cf.data(), shape({2, 8, 17}));
  EXPECT_TRUE(bitEqual(widen(c), cf));
}

} // namespace
} // namespace dsrt::cpu::test
