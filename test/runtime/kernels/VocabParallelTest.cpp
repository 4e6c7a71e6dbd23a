//===- VocabParallelTest.cpp - the vocabulary-parallel kernels -----------===//
//
// Megatron's vocabulary-parallel embedding and cross-entropy, with the tp
// group simulated in one process: P parts of the classes (or of the table's
// rows), combined as the group's all-reduces would (max, sum). The loss and
// its gradient against the float64 reference of LossTest and against the
// whole-vocabulary kernels; the embedding's parts summed, and its
// gradient's parts concatenated, bit for bit against the whole table's.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <cmath>

namespace dsrt::cpu::test {
namespace {

constexpr int64_t kIgnore = -100;

TEST(VocabParallel, CrossEntropyLossAndGradAcrossParts) {
  struct Case {
    int64_t N, C, parts;
  };
  const Case cases[] = {{1, 2, 2}, {7, 8, 2}, {33, 129 * 4, 4}, {5, 1000, 2}, {16, 96, 3}};
  unsigned seed = 4100;
  for (const Case &k : cases)
    for (bool hasIgnore : {false, true})
      for (int reduction : {0, 1, 2}) {
        const int64_t part = k.C / k.parts;
        auto x = uniform(k.N * k.C, seed++, -6, 6);
        std::vector<int64_t> lab(size_t(k.N));
        for (int64_t n = 0; n < k.N; ++n) {
          lab[size_t(n)] = int64_t((n * 7919 + seed) % uint64_t(k.C));
          if (hasIgnore && n % 3 == 1)
            lab[size_t(n)] = kIgnore;
          if (n % 11 == 5)
            lab[size_t(n)] = n % 2 ? k.C + 1 : -7; // bad: outside the whole vocabulary
        }
        // Each part's columns, contiguous.
        std::vector<std::vector<float>> parts(size_t(k.parts));
        for (int64_t p = 0; p < k.parts; ++p)
          for (int64_t n = 0; n < k.N; ++n)
            parts[size_t(p)].insert(parts[size_t(p)].end(), x.begin() + n * k.C + p * part,
                                    x.begin() + n * k.C + (p + 1) * part);
        // The group's max, then the summed stats.
        std::vector<float> gmax(size_t(k.N), -INFINITY), m(size_t(k.N));
        for (int64_t p = 0; p < k.parts; ++p) {
          crossEntropyPartMax(parts[size_t(p)].data(), k.N, part, m.data());
          for (int64_t n = 0; n < k.N; ++n)
            gmax[size_t(n)] = std::max(gmax[size_t(n)], m[size_t(n)]);
        }
        std::vector<float> stats(size_t(2 * k.N), 0.0f), s(size_t(2 * k.N));
        for (int64_t p = 0; p < k.parts; ++p) {
          crossEntropyPartSums(parts[size_t(p)].data(), lab.data(), gmax.data(), k.N, part,
                               p * part, s.data());
          for (size_t i = 0; i < s.size(); ++i)
            stats[i] += s[i];
        }
        const int64_t total = reduction == 0 ? k.N : 1;
        std::vector<float> loss(static_cast<size_t>(total)), whole(static_cast<size_t>(total));
        int64_t bad = crossEntropyPartLoss(stats.data(), gmax.data(), lab.data(), loss.data(),
                                           k.N, k.C, reduction, hasIgnore, kIgnore);
        int64_t wholeBad = crossEntropy(x.data(), lab.data(), whole.data(), k.N, k.C, 1,
                                        reduction, hasIgnore, kIgnore);
        std::string what = "N" + std::to_string(k.N) + " C" + std::to_string(k.C) + " parts" +
                           std::to_string(k.parts) + " red" + std::to_string(reduction) +
                           " ignore" + std::to_string(hasIgnore);
        EXPECT_EQ(bad, wholeBad) << what;
        // Against float64.
        std::vector<double> ref(size_t(total), 0.0);
        int64_t valid = 0;
        for (int64_t n = 0; n < k.N; ++n) {
          int64_t l = lab[size_t(n)];
          if ((hasIgnore && l == kIgnore) || l < 0 || l >= k.C)
            continue;
          ++valid;
          double mx = -INFINITY, se = 0;
          for (int64_t c = 0; c < k.C; ++c)
            mx = std::max(mx, double(x[size_t(n * k.C + c)]));
          for (int64_t c = 0; c < k.C; ++c)
            se += std::exp(double(x[size_t(n * k.C + c)]) - mx);
          double per = std::log(se) + mx - double(x[size_t(n * k.C + l)]);
          ref[reduction == 0 ? size_t(n) : 0] += per;
        }
        if (reduction == 2) {
          if (valid == 0)
            continue;
          ref[0] /= double(valid);
        }
        EXPECT_TRUE(near(loss, ref, 1e-5, 1e-5)) << what;
        EXPECT_TRUE(near(loss, toDouble(whole), 1e-5, 1e-6)) << what;

        // The gradient: the loss's dstats (every rank alike), then each
        // part's logits, against the whole kernel's.
        auto dloss = uniform(total, seed++, 0.5f, 2);
        std::vector<float> dstats(size_t(2 * k.N));
        crossEntropyPartLossGrad(stats.data(), lab.data(), dloss.data(), dstats.data(), k.N,
                                 k.C, reduction, hasIgnore, kIgnore);
        std::vector<float> dx(x.size()), dpart(size_t(k.N * part));
        for (int64_t p = 0; p < k.parts; ++p) {
          crossEntropyPartSumsGrad(parts[size_t(p)].data(), lab.data(), gmax.data(),
                                   dstats.data(), dpart.data(), k.N, part, p * part);
          for (int64_t n = 0; n < k.N; ++n)
            std::copy(dpart.begin() + n * part, dpart.begin() + (n + 1) * part,
                      dx.begin() + n * k.C + p * part);
        }
        std::vector<float> dwhole(x.size());
        crossEntropyGrad(x.data(), lab.data(), dloss.data(), dwhole.data(), k.N, k.C, 1,
                         reduction, hasIgnore, kIgnore);
        EXPECT_TRUE(near(dx, toDouble(dwhole), 1e-5, 1e-7)) << "grad " << what;
      }
}

TEST(VocabParallel, EmbeddingPartsSumToTheWholeGather) {
  struct Case {
    int64_t V, inner, nIdx, parts;
  };
  const Case cases[] = {{8, 3, 5, 2}, {96, 16, 40, 4}, {9, 1, 20, 3}, {1000, 33, 64, 2}};
  unsigned seed = 4200;
  for (const Case &k : cases) {
    const int64_t part = k.V / k.parts;
    auto table = uniform(k.V * k.inner, seed++);
    std::vector<int64_t> idx(size_t(k.nIdx));
    for (int64_t j = 0; j < k.nIdx; ++j) {
      idx[size_t(j)] = int64_t((j * 104729 + seed) % uint64_t(2 * k.V)) - k.V; // [-V, V)
      if (j % 7 == 3)
        idx[size_t(j)] = j % 2 ? k.V : -k.V - 1; // bad
      if (j % 5 == 0 && j + 1 < k.nIdx)
        idx[size_t(j + 1)] = idx[size_t(j)]; // repeated rows
    }
    std::vector<float> whole(size_t(k.nIdx * k.inner)), sum(whole.size(), 0.0f),
        out(whole.size());
    int64_t bad = gather(table.data(), idx.data(), whole.data(), 1, k.V, k.inner, k.nIdx);
    auto dy = uniform(k.nIdx * k.inner, seed++);
    std::vector<float> dwhole(table.size()), dparts(table.size());
    gatherGrad(dy.data(), idx.data(), dwhole.data(), 1, k.V, k.inner, k.nIdx);
    for (int64_t p = 0; p < k.parts; ++p) {
      EXPECT_EQ(gatherPart(table.data() + p * part * k.inner, idx.data(), out.data(), part,
                           k.inner, k.nIdx, p * part, k.V),
                bad);
      for (size_t i = 0; i < out.size(); ++i)
        sum[i] += out[i];
      EXPECT_EQ(gatherGradPart(dy.data(), idx.data(), dparts.data() + p * part * k.inner, part,
                               k.inner, k.nIdx, p * part, k.V),
                bad);
    }
    EXPECT_EQ(sum, whole) << "V" << k.V << " parts" << k.parts;
    EXPECT_EQ(dparts, dwhole) << "grad V" << k.V << " parts" << k.parts;
  }
}

} // namespace
} // namespace dsrt::cpu::test
