//===- ElementwiseTest.cpp - binary/unary/compare/select/cast kernels -----===//
//
// Each kernel against a float64 reference on random inputs, over shapes that
// hit every broadcast path (same shape, scalar, bias, both-sided, size-1
// dims) and sizes large enough to be threaded.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <cstdio>
#include <functional>
#include <limits>

namespace dsrt::cpu::test {
namespace {

struct BroadcastCase {
  Shape a, b, out;
};

std::vector<BroadcastCase> broadcastCases() {
  return {
      {shape({7, 33}), shape({7, 33}), shape({7, 33})},
      {shape({129, 1001}), shape({129, 1001}), shape({129, 1001})},
      {shape({5, 7}), shape({1}), shape({5, 7})},
      {shape({}), shape({3, 129}), shape({3, 129})},
      {shape({3, 5, 129}), shape({129}), shape({3, 5, 129})},
      {shape({1, 129}), shape({300, 129}), shape({300, 129})},
      {shape({4, 1, 7}), shape({1, 5, 7}), shape({4, 5, 7})},
      {shape({33, 1}), shape({1, 33}), shape({33, 33})},
      {shape({300, 1}), shape({300, 200}), shape({300, 200})},
      {shape({1, 7, 1}), shape({7, 1}), shape({1, 7, 1})},
      {shape({2, 3, 1, 5}), shape({3, 4, 1}), shape({2, 3, 4, 5})},
      {shape({1}), shape({1}), shape({1})},
  };
}

double refBinary(Binary op, double x, double y) {
  switch (op) {
  case Binary::Add:
    return x + y;
  case Binary::Sub:
    return x - y;
  case Binary::Mul:
    return x * y;
  case Binary::Div:
    return x / y;
  case Binary::Pow:
    return std::pow(x, y);
  case Binary::Max:
    return std::max(x, y);
  case Binary::Min:
    return std::min(x, y);
  }
  return 0;
}

// Tolerance: one float rounding of the exact result (rel 1e-6); pow goes
// through powf, rel 1e-5.
TEST(Elementwise, BinaryBroadcast) {
  const Binary ops[] = {Binary::Add, Binary::Sub, Binary::Mul, Binary::Div,
                        Binary::Pow, Binary::Max, Binary::Min};
  unsigned seed = 1;
  for (const BroadcastCase &c : broadcastCases()) {
    // Positive operands keep pow real and division away from zero.
    auto a = uniform(c.a.numel(), seed++, 0.1f, 2.0f);
    auto b = uniform(c.b.numel(), seed++, 0.1f, 2.0f);
    for (Binary op : ops) {
      std::vector<float> out(c.out.numel());
      binary(op, a.data(), c.a, b.data(), c.b, out.data(), c.out);
      std::vector<double> ref(out.size());
      for (int64_t i = 0; i < c.out.numel(); ++i) {
        auto idx = unravel(i, c.out);
        ref[i] = refBinary(op, a[broadcastIndex(idx, c.a)],
                           b[broadcastIndex(idx, c.b)]);
      }
      const double rtol = op == Binary::Pow ? 1e-5 : 1e-6;
      EXPECT_TRUE(near(out, ref, rtol, 1e-7))
          << "op " << int(op) << " " << str(c.a) << " x " << str(c.b);
    }
  }
}

TEST(Elementwise, MaxMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a = {nan, 1.0f, 2.0f}, b = {1.0f, nan, 3.0f}, out(3);
  for (Binary op : {Binary::Max, Binary::Min}) {
    binary(op, a.data(), shape({3}), b.data(), shape({3}), out.data(),
           shape({3}));
    EXPECT_TRUE(std::isnan(out[0]) && std::isnan(out[1]));
    EXPECT_EQ(out[2], op == Binary::Max ? 3.0f : 2.0f);
  }
}

struct UnaryCase {
  Unary op;
  float lo, hi;
  std::function<double(double)> ref;
};

double refGeluErf(double x) {
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}
double refGeluTanh(double x) {
  return 0.5 * x *
         (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

// Tolerance: relative 1e-5, absolute 1e-6 (the kernels' exp is a
// polynomial with rel error ~1e-7).
TEST(Elementwise, Unary) {
  const std::vector<UnaryCase> cases = {
      {Unary::Neg, -3, 3, [](double x) { return -x; }},
      {Unary::Abs, -3, 3, [](double x) { return std::fabs(x); }},
      {Unary::Exp, -80, 80, [](double x) { return std::exp(x); }},
      {Unary::Log, 1e-3f, 100, [](double x) { return std::log(x); }},
      {Unary::Sqrt, 0, 100, [](double x) { return std::sqrt(x); }},
      {Unary::Rsqrt, 1e-3f, 100, [](double x) { return 1 / std::sqrt(x); }},
      {Unary::Reciprocal, 0.01f, 10, [](double x) { return 1 / x; }},
      {Unary::Tanh, -5, 5, [](double x) { return std::tanh(x); }},
      {Unary::Erf, -4, 4, [](double x) { return std::erf(x); }},
      // Rotary angles: positions up to a few thousand times a frequency.
      {Unary::Sin, -3000, 3000, [](double x) { return std::sin(x); }},
      {Unary::Cos, -3000, 3000, [](double x) { return std::cos(x); }},
      {Unary::Relu, -3, 3, [](double x) { return x > 0 ? x : 0; }},
      {Unary::Sigmoid, -30, 30,
       [](double x) { return 1 / (1 + std::exp(-x)); }},
      {Unary::GeluErf, -6, 6, refGeluErf},
      {Unary::GeluTanh, -6, 6, refGeluTanh},
  };
  unsigned seed = 100;
  for (const UnaryCase &c : cases) {
    for (int64_t n : {1, 7, 33, 129, 100003}) {
      auto x = uniform(n, seed++, c.lo, c.hi);
      std::vector<float> y(n);
      unary(c.op, x.data(), y.data(), n);
      std::vector<double> ref(n);
      for (int64_t i = 0; i < n; ++i)
        ref[i] = c.ref(x[i]);
      EXPECT_TRUE(near(y, ref, 1e-5, 1e-6)) << "op " << int(c.op) << " n " << n;
      // In place (y aliases x) gives the same result.
      unary(c.op, x.data(), x.data(), n);
      EXPECT_TRUE(bitEqual(x, y)) << "in place, op " << int(c.op);
    }
  }
}

TEST(Elementwise, UnaryExpEdges) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {-inf, inf, std::nanf(""), 89.0f, -110.0f, 0.0f}, y(6);
  unary(Unary::Exp, x.data(), y.data(), 6);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], inf);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], inf);
  EXPECT_EQ(y[4], 0.0f);
  EXPECT_EQ(y[5], 1.0f);
  std::vector<float> s(2), big = {-200.0f, 200.0f};
  unary(Unary::Sigmoid, big.data(), s.data(), 2);
  EXPECT_EQ(s[0], 0.0f);
  EXPECT_EQ(s[1], 1.0f);
  unary(Unary::GeluTanh, big.data(), s.data(), 2);
  EXPECT_EQ(s[0], 0.0f);
  EXPECT_EQ(s[1], 200.0f);
}

