//===- MatmulTest.cpp - batched broadcasting matmul -----------------------===//
//
// Against a float64 triple loop over every transpose combination, batch
// broadcast in either operand (the folded x @ W path and the per-batch
// paths), alpha/beta accumulation, and the OpenBLAS backend (a fresh process
// started with DSRT_GEMM=openblas, since the backend is chosen once), and
// the GEMM epilogues (matmulEpilogue: bias and addend) in float and 16-bit.
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

/// float64 (op(A) op(B) + bias) * scale + addend of k (bias, scale or
/// addend may be empty).
std::vector<double> refEpilogue(const Case &k, const std::vector<float> &A,
                                const std::vector<float> &B, const std::vector<float> &bias,
                                const std::vector<float> &addend,
                                const std::vector<float> &scale = {}) {
  std::vector<float> zero(size_t(k.c.numel()), 0.0f);
  auto ref = refMatmul(k, A, B, zero, 1.0, 0.0);
  const int64_t N = k.c.dims[k.c.rank - 1];
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!bias.empty())
      ref[i] += bias[i % size_t(N)];
    if (!scale.empty())
      ref[i] *= scale[i];
    if (!addend.empty())
      ref[i] += addend[i];
  }
  return ref;
}

// Every case of the plain matmul, with each combination of a bias, a
// scale (a GELU's derivative: in [0, 1.2] here) and an addend.
TEST(Matmul, EpilogueAgainstReference) {
  unsigned seed = 700;
  for (const Case &k : cases())
    for (int which = 1; which < 8; ++which) {
      const int64_t N = k.c.dims[k.c.rank - 1];
      auto A = uniform(k.a.numel(), seed++), B = uniform(k.b.numel(), seed++);
      auto bias = which & 1 ? uniform(N, seed++) : std::vector<float>();
      auto addend = which & 2 ? uniform(k.c.numel(), seed++) : std::vector<float>();
      auto scale = which & 4 ? uniform(k.c.numel(), seed++, 0.0f, 1.2f) : std::vector<float>();
      std::vector<float> C(size_t(k.c.numel()), std::nanf(""));
      matmulEpilogue(A.data(), k.a, k.transA, B.data(), k.b, k.transB,
                     bias.empty() ? nullptr : bias.data(), scale.empty() ? nullptr : scale.data(),
                     addend.empty() ? nullptr : addend.data(), C.data(), k.c);
      const int64_t K = k.transA ? k.a.dims[k.a.rank - 2] : k.a.dims[k.a.rank - 1];
      EXPECT_TRUE(near(C, refEpilogue(k, A, B, bias, addend, scale), 1e-5,
                       1e-6 * double(K + 2)))
          << str(k.a) << (k.transA ? "^T" : "") << " x " << str(k.b) << (k.transB ? "^T" : "")
          << " -> " << str(k.c) << (which & 1 ? " +bias" : "") << (which & 4 ? " *scale" : "")
          << (which & 2 ? " +addend" : "");
    }
}

// In f32 the scaled epilogue is the GELU gradient's arithmetic: each
// element the same product of the GEMM's sum and the derivative that
// geluGrad forms from the product stored and the input (the fused plan's
// GELU backward, bitwise the unfused one's up to the GEMM's order).
TEST(Matmul, EpilogueScaleIsTheGeluGradient) {
  const Case k{shape({33, 65}), false, shape({17, 65}), true, shape({33, 17})};
  auto A = uniform(k.a.numel(), 31), B = uniform(k.b.numel(), 32),
       h = uniform(k.c.numel(), 33, -6.0f, 6.0f);
  for (bool tanhApprox : {false, true}) {
    std::vector<float> y(h.size()), d(h.size()), fused(h.size()), dy(h.size()), dx(h.size());
    geluWithDerivative(tanhApprox, h.data(), y.data(), d.data(), int64_t(h.size()));
    matmulEpilogue(A.data(), k.a, false, B.data(), k.b, true, nullptr, d.data(), nullptr,
                   fused.data(), k.c);
    // The same GEMM with a unit scale, so that both sums are the primitive's.
    std::vector<float> ones(h.size(), 1.0f);
    matmulEpilogue(A.data(), k.a, false, B.data(), k.b, true, nullptr, ones.data(), nullptr,
                   dy.data(), k.c);
    geluGrad(tanhApprox, h.data(), dy.data(), dx.data(), int64_t(h.size()));
    EXPECT_EQ(fused, dx) << (tanhApprox ? "tanh" : "erf");
  }
}

