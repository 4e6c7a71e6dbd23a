//===- DropoutOptimTest.cpp - dropout and the optimizer steps -------------===//
//
// Dropout: identity at ratio 0, kept fraction, reproducibility of the
// counter-based mask. Adam(W), SGD, Lion, Adagrad and LAMB against float64
// implementations of torch's and DeepSpeed's update formulas over several
// steps; the fused Adam and LAMB against adam() and lamb() per tensor,
// bitwise.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <array>

namespace dsrt::cpu::test {
namespace {

std::vector<uint8_t> mask(int64_t n, float ratio, uint64_t seed,
                          uint64_t stream, uint64_t counter) {
  auto x = uniform(n, 2300);
  std::vector<float> y(n);
  std::vector<uint8_t> m(n);
  dropout(x.data(), y.data(), m.data(), n, ratio, seed, stream, counter);
  return m;
}

TEST(Dropout, RatioZeroIsIdentity) {
  for (int64_t n : {1, 33, 100000}) {
    auto x = uniform(n, 2400);
    std::vector<float> y(n);
    std::vector<uint8_t> m(n);
    dropout(x.data(), y.data(), m.data(), n, 0.0f, 1, 2, 3);
    EXPECT_TRUE(bitEqual(x, y));
    EXPECT_TRUE(
        std::all_of(m.begin(), m.end(), [](uint8_t v) { return v == 1; }));
  }
}

TEST(Dropout, RatioOneDropsAll) {
  const int64_t n = 1000;
  auto x = uniform(n, 2500);
  std::vector<float> y(n, 1.0f);
  std::vector<uint8_t> m(n, 1);
  dropout(x.data(), y.data(), m.data(), n, 1.0f, 1, 2, 3);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(m[i], 0);
    ASSERT_EQ(y[i], 0.0f);
  }
}

// Kept fraction within 0.01 of 1 - ratio for n = 1e5 (the standard deviation
// is at most 0.0016). Kept values: relative 1e-6 of x / (1 - ratio).
TEST(Dropout, KeptFractionAndScaling) {
  const int64_t n = 100000;
  auto x = uniform(n, 2600);
  for (float ratio : {0.1f, 0.5f, 0.9f}) {
    std::vector<float> y(n);
    std::vector<uint8_t> m(n);
    dropout(x.data(), y.data(), m.data(), n, ratio, 42, 7, 3);
    int64_t kept = 0;
    std::vector<double> want(n);
    for (int64_t i = 0; i < n; ++i) {
      kept += m[i];
      want[i] = m[i] ? double(x[i]) / (1.0 - ratio) : 0.0;
    }
    EXPECT_NEAR(double(kept) / n, 1.0 - ratio, 0.01) << "ratio " << ratio;
    EXPECT_TRUE(near(y, want, 1e-6, 0)) << "ratio " << ratio;

    auto dy = uniform(n, 2601);
    std::vector<float> dx(n);
    dropoutGrad(dy.data(), m.data(), dx.data(), n, ratio);
    for (int64_t i = 0; i < n; ++i)
      want[i] = m[i] ? double(dy[i]) / (1.0 - ratio) : 0.0;
    EXPECT_TRUE(near(dx, want, 1e-6, 0)) << "grad ratio " << ratio;
  }
}

TEST(Dropout, MaskIsAFunctionOfSeedStreamCounter) {
  const int64_t n = 100000;
  const auto base = mask(n, 0.5f, 1234, 5, 10);
  EXPECT_TRUE(bitEqual(base, mask(n, 0.5f, 1234, 5, 10)));
  {
    ThreadCount t(1);
    EXPECT_TRUE(bitEqual(base, mask(n, 0.5f, 1234, 5, 10)));
  }
  // A prefix of a longer tensor gets the same mask (element i uses draw i).
  auto longer = mask(n + 77, 0.5f, 1234, 5, 10);
  longer.resize(n);
  EXPECT_TRUE(bitEqual(base, longer));
  // Changing any key part gives a different, uncorrelated mask: about half
  // of the elements differ at ratio 0.5.
  auto differing = [&](const std::vector<uint8_t> &other) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; ++i)
      d += base[i] != other[i];
    return double(d) / n;
  };
  EXPECT_NEAR(differing(mask(n, 0.5f, 1234, 5, 11)), 0.5, 0.02);
  EXPECT_NEAR(differing(mask(n, 0.5f, 1234, 6, 10)), 0.5, 0.02);
  EXPECT_NEAR(differing(mask(n, 0.5f, 1235, 5, 10)), 0.5, 0.02);
}

