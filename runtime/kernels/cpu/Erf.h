//===- Erf.h - a vectorizable erf and the normal CDF of GELU ----*- C++ -*-===//
//
// glibc's erff is a call per element that no loop vectorizes; these are
// branch-free float functions, always inlined, that GCC vectorizes inside
// `omp simd` loops (as detail::expf does). Both rest on
//
//   Phi(-a) = erfc(a / sqrt 2) / 2 = exp(-a^2 / 2) P(a) / Q(a),  a >= 0,
//
// P / Q a rational function of degree 4 / 5 with positive coefficients
// (so Horner's rule is stable), our own minimax fit of
// Phi(-a) exp(a^2 / 2) on [0, 13.27] to 0.27 float ulp (relative) with the
// coefficients rounded to float, P(0) / Q(0) = 1/2 exactly. exp(-a^2 / 2)
// comes from a^2 split exactly into hi + lo, lo folded into the exp's
// reduced argument: the rounding of a^2 alone would cost a^2 2^-25
// relative error (8 ulp at a = 4). The cost is about 23 multiplies or
// FMAs and one division per element, which bounds the kernels' speed.
//
//   * gaussTail(x): q = Phi(-|x|) and e = exp(-x^2 / 2), from x itself
//     (erf(x / sqrt 2) would add the rounding of x / sqrt 2). GELU's
//     Phi(x) is q for x < 0 and 1 - q otherwise: relatively accurate in
//     both tails, where 1 + erf(x / sqrt 2) would cancel for x << 0.
//   * erfFloat(z): z S(z^2) for |z| < 0.75 (S fitted to 0.03 ulp, its
//     constant term 2 / sqrt(pi) carried in two floats), else
//     sign(z) (1 - 2 exp(-z^2) P(a) / Q(a)) with a = sqrt(2) |z|.
//
// Accuracy, measured over all 2^32 float inputs against double erf / erfc
// (test/runtime/kernels/ElementwiseTest.cpp checks a dense sweep), FMA
// build (-march=native here) / SSE2-only x86-64 build: erf within 1.63 /
// 2.06 ulp and 9.7e-8 / 1.23e-7 absolute; Phi(x) within 1.9 / 2.0 ulp for
// x >= 0 and 5.9 / 7.4 ulp (relative) for x < 0 down to its underflow at
// x = -13; GELU's x Phi(x) within 6.6 / 7.9 ulp.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_KERNELS_CPU_ERF_H
#define DSRT_KERNELS_CPU_ERF_H

#include "runtime/kernels/cpu/Internal.h"

#include <cmath>
#include <cstdint>