// The addend may be the result's own buffer (memory-plan places the sum
// over a dying addend): oneDNN's sum post-op, correct where its kernels
// keep partial sums in the destination across a long K (1536 here).
TEST(Matmul, EpilogueAddendInPlace) {
  for (int64_t K : {65, 1536}) {
    const Case k{shape({33, K}), false, shape({K, 17}), false, shape({33, 17})};
    auto A = uniform(k.a.numel(), 1), B = uniform(k.b.numel(), 2), bias = uniform(17, 3),
         C = uniform(k.c.numel(), 4);
    auto want = refEpilogue(k, A, B, bias, C);
    matmulEpilogue(A.data(), k.a, false, B.data(), k.b, false, bias.data(), nullptr, C.data(),
                   C.data(), k.c);
    EXPECT_TRUE(near(C, want, 1e-5, 1e-6 * double(K + 2))) << "K " << K;
  }
}

// In bf16 and fp16 the sum is formed in float and rounded once: each
// element is the float64 sum rounded to T, except where the float sum and
// the float64 one straddle a rounding midpoint (then one ulp away). The
// unfused ops round the product, then each sum: 39% of these elements
// differ from that.
template <class T> class MatmulEpilogueHalf : public ::testing::Test {};
using HalfTypes = ::testing::Types<Bf16, Fp16>;
TYPED_TEST_SUITE(MatmulEpilogueHalf, HalfTypes, HalfNames);

TYPED_TEST(MatmulEpilogueHalf, FloatSumRoundedOnce) {
  using T = TypeParam;
  const Case k{shape({4, 33, 65}), false, shape({17, 65}), true, shape({4, 33, 17})};
  auto A = uniformIn<T>(k.a.numel(), 11), B = uniformIn<T>(k.b.numel(), 12),
       bias = uniformIn<T>(17, 13), addend = uniformIn<T>(k.c.numel(), 14);
  std::vector<T> C(size_t(k.c.numel()));
  matmulEpilogue(A.data(), k.a, false, B.data(), k.b, true, bias.data(), nullptr, addend.data(),
                 C.data(), k.c);
  auto ref = refEpilogue(k, widen(A), widen(B), widen(bias), widen(addend));
  std::vector<float> refF(ref.begin(), ref.end());
  auto once = widen(narrowTo<T>(refF)), got = widen(C);
  const double ulp = std::is_same_v<T, Bf16> ? 0x1p-7 : 0x1p-10;
  int64_t off = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == once[i])
      continue;
    ++off;
    EXPECT_LE(std::fabs(double(got[i]) - ref[i]), ulp * std::fabs(ref[i]) + 1e-6) << i;
  }
  EXPECT_LE(off, int64_t(got.size()) / 50) << off << " of " << got.size();
}

// Also as tasks of rows (600 rows: each task's sum post-op reads its own
// block of C, rows N apart).
TYPED_TEST(MatmulEpilogueHalf, AddendInPlace) {
  using T = TypeParam;
  for (int64_t rows : {33, 600}) {
    const Case k{shape({rows, 1536}), false, shape({1536, 17}), false, shape({rows, 17})};
    auto A = uniformIn<T>(k.a.numel(), 21), B = uniformIn<T>(k.b.numel(), 22),
         C = uniformIn<T>(k.c.numel(), 23);
    auto ref = refEpilogue(k, widen(A), widen(B), {}, widen(C));
    matmulEpilogue(A.data(), k.a, false, B.data(), k.b, false, nullptr, nullptr, C.data(),
                   C.data(), k.c);
    // One rounding of the float sum: within one ulp of the float64 one, plus
    // the float sum's own error over K products (the float test's bound).
    const double ulp = std::is_same_v<T, Bf16> ? 0x1p-7 : 0x1p-10;
    auto got = widen(C);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_LE(std::fabs(double(got[i]) - ref[i]), ulp * std::fabs(ref[i]) + 1e-6 * 1536)
          << rows << " rows, element " << i;
  }
}