// A part of a larger tensor (a tensor-parallel rank's run) draws the whole
// tensor's bits for its elements when told where it starts.
TEST(Dropout, PartWithOffsetDrawsTheWholeMask) {
  const int64_t n = 10000, first = 3333, count = 4000;
  const auto whole = mask(n, 0.3f, 7, 2, 9);
  std::vector<float> x(count, 1.0f), y(count);
  std::vector<uint8_t> part(count);
  cpu::dropout(x.data(), y.data(), part.data(), count, 0.3f, 7, 2, 9, first);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin() + first));
  // Without the offset it is the whole tensor's first elements instead.
  cpu::dropout(x.data(), y.data(), part.data(), count, 0.3f, 7, 2, 9);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin()));
}

struct AdamConfig {
  float lr, beta1, beta2, eps, wd;
  bool decoupled, biasCorrection;
};

// Float64 torch.optim.Adam / AdamW (single tensor): AdamW decays p first,
// Adam adds wd * p to the gradient; eps is added after sqrt(v_hat).
void refAdam(std::vector<double> &p, const std::vector<double> &g,
             std::vector<double> &m, std::vector<double> &v,
             const AdamConfig &c, int64_t step) {
  const double bc1 = c.biasCorrection ? 1 - std::pow(double(c.beta1), step) : 1;
  const double bc2 = c.biasCorrection ? 1 - std::pow(double(c.beta2), step) : 1;
  for (size_t i = 0; i < p.size(); ++i) {
    double grad = g[i];
    if (c.decoupled)
      p[i] *= 1 - double(c.lr) * c.wd;
    else
      grad += double(c.wd) * p[i];
    m[i] = c.beta1 * m[i] + (1 - double(c.beta1)) * grad;
    v[i] = c.beta2 * v[i] + (1 - double(c.beta2)) * grad * grad;
    p[i] -=
        double(c.lr) / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + c.eps);
  }
}

// Tolerance over 5 steps: parameters relative 1e-5 / absolute 1e-6; moments
// relative 1e-5 / absolute 1e-7 (m = beta1 m + (1 - beta1) g cancels, leaving
// the float rounding of operands up to 0.2 in magnitude).
TEST(Optim, AdamMatchesTorchFormulas) {
  const AdamConfig configs[] = {
      {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, true, true},
      {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, false, true},
      {5e-2f, 0.8f, 0.95f, 1e-6f, 0.0f, true, false},
      {1e-2f, 0.9f, 0.99f, 1e-8f, 0.1f, false, false},
  };
  for (const AdamConfig &c : configs)
    for (int64_t n : {7, 100003}) {
      auto p = uniform(n, 2700), m = uniform(n, 2701, -0.01f, 0.01f);
      auto v = uniform(n, 2702, 0, 1e-4f);
      auto pd = toDouble(p), md = toDouble(m), vd = toDouble(v);
      for (int64_t step = 1; step <= 5; ++step) {
        auto g = uniform(n, 2710 + unsigned(step));
        adam(p.data(), g.data(), m.data(), v.data(), n, c.lr, c.beta1, c.beta2,
             c.eps, c.wd, c.decoupled, c.biasCorrection, step);
        refAdam(pd, toDouble(g), md, vd, c, step);
      }
      EXPECT_TRUE(near(p, pd, 1e-5, 1e-6)) << "decoupled " << c.decoupled;
      EXPECT_TRUE(near(m, md, 1e-5, 1e-7));
      EXPECT_TRUE(near(v, vd, 1e-5, 1e-7));
    }
}