double refGeluErfGrad(double x) {
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) +
         x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

// Tolerance against the analytic float64 derivative: relative 1e-5,
// absolute 1e-6. Against central differences of the float64 forward
// (h = 1e-5, truncation error ~1e-10): relative 1e-5, absolute 1e-6.
TEST(Elementwise, GeluGrad) {
  for (bool tanhApprox : {false, true}) {
    auto f = tanhApprox ? refGeluTanh : refGeluErf;
    for (int64_t n : {1, 7, 129, 100003}) {
      auto x = uniform(n, 7 + n, -6, 6);
      auto dy = uniform(n, 8 + n);
      std::vector<float> dx(n);
      geluGrad(tanhApprox, x.data(), dy.data(), dx.data(), n);
      std::vector<double> fd(n);
      const double h = 1e-5;
      for (int64_t i = 0; i < n; ++i)
        fd[i] = dy[i] * (f(double(x[i]) + h) - f(double(x[i]) - h)) / (2 * h);
      EXPECT_TRUE(near(dx, fd, 1e-5, 1e-6)) << "tanh " << tanhApprox;
      if (!tanhApprox) {
        std::vector<double> ref(n);
        for (int64_t i = 0; i < n; ++i)
          ref[i] = dy[i] * refGeluErfGrad(x[i]);
        EXPECT_TRUE(near(dx, ref, 1e-5, 1e-6));
      }
    }
  }
}

