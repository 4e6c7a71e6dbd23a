//===- CudaKernelsTest.cpp - every CUDA kernel against the CPU kernel ----===//
//
// The same inputs through runtime/kernels/cuda and runtime/kernels/cpu.
// Tolerances: dropout's mask and output and the embedding gather are exact;
// elementwise math, the optimizer and the GELU gradient within 2e-6
// relative (nvcc contracts a*b+c into fused multiply-adds, and the GPU's
// erff/tanhf/expf differ from the CPU's by an ulp or two); row statistics
// (layer norm, softmax, cross-entropy) within 1e-5 relative, 1e-6 absolute
// (another summation order); the embedding gradient within 1e-6 (atomic
// additions in no fixed order); the sum of squares (double) within 1e-12.
// Every test skips, saying why, where no CUDA device is present.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"
#include "runtime/kernels/cuda/Kernels.h"

namespace dsrt::cpu::test {
namespace {

namespace gpu = dsrt::cuda;

#define REQUIRE_GPU()                                                                              \
  do {                                                                                             \
    std::string why;                                                                               \
    if (!gpu::deviceAvailable(&why))                                                               \
      GTEST_SKIP() << "no GPU to run CUDA kernels on (" << why << ")";                            \
  } while (0)

/// A device copy of a host vector, freed at scope exit.
template <typename T> struct Dev {
  T *p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : p(static_cast<T *>(gpu::deviceAlloc(count * sizeof(T)))), n(count) {}
  explicit Dev(const std::vector<T> &v) : Dev(v.size()) {
    gpu::copyToDevice(p, v.data(), v.size() * sizeof(T));
  }
  ~Dev() { gpu::deviceFree(p); }
  std::vector<T> host() const {
    std::vector<T> v(n);
    gpu::synchronize();
    gpu::copyToHost(v.data(), p, n * sizeof(T));
    return v;
  }
};

TEST(CudaKernels, UnaryAndGeluGrad) {
  REQUIRE_GPU();
  const int64_t n = 10007;
  auto x = uniform(n, 1, -4, 4);
  for (Unary op : {Unary::Neg, Unary::Abs, Unary::Exp, Unary::Tanh, Unary::Erf, Unary::Relu,
                   Unary::Sigmoid, Unary::GeluErf, Unary::GeluTanh}) {
    std::vector<float> want(n);
    unary(op, x.data(), want.data(), n);
    Dev<float> dx(x), dy(static_cast<size_t>(n));
    gpu::unary(op, dx.p, dy.p, n);
    EXPECT_TRUE(near(dy.host(), toDouble(want), 2e-6, 1e-7)) << "op " << int(op);
  }
  auto g = uniform(n, 2);
  for (bool t : {false, true}) {
    std::vector<float> want(n);
    geluGrad(t, x.data(), g.data(), want.data(), n);
    Dev<float> dx(x), dg(g), dd(static_cast<size_t>(n));
    gpu::geluGrad(t, dx.p, dg.p, dd.p, n);
    EXPECT_TRUE(near(dd.host(), toDouble(want), 2e-6, 1e-6)) << "tanh " << t;
  }
}

TEST(CudaKernels, BinaryWithBias) {
  REQUIRE_GPU();
  const int64_t rows = 37, cols = 129, n = rows * cols;
  auto a = uniform(n, 3), b = uniform(cols, 4, 0.5f, 2), full = uniform(n, 5, 0.5f, 2);
  for (Binary op : {Binary::Add, Binary::Sub, Binary::Mul, Binary::Div, Binary::Max}) {
    std::vector<float> want(n), wantFull(n);
    binary(op, a.data(), shape({rows, cols}), b.data(), shape({cols}), want.data(),
           shape({rows, cols}));
    binary(op, a.data(), shape({rows, cols}), full.data(), shape({rows, cols}), wantFull.data(),
           shape({rows, cols}));
    Dev<float> da(a), db(b), dfull(full), out(static_cast<size_t>(n));
    gpu::binary(op, da.p, db.p, cols, out.p, n, cols);
    EXPECT_TRUE(near(out.host(), toDouble(want), 1e-6, 0)) << "bias, op " << int(op);
    gpu::binary(op, da.p, dfull.p, n, out.p, n, cols);
    EXPECT_TRUE(near(out.host(), toDouble(wantFull), 1e-6, 0)) << "same shape, op " << int(op);
  }
}

TEST(CudaKernels, LayerNormAndGrad) {
  REQUIRE_GPU();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{7, 33}, {64, 768}, {3, 2048}}) {
    auto x = uniform(rows * cols, 6, -3, 3), gamma = uniform(cols, 7, 0.5f, 1.5f),
         beta = uniform(cols, 8), dy = uniform(rows * cols, 9);
    std::vector<float> y(x.size()), dx(x.size()), dg(cols), db(cols);
    layerNorm(x.data(), gamma.data(), beta.data(), y.data(), rows, cols, 1e-5f);
    layerNormGrad(dy.data(), x.data(), gamma.data(), dx.data(), dg.data(), db.data(), rows, cols,
                  1e-5f);
    Dev<float> gx(x), gg(gamma), gb(beta), gy(x.size()), gdy(dy), gdx(x.size()), gdg(static_cast<size_t>(cols)),
        gdb(static_cast<size_t>(cols));
    gpu::layerNorm(gx.p, gg.p, gb.p, gy.p, rows, cols, 1e-5f);
    gpu::layerNormGrad(gdy.p, gx.p, gg.p, gdx.p, gdg.p, gdb.p, rows, cols, 1e-5f);
    std::string what = std::to_string(rows) + "x" + std::to_string(cols);
    EXPECT_TRUE(near(gy.host(), toDouble(y), 1e-5, 1e-6)) << what;
    EXPECT_TRUE(near(gdx.host(), toDouble(dx), 1e-4, 1e-5)) << what;
    EXPECT_TRUE(near(gdg.host(), toDouble(dg), 1e-4, 1e-5)) << what;
    EXPECT_TRUE(near(gdb.host(), toDouble(db), 1e-4, 1e-5)) << what;
  }
}