// Tolerance over 5 steps: relative 1e-5, absolute 1e-6.
/// The tensors of a fused update's test (sizes of one element to several
/// of LAMB's 16K chunks, split across the threads mid-tensor), gradients
/// of type G, and a copy of the parameters and moments for the unfused
/// reference.
template <class G> struct FusedTensors {
  static constexpr int64_t kSizes[] = {1, 384, 70001, 3, 100000};
  std::vector<std::vector<float>> p, m, v, pRef, mRef, vRef;
  std::vector<std::vector<G>> g;
  AdamTensor::Grad kind;

  FusedTensors(AdamTensor::Grad kind, uint64_t seed) : kind(kind) {
    for (size_t k = 0; k < std::size(kSizes); ++k) {
      const int64_t n = kSizes[k];
      p.push_back(uniform(n, seed + k));
      m.push_back(std::vector<float>(n, 0.0f));
      v.push_back(std::vector<float>(n, 0.0f));
      auto wide = uniform(n, seed + 100 + k, -3.0f, 3.0f);
      if constexpr (std::is_same_v<G, float>)
        g.push_back(wide);
      else
        g.push_back(narrowTo<G>(wide));
    }
    pRef = p, mRef = m, vRef = v;
  }
  std::vector<AdamTensor> tensors() {
    std::vector<AdamTensor> t;
    for (size_t k = 0; k < p.size(); ++k)
      t.push_back({p[k].data(), g[k].data(), kind, m[k].data(), v[k].data(), kSizes[k]});
    return t;
  }
  /// Tensor k's gradient as the unfused plan's update reads it: widened
  /// to float and, with a factor other than 1, clipped by scale().
  std::vector<float> clipped(size_t k, float coef) const {
    std::vector<float> c;
    if constexpr (std::is_same_v<G, float>)
      c = g[k];
    else
      c = widen(g[k]);
    if (coef != 1.0f)
      scale(c.data(), kSizes[k], coef);
    return c;
  }
  /// Whether tensor k's parameter and moments equal the reference's.
  void expectReference(size_t k, int64_t step) const {
    EXPECT_TRUE(bitEqual(p[k], pRef[k])) << "tensor " << k << " step " << step;
    EXPECT_TRUE(bitEqual(m[k], mRef[k])) << "tensor " << k << " step " << step;
    EXPECT_TRUE(bitEqual(v[k], vRef[k])) << "tensor " << k << " step " << step;
  }
};

// fusedAdam over tensors of several sizes (split across the threads in
// the middle of some), with float32, bf16 and fp16 gradients: bitwise what
// adam() gives each tensor on its gradient widened to float and, with a
// factor other than 1, clipped by scale() (the unfused plan's clip).
template <class G> void fusedAdamCase(AdamTensor::Grad kind, float coef, bool decoupled) {
  FusedTensors<G> f(kind, 3100);
  for (int64_t step = 1; step <= 3; ++step) {
    std::vector<AdamTensor> t = f.tensors();
    fusedAdam(t.data(), t.size(), coef, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, decoupled, true, step);
    for (size_t k = 0; k < t.size(); ++k) {
      std::vector<float> clipped = f.clipped(k, coef);
      adam(f.pRef[k].data(), clipped.data(), f.mRef[k].data(), f.vRef[k].data(), t[k].n, 1e-2f,
           0.9f, 0.999f, 1e-8f, 0.1f, decoupled, true, step);
      f.expectReference(k, step);
    }
  }
}

TEST(Optim, FusedAdamIsAdamOnTheClippedWidenedGradients) {
  for (float coef : {1.0f, 0.3125f, 0.0731f})
    for (bool decoupled : {true, false}) {
      SCOPED_TRACE("coef " + std::to_string(coef) + (decoupled ? " AdamW" : " Adam-L2"));
      fusedAdamCase<float>(AdamTensor::Grad::F32, coef, decoupled);
      fusedAdamCase<Bf16>(AdamTensor::Grad::BF16, coef, decoupled);
      fusedAdamCase<Fp16>(AdamTensor::Grad::F16, coef, decoupled);
    }
}

