//===- NormSoftmaxTest.cpp - softmax, log-softmax, layer norm -------------===//
//
// Forward kernels against float64 references over [outer, n, inner] shapes
// with inner > 1 (including more columns than one kernel block) and masked
// (-inf) entries; gradients against the analytic float64 formulas and
// against central finite differences of the float64 forward.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "runtime/kernels/cpu/Internal.h"

#include <cstdint>
#include <cstring>
#include <limits>

namespace dsrt::cpu::test {
namespace {


const Dims3 kSoftmaxShapes[] = {{1, 1, 1},   {3, 7, 1},   {5, 129, 1},
                                {2, 33, 7},  {3, 5, 129}, {1, 1000, 1},
                                {2, 7, 300}, {64, 512, 1}};


// Tolerance: relative 1e-5, absolute 1e-6 (softmax) / 1e-5 (log-softmax,
// values up to ~10 in magnitude).
TEST(Softmax, Forward) {
  unsigned seed = 1000;
  for (const Dims3 &d : kSoftmaxShapes) {
    auto x = uniform(d.outer * d.n * d.inner, seed++, -8, 8);
    // Masked positions, as attention produces them.
    if (d.n > 1)
      for (size_t i = 3; i < x.size(); i += 5)
        x[i] = -std::numeric_limits<float>::infinity();
    // Keep one finite entry per softmax slice (index 0 along n).
    for (int64_t o = 0; o < d.outer; ++o)
      for (int64_t j = 0; j < d.inner; ++j)
        x[o * d.n * d.inner + j] = 0.5f;
    std::vector<float> y(x.size()), ly(x.size());
    softmax(x.data(), y.data(), d.outer, d.n, d.inner);
    logSoftmax(x.data(), ly.data(), d.outer, d.n, d.inner);
    EXPECT_TRUE(near(y, refSoftmax(toDouble(x), d, false), 1e-5, 1e-6))
        << d.outer << "x" << d.n << "x" << d.inner;
    EXPECT_TRUE(near(ly, refSoftmax(toDouble(x), d, true), 1e-5, 1e-5))
        << d.outer << "x" << d.n << "x" << d.inner;
  }
}

/// Float64 vector-Jacobian products: softmax dx = y (dy - sum(dy y)),
/// log-softmax dx = dy - exp(y) sum(dy).
std::vector<double> refSoftmaxGrad(const std::vector<double> &y,
                                   const std::vector<double> &dy,
                                   const Dims3 &d, bool log) {
  std::vector<double> dx(y.size());
  for (int64_t o = 0; o < d.outer; ++o)
    for (int64_t j = 0; j < d.inner; ++j) {
      auto at = [&](int64_t i) { return (o * d.n + i) * d.inner + j; };
      double s = 0;
      for (int64_t i = 0; i < d.n; ++i)
        s += log ? dy[at(i)] : dy[at(i)] * y[at(i)];
      for (int64_t i = 0; i < d.n; ++i)
        dx[at(i)] = log ? dy[at(i)] - std::exp(y[at(i)]) * s
                        : y[at(i)] * (dy[at(i)] - s);
    }
  return dx;
}

// Tolerance: relative 1e-5, absolute 1e-6 against the float64 formula
// applied to the kernel's float inputs; relative 1e-4, absolute 1e-5
// against central differences (h = 1e-6) of sum(dy * softmax(x)) in float64.
TEST(Softmax, Gradients) {
  unsigned seed = 1100;
  for (const Dims3 &d : kSoftmaxShapes) {
    const int64_t n = d.outer * d.n * d.inner;
    auto x = uniform(n, seed++, -4, 4), dy = uniform(n, seed++);
    for (bool log : {false, true}) {
      std::vector<float> y(n), dx(n);
      // The float overloads (the kernels also have 16-bit ones).
      using Fwd = void (*)(const float *, float *, int64_t, int64_t, int64_t);
      using Bwd = void (*)(const float *, const float *, float *, int64_t,
                           int64_t, int64_t);
      (log ? Fwd(logSoftmax) : Fwd(softmax))(x.data(), y.data(), d.outer, d.n,
                                             d.inner);
      (log ? Bwd(logSoftmaxGrad) : Bwd(softmaxGrad))(
          y.data(), dy.data(), dx.data(), d.outer, d.n, d.inner);
      EXPECT_TRUE(near(dx, refSoftmaxGrad(toDouble(y), toDouble(dy), d, log),
                       1e-5, 1e-6))
          << "log " << log << " " << d.outer << "x" << d.n << "x" << d.inner;
      if (n > 2000)
        continue;
      std::vector<double> xd = toDouble(x), fd(n);
      auto loss = [&] {
        auto yy = refSoftmax(xd, d, log);
        double s = 0;
        for (int64_t i = 0; i < n; ++i)
          s += dy[i] * yy[i];
        return s;
      };
      const double h = 1e-6;
      for (int64_t i = 0; i < n; ++i) {
        const double keep = xd[i];
        xd[i] = keep + h;
        const double up = loss();
        xd[i] = keep - h;
        fd[i] = (up - loss()) / (2 * h);
        xd[i] = keep;
      }
      EXPECT_TRUE(near(dx, fd, 1e-4, 1e-5))
          << "finite differences, log " << log << " " << d.outer << "x" << d.n
          << "x" << d.inner;
    }
  }
}

/// The row steps' documented order (Softmax.cpp): 16 lanes, lane l
/// summing the elements at l mod 16 in turn, the lanes added pairwise (8,
/// 4, 2 and 1 apart); the dot product's terms fused-multiply-added.
float laneOrderSum(const std::vector<float> &terms, const std::vector<float> *by) {
  float acc[16] = {};
  for (size_t i = 0; i < terms.size(); ++i)
    acc[i % 16] = by ? std::fma(terms[i], (*by)[i], acc[i % 16]) : acc[i % 16] + terms[i];
  for (int w = 8; w > 0; w /= 2)
    for (int l = 0; l < w; ++l)
      acc[l] += acc[l + w];
  return acc[0];
}

/// detail::expf's operations with every fused multiply-add explicit: the
/// bits the runtime's expf has where it is compiled with FMA contraction
/// (-march=native on an FMA CPU, the default) and its AVX-512 form has
/// everywhere. This file is built without -march=native. (A runtime built
/// for a target without FMA rounds those steps apart and fails the test
/// below: its softmax bits are then not those of FMA CPUs.)
float fmaExp(float x) {
  const float xc = x < -104.0f ? -104.0f : (x > 88.8f ? 88.8f : x);
  const float magic = 12582912.0f;
  const float t = std::fma(xc, 1.44269504088896341f, magic);
  const float n = t - magic;
  int32_t ni, tb, mb;
  std::memcpy(&tb, &t, 4);
  std::memcpy(&mb, &magic, 4);
  ni = tb - mb;
  float r = std::fma(-n, 0.693359375f, xc);
  r = std::fma(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  for (float c : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f,
                  5.0000001201e-1f})
    p = std::fma(p, r, c);
  p = std::fma(p, r * r, r) + 1.0f;
  const int32_t e1 = ni >> 1, e2 = ni - e1;
  const uint32_t b1 = uint32_t(e1 + 127) << 23, b2 = uint32_t(e2 + 127) << 23;
  float f1, f2;
  std::memcpy(&f1, &b1, 4);
  std::memcpy(&f2, &b2, 4);
  return p * f1 * f2;
}

bool sameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// The fused attention and the softmax share these row steps, and the fused
// plan trains bitwise as the unfused one only while both give exactly
// these bits on every row length (a causal head's rows end anywhere: every
// n from 0 to 300 covers whole blocks, partial blocks and both). The
// exponentials are fmaExp's, elementwise; nothing past n is written.
TEST(Softmax, RowStepsBitwiseInLaneOrder) {
  unsigned seed = 1200;
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t n = 0; n <= 300; ++n) {
    auto x = uniform(n + 16, seed++, -30, 30), g = uniform(n + 16, seed++);
    for (int64_t i = 5; i < n; i += 7)
      x[i] = -inf; // masked keys
    const float m = detail::rowMax(x.data(), n);
    float want = -inf;
    for (int64_t i = 0; i < n; ++i)
      want = std::max(want, x[i]);
    ASSERT_TRUE(sameBits(m, want)) << "rowMax, n " << n;
    const float sentinel = 12345.0f;
    std::vector<float> y(n + 16, sentinel), e(n);
    const float sum = detail::expShifted(x.data(), m, y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      e[i] = fmaExp(x[i] - m);
      ASSERT_TRUE(sameBits(y[i], e[i])) << "exp, n " << n << " at " << i;
    }
    for (int64_t i = n; i < n + 16; ++i)
      ASSERT_EQ(y[i], sentinel) << "expShifted wrote past n " << n;
    ASSERT_TRUE(sameBits(sum, laneOrderSum(e, nullptr))) << "sum, n " << n;
    std::vector<float> gn(g.begin(), g.begin() + n), d(n + 16, sentinel);
    detail::softmaxGradRow(y.data(), g.data(), d.data(), n);
    const float dot = laneOrderSum(e, &gn);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_TRUE(sameBits(d[i], y[i] * (g[i] - dot))) << "grad, n " << n << " at " << i;
    for (int64_t i = n; i < n + 16; ++i)
      ASSERT_EQ(d[i], sentinel) << "softmaxGradRow wrote past n " << n;
  }
}

// A NaN score is skipped by the row's max but not hidden: its exponential
// and the row's sum are NaN, so a diverging run stops (the clamp of
// expf's argument must not turn it into a finite exp(88.8)).
TEST(Softmax, RowStepsPropagateNaN) {
  for (int64_t n : {1, 7, 16, 17, 40}) {
    auto x = uniform(n, 1300 + unsigned(n), -3, 3);
    x[n - 1] = std::numeric_limits<float>::quiet_NaN();
    const float m = detail::rowMax(x.data(), n);
    EXPECT_FALSE(std::isnan(m)) << n;
    std::vector<float> y(n);
    EXPECT_TRUE(std::isnan(detail::expShifted(x.data(), m, y.data(), n))) << n;
    EXPECT_TRUE(std::isnan(y[n - 1])) << n;
    // Out of range on both sides: clamped, not NaN.
    x[n - 1] = 500.0f;
    x[0] = -500.0f;
    EXPECT_FALSE(std::isnan(detail::expShifted(x.data(), 0.0f, y.data(), n))) << n;
    EXPECT_EQ(y[0], fmaExp(-500.0f)) << n;
  }
}

struct Norm {
  std::vector<double> y, mean, rstd;
};

Norm refLayerNorm(const std::vector<double> &x, const std::vector<double> &g,
                  const std::vector<double> *b, int64_t rows, int64_t cols,
                  double eps) {
  Norm r{std::vector<double>(x.size()), std::vector<double>(rows),
         std::vector<double>(rows)};
  for (int64_t i = 0; i < rows; ++i) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < cols; ++c)
      m += x[i * cols + c];
    m /= double(cols);
    for (int64_t c = 0; c < cols; ++c)
      v += (x[i * cols + c] - m) * (x[i * cols + c] - m);
    const double rs = 1 / std::sqrt(v / double(cols) + eps);
    r.mean[i] = m;
    r.rstd[i] = rs;
    for (int64_t c = 0; c < cols; ++c)
      r.y[i * cols + c] =
          (x[i * cols + c] - m) * rs * g[c] + (b ? (*b)[c] : 0.0);
  }
  return r;
}

