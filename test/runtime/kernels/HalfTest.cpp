//===- HalfTest.cpp - bf16 / fp16 conversions, casts and matmul -----------===//
//
// Conversions on every instruction-set path the CPU has (AVX512_BF16,
// AVX-512F, portable) against a float64 model of rounding to nearest even:
// every sign/exponent/mantissa-top pattern with low bits at, around and away
// from the rounding tie, NaN, infinities, denormals and overflow; the paths
// must agree bit for bit. Casts between all dtypes, including F64 and int64
// sources that a float detour would round twice. Matmul against a float64
// triple loop over the same (already 16-bit) operands.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <limits>

namespace dsrt::cpu::test {
namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// Float64 model of rounding v to p significand bits, normal exponents from
/// emin, to nearest even; below 2^emin either subnormal steps of
/// 2^(emin-p+1) or (flush) zero; past maxFinite (after rounding) infinity.
double roundRef(double v, int p, int emin, bool subnormals, double maxFinite) {
  if (v == 0 || std::isnan(v) || std::isinf(v))
    return v;
  const double a = std::fabs(v);
  double quantum;
  if (a < std::ldexp(1.0, emin)) {
    if (!subnormals)
      return std::copysign(0.0, v);
    quantum = std::ldexp(1.0, emin - p + 1);
  } else {
    int e;
    std::frexp(a, &e); // a = m 2^e, m in [0.5, 1)
    quantum = std::ldexp(1.0, e - 1 - p + 1);
  }
  double r = std::nearbyint(a / quantum) * quantum; // ties to even
  if (r > maxFinite)
    r = std::numeric_limits<double>::infinity();
  return std::copysign(r, v);
}

double bf16Ref(float f) { return roundRef(f, 8, -126, false, 0x1.fep127); }
double f16Ref(float f) { return roundRef(f, 11, -14, true, 65504.0); }

/// Sign, exponent, mantissa decode of the 16-bit formats (float64).
double decode(uint16_t h, int expBits, int manBits) {
  const int bias = (1 << (expBits - 1)) - 1;
  const int e = (h >> manBits) & ((1 << expBits) - 1);
  const int m = h & ((1 << manBits) - 1);
  const double sign = (h >> 15) ? -1.0 : 1.0;
  if (e == (1 << expBits) - 1)
    return m ? std::copysign(std::nan(""), sign)
             : sign * std::numeric_limits<double>::infinity();
  if (e == 0)
    return sign * std::ldexp(double(m), 1 - bias - manBits);
  return sign * std::ldexp(double(m + (1 << manBits)), e - bias - manBits);
}

/// Every instruction set this CPU has, in increasing order; restores the
/// one in use at the end.
class EachIsa {
public:
  EachIsa() : saved(halfIsa()) {}
  ~EachIsa() { setHalfIsa(saved); }
  template <class F> void run(F f) {
    for (HalfIsa isa :
         {HalfIsa::Portable, HalfIsa::Avx512F, HalfIsa::Avx512Bf16})
      if (setHalfIsa(isa) == isa)
        f(isa);
  }

private:
  HalfIsa saved;
};

/// Floats with every upper-16-bit pattern and low bits below, at and just
/// above the bf16 rounding tie (0x8000) and the fp16 one (0x1000 in the low
/// 13 bits), plus an odd count so the vector loops' tails run.
std::vector<float> sweep() {
  const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff,
                           0x1000, 0x0fff, 0x1001, 0xf000, 0x5a5a};
  std::vector<float> v;
  for (uint32_t hi = 0; hi < 0x10000; ++hi)
    for (uint32_t lo : lows)
      v.push_back(floatOf(hi << 16 | lo));
  v.push_back(1.0f);
  return v;
}

/// got is the reference (NaN: any NaN of the same sign; zero: same sign).
::testing::AssertionResult sameValue(double got, double want, float in) {
  if (std::isnan(want)
          ? std::isnan(got) && std::signbit(got) == std::signbit(in)
          : got == want && std::signbit(got) == std::signbit(want))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "input " << std::hexfloat << in << " (bits 0x" << std::hex
         << bitsOf(in) << std::dec << "): got " << got << ", want " << want;
}

