//===- MatmulTest.cpp - batched broadcasting matmul -----------------------===//
//
// Against a float64 triple loop over every transpose combination, batch
// broadcast in either operand (the folded x @ W path and the per-batch
// paths), alpha/beta accumulation, and the OpenBLAS backend (a fresh process
// started with DSRT_GEMM=openblas, since the backend is chosen once).
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <cstdlib>

namespace dsrt::cpu::test {
namespace {

struct Case {
  Shape a;
  bool transA;
  Shape b;
  bool transB;
  Shape c;
};

std::vector<double> refMatmul(const Case &k, const std::vector<float> &A,
                              const std::vector<float> &B,
                              const std::vector<float> &C0, double alpha,
                              double beta) {
  const int cb = k.c.rank - 2;
  const int64_t M = k.c.dims[cb], N = k.c.dims[cb + 1];
  const int64_t K = k.transA ? k.a.dims[k.a.rank - 2] : k.a.dims[k.a.rank - 1];
  const int64_t aRows = k.a.dims[k.a.rank - 2], aCols = k.a.dims[k.a.rank - 1];
  const int64_t bRows = k.b.dims[k.b.rank - 2], bCols = k.b.dims[k.b.rank - 1];
  Shape batch;
  batch.rank = cb;
  for (int d = 0; d < cb; ++d)
    batch.dims[d] = k.c.dims[d];
  Shape aBatch, bBatch;
  aBatch.rank = k.a.rank - 2;
  bBatch.rank = k.b.rank - 2;
  for (int d = 0; d < aBatch.rank; ++d)
    aBatch.dims[d] = k.a.dims[d];
  for (int d = 0; d < bBatch.rank; ++d)
    bBatch.dims[d] = k.b.dims[d];
  std::vector<double> C(C0.size());
  for (int64_t t = 0; t < batch.numel(); ++t) {
    auto idx = unravel(t, batch);
    const float *a = A.data() + broadcastIndex(idx, aBatch) * aRows * aCols;
    const float *b = B.data() + broadcastIndex(idx, bBatch) * bRows * bCols;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t kk = 0; kk < K; ++kk) {
          const double av = k.transA ? a[kk * aCols + m] : a[m * aCols + kk];
          const double bv = k.transB ? b[n * bCols + kk] : b[kk * bCols + n];
          s += av * bv;
        }
        const int64_t o = (t * M + m) * N + n;
        C[o] = alpha * s + beta * C0[o];
      }
  }
  return C;
}

std::vector<Case> cases() {
  auto mk = [](int64_t r, int64_t c, bool t) {
    return t ? shape({c, r}) : shape({r, c});
  };
  std::vector<Case> cs;
  // Plain 2-D, every transpose combination, odd sizes.
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      cs.push_back({mk(33, 7, ta), ta, mk(7, 129, tb), tb, shape({33, 129})});
      cs.push_back({mk(1, 33, ta), ta, mk(33, 1, tb), tb, shape({1, 1})});
      cs.push_back({mk(7, 1, ta), ta, mk(1, 33, tb), tb, shape({7, 33})});
    }
  // Weight shared across a batch (x @ W and x @ W^T): one folded gemm.
  cs.push_back({shape({2, 3, 33, 65}), false, shape({65, 7}), false,
                shape({2, 3, 33, 7})});
  cs.push_back(
      {shape({3, 33, 65}), false, shape({1, 7, 65}), true, shape({3, 33, 7})});
  // Same with A transposed: not foldable, per batch.
  cs.push_back(
      {shape({3, 65, 33}), true, shape({65, 7}), false, shape({3, 33, 7})});
  // A broadcast over B's batch, both transposes.
  cs.push_back(
      {shape({33, 17}), false, shape({4, 17, 9}), false, shape({4, 33, 9})});
  cs.push_back(
      {shape({17, 33}), true, shape({4, 9, 17}), true, shape({4, 33, 9})});
  // Broadcast both ways: [2,1] x [1,3] batches.
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      cs.push_back({ta ? shape({2, 1, 17, 33}) : shape({2, 1, 33, 17}), ta,
                    tb ? shape({1, 3, 9, 17}) : shape({1, 3, 17, 9}), tb,
                    shape({2, 3, 33, 9})});
  // Many small batches (attention-like), one gemm per thread.
  cs.push_back({shape({2, 12, 33, 16}), false, shape({2, 12, 33, 16}), true,
                shape({2, 12, 33, 33})});
  cs.push_back({shape({24, 33, 33}), false, shape({24, 33, 16}), false,
                shape({24, 33, 16})});
  // Few large batches, threaded inside the gemm.
  cs.push_back({shape({2, 129, 257}), false, shape({2, 257, 129}), false,
                shape({2, 129, 129})});
  return cs;
}