// The GELU with its derivative is bitwise the GELU, and the derivative
// times dy bitwise geluGrad's dx: the fused plan's GELU and its gradient
// are the unfused plan's arithmetic.
TEST(Elementwise, GeluWithDerivativeIsGeluAndGeluGrad) {
  for (bool tanhApprox : {false, true})
    for (int64_t n : {1, 7, 129, 100003}) {
      auto x = uniform(n, 17 + n, -14, 14), dy = uniform(n, 18 + n);
      std::vector<float> y(n), d(n), gelu(n), dx(n), dyd(n);
      geluWithDerivative(tanhApprox, x.data(), y.data(), d.data(), n);
      unary(tanhApprox ? Unary::GeluTanh : Unary::GeluErf, x.data(), gelu.data(), n);
      geluGrad(tanhApprox, x.data(), dy.data(), dx.data(), n);
      for (int64_t i = 0; i < n; ++i)
        dyd[i] = dy[i] * d[i];
      EXPECT_EQ(y, gelu) << "tanh " << tanhApprox << " n " << n;
      EXPECT_EQ(dyd, dx) << "tanh " << tanhApprox << " n " << n;
      // Finite down to -14, where the tanh form's exp(-2u) overflows.
      for (int64_t i = 0; i < n; ++i)
        ASSERT_TRUE(std::isfinite(dx[i])) << "tanh " << tanhApprox << " x " << x[i];
    }
}

//===--- erf and the erf GELU: accuracy sweeps ----------------------------===//
// The kernels compute erf and GELU's Phi(x) = erfc(-x / sqrt 2) / 2 with a
// vectorized rational approximation (runtime/kernels/cpu/Erf.h). Bounds,
// over every float input, measured with an FMA build / an SSE2-only one,
// and tested with some margin: erf within 1.63 / 2.06 ulp (tested 2.5) and
// 9.7e-8 / 1.23e-7 absolute (tested 1.5e-7); gelu within 6.6 / 7.9 ulp
// (tested 10) wherever Phi(x) is a normal float (x > -13); gelu' within
// 3.0 / 3.7 (tested 5) units of ulp(Phi(x)) + ulp(x phi(x)), its two terms
// (it crosses zero at x ~ -0.75, where a relative bound means nothing).

/// The float ulp at |r| (2^-149 below the normal range).
double ulpAt(double r) {
  const double a = std::fabs(r);
  if (a < 0x1p-126)
    return 0x1p-149;
  int e;
  std::frexp(a, &e);
  return std::ldexp(1.0, e - 24);
}

double refPhi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double refPdf(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI); }

/// Floats of [0, hi] at every stride-th bit pattern, both signs, plus a
/// uniform grid of [-hi, hi] with `grid` points.
std::vector<float> sweep(float hi, uint32_t stride, int64_t grid) {
  std::vector<float> x;
  uint32_t top;
  std::memcpy(&top, &hi, sizeof top);
  for (uint32_t b = 0; b <= top; b += stride) {
    float f;
    std::memcpy(&f, &b, sizeof f);
    x.push_back(f);
    x.push_back(-f);
  }
  for (int64_t i = 0; i <= grid; ++i)
    x.push_back(float(-double(hi) + 2.0 * double(hi) * double(i) / grid));
  return x;
}