// fusedLambStats and fusedLamb over the same tensors (some of several of
// lambStats' 16K chunks, split across the threads mid-tensor), with
// float32, bf16 and fp16 gradients: bitwise lambStats and lamb on each
// tensor's gradient widened and, with a factor other than 1, clipped.
template <class G> void fusedLambCase(AdamTensor::Grad kind, float coef, float wd) {
  FusedTensors<G> f(kind, 3400);
  for (int64_t step = 1; step <= 3; ++step) {
    std::vector<AdamTensor> t = f.tensors();
    std::vector<std::array<float, 2>> sums(t.size());
    std::vector<float *> out;
    for (auto &s : sums)
      out.push_back(s.data());
    fusedLambStats(t.data(), t.size(), coef, 0.9f, 0.999f, 1e-6f, wd, out.data());
    const std::vector<const float *> in(out.begin(), out.end());
    fusedLamb(t.data(), t.size(), in.data(), coef, 2e-3f, 0.9f, 0.999f, 1e-6f, wd, true, 10.0f,
              0.01f, step);
    for (size_t k = 0; k < t.size(); ++k) {
      std::vector<float> clipped = f.clipped(k, coef);
      float ref[2];
      lambStats(f.pRef[k].data(), clipped.data(), f.mRef[k].data(), f.vRef[k].data(), t[k].n,
                0.9f, 0.999f, 1e-6f, wd, ref);
      EXPECT_EQ(sums[k][0], ref[0]) << "tensor " << k << " step " << step;
      EXPECT_EQ(sums[k][1], ref[1]) << "tensor " << k << " step " << step;
      lamb(f.pRef[k].data(), clipped.data(), f.mRef[k].data(), f.vRef[k].data(), t[k].n, 2e-3f,
           0.9f, 0.999f, 1e-6f, wd, true, 10.0f, 0.01f, step, ref);
      f.expectReference(k, step);
    }
  }
}

TEST(Optim, FusedLambIsLambOnTheClippedWidenedGradients) {
  for (float coef : {1.0f, 0.3125f, 0.0731f})
    for (float wd : {0.0f, 0.01f}) {
      SCOPED_TRACE("coef " + std::to_string(coef) + " weight_decay " + std::to_string(wd));
      fusedLambCase<float>(AdamTensor::Grad::F32, coef, wd);
      fusedLambCase<Bf16>(AdamTensor::Grad::BF16, coef, wd);
      fusedLambCase<Fp16>(AdamTensor::Grad::F16, coef, wd);
    }
}

// A working copy written behind the update is the cast of the new value
// (what nn.cast makes of it), in bf16 and fp16, and writing it changes
// nothing of the update itself (tensors 0 and 3 have none).
TEST(Optim, FusedUpdatesWriteTheWorkingCopies) {
  for (bool lambStep : {false, true}) {
    SCOPED_TRACE(lambStep ? "LAMB" : "Adam");
    FusedTensors<Bf16> with(AdamTensor::Grad::BF16, 3600), without(AdamTensor::Grad::BF16, 3600);
    std::vector<AdamTensor> t = with.tensors(), u = without.tensors();
    std::vector<std::vector<Bf16>> bf(t.size());
    std::vector<std::vector<Fp16>> hf(t.size());
    for (size_t k = 0; k < t.size(); ++k) {
      if (k == 0 || k == 3)
        continue;
      if (k % 2) {
        bf[k].resize(size_t(t[k].n));
        t[k].copy = bf[k].data(), t[k].copyType = AdamTensor::Copy::BF16;
      } else {
        hf[k].resize(size_t(t[k].n));
        t[k].copy = hf[k].data(), t[k].copyType = AdamTensor::Copy::F16;
      }
    }
    for (int64_t step = 1; step <= 2; ++step)
      for (auto *ts : {&t, &u}) {
        if (!lambStep) {
          fusedAdam(ts->data(), ts->size(), 0.5f, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, true, true,
                    step);
          continue;
        }
        std::vector<std::array<float, 2>> sums(ts->size());
        std::vector<float *> out;
        for (auto &x : sums)
          out.push_back(x.data());
        fusedLambStats(ts->data(), ts->size(), 0.5f, 0.9f, 0.999f, 1e-6f, 0.01f, out.data());
        const std::vector<const float *> in(out.begin(), out.end());
        fusedLamb(ts->data(), ts->size(), in.data(), 0.5f, 2e-3f, 0.9f, 0.999f, 1e-6f, 0.01f,
                  true, 10.0f, 0.01f, step);
      }
    for (size_t k = 0; k < t.size(); ++k) {
      EXPECT_TRUE(bitEqual(with.p[k], without.p[k])) << "tensor " << k;
      EXPECT_TRUE(bitEqual(with.m[k], without.m[k])) << "tensor " << k;
      if (!bf[k].empty())
        EXPECT_TRUE(bitEqual(widen(bf[k]), widen(narrowTo<Bf16>(with.p[k])))) << "tensor " << k;
      if (!hf[k].empty())
        EXPECT_TRUE(bitEqual(widen(hf[k]), widen(narrowTo<Fp16>(with.p[k])))) << "tensor " << k;
    }
  }
}

