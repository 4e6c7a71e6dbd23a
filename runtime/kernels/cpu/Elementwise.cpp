//===- Elementwise.cpp - broadcast binary ops, unary ops, casts -----------===//
//
// Broadcasting goes through detail::Broadcast, which reduces every case to
// rows whose operands have inner stride 0 or 1; the row loops below are
// specialized on those strides so that they vectorize.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Internal.h"

#include <cmath>
#include <type_traits>

namespace dsrt::cpu {
using namespace detail;

namespace {

/// o[i] = op(a[i*sa], b[i*sb]) for sa, sb in {0, 1}.
template <class T, class U, class Op>
void binaryRow(const T *__restrict a, int64_t sa, const T *__restrict b,
               int64_t sb, U *__restrict o, int64_t n, Op op) {
  if (sa && sb) {
    for (int64_t i = 0; i < n; ++i)
      o[i] = op(a[i], b[i]);
  } else if (sa) {
    const T bv = *b;
    for (int64_t i = 0; i < n; ++i)
      o[i] = op(a[i], bv);
  } else if (sb) {
    const T av = *a;
    for (int64_t i = 0; i < n; ++i)
      o[i] = op(av, b[i]);
  } else {
    const U v = op(*a, *b);
    for (int64_t i = 0; i < n; ++i)
      o[i] = v;
  }
}

template <class T, class U, class Op>
void broadcastBinary(const T *a, const Shape &as, const T *b, const Shape &bs,
                     U *out, const Shape &os, Op op) {
  if (os.numel() == 0)
    return;
  const Shape *in[2] = {&as, &bs};
  Broadcast<2> bc(os, in);
  bc.forEachRow(
      [&](int64_t o, const int64_t *off, const int64_t *st, int64_t n) {
        binaryRow(a + off[0], st[0], b + off[1], st[1], out + o, n, op);
      });
}

template <class T>
void compareT(Cmp op, const T *a, const Shape &as, const T *b, const Shape &bs,
              uint8_t *out, const Shape &os) {
  switch (op) {
  case Cmp::Eq:
    return broadcastBinary(a, as, b, bs, out, os,
                           [](T x, T y) -> uint8_t { return x == y; });
  case Cmp::Ne:
    return broadcastBinary(a, as, b, bs, out, os,
                           [](T x, T y) -> uint8_t { return x != y; });
  case Cmp::Lt:
    return broadcastBinary(a, as, b, bs, out, os,
                           [](T x, T y) -> uint8_t { return x < y; });
  case Cmp::Le:
    return broadcastBinary(a, as, b, bs, out, os,
                           [](T x, T y) -> uint8_t { return x <= y; });
  case Cmp::Gt:
    return broadcastBinary(a, as, b, bs, out, os,
                           [](T x, T y) -> uint8_t { return x > y; });
  case Cmp::Ge:
    return broadcastBinary(a, as, b, bs, out, os,
                           [](T x, T y) -> uint8_t { return x >= y; });
  }
}

/// y[i] = f(x[i]); `omp simd` because y may alias x (in-place is fine
/// lane-wise, but would defeat the compiler's own overlap check).
template <class F> void unaryOp(const float *x, float *y, int64_t n, F f) {
  parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
#pragma omp simd
    for (int64_t i = b; i < e; ++i)
      y[i] = f(x[i]);
  });
}

/// Per-element work of std::erf / std::tanh is high enough to thread
/// smaller tensors.
constexpr int64_t kScalarCallGrain = kGrain / 8;

template <class F> void unaryCallOp(const float *x, float *y, int64_t n, F f) {
  parallelFor(n, kScalarCallGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      y[i] = f(x[i]);
  });
}

constexpr float kSqrtHalf = 0.70710678118654752f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kGeluC = 0.044715f;

/// 0.5 (1 + tanh(u)) == 1 / (1 + exp(-2u)): no cancellation, no tanh call.
inline float geluTanh(float x) {
  float u = kSqrt2OverPi * (x + kGeluC * x * x * x);
  return x / (1.0f + detail::expf(-2.0f * u));
}

template <class From, class To> void castLoop(const From *x, To *y, int64_t n) {
  parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    // Local copies: a byte store could alias the closure's members.
    const From *__restrict src = x;
    To *__restrict dst = y;
    for (int64_t i = b; i < e; ++i) {
      if constexpr (std::is_same_v<To, uint8_t>)
        dst[i] = src[i] != From(0);
      else
        dst[i] = static_cast<To>(src[i]);
    }
  });
}

