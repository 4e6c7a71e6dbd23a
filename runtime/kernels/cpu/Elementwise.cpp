//===- Elementwise.cpp - broadcast binary ops, unary ops, casts -----------===//
//
// Broadcasting goes through detail::Broadcast, which reduces every case to
// rows whose operands have inner stride 0 or 1; the row loops below are
// specialized on those strides so that they vectorize. The float ops are
// templates over the element type (float, Bf16, Fp16): 16-bit tensors run
// the same float loops on tiles widened into stack buffers (Half.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Erf.h"
#include "runtime/kernels/cpu/Half.h"

#include <cmath>
#include <limits>
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

/// binaryRow of a float op on 16-bit rows, a tile at a time.
template <class T, class Op>
void binaryRowTiled(const T *a, int64_t sa, const T *b, int64_t sb, T *o,
                    int64_t n, Op op) {
  float ab[kTile], bb[kTile], ob[kTile];
  forTiles<T>(0, n, [&](int64_t t0, int64_t t1) {
    const int64_t len = t1 - t0;
    const float *af = widened(a + t0 * sa, ab, sa ? len : 1);
    const float *bf = widened(b + t0 * sb, bb, sb ? len : 1);
    binaryRow(af, sa, bf, sb, ob, len, op);
    narrowInto(ob, o + t0, len);
  });
}

/// out = op(a, b) broadcast. A 16-bit result comes from a float op on
/// widened tiles; other ops (comparisons) take the elements themselves.
template <class T, class U, class Op>
void broadcastBinary(const T *a, const Shape &as, const T *b, const Shape &bs,
                     U *out, const Shape &os, Op op) {
  if (os.numel() == 0)
    return;
  const Shape *in[2] = {&as, &bs};
  Broadcast<2> bc(os, in);
  bc.forEachRow(
      [&](int64_t o, const int64_t *off, const int64_t *st, int64_t n) {
        if constexpr (kIsHalf<T> && std::is_same_v<T, U>)
          binaryRowTiled(a + off[0], st[0], b + off[1], st[1], out + o, n, op);
        else
          binaryRow(a + off[0], st[0], b + off[1], st[1], out + o, n, op);
      });
}

/// Compares values (16-bit ones by their float value, so -0 == +0 and NaN
/// compares false, as in float).
template <class T>
void compareT(Cmp op, const T *a, const Shape &as, const T *b, const Shape &bs,
              uint8_t *out, const Shape &os) {
  auto v = [](T x) {
    if constexpr (kIsHalf<T>)
      return toFloat(x);
    else
      return x;
  };
  switch (op) {
  case Cmp::Eq:
    return broadcastBinary(a, as, b, bs, out, os,
                           [v](T x, T y) -> uint8_t { return v(x) == v(y); });
  case Cmp::Ne:
    return broadcastBinary(a, as, b, bs, out, os,
                           [v](T x, T y) -> uint8_t { return v(x) != v(y); });
  case Cmp::Lt:
    return broadcastBinary(a, as, b, bs, out, os,
                           [v](T x, T y) -> uint8_t { return v(x) < v(y); });
  case Cmp::Le:
    return broadcastBinary(a, as, b, bs, out, os,
                           [v](T x, T y) -> uint8_t { return v(x) <= v(y); });
  case Cmp::Gt:
    return broadcastBinary(a, as, b, bs, out, os,
                           [v](T x, T y) -> uint8_t { return v(x) > v(y); });
  case Cmp::Ge:
    return broadcastBinary(a, as, b, bs, out, os,
                           [v](T x, T y) -> uint8_t { return v(x) >= v(y); });
  }
}