// The sum of squares of bf16 / fp16 values is that of their float casts.
TEST(Optim, SumSquaresOfNarrowIsOfTheWidened) {
  for (int64_t n : {1, 1000, 300001}) {
    auto b = narrowTo<Bf16>(uniform(n, 3300, -4.0f, 4.0f));
    auto h = narrowTo<Fp16>(uniform(n, 3301, -4.0f, 4.0f));
    EXPECT_EQ(sumSquares(b.data(), n), sumSquares(widen(b).data(), n)) << n;
    EXPECT_EQ(sumSquares(h.data(), n), sumSquares(widen(h).data(), n)) << n;
  }
}

// A clip's multi-tensor sum is bitwise the per-tensor sums added in order,
// whatever the tensors' types and sizes (empty, inside one chunk, several).
TEST(Optim, SumSquaresOfManyIsTheLoopOverEach) {
  const int64_t ns[] = {0, 384, 16384, 16385, 300001, 1, 147456};
  std::vector<std::vector<float>> f;
  std::vector<std::vector<Bf16>> b;
  std::vector<std::vector<Fp16>> h;
  std::vector<SquaresOf> ts;
  double want = 0;
  for (size_t k = 0; k < std::size(ns); ++k) {
    const int64_t n = ns[k];
    f.push_back(uniform(n, 3400 + uint32_t(k), -4.0f, 4.0f));
    b.push_back(narrowTo<Bf16>(uniform(n, 3500 + uint32_t(k), -4.0f, 4.0f)));
    h.push_back(narrowTo<Fp16>(uniform(n, 3600 + uint32_t(k), -4.0f, 4.0f)));
  }
  for (size_t k = 0; k < std::size(ns); ++k) {
    const int64_t n = ns[k];
    ts.push_back({f[k].data(), DType::F32, n});
    want += sumSquares(f[k].data(), n);
    ts.push_back({b[k].data(), DType::BF16, n});
    want += sumSquares(b[k].data(), n);
    ts.push_back({h[k].data(), DType::F16, n});
    want += sumSquares(h[k].data(), n);
  }
  EXPECT_EQ(sumSquares(ts.data(), ts.size()), want);
  EXPECT_EQ(sumSquares(ts.data(), 0), 0.0);
}

