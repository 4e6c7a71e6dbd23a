//===- Convert.cpp - vectorized float <-> bf16 / fp16 conversions ---------===//
//
// Three paths, all giving the bits of Half.h's scalar functions:
//   * avx512bf16: vcvtne2ps2bf16 (two float vectors to one bf16 vector);
//   * avx512f: the same rounding on integers (add 0x7fff + lsb, fix NaN and
//     denormals with masks), vcvtps2ph / vcvtph2ps for fp16;
//   * portable: Half.h's functions, vectorized for the build target.
// The AVX-512 functions carry target attributes, so a runtime compiled
// without -march=native still has them and uses them where the CPU does.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Half.h"

#include <immintrin.h>

#include <atomic>
#include <cstdlib>

namespace dsrt::cpu {
namespace detail {
namespace {

#define DSRT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
#define DSRT_AVX512BF16                                                        \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

void toBf16Portable(const float *__restrict x, uint16_t *__restrict y,
                    int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = bf16Bits(x[i]);
}
void fromBf16Portable(const uint16_t *__restrict x, float *__restrict y,
                      int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = bf16Value(x[i]);
}
void toF16Portable(const float *__restrict x, uint16_t *__restrict y,
                   int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = f16Bits(x[i]);
}
void fromF16Portable(const uint16_t *__restrict x, float *__restrict y,
                     int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = f16Value(x[i]);
}

DSRT_AVX512 inline __m256i bf16Rne512(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb =
      _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(
      _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb),
      16);
  const __m512i hi = _mm512_srli_epi32(u, 16);
  const __mmask16 denormal =
      _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000));
  r = _mm512_mask_and_epi32(r, denormal, hi, _mm512_set1_epi32(0x8000));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(
      _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
      _mm512_set1_epi32(0x7f800000));
  r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(r);
}

DSRT_AVX512 void toBf16Avx512(const float *x, uint16_t *y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(y + i),
                        bf16Rne512(_mm512_loadu_ps(x + i)));
  toBf16Portable(x + i, y + i, n - i);
}

DSRT_AVX512 void fromBf16Avx512(const uint16_t *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i h = _mm512_cvtepu16_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x + i)));
    _mm512_storeu_ps(y + i, _mm512_castsi512_ps(_mm512_slli_epi32(h, 16)));
  }
  fromBf16Portable(x + i, y + i, n - i);
}

DSRT_AVX512BF16 void toBf16Avx512Bf16(const float *x, uint16_t *y, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    // The second operand fills the low half of the result.
    const __m512bh r = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16),
                                           _mm512_loadu_ps(x + i));
    _mm512_storeu_si512(y + i, reinterpret_cast<const __m512i &>(r));
  }
  if (i + 16 <= n) {
    const __m256bh r = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(y + i),
                        reinterpret_cast<const __m256i &>(r));
    i += 16;
  }
  toBf16Portable(x + i, y + i, n - i);
}

DSRT_AVX512 void toF16Avx512(const float *x, uint16_t *y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(
        reinterpret_cast<__m256i *>(y + i),
        _mm512_cvtps_ph(_mm512_loadu_ps(x + i),
                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  toF16Portable(x + i, y + i, n - i);
}

DSRT_AVX512 void fromF16Avx512(const uint16_t *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256(
                                reinterpret_cast<const __m256i *>(x + i))));
  fromF16Portable(x + i, y + i, n - i);
}

HalfIsa cpuIsa() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f") ||
      !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl"))
    return HalfIsa::Portable;
  return __builtin_cpu_supports("avx512bf16") ? HalfIsa::Avx512Bf16
                                              : HalfIsa::Avx512F;
}

/// The CPU's best set, lowered by DSRT_HALF_ISA=portable|avx512f.
HalfIsa initialIsa() {
  HalfIsa isa = cpuIsa();
  if (const char *v = std::getenv("DSRT_HALF_ISA")) {
    if (std::strcmp(v, "portable") == 0)
      isa = HalfIsa::Portable;
    else if (std::strcmp(v, "avx512f") == 0 && isa > HalfIsa::Avx512F)
      isa = HalfIsa::Avx512F;
  }
  return isa;
}

std::atomic<HalfIsa> &currentIsa() {
  static std::atomic<HalfIsa> isa{initialIsa()};
  return isa;
}

/// The storage words (no member access: an empty tensor may be null).
template <class T> uint16_t *words(T *p) {
  return reinterpret_cast<uint16_t *>(p);
}
template <class T> const uint16_t *words(const T *p) {
  return reinterpret_cast<const uint16_t *>(p);
}

} // namespace

void convert(const float *x, Bf16 *y, int64_t n) {
  uint16_t *out = words(y);
  switch (halfIsa()) {
  case HalfIsa::Avx512Bf16:
    return toBf16Avx512Bf16(x, out, n);
  case HalfIsa::Avx512F:
    return toBf16Avx512(x, out, n);
  case HalfIsa::Portable:
    return toBf16Portable(x, out, n);
  }
}

void convert(const Bf16 *x, float *y, int64_t n) {
  if (halfIsa() == HalfIsa::Portable)
    return fromBf16Portable(words(x), y, n);
  fromBf16Avx512(words(x), y, n);
}

void convert(const float *x, Fp16 *y, int64_t n) {
  if (halfIsa() == HalfIsa::Portable)
    return toF16Portable(x, words(y), n);
  toF16Avx512(x, words(y), n);
}

void convert(const Fp16 *x, float *y, int64_t n) {
  if (halfIsa() == HalfIsa::Portable)
    return fromF16Portable(words(x), y, n);
  fromF16Avx512(words(x), y, n);
}

} // namespace detail

HalfIsa halfIsa() {
  return detail::currentIsa().load(std::memory_order_relaxed);
}

HalfIsa setHalfIsa(HalfIsa isa) {
  const HalfIsa use = std::min(isa, detail::cpuIsa());
  detail::currentIsa().store(use, std::memory_order_relaxed);
  return use;
}

const char *bf16Path() {
  switch (halfIsa()) {
  case HalfIsa::Avx512Bf16:
    return "avx512bf16";
  case HalfIsa::Avx512F:
    return "avx512f";
  case HalfIsa::Portable:
    break;
  }
  return "portable";
}

} // namespace dsrt::cpu
