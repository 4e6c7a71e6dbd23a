//===- AttentionBench.cpp - timing of dsrt's fused attention --------------===//
//
// dsrt_attention_bench: the timing half of bench/attention.py (which runs
// PyTorch's attention on the same shapes in the same run and writes the
// table). For each batch x T x heads x head-size it times the fused
// attention kernel (dsrt::cpu::attention and attentionGrad, the [batch, T,
// heads, E] layout the exporters' GPT writes, causal) in float and in bf16,
// and the same calls' GEMMs alone (the four per head of the gradient, two
// of the forward, as batched matmuls over contiguous heads): what is left
// is the row steps (max, exponentials, normalization, the softmax gradient)
// and the heads' bookkeeping. One JSON object per line, times in ms.
//
//   dsrt_attention_bench --threads 2 --reps 7 --shape 8x128x6x64
//
// Each figure is the best of --reps timed repetitions of enough calls to
// last about --ms milliseconds, after a warm-up call.
//
//===----------------------------------------------------------------------===//
#include "BenchUtil.h"
#include "runtime/kernels/cpu/Kernels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace dsrt::cpu;

namespace {

struct Options : bench::Timing {
  std::vector<std::array<int64_t, 4>> shapes; // batch, T, heads, E
};

Options parse(int argc, char **argv) {
  Options o;
  bench::parseArgs(argc, argv, o,
                   "dsrt_attention_bench [--threads N] [--reps R] [--ms MS] [--shape BxTxHxE]...",
                   [&](const std::string &a, const char *v) {
                     long long d[4] = {0, 0, 0, 0};
                     if (a != "--shape" ||
                         std::sscanf(v, "%lldx%lldx%lldx%lld", &d[0], &d[1], &d[2], &d[3]) != 4 ||
                         d[0] <= 0 || d[1] <= 0 || d[2] <= 0 || d[3] <= 0)
                       return false;
                     o.shapes.push_back({d[0], d[1], d[2], d[3]});
                     return true;
                   });
  if (o.shapes.empty()) {
    std::fprintf(stderr, "dsrt_attention_bench: no --shape given\n");
    std::exit(2);
  }
  return o;
}

/// Milliseconds per call of the best repetition of `call`.
template <class F> double millis(const Options &o, F call) {
  return bench::bestSeconds(o, call) * 1e3;
}

Shape dims(std::initializer_list<int64_t> d) {
  Shape s;
  for (int64_t v : d)
    s.dims[s.rank++] = v;
  return s;
}

/// The kernel's and its GEMMs' times in element type T (float or Bf16).
template <class T> std::array<double, 4> timeAll(const Options &o, int64_t B, int64_t L,
                                                int64_t H, int64_t E) {
  const int64_t n = B * L * H * E;
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> wide(n);
  auto fill = [&] {
    std::vector<T> t(n);
    for (float &v : wide)
      v = d(gen);
    if constexpr (std::is_same_v<T, float>)
      t = wide;
    else
      cast(wide.data(), DType::F32, t.data(), DType::BF16, n);
    return t;
  };
  std::vector<T> q = fill(), k = fill(), v = fill(), dout = fill(), out(n), dq(n), dk(n), dv(n);
  std::vector<float> stats(2 * B * H * L);
  Attention a;
  a.heads = B * H;
  a.T = a.S = L;
  a.E = a.F = E;
  a.scale = 1.0f / std::sqrt(float(E));
  a.causal = true;
  a.bshd = true;
  a.H = H;
  const double fwd = millis(o, [&] { attention(q.data(), k.data(), v.data(), out.data(),
                                               stats.data(), a); });
  attention(q.data(), k.data(), v.data(), out.data(), stats.data(), a);
  const double bwd = millis(o, [&] {
    attentionGrad(dout.data(), q.data(), k.data(), v.data(), stats.data(), dq.data(), dk.data(),
                  dv.data(), a);
  });
  // The GEMMs alone over contiguous heads: [BH, L, E] x [BH, E, L] and back.
  std::vector<T> s(B * H * L * L);
  const Shape qs = dims({B * H, L, E}), ss = dims({B * H, L, L});
  auto mm = [&](const T *x, const Shape &xs, bool tx, const T *y, const Shape &ys, bool ty,
                T *z, const Shape &zs) { matmul(x, xs, tx, y, ys, ty, z, zs); };
  const double gemmFwd = millis(o, [&] {
    mm(q.data(), qs, false, k.data(), qs, true, s.data(), ss);  // Q K^T
    mm(s.data(), ss, false, v.data(), qs, false, out.data(), qs); // P V
  });
  const double gemmBwd = millis(o, [&] {
    mm(q.data(), qs, false, k.data(), qs, true, s.data(), ss);    // the scores again
    mm(s.data(), ss, true, dout.data(), qs, false, dv.data(), qs); // dV = P^T dO
    mm(dout.data(), qs, false, v.data(), qs, true, s.data(), ss); // dP = dO V^T
    mm(s.data(), ss, false, k.data(), qs, false, dq.data(), qs);  // dQ = dS K
    mm(s.data(), ss, true, q.data(), qs, false, dk.data(), qs);   // dK = dS^T Q
  });
  return {fwd, bwd, gemmFwd, gemmBwd};
}

} // namespace

int main(int argc, char **argv) {
  const Options o = parse(argc, argv);
  setNumThreads(o.threads);
  std::printf("{\"threads\": %d, \"bf16_gemm\": \"%s\", \"fp32_gemm\": \"%s\"}\n", numThreads(),
              bf16GemmPath(), gemmBackend());
  for (const auto &[B, L, H, E] : o.shapes) {
    const auto f = timeAll<float>(o, B, L, H, E);
    const auto h = timeAll<Bf16>(o, B, L, H, E);
    std::printf("{\"batch\": %lld, \"seq\": %lld, \"heads\": %lld, \"head_size\": %lld, "
                "\"fp32_fwd\": %.4f, \"fp32_bwd\": %.4f, \"fp32_gemm_fwd\": %.4f, "
                "\"fp32_gemm_bwd\": %.4f, \"bf16_fwd\": %.4f, \"bf16_bwd\": %.4f, "
                "\"bf16_gemm_fwd\": %.4f, \"bf16_gemm_bwd\": %.4f}\n",
                (long long)B, (long long)L, (long long)H, (long long)E, f[0], f[1], f[2], f[3],
                h[0], h[1], h[2], h[3]);
    std::fflush(stdout);
  }
  return 0;
}
