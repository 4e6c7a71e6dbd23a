//===- LossTest.cpp - cross entropy and NLL loss --------------------------===//
//
// Every reduction, inner == 1 and inner > 1 (more samples than one kernel
// block), ignore_index and out-of-range labels, against float64 references;
// the cross-entropy gradient also against central finite differences.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <limits>

namespace dsrt::cpu::test {
namespace {

struct Case {
  int64_t N, C, inner;
};
const Case kCases[] = {{1, 1, 1}, {7, 7, 1},   {33, 129, 1}, {5, 1000, 1},
                       {3, 7, 3}, {2, 5, 130}, {4, 33, 7}};
constexpr int64_t kIgnore = -100;

/// Labels with some ignored (when hasIgnore) and, every 11th, out of range.
std::vector<int64_t> makeLabels(const Case &k, unsigned seed, bool hasIgnore,
                                bool withBad) {
  std::mt19937 gen(seed);
  std::vector<int64_t> l(k.N * k.inner);
  for (size_t i = 0; i < l.size(); ++i) {
    l[i] = int64_t(gen() % uint64_t(k.C));
    if (hasIgnore && i % 4 == 1)
      l[i] = kIgnore;
    if (withBad && i % 11 == 5)
      l[i] = i % 2 ? k.C + 3 : -5;
  }
  return l;
}

struct RefLoss {
  std::vector<double> per; // per sample, 0 where skipped
  double sum = 0;
  int64_t valid = 0, bad = 0;
};

bool isValid(int64_t l, int64_t C, bool hasIgnore) {
  return !(hasIgnore && l == kIgnore) && l >= 0 && l < C;
}

/// Float64 loss; logits are log-probabilities when `nll`.
RefLoss refLoss(const std::vector<double> &x, const std::vector<int64_t> &lab,
                const Case &k, bool hasIgnore, bool nll) {
  RefLoss r;
  r.per.assign(k.N * k.inner, 0.0);
  for (int64_t n = 0; n < k.N; ++n)
    for (int64_t j = 0; j < k.inner; ++j) {
      const int64_t i = n * k.inner + j, l = lab[i];
      if (!isValid(l, k.C, hasIgnore)) {
        r.bad += !(hasIgnore && l == kIgnore);
        continue;
      }
      ++r.valid;
      auto at = [&](int64_t c) { return x[(n * k.C + c) * k.inner + j]; };
      if (nll) {
        r.per[i] = -at(l);
      } else {
        double m = -std::numeric_limits<double>::infinity(), s = 0;
        for (int64_t c = 0; c < k.C; ++c)
          m = std::max(m, at(c));
        for (int64_t c = 0; c < k.C; ++c)
          s += std::exp(at(c) - m);
        r.per[i] = std::log(s) + m - at(l);
      }
      r.sum += r.per[i];
    }
  return r;
}

std::vector<double> reduced(const RefLoss &r, int reduction) {
  if (reduction == 0)
    return r.per;
  return {reduction == 1 ? r.sum : r.sum / double(r.valid)};
}

/// Float64 gradient of the reduced loss times the upstream gradient.
std::vector<double> refGrad(const std::vector<double> &x,
                            const std::vector<int64_t> &lab, const Case &k,
                            bool hasIgnore, bool nll, int reduction,
                            const std::vector<float> &dloss, int64_t valid) {
  std::vector<double> g(x.size(), 0.0);
  for (int64_t n = 0; n < k.N; ++n)
    for (int64_t j = 0; j < k.inner; ++j) {
      const int64_t i = n * k.inner + j, l = lab[i];
      if (!isValid(l, k.C, hasIgnore))
        continue;
      const double s = reduction == 0   ? dloss[i]
                       : reduction == 1 ? dloss[0]
                                        : dloss[0] / double(valid);
      auto at = [&](int64_t c) { return (n * k.C + c) * k.inner + j; };
      if (!nll) {
        double m = -std::numeric_limits<double>::infinity(), z = 0;
        for (int64_t c = 0; c < k.C; ++c)
          m = std::max(m, x[at(c)]);
        for (int64_t c = 0; c < k.C; ++c)
          z += std::exp(x[at(c)] - m);
        for (int64_t c = 0; c < k.C; ++c)
          g[at(c)] = s * std::exp(x[at(c)] - m) / z;
      }
      g[at(l)] -= s;
    }
  return g;
}

// Tolerance: relative 1e-5, absolute 1e-5 for the losses (per-sample values
// O(log C)); gradients relative 1e-5, absolute 1e-6.
TEST(Loss, CrossEntropyAndNll) {
  unsigned seed = 1500;
  for (const Case &k : kCases)
    for (bool hasIgnore : {false, true})
      for (bool withBad : {false, true})
        for (int reduction : {0, 1, 2})
          for (bool nll : {false, true}) {
            const int64_t total = k.N * k.inner;
            auto x = uniform(total * k.C, seed++, -5, 5);
            auto lab = makeLabels(k, seed++, hasIgnore, withBad);
            auto ref = refLoss(toDouble(x), lab, k, hasIgnore, nll);
            if (ref.valid == 0 && reduction == 2)
              continue; // covered by AllIgnoredMean
            std::vector<float> loss(reduction == 0 ? total : 1);
            const int64_t bad =
                nll ? nllLoss(x.data(), lab.data(), loss.data(), k.N, k.C,
                              k.inner, reduction, hasIgnore, kIgnore)
                    : crossEntropy(x.data(), lab.data(), loss.data(), k.N, k.C,
                                   k.inner, reduction, hasIgnore, kIgnore);
            const std::string what =
                std::string(nll ? "nll" : "ce") + " N" + std::to_string(k.N) +
                " C" + std::to_string(k.C) + " inner" +
                std::to_string(k.inner) + " red" + std::to_string(reduction) +
                " ignore" + std::to_string(hasIgnore) + " bad" +
                std::to_string(withBad);
            EXPECT_EQ(bad, ref.bad) << what;
            EXPECT_TRUE(near(loss, reduced(ref, reduction), 1e-5, 1e-5))
                << what;

            auto dloss = uniform(reduction == 0 ? total : 1, seed++, 0.5f, 2);
            std::vector<float> dx(x.size(), std::nanf(""));
            const int64_t badG =
                nll ? nllLossGrad(lab.data(), dloss.data(), dx.data(), k.N, k.C,
                                  k.inner, reduction, hasIgnore, kIgnore)
                    : crossEntropyGrad(x.data(), lab.data(), dloss.data(),
                                       dx.data(), k.N, k.C, k.inner, reduction,
                                       hasIgnore, kIgnore);
            EXPECT_EQ(badG, ref.bad) << what;
            EXPECT_TRUE(near(dx,
                             refGrad(toDouble(x), lab, k, hasIgnore, nll,
                                     reduction, dloss, ref.valid),
                             1e-5, 1e-6))
                << "grad " << what;
          }
}

// Tolerance: relative 1e-4, absolute 1e-6 against central differences
// (h = 1e-6) of dloss . loss(x) computed in float64.
TEST(Loss, CrossEntropyGradFiniteDifferences) {
  const Case cases[] = {{7, 7, 1}, {3, 5, 4}, {2, 33, 1}};
  unsigned seed = 1600;
  for (const Case &k : cases)
    for (int reduction : {0, 1, 2}) {
      const int64_t total = k.N * k.inner;
      auto x = uniform(total * k.C, seed++, -3, 3);
      auto lab = makeLabels(k, seed++, true, false);
      auto dloss = uniform(reduction == 0 ? total : 1, seed++, 0.5f, 2);
      std::vector<float> dx(x.size());
      crossEntropyGrad(x.data(), lab.data(), dloss.data(), dx.data(), k.N, k.C,
                       k.inner, reduction, true, kIgnore);
      auto xd = toDouble(x);
      auto objective = [&] {
        auto l = reduced(refLoss(xd, lab, k, true, false), reduction);
        double s = 0;
        for (size_t i = 0; i < l.size(); ++i)
          s += dloss[i] * l[i];
        return s;
      };
      std::vector<double> fd(x.size());
      const double h = 1e-6;
      for (size_t i = 0; i < x.size(); ++i) {
        const double keep = xd[i];
        xd[i] = keep + h;
        const double up = objective();
        xd[i] = keep - h;
        fd[i] = (up - objective()) / (2 * h);
        xd[i] = keep;
      }
      EXPECT_TRUE(near(dx, fd, 1e-4, 1e-6))
          << "N" << k.N << " C" << k.C << " inner" << k.inner << " red"
          << reduction;
    }
}

TEST(Loss, AllIgnoredMean) {
  const Case k{3, 5, 2};
  auto x = uniform(k.N * k.C * k.inner, 1700);
  std::vector<int64_t> lab(k.N * k.inner, kIgnore);
  float loss = 0, dloss = 1;
  EXPECT_EQ(crossEntropy(x.data(), lab.data(), &loss, k.N, k.C, k.inner, 2,
                         true, kIgnore),
            0);
  EXPECT_TRUE(std::isnan(loss)); // 0 / 0, like torch
  std::vector<float> dx(x.size(), 1.0f);
  crossEntropyGrad(x.data(), lab.data(), &dloss, dx.data(), k.N, k.C, k.inner,
                   2, true, kIgnore);
  for (float v : dx)
    EXPECT_EQ(v, 0.0f);
}

// 16-bit logits (a mixed-precision head's, read as they are): the loss is
// bitwise the float kernel's on their float32 cast, and the gradient
// bitwise that float gradient rounded once, with [N, C] rows and with
// samples along an inner dimension, every reduction, an ignored label.
template <class H> void halfLogitsAreTheirFloatCast() {
  for (int64_t inner : {1, 3})
    for (int reduction : {0, 1, 2}) {
      SCOPED_TRACE("inner " + std::to_string(inner) + " reduction " + std::to_string(reduction));
      const int64_t N = 6, C = 37, total = N * inner;
      const std::vector<H> x = narrowTo<H>(uniform(N * C * inner, 4100 + inner, -6, 6));
      const std::vector<float> wide = widen(x);
      std::vector<int64_t> labels(static_cast<size_t>(total), 0);
      for (int64_t i = 0; i < total; ++i)
        labels[size_t(i)] = (i * 7) % C;
      labels[2] = -100;
      std::vector<float> lossH(size_t(reduction == 0 ? total : 1)), lossF(lossH.size());
      EXPECT_EQ(crossEntropy(x.data(), labels.data(), lossH.data(), N, C, inner, reduction, true,
                             -100),
                0);
      crossEntropy(wide.data(), labels.data(), lossF.data(), N, C, inner, reduction, true, -100);
      EXPECT_TRUE(bitEqual(lossH, lossF));
      const std::vector<float> dloss = uniform(int64_t(lossH.size()), 4200, 0.5f, 2.0f);
      std::vector<H> gradH(x.size());
      std::vector<float> gradF(x.size());
      crossEntropyGrad(x.data(), labels.data(), dloss.data(), gradH.data(), N, C, inner,
                       reduction, true, -100);
      crossEntropyGrad(wide.data(), labels.data(), dloss.data(), gradF.data(), N, C, inner,
                       reduction, true, -100);
      EXPECT_TRUE(bitEqual(widen(gradH), widen(narrowTo<H>(gradF))));
    }
}

TEST(Loss, Bf16LogitsAreTheirFloatCast) { halfLogitsAreTheirFloatCast<Bf16>(); }
TEST(Loss, Fp16LogitsAreTheirFloatCast) { halfLogitsAreTheirFloatCast<Fp16>(); }

} // namespace
} // namespace dsrt::cpu::test