TEST(Optim, SgdMatchesTorchFormulas) {
  struct Config {
    float lr, momentum, dampening, wd;
    bool nesterov;
  };
  const Config configs[] = {{0.1f, 0.0f, 0.0f, 0.0f, false},
                            {0.1f, 0.0f, 0.0f, 0.01f, false},
                            {0.05f, 0.9f, 0.0f, 0.01f, false},
                            {0.05f, 0.9f, 0.1f, 0.0f, false},
                            {0.05f, 0.9f, 0.0f, 0.01f, true}};
  for (const Config &c : configs)
    for (int64_t n : {7, 100003}) {
      auto p = uniform(n, 2800);
      std::vector<float> buf(c.momentum != 0 ? n : 0, std::nanf(""));
      auto pd = toDouble(p);
      std::vector<double> bd(n);
      for (int step = 1; step <= 5; ++step) {
        auto g = uniform(n, 2810 + step);
        sgd(p.data(), g.data(), c.momentum != 0 ? buf.data() : nullptr, n, c.lr,
            c.momentum, c.dampening, c.wd, c.nesterov, step == 1);
        for (int64_t i = 0; i < n; ++i) {
          double grad = g[i] + double(c.wd) * pd[i];
          if (c.momentum != 0) {
            bd[i] = step == 1
                        ? grad
                        : c.momentum * bd[i] + (1 - double(c.dampening)) * grad;
            grad = c.nesterov ? grad + c.momentum * bd[i] : bd[i];
          }
          pd[i] -= c.lr * grad;
        }
      }
      EXPECT_TRUE(near(p, pd, 1e-5, 1e-6))
          << "momentum " << c.momentum << " nesterov " << c.nesterov;
    }
}

// Lion against float64 FusedLion (DeepSpeed edaa722
// csrc/lion/multi_tensor_lion.cu): c = b1 m + (1-b1) g; p = p (1 - lr wd) +
// (c > 0 ? -lr : lr); m = b2 m + (1-b2) g. The gradients are bounded away
// from 0 so that float rounding cannot flip a sign; a zero c (zero moment and
// gradient) moves p by +lr, as there. Tolerance over 5 steps: relative 1e-6,
// absolute 1e-7.
TEST(Optim, LionMatchesFusedLion) {
  for (float wd : {0.0f, 0.1f})
    for (int64_t n : {7, 100003}) {
      auto p = uniform(n, 2900);
      std::vector<float> m(n, 0.0f);
      auto pd = toDouble(p);
      std::vector<double> md(n, 0.0);
      const float lr = 1e-3f, b1 = 0.9f, b2 = 0.99f;
      for (int step = 1; step <= 5; ++step) {
        auto g = uniform(n, 2910 + step, 0.5f, 1.0f);
        for (int64_t i = 0; i < n; i += 2)
          g[i] = -g[i];
        lion(p.data(), g.data(), m.data(), n, lr, b1, b2, wd);
        for (int64_t i = 0; i < n; ++i) {
          double c = b1 * md[i] + (1 - double(b1)) * g[i];
          pd[i] = pd[i] * (1 - double(lr) * wd) + (c > 0 ? -double(lr) : double(lr));
          md[i] = b2 * md[i] + (1 - double(b2)) * g[i];
        }
      }
      EXPECT_TRUE(near(p, pd, 1e-6, 1e-7)) << "wd " << wd;
      EXPECT_TRUE(near(m, md, 1e-6, 1e-7));
    }
  // c == 0: FusedLion's +lr (its `c > 0 ? -lr : lr`).
  float p = 1.0f, g = 0.0f, m = 0.0f;
  lion(&p, &g, &m, 1, 0.5f, 0.9f, 0.99f, 0.0f);
  EXPECT_EQ(p, 1.5f);
}