TEST(CudaKernels, SoftmaxAndGrad) {
  REQUIRE_GPU();
  for (auto [rows, n] : {std::pair<int64_t, int64_t>{5, 7}, {96, 1024}, {2, 50304}}) {
    auto x = uniform(rows * n, 10, -8, 8), dy = uniform(rows * n, 11);
    std::vector<float> y(x.size()), dx(x.size());
    softmax(x.data(), y.data(), rows, n, 1);
    softmaxGrad(y.data(), dy.data(), dx.data(), rows, n, 1);
    Dev<float> gx(x), gy(x.size()), gdy(dy), gdx(x.size());
    gpu::softmax(gx.p, gy.p, rows, n);
    gpu::softmaxGrad(gy.p, gdy.p, gdx.p, rows, n);
    EXPECT_TRUE(near(gy.host(), toDouble(y), 1e-5, 1e-7)) << rows << "x" << n;
    EXPECT_TRUE(near(gdx.host(), toDouble(dx), 1e-5, 1e-7)) << rows << "x" << n;
  }
}

TEST(CudaKernels, CrossEntropyAndGrad) {
  REQUIRE_GPU();
  const int64_t N = 300, C = 50304 / 8;
  auto x = uniform(N * C, 12, -6, 6);
  std::vector<int64_t> labels(N);
  for (int64_t i = 0; i < N; ++i)
    labels[i] = i % 17 == 3 ? -100 : i % 29 == 5 ? C + 2 : (i * 7919) % C;
  for (int reduction : {0, 1, 2}) {
    int64_t total = reduction == 0 ? N : 1;
    std::vector<float> loss(total), dloss = uniform(total, 13, 0.5f, 2), dx(x.size());
    int64_t bad = crossEntropy(x.data(), labels.data(), loss.data(), N, C, 1, reduction, true, -100);
    crossEntropyGrad(x.data(), labels.data(), dloss.data(), dx.data(), N, C, 1, reduction, true,
                     -100);
    Dev<float> gx(x), gloss(static_cast<size_t>(total)), gdloss(dloss), gdx(x.size());
    Dev<int64_t> glab(labels), gbad(static_cast<size_t>(1));
    gpu::crossEntropy(gx.p, glab.p, gloss.p, N, C, reduction, true, -100, gbad.p);
    gpu::crossEntropyGrad(gx.p, glab.p, gdloss.p, gdx.p, N, C, reduction, true, -100);
    EXPECT_EQ(gbad.host()[0], bad);
    EXPECT_TRUE(near(gloss.host(), toDouble(loss), 1e-5, 1e-6)) << "reduction " << reduction;
    EXPECT_TRUE(near(gdx.host(), toDouble(dx), 1e-5, 1e-8)) << "reduction " << reduction;
  }
}