/// y[i] = f(x[i]); `omp simd` because y may alias x (in-place is fine
/// lane-wise, but would defeat the compiler's own overlap check). 16-bit
/// tiles are widened before any result is narrowed, so in place is fine
/// for them too.
template <class T, class F>
void unaryOp(const T *x, T *y, int64_t n, F f, int64_t grain = kGrain) {
  parallelFor(n, grain, [&](int64_t b, int64_t e) {
    float xb[kTile], yb[kTile];
    forTiles<T>(b, e, [&](int64_t t0, int64_t t1) {
      const int64_t len = t1 - t0;
      const float *xs = widened(x + t0, xb, len);
      float *ys = resultIn(y + t0, yb);
#pragma omp simd
      for (int64_t i = 0; i < len; ++i)
        ys[i] = f(xs[i]);
      narrowInto(ys, y + t0, len);
    });
  });
}

/// Per-element work of std::log / std::tanh is high enough to thread
/// smaller tensors.
constexpr int64_t kScalarCallGrain = kGrain / 8;
/// The vectorized erf and GELU cost ~5x a simple op per element.
constexpr int64_t kErfGrain = kGrain / 4;

/// unaryOp for the vectorized erf and GELU, whose per-element work dwarfs
/// a conversion: bf16 inputs are widened inside the loop (a shift), which
/// saves the tile's widening pass; results still go through the tile.
template <class T, class F> void unaryMathOp(const T *x, T *y, int64_t n, F f) {
  if constexpr (!std::is_same_v<T, Bf16>) {
    unaryOp(x, y, n, f, kErfGrain);
  } else {
    parallelFor(n, kErfGrain, [&](int64_t b, int64_t e) {
      float yb[kTile];
      forTiles<T>(b, e, [&](int64_t t0, int64_t t1) {
        const int64_t len = t1 - t0;
        const Bf16 *xs = x + t0;
#pragma omp simd
        for (int64_t i = 0; i < len; ++i)
          yb[i] = f(toFloat(xs[i]));
        narrowInto(yb, y + t0, len);
      });
    });
  }
}

template <class T, class F> void unaryCallOp(const T *x, T *y, int64_t n, F f) {
  parallelFor(n, kScalarCallGrain, [&](int64_t b, int64_t e) {
    float xb[kTile], yb[kTile];
    forTiles<T>(b, e, [&](int64_t t0, int64_t t1) {
      const int64_t len = t1 - t0;
      const float *xs = widened(x + t0, xb, len);
      float *ys = resultIn(y + t0, yb);
      for (int64_t i = 0; i < len; ++i)
        ys[i] = f(xs[i]);
      narrowInto(ys, y + t0, len);
    });
  });
}

constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kGeluC = 0.044715f;

/// Phi(x) from gaussTail's q = Phi(-|x|): no cancellation in either tail
/// (1 + erf(x / sqrt 2) loses all its bits for x << 0).
inline __attribute__((always_inline)) float normalCdf(float x, float q) {
  return x < 0.0f ? q : 1.0f - q;
}

/// 0.5 (1 + tanh(u)) == 1 / (1 + exp(-2u)): no cancellation, no tanh call.
inline float geluTanh(float x) {
  float u = kSqrt2OverPi * (x + kGeluC * x * x * x);
  return x / (1.0f + detail::expf(-2.0f * u));
}

/// gelu'(v) for the tanh form, gelu = v s with s = sigmoid(2u): s + 2 v u'
/// s (1 - s), where 1 - s = e s with e = exp(-2u) (no cancellation in 1 -
/// s as s -> 1); e s is 1 once e overflows (v < -10: s is 0 there, and
/// e s would be inf * 0). One function for geluGradT and
/// geluWithDerivativeT, so that dy times the stored derivative is the
/// gradient kernel's product bit for bit.
inline __attribute__((always_inline)) float geluTanhSlope(float v) {
  float u = kSqrt2OverPi * (v + kGeluC * v * v * v);
  float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluC * v * v);
  float ex = detail::expf(-2.0f * u);
  float s = 1.0f / (1.0f + ex);
  float es = ex < std::numeric_limits<float>::infinity() ? ex * s : 1.0f;
  return s + 2.0f * v * du * es * s;
}

/// gelu'(v) = Phi(v) + v phi(v) for the erf form, from gaussTail's q and e
/// (as geluTanhSlope: one function for both kernels).
inline __attribute__((always_inline)) float geluErfSlope(float v, float q, float ex) {
  return normalCdf(v, q) + v * (kInvSqrt2Pi * ex);
}

