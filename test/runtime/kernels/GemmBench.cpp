//===- GemmBench.cpp - timing of dsrt's float and bf16 GEMMs --------------===//
//
// dsrt_gemm_bench: the timing half of bench/bf16_gemm.py (which runs
// PyTorch on the same shapes in the same run and writes the tables). For
// each [B x] M x K x N it times dsrt::cpu::matmul on float operands, on bf16
// operands with a float result and with a bf16 result, and for B = 1 also
// the two backward GEMMs of a linear layer (dx = dy W^T into dx's type;
// dW += x^T dy into a float gradient, beta 1) and, in bf16, dx scaled by
// a GELU derivative with the column sums of the previous layer's bias
// gradient, summed after it by reduce (the unfused plan) or by the
// epilogue as it stores dx (matmul-epilogue's column_sum); one JSON object
// per line.
// --peak S adds square bf16 GEMMs of sizes 512, 1024, ... up to S, the best
// of which is the machine's bf16 GEMM peak as oneDNN reaches it.
//
//   dsrt_gemm_bench --threads 2 --reps 7 --shape 1024x384x1152 --peak 2048
//
// Each figure is the best of --reps timed repetitions of enough calls to
// last about --ms milliseconds, after a warm-up call that also creates the
// cached oneDNN primitive.
//
//===----------------------------------------------------------------------===//
#include "BenchUtil.h"
#include "runtime/kernels/cpu/Kernels.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace dsrt::cpu;

namespace {

struct Options : bench::Timing {
  int peak = 0;
  std::vector<std::array<int64_t, 4>> shapes; // batch, m, k, n
};

Options parse(int argc, char **argv) {
  Options o;
  bench::parseArgs(
      argc, argv, o, "dsrt_gemm_bench [--threads N] [--reps R] [--ms MS] [--shape [Bx]MxKxN]... [--peak S]",
      [&](const std::string &a, const char *v) {
        if (a == "--peak") {
          o.peak = std::atoi(v);
          return true;
        }
        long long d[4] = {1, 0, 0, 0};
        const int got = a == "--shape" ? std::sscanf(v, "%lldx%lldx%lldx%lld", &d[0], &d[1],
                                                     &d[2], &d[3])
                                       : 0;
        if (got == 3) { // MxKxN
          d[0] = 1;
          std::sscanf(v, "%lldx%lldx%lld", &d[1], &d[2], &d[3]);
        }
        if ((got != 3 && got != 4) || d[0] <= 0 || d[1] <= 0 || d[2] <= 0 || d[3] <= 0)
          return false;
        o.shapes.push_back({d[0], d[1], d[2], d[3]});
        return true;
      });
  return o;
}

/// [batch x] r x c (rank 2 when batch is 1).
Shape mat(int64_t r, int64_t c, int64_t batch = 1) {
  Shape s;
  if (batch > 1)
    s.dims[s.rank++] = batch;
  s.dims[s.rank++] = r;
  s.dims[s.rank++] = c;
  return s;
}

/// GFLOP/s of the best repetition of `call`.
template <class F> double gflops(const Options &o, double flops, F call) {
  return flops / bench::bestSeconds(o, call) / 1e9;
}

/// A, B, C of a [batch x] m x k x n GEMM in float and bf16, with
/// operands uniform in [-1, 1).
struct Operands {
  std::vector<float> a, b, c;
  std::vector<Bf16> ah, bh, ch;
  Operands(int64_t m, int64_t k, int64_t n, int64_t batch = 1)
      : a(batch * m * k), b(batch * k * n), c(batch * m * n), ah(a.size()),
        bh(b.size()), ch(c.size()) {
    std::mt19937 gen(1);
    std::uniform_real_distribution<float> d(-1, 1);
    for (float &v : a)
      v = d(gen);
    for (float &v : b)
      v = d(gen);
    for (float &v : c)
      v = d(gen);
    cast(a.data(), DType::F32, ah.data(), DType::BF16, int64_t(a.size()));
    cast(b.data(), DType::F32, bh.data(), DType::BF16, int64_t(b.size()));
    cast(c.data(), DType::F32, ch.data(), DType::BF16, int64_t(c.size()));
  }
};

} // namespace

