//===- Loss.cpp - cross entropy and NLL loss, forward and backward --------===//
//
// logits are [N, C, inner]. With inner == 1 (the language-model case) each
// sample's C logits are contiguous; otherwise blocks of kCols samples along
// inner are processed together. sum/mean add the per-sample losses in index
// order in double, so the result does not depend on the thread count.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Half.h"
#include "runtime/kernels/cpu/Internal.h"

#include <cmath>
#include <limits>

namespace dsrt::cpu {
using namespace detail;

namespace {

constexpr int64_t kCols = 128;

struct Labels {
  const int64_t *labels;
  int64_t C;
  bool hasIgnore;
  int64_t ignoreIndex;

  bool valid(int64_t i) const {
    const int64_t l = labels[i];
    return !(hasIgnore && l == ignoreIndex) && l >= 0 && l < C;
  }
};

struct Counts {
  int64_t valid = 0, bad = 0;
};

Counts countLabels(const Labels &lab, int64_t total) {
  int64_t valid = 0, bad = 0;
#pragma omp parallel for reduction(+ : valid, bad) if (total > kGrain)
  for (int64_t i = 0; i < total; ++i) {
    const int64_t l = lab.labels[i];
    if (lab.hasIgnore && l == lab.ignoreIndex)
      continue;
    if (l >= 0 && l < lab.C)
      ++valid;
    else
      ++bad;
  }
  return {valid, bad};
}

/// Writes the reduced loss from per-sample losses.
void reduceLoss(const float *per, int64_t total, int reduction, int64_t valid,
                float *loss) {
  double s = 0.0;
  for (int64_t i = 0; i < total; ++i)
    s += per[i];
  loss[0] = float(reduction == 2 ? s / double(valid) : s);
}

/// Gradient scale of sample i from the upstream gradient.
struct GradScale {
  const float *dloss;
  int reduction;
  float meanScale;
  float operator()(int64_t i) const {
    return reduction == 0 ? dloss[i] : dloss[0] * meanScale;
  }
};

GradScale makeGradScale(const float *dloss, int reduction, int64_t valid) {
  return {dloss, reduction, reduction == 2 ? 1.0f / float(valid) : 1.0f};
}

/// Calls row(n) for every sample when inner == 1, else block(n, j0, len)
/// for blocks of up to kCols samples along inner.
template <class Row, class Block>
void forEachSample(int64_t N, int64_t C, int64_t inner, Row &&row,
                   Block &&block) {
  if (inner == 1) {
    parallelFor(N, std::max<int64_t>(1, kGrain / C), [&](int64_t b, int64_t e) {
      for (int64_t n = b; n < e; ++n)
        row(n);
    });
    return;
  }
  const int64_t blocks = (inner + kCols - 1) / kCols;
  parallelFor(N * blocks, std::max<int64_t>(1, kGrain / (C * kCols)),
              [&](int64_t b, int64_t e) {
                for (int64_t w = b; w < e; ++w) {
                  const int64_t n = w / blocks, j0 = (w % blocks) * kCols;
                  block(n, j0, std::min(kCols, inner - j0));
                }
              });
}

} // namespace

namespace {
/// Sample n's C logits as float: in place for float logits, else widened
/// (exactly) into scratch slot 1.
template <class T> const float *rowOf(const T *logits, int64_t n, int64_t C) {
  if constexpr (std::is_same_v<T, float>) {
    return logits + n * C;
  } else {
    float *w = scratch<float, 1>(size_t(C));
    convert(logits + n * C, w, C);
    return w;
  }
}

/// The [C, len] block of samples j0.. of sample n along inner as float
/// with its row stride: in place for float logits (stride inner), else
/// widened into scratch slot 1 (stride len).
template <class T>
const float *blockOf(const T *logits, int64_t n, int64_t C, int64_t inner, int64_t j0,
                     int64_t len, int64_t &stride) {
  const T *x = logits + n * C * inner + j0;
  if constexpr (std::is_same_v<T, float>) {
    stride = inner;
    return x;
  } else {
    float *w = scratch<float, 1>(size_t(C * len));
    for (int64_t c = 0; c < C; ++c)
      convert(x + c * inner, w + c * len, len);
    stride = len;
    return w;
  }
}
} // namespace

template <class T>
int64_t crossEntropy(const T *logits, const int64_t *labels, float *loss, int64_t N, int64_t C,
                     int64_t inner, int reduction, bool hasIgnore, int64_t ignoreIndex) {
  const Labels lab{labels, C, hasIgnore, ignoreIndex};
  const int64_t total = N * inner;
  const Counts counts = countLabels(lab, total);
  float *per = reduction == 0 ? loss : scratch<float, 0>(total);
  forEachSample(
      N, C, inner,
      [&](int64_t n) {
        if (!lab.valid(n)) {
          per[n] = 0.0f;
          return;
        }
        const float *__restrict x = rowOf(logits, n, C);
        const float m = rowMax(x, C);
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int64_t c = 0; c < C; ++c)
          s += detail::expf(x[c] - m);
        per[n] = std::log(s) + m - x[labels[n]];
      },
      [&](int64_t n, int64_t j0, int64_t len) {
        int64_t stride = 0; // the block's row stride
        const float *__restrict x = blockOf(logits, n, C, inner, j0, len, stride);
        float m[kCols], s[kCols];
        for (int64_t j = 0; j < len; ++j) {
          m[j] = -std::numeric_limits<float>::infinity();
          s[j] = 0.0f;
        }
        for (int64_t c = 0; c < C; ++c)
          for (int64_t j = 0; j < len; ++j)
            m[j] = maxOf(m[j], x[c * stride + j]);
        for (int64_t c = 0; c < C; ++c)
          for (int64_t j = 0; j < len; ++j)
            s[j] += detail::expf(x[c * stride + j] - m[j]);
        for (int64_t j = 0; j < len; ++j) {
          const int64_t i = n * inner + j0 + j;
          per[i] = lab.valid(i)
                       ? std::log(s[j]) + m[j] - x[labels[i] * stride + j]
                       : 0.0f;
        }
      });
  if (reduction != 0)
    reduceLoss(per, total, reduction, counts.valid, loss);
  return counts.bad;
}