// DeepSpeed's OnebitAdam (edaa722 runtime/fp16/onebit/adam.py) against a
// float64 transcription, through its phases: Init changes nothing; Warmup
// is Adam without bias correction; Compressed takes the given momentum (or,
// without one, b1 m + (1-b1) g) and leaves v frozen; both then p -= lr (m /
// (sqrt(v) + eps) + wd p).
TEST(Optim, OneBitAdamMatchesOnebitAdam) {
  for (float wd : {0.0f, 0.01f})
    for (int64_t n : {7, 100003}) {
      auto p = uniform(n, 3100), m0 = uniform(n, 3101, 0.0f, 0.1f), v0 = uniform(n, 3102, 0.01f, 0.1f);
      std::vector<float> m = m0, v = v0;
      auto pd = toDouble(p), md = toDouble(m0), vd = toDouble(v0);
      const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
      auto before = p;
      auto g = uniform(n, 3110);
      onebitAdam(p.data(), g.data(), m.data(), v.data(), nullptr, n, lr, b1, b2, eps, wd,
                 OneBitPhase::Init);
      EXPECT_EQ(p, before);
      EXPECT_EQ(m, m0);
      auto step = [&](OneBitPhase phase, const std::vector<float> &c) {
        for (int64_t i = 0; i < n; ++i) {
          if (phase == OneBitPhase::Warmup) {
            md[i] = b1 * md[i] + (1 - double(b1)) * g[i];
            vd[i] = b2 * vd[i] + (1 - double(b2)) * double(g[i]) * g[i];
          } else {
            md[i] = c.empty() ? b1 * md[i] + (1 - double(b1)) * g[i] : double(c[i]);
          }
          pd[i] -= lr * (md[i] / (std::sqrt(vd[i]) + eps) + wd * pd[i]);
        }
      };
      for (int t = 2; t <= 4; ++t) {
        g = uniform(n, 3110 + t);
        onebitAdam(p.data(), g.data(), m.data(), v.data(), nullptr, n, lr, b1, b2, eps, wd,
                   OneBitPhase::Warmup);
        step(OneBitPhase::Warmup, {});
      }
      auto frozen = v;
      g = uniform(n, 3120);
      onebitAdam(p.data(), g.data(), m.data(), v.data(), nullptr, n, lr, b1, b2, eps, wd,
                 OneBitPhase::Compressed);
      step(OneBitPhase::Compressed, {});
      auto c = uniform(n, 3121, -0.05f, 0.05f);
      onebitAdam(p.data(), g.data(), m.data(), v.data(), c.data(), n, lr, b1, b2, eps, wd,
                 OneBitPhase::Compressed);
      step(OneBitPhase::Compressed, c);
      EXPECT_EQ(v, frozen) << "v is frozen once compressed";
      EXPECT_EQ(m, c) << "the compressed momentum replaces m";
      EXPECT_TRUE(near(p, pd, 1e-6, 1e-7)) << "wd " << wd << ", n " << n;
      EXPECT_TRUE(near(v, vd, 1e-6, 1e-9));
    }
}

// Adagrad against float64 torch.optim.Adagrad (_single_tensor_adagrad):
// g += wd p; sum += g^2; p -= lr / (1 + (t-1) lr_decay) * g / (sqrt(sum) +
// eps). Tolerance over 5 steps: relative 1e-5, absolute 1e-6.
TEST(Optim, AdagradMatchesTorchFormulas) {
  struct Config {
    float lr, eps, wd, lrDecay;
  };
  for (const Config &c : {Config{1e-2f, 1e-10f, 0.0f, 0.0f}, Config{5e-2f, 1e-6f, 0.01f, 0.1f}})
    for (int64_t n : {7, 100003}) {
      auto p = uniform(n, 3000);
      std::vector<float> sum(n, 0.0f);
      auto pd = toDouble(p);
      std::vector<double> sd(n, 0.0);
      for (int64_t step = 1; step <= 5; ++step) {
        auto g = uniform(n, 3010 + unsigned(step));
        adagrad(p.data(), g.data(), sum.data(), n, c.lr, c.eps, c.wd, c.lrDecay, step);
        const double clr = c.lr / (1 + double(step - 1) * c.lrDecay);
        for (int64_t i = 0; i < n; ++i) {
          const double grad = g[i] + double(c.wd) * pd[i];
          sd[i] += grad * grad;
          pd[i] -= clr * grad / (std::sqrt(sd[i]) + c.eps);
        }
      }
      EXPECT_TRUE(near(p, pd, 1e-5, 1e-6)) << "lr_decay " << c.lrDecay;
      EXPECT_TRUE(near(sum, sd, 1e-5, 1e-6));
    }
}