template <class From>
void castFrom(const From *x, void *y, DType to, int64_t n) {
  switch (to) {
  case DType::F32:
    return castLoop(x, static_cast<float *>(y), n);
  case DType::F64:
    return castLoop(x, static_cast<double *>(y), n);
  case DType::I64:
    return castLoop(x, static_cast<int64_t *>(y), n);
  case DType::I32:
    return castLoop(x, static_cast<int32_t *>(y), n);
  case DType::Bool:
    return castLoop(x, static_cast<uint8_t *>(y), n);
  }
}

} // namespace

void binary(Binary op, const float *a, const Shape &as, const float *b,
            const Shape &bs, float *out, const Shape &os) {
  switch (op) {
  case Binary::Add:
    return broadcastBinary(a, as, b, bs, out, os,
                           [](float x, float y) { return x + y; });
  case Binary::Sub:
    return broadcastBinary(a, as, b, bs, out, os,
                           [](float x, float y) { return x - y; });
  case Binary::Mul:
    return broadcastBinary(a, as, b, bs, out, os,
                           [](float x, float y) { return x * y; });
  case Binary::Div:
    return broadcastBinary(a, as, b, bs, out, os,
                           [](float x, float y) { return x / y; });
  case Binary::Pow:
    return broadcastBinary(a, as, b, bs, out, os,
                           [](float x, float y) { return std::pow(x, y); });
  // NaN propagates like torch.maximum / torch.minimum.
  case Binary::Max:
    return broadcastBinary(a, as, b, bs, out, os, [](float x, float y) {
      return (x > y || x != x) ? x : y;
    });
  case Binary::Min:
    return broadcastBinary(a, as, b, bs, out, os, [](float x, float y) {
      return (x < y || x != x) ? x : y;
    });
  }
}

void unary(Unary op, const float *x, float *y, int64_t n) {
  switch (op) {
  case Unary::Neg:
    return unaryOp(x, y, n, [](float v) { return -v; });
  case Unary::Abs:
    return unaryOp(x, y, n, [](float v) { return std::fabs(v); });
  case Unary::Exp:
    return unaryOp(x, y, n, [](float v) { return detail::expf(v); });
  case Unary::Log:
    return unaryCallOp(x, y, n, [](float v) { return std::log(v); });
  case Unary::Sqrt:
    return unaryOp(x, y, n, [](float v) { return std::sqrt(v); });
  case Unary::Rsqrt:
    return unaryOp(x, y, n, [](float v) { return 1.0f / std::sqrt(v); });
  case Unary::Reciprocal:
    return unaryOp(x, y, n, [](float v) { return 1.0f / v; });
  case Unary::Tanh:
    return unaryCallOp(x, y, n, [](float v) { return std::tanh(v); });
  case Unary::Erf:
    return unaryCallOp(x, y, n, [](float v) { return std::erf(v); });
  case Unary::Relu:
    return unaryOp(x, y, n, [](float v) { return v < 0.0f ? 0.0f : v; });
  case Unary::Sigmoid:
    return unaryOp(x, y, n,
                   [](float v) { return 1.0f / (1.0f + detail::expf(-v)); });
  case Unary::GeluErf:
    return unaryCallOp(x, y, n, [](float v) {
      return v * 0.5f * (1.0f + std::erf(v * kSqrtHalf));
    });
  case Unary::GeluTanh:
    return unaryOp(x, y, n, [](float v) { return geluTanh(v); });
  }
}

void geluGrad(bool tanhApprox, const float *x, const float *dy, float *dx,
              int64_t n) {
  if (tanhApprox) {
    // gelu = x s with s = sigmoid(2u): d/dx = s + 2 x u' s (1 - s), and
    // s (1 - s) = e s^2 with e = exp(-2u) avoids the cancellation in 1 - s.
    parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
#pragma omp simd
      for (int64_t i = b; i < e; ++i) {
        float v = x[i];
        float u = kSqrt2OverPi * (v + kGeluC * v * v * v);
        float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluC * v * v);
        float ex = detail::expf(-2.0f * u);
        float s = 1.0f / (1.0f + ex);
        dx[i] = dy[i] * (s + 2.0f * v * du * ex * s * s);
      }
    });
    return;
  }
  parallelFor(n, kScalarCallGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float v = x[i];
      float cdf = 0.5f * (1.0f + std::erf(v * kSqrtHalf));
      float pdf = kInvSqrt2Pi * detail::expf(-0.5f * v * v);
      dx[i] = dy[i] * (cdf + v * pdf);
    }
  });
}

void compare(Cmp op, const float *a, const Shape &as, const float *b,
             const Shape &bs, uint8_t *out, const Shape &os) {
  compareT(op, a, as, b, bs, out, os);
}