TEST(CudaKernels, DropoutMaskBitForBit) {
  REQUIRE_GPU();
  const int64_t n = 100003;
  auto x = uniform(n, 14), dy = uniform(n, 15);
  for (float ratio : {0.0f, 0.1f, 0.5f, 1.0f})
    for (uint64_t first : {uint64_t(0), uint64_t(12345)}) {
      std::vector<float> y(n), dx(n);
      std::vector<uint8_t> mask(n);
      dropout(x.data(), y.data(), mask.data(), n, ratio, 42, 3, 7, first);
      dropoutGrad(dy.data(), mask.data(), dx.data(), n, ratio);
      Dev<float> gx(x), gy(static_cast<size_t>(n)), gdy(dy), gdx(static_cast<size_t>(n));
      Dev<uint8_t> gm(static_cast<size_t>(n));
      gpu::dropout(gx.p, gy.p, gm.p, n, ratio, 42, 3, 7, first);
      gpu::dropoutGrad(gdy.p, gm.p, gdx.p, n, ratio);
      EXPECT_EQ(gm.host(), mask) << "ratio " << ratio << " first " << first;
      EXPECT_EQ(gy.host(), y) << "ratio " << ratio;
      EXPECT_EQ(gdx.host(), dx) << "ratio " << ratio;
    }
}

TEST(CudaKernels, EmbeddingGatherAndGrad) {
  REQUIRE_GPU();
  const int64_t A = 1000, inner = 64, nIdx = 4096;
  auto table = uniform(A * inner, 16), dy = uniform(nIdx * inner, 17);
  std::vector<int64_t> idx(nIdx);
  for (int64_t j = 0; j < nIdx; ++j)
    idx[j] = j % 13 == 0 ? -(j % A) - 1 : (j * 31) % A; // repeats and negatives
  std::vector<float> out(nIdx * inner), dtable(A * inner);
  gather(table.data(), idx.data(), out.data(), 1, A, inner, nIdx);
  gatherGrad(dy.data(), idx.data(), dtable.data(), 1, A, inner, nIdx);
  Dev<float> gt(table), gout(out.size()), gdy(dy), gdt(dtable.size());
  Dev<int64_t> gi(idx);
  gpu::gather(gt.p, gi.p, gout.p, A, inner, nIdx);
  gpu::gatherGrad(gdy.p, gi.p, gdt.p, A, inner, nIdx);
  EXPECT_EQ(gout.host(), out);
  EXPECT_TRUE(near(gdt.host(), toDouble(dtable), 1e-6, 1e-6));
}

TEST(CudaKernels, AdamAndSumSquares) {
  REQUIRE_GPU();
  const int64_t n = 65537;
  auto p = uniform(n, 18), g = uniform(n, 19), m = uniform(n, 20, 0, 0.1f), v = uniform(n, 21, 0, 0.01f);
  for (bool decoupled : {false, true}) {
    auto pc = p, mc = m, vc = v;
    adam(pc.data(), g.data(), mc.data(), vc.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, decoupled,
         true, 7);
    Dev<float> gp(p), gg(g), gm(m), gv(v);
    gpu::adam(gp.p, gg.p, gm.p, gv.p, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, decoupled, true, 7);
    EXPECT_TRUE(near(gp.host(), toDouble(pc), 2e-6, 1e-8)) << "decoupled " << decoupled;
    EXPECT_TRUE(near(gm.host(), toDouble(mc), 2e-6, 1e-9));
    EXPECT_TRUE(near(gv.host(), toDouble(vc), 2e-6, 1e-10));
  }
  double want = sumSquares(g.data(), n);
  Dev<double> out(std::vector<double>{0.0});
  Dev<float> gg(g);
  gpu::sumSquares(gg.p, n, out.p);
  EXPECT_NEAR(out.host()[0], want, 1e-12 * want);
}

} // namespace
} // namespace dsrt::cpu::test
