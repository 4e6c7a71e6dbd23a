//===- TestUtil.h - helpers for the CPU kernel tests ------------*- C++ -*-===//
//
// Random inputs with fixed seeds, numpy-style broadcast indexing for the
// float64 reference implementations, and tolerance checks that report the
// first mismatching element.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_TEST_KERNELS_TESTUTIL_H
#define DSRT_TEST_KERNELS_TESTUTIL_H

#include "runtime/kernels/cpu/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <algorithm>
#include <initializer_list>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace dsrt::cpu::test {

inline Shape shape(std::initializer_list<int64_t> dims) {
  Shape s;
  for (int64_t d : dims)
    s.dims[s.rank++] = d;
  return s;
}

inline std::string str(const Shape &s) {
  std::ostringstream os;
  os << "[";
  for (int i = 0; i < s.rank; ++i)
    os << (i ? "," : "") << s.dims[i];
  os << "]";
  return os.str();
}

/// Uniform floats in [lo, hi).
inline std::vector<float> uniform(int64_t n, unsigned seed, float lo = -1.0f,
                                  float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

inline std::vector<double> toDouble(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}

/// Row-major multi-index of flat index i in s.
inline std::vector<int64_t> unravel(int64_t i, const Shape &s) {
  std::vector<int64_t> idx(s.rank);
  for (int d = s.rank - 1; d >= 0; --d) {
    idx[d] = i % s.dims[d];
    i /= s.dims[d];
  }
  return idx;
}

/// Flat index into `in` of output multi-index `idx` under broadcasting.
inline int64_t broadcastIndex(const std::vector<int64_t> &idx,
                              const Shape &in) {
  int64_t flat = 0;
  const int shift = int(idx.size()) - in.rank;
  for (int d = 0; d < in.rank; ++d)
    flat = flat * in.dims[d] + (in.dims[d] == 1 ? 0 : idx[d + shift]);
  return flat;
}

/// |got - want| <= atol + rtol * |want| elementwise (NaN matches NaN, inf
/// matches the same inf).
inline ::testing::AssertionResult near(const float *got, const double *want,
                                       int64_t n, double rtol, double atol) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = got[i], w = want[i];
    if (std::isnan(w) && std::isnan(g))
      continue;
    if (std::isinf(w) && g == w)
      continue;
    if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w)))
      return ::testing::AssertionFailure()
             << "element " << i << " of " << n << ": got " << g << ", want "
             << w << " (rtol " << rtol << ", atol " << atol << ")";
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult near(const std::vector<float> &got,
                                       const std::vector<double> &want,
                                       double rtol, double atol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << "size " << got.size() << " vs " << want.size();
  return near(got.data(), want.data(), int64_t(got.size()), rtol, atol);
}

template <class T>
::testing::AssertionResult bitEqual(const std::vector<T> &a,
                                    const std::vector<T> &b) {
  if (a.size() != b.size() ||
      std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) != 0)
    return ::testing::AssertionFailure() << "results differ bitwise";
  return ::testing::AssertionSuccess();
}

/// Runs the kernels with `n` threads for the lifetime of the object.
class ThreadCount {
public:
  explicit ThreadCount(int n) : saved(numThreads()) { setNumThreads(n); }
  ~ThreadCount() { setNumThreads(saved); }

private:
  int saved;
};

//===--- 16-bit floats ----------------------------------------------------===//

/// Rounding facts of a storage format: u is the unit roundoff (the largest
/// relative error of one rounding to nearest: 2^-p for p significand bits),
/// tiny the largest absolute error below the normal range (bf16 flushes
/// float denormals to zero: 2^-126; fp16 keeps subnormals: half of 2^-24).
template <class T> struct Fmt;
template <> struct Fmt<Bf16> {
  static constexpr double u = 0x1p-8, tiny = 0x1p-126;
  static constexpr DType dtype = DType::BF16;
};
template <> struct Fmt<Fp16> {
  static constexpr double u = 0x1p-11, tiny = 0x1p-25;
  static constexpr DType dtype = DType::F16;
};

template <class T> std::vector<T> narrowTo(const std::vector<float> &x) {
  std::vector<T> y(x.size());
  cast(x.data(), DType::F32, y.data(), Fmt<T>::dtype, int64_t(x.size()));
  return y;
}
template <class T> std::vector<float> widen(const std::vector<T> &x) {
  std::vector<float> y(x.size());
  cast(x.data(), Fmt<T>::dtype, y.data(), DType::F32, int64_t(x.size()));
  return y;
}
template <class T> std::vector<double> widenD(const std::vector<T> &x) {
  return toDouble(widen(x));
}
/// Uniform values already representable in T (so references see exactly
/// the kernel's inputs).
template <class T>
std::vector<T> uniformIn(int64_t n, unsigned seed, float lo = -1.0f,
                         float hi = 1.0f) {
  return narrowTo<T>(uniform(n, seed, lo, hi));
}
template <class T>
::testing::AssertionResult near(const std::vector<T> &got,
                                const std::vector<double> &want, double rtol,
                                double atol) {
  return near(widen(got), want, rtol, atol);
}

struct HalfNames {
  template <class T> static std::string GetName(int) {
    return std::is_same_v<T, Bf16> ? "Bf16" : "Fp16";
  }
};

/// A softmax's shape: `n` elements reduced, between `outer` and `inner`.
struct Dims3 {
  int64_t outer, n, inner;
};

/// Softmax (or log-softmax) of `x` over the middle dimension of d, in
/// double: the reference the float and 16-bit kernels are checked against.
inline std::vector<double> refSoftmax(const std::vector<double> &x, const Dims3 &d, bool log) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < d.outer; ++o)
    for (int64_t j = 0; j < d.inner; ++j) {
      auto at = [&](int64_t i) { return (o * d.n + i) * d.inner + j; };
      double m = -std::numeric_limits<double>::infinity(), s = 0;
      for (int64_t i = 0; i < d.n; ++i)
        m = std::max(m, x[at(i)]);
      for (int64_t i = 0; i < d.n; ++i)
        s += std::exp(x[at(i)] - m);
      for (int64_t i = 0; i < d.n; ++i)
        y[at(i)] = log ? x[at(i)] - m - std::log(s) : std::exp(x[at(i)] - m) / s;
    }
  return y;
}

} // namespace dsrt::cpu::test

#endif // DSRT_TEST_KERNELS_TESTUTIL_H
