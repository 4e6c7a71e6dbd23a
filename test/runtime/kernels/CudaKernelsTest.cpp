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
// Broadcasts, selects, transposes and slices move or combine elements
// exactly (bitwise equal); reductions within float rounding (1.2e-7
// relative) of a float64 reference, since they add in double; GEMMs within 1e-5 relative, 1e-5 absolute
// (cuBLAS and oneDNN block the k sum differently, both in float). bf16:
// the kernels round each float result once, as the CPU's do, so moves,
// masks, casts and exact arithmetic are bitwise equal, and results that
// went through a transcendental or a reduction within one bf16 unit in the
// last place (2^-8 relative; 2^-7 for the GEMM, whose float sums differ).
// The 16-byte paths give the element-by-element kernels' bits
// (PackedPathsGiveTheScalarBits); the warp-per-row layer norm is within
// float rounding of the block kernel (two bf16 units: the helper counts
// units of 2^-8 of the value, which may be half a true unit).
// Every test skips, saying why, where no CUDA device is present.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"
#include "runtime/kernels/cuda/Kernels.h"

#include <cstdlib>
#include <cstring>
#include <functional>

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
                   Unary::Sigmoid, Unary::GeluErf, Unary::GeluTanh, Unary::Sin, Unary::Cos}) {
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
    // The GELU and its derivative in one kernel, against the CPU's.
    std::vector<float> wantY(n), wantD(n);
    geluWithDerivative(t, x.data(), wantY.data(), wantD.data(), n);
    Dev<float> y(static_cast<size_t>(n)), d(static_cast<size_t>(n));
    gpu::geluWithDerivative(t, dx.p, y.p, d.p, n);
    EXPECT_TRUE(near(y.host(), toDouble(wantY), 2e-6, 1e-7)) << "tanh " << t;
    EXPECT_TRUE(near(d.host(), toDouble(wantD), 2e-6, 1e-6)) << "tanh " << t;
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
  // 8192 x 768 (GPT-2 small's): several rows per warp of the gradient's
  // one wave of blocks, and partial sums per block.
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{7, 33}, {64, 768}, {3, 2048},
                            {8192, 768}, {5001, 256}}) {
    auto x = uniform(rows * cols, 6, -3, 3), gamma = uniform(cols, 7, 0.5f, 1.5f),
         beta = uniform(cols, 8), dy = uniform(rows * cols, 9);
    std::vector<float> y(x.size()), dx(x.size()), dg(cols), db(cols);
    layerNorm(x.data(), gamma.data(), beta.data(), y.data(), rows, cols, 1e-5f);
    layerNormGrad(dy.data(), x.data(), gamma.data(), dx.data(), dg.data(), db.data(), rows, cols,
                  1e-5f);
    Dev<float> gx(x), gg(gamma), gb(beta), gy(x.size()), gdy(dy), gdx(x.size()), gdg(static_cast<size_t>(cols)),
        gdb(static_cast<size_t>(cols));
    gpu::layerNorm(gx.p, gg.p, gb.p, gy.p, rows, cols, 1e-5f);
    Dev<uint8_t> scratch(gpu::layerNormGradScratchBytes(rows, cols));
    gpu::layerNormGrad(gdy.p, gx.p, gg.p, gdx.p, gdg.p, gdb.p, rows, cols, 1e-5f, scratch.p);
    std::string what = std::to_string(rows) + "x" + std::to_string(cols);
    EXPECT_TRUE(near(gy.host(), toDouble(y), 1e-5, 1e-6)) << what;
    EXPECT_TRUE(near(gdx.host(), toDouble(dx), 1e-4, 1e-5)) << what;
    // dgamma and dbeta sum `rows` terms of up to ~3 in float (as PyTorch's
    // kernels do; partial sums per lane and block here): the rounding grows
    // with the rows, where the sums cancel to small results (8192 rows:
    // 3e-5 measured on an H100).
    double sumTol = 1e-5 + double(rows) * 1e-8;
    EXPECT_TRUE(near(gdg.host(), toDouble(dg), 1e-4, sumTol)) << what;
    EXPECT_TRUE(near(gdb.host(), toDouble(db), 1e-4, sumTol)) << what;
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
    Dev<uint8_t> scratch(gpu::crossEntropyScratchBytes(N)), gscratch(gpu::crossEntropyGradScratchBytes());
    gpu::zero(gbad.p, sizeof(int64_t));
    gpu::crossEntropy(gx.p, glab.p, gloss.p, N, C, reduction, true, -100, gbad.p, scratch.p);
    gpu::crossEntropyGrad(gx.p, glab.p, gdloss.p, gdx.p, N, C, reduction, true, -100, gscratch.p);
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
  // Indices outside [-A, A) read zeros and are counted, once each.
  std::vector<int64_t> badIdx = {0, A, -A - 1, 5, 3 * A};
  std::vector<float> badOut(badIdx.size() * inner);
  int64_t want = gather(table.data(), badIdx.data(), badOut.data(), 1, A, inner,
                        int64_t(badIdx.size()));
  Dev<int64_t> gbi(badIdx), gbad(std::vector<int64_t>{0});
  Dev<float> gbo(badOut.size());
  gpu::gather(gt.p, gbi.p, gbo.p, A, inner, int64_t(badIdx.size()), gbad.p);
  EXPECT_EQ(gbad.host()[0], want);
  EXPECT_EQ(want, 3);
  EXPECT_EQ(gbo.host(), badOut);
}