TEST(HalfConvert, Bf16RoundsToNearestEvenOnEveryPath) {
  const auto x = sweep();
  std::vector<std::vector<Bf16>> results;
  EachIsa isas;
  isas.run([&](HalfIsa isa) {
    auto y = narrowTo<Bf16>(x);
    for (size_t i = 0; i < x.size(); ++i) {
      const double got = decode(y[i].bits, 8, 7);
      auto r = sameValue(got, bf16Ref(x[i]), x[i]);
      ASSERT_TRUE(r) << "isa " << int(isa);
      // A NaN is quieted and keeps its sign and top payload bits.
      if (std::isnan(x[i])) {
        ASSERT_EQ(y[i].bits, (bitsOf(x[i]) >> 16) | 0x40);
      }
    }
    results.push_back(y);
  });
  for (auto &r : results) {
    EXPECT_TRUE(
        0 == std::memcmp(r.data(), results[0].data(), r.size() * sizeof(Bf16)))
        << "the paths disagree";
  }
}

TEST(HalfConvert, Fp16RoundsToNearestEvenOnEveryPath) {
  const auto x = sweep();
  std::vector<std::vector<Fp16>> results;
  EachIsa isas;
  isas.run([&](HalfIsa isa) {
    auto y = narrowTo<Fp16>(x);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_TRUE(sameValue(decode(y[i].bits, 5, 10), f16Ref(x[i]), x[i]))
          << "isa " << int(isa);
    }
    results.push_back(y);
  });
  for (auto &r : results) {
    EXPECT_TRUE(
        0 == std::memcmp(r.data(), results[0].data(), r.size() * sizeof(Fp16)))
        << "the paths disagree";
  }
}

TEST(HalfConvert, WideningIsExactOnEveryPath) {
  std::vector<Bf16> b(0x10001);
  std::vector<Fp16> h(0x10001);
  for (uint32_t i = 0; i < 0x10001; ++i) {
    b[i].bits = uint16_t(i);
    h[i].bits = uint16_t(i);
  }
  EachIsa isas;
  isas.run([&](HalfIsa isa) {
    auto bf = widen(b), hf = widen(h);
    for (uint32_t i = 0; i < 0x10001; ++i) {
      // bf16 -> float is a 16-bit shift, NaN payloads included.
      ASSERT_EQ(bitsOf(bf[i]), uint32_t(b[i].bits) << 16) << "isa " << int(isa);
      const double want = decode(h[i].bits, 5, 10);
      ASSERT_TRUE(std::isnan(want)
                      ? std::isnan(hf[i])
                      : double(hf[i]) == want &&
                            std::signbit(hf[i]) == std::signbit(want))
          << std::hex << h[i].bits << " isa " << int(isa);
    }
  });
}

TEST(HalfConvert, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    float in;
    uint16_t bf16, f16;
  };
  const Case cases[] = {
      {1.0f, 0x3f80, 0x3c00},
      // Ties: bf16 at 1 + 2^-8 (down to even 1), 1 + 3 2^-8 (up to even).
      {1.0f + 0x1p-8f, 0x3f80, 0x3c04},
      {1.0f + 0x3p-8f, 0x3f82, 0x3c0c},
      {-(1.0f + 0x1p-8f), 0xbf80, 0xbc04},
      // fp16 ties: 1 + 2^-11 (down), 1 + 3 2^-11 (up).
      {1.0f + 0x1p-11f, 0x3f80, 0x3c00},
      {1.0f + 0x3p-11f, 0x3f80, 0x3c02},
      {-0.0f, 0x8000, 0x8000},
      {inf, 0x7f80, 0x7c00},
      {-inf, 0xff80, 0xfc00},
      // The largest float rounds up to bf16 infinity; 65520 is fp16's tie
      // to infinity, 65519 stays 65504.
      {std::numeric_limits<float>::max(), 0x7f80, 0x7c00},
      {65520.0f, 0x4780, 0x7c00},
      {65519.0f, 0x4780, 0x7bff},
      // Smallest normal float, float denormals (bf16: flushed to a signed
      // zero, as vcvtneps2bf16 does).
      {0x1p-126f, 0x0080, 0x0000},
      {floatOf(0x00000001), 0x0000, 0x0000},
      {floatOf(0x807fffff), 0x8000, 0x8000},
      // fp16 subnormals: 2^-24 is the smallest, 2^-25 ties to zero,
      // 1.5 2^-25 rounds up to it.
      {0x1p-24f, 0x3380, 0x0001},
      {0x1p-25f, 0x3300, 0x0000},
      {0x1.8p-25f, 0x3340, 0x0001},
      {0x1p-14f, 0x3880, 0x0400},
  };
  EachIsa isas;
  isas.run([&](HalfIsa isa) {
    for (const Case &c : cases) {
      Bf16 b;
      Fp16 h;
      cast(&c.in, DType::F32, &b, DType::BF16, 1);
      cast(&c.in, DType::F32, &h, DType::F16, 1);
      EXPECT_EQ(b.bits, c.bf16) << std::hexfloat << c.in << " isa " << int(isa);
      EXPECT_EQ(h.bits, c.f16) << std::hexfloat << c.in << " isa " << int(isa);
    }
    // A signaling NaN becomes a quiet NaN, never infinity.
    const float snan = floatOf(0x7f800001);
    Bf16 b;
    Fp16 h;
    cast(&snan, DType::F32, &b, DType::BF16, 1);
    cast(&snan, DType::F32, &h, DType::F16, 1);
    EXPECT_EQ(b.bits, 0x7fc0);
    EXPECT_EQ(h.bits, 0x7e00);
  });
}