void compareI64(Cmp op, const int64_t *a, const Shape &as, const int64_t *b,
                const Shape &bs, uint8_t *out, const Shape &os) {
  compareT(op, a, as, b, bs, out, os);
}

void select(const uint8_t *cond, const Shape &cs, const float *a,
            const Shape &as, const float *b, const Shape &bs, float *out,
            const Shape &os) {
  if (os.numel() == 0)
    return;
  const Shape *in[3] = {&cs, &as, &bs};
  Broadcast<3> bc(os, in);
  bc.forEachRow(
      [&](int64_t o, const int64_t *off, const int64_t *st, int64_t n) {
        const uint8_t *__restrict c = cond + off[0];
        const float *__restrict x = a + off[1];
        const float *__restrict y = b + off[2];
        float *__restrict r = out + o;
        const int64_t sc = st[0], sx = st[1], sy = st[2];
        if (sc && sx && sy) {
          for (int64_t i = 0; i < n; ++i)
            r[i] = c[i] ? x[i] : y[i];
        } else if (sc) {
          // The common masking form: one side is a scalar fill value.
          for (int64_t i = 0; i < n; ++i)
            r[i] = c[i] ? x[i * sx] : y[i * sy];
        } else {
          const float *__restrict src = *c ? x : y;
          if (*c ? sx : sy) {
            std::memcpy(r, src, n * sizeof(float));
          } else {
            const float v = *src;
            for (int64_t i = 0; i < n; ++i)
              r[i] = v;
          }
        }
      });
}

void logicalNot(const uint8_t *x, uint8_t *y, int64_t n) {
  parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    const uint8_t *__restrict src = x;
    uint8_t *__restrict dst = y;
    for (int64_t i = b; i < e; ++i)
      dst[i] = src[i] == 0;
  });
}

void cast(const void *x, DType from, void *y, DType to, int64_t n) {
  switch (from) {
  case DType::F32:
    return castFrom(static_cast<const float *>(x), y, to, n);
  case DType::F64:
    return castFrom(static_cast<const double *>(x), y, to, n);
  case DType::I64:
    return castFrom(static_cast<const int64_t *>(x), y, to, n);
  case DType::I32:
    return castFrom(static_cast<const int32_t *>(x), y, to, n);
  case DType::Bool:
    return castFrom(static_cast<const uint8_t *>(x), y, to, n);
  }
}

namespace {
/// Elements are copied as unsigned integers of their size: a broadcast
/// moves bits, whatever the type.
template <typename T>
void broadcastElements(const T *x, const Shape &xs, T *y, const Shape &ys) {
  if (ys.numel() == 0)
    return;
  const Shape *in[1] = {&xs};
  Broadcast<1> bc(ys, in);
  bc.forEachRow(
      [&](int64_t o, const int64_t *off, const int64_t *st, int64_t n) {
        const T *__restrict s = x + off[0];
        T *__restrict d = y + o;
        if (st[0]) {
          std::memcpy(d, s, n * sizeof(T));
        } else {
          const T v = *s;
          for (int64_t i = 0; i < n; ++i)
            d[i] = v;
        }
      });
}
} // namespace

void broadcastTo(const float *x, const Shape &xs, float *y, const Shape &ys) {
  broadcastElements(x, xs, y, ys);
}

void broadcastTo(const void *x, const Shape &xs, void *y, const Shape &ys,
                 size_t elementBytes) {
  switch (elementBytes) {
  case 1:
    return broadcastElements(static_cast<const uint8_t *>(x), xs, static_cast<uint8_t *>(y), ys);
  case 2:
    return broadcastElements(static_cast<const uint16_t *>(x), xs, static_cast<uint16_t *>(y),
                             ys);
  case 4:
    return broadcastElements(static_cast<const uint32_t *>(x), xs, static_cast<uint32_t *>(y),
                             ys);
  case 8:
    return broadcastElements(static_cast<const uint64_t *>(x), xs, static_cast<uint64_t *>(y),
                             ys);
  }
}

// The scalar is copied into the range loop: a float store through x could
// alias a by-reference capture, which blocks vectorization.
void scale(float *x, int64_t n, float s) {
  parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    const float k = s;
    for (int64_t i = b; i < e; ++i)
      x[i] *= k;
  });
}

void accumulate(const float *x, float *y, int64_t n) {
  parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    const float *__restrict src = x;
    float *__restrict dst = y;
    for (int64_t i = b; i < e; ++i)
      dst[i] += src[i];
  });
}

void fill(float *x, int64_t n, float v) {
  parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    const float k = v;
    for (int64_t i = b; i < e; ++i)
      x[i] = k;
  });
}

} // namespace dsrt::cpu
