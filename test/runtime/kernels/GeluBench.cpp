//===- GeluBench.cpp - timing of dsrt's GELU forward and backward ---------===//
//
// dsrt_gelu_bench: the timing half of bench/gelu.py (which times PyTorch's
// gelu and gelu_backward on the same shape and dtypes in the same run).
// For each dtype (fp32, bf16, fp16) it times dsrt::cpu::unary(GeluErf) and
// geluGrad(tanhApprox false), and the tanh variants for comparison, on an
// R x C tensor of N(0, 1) inputs (a pre-activation's typical range); one
// JSON object per line, milliseconds per call.
//
//   dsrt_gelu_bench --threads 2 --reps 7 --ms 200 --shape 1024x1536
//
// Each figure is the best of --reps timed repetitions of enough calls to
// last about --ms milliseconds, after a warm-up call. The kernel threads
// flush denormals to zero, as dsrt's do.
//
//===----------------------------------------------------------------------===//
#include "BenchUtil.h"
#include "runtime/kernels/cpu/Kernels.h"

#include <omp.h>
#include <xmmintrin.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace dsrt::cpu;

namespace {

struct Options : bench::Timing {
  int64_t rows = 1024, cols = 1536;
};

Options parse(int argc, char **argv) {
  Options o;
  bench::parseArgs(argc, argv, o, "dsrt_gelu_bench [--threads N] [--reps R] [--ms MS] [--shape RxC]",
                   [&](const std::string &a, const char *v) {
                     long long r = 0, c = 0;
                     if (a != "--shape" || std::sscanf(v, "%lldx%lld", &r, &c) != 2 || r <= 0 ||
                         c <= 0)
                       return false;
                     o.rows = r;
                     o.cols = c;
                     return true;
                   });
  return o;
}

/// Milliseconds per call of the best repetition of `call`.
template <class F> double msPerCall(const Options &o, F call) {
  return bench::bestSeconds(o, call) * 1e3;
}

/// x, dy and the outputs of one dtype; 16-bit inputs are the float ones
/// rounded.
template <class T> struct Tensors {
  std::vector<T> x, dy, y, dx;
  Tensors(const std::vector<float> &xf, const std::vector<float> &dyf, DType dt)
      : x(xf.size()), dy(xf.size()), y(xf.size()), dx(xf.size()) {
    const int64_t n = int64_t(xf.size());
    cast(xf.data(), DType::F32, x.data(), dt, n);
    cast(dyf.data(), DType::F32, dy.data(), dt, n);
  }
};

template <class T>
void timeGelu(const Options &o, const char *name, Tensors<T> &t) {
  const int64_t n = int64_t(t.x.size());
  const double fwd =
      msPerCall(o, [&] { unary(Unary::GeluErf, t.x.data(), t.y.data(), n); });
  const double bwd = msPerCall(o, [&] {
    geluGrad(false, t.x.data(), t.dy.data(), t.dx.data(), n);
  });
  const double fwdTanh =
      msPerCall(o, [&] { unary(Unary::GeluTanh, t.x.data(), t.y.data(), n); });
  const double bwdTanh = msPerCall(o, [&] {
    geluGrad(true, t.x.data(), t.dy.data(), t.dx.data(), n);
  });
  std::printf("{\"dtype\": \"%s\", \"rows\": %lld, \"cols\": %lld, "
              "\"erf_fwd_ms\": %.4f, \"erf_bwd_ms\": %.4f, "
              "\"tanh_fwd_ms\": %.4f, \"tanh_bwd_ms\": %.4f}\n",
              name, (long long)o.rows, (long long)o.cols, fwd, bwd, fwdTanh,
              bwdTanh);
  std::fflush(stdout);
}

} // namespace

int main(int argc, char **argv) {
  const Options o = parse(argc, argv);
  setNumThreads(o.threads);
#pragma omp parallel
  _mm_setcsr(_mm_getcsr() | 0x8040);
  std::printf("{\"threads\": %d, \"bf16_path\": \"%s\"}\n", numThreads(),
              bf16Path());
  const int64_t n = o.rows * o.cols;
  std::vector<float> x(n), dy(n);
  std::mt19937 gen(1);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (float &v : x)
    v = d(gen);
  for (float &v : dy)
    v = d(gen);
  Tensors<float> f32(x, dy, DType::F32);
  timeGelu(o, "fp32", f32);
  Tensors<Bf16> b16(x, dy, DType::BF16);
  timeGelu(o, "bf16", b16);
  Tensors<Fp16> f16(x, dy, DType::F16);
  timeGelu(o, "fp16", f16);
  return 0;
}