TEST(HalfConvert, PathNames) {
  const std::string path = bf16Path();
  const HalfIsa isa = halfIsa();
  EXPECT_EQ(path, isa == HalfIsa::Avx512Bf16 ? "avx512bf16"
                  : isa == HalfIsa::Avx512F  ? "avx512f"
                                             : "portable");
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512bf16") && !std::getenv("DSRT_HALF_ISA")) {
    EXPECT_EQ(path, "avx512bf16");
  }
  EachIsa restore;
  EXPECT_EQ(setHalfIsa(HalfIsa::Portable), HalfIsa::Portable);
  EXPECT_STREQ(bf16Path(), "portable");
  const std::string gemm = bf16GemmPath();
  EXPECT_FALSE(gemm.empty());
  // oneDNN's own ISA cap (DNNL_MAX_CPU_ISA, or its newer spelling
  // ONEDNN_MAX_CPU_ISA) may leave only its reference kernel, and then the
  // float fallback is right.
  if (__builtin_cpu_supports("avx512bf16") && !std::getenv("DNNL_MAX_CPU_ISA") &&
      !std::getenv("ONEDNN_MAX_CPU_ISA")) {
    EXPECT_EQ(gemm.rfind("onednn ", 0), 0u) << gemm;
  } else {
    EXPECT_TRUE(gemm.rfind("onednn ", 0) == 0 ||
                gemm == "fp32 gemm on widened operands")
        << gemm;
  }
}

//===--- cast between all dtypes ------------------------------------------===//

TEST(HalfCast, WideSourcesRoundOnce) {
  // 1 + 2^-8 + 2^-30 is just above bf16's tie: through a float (which
  // rounds it to the tie 1 + 2^-8) it would go down to 1, directly up.
  const double d[] = {1.0 + 0x1p-8 + 0x1p-30,
                      -(1.0 + 0x1p-8 + 0x1p-30),
                      1.0 + 0x1p-8,
                      1e300,
                      -1e-300,
                      std::nan("")};
  Bf16 b[6];
  Fp16 h[6];
  cast(d, DType::F64, b, DType::BF16, 6);
  cast(d, DType::F64, h, DType::F16, 6);
  const uint16_t wantB[] = {0x3f81, 0xbf81, 0x3f80, 0x7f80, 0x8000};
  const uint16_t wantH[] = {0x3c04, 0xbc04, 0x3c04, 0x7c00, 0x8000};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(b[i].bits, wantB[i]) << i;
    EXPECT_EQ(h[i].bits, wantH[i]) << i;
  }
  EXPECT_TRUE(std::isnan(widen(std::vector<Bf16>{b[5]})[0]));
  EXPECT_TRUE(std::isnan(widen(std::vector<Fp16>{h[5]})[0]));

  // Integers: 257 ties between 256 and 258 (even: 256); 259 -> 260;
  // 2049 ties in fp16 (-> 2048).
  const int64_t i64[] = {257, 259, -3, 2049, 0};
  Bf16 bi[5];
  Fp16 hi[5];
  cast(i64, DType::I64, bi, DType::BF16, 5);
  cast(i64, DType::I64, hi, DType::F16, 5);
  auto bv = widen(std::vector<Bf16>(bi, bi + 5));
  auto hv = widen(std::vector<Fp16>(hi, hi + 5));
  EXPECT_EQ(bv, (std::vector<float>{256, 260, -3, 2048, 0}));
  EXPECT_EQ(hv, (std::vector<float>{257, 259, -3, 2048, 0}));
  const int32_t i32[] = {257, -259};
  cast(i32, DType::I32, bi, DType::BF16, 2);
  EXPECT_EQ(widen(std::vector<Bf16>(bi, bi + 2)),
            (std::vector<float>{256, -260}));
  const uint8_t bools[] = {0, 1};
  cast(bools, DType::Bool, bi, DType::BF16, 2);
  EXPECT_EQ(bi[0].bits, 0x0000);
  EXPECT_EQ(bi[1].bits, 0x3f80);
}

