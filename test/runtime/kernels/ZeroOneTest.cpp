//===- ZeroOneTest.cpp - 0/1 Adam's step classes and update ---------------===//
//
// The step classes of plan/StepRule.h (a closed form, searched by
// segments) against DeepSpeed's own counters, kept call by call as
// zoadam.py keeps them (edaa722 lines 127-319); and cpu::zeroOneAdam /
// zeroOnePayload over every class against a float64 transcription of the
// same update on one rank, 40 steps.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "plan/StepRule.h"

namespace dsrt::cpu::test {
namespace {

/// DeepSpeed's counters, advanced one call at a time: the class of each of
/// calls 1..n (by the STEP value, t - step_offset).
std::vector<uint32_t> deepSpeedClasses(const ZeroOneRule &r, int64_t n) {
  std::vector<uint32_t> out;
  bool frozen = false;
  int64_t varInterval = 1, varCounter = 0, localInterval = 1, localCounter = 0;
  for (int64_t t = 1; t <= n + r.stepOffset; ++t) {
    uint32_t cls;
    if (t == 1) {
      cls = kStepInit; // returns before the freeze check
    } else if (!frozen) {
      cls = t % varInterval == 0 ? kStepVariance : kStepCompressedGrad;
      if (t % varInterval == 0 && ++varCounter == r.varUpdateScaler) {
        varCounter = 0;
        varInterval *= 2;
      }
    } else {
      cls = t % localInterval == 0 ? (kStepLocal | kStepSync) : kStepLocal;
      if (++localCounter == r.localStepScaler) {
        localCounter = 0;
        localInterval = std::min(r.localStepClipper, localInterval * 2);
      }
    }
    if (t > 1 && t > r.varFreezeStep)
      frozen = true;
    if (t > r.stepOffset)
      out.push_back(cls);
  }
  return out;
}

TEST(ZeroOneRule, ClassesFollowDeepSpeedsCounters) {
  const std::vector<ZeroOneRule> rules = {
      {8, 2, 2, 4, 0},        {100000, 16, 32678, 16, 0}, {0, 16, 32678, 16, 0},
      {1, 1, 1, 1, 0},        {30, 3, 5, 5, 0},           {30, 0, 0, 16, 0},
      {12, 4, 3, 7, 1},       {2, 2, 2, 64, 0},           {500, 5, 7, 16, 0}};
  for (const ZeroOneRule &r : rules) {
    const int64_t n = 3000;
    std::vector<uint32_t> want = deepSpeedClasses(r, n);
    for (int64_t s = 1; s <= n; ++s)
      ASSERT_EQ(r.classOf(s), want[size_t(s - 1)])
          << "step " << s << " of rule {" << r.varFreezeStep << ", " << r.varUpdateScaler
          << ", " << r.localStepScaler << ", " << r.localStepClipper << ", " << r.stepOffset
          << "}";
    // The first local step is where DeepSpeed zeroes the errors.
    int64_t first = 1;
    while (first <= n && !(want[size_t(first - 1)] & kStepLocal))
      ++first;
    if (first <= n)
      EXPECT_EQ(r.firstFrozenStep(), first);
    else
      EXPECT_GT(r.firstFrozenStep(), n);
  }
}

TEST(ZeroOneRule, TestSchedule) {
  // The e2e test's policy (zero-one-adam.test): every class within 20 steps.
  const ZeroOneRule r{8, 2, 2, 4, 0};
  std::string got;
  for (int64_t s = 1; s <= 20; ++s)
    got += std::string(s > 1 ? " " : "") + stepClassName(r.classOf(s) & kStepSync ? kStepSync
                                                                                 : r.classOf(s));
  EXPECT_EQ(got, "initialising variance variance variance compressed-gradient variance "
                 "compressed-gradient variance compressed-gradient sync sync sync local "
                 "local local sync local local local sync");
}

/// The update in float64, DeepSpeed's formulas on one rank (no compression).
struct Reference {
  std::vector<double> p, m, v, u;
  double lrs = 0;
  void step(const std::vector<float> &g, uint32_t cls, double lr, double b1, double b2,
            double eps, double wd) {
    if (cls & kStepInit)
      return;
    const bool local = cls & kStepLocal;
    if (local)
      lrs += lr;
    for (size_t i = 0; i < p.size(); ++i) {
      if (cls & kStepVariance) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      } else if (local) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
      }
      const double upd = m[i] / (std::sqrt(v[i]) + eps) + wd * p[i];
      p[i] -= lr * upd;
      if (local)
        u[i] -= lr * upd;
      if (cls & kStepSync) {
        const double denom = std::sqrt(v[i]) + eps;
        p[i] -= u[i];
        const double c = u[i] * denom;
        m[i] = -c / lrs;
        p[i] += c / denom;
        u[i] = 0;
      }
    }
    if (cls & kStepSync)
      lrs = 0;
  }
};