template <class T>
int64_t crossEntropyGrad(const T *logits, const int64_t *labels, const float *dloss, T *dlogits,
                         int64_t N, int64_t C, int64_t inner, int reduction, bool hasIgnore,
                         int64_t ignoreIndex) {
  const Labels lab{labels, C, hasIgnore, ignoreIndex};
  const Counts counts = countLabels(lab, N * inner);
  const GradScale gradScale = makeGradScale(dloss, reduction, counts.valid);
  // A 16-bit gradient: computed in float in scratch slot 2, rounded once.
  auto floatOut = [&](int64_t elements, T *out) -> float * {
    if constexpr (std::is_same_v<T, float>)
      return out;
    else
      return scratch<float, 2>(size_t(elements));
  };
  forEachSample(
      N, C, inner,
      [&](int64_t n) {
        float *__restrict d = floatOut(C, dlogits + n * C);
        if (!lab.valid(n)) {
          std::memset(d, 0, C * sizeof(float));
        } else {
          // d = (softmax(x) - onehot(label)) * scale
          const float *__restrict x = rowOf(logits, n, C);
          const float m = rowMax(x, C);
          float s = 0.0f;
#pragma omp simd reduction(+ : s)
          for (int64_t c = 0; c < C; ++c) {
            const float e = detail::expf(x[c] - m);
            d[c] = e;
            s += e;
          }
          const float g = gradScale(n), k = g / s;
          for (int64_t c = 0; c < C; ++c)
            d[c] *= k;
          d[labels[n]] -= g;
        }
        if constexpr (!std::is_same_v<T, float>)
          convert(d, dlogits + n * C, C);
      },
      [&](int64_t n, int64_t j0, int64_t len) {
        int64_t stride = 0; // the block's row stride
        const float *__restrict x = blockOf(logits, n, C, inner, j0, len, stride);
        T *out = dlogits + n * C * inner + j0;
        float *__restrict d = std::is_same_v<T, float> ? reinterpret_cast<float *>(out)
                                                       : floatOut(C * len, out);
        float m[kCols], k[kCols];
        for (int64_t j = 0; j < len; ++j) {
          m[j] = -std::numeric_limits<float>::infinity();
          k[j] = 0.0f;
        }
        for (int64_t c = 0; c < C; ++c)
          for (int64_t j = 0; j < len; ++j)
            m[j] = maxOf(m[j], x[c * stride + j]);
        for (int64_t c = 0; c < C; ++c)
          for (int64_t j = 0; j < len; ++j) {
            const float e = detail::expf(x[c * stride + j] - m[j]);
            d[c * stride + j] = e;
            k[j] += e;
          }
        for (int64_t j = 0; j < len; ++j) {
          const int64_t i = n * inner + j0 + j;
          k[j] = lab.valid(i) ? gradScale(i) / k[j] : 0.0f;
        }
        for (int64_t c = 0; c < C; ++c)
          for (int64_t j = 0; j < len; ++j)
            d[c * stride + j] *= k[j];
        for (int64_t j = 0; j < len; ++j) {
          const int64_t i = n * inner + j0 + j;
          if (lab.valid(i))
            d[labels[i] * stride + j] -= gradScale(i);
        }
        if constexpr (!std::is_same_v<T, float>)
          for (int64_t c = 0; c < C; ++c)
            convert(d + c * stride, out + c * inner, len);
      });
  return counts.bad;
}

#define DSRT_CROSS_ENTROPY(T)                                                                      \
  template int64_t crossEntropy<T>(const T *, const int64_t *, float *, int64_t, int64_t,         \
                                   int64_t, int, bool, int64_t);                                   \
  template int64_t crossEntropyGrad<T>(const T *, const int64_t *, const float *, T *, int64_t,   \
                                       int64_t, int64_t, int, bool, int64_t);