TEST(HalfCast, NarrowSourcesGoThroughTheirExactValue) {
  const auto src =
      narrowTo<Bf16>({-2.5f, -0.0f, 0.0f, 3.75f, 1e30f, std::nanf("")});
  const int64_t n = int64_t(src.size());
  std::vector<int64_t> i64(n);
  std::vector<int32_t> i32(n);
  std::vector<uint8_t> b(n);
  std::vector<double> f64(n);
  cast(src.data(), DType::BF16, i64.data(), DType::I64, 4);
  cast(src.data(), DType::BF16, i32.data(), DType::I32, 4);
  cast(src.data(), DType::BF16, b.data(), DType::Bool, n);
  cast(src.data(), DType::BF16, f64.data(), DType::F64, n);
  EXPECT_EQ(i64[0], -2); // truncation toward zero
  EXPECT_EQ(i64[3], 3);
  EXPECT_EQ(i32[0], -2);
  EXPECT_EQ(b, (std::vector<uint8_t>{1, 0, 0, 1, 1, 1})); // NaN is true
  EXPECT_EQ(f64[4], double(widen(src)[4]));
  EXPECT_TRUE(std::signbit(f64[1]));

  // bf16 <-> fp16: one rounding of the exact value.
  const auto h = narrowTo<Fp16>({1.0f + 0x3p-10f, 65504.0f, 0x1p-24f});
  std::vector<Bf16> hb(3);
  cast(h.data(), DType::F16, hb.data(), DType::BF16, 3);
  EXPECT_EQ(widen(hb), (std::vector<float>{1.0f, 65536.0f, 0x1p-24f}));
  const auto bb = narrowTo<Bf16>({1e10f, 0x1p-30f, 3.0f});
  std::vector<Fp16> bh(3);
  cast(bb.data(), DType::BF16, bh.data(), DType::F16, 3);
  EXPECT_EQ(widen(bh),
            (std::vector<float>{std::numeric_limits<float>::infinity(), 0, 3}));
}

TEST(HalfCast, SameTypeIsACopy) {
  // A bf16 denormal (from a file, never produced by rounding) survives.
  std::vector<Bf16> x = {{0x0001}, {0x7f81}, {0x3f80}}, y(3);
  cast(x.data(), DType::BF16, y.data(), DType::BF16, 3);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(y[i].bits, x[i].bits);
}

TEST(HalfCast, LargeThreaded) {
  ThreadCount two(2);
  const int64_t n = 1 << 20 | 5;
  auto x = uniform(n, 77, -100, 100);
  auto b = narrowTo<Bf16>(x);
  auto h = narrowTo<Fp16>(x);
  for (int64_t i = 0; i < n; i += 997) {
    ASSERT_EQ(double(widen(std::vector<Bf16>{b[i]})[0]), bf16Ref(x[i]));
    ASSERT_EQ(double(widen(std::vector<Fp16>{h[i]})[0]), f16Ref(x[i]));
  }
  EXPECT_TRUE(near(widen(b), toDouble(x), Fmt<Bf16>::u, 0));
  EXPECT_TRUE(near(widen(h), toDouble(x), Fmt<Fp16>::u, 0));
}

//===--- matmul
//------------------------------------------------------------===//

struct MmCase {
  Shape a;
  bool transA;
  Shape b;
  bool transB;
  Shape c;
};