TEST(Elementwise, ErfSweep) {
  auto x = sweep(10.0f, 251, 2000000);
  const int64_t n = int64_t(x.size());
  std::vector<float> y(n);
  unary(Unary::Erf, x.data(), y.data(), n);
  double maxUlp = 0, maxAbs = 0;
  float atUlp = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double want = std::erf(double(x[i])), d = std::fabs(y[i] - want);
    maxAbs = std::max(maxAbs, d);
    if (d / ulpAt(want) > maxUlp) {
      maxUlp = d / ulpAt(want);
      atUlp = x[i];
    }
  }
  EXPECT_LE(maxUlp, 2.5) << "at x = " << atUlp;
  EXPECT_LE(maxAbs, 1.5e-7);
  std::printf("erf over %lld points of [-10, 10]: max %.2f ulp (at %.9g), "
              "%.3g absolute\n",
              (long long)n, maxUlp, atUlp, maxAbs);

  const float inf = std::numeric_limits<float>::infinity();
  const float big = std::numeric_limits<float>::max();
  std::vector<float> e = {0.0f, -0.0f, inf,  -inf,    std::nanf(""),
                          1e30f, -1e30f, big, -big,   1e-30f,
                          -1e-30f, 1e-45f, 3.9f, -4.0f, 0.75f},
                     ey(e.size());
  unary(Unary::Erf, e.data(), ey.data(), int64_t(e.size()));
  EXPECT_EQ(ey[0], 0.0f);
  EXPECT_FALSE(std::signbit(ey[0]));
  EXPECT_EQ(ey[1], 0.0f);
  EXPECT_TRUE(std::signbit(ey[1]));
  EXPECT_EQ(ey[2], 1.0f);
  EXPECT_EQ(ey[3], -1.0f);
  EXPECT_TRUE(std::isnan(ey[4]));
  for (int i : {5, 7})
    EXPECT_EQ(ey[i], 1.0f);
  for (int i : {6, 8})
    EXPECT_EQ(ey[i], -1.0f);
  for (size_t i = 9; i < e.size(); ++i) {
    const double want = std::erf(double(e[i]));
    EXPECT_LE(std::fabs(ey[i] - want), 2.5 * ulpAt(want)) << "x " << e[i];
  }
}

TEST(Elementwise, GeluErfSweep) {
  auto x = sweep(13.5f, 251, 2000000);
  const int64_t n = int64_t(x.size());
  std::vector<float> y(n), dx(n), ones(n, 1.0f);
  unary(Unary::GeluErf, x.data(), y.data(), n);
  geluGrad(false, x.data(), ones.data(), dx.data(), n);
  double maxY = 0, maxD = 0;
  float atY = 0, atD = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i], phi = refPhi(v), pdf = refPdf(v);
    const double wantY = v * phi, wantD = phi + v * pdf;
    if (phi >= 0x1p-126) {
      const double ey = std::fabs(y[i] - wantY) / ulpAt(wantY);
      if (ey > maxY) {
        maxY = ey;
        atY = x[i];
      }
      const double ed =
          std::fabs(dx[i] - wantD) / (ulpAt(phi) + ulpAt(std::fabs(v) * pdf));
      if (ed > maxD) {
        maxD = ed;
        atD = x[i];
      }
    } else {
      // Phi(x) underflows (x < -13), exp(-x^2 / 2) too from x < -13.2426
      // on, where the kernels make both 0: the results stay within a few
      // 2^-126 of the reference.
      EXPECT_LE(std::fabs(y[i] - wantY), 0x1p-123) << "x " << x[i];
      EXPECT_LE(std::fabs(dx[i] - wantD), 0x1p-123) << "x " << x[i];
    }
  }
  EXPECT_LE(maxY, 10.0) << "at x = " << atY;
  EXPECT_LE(maxD, 5.0) << "at x = " << atD;
  std::printf("gelu over %lld points of [-13.5, 13.5]: max %.2f ulp (at "
              "%.9g); gelu' max %.2f ulp of its terms (at %.9g)\n",
              (long long)n, maxY, atY, maxD, atD);

  // Edges as PyTorch has them: gelu(-inf) = -inf * 0 = NaN, and the
  // gradient at +-inf is NaN too.
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> e = {inf, -inf, std::nanf(""), 0.0f, -0.0f,
                          30.0f, -30.0f, 1e30f, -1e30f},
                     ey(e.size()), ed(e.size()), eo(e.size(), 1.0f);
  unary(Unary::GeluErf, e.data(), ey.data(), int64_t(e.size()));
  geluGrad(false, e.data(), eo.data(), ed.data(), int64_t(e.size()));
  EXPECT_EQ(ey[0], inf);
  EXPECT_TRUE(std::isnan(ey[1]));
  EXPECT_TRUE(std::isnan(ey[2]));
  EXPECT_EQ(ey[3], 0.0f);
  EXPECT_EQ(ey[4], 0.0f);
  EXPECT_EQ(ey[5], 30.0f);
  EXPECT_EQ(ey[6], 0.0f);
  EXPECT_EQ(ey[7], 1e30f);
  EXPECT_EQ(ey[8], 0.0f);
  EXPECT_TRUE(std::isnan(ed[0]));
  EXPECT_TRUE(std::isnan(ed[1]));
  EXPECT_TRUE(std::isnan(ed[2]));
  EXPECT_EQ(ed[3], 0.5f);
  EXPECT_EQ(ed[4], 0.5f);
  EXPECT_EQ(ed[5], 1.0f);
  EXPECT_EQ(ed[6], 0.0f);
  EXPECT_EQ(ed[7], 1.0f);
  EXPECT_EQ(ed[8], 0.0f);
}