/// One element of a cast. 16-bit floats go through their float value;
/// wider sources reach them through a round-to-odd float (one rounding).
template <class To, class From> To castValue(From v) {
  if constexpr (kIsHalf<From>)
    return castValue<To>(toFloat(v));
  else if constexpr (std::is_same_v<To, uint8_t>)
    return v != From(0);
  else if constexpr (kIsHalf<To> && std::is_same_v<From, float>)
    return fromFloat<To>(v);
  else if constexpr (kIsHalf<To>)
    return fromFloat<To>(roundToOdd(double(v)));
  else
    return static_cast<To>(v);
}

template <class From, class To> void castLoop(const From *x, To *y, int64_t n) {
  parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    // A copy keeps what a round trip through float would not (bf16
    // denormals); float <-> 16-bit: the vectorized conversions of Convert.cpp.
    if constexpr (std::is_same_v<From, To>) {
      std::memcpy(y + b, x + b, (e - b) * sizeof(To));
    } else if constexpr ((std::is_same_v<From, float> && kIsHalf<To>) ||
                         (kIsHalf<From> && std::is_same_v<To, float>)) {
      detail::convert(x + b, y + b, e - b);
    } else {
      // Local copies: a byte store could alias the closure's members.
      const From *__restrict src = x;
      To *__restrict dst = y;
      for (int64_t i = b; i < e; ++i)
        dst[i] = castValue<To>(src[i]);
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
  case DType::BF16:
    return castLoop(x, static_cast<Bf16 *>(y), n);
  case DType::F16:
    return castLoop(x, static_cast<Fp16 *>(y), n);
  }
}

/// The float kernel's ops; for 16-bit T they run on widened tiles.
template <class T>
void binaryT(Binary op, const T *a, const Shape &as, const T *b,
             const Shape &bs, T *out, const Shape &os) {
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

template <class T> void unaryT(Unary op, const T *x, T *y, int64_t n) {
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
  case Unary::Sin:
    return unaryCallOp(x, y, n, [](float v) { return std::sin(v); });
  case Unary::Cos:
    return unaryCallOp(x, y, n, [](float v) { return std::cos(v); });
  case Unary::Erf:
    return unaryMathOp(x, y, n, [](float v) { return detail::erfFloat(v); });
  case Unary::Relu:
    return unaryOp(x, y, n, [](float v) { return v < 0.0f ? 0.0f : v; });
  case Unary::Sigmoid:
    return unaryOp(x, y, n,
                   [](float v) { return 1.0f / (1.0f + detail::expf(-v)); });
  case Unary::GeluErf:
    return unaryMathOp(x, y, n, [](float v) {
      float q, e;
      gaussTail(v, q, e);
      return v * normalCdf(v, q);
    });
  case Unary::GeluTanh:
    return unaryOp(x, y, n, [](float v) { return geluTanh(v); });
  }
}

template <class T>
void geluGradT(bool tanhApprox, const T *x, const T *dy, T *dx, int64_t n) {
  if (tanhApprox) {
    parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
      float xb[kTile], gb[kTile], db[kTile];
      forTiles<T>(b, e, [&](int64_t t0, int64_t t1) {
        const int64_t len = t1 - t0;
        const float *xs = widened(x + t0, xb, len);
        const float *gs = widened(dy + t0, gb, len);
        float *ds = resultIn(dx + t0, db);
#pragma omp simd
        for (int64_t i = 0; i < len; ++i)
          ds[i] = gs[i] * geluTanhSlope(xs[i]);
        narrowInto(ds, dx + t0, len);
      });
    });
    return;
  }
  // d/dx x Phi(x) = Phi(x) + x phi(x); gaussTail's e gives phi too. As in
  // unaryMathOp, bf16 inputs are widened in the loop.
  auto grad = [](float v, float g) __attribute__((always_inline)) {
    float q, ex;
    gaussTail(v, q, ex);
    return g * geluErfSlope(v, q, ex);
  };
  parallelFor(n, kErfGrain, [&](int64_t b, int64_t e) {
    float xb[kTile], gb[kTile], db[kTile];
    forTiles<T>(b, e, [&](int64_t t0, int64_t t1) {
      const int64_t len = t1 - t0;
      float *ds = resultIn(dx + t0, db);
      if constexpr (std::is_same_v<T, Bf16>) {
        const Bf16 *xs = x + t0, *gs = dy + t0;
#pragma omp simd
        for (int64_t i = 0; i < len; ++i)
          ds[i] = grad(toFloat(xs[i]), toFloat(gs[i]));
      } else {
        const float *xs = widened(x + t0, xb, len);
        const float *gs = widened(dy + t0, gb, len);
#pragma omp simd
        for (int64_t i = 0; i < len; ++i)
          ds[i] = grad(xs[i], gs[i]);
      }
      narrowInto(ds, dx + t0, len);
    });
  });
}