TEST(CudaKernels, BroadcastBinaryAndSelect) {
  REQUIRE_GPU();
  // [2,3,4,5] against operands broadcast along leading, middle and last dims.
  Shape os = shape({2, 3, 4, 5});
  for (Shape bs : {shape({2, 3, 4, 5}), shape({5}), shape({4, 1}), shape({2, 1, 4, 5}),
                   shape({1}), shape({3, 1, 1})}) {
    auto a = uniform(os.numel(), 30), b = uniform(bs.numel(), 31, 0.5f, 2);
    for (Binary op : {Binary::Add, Binary::Sub, Binary::Mul, Binary::Div, Binary::Max}) {
      std::vector<float> want(os.numel());
      binary(op, a.data(), os, b.data(), bs, want.data(), os);
      Dev<float> da(a), db(b), out(static_cast<size_t>(os.numel()));
      gpu::binary(op, da.p, os, db.p, bs, out.p, os);
      EXPECT_EQ(out.host(), want) << str(bs) << " op " << int(op);
    }
    // The operands swapped: the broadcast one first.
    std::vector<float> want(os.numel());
    binary(Binary::Sub, b.data(), bs, a.data(), os, want.data(), os);
    Dev<float> da(a), db(b), out(static_cast<size_t>(os.numel()));
    gpu::binary(Binary::Sub, db.p, bs, da.p, os, out.p, os);
    EXPECT_EQ(out.host(), want) << "swapped " << str(bs);
  }
  // select(cond [4,1] (broadcast), a [2,3,4,5], b [5]).
  Shape cs = shape({4, 1}), as = os, bs = shape({5});
  std::vector<uint8_t> cond = {1, 0, 0, 1};
  auto a = uniform(as.numel(), 32), b = uniform(bs.numel(), 33);
  std::vector<float> want(os.numel());
  select(cond.data(), cs, a.data(), as, b.data(), bs, want.data(), os);
  Dev<uint8_t> dc(cond);
  Dev<float> da(a), db(b), out(static_cast<size_t>(os.numel()));
  gpu::select(dc.p, cs, da.p, as, db.p, bs, out.p, os);
  EXPECT_EQ(out.host(), want);
}

TEST(CudaKernels, TransposeAndSlice) {
  REQUIRE_GPU();
  Shape xs = shape({3, 4, 5, 6});
  auto x = uniform(xs.numel(), 34);
  for (std::vector<int64_t> perm : {std::vector<int64_t>{0, 2, 1, 3}, {3, 2, 1, 0}, {1, 3, 0, 2}}) {
    std::vector<float> want(xs.numel());
    transpose(x.data(), xs, perm.data(), want.data());
    Dev<float> dx(x), out(static_cast<size_t>(xs.numel()));
    gpu::transpose(dx.p, xs, perm.data(), out.p);
    EXPECT_EQ(out.host(), want) << perm[0] << perm[1] << perm[2] << perm[3];
  }
  // A strided slice and its gradient (zeros around the slice).
  std::vector<int64_t> start = {1, 0, 2, 1}, step = {1, 2, 1, 2};
  Shape ys = shape({2, 2, 3, 3});
  std::vector<float> y(ys.numel()), dx(xs.numel());
  slice(x.data(), xs, start.data(), step.data(), y.data(), ys);
  auto dy = uniform(ys.numel(), 35);
  sliceGrad(dy.data(), ys, start.data(), step.data(), dx.data(), xs);
  Dev<float> gx(x), gy(static_cast<size_t>(ys.numel())), gdy(dy),
      gdx(std::vector<float>(xs.numel(), 7.0f)); // sliceGrad must zero it
  gpu::slice(gx.p, xs, start.data(), step.data(), gy.p, ys);
  gpu::sliceGrad(gdy.p, ys, start.data(), step.data(), gdx.p, xs);
  EXPECT_EQ(gy.host(), y);
  EXPECT_EQ(gdx.host(), dx);
}

TEST(CudaKernels, Reduce) {
  REQUIRE_GPU();
  Shape xs = shape({4, 6, 8, 10});
  auto x = uniform(xs.numel(), 36, -2, 2);
  for (uint32_t mask : {0x1u, 0x8u, 0x6u, 0x9u, 0xFu, 0x7u})
    for (Reduce op : {Reduce::Sum, Reduce::Mean, Reduce::Max}) {
      int64_t kept = 1;
      for (int d = 0; d < xs.rank; ++d)
        if (!((mask >> d) & 1u))
          kept *= xs.dims[d];
      // A float64 reference: the kernel adds in double and rounds once,
      // so it is within float rounding of it. (The CPU kernel adds rows
      // in float, which for these cancelling sums is off by up to the
      // count x 2^-24 x max |x|.)
      std::vector<double> want(kept, op == Reduce::Max ? -INFINITY : 0.0);
      std::vector<int64_t> count(kept, 0);
      for (int64_t i = 0; i < xs.numel(); ++i) {
        auto idx = unravel(i, xs);
        int64_t o = 0;
        for (int d = 0; d < xs.rank; ++d)
          if (!((mask >> d) & 1u))
            o = o * xs.dims[d] + idx[d];
        want[o] = op == Reduce::Max ? std::max(want[o], double(x[i])) : want[o] + x[i];
        ++count[o];
      }
      if (op == Reduce::Mean)
        for (int64_t o = 0; o < kept; ++o)
          want[o] /= double(count[o]);
      Dev<float> dx(x), out(static_cast<size_t>(kept));
      Dev<uint8_t> scratch(std::max<size_t>(gpu::reduceScratchBytes(xs, mask), 1));
      gpu::reduce(op, dx.p, xs, mask, out.p, scratch.p);
      EXPECT_TRUE(near(out.host(), want, 1.2e-7, 1e-12)) << "mask " << mask << " op " << int(op);
    }
}