TEST(ZeroOneAdam, EveryClassAgainstFloat64) {
  const int64_t n = 1000;
  const ZeroOneRule rule{8, 2, 2, 4, 0};
  const float b1 = 0.9f, b2 = 0.999f, eps = 1e-3f, wd = 0.01f;
  std::vector<float> p = uniform(n, 1), m(n, 0), v(n, 0), u(n, 0), payload(n);
  float lrs = 0;
  Reference ref{toDouble(p), std::vector<double>(n), std::vector<double>(n),
                std::vector<double>(n)};
  for (int64_t s = 1; s <= 40; ++s) {
    const float lr = 1e-2f * float(1 + s % 3);
    const std::vector<float> g = uniform(n, unsigned(100 + s));
    const uint32_t cls = rule.classOf(s);
    // The sync's payload is u after this step's local update, times
    // sqrt(v) + eps; a compressed-gradient step's is the gradient.
    zeroOnePayload(payload.data(), p.data(), g.data(), m.data(), v.data(), u.data(), n, lr, b1,
                   eps, wd, cls);
    zeroOneAdam(p.data(), g.data(), m.data(), v.data(), u.data(), &lrs, nullptr, n, lr, b1, b2,
                eps, wd, cls);
    ref.step(g, cls, lr, b1, b2, eps, wd);
    ASSERT_TRUE(near(p, ref.p, 1e-4, 1e-5)) << "p at step " << s;
    ASSERT_TRUE(near(m, ref.m, 1e-4, 1e-5)) << "m at step " << s;
    ASSERT_TRUE(near(v, ref.v, 1e-4, 1e-7)) << "v at step " << s;
    ASSERT_TRUE(near(u, ref.u, 1e-4, 1e-6)) << "u at step " << s;
    EXPECT_NEAR(lrs, ref.lrs, 1e-6) << "lrs at step " << s;
    if (cls & kStepCompressedGrad) {
      EXPECT_EQ(payload, g) << "step " << s;
    }
    if (cls & kStepSync) {
      EXPECT_EQ(u, std::vector<float>(n, 0.0f)) << "u after the sync at step " << s;
    }
  }
}

TEST(ZeroOneAdam, SyncReadsThePayloadItsUpdateWouldSend) {
  // On a sync step the update given its own payload (what one rank's
  // all-reduce returns) ends bitwise where it ends without one.
  const int64_t n = 777;
  const ZeroOneRule rule{2, 16, 32678, 16, 0};
  const uint32_t sync = rule.classOf(4);
  ASSERT_EQ(sync, kStepLocal | kStepSync);
  std::vector<float> p = uniform(n, 7), g = uniform(n, 8), m = uniform(n, 9),
                     v = uniform(n, 10, 0.0f, 1.0f), u = uniform(n, 11), payload(n);
  std::vector<float> p2 = p, m2 = m, v2 = v, u2 = u;
  float lrs = 0.3f, lrs2 = 0.3f;
  zeroOnePayload(payload.data(), p.data(), g.data(), m.data(), v.data(), u.data(), n, 0.01f,
                 0.9f, 1e-8f, 0.1f, sync);
  zeroOneAdam(p.data(), g.data(), m.data(), v.data(), u.data(), &lrs, payload.data(), n, 0.01f,
              0.9f, 0.999f, 1e-8f, 0.1f, sync);
  zeroOneAdam(p2.data(), g.data(), m2.data(), v2.data(), u2.data(), &lrs2, nullptr, n, 0.01f,
              0.9f, 0.999f, 1e-8f, 0.1f, sync);
  EXPECT_EQ(p, p2);
  EXPECT_EQ(m, m2);
  EXPECT_EQ(u, u2);
  EXPECT_EQ(lrs, 0.0f);
}

} // namespace
} // namespace dsrt::cpu::test