DSRT_CROSS_ENTROPY(float)
DSRT_CROSS_ENTROPY(Bf16)
DSRT_CROSS_ENTROPY(Fp16)
#undef DSRT_CROSS_ENTROPY

int64_t nllLoss(const float *logp, const int64_t *labels, float *loss,
                int64_t N, int64_t C, int64_t inner, int reduction,
                bool hasIgnore, int64_t ignoreIndex) {
  const Labels lab{labels, C, hasIgnore, ignoreIndex};
  const int64_t total = N * inner;
  const Counts counts = countLabels(lab, total);
  float *per = reduction == 0 ? loss : scratch<float, 0>(total);
  parallelFor(total, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t n = i / inner, j = i % inner;
      per[i] = lab.valid(i) ? -logp[(n * C + labels[i]) * inner + j] : 0.0f;
    }
  });
  if (reduction != 0)
    reduceLoss(per, total, reduction, counts.valid, loss);
  return counts.bad;
}

int64_t nllLossGrad(const int64_t *labels, const float *dloss, float *dlogp,
                    int64_t N, int64_t C, int64_t inner, int reduction,
                    bool hasIgnore, int64_t ignoreIndex) {
  const Labels lab{labels, C, hasIgnore, ignoreIndex};
  const int64_t total = N * inner;
  const Counts counts = countLabels(lab, total);
  const GradScale gradScale = makeGradScale(dloss, reduction, counts.valid);
  fill(dlogp, total * C, 0.0f);
  parallelFor(total, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t n = i / inner, j = i % inner;
      if (lab.valid(i))
        dlogp[(n * C + labels[i]) * inner + j] = -gradScale(i);
    }
  });
  return counts.bad;
}


//===--- vocabulary-parallel cross entropy (Megatron's) ---------------------===//

void crossEntropyPartMax(const float *logits, int64_t N, int64_t C, float *rowMaxOut) {
  parallelFor(N, std::max<int64_t>(1, kGrain / C), [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n)
      rowMaxOut[n] = rowMax(logits + n * C, C);
  });
}

void crossEntropyPartSums(const float *logits, const int64_t *labels, const float *gmax,
                          int64_t N, int64_t C, int64_t first, float *stats) {
  parallelFor(N, std::max<int64_t>(1, kGrain / C), [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) {
      const float *__restrict x = logits + n * C;
      const float m = gmax[n];
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (int64_t c = 0; c < C; ++c)
        s += detail::expf(x[c] - m);
      const int64_t k = labels[n] - first;
      stats[n] = s;
      stats[N + n] = k >= 0 && k < C ? x[k] : 0.0f;
    }
  });
}

int64_t crossEntropyPartLoss(const float *stats, const float *gmax, const int64_t *labels,
                             float *loss, int64_t N, int64_t C, int reduction, bool hasIgnore,
                             int64_t ignoreIndex) {
  const Labels lab{labels, C, hasIgnore, ignoreIndex};
  const Counts counts = countLabels(lab, N);
  float *per = reduction == 0 ? loss : scratch<float, 0>(N);
  for (int64_t n = 0; n < N; ++n)
    per[n] = lab.valid(n) ? std::log(stats[n]) + gmax[n] - stats[N + n] : 0.0f;
  if (reduction != 0)
    reduceLoss(per, N, reduction, counts.valid, loss);
  return counts.bad;
}

void crossEntropyPartLossGrad(const float *stats, const int64_t *labels, const float *dloss,
                              float *dstats, int64_t N, int64_t C, int reduction,
                              bool hasIgnore, int64_t ignoreIndex) {
  const Labels lab{labels, C, hasIgnore, ignoreIndex};
  const Counts counts = countLabels(lab, N);
  const GradScale gradScale = makeGradScale(dloss, reduction, counts.valid);
  for (int64_t n = 0; n < N; ++n) {
    const bool valid = lab.valid(n);
    const float g = valid ? gradScale(n) : 0.0f;
    dstats[n] = valid ? g / stats[n] : 0.0f;
    dstats[N + n] = -g;
  }
}

void crossEntropyPartSumsGrad(const float *logits, const int64_t *labels, const float *gmax,
                              const float *dstats, float *dlogits, int64_t N, int64_t C,
                              int64_t first) {
  parallelFor(N, std::max<int64_t>(1, kGrain / C), [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) {
      const float *__restrict x = logits + n * C;
      float *__restrict d = dlogits + n * C;
      const float m = gmax[n], ds = dstats[n];
      for (int64_t c = 0; c < C; ++c)
        d[c] = ds * detail::expf(x[c] - m);
      const int64_t k = labels[n] - first;
      if (k >= 0 && k < C)
        d[k] += dstats[N + n];
    }
  });
}

} // namespace dsrt::cpu