const std::pair<int64_t, int64_t> kNormShapes[] = {
    {1, 1}, {7, 7}, {33, 33}, {5, 129}, {3, 768}, {257, 65}, {2048, 40}};

// Tolerance: relative 1e-5, absolute 1e-5 (normalized values are O(1)).
TEST(LayerNorm, Forward) {
  unsigned seed = 1200;
  for (auto [rows, cols] : kNormShapes) {
    // An offset makes the mean non-trivial.
    auto x = uniform(rows * cols, seed++, 2, 5);
    auto g = uniform(cols, seed++, 0.5f, 1.5f), b = uniform(cols, seed++);
    for (bool withBeta : {true, false}) {
      std::vector<float> y(x.size());
      layerNorm(x.data(), g.data(), withBeta ? b.data() : nullptr, y.data(),
                rows, cols, 1e-5f);
      auto bd = toDouble(b);
      auto ref = refLayerNorm(toDouble(x), toDouble(g),
                              withBeta ? &bd : nullptr, rows, cols, 1e-5);
      EXPECT_TRUE(near(y, ref.y, 1e-5, 1e-5))
          << rows << "x" << cols << " beta " << withBeta;
    }
  }
}

// Tolerance: against the analytic float64 gradient relative 1e-4, absolute
// 1e-5 (dgamma/dbeta sum `rows` float terms: absolute 1e-6 * rows); against
// central differences (h = 1e-6) of sum(dy * layerNorm) in float64 the same.
TEST(LayerNorm, Gradients) {
  unsigned seed = 1300;
  for (auto [rows, cols] : kNormShapes) {
    const int64_t n = rows * cols;
    auto x = uniform(n, seed++, -2, 2), dy = uniform(n, seed++);
    auto g = uniform(cols, seed++, 0.5f, 1.5f), b = uniform(cols, seed++);
    const double eps = 1e-5;
    std::vector<float> dx(n), dg(cols), db(cols);
    layerNormGrad(dy.data(), x.data(), g.data(), dx.data(), dg.data(),
                  db.data(), rows, cols, float(eps));
    // Analytic: dx = rstd (dy g - mean(dy g) - xhat mean(dy g xhat)).
    auto xd = toDouble(x), gd = toDouble(g), bd = toDouble(b);
    auto fwd = refLayerNorm(xd, gd, &bd, rows, cols, eps);
    std::vector<double> rdx(n), rdg(cols, 0), rdb(cols, 0);
    for (int64_t i = 0; i < rows; ++i) {
      double a = 0, c2 = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double xh = (xd[i * cols + c] - fwd.mean[i]) * fwd.rstd[i];
        a += dy[i * cols + c] * gd[c];
        c2 += dy[i * cols + c] * gd[c] * xh;
        rdg[c] += dy[i * cols + c] * xh;
        rdb[c] += dy[i * cols + c];
      }
      for (int64_t c = 0; c < cols; ++c) {
        const double xh = (xd[i * cols + c] - fwd.mean[i]) * fwd.rstd[i];
        rdx[i * cols + c] = fwd.rstd[i] * (dy[i * cols + c] * gd[c] - a / cols -
                                           xh * c2 / cols);
      }
    }
    const double paramTol = 1e-5 + 1e-6 * double(rows);
    EXPECT_TRUE(near(dx, rdx, 1e-4, 1e-5)) << rows << "x" << cols;
    EXPECT_TRUE(near(dg, rdg, 1e-4, paramTol)) << rows << "x" << cols;
    EXPECT_TRUE(near(db, rdb, 1e-4, paramTol)) << rows << "x" << cols;

    // dbeta may be null.
    std::vector<float> dx2(n), dg2(cols);
    layerNormGrad(dy.data(), x.data(), g.data(), dx2.data(), dg2.data(),
                  nullptr, rows, cols, float(eps));
    EXPECT_TRUE(bitEqual(dx, dx2));
    EXPECT_TRUE(bitEqual(dg, dg2));

    if (n > 1200)
      continue;
    auto loss = [&] {
      auto y = refLayerNorm(xd, gd, &bd, rows, cols, eps).y;
      double s = 0;
      for (int64_t i = 0; i < n; ++i)
        s += dy[i] * y[i];
      return s;
    };
    const double h = 1e-6;
    auto central = [&](std::vector<double> &v) {
      std::vector<double> fd(v.size());
      for (size_t i = 0; i < v.size(); ++i) {
        const double keep = v[i];
        v[i] = keep + h;
        const double up = loss();
        v[i] = keep - h;
        fd[i] = (up - loss()) / (2 * h);
        v[i] = keep;
      }
      return fd;
    };
    EXPECT_TRUE(near(dx, central(xd), 1e-4, 1e-5))
        << "fd " << rows << "x" << cols;
    EXPECT_TRUE(near(dg, central(gd), 1e-4, paramTol)) << "fd " << rows;
    EXPECT_TRUE(near(db, central(bd), 1e-4, paramTol)) << "fd " << rows;
  }
}

TEST(LayerNorm, GradDeterministicAcrossThreadCounts) {
  const int64_t rows = 1000, cols = 129;
  auto x = uniform(rows * cols, 1400), dy = uniform(rows * cols, 1401);
  auto g = uniform(cols, 1402);
  std::vector<float> dx1(rows * cols), dg1(cols), db1(cols);
  std::vector<float> dx2(rows * cols), dg2(cols), db2(cols);
  {
    ThreadCount t(1);
    layerNormGrad(dy.data(), x.data(), g.data(), dx1.data(), dg1.data(),
                  db1.data(), rows, cols, 1e-5f);
  }
  {
    ThreadCount t(2);
    layerNormGrad(dy.data(), x.data(), g.data(), dx2.data(), dg2.data(),
                  db2.data(), rows, cols, 1e-5f);
  }
  EXPECT_TRUE(bitEqual(dx1, dx2));
  EXPECT_TRUE(bitEqual(dg1, dg2));
  EXPECT_TRUE(bitEqual(db1, db2));
}

} // namespace
} // namespace dsrt::cpu::test
