//===- OneBitLambTest.cpp - 1-bit LAMB's update and scaling ---------------===//
//
// cpu::onebitLamb over its warm-up and compressed phases on one rank, and
// cpu::onebitLambScaling, against a float64 transcription of DeepSpeed's
// OnebitLamb (edaa722 runtime/fp16/onebit/lamb.py:161-371).
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

namespace dsrt::cpu::test {
namespace {

/// DeepSpeed's rule for one tensor in float64 (one rank: the compressed
/// momentum is (b1 m + (1-b1) g) itself).
struct Reference {
  std::vector<double> p, m, v, vf;
  double coeffFreeze = 0, lastFactor = 1;
  void warmup(const std::vector<float> &g, bool freezeNow, double lr, const OneBitLambParams &a) {
    const size_t n = p.size();
    double wn = 0, un = 0;
    std::vector<double> u(n);
    for (size_t i = 0; i < n; ++i) {
      m[i] = a.beta1 * m[i] + (1 - double(a.beta1)) * g[i];
      v[i] = a.beta2 * v[i] + (1 - double(a.beta2)) * g[i] * g[i];
      if (freezeNow)
        vf[i] = v[i];
      u[i] = m[i] / (std::sqrt(v[i]) + a.eps) + a.weightDecay * p[i];
      wn += p[i] * p[i];
      un += u[i] * u[i];
    }
    double c = 1;
    if (wn != 0 && un != 0)
      c = std::min(std::max(std::sqrt(wn / un), a.minCoeff), a.maxCoeff);
    if (c != 1)
      coeffFreeze = a.coeffBeta * coeffFreeze + (1 - a.coeffBeta) * c;
    for (size_t i = 0; i < n; ++i)
      p[i] -= lr * c * u[i];
  }
  void compressed(const std::vector<float> &g, bool first, double lr, const OneBitLambParams &a) {
    const size_t n = p.size();
    double factor = 0, pre = 0, up = 0;
    std::vector<double> u(n);
    if (first)
      lastFactor = 1;
    for (size_t i = 0; i < n; ++i) {
      const double old = m[i];
      m[i] = a.beta1 * m[i] + (1 - double(a.beta1)) * g[i];
      const double rec = (m[i] - a.beta1 * old) / (1 - double(a.beta1));
      vf[i] = a.beta2 * vf[i] + (1 - double(a.beta2)) * rec * rec;
      const double denom = std::sqrt(v[i]) + a.eps, prelim = m[i] / denom;
      u[i] = prelim + a.weightDecay * p[i];
      pre += prelim * prelim;
      up += u[i] * u[i];
      factor = std::max(factor, denom / (std::sqrt(vf[i]) + a.eps));
    }
    const double ratio = std::min(1.0, std::sqrt(pre / up));
    factor = factor * ratio + (1 - ratio);
    factor = std::min(std::max(factor, a.factorMin), a.factorMax);
    factor = std::min(factor, lastFactor * (1 + a.factorThreshold));
    factor = std::max(factor, lastFactor * (1 - a.factorThreshold));
    lastFactor = factor;
    for (size_t i = 0; i < n; ++i)
      p[i] -= lr * coeffFreeze * factor * u[i];
  }
};

TEST(OneBitLamb, WarmupThenCompressedAgainstFloat64) {
  const int64_t n = 2000, freeze = 6;
  OneBitLambParams a{0, 0.9f, 0.999f, 1e-3f, 0.01f, 10.0, 0.01, 0.9, 4.0, 0.5, 0.1};
  std::vector<float> p = uniform(n, 1), m(n, 0), v(n, 0), vf(n, 0);
  float coeffFreeze = 0, lastFactor = 0;
  Reference ref{toDouble(p), std::vector<double>(n), std::vector<double>(n),
                std::vector<double>(n)};
  for (int64_t t = 1; t <= 14; ++t) {
    const std::vector<float> g = uniform(n, unsigned(50 + t), -0.1f, 0.1f);
    a.lr = 1e-2f;
    const OneBitPhase phase = t == 1 ? OneBitPhase::Init
                              : t <= freeze ? OneBitPhase::Warmup
                                            : OneBitPhase::Compressed;
    onebitLamb(p.data(), g.data(), m.data(), v.data(), vf.data(), &coeffFreeze, &lastFactor,
               1.0f, nullptr, n, a, phase, t == freeze, t == freeze + 1);
    if (phase == OneBitPhase::Warmup)
      ref.warmup(g, t == freeze, a.lr, a);
    else if (phase == OneBitPhase::Compressed)
      ref.compressed(g, t == freeze + 1, a.lr, a);
    ASSERT_TRUE(near(p, ref.p, 1e-5, 1e-6)) << "p after call " << t;
    ASSERT_TRUE(near(m, ref.m, 1e-5, 1e-7)) << "m after call " << t;
    ASSERT_TRUE(near(vf, ref.vf, 1e-4, 1e-9)) << "v_fresh after call " << t;
    ASSERT_NEAR(coeffFreeze, ref.coeffFreeze, 1e-6 * std::fabs(ref.coeffFreeze));
    if (phase == OneBitPhase::Compressed) {
      ASSERT_NEAR(lastFactor, ref.lastFactor, 1e-6);
    }
  }
  // The factor moved by at most factor_threshold a step from 1.
  EXPECT_GE(lastFactor, std::pow(0.9, 8) - 1e-6);
}

TEST(OneBitLamb, CompressedMomentumIsDividedByItsScale) {
  // With a compressed operand, m = compressed / scaling_coeff.
  const int64_t n = 64;
  OneBitLambParams a{1e-2f, 0.9f, 0.999f, 1e-3f, 0.0f, 10.0, 0.01, 0.9, 4.0, 0.5, 0.1};
  std::vector<float> p = uniform(n, 2), g = uniform(n, 3), m = uniform(n, 4),
                     v = uniform(n, 5, 0.1f, 1.0f), vf = v, c = uniform(n, 6);
  float coeffFreeze = 0.5f, lastFactor = 1.0f;
  onebitLamb(p.data(), g.data(), m.data(), v.data(), vf.data(), &coeffFreeze, &lastFactor,
             4.0f, c.data(), n, a, OneBitPhase::Compressed, false, false);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(m[i], c[i] / 4.0f) << i;
}

TEST(OneBitLamb, StatsOfTheFlatTensorAreTheSumOfItsParts) {
  // Two tensors updated with the stats of both end as their concatenation
  // updated as one tensor, in both phases (DeepSpeed's wrapper's one flat
  // tensor).
  const int64_t n = 300, k = 120;
  OneBitLambParams a{1e-2f, 0.9f, 0.999f, 1e-3f, 0.01f, 10.0, 0.01, 0.9, 4.0, 0.5, 0.1};
  std::vector<float> p = uniform(n, 11), m = uniform(n, 12, -0.1f, 0.1f),
                     v = uniform(n, 13, 0.01f, 0.1f), vf = uniform(n, 14, 0.01f, 0.1f);
  for (OneBitPhase phase : {OneBitPhase::Warmup, OneBitPhase::Compressed}) {
    const std::vector<float> g = uniform(n, phase == OneBitPhase::Warmup ? 15 : 16);
    std::vector<float> p1 = p, m1 = m, v1 = v, vf1 = vf;
    float cf1 = 0.7f, lf1 = 1.0f;
    onebitLamb(p1.data(), g.data(), m1.data(), v1.data(), vf1.data(), &cf1, &lf1, 1.0f, nullptr,
               n, a, phase, false, true);
    double stats[3] = {0, 0, 0};
    onebitLambStats(p.data(), g.data(), m.data(), v.data(), vf.data(), nullptr, k, a, phase,
                    stats);
    onebitLambStats(p.data() + k, g.data() + k, m.data() + k, v.data() + k, vf.data() + k,
                    nullptr, n - k, a, phase, stats);
    const float s[3] = {float(stats[0]), float(stats[1]), float(stats[2])};
    std::vector<float> p2 = p, m2 = m, v2 = v, vf2 = vf;
    float cfa = 0.7f, lfa = 1.0f, cfb = 0.7f, lfb = 1.0f;
    onebitLamb(p2.data(), g.data(), m2.data(), v2.data(), vf2.data(), &cfa, &lfa, 1.0f, nullptr,
               k, a, phase, false, true, s);
    onebitLamb(p2.data() + k, g.data() + k, m2.data() + k, v2.data() + k, vf2.data() + k, &cfb,
               &lfb, 1.0f, nullptr, n - k, a, phase, false, true, s);
    EXPECT_TRUE(near(p2, toDouble(p1), 1e-6, 1e-7)) << (phase == OneBitPhase::Warmup ? "warm-up" : "compressed");
    EXPECT_EQ(m2, m1);
    EXPECT_NEAR(cfa, cf1, 1e-6);
    EXPECT_EQ(cfa, cfb);
    EXPECT_NEAR(lfa, lf1, 1e-6);
    EXPECT_EQ(lfa, lfb);
  }
}

TEST(OneBitLamb, ScalingBringsEveryMomentumToTheMeanSize) {
  std::vector<float> a = uniform(100, 7), b = uniform(10, 8, -5.0f, 5.0f);
  const float *m[] = {a.data(), b.data()};
  const int64_t n[] = {100, 10};
  float coeff[2];
  onebitLambScaling(m, n, 2, coeff);
  auto rms = [](const std::vector<float> &x) {
    double s = 0;
    for (float v : x)
      s += double(v) * v;
    return std::sqrt(s / double(x.size()));
  };
  const double united = (rms(a) + rms(b)) / 2;
  EXPECT_NEAR(coeff[0], united / rms(a), 1e-6 * united / rms(a));
  EXPECT_NEAR(coeff[1], united / rms(b), 1e-6 * united / rms(b));
  EXPECT_NEAR(coeff[0] * rms(a), coeff[1] * rms(b), 1e-5);
}

} // namespace
} // namespace dsrt::cpu::test
