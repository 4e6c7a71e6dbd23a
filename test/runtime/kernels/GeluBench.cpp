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
#include "runtime/kernels/cpu/Kernels.h"

#include <omp.h>
#include <xmmintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace dsrt::cpu;

namespace {

struct Options {
  int threads = 2, reps = 7;
  double ms = 200;
  int64_t rows = 1024, cols = 1536;
};

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: dsrt_gelu_bench [--threads N] [--reps R] "
                       "[--ms MS] [--shape RxC]\n");
  std::exit(2);
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc)
      usage();
    const char *v = argv[++i];
    if (a == "--threads") {
      o.threads = std::atoi(v);
    } else if (a == "--reps") {
      o.reps = std::atoi(v);
    } else if (a == "--ms") {
      o.ms = std::atof(v);
    } else if (a == "--shape") {
      long long r = 0, c = 0;
      if (std::sscanf(v, "%lldx%lld", &r, &c) != 2 || r <= 0 || c <= 0)
        usage();
      o.rows = r;
      o.cols = c;
    } else {
      usage();
    }
  }
  if (o.threads <= 0 || o.reps <= 0 || o.ms <= 0)
    usage();
  return o;
}

/// Milliseconds per call of the best repetition of `call`.
template <class F> double msPerCall(const Options &o, F call) {
  call(); // warm-up: page faults, thread pool
  auto now = [] { return std::chrono::steady_clock::now(); };
  auto t0 = now();
  call();
  const double once = std::chrono::duration<double>(now() - t0).count();
  const int calls = std::max(1, int(o.ms / 1e3 / std::max(once, 1e-9)));
  double best = 1e30;
  for (int r = 0; r < o.reps; ++r) {
    t0 = now();
    for (int i = 0; i < calls; ++i)
      call();
    best = std::min(best,
                    std::chrono::duration<double>(now() - t0).count() / calls);
  }
  return best * 1e3;
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
void bench(const Options &o, const char *name, Tensors<T> &t) {
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
  bench(o, "fp32", f32);
  Tensors<Bf16> b16(x, dy, DType::BF16);
  bench(o, "bf16", b16);
  Tensors<Fp16> f16(x, dy, DType::F16);
  bench(o, "fp16", f16);
  return 0;
}
