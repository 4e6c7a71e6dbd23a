//===- Compress.cpp - 1-bit sign compression with error feedback ---------===//
//
// The arithmetic of DeepSpeed's compressed all-reduce (1-bit Adam, 0/1 Adam,
// 1-bit LAMB: DeepSpeed edaa722 deepspeed/runtime/comm/nccl.py
// compressed_allreduce), for one rank's side of each phase:
//
//   worker   x = v + worker_error; a = |x| / sqrt(n); bits = x >= 0;
//            worker_error = x - a sgn(x)
//   server   (chunk r of every worker) c = sum_w sgn_w (a_w / W) +
//            server_error; b = |c| / sqrt(n_r); bits = c >= 0;
//            server_error = c - b sgn(c)
//   expand   out = b sgn(c), chunk by chunk
//
// sgn(x) is +1 for x >= 0 and for NaN (DeepSpeed's sign().add_(1).bool()),
// -1 otherwise. Bits are packed most significant first, as numpy's
// packbits, eight elements per byte: n is a multiple of 8 (DeepSpeed pads
// the tensor to a multiple of W * lcm(W, 8)). Norms are summed in double
// in element order, so every rank and thread count gets the same scale.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Kernels.h"

#include <cmath>

namespace dsrt::cpu {

namespace {

/// DeepSpeed's sgn: +1 unless x < 0 (so 0, -0 and NaN are +1).
inline bool positive(float x) { return !(x < 0.0f); }

inline float scaleOf(double sumSquares, int64_t n) {
  return float(std::sqrt(sumSquares) / std::sqrt(double(n)));
}

/// Packs the signs of x (n elements, eight per byte, the first in the most
/// significant bit) and leaves x - scale sgn(x) in x: the error the
/// compression makes.
void packSigns(float *x, int64_t n, float scale, uint8_t *bits) {
  for (int64_t byte = 0; byte < n / 8; ++byte) {
    uint8_t packed = 0;
    for (int k = 0; k < 8; ++k) {
      float &v = x[byte * 8 + k];
      const bool up = positive(v);
      packed |= uint8_t(up) << (7 - k);
      v = up ? v - scale : v + scale;
    }
    bits[byte] = packed;
  }
}

} // namespace

float onebitCompress(const float *v, float *error, int64_t n, uint8_t *bits) {
  double sq = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float x = v[i] + error[i];
    error[i] = x; // x, until the scale is known
    sq += double(x) * double(x);
  }
  const float a = scaleOf(sq, n);
  packSigns(error, n, a, bits);
  return a;
}

float onebitServer(const uint8_t *workerBits, const float *scales, int world,
                   float *serverError, int64_t n, uint8_t *bits) {
  // A byte (eight elements) at a time: in worker order, each sign times its
  // worker's a / W, then the error; the sum of squares in element order.
  const int64_t bytes = n / 8;
  double sq = 0.0;
  for (int64_t byte = 0; byte < bytes; ++byte) {
    float c[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int w = 0; w < world; ++w) {
      const float share = scales[w] * (1.0f / float(world));
      const unsigned packed = workerBits[w * bytes + byte];
      // +-share exactly, without a branch per sign (a branch mispredicts
      // half the time on signs).
      for (int k = 0; k < 8; ++k)
        c[k] += float(int((packed >> (7 - k)) & 1u) * 2 - 1) * share;
    }
    float *e = serverError + byte * 8;
    for (int k = 0; k < 8; ++k) {
      e[k] = c[k] + e[k];
      sq += double(e[k]) * double(e[k]);
    }
  }
  const float b = scaleOf(sq, n);
  packSigns(serverError, n, b, bits);
  return b;
}

void onebitExpand(const uint8_t *bits, float scale, int64_t n, float *out) {
  for (int64_t byte = 0; byte < n / 8; ++byte) {
    const unsigned packed = bits[byte];
    for (int k = 0; k < 8; ++k)
      out[byte * 8 + k] = ((packed >> (7 - k)) & 1u) ? scale : -scale;
  }
}

} // namespace dsrt::cpu