/// Tolerance: the float result may differ from float64 by the rounding of
/// K products and sums: |err| <= 1e-6 * K * (|alpha| + 1) + rel 1e-5 with
/// inputs in [-1, 1].
::testing::AssertionResult checkAll(float alpha, float beta) {
  unsigned seed = 600;
  for (const Case &k : cases()) {
    auto A = uniform(k.a.numel(), seed++), B = uniform(k.b.numel(), seed++);
    auto C = uniform(k.c.numel(), seed++);
    auto ref = refMatmul(k, A, B, C, alpha, beta);
    matmul(A.data(), k.a, k.transA, B.data(), k.b, k.transB, C.data(), k.c,
           alpha, beta);
    const int64_t K =
        k.transA ? k.a.dims[k.a.rank - 2] : k.a.dims[k.a.rank - 1];
    auto r = near(C, ref, 1e-5, 1e-6 * double(K) * (std::fabs(alpha) + 1));
    if (!r)
      return r << " for " << str(k.a) << (k.transA ? "^T" : "") << " x "
               << str(k.b) << (k.transB ? "^T" : "") << " -> " << str(k.c)
               << " alpha " << alpha << " beta " << beta;
  }
  return ::testing::AssertionSuccess();
}

TEST(Matmul, AgainstReference) {
  const char *env = std::getenv("DSRT_GEMM");
  const bool blas = env && std::strcmp(env, "openblas") == 0;
  EXPECT_STREQ(gemmBackend(), blas ? "openblas" : "dnnl");
  EXPECT_TRUE(checkAll(1.0f, 0.0f));
}

TEST(Matmul, AlphaBetaAccumulate) {
  EXPECT_TRUE(checkAll(1.0f, 1.0f));
  EXPECT_TRUE(checkAll(0.5f, -2.0f));
}

TEST(Matmul, SingleThreaded) {
  ThreadCount one(1);
  EXPECT_TRUE(checkAll(1.0f, 1.0f));
}

TEST(Matmul, BetaZeroIgnoresNaNInOutput) {
  auto A = uniform(7 * 5, 1), B = uniform(5 * 3, 2);
  std::vector<float> C(7 * 3, std::nanf(""));
  matmul(A.data(), shape({7, 5}), false, B.data(), shape({5, 3}), false,
         C.data(), shape({7, 3}));
  for (float v : C)
    EXPECT_FALSE(std::isnan(v));
}

TEST(Matmul, EmptyK) {
  std::vector<float> C = {1, 2, 3, 4}, A(1), B(1);
  matmul(A.data(), shape({2, 0}), false, B.data(), shape({0, 2}), false,
         C.data(), shape({2, 2}), 1.0f, 0.5f);
  EXPECT_EQ(C, (std::vector<float>{0.5f, 1, 1.5f, 2}));
}

/// Body of the OpenBLAS death test's child process: exits 0 on success.
[[noreturn]] void runWithOpenBlas() {
  setenv("DSRT_GEMM", "openblas", 1);
  if (std::strcmp(gemmBackend(), "openblas") != 0)
    std::exit(2);
  auto plain = checkAll(1.0f, 0.0f);
  auto accumulated = checkAll(0.5f, 1.0f);
  if (!plain || !accumulated)
    std::fprintf(stderr, "%s%s\n", plain.message(), accumulated.message());
  std::exit(plain && accumulated ? 0 : 1);
}

TEST(Matmul, OpenBlasBackend) {
  // The child re-runs this test alone in a new process, so the backend
  // choice there sees the variable.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(runWithOpenBlas(), ::testing::ExitedWithCode(0), "");
}

} // namespace
} // namespace dsrt::cpu::test