TEST(CudaKernels, BiasGradientReduction) {
  REQUIRE_GPU();
  // [8192, 768] summed over rows, as a GPT-2 bias gradient: row slices in
  // parallel, then in order; against float64, and the same bits twice.
  Shape xs = shape({8, 1024, 768});
  auto x = uniform(xs.numel(), 40, -1, 1);
  std::vector<double> want(768, 0.0);
  for (int64_t i = 0; i < xs.numel(); ++i)
    want[i % 768] += x[i];
  Dev<float> dx(x), out(size_t(768)), again(size_t(768));
  Dev<uint8_t> scratch(gpu::reduceScratchBytes(xs, 0x3u));
  gpu::reduce(Reduce::Sum, dx.p, xs, 0x3u, out.p, scratch.p);
  gpu::reduce(Reduce::Sum, dx.p, xs, 0x3u, again.p, scratch.p);
  EXPECT_TRUE(near(out.host(), want, 1.2e-7, 1e-9));
  EXPECT_EQ(out.host(), again.host());
}

TEST(CudaKernels, ScaleAndFill) {
  REQUIRE_GPU();
  const int64_t n = 4099;
  auto x = uniform(n, 37);
  Dev<float> dx(x);
  gpu::scale(dx.p, n, 0.25f);
  std::vector<float> want = x;
  for (float &v : want)
    v *= 0.25f;
  EXPECT_EQ(dx.host(), want);
  gpu::fill(dx.p, n, -3.5f);
  EXPECT_EQ(dx.host(), std::vector<float>(n, -3.5f));
}