/// y = gelu(x) and d = gelu'(x) from one evaluation: each the expression
/// unaryT's GELU and geluGradT compute (geluGradT's dx is dy * d).
template <class T>
void geluWithDerivativeT(bool tanhApprox, const T *x, T *y, T *d, int64_t n) {
  parallelFor(n, kErfGrain, [&](int64_t b, int64_t e) {
    float xb[kTile], yb[kTile], db[kTile];
    forTiles<T>(b, e, [&](int64_t t0, int64_t t1) {
      const int64_t len = t1 - t0;
      const float *xs = widened(x + t0, xb, len);
      float *ys = resultIn(y + t0, yb);
      float *ds = resultIn(d + t0, db);
      if (tanhApprox) {
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) {
          ys[i] = geluTanh(xs[i]);
          ds[i] = geluTanhSlope(xs[i]);
        }
      } else {
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) {
          float v = xs[i], q, ex;
          gaussTail(v, q, ex);
          ys[i] = v * normalCdf(v, q);
          ds[i] = geluErfSlope(v, q, ex);
        }
      }
      narrowInto(ys, y + t0, len);
      narrowInto(ds, d + t0, len);
    });
  });
}

/// Values move bitwise: T is float or the 16-bit storage word.
template <class T>
void selectT(const uint8_t *cond, const Shape &cs, const T *a, const Shape &as,
             const T *b, const Shape &bs, T *out, const Shape &os) {
  if (os.numel() == 0)
    return;
  const Shape *in[3] = {&cs, &as, &bs};
  Broadcast<3> bc(os, in);
  bc.forEachRow(
      [&](int64_t o, const int64_t *off, const int64_t *st, int64_t n) {
        const uint8_t *__restrict c = cond + off[0];
        const T *__restrict x = a + off[1];
        const T *__restrict y = b + off[2];
        T *__restrict r = out + o;
        const int64_t sc = st[0], sx = st[1], sy = st[2];
        if (sc && sx && sy) {
          for (int64_t i = 0; i < n; ++i)
            r[i] = c[i] ? x[i] : y[i];
        } else if (sc) {
          // The common masking form: one side is a scalar fill value.
          for (int64_t i = 0; i < n; ++i)
            r[i] = c[i] ? x[i * sx] : y[i * sy];
        } else {
          const T *__restrict src = *c ? x : y;
          if (*c ? sx : sy) {
            std::memcpy(r, src, n * sizeof(T));
          } else {
            const T v = *src;
            for (int64_t i = 0; i < n; ++i)
              r[i] = v;
          }
        }
      });
}

template <class T> void accumulateT(const T *x, float *y, int64_t n) {
  parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    const T *__restrict src = x;
    float *__restrict dst = y;
    for (int64_t i = b; i < e; ++i)
      dst[i] += toFloat(src[i]);
  });
}

} // namespace