// LAMB against float64 FusedLamb (DeepSpeed edaa722
// csrc/lamb/fused_lamb_cuda_kernel.cu): the two parts, with the tensor split
// in two pieces whose sums are added (as the all-reduce over ZeRO chunks
// does), must equal the whole tensor's update. Tolerance over 5 steps:
// relative 1e-5, absolute 1e-6.
TEST(Optim, LambMatchesFusedLamb) {
  struct Config {
    float lr, wd, minCoeff, maxCoeff;
    bool biasCorrection;
  };
  for (const Config &c : {Config{1e-2f, 0.01f, 0.01f, 10.0f, true},
                          Config{1e-3f, 0.0f, 0.01f, 10.0f, false},
                          // A clamp that binds: the trust ratio is far above 0.5.
                          Config{1e-2f, 0.1f, 0.01f, 0.5f, true}})
    for (int64_t n : {7, 100003}) {
      const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
      auto p = uniform(n, 3100);
      std::vector<float> m(n, 0.0f), v(n, 0.0f);
      auto pd = toDouble(p);
      std::vector<double> md(n, 0.0), vd(n, 0.0);
      const int64_t half = n / 2;
      for (int64_t step = 1; step <= 5; ++step) {
        auto g = uniform(n, 3110 + unsigned(step), -0.1f, 0.1f);
        float a[2], b[2];
        lambStats(p.data(), g.data(), m.data(), v.data(), half, b1, b2, eps, c.wd, a);
        lambStats(p.data() + half, g.data() + half, m.data() + half, v.data() + half, n - half,
                  b1, b2, eps, c.wd, b);
        const float sums[2] = {a[0] + b[0], a[1] + b[1]};
        lamb(p.data(), g.data(), m.data(), v.data(), half, c.lr, b1, b2, eps, c.wd,
             c.biasCorrection, c.maxCoeff, c.minCoeff, step, sums);
        lamb(p.data() + half, g.data() + half, m.data() + half, v.data() + half, n - half, c.lr,
             b1, b2, eps, c.wd, c.biasCorrection, c.maxCoeff, c.minCoeff, step, sums);
        double w2 = 0, u2 = 0;
        std::vector<double> u(n);
        for (int64_t i = 0; i < n; ++i) {
          md[i] = b1 * md[i] + (1 - double(b1)) * g[i];
          vd[i] = b2 * vd[i] + (1 - double(b2)) * g[i] * double(g[i]);
          u[i] = md[i] / (std::sqrt(vd[i]) + eps) + double(c.wd) * pd[i];
          w2 += pd[i] * pd[i];
          u2 += u[i] * u[i];
        }
        double ratio = std::clamp(std::sqrt(w2) / std::sqrt(u2), double(c.minCoeff),
                                  double(c.maxCoeff));
        double stepSize = c.lr;
        if (c.biasCorrection)
          stepSize *= std::sqrt(1 - std::pow(double(b2), step)) / (1 - std::pow(double(b1), step));
        for (int64_t i = 0; i < n; ++i)
          pd[i] -= stepSize * ratio * u[i];
      }
      EXPECT_TRUE(near(p, pd, 1e-5, 1e-6)) << "max_coeff " << c.maxCoeff << " n " << n;
      EXPECT_TRUE(near(m, md, 1e-5, 1e-7));
      EXPECT_TRUE(near(v, vd, 1e-5, 1e-7));
    }
  // Either norm 0: the ratio is 1, not clamped (FusedLamb).
  float p = 0.0f, g = 0.5f, m = 0.0f, v = 0.0f, sums[2];
  lambStats(&p, &g, &m, &v, 1, 0.9f, 0.999f, 1e-8f, 0.0f, sums);
  EXPECT_EQ(sums[0], 0.0f);
  lamb(&p, &g, &m, &v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, false, 10.0f, 0.01f, 1, sums);
  // u = m / (sqrt(v) + eps) with the kernel's float moments: p = -0.1 * u.
  const float mf = (1.0f - 0.9f) * 0.5f, vf = (1.0f - 0.999f) * 0.25f;
  const float u = mf / (std::sqrt(vf) + 1e-8f);
  EXPECT_NEAR(p, -0.1f * u, 1e-6f);
}

} // namespace
} // namespace dsrt::cpu::test