/// Every finite 16-bit input: the kernel's gelu and gelu' (dy = 1) against
/// the double reference rounded once to the format. Mismatches can only be
/// where the exact value lies within the float kernel's few ulps of a
/// 16-bit rounding boundary; bound: at most 1 in 2000 inputs, each one
/// 16-bit ulp (adjacent encodings) away. Exempt: bf16's gelu' for x in
/// (-13.34, -13.24), below 2^-123, which the kernel flushes to 0 (see
/// GeluErfSweep).
template <class T> void geluHalfExhaustive() {
  std::vector<T> x;
  for (uint32_t b = 0; b < 0x10000; ++b) {
    T v;
    v.bits = uint16_t(b);
    x.push_back(v);
  }
  auto xf = widen(x);
  // Finite inputs only (NaN and inf are the float kernel's edges).
  std::vector<T> xs;
  for (size_t i = 0; i < x.size(); ++i)
    if (std::isfinite(xf[i]))
      xs.push_back(x[i]);
  const int64_t n = int64_t(xs.size());
  auto xd = widenD(xs);
  std::vector<T> y(n), dx(n), ones = narrowTo<T>(std::vector<float>(n, 1.0f));
  unary(Unary::GeluErf, xs.data(), y.data(), n);
  geluGrad(false, xs.data(), ones.data(), dx.data(), n);
  std::vector<double> wantY(n), wantD(n);
  for (int64_t i = 0; i < n; ++i) {
    const double v = xd[i], phi = refPhi(v);
    wantY[i] = v * phi;
    wantD[i] = phi + v * refPdf(v);
  }
  std::vector<T> refY(n), refD(n);
  cast(wantY.data(), DType::F64, refY.data(), Fmt<T>::dtype, n);
  cast(wantD.data(), DType::F64, refD.data(), Fmt<T>::dtype, n);
  // Distance in encodings of the same sign (+-0 count as equal).
  auto steps = [](T a, T b) {
    auto key = [](T v) {
      const int32_t m = v.bits & 0x7fff;
      return (v.bits & 0x8000) ? -m : m;
    };
    return std::abs(key(a) - key(b));
  };
  const auto dxf = widen(dx);
  int64_t offY = 0, offD = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int sy = steps(y[i], refY[i]);
    const bool flushed = dxf[i] == 0.0f && std::fabs(wantD[i]) < 0x1p-123;
    const int sd = flushed ? 0 : steps(dx[i], refD[i]);
    EXPECT_LE(sy, 1) << "gelu at x = " << xd[i];
    EXPECT_LE(sd, 1) << "gelu' at x = " << xd[i];
    offY += sy != 0;
    offD += sd != 0;
  }
  EXPECT_LE(offY * 2000, n);
  EXPECT_LE(offD * 2000, n);
  std::printf("%s gelu, %lld finite inputs: %lld forward and %lld backward "
              "results one ulp off the correctly rounded value\n",
              std::is_same_v<T, Bf16> ? "bf16" : "fp16", (long long)n,
              (long long)offY, (long long)offD);
}