void binary(Binary op, const float *a, const Shape &as, const float *b,
            const Shape &bs, float *out, const Shape &os) {
  binaryT(op, a, as, b, bs, out, os);
}
void binary(Binary op, const Bf16 *a, const Shape &as, const Bf16 *b,
            const Shape &bs, Bf16 *out, const Shape &os) {
  binaryT(op, a, as, b, bs, out, os);
}
void binary(Binary op, const Fp16 *a, const Shape &as, const Fp16 *b,
            const Shape &bs, Fp16 *out, const Shape &os) {
  binaryT(op, a, as, b, bs, out, os);
}

void unary(Unary op, const float *x, float *y, int64_t n) {
  unaryT(op, x, y, n);
}
void unary(Unary op, const Bf16 *x, Bf16 *y, int64_t n) { unaryT(op, x, y, n); }
void unary(Unary op, const Fp16 *x, Fp16 *y, int64_t n) { unaryT(op, x, y, n); }

void geluGrad(bool tanhApprox, const float *x, const float *dy, float *dx,
              int64_t n) {
  geluGradT(tanhApprox, x, dy, dx, n);
}
void geluGrad(bool tanhApprox, const Bf16 *x, const Bf16 *dy, Bf16 *dx,
              int64_t n) {
  geluGradT(tanhApprox, x, dy, dx, n);
}
void geluGrad(bool tanhApprox, const Fp16 *x, const Fp16 *dy, Fp16 *dx,
              int64_t n) {
  geluGradT(tanhApprox, x, dy, dx, n);
}

void geluWithDerivative(bool tanhApprox, const float *x, float *y, float *d, int64_t n) {
  geluWithDerivativeT(tanhApprox, x, y, d, n);
}
void geluWithDerivative(bool tanhApprox, const Bf16 *x, Bf16 *y, Bf16 *d, int64_t n) {
  geluWithDerivativeT(tanhApprox, x, y, d, n);
}
void geluWithDerivative(bool tanhApprox, const Fp16 *x, Fp16 *y, Fp16 *d, int64_t n) {
  geluWithDerivativeT(tanhApprox, x, y, d, n);
}

void compare(Cmp op, const float *a, const Shape &as, const float *b,
             const Shape &bs, uint8_t *out, const Shape &os) {
  compareT(op, a, as, b, bs, out, os);
}

void compare(Cmp op, const Bf16 *a, const Shape &as, const Bf16 *b,
             const Shape &bs, uint8_t *out, const Shape &os) {
  compareT(op, a, as, b, bs, out, os);
}
void compare(Cmp op, const Fp16 *a, const Shape &as, const Fp16 *b,
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
  selectT(cond, cs, a, as, b, bs, out, os);
}
void select(const uint8_t *cond, const Shape &cs, const Bf16 *a,
            const Shape &as, const Bf16 *b, const Shape &bs, Bf16 *out,
            const Shape &os) {
  selectT(cond, cs, reinterpret_cast<const uint16_t *>(a), as,
          reinterpret_cast<const uint16_t *>(b), bs,
          reinterpret_cast<uint16_t *>(out), os);
}
void select(const uint8_t *cond, const Shape &cs, const Fp16 *a,
            const Shape &as, const Fp16 *b, const Shape &bs, Fp16 *out,
            const Shape &os) {
  selectT(cond, cs, reinterpret_cast<const uint16_t *>(a), as,
          reinterpret_cast<const uint16_t *>(b), bs,
          reinterpret_cast<uint16_t *>(out), os);
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
  case DType::BF16:
    return castFrom(static_cast<const Bf16 *>(x), y, to, n);
  case DType::F16:
    return castFrom(static_cast<const Fp16 *>(x), y, to, n);
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

void accumulate(const float *x, float *y, int64_t n) { accumulateT(x, y, n); }
void accumulate(const Bf16 *x, float *y, int64_t n) { accumulateT(x, y, n); }
void accumulate(const Fp16 *x, float *y, int64_t n) { accumulateT(x, y, n); }

void fill(float *x, int64_t n, float v) {
  parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
    const float k = v;
    for (int64_t i = b; i < e; ++i)
      x[i] = k;
  });
}

} // namespace dsrt::cpu