// The column sums (a bias gradient) are bitwise what reduce makes of the
// result the same call stored, in every epilogue and for row counts
// around the kColumnSumRows blocks: the rows-collapse path (block GEMMs
// summed in cache, x @ W and x @ W^T, batched x), the fallback (a
// transposed lhs, a batched rhs, one row or one column), and on 1 and 3 threads (the columns
// shared out). The result itself stays the epilogue's.
TEST(Matmul, EpilogueColumnSumIsTheReduction) {
  const int64_t R = kColumnSumRows;
  std::vector<Case> cs;
  for (int64_t rows : {int64_t(7), R, R + 1, 4 * R + 37})
    for (bool tb : {false, true})
      cs.push_back({shape({rows, 65}), false, tb ? shape({129, 65}) : shape({65, 129}), tb,
                    shape({rows, 129})});
  cs.push_back({shape({3, 200, 33}), false, shape({33, 47}), false, shape({3, 200, 47})});
  // One row (reduce copies it) and one column (reduce sums it in double).
  cs.push_back({shape({1, 65}), false, shape({65, 129}), false, shape({1, 129})});
  cs.push_back({shape({300, 65}), false, shape({65, 1}), false, shape({300, 1})});
  cs.push_back({shape({65, 300}), true, shape({65, 47}), false, shape({300, 47})});
  cs.push_back({shape({2, 300, 33}), false, shape({2, 33, 47}), false, shape({2, 300, 47})});
  unsigned seed = 900;
  for (const Case &k : cs)
    for (int which = 0; which < 8; ++which)
      for (int threads : {1, 3}) {
        ThreadCount t(threads);
        const int64_t N = k.c.dims[k.c.rank - 1], rows = k.c.numel() / N;
        auto A = uniform(k.a.numel(), seed++), B = uniform(k.b.numel(), seed++);
        auto bias = which & 1 ? uniform(N, seed++) : std::vector<float>();
        auto addend = which & 2 ? uniform(k.c.numel(), seed++) : std::vector<float>();
        auto scale = which & 4 ? uniform(k.c.numel(), seed++, 0.0f, 1.2f) : std::vector<float>();
        std::vector<float> C(size_t(k.c.numel()), std::nanf("")), sum(size_t(N), std::nanf("")),
            want(size_t(N), 0.0f);
        matmulEpilogue(A.data(), k.a, k.transA, B.data(), k.b, k.transB,
                       bias.empty() ? nullptr : bias.data(), scale.empty() ? nullptr : scale.data(),
                       addend.empty() ? nullptr : addend.data(), C.data(), k.c, sum.data());
        const int64_t K = k.transA ? k.a.dims[k.a.rank - 2] : k.a.dims[k.a.rank - 1];
        const std::string what = str(k.a) + (k.transA ? "^T" : "") + " x " + str(k.b) +
                                 (k.transB ? "^T" : "") + " which " + std::to_string(which) +
                                 ", " + std::to_string(threads) + " threads";
        EXPECT_TRUE(near(C, refEpilogue(k, A, B, bias, addend, scale), 1e-5, 1e-6 * double(K + 2)))
            << what;
        reduce(Reduce::Sum, C.data(), shape({rows, N}), 1, want.data());
        EXPECT_TRUE(bitEqual(sum, want)) << what;
      }
}

// In place over the addend, and in bf16 / fp16: the sums are the float
// reduction of the stored 16-bit result rounded once, as nn.reduce_sum and
// its cast make them.
TEST(Matmul, EpilogueColumnSumInPlace) {
  const Case k{shape({600, 1536}), false, shape({1536, 17}), false, shape({600, 17})};
  auto A = uniform(k.a.numel(), 1), B = uniform(k.b.numel(), 2), C = uniform(k.c.numel(), 4);
  auto want = refEpilogue(k, A, B, {}, C);
  std::vector<float> sum(17), red(17);
  matmulEpilogue(A.data(), k.a, false, B.data(), k.b, false, nullptr, nullptr, C.data(), C.data(),
                 k.c, sum.data());
  EXPECT_TRUE(near(C, want, 1e-5, 1e-6 * 1538.0));
  reduce(Reduce::Sum, C.data(), shape({600, 17}), 1, red.data());
  EXPECT_TRUE(bitEqual(sum, red));
}

TYPED_TEST(MatmulEpilogueHalf, ColumnSumRoundedOnce) {
  using T = TypeParam;
  for (int64_t rows : {int64_t(33), 4 * kColumnSumRows + 37}) {
    const Case k{shape({rows, 65}), false, shape({47, 65}), true, shape({rows, 47})};
    auto A = uniformIn<T>(k.a.numel(), 31), B = uniformIn<T>(k.b.numel(), 32),
         bias = uniformIn<T>(47, 33), scale = uniformIn<T>(k.c.numel(), 34);
    std::vector<T> C(size_t(k.c.numel())), sum(47);
    matmulEpilogue(A.data(), k.a, false, B.data(), k.b, true, bias.data(), scale.data(), nullptr,
                   C.data(), k.c, sum.data());
    std::vector<float> red(47);
    reduce(Reduce::Sum, C.data(), shape({rows, 47}), 1, red.data());
    auto want = narrowTo<T>(red);
    for (size_t c = 0; c < 47; ++c)
      EXPECT_EQ(sum[c].bits, want[c].bits) << rows << " rows, column " << c;
  }
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