TEST(Elementwise, GeluErfBf16Exhaustive) { geluHalfExhaustive<Bf16>(); }
TEST(Elementwise, GeluErfFp16Exhaustive) { geluHalfExhaustive<Fp16>(); }

template <class T> bool refCmp(Cmp op, T x, T y) {
  switch (op) {
  case Cmp::Eq:
    return x == y;
  case Cmp::Ne:
    return x != y;
  case Cmp::Lt:
    return x < y;
  case Cmp::Le:
    return x <= y;
  case Cmp::Gt:
    return x > y;
  case Cmp::Ge:
    return x >= y;
  }
  return false;
}

// Exact. Small integer values make equal pairs common.
TEST(Elementwise, CompareBroadcast) {
  const Cmp ops[] = {Cmp::Eq, Cmp::Ne, Cmp::Lt, Cmp::Le, Cmp::Gt, Cmp::Ge};
  unsigned seed = 200;
  for (const BroadcastCase &c : broadcastCases()) {
    auto fa = uniform(c.a.numel(), seed++, -3, 3);
    auto fb = uniform(c.b.numel(), seed++, -3, 3);
    std::vector<float> a(fa.size()), b(fb.size());
    std::vector<int64_t> ia(fa.size()), ib(fb.size());
    for (size_t i = 0; i < fa.size(); ++i)
      ia[i] = int64_t(a[i] = std::floor(fa[i]));
    for (size_t i = 0; i < fb.size(); ++i)
      ib[i] = int64_t(b[i] = std::floor(fb[i]));
    for (Cmp op : ops) {
      std::vector<uint8_t> out(c.out.numel()), outI(c.out.numel());
      compare(op, a.data(), c.a, b.data(), c.b, out.data(), c.out);
      compareI64(op, ia.data(), c.a, ib.data(), c.b, outI.data(), c.out);
      for (int64_t i = 0; i < c.out.numel(); ++i) {
        auto idx = unravel(i, c.out);
        const int64_t ja = broadcastIndex(idx, c.a),
                      jb = broadcastIndex(idx, c.b);
        ASSERT_EQ(out[i], refCmp(op, a[ja], b[jb])) << "float op " << int(op);
        ASSERT_EQ(outI[i], refCmp(op, ia[ja], ib[jb])) << "i64 op " << int(op);
      }
    }
  }
}

// Exact.
TEST(Elementwise, SelectBroadcast) {
  struct Case {
    Shape c, a, b, out;
  };
  const Case cases[] = {
      {shape({7, 33}), shape({7, 33}), shape({7, 33}), shape({7, 33})},
      {shape({1, 1, 129, 129}), shape({2, 3, 129, 129}), shape({}),
       shape({2, 3, 129, 129})},
      {shape({5, 1}), shape({1, 7}), shape({5, 7}), shape({5, 7})},
      {shape({1}), shape({33}), shape({33}), shape({33})},
      {shape({4, 1, 1}), shape({1}), shape({1, 5, 1}), shape({4, 5, 7})},
      {shape({300, 200}), shape({1}), shape({200}), shape({300, 200})},
  };
  unsigned seed = 300;
  for (const Case &k : cases) {
    auto cf = uniform(k.c.numel(), seed++);
    std::vector<uint8_t> cond(cf.size());
    for (size_t i = 0; i < cf.size(); ++i)
      cond[i] = cf[i] > 0;
    auto a = uniform(k.a.numel(), seed++), b = uniform(k.b.numel(), seed++);
    std::vector<float> out(k.out.numel());
    select(cond.data(), k.c, a.data(), k.a, b.data(), k.b, out.data(), k.out);
    for (int64_t i = 0; i < k.out.numel(); ++i) {
      auto idx = unravel(i, k.out);
      const float want = cond[broadcastIndex(idx, k.c)]
                             ? a[broadcastIndex(idx, k.a)]
                             : b[broadcastIndex(idx, k.b)];
      ASSERT_EQ(out[i], want) << str(k.out) << " element " << i;
    }
  }
}