std::vector<MmCase> mmCases() {
  auto mk = [](int64_t r, int64_t c, bool t) {
    return t ? shape({c, r}) : shape({r, c});
  };
  std::vector<MmCase> cs;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      cs.push_back({mk(33, 70, ta), ta, mk(70, 129, tb), tb, shape({33, 129})});
      cs.push_back({mk(1, 33, ta), ta, mk(33, 1, tb), tb, shape({1, 1})});
      // Rows enough for tasks of rows (and a short last one), A transposed
      // or not (a weight gradient x^T dy, a product x W).
      cs.push_back({mk(600, 70, ta), ta, mk(70, 129, tb), tb, shape({600, 129})});
      // Batch broadcast both ways: [2,1] x [1,3].
      cs.push_back({ta ? shape({2, 1, 17, 33}) : shape({2, 1, 33, 17}), ta,
                    tb ? shape({1, 3, 9, 17}) : shape({1, 3, 17, 9}), tb,
                    shape({2, 3, 33, 9})});
    }
  // x @ W and x @ W^T with W shared by the batch (one folded GEMM).
  cs.push_back({shape({2, 3, 33, 65}), false, shape({65, 7}), false,
                shape({2, 3, 33, 7})});
  cs.push_back({shape({3, 200, 65}), false, shape({47, 65}), true, shape({3, 200, 47})});
  cs.push_back(
      {shape({3, 33, 65}), false, shape({1, 7, 65}), true, shape({3, 33, 7})});
  cs.push_back(
      {shape({3, 65, 33}), true, shape({65, 7}), false, shape({3, 33, 7})});
  // A broadcast over B's batch.
  cs.push_back(
      {shape({33, 17}), false, shape({4, 17, 9}), false, shape({4, 33, 9})});
  // Attention-like: many heads, and a rank-5 batch.
  cs.push_back({shape({2, 12, 33, 16}), false, shape({2, 12, 33, 16}), true,
                shape({2, 12, 33, 33})});
  cs.push_back({shape({2, 2, 3, 9, 8}), false, shape({2, 1, 3, 8, 5}), false,
                shape({2, 2, 3, 9, 5})});
  // Long K: float accumulation matters.
  cs.push_back(
      {shape({16, 4096}), false, shape({4096, 24}), false, shape({16, 24})});
  return cs;
}

std::vector<double> refMatmul(const MmCase &k, const std::vector<double> &A,
                              const std::vector<double> &B,
                              const std::vector<double> &C0, double alpha,
                              double beta) {
  const int cb = k.c.rank - 2;
  const int64_t M = k.c.dims[cb], N = k.c.dims[cb + 1];
  const int64_t K = k.transA ? k.a.dims[k.a.rank - 2] : k.a.dims[k.a.rank - 1];
  const int64_t aCols = k.a.dims[k.a.rank - 1], bCols = k.b.dims[k.b.rank - 1];
  const int64_t aMat = k.a.dims[k.a.rank - 2] * aCols;
  const int64_t bMat = k.b.dims[k.b.rank - 2] * bCols;
  Shape batch, aBatch, bBatch;
  batch.rank = cb;
  aBatch.rank = k.a.rank - 2;
  bBatch.rank = k.b.rank - 2;
  for (int d = 0; d < cb; ++d)
    batch.dims[d] = k.c.dims[d];
  for (int d = 0; d < aBatch.rank; ++d)
    aBatch.dims[d] = k.a.dims[d];
  for (int d = 0; d < bBatch.rank; ++d)
    bBatch.dims[d] = k.b.dims[d];
  std::vector<double> C(C0.size());
  for (int64_t t = 0; t < batch.numel(); ++t) {
    auto idx = unravel(t, batch);
    const double *a = A.data() + broadcastIndex(idx, aBatch) * aMat;
    const double *b = B.data() + broadcastIndex(idx, bBatch) * bMat;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t kk = 0; kk < K; ++kk)
          s += (k.transA ? a[kk * aCols + m] : a[m * aCols + kk]) *
               (k.transB ? b[n * bCols + kk] : b[kk * bCols + n]);
        const int64_t o = (t * M + m) * N + n;
        C[o] = alpha * s + beta * C0[o];
      }
  }
  return C;
}

template <class T> class HalfMatmul : public ::testing::Test {};
using HalfTypes = ::testing::Types<Bf16, Fp16>;
TYPED_TEST_SUITE(HalfMatmul, HalfTypes, HalfNames);