TEST(CudaKernels, MatmulAgainstCpu) {
  REQUIRE_GPU();
  gpu::Blas blas;
  struct Case {
    Shape a, b, o;
    bool ta, tb;
  };
  std::vector<Case> cases = {
      {shape({64, 96}), shape({96, 80}), shape({64, 80}), false, false},
      {shape({96, 64}), shape({96, 80}), shape({64, 80}), true, false},
      {shape({64, 96}), shape({80, 96}), shape({64, 80}), false, true},
      {shape({96, 64}), shape({80, 96}), shape({64, 80}), true, true},
      // A batch folded into rows (b has none), and one with a transposed.
      {shape({4, 33, 96}), shape({96, 80}), shape({4, 33, 80}), false, false},
      {shape({4, 96, 33}), shape({80, 96}), shape({4, 33, 80}), true, true},
      // Both batched (attention scores), and a shared a.
      {shape({2, 3, 17, 16}), shape({2, 3, 19, 16}), shape({2, 3, 17, 19}), false, true},
      {shape({17, 16}), shape({5, 16, 19}), shape({5, 17, 19}), false, false},
      // A broadcast inside the batch: one GEMM per result matrix.
      {shape({2, 1, 8, 16}), shape({1, 3, 16, 8}), shape({2, 3, 8, 8}), false, false},
      // An empty inner dimension: zeros.
      {shape({5, 0}), shape({0, 7}), shape({5, 7}), false, false},
  };
  for (const Case &c : cases) {
    auto a = uniform(c.a.numel(), 38), b = uniform(c.b.numel(), 39);
    std::vector<float> want(c.o.numel());
    matmul(a.data(), c.a, c.ta, b.data(), c.b, c.tb, want.data(), c.o);
    Dev<float> da(std::max<size_t>(a.size(), 1)), db(std::max<size_t>(b.size(), 1)),
        out(std::vector<float>(c.o.numel(), 9.0f));
    if (!a.empty())
      gpu::copyToDevice(da.p, a.data(), a.size() * sizeof(float));
    if (!b.empty())
      gpu::copyToDevice(db.p, b.data(), b.size() * sizeof(float));
    blas.matmul(da.p, c.a, c.ta, db.p, c.b, c.tb, out.p, c.o);
    EXPECT_TRUE(near(out.host(), toDouble(want), 1e-5, 1e-5))
        << str(c.a) << (c.ta ? "^T" : "") << " x " << str(c.b) << (c.tb ? "^T" : "");
  }
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

namespace dsrt::cpu::test {
namespace {

std::vector<Bf16> toBf16(const std::vector<float> &v) {
  std::vector<Bf16> r(v.size());
  cast(v.data(), DType::F32, r.data(), DType::BF16, int64_t(v.size()));
  return r;
}
std::vector<double> widen(const std::vector<Bf16> &v) {
  std::vector<float> f(v.size());
  cast(v.data(), DType::BF16, f.data(), DType::F32, int64_t(v.size()));
  return toDouble(f);
}
std::vector<uint16_t> bits(const std::vector<Bf16> &v) {
  std::vector<uint16_t> r;
  for (Bf16 b : v)
    r.push_back(b.bits);
  return r;
}
/// Within `ulps` bf16 units in the last place of the larger magnitude.
::testing::AssertionResult nearBf16(const std::vector<Bf16> &got, const std::vector<Bf16> &want,
                                    double ulps, double atol = 1e-30) {
  auto g = widen(got), w = widen(want);
  for (size_t i = 0; i < g.size(); ++i) {
    double tol = ulps * std::ldexp(std::max(std::fabs(g[i]), std::fabs(w[i])), -8) + atol;
    if (!(std::fabs(g[i] - w[i]) <= tol))
      return ::testing::AssertionFailure() << "element " << i << ": got " << g[i] << ", want "
                                           << w[i];
  }
  return ::testing::AssertionSuccess();
}

TEST(CudaKernels, Bf16AgainstCpu) {
  REQUIRE_GPU();
  // Casts: to nearest even, NaN kept, float denormals to a signed zero.
  std::vector<float> special = {1.0f, -2.5f, 1.00390625f, 1.01171875f, 3e-39f, -3e-39f,
                                NAN, INFINITY, -INFINITY, 65504.0f, 1e30f, -0.0f};
  auto x = uniform(4096, 50, -4, 4);
  x.insert(x.end(), special.begin(), special.end());
  const int64_t n = int64_t(x.size());
  std::vector<Bf16> want = toBf16(x);
  Dev<float> dx(x);
  Dev<Bf16> db(static_cast<size_t>(n));
  gpu::cast(dx.p, db.p, n);
  EXPECT_EQ(bits(db.host()), bits(want)) << "float -> bf16";
  Dev<float> back(static_cast<size_t>(n));
  gpu::cast(db.p, back.p, n);
  std::vector<float> wantBack(n);
  cast(want.data(), DType::BF16, wantBack.data(), DType::F32, n);
  auto gotBack = back.host();
  EXPECT_EQ(0, std::memcmp(gotBack.data(), wantBack.data(), size_t(n) * 4)) << "bf16 -> float";

  // Elementwise on [64, 96] with a bias [96]: add and mul exact.
  Shape os = shape({64, 96}), bs = shape({96});
  auto a16 = toBf16(uniform(os.numel(), 51)), b16 = toBf16(uniform(96, 52));
  for (Binary op : {Binary::Add, Binary::Mul}) {
    std::vector<Bf16> w(os.numel());
    binary(op, a16.data(), os, b16.data(), bs, w.data(), os);
    Dev<Bf16> ga(a16), gb(b16), go(static_cast<size_t>(os.numel()));
    gpu::binary(op, ga.p, os, gb.p, bs, go.p, os);
    EXPECT_EQ(bits(go.host()), bits(w)) << "op " << int(op);
  }
  // GELU and its gradient: one transcendental, within one unit.
  {
    auto g16 = toBf16(uniform(os.numel(), 53));
    std::vector<Bf16> y(os.numel()), d(os.numel());
    unary(Unary::GeluErf, a16.data(), y.data(), os.numel());
    geluGrad(false, a16.data(), g16.data(), d.data(), os.numel());
    Dev<Bf16> ga(a16), gg(g16), gy(static_cast<size_t>(os.numel())),
        gd(static_cast<size_t>(os.numel()));
    gpu::unary(Unary::GeluErf, ga.p, gy.p, os.numel());
    gpu::geluGrad(false, ga.p, gg.p, gd.p, os.numel());
    EXPECT_TRUE(nearBf16(gy.host(), y, 1, 1e-6)) << "gelu";
    EXPECT_TRUE(nearBf16(gd.host(), d, 1, 1e-6)) << "gelu_grad";
  }
  // Transpose and slice: moves, bitwise.
  {
    Shape xs = shape({4, 6, 8}), ys = shape({2, 3, 8});
    std::vector<int64_t> perm = {2, 0, 1}, start = {1, 0, 0}, step = {2, 2, 1};
    auto t16 = toBf16(uniform(xs.numel(), 54));
    std::vector<Bf16> wt(xs.numel()), ws(ys.numel());
    transpose(t16.data(), xs, perm.data(), wt.data());
    slice(t16.data(), xs, start.data(), step.data(), ws.data(), ys);
    Dev<Bf16> gt(t16), got(static_cast<size_t>(xs.numel())), gs(static_cast<size_t>(ys.numel()));
    gpu::transpose(gt.p, xs, perm.data(), got.p);
    gpu::slice(gt.p, xs, start.data(), step.data(), gs.p, ys);
    EXPECT_EQ(bits(got.host()), bits(wt));
    EXPECT_EQ(bits(gs.host()), bits(ws));
  }
  // Dropout: the same mask, the kept values scaled and rounded alike.
  {
    std::vector<Bf16> y(os.numel());
    std::vector<uint8_t> mask(os.numel());
    dropout(a16.data(), y.data(), mask.data(), os.numel(), 0.1f, 7, 2, 3);
    Dev<Bf16> ga(a16), gy(static_cast<size_t>(os.numel()));
    Dev<uint8_t> gm(static_cast<size_t>(os.numel()));
    gpu::dropout(ga.p, gy.p, gm.p, os.numel(), 0.1f, 7, 2, 3);
    EXPECT_EQ(gm.host(), mask);
    EXPECT_EQ(bits(gy.host()), bits(y));
  }
  // Layer norm (float gamma, beta) and softmax rows: within one unit.
  {
    auto gamma = uniform(96, 55, 0.5f, 1.5f), beta = uniform(96, 56);
    std::vector<Bf16> y(os.numel()), s(os.numel());
    layerNorm(a16.data(), gamma.data(), beta.data(), y.data(), 64, 96, 1e-5f);
    softmax(a16.data(), s.data(), 64, 96, 1);
    Dev<Bf16> ga(a16), gy(static_cast<size_t>(os.numel())), gs(static_cast<size_t>(os.numel()));
    Dev<float> gg(gamma), gb(beta);
    gpu::layerNorm(ga.p, gg.p, gb.p, gy.p, 64, 96, 1e-5f);
    gpu::softmax(ga.p, gs.p, 64, 96);
    EXPECT_TRUE(nearBf16(gy.host(), y, 1, 1e-6)) << "layer_norm";
    EXPECT_TRUE(nearBf16(gs.host(), s, 1, 1e-6)) << "softmax";
  }
  // GEMM: bf16 operands and result, float sums.
  {
    Shape as = shape({4, 33, 96}), ws = shape({96, 80}), cs = shape({4, 33, 80});
    auto w16 = toBf16(uniform(ws.numel(), 57));
    auto a3 = toBf16(uniform(as.numel(), 58));
    std::vector<Bf16> c(cs.numel());
    matmul(a3.data(), as, false, w16.data(), ws, false, c.data(), cs);
    Dev<Bf16> ga(a3), gw(w16), gc(static_cast<size_t>(cs.numel()));
    gpu::Blas blas;
    blas.matmul(ga.p, as, false, gw.p, ws, false, gc.p, cs);
    EXPECT_TRUE(nearBf16(gc.host(), c, 2, 1e-3)) << "bf16 GEMM";
  }
}

/// The attention chain, unfused, on the GPU: softmax(select(cond, fill,
/// x * scale)) forward, select(cond, fill, softmaxGrad(y, dy)) * scale
/// backward (fillWhen false: the fill in the select's false branch).
template <typename T>
void unfusedForward(const T *x, const T *scale, const uint8_t *cond, const Shape &cs,
                    const T *fill, bool fillWhen, T *tmp, T *y, const Shape &xs) {
  Shape one = shape({});
  gpu::binary(Binary::Mul, x, xs, scale, one, tmp, xs);
  if (fillWhen)
    gpu::select(cond, cs, fill, one, tmp, xs, tmp, xs);
  else
    gpu::select(cond, cs, tmp, xs, fill, one, tmp, xs);
  gpu::softmax(tmp, y, xs.numel() / xs.dims[xs.rank - 1], xs.dims[xs.rank - 1]);
}
template <typename T>
void unfusedBackward(const T *y, const T *dy, const uint8_t *cond, const Shape &cs,
                     const T *fill, bool fillWhen, const T *scale, T *dx, const Shape &xs) {
  Shape one = shape({});
  gpu::softmaxGrad(y, dy, dx, xs.numel() / xs.dims[xs.rank - 1], xs.dims[xs.rank - 1]);
  if (fillWhen)
    gpu::select(cond, cs, fill, one, dx, xs, dx, xs);
  else
    gpu::select(cond, cs, dx, xs, fill, one, dx, xs);
  gpu::binary(Binary::Mul, dx, xs, scale, one, dx, xs);
}

/// The fused chains give the unfused ops' bits, for float and bf16, both
/// select branches, a broadcast [1, 1, T, n] mask and a whole-shape one.
template <typename T>
void checkFusedSoftmax(std::vector<T> (*make)(const std::vector<float> &), const Shape &xs) {
  const int64_t n = xs.dims[3], rows = xs.numel() / n, t = xs.dims[2];
  auto x = make(uniform(xs.numel(), 70, -6, 6)), dy = make(uniform(xs.numel(), 71));
  auto scale = make({0.125f}), neg = make({-INFINITY}), zero = make({0.0f});
  for (Shape cs : {shape({1, 1, t, n}), xs})
    for (bool fillWhen : {true, false}) {
      std::vector<uint8_t> cond(cs.numel());
      for (int64_t r = 0; r < cs.numel() / n; ++r) // causal, plus a stray flag
        for (int64_t c = 0; c < n; ++c)
          cond[r * n + c] = uint8_t(((c > r % t) == fillWhen) ^ (c == 3 && r % 5 == 0));
      for (int64_t c = 0; c < n; ++c) // never a row wholly filled
        cond[c] = uint8_t(!fillWhen);
      Dev<T> gx(x), gdy(dy), gs(scale), gneg(neg), gzero(zero);
      Dev<uint8_t> gc(cond);
      Dev<T> tmp(x.size()), want(x.size()), got(x.size());
      unfusedForward(gx.p, gs.p, gc.p, cs, gneg.p, fillWhen, tmp.p, want.p, xs);
      gpu::SoftmaxMask mask{gc.p, cs.numel() / n, fillWhen};
      gpu::maskedSoftmax(gx.p, gs.p, mask, gneg.p, got.p, rows, n);
      auto y = want.host();
      EXPECT_EQ(0, std::memcmp(got.host().data(), y.data(), y.size() * sizeof(T)))
          << "forward, mask " << str(cs) << " fillWhen " << fillWhen;
      Dev<T> gy(y), wantDx(x.size()), gotDx(x.size());
      unfusedBackward(gy.p, gdy.p, gc.p, cs, gzero.p, fillWhen, gs.p, wantDx.p, xs);
      gpu::maskedSoftmaxGrad(gy.p, gdy.p, mask, gzero.p, gs.p, gotDx.p, rows, n);
      EXPECT_EQ(0, std::memcmp(gotDx.host().data(), wantDx.host().data(), y.size() * sizeof(T)))
          << "backward, mask " << str(cs) << " fillWhen " << fillWhen;
      // In place (the memory plan puts dx over dy): the same bits.
      Dev<T> inplace(dy);
      gpu::maskedSoftmaxGrad(gy.p, inplace.p, mask, gzero.p, gs.p, inplace.p, rows, n);
      EXPECT_EQ(0, std::memcmp(inplace.host().data(), wantDx.host().data(), y.size() * sizeof(T)))
          << "backward in place";
    }
  // Without the mask, and without the scale: the plain softmax's bits.
  Dev<T> gx(x), gs(scale), tmp(x.size()), want(x.size()), got(x.size());
  gpu::binary(Binary::Mul, gx.p, xs, gs.p, shape({}), tmp.p, xs);
  gpu::softmax(tmp.p, want.p, rows, n);
  gpu::maskedSoftmax(gx.p, gs.p, gpu::SoftmaxMask{}, static_cast<const T *>(nullptr), got.p, rows,
                     n);
  EXPECT_EQ(0, std::memcmp(got.host().data(), want.host().data(), x.size() * sizeof(T)));
  gpu::softmax(gx.p, want.p, rows, n);
  gpu::maskedSoftmax(gx.p, static_cast<const T *>(nullptr), gpu::SoftmaxMask{},
                     static_cast<const T *>(nullptr), got.p, rows, n);
  EXPECT_EQ(0, std::memcmp(got.host().data(), want.host().data(), x.size() * sizeof(T)));
}

std::vector<float> asFloat(const std::vector<float> &v) { return v; }

TEST(CudaKernels, FusedAttentionSoftmaxIsTheUnfusedChain) {
  REQUIRE_GPU();
  // Rows of 40 (16-byte loads), 37 (a warp, element by element) and 1100
  // (a block).
  for (Shape xs : {shape({2, 3, 16, 40}), shape({1, 2, 8, 37}), shape({1, 2, 4, 1100})}) {
    checkFusedSoftmax<float>(asFloat, xs);
    checkFusedSoftmax<Bf16>(toBf16, xs);
  }
}

/// Runs `f`, which writes `out`, on the scalar and then the packed (16-byte)
/// paths: the same bytes.
template <typename T>
void expectSameBits(const std::string &what, Dev<T> &out, const std::function<void()> &f) {
  gpu::zero(out.p, out.n * sizeof(T));
  gpu::setVectorized(false);
  f();
  auto scalar = out.host();
  gpu::zero(out.p, out.n * sizeof(T));
  gpu::setVectorized(true);
  f();
  auto packed = out.host();
  EXPECT_EQ(0, std::memcmp(scalar.data(), packed.data(), scalar.size() * sizeof(T))) << what;
}

template <typename T> void checkPackedPaths(std::vector<T> (*make)(const std::vector<float> &)) {
  const int64_t rows = 48, cols = 768, n = rows * cols;
  auto a = make(uniform(n, 81, -3, 3)), b = make(uniform(n, 82, 0.5f, 2)),
       bias = make(uniform(cols, 83, 0.5f, 2)), one = make(uniform(1, 84, 0.5f, 2));
  Dev<T> da(a), db(b), dbias(bias), done(one), out(static_cast<size_t>(n));
  const Shape os = shape({rows, cols});
  for (Unary op : {Unary::Exp, Unary::GeluErf, Unary::GeluTanh, Unary::Neg})
    expectSameBits("unary " + std::to_string(int(op)), out,
                   [&] { gpu::unary(op, da.p, out.p, n); });
  for (bool t : {false, true})
    expectSameBits("gelu_grad", out, [&] { gpu::geluGrad(t, da.p, db.p, out.p, n); });
  for (Binary op : {Binary::Add, Binary::Mul, Binary::Div}) {
    std::string o = " op " + std::to_string(int(op));
    expectSameBits("same shape" + o, out,
                   [&] { gpu::binary(op, da.p, db.p, n, out.p, n, cols); });
    expectSameBits("bias" + o, out, [&] { gpu::binary(op, da.p, dbias.p, cols, out.p, n, cols); });
    expectSameBits("scalar" + o, out, [&] { gpu::binary(op, da.p, done.p, 1, out.p, n, cols); });
    expectSameBits("shaped, bias first" + o, out, [&] {
      gpu::binary(op, dbias.p, shape({1, cols}), da.p, os, out.p, os);
    });
    expectSameBits("shaped, scalar second" + o, out,
                   [&] { gpu::binary(op, da.p, os, done.p, shape({}), out.p, os); });
  }
  // Attention's head permutes, and the slices of a fused qkv projection.
  const int64_t perm[4] = {0, 2, 1, 3};
  expectSameBits("transpose", out,
                 [&] { gpu::transpose(da.p, shape({4, 12, 8, 64}), perm, out.p); });
  const int64_t start[2] = {0, 256}, step[2] = {1, 1};
  expectSameBits("slice", out,
                 [&] { gpu::slice(da.p, os, start, step, out.p, shape({rows, 256})); });
  expectSameBits("slice_grad", out,
                 [&] { gpu::sliceGrad(db.p, shape({rows, 256}), start, step, out.p, os); });
  // Layer norm rows on one warp: the sums in another order than the block
  // kernel's, so within rounding, not the same bits.
  auto gamma = uniform(cols, 85, 0.5f, 1.5f), beta = uniform(cols, 86);
  Dev<float> gg(gamma), gb(beta), dg(static_cast<size_t>(cols)), dbeta(static_cast<size_t>(cols));
  Dev<uint8_t> scratch(gpu::layerNormGradScratchBytes(rows, cols));
  std::vector<T> y[2], dx[2];
  std::vector<float> g[2], bt[2];
  for (int v = 0; v < 2; ++v) {
    gpu::setVectorized(v == 1);
    gpu::layerNorm(da.p, gg.p, gb.p, out.p, rows, cols, 1e-5f);
    y[v] = out.host();
    gpu::layerNormGrad(db.p, da.p, gg.p, out.p, dg.p, dbeta.p, rows, cols, 1e-5f, scratch.p);
    dx[v] = out.host();
    g[v] = dg.host();
    bt[v] = dbeta.host();
  }
  gpu::setVectorized(true);
  EXPECT_TRUE(near(g[1], toDouble(g[0]), 1e-4, 1e-5)) << "dgamma";
  EXPECT_TRUE(near(bt[1], toDouble(bt[0]), 1e-4, 1e-5)) << "dbeta";
  if constexpr (std::is_same_v<T, float>) {
    EXPECT_TRUE(near(y[1], toDouble(y[0]), 1e-5, 1e-6)) << "layer_norm";
    EXPECT_TRUE(near(dx[1], toDouble(dx[0]), 1e-4, 1e-5)) << "layer_norm_grad";
  } else {
    EXPECT_TRUE(nearBf16(y[1], y[0], 2, 1e-6)) << "layer_norm";
    // One unit either way where the float sums round differently (the
    // helper counts units of 2^-8 of the value: up to half a true unit).
    EXPECT_TRUE(nearBf16(dx[1], dx[0], 2, 1e-6)) << "layer_norm_grad";
  }
}

TEST(CudaKernels, PackedPathsGiveTheScalarBits) {
  REQUIRE_GPU();
  checkPackedPaths<float>(asFloat);
  checkPackedPaths<Bf16>(toBf16);
  // Casts both ways, 8 elements a thread.
  const int64_t n = 4096;
  auto x = uniform(n, 87, -4, 4);
  Dev<float> dx(x), back(static_cast<size_t>(n));
  Dev<Bf16> d16(static_cast<size_t>(n));
  expectSameBits("cast to bf16", d16, [&] { gpu::cast(dx.p, d16.p, n); });
  expectSameBits("cast to float", back, [&] { gpu::cast(d16.p, back.p, n); });
}

TEST(CudaKernels, CrossEntropyOnBf16LogitsIsTheCastsBits) {
  REQUIRE_GPU();
  // What FuseCrossEntropy.cpp runs instead of cast, float cross-entropy
  // and gradient, cast: the same loss and gradient bits. Rows of GPT-2's
  // 50257 classes, and of 37; ignored and out-of-range labels.
  for (int64_t C : {int64_t(50257), int64_t(37)}) {
    const int64_t N = 24;
    auto x16 = toBf16(uniform(N * C, 71, -8, 8));
    std::vector<int64_t> labels(N);
    for (int64_t i = 0; i < N; ++i)
      labels[i] = i == 5 ? -100 : i == 7 ? C : (i * 7919) % C;
    for (int reduction : {0, 2}) {
      int64_t total = reduction == 0 ? N : 1;
      auto dloss = uniform(total, 72, 0.5f, 2);
      Dev<Bf16> gx(x16), fusedDx(x16.size()), castDx(x16.size());
      Dev<float> x32(x16.size()), dx32(x16.size()), lossA(static_cast<size_t>(total)),
          lossB(static_cast<size_t>(total)), gdloss(dloss);
      Dev<int64_t> glab(labels), badA(static_cast<size_t>(1)), badB(static_cast<size_t>(1));
      Dev<uint8_t> scratch(gpu::crossEntropyScratchBytes(N)),
          gscratch(gpu::crossEntropyGradScratchBytes());
      gpu::zero(badA.p, sizeof(int64_t));
      gpu::zero(badB.p, sizeof(int64_t));
      // Unfused.
      gpu::cast(gx.p, x32.p, N * C);
      gpu::crossEntropy(x32.p, glab.p, lossA.p, N, C, reduction, true, -100, badA.p, scratch.p);
      gpu::crossEntropyGrad(x32.p, glab.p, gdloss.p, dx32.p, N, C, reduction, true, -100,
                            gscratch.p);
      gpu::cast(dx32.p, castDx.p, N * C);
      // Fused.
      gpu::crossEntropy(gx.p, glab.p, lossB.p, N, C, reduction, true, -100, badB.p, scratch.p);
      gpu::crossEntropyGrad(gx.p, glab.p, gdloss.p, fusedDx.p, N, C, reduction, true, -100,
                            gscratch.p);
      auto a = lossA.host(), b = lossB.host();
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
          << "loss, C " << C << " reduction " << reduction;
      EXPECT_EQ(bits(fusedDx.host()), bits(castDx.host()))
          << "gradient, C " << C << " reduction " << reduction;
      EXPECT_EQ(badA.host(), badB.host());
      EXPECT_EQ(1, badB.host()[0]);
    }
  }
}

TEST(CudaKernels, PadAndUnpadMatrices) {
  REQUIRE_GPU();
  // Two [3, 5] matrices to [4, 8] with zeros around, and back; two
  // [3, 37] to [5, 64] (several chunks of 8 a row); on the 16-byte path
  // and element by element.
  struct Case {
    int64_t rows, cols, padRows, padCols;
  };
  for (bool vec : {true, false})
    for (Case c : {Case{3, 5, 4, 8}, Case{3, 37, 5, 64}}) {
      gpu::setVectorized(vec);
      std::vector<uint16_t> src(size_t(2 * c.rows * c.cols));
      for (size_t k = 0; k < src.size(); ++k)
        src[k] = uint16_t(k + 1);
      Dev<uint16_t> gs(src), gp(size_t(2 * c.padRows * c.padCols)), gb(src.size());
      gpu::padMatrices16(gs.p, 2, c.rows, c.cols, gp.p, c.padRows, c.padCols);
      auto p = gp.host();
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t r = 0; r < c.padRows; ++r)
          for (int64_t k = 0; k < c.padCols; ++k)
            EXPECT_EQ(r < c.rows && k < c.cols ? src[(b * c.rows + r) * c.cols + k] : 0,
                      p[(b * c.padRows + r) * c.padCols + k])
                << vec << " " << c.cols << ": " << b << " " << r << " " << k;
      gpu::unpadMatrices16(gp.p, c.padRows, c.padCols, 2, c.rows, c.cols, gb.p);
      EXPECT_EQ(src, gb.host()) << vec << " " << c.cols;
    }
  gpu::setVectorized(true);
}

TEST(CudaKernels, Bf16GemmPadsUnalignedRows) {
  REQUIRE_GPU();
  struct Case {
    Shape a, b, o;
    bool ta, tb;
  };
  // A k, n or transposed m of 37 or 21 is not a multiple of 8: the shapes
  // of a 50257-token vocabulary's head, its two gradients, and a batched
  // product.
  std::vector<Case> cases = {
      {shape({4, 33, 96}), shape({37, 96}), shape({4, 33, 37}), false, true},
      {shape({132, 37}), shape({37, 96}), shape({132, 96}), false, false},
      {shape({132, 37}), shape({132, 96}), shape({37, 96}), true, false},
      {shape({3, 21, 24}), shape({3, 24, 21}), shape({3, 21, 21}), false, false},
  };
  gpu::Blas blas;
  ASSERT_TRUE(blas.padAlign() == 64 || std::getenv("DSRT_CUDA_GEMM_PAD"));
  for (const Case &c : cases) {
    size_t need = gpu::Blas::scratchBytes(c.a, c.ta, c.b, c.tb, c.o);
    EXPECT_GT(need, 0u) << str(c.a) << " x " << str(c.b);
    auto a = toBf16(uniform(c.a.numel(), 72)), b = toBf16(uniform(c.b.numel(), 73));
    std::vector<Bf16> want(c.o.numel());
    matmul(a.data(), c.a, c.ta, b.data(), c.b, c.tb, want.data(), c.o);
    Dev<Bf16> ga(a), gb(b), plain(static_cast<size_t>(c.o.numel())),
        padded(static_cast<size_t>(c.o.numel()));
    Dev<uint8_t> scratch(need);
    blas.matmul(ga.p, c.a, c.ta, gb.p, c.b, c.tb, plain.p, c.o);
    blas.matmul(ga.p, c.a, c.ta, gb.p, c.b, c.tb, padded.p, c.o, scratch.p);
    EXPECT_TRUE(nearBf16(plain.host(), want, 2, 1e-3)) << "unpadded " << str(c.a);
    EXPECT_TRUE(nearBf16(padded.host(), want, 2, 1e-3)) << "padded " << str(c.a);
  }
  // Aligned rows need nothing.
  EXPECT_EQ(0u, gpu::Blas::scratchBytes(shape({64, 96}), false, shape({96, 80}), false,
                                        shape({64, 80})));
}

TEST(CudaKernels, Bf16GemmPadsUnalignedDimsToMultiplesOf64) {
  // The scratch a padded GEMM needs (no device involved): a k of 37 is
  // padded to 64, the aligned m (132) and n (96) are left alone: a
  // [132, 64] and a [64, 96] bf16 copy, each rounded up to 256 bytes.
  EXPECT_EQ(size_t(132 * 64 * 2 + 64 * 96 * 2),
            gpu::Blas::scratchBytes(shape({132, 37}), false, shape({37, 96}), false,
                                    shape({132, 96})));
  // GPT-2's head: logits [8192, 50257] = h [8192, 768] w^T; n to 50304.
  EXPECT_EQ(size_t(50304) * 768 * 2 + size_t(8192) * 50304 * 2,
            gpu::Blas::scratchBytes(shape({8, 1024, 768}), false, shape({50257, 768}), true,
                                    shape({8, 1024, 50257})));
}

} // namespace
} // namespace dsrt::cpu::test