TEST(Elementwise, LogicalNot) {
  for (int64_t n : {1, 33, 100003}) {
    std::vector<uint8_t> x(n), y(n);
    for (int64_t i = 0; i < n; ++i)
      x[i] = (i * 7) % 3 == 0;
    logicalNot(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(y[i], !x[i]);
  }
}

template <class T> std::vector<T> castRef(const std::vector<double> &v) {
  std::vector<T> r(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    r[i] = std::is_same_v<T, uint8_t> ? T(v[i] != 0) : T(v[i]);
  return r;
}

// Exact: float -> int truncates toward zero, anything -> bool is != 0.
TEST(Elementwise, CastAllPairs) {
  const std::vector<double> vals = {0.0,      -0.0,  1.0, -1.0, 2.75, -2.75,
                                    123456.5, -99.9, 1.0, 0.0,  7.0};
  std::vector<double> src;
  for (int rep = 0; rep < 5000; ++rep)
    src.insert(src.end(), vals.begin(), vals.end());
  const int64_t n = int64_t(src.size());
  const DType types[] = {DType::F32, DType::F64, DType::I64, DType::I32,
                         DType::Bool};
  auto bytesOf = [](DType t) -> size_t {
    switch (t) {
    case DType::F32:
    case DType::I32:
      return 4;
    case DType::F64:
    case DType::I64:
      return 8;
    case DType::Bool:
      return 1;
    case DType::BF16:
    case DType::F16:
      return 2; // not in `types`: HalfTest.cpp tests their casts
    }
    return 0;
  };
  // The input of each source type is src converted by the reference.
  auto makeInput = [&](DType t) {
    std::vector<unsigned char> buf(n * bytesOf(t));
    auto put = [&](auto v) { std::memcpy(buf.data(), v.data(), buf.size()); };
    switch (t) {
    case DType::F32:
      put(castRef<float>(src));
      break;
    case DType::F64:
      put(src);
      break;
    case DType::I64:
      put(castRef<int64_t>(src));
      break;
    case DType::I32:
      put(castRef<int32_t>(src));
      break;
    case DType::Bool:
      put(castRef<uint8_t>(src));
      break;
    default:
      break;
    }
    return buf;
  };
  auto asDoubles = [&](const std::vector<unsigned char> &buf, DType t) {
    std::vector<double> r(n);
    for (int64_t i = 0; i < n; ++i) {
      const unsigned char *p = buf.data() + i * bytesOf(t);
      switch (t) {
      case DType::F32: {
        float v;
        std::memcpy(&v, p, 4);
        r[i] = v;
        break;
      }
      case DType::F64:
        std::memcpy(&r[i], p, 8);
        break;
      case DType::I64: {
        int64_t v;
        std::memcpy(&v, p, 8);
        r[i] = double(v);
        break;
      }
      case DType::I32: {
        int32_t v;
        std::memcpy(&v, p, 4);
        r[i] = v;
        break;
      }
      case DType::Bool:
        r[i] = *p;
        break;
      default:
        break;
      }
    }
    return r;
  };
  for (DType from : types) {
    auto in = makeInput(from);
    const auto inVals = asDoubles(in, from);
    for (DType to : types) {
      std::vector<unsigned char> out(n * bytesOf(to));
      cast(in.data(), from, out.data(), to, n);
      std::vector<unsigned char> want(n * bytesOf(to));
      auto put = [&](auto v) {
        std::memcpy(want.data(), v.data(), want.size());
      };
      switch (to) {
      case DType::F32:
        put(castRef<float>(inVals));
        break;
      case DType::F64:
        put(inVals);
        break;
      case DType::I64:
        put(castRef<int64_t>(inVals));
        break;
      case DType::I32:
        put(castRef<int32_t>(inVals));
        break;
      case DType::Bool:
        put(castRef<uint8_t>(inVals));
        break;
      default:
        break;
      }
      EXPECT_TRUE(bitEqual(out, want))
          << "cast " << int(from) << " -> " << int(to);
    }
  }
}

// Exact.
TEST(Elementwise, BroadcastTo) {
  const std::pair<Shape, Shape> cases[] = {
      {shape({33}), shape({7, 33})},
      {shape({7, 1}), shape({7, 129})},
      {shape({}), shape({5, 3})},
      {shape({1, 3, 1}), shape({2, 3, 300})},
      {shape({2, 1, 5}), shape({4, 2, 7, 5})},
      {shape({3, 5}), shape({3, 5})},
  };
  unsigned seed = 400;
  for (const auto &[xs, ys] : cases) {
    auto x = uniform(xs.numel(), seed++);
    std::vector<float> y(ys.numel());
    broadcastTo(x.data(), xs, y.data(), ys);
    for (int64_t i = 0; i < ys.numel(); ++i)
      ASSERT_EQ(y[i], x[broadcastIndex(unravel(i, ys), xs)])
          << str(xs) << " -> " << str(ys);
  }
}

// Masks and indices broadcast like floats: elements of 1, 2, 4 and 8 bytes.
TEST(Elementwise, BroadcastToAnyElementSize) {
  const std::pair<Shape, Shape> cases[] = {
      {shape({2, 1, 1, 5}), shape({2, 3, 1, 5})}, // a key padding mask over heads
      {shape({7, 1}), shape({7, 129})},
      {shape({}), shape({5, 3})},
  };
  auto check = [&](auto zero) {
    using T = decltype(zero);
    for (const auto &[xs, ys] : cases) {
      std::vector<T> x(xs.numel());
      for (size_t i = 0; i < x.size(); ++i)
        x[i] = T(sizeof(T) == 1 ? i % 2 : i * 2654435761u + 1);
      std::vector<T> y(ys.numel(), T(0xa5));
      broadcastTo(x.data(), xs, y.data(), ys, sizeof(T));
      for (int64_t i = 0; i < ys.numel(); ++i)
        ASSERT_EQ(y[i], x[broadcastIndex(unravel(i, ys), xs)])
            << sizeof(T) << " bytes: " << str(xs) << " -> " << str(ys);
    }
  };
  check(uint8_t());
  check(uint16_t());
  check(uint32_t());
  check(uint64_t());
}

// Exact (one float op per element).
TEST(Elementwise, ScaleAccumulateFill) {
  for (int64_t n : {1, 7, 100003}) {
    auto x = uniform(n, 500), y = uniform(n, 501);
    auto s = x;
    scale(s.data(), n, 0.37f);
    auto acc = y;
    accumulate(x.data(), acc.data(), n);
    std::vector<float> f(n);
    fill(f.data(), n, -2.5f);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(s[i], x[i] * 0.37f);
      ASSERT_EQ(acc[i], y[i] + x[i]);
      ASSERT_EQ(f[i], -2.5f);
    }
  }
}

TEST(Threads, SetNumThreads) {
  const int saved = numThreads();
  setNumThreads(1);
  EXPECT_EQ(numThreads(), 1);
  setNumThreads(3);
  EXPECT_EQ(numThreads(), 3);
  setNumThreads(0);
  EXPECT_GE(numThreads(), 1);
  setNumThreads(saved);
}

} // namespace
} // namespace dsrt::cpu::test