namespace dsrt::cpu::detail {

#define DSRT_ERF_INLINE inline __attribute__((always_inline))

/// Phi(-a) exp(a^2 / 2) ~= P(a) / Q(a) on [0, kGaussTailClamp]; Q monic
/// (its first Horner step is an add).
DSRT_ERF_INLINE float gaussTailRatio(float a) {
  float p = 0.39894798398017883f;
  p = p * a + 3.968661308288574f;
  p = p * a + 17.99837303161621f;
  p = p * a + 43.25595474243164f;
  p = p * a + 49.648983001708984f;
  float q = a + 9.948695182800293f;
  q = q * a + 46.0987663269043f;
  q = q * a + 118.5889663696289f;
  q = q * a + 165.74024963378906f;
  q = q * a + 99.29796600341797f;
  return p / q;
}

/// min(|x|, c) for c >= 0, NaN giving c: on the bits, where non-negative
/// floats (and NaN above inf) order as integers. One integer min; a float
/// select there makes GCC mask every later instruction instead.
DSRT_ERF_INLINE float absClamped(float x, float c) {
  const int32_t ax = asInt(x) & 0x7fffffff, ac = asInt(c);
  return asFloat(ax < ac ? ax : ac);
}

/// -c a^2 = m + ml exactly (to 2^-48 relative), for a >= 0 finite and
/// c = 1/2 or 1.
DSRT_ERF_INLINE void negScaledSquare(float a, float c, float &m, float &ml) {
#ifdef __FMA__
  const float na = -c * a;
  m = na * a;
  ml = __builtin_fmaf(na, a, -m);
#else
  // a = ah + al with ah's 12 leading bits: ah^2 is exact, and the rest,
  // al (a + ah), is small enough that its rounding does not matter.
  const float ah = asFloat(asInt(a) & int32_t(0xfffff000u));
  const float al = a - ah;
  m = (-c * ah) * ah;
  ml = (-c * al) * (a + ah);
#endif
}

/// exp(m + ml) for m in [-88.05, 0] and |ml| <= ulp(m), 0 where the
/// result would be below 2^-126 by more than a rounding (m < -87.68).
/// Range reduction m = n ln2 + r, |r| <= ln2 / 2, with ml added to r;
/// exp(r) by a degree-6 polynomial (our fit, 0.05 ulp); 2^n from the bits
/// of t, whose low byte holds n + 127 (so n = -127 gives 0).
DSRT_ERF_INLINE float expSplit(float m, float ml) {
  const float magic = 12583039.0f; // 1.5 * 2^23 + 127
  const float t = m * 1.44269504088896341f + magic;
  const float n = t - magic;
  float r = m - n * 0.693359375f; // exact
  r = r + n * 2.12194440e-4f;     // ln 2 = 0.693359375 - 2.12194440e-4
  r = r + ml;
  float p = 0.0013820759486407042f;
  p = p * r + 0.008368678390979767f;
  p = p * r + 0.04166826605796814f;
  p = p * r + 0.1666652113199234f;
  p = p * r + 0.4999999403953552f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p * asFloat(int32_t(uint32_t(asInt(t)) << 23));
}

/// |x| is clamped here: exp(-a^2 / 2) is 0 (n = -127) from 13.2426 on,
/// where Phi(-a) < 2^-130, and n stays >= -127 up to 13.2947.
constexpr float kGaussTailClamp = 13.27f;

/// q = Phi(-|x|) and e = exp(-x^2 / 2); both 0 for |x| >= 13.2426 and for
/// NaN (callers multiply by x, which keeps the NaN).
DSRT_ERF_INLINE void gaussTail(float x, float &q, float &e) {
  const float a = absClamped(x, kGaussTailClamp);
  float m, ml;
  negScaledSquare(a, 0.5f, m, ml);
  e = expSplit(m, ml);
  q = e * gaussTailRatio(a);
}

/// erf(z) (named apart from ::erf); erf(+-0) = +-0, erf(+-inf) = +-1,
/// NaN stays NaN.
DSRT_ERF_INLINE float erfFloat(float z) {
  const float az = std::fabs(z);
  // erfc(4) < 2^-25: erf rounds to 1 from there on.
  const float a = absClamped(z, 4.0f);
  float m, ml;
  negScaledSquare(a, 1.0f, m, ml);
  const float erfc =
      2.0f * expSplit(m, ml) * gaussTailRatio(a * 1.41421353816986084f);
  const float tail = 1.0f - erfc;
  // erf(z) = z (c0 + w S1(w)), w = z^2, c0 = 2 / sqrt(pi) = hi + lo.
  const float w = z * z;
  float s = -0.0006787645979784429f;
  s = s * w + 0.005120184738188982f;
  s = s * w + -0.026837853714823723f;
  s = s * w + 0.11283453553915024f;
  s = s * w + -0.3761262595653534f;
  s = s * w + 6.0573906e-08f;
  // c0's low part is positive: z s keeps the sign of a zero z.
  const float small = z * 1.1283791065216064f + z * s;
  // NaN takes the small branch, which keeps it.
  return az >= 0.75f ? std::copysign(tail, z) : small;
}

#undef DSRT_ERF_INLINE

} // namespace dsrt::cpu::detail

#endif // DSRT_KERNELS_CPU_ERF_H
