//===- Pool.cpp - max / average pooling over 1 to 3 spatial dims ---------===//
//
// One plane (n, c) per task; every shape is seen as 3 spatial dims (the
// missing leading ones of size 1), so one loop nest serves 1-D, 2-D and
// 3-D. The window rules are PyTorch's CPU kernels' (max: padding never
// wins, the first maximum in window order, NaN propagates; average: the
// divisor of avg_pool with and without count_include_pad), which the parity
// tests compare against. argmax (a gate's routing) lives here too: a max
// over one axis that keeps the index.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Half.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dsrt::cpu {
using namespace detail;

namespace {

/// Three spatial dims: sizes of x and y, and the window, leading dims 1.
struct Geometry {
  int64_t planes = 1, in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, pb[3] = {}, pe[3] = {}, d[3] = {1, 1, 1};
  int64_t inSize() const { return in[0] * in[1] * in[2]; }
  int64_t outSize() const { return out[0] * out[1] * out[2]; }
};

Geometry geometry(const Shape &xs, const Shape &ys, const Window &w) {
  Geometry g;
  g.planes = xs.dims[0] * xs.dims[1];
  int off = 3 - w.spatial;
  for (int i = 0; i < w.spatial; ++i) {
    g.in[off + i] = xs.dims[2 + i];
    g.out[off + i] = ys.dims[2 + i];
    g.k[off + i] = w.kernel[i];
    g.s[off + i] = w.stride[i];
    g.pb[off + i] = w.padBegin[i];
    g.pe[off + i] = w.padEnd[i];
    g.d[off + i] = w.dilation[i];
  }
  return g;
}

/// Calls f(inputIndex) for each in-input element of output position o's
/// window, in window order (row-major over the kernel).
template <class F> inline void forWindow(const Geometry &g, const int64_t o[3], F f) {
  for (int64_t a = 0; a < g.k[0]; ++a) {
    int64_t i0 = o[0] * g.s[0] - g.pb[0] + a * g.d[0];
    if (i0 < 0 || i0 >= g.in[0])
      continue;
    for (int64_t b = 0; b < g.k[1]; ++b) {
      int64_t i1 = o[1] * g.s[1] - g.pb[1] + b * g.d[1];
      if (i1 < 0 || i1 >= g.in[1])
        continue;
      for (int64_t c = 0; c < g.k[2]; ++c) {
        int64_t i2 = o[2] * g.s[2] - g.pb[2] + c * g.d[2];
        if (i2 < 0 || i2 >= g.in[2])
          continue;
        f((i0 * g.in[1] + i1) * g.in[2] + i2);
      }
    }
  }
}

/// avg_pool's divisor at output position o.
inline int64_t divisor(const Geometry &g, const int64_t o[3], bool includePad) {
  int64_t n = 1;
  for (int i = 0; i < 3; ++i) {
    int64_t start = o[i] * g.s[i] - g.pb[i];
    int64_t end = std::min(start + g.k[i], g.in[i] + g.pe[i]);
    if (includePad) {
      n *= end - start;
    } else {
      n *= std::min(end, g.in[i]) - std::max<int64_t>(start, 0);
    }
  }
  return n;
}

/// Index of the window's maximum (PyTorch's scan), -1 when the window
/// holds no input element.
inline int64_t argmax(const Geometry &g, const float *x, const int64_t o[3]) {
  int64_t best = -1;
  float m = -std::numeric_limits<float>::infinity();
  forWindow(g, o, [&](int64_t i) {
    float v = x[i];
    // The first element opens the scan (even at -inf); later ones win
    // only when greater, or NaN.
    if (best < 0 || v > m || std::isnan(v)) {
      best = i;
      m = v;
    }
  });
  return best;
}

template <class F> void forOutputs(const Geometry &g, F f) {
  int64_t o[3];
  for (o[0] = 0; o[0] < g.out[0]; ++o[0])
    for (o[1] = 0; o[1] < g.out[1]; ++o[1])
      for (o[2] = 0; o[2] < g.out[2]; ++o[2])
        f(o, (o[0] * g.out[1] + o[1]) * g.out[2] + o[2]);
}

template <class T>
void argmaxT(const T *x, int64_t outer, int64_t n, int64_t inner, int64_t *idx) {
#pragma omp parallel for schedule(static) if (outer * inner > 4096)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const T *p = x + o * n * inner + i;
      int64_t best = 0;
      float m = toFloat(p[0]);
      for (int64_t k = 1; k < n && !std::isnan(m); ++k) {
        float v = toFloat(p[k * inner]);
        if (v > m || std::isnan(v)) {
          m = v;
          best = k;
        }
      }
      idx[o * inner + i] = best;
    }
}

} // namespace

void argmax(const float *x, int64_t outer, int64_t n, int64_t inner, int64_t *idx) {
  argmaxT(x, outer, n, inner, idx);
}
void argmax(const Bf16 *x, int64_t outer, int64_t n, int64_t inner, int64_t *idx) {
  argmaxT(x, outer, n, inner, idx);
}
void argmax(const Fp16 *x, int64_t outer, int64_t n, int64_t inner, int64_t *idx) {
  argmaxT(x, outer, n, inner, idx);
}

void maxPool(const float *x, const Shape &xs, float *y, const Shape &ys, const Window &w) {
  const Geometry g = geometry(xs, ys, w);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < g.planes; ++p) {
    const float *xp = x + p * g.inSize();
    float *yp = y + p * g.outSize();
    forOutputs(g, [&](const int64_t o[3], int64_t k) {
      int64_t i = argmax(g, xp, o);
      yp[k] = i < 0 ? -std::numeric_limits<float>::infinity() : xp[i];
    });
  }
}

void maxPoolGrad(const float *x, const Shape &xs, const float *dy, const Shape &ys, float *dx,
                 const Window &w) {
  const Geometry g = geometry(xs, ys, w);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < g.planes; ++p) {
    const float *xp = x + p * g.inSize();
    const float *dyp = dy + p * g.outSize();
    float *dxp = dx + p * g.inSize();
    std::fill(dxp, dxp + g.inSize(), 0.0f);
    forOutputs(g, [&](const int64_t o[3], int64_t k) {
      int64_t i = argmax(g, xp, o);
      if (i >= 0)
        dxp[i] += dyp[k];
    });
  }
}

void avgPool(const float *x, const Shape &xs, float *y, const Shape &ys, const Window &w,
             bool includePad) {
  const Geometry g = geometry(xs, ys, w);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < g.planes; ++p) {
    const float *xp = x + p * g.inSize();
    float *yp = y + p * g.outSize();
    forOutputs(g, [&](const int64_t o[3], int64_t k) {
      float sum = 0.0f;
      forWindow(g, o, [&](int64_t i) { sum += xp[i]; });
      int64_t n = divisor(g, o, includePad);
      yp[k] = n > 0 ? sum / float(n) : 0.0f;
    });
  }
}

void avgPoolGrad(const float *dy, const Shape &ys, float *dx, const Shape &xs, const Window &w,
                 bool includePad) {
  const Geometry g = geometry(xs, ys, w);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < g.planes; ++p) {
    const float *dyp = dy + p * g.outSize();
    float *dxp = dx + p * g.inSize();
    std::fill(dxp, dxp + g.inSize(), 0.0f);
    forOutputs(g, [&](const int64_t o[3], int64_t k) {
      int64_t n = divisor(g, o, includePad);
      if (n <= 0)
        return;
      float v = dyp[k] / float(n);
      forWindow(g, o, [&](int64_t i) { dxp[i] += v; });
    });
  }
}

} // namespace dsrt::cpu