/// Tolerance. The operands are 16-bit values, exact in float and double, so
/// the float64 reference sees the kernel's inputs; what remains is float
/// accumulation over K terms in [-1, 1] (absolute 2^-24 K (|alpha| + 1),
/// rounded up to 1e-6 K as in the float matmul's test) and, for a 16-bit
/// C, one rounding of the result (relative u: 2^-8 bf16, 2^-11 fp16).
template <class T, class TC>
::testing::AssertionResult checkMatmul(float alpha, float beta) {
  unsigned seed = 9000;
  const double u = std::is_same_v<TC, float> ? 0.0 : Fmt<T>::u;
  for (const MmCase &k : mmCases()) {
    auto A = uniformIn<T>(k.a.numel(), seed++);
    auto B = uniformIn<T>(k.b.numel(), seed++);
    std::vector<TC> C;
    std::vector<double> C0;
    if constexpr (std::is_same_v<TC, float>) {
      C = uniform(k.c.numel(), seed++);
      C0 = toDouble(C);
    } else {
      C = uniformIn<TC>(k.c.numel(), seed++);
      C0 = widenD(C);
    }
    const auto ref = refMatmul(k, widenD(A), widenD(B), C0, alpha, beta);
    matmul(A.data(), k.a, k.transA, B.data(), k.b, k.transB, C.data(), k.c,
           alpha, beta);
    const int64_t K =
        k.transA ? k.a.dims[k.a.rank - 2] : k.a.dims[k.a.rank - 1];
    auto r = near(C, ref, 1e-5 + u,
                  1e-6 * double(K) * (std::fabs(alpha) + 1) + Fmt<T>::tiny);
    if (!r)
      return r << " for " << str(k.a) << (k.transA ? "^T" : "") << " x "
               << str(k.b) << (k.transB ? "^T" : "") << " -> " << str(k.c)
               << " alpha " << alpha << " beta " << beta;
  }
  return ::testing::AssertionSuccess();
}

TYPED_TEST(HalfMatmul, FloatOutput) {
  using T = TypeParam;
  EXPECT_TRUE((checkMatmul<T, float>(1.0f, 0.0f)));
  // Accumulating into a float gradient (beta 1), attention scaling.
  EXPECT_TRUE((checkMatmul<T, float>(1.0f, 1.0f)));
  EXPECT_TRUE((checkMatmul<T, float>(0.125f, -2.0f)));
}

TYPED_TEST(HalfMatmul, SameTypeOutput) {
  using T = TypeParam;
  EXPECT_TRUE((checkMatmul<T, T>(1.0f, 0.0f)));
  EXPECT_TRUE((checkMatmul<T, T>(0.5f, 1.0f)));
}

TYPED_TEST(HalfMatmul, SingleThreadedAndRepeated) {
  using T = TypeParam;
  // A second call with the same shape reuses the cached primitive and must
  // give the same bits; one thread gets primitives of its own.
  const MmCase k = mmCases()[0];
  auto A = uniformIn<T>(k.a.numel(), 1), B = uniformIn<T>(k.b.numel(), 2);
  std::vector<float> c1(k.c.numel()), c2(k.c.numel()), c3(k.c.numel());
  matmul(A.data(), k.a, k.transA, B.data(), k.b, k.transB, c1.data(), k.c);
  matmul(A.data(), k.a, k.transA, B.data(), k.b, k.transB, c2.data(), k.c);
  EXPECT_TRUE(bitEqual(c1, c2));
  ThreadCount one(1);
  matmul(A.data(), k.a, k.transA, B.data(), k.b, k.transB, c3.data(), k.c);
  EXPECT_TRUE(near(c3, toDouble(c1), 1e-5, 1e-6 * 70));
  EXPECT_TRUE((checkMatmul<T, T>(1.0f, 1.0f)));
}

TYPED_TEST(HalfMatmul, BetaZeroIgnoresNaNInOutputAndEmptyK) {
  using T = TypeParam;
  auto A = uniformIn<T>(7 * 5, 1), B = uniformIn<T>(5 * 3, 2);
  std::vector<T> C(7 * 3, T{0x7fc0});
  matmul(A.data(), shape({7, 5}), false, B.data(), shape({5, 3}), false,
         C.data(), shape({7, 3}));
  for (float v : widen(C))
    EXPECT_FALSE(std::isnan(v));
  std::vector<float> Cf = {1, 2, 3, 4};
  matmul(A.data(), shape({2, 0}), false, B.data(), shape({0, 2}), false,
         Cf.data(), shape({2, 2}), 1.0f, 0.5f);
  EXPECT_EQ(Cf, (std::vector<float>{0.5f, 1, 1.5f, 2}));
  auto Ch = narrowTo<T>({1, 2, 3, 4});
  matmul(A.data(), shape({2, 0}), false, B.data(), shape({0, 2}), false,
         Ch.data(), shape({2, 2}), 1.0f, 0.0f);
  EXPECT_EQ(widen(Ch), (std::vector<float>{0, 0, 0, 0}));
}

} // namespace
} // namespace dsrt::cpu::test