int main(int argc, char **argv) {
  const Options o = parse(argc, argv);
  setNumThreads(o.threads);
  std::printf("{\"threads\": %d, \"bf16_path\": \"%s\", \"bf16_gemm\": \"%s\", "
              "\"fp32_gemm\": \"%s\"}\n",
              numThreads(), bf16Path(), bf16GemmPath(), gemmBackend());
  for (const auto &[batch, m, k, n] : o.shapes) {
    Operands x(m, k, n, batch);
    const Shape as = mat(m, k, batch), bs = mat(k, n, batch),
                cs = mat(m, n, batch);
    const double flops = 2.0 * double(batch * m) * double(k) * double(n);
    const double f32 = gflops(o, flops, [&] {
      matmul(x.a.data(), as, false, x.b.data(), bs, false, x.c.data(), cs);
    });
    const double bf16f32 = gflops(o, flops, [&] {
      matmul(x.ah.data(), as, false, x.bh.data(), bs, false, x.c.data(), cs);
    });
    const double bf16 = gflops(o, flops, [&] {
      matmul(x.ah.data(), as, false, x.bh.data(), bs, false, x.ch.data(), cs);
    });
    std::printf("{\"batch\": %lld, \"m\": %lld, \"k\": %lld, \"n\": %lld, "
                "\"fp32\": %.1f, \"bf16_out_fp32\": %.1f, \"bf16\": %.1f",
                (long long)batch, (long long)m, (long long)k, (long long)n, f32,
                bf16f32, bf16);
    if (batch == 1) {
      // The linear layer x[m,k] W[k,n] = y[m,n] backwards: dx = dy W^T
      // (into the operands' type), dW += x^T dy (a float gradient).
      const double dx32 = gflops(o, flops, [&] {
        matmul(x.c.data(), cs, false, x.b.data(), bs, true, x.a.data(), as);
      });
      const double dx16 = gflops(o, flops, [&] {
        matmul(x.ch.data(), cs, false, x.bh.data(), bs, true, x.ah.data(), as);
      });
      const double dw32 = gflops(o, flops, [&] {
        matmul(x.a.data(), as, true, x.c.data(), cs, false, x.b.data(), bs,
               1.0f, 1.0f);
      });
      const double dw16 = gflops(o, flops, [&] {
        matmul(x.ah.data(), as, true, x.ch.data(), cs, false, x.b.data(), bs,
               1.0f, 1.0f);
      });
      // dx * gelu'(h) and its column sums (fc1's bias gradient), in
      // GFLOP/s of the GEMM alone: the sum's cost shows as a lower rate.
      std::vector<Bf16> dx(x.ah.size()), sum(static_cast<size_t>(k));
      std::vector<float> wide(static_cast<size_t>(k));
      const double sumAfter = gflops(o, flops, [&] {
        matmulEpilogue(x.ch.data(), cs, false, x.bh.data(), bs, true, nullptr, x.ah.data(),
                       nullptr, dx.data(), as);
        reduce(Reduce::Sum, dx.data(), as, 1, wide.data());
        cast(wide.data(), DType::F32, sum.data(), DType::BF16, k);
      });
      const double summing = gflops(o, flops, [&] {
        matmulEpilogue(x.ch.data(), cs, false, x.bh.data(), bs, true, nullptr, x.ah.data(),
                       nullptr, dx.data(), as, sum.data());
      });
      std::printf(", \"fp32_dx\": %.1f, \"bf16_dx\": %.1f, \"fp32_dw\": %.1f, "
                  "\"bf16_dw\": %.1f, \"bf16_dx_sum_after\": %.1f, \"bf16_dx_summing\": %.1f",
                  dx32, dx16, dw32, dw16, sumAfter, summing);
    }
    std::printf("}\n");
    std::fflush(stdout);
  }
  if (o.peak > 0) {
    double best = 0;
    int bestSize = 0;
    for (int s = 512; s <= o.peak; s += 512) {
      Operands x(s, s, s);
      const Shape q = mat(s, s);
      const double flops = 2.0 * s * double(s) * s;
      const double g32 = gflops(o, flops, [&] {
        matmul(x.ah.data(), q, false, x.bh.data(), q, false, x.c.data(), q);
      });
      const double g16 = gflops(o, flops, [&] {
        matmul(x.ah.data(), q, false, x.bh.data(), q, false, x.ch.data(), q);
      });
      const double g = std::max(g32, g16);
      std::printf("{\"square\": %d, \"bf16_out_fp32\": %.1f, \"bf16\": %.1f}\n",
                  s, g32, g16);
      if (g > best) {
        best = g;
        bestSize = s;
      }
    }
    std::printf("{\"peak_bf16\": %.1f, \"peak_size\": %d}\n", best, bestSize);
  }
  return 0;
}
