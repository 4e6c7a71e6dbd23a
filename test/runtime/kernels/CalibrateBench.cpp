//===- CalibrateBench.cpp - this machine's memory and link rates ------------===//
//
// dsrt_calibrate_bench: the timing half of bench/calibrate.py, which fits
// the hardware file dsc --simulate reads (with dsrt_gemm_bench's GEMMs).
// One JSON object per line, each the best of --reps timed repetitions.
//
//   dsrt_calibrate_bench memory --threads T
//       an elementwise add (two float inputs, one output) of 1K to 16M
//       elements through dsrt's CPU kernel: seconds per call and bytes moved
//   dsrt_calibrate_bench gemm --threads T --shape MxKxN...
//       a linear layer's forward, dx and dW GEMMs in fp32 and bf16, with
//       operands that are not in the core's caches: seconds per call
//   dsrt_calibrate_bench kernels --threads T
//       the elementwise kernels whose arithmetic sets their time (GELU,
//       exp, softmax, layer norm, dropout's random bits, ...) on 256K
//       elements: seconds per call
//   mpirun -np 2 dsrt_calibrate_bench comm
//       dsrt's MPI all-reduce, all-gather and a message between the two
//       ranks, 4 KiB to 64 MiB: seconds per collective (rank 0 prints)
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/kernels/cpu/Kernels.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace dsrt;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Seconds per call: the best of `reps` runs of enough calls to last
/// about 100 ms, after a warm-up call. `agree` makes the ranks of a
/// collective use the same numbers (the identity for a local call).
template <class F, class Agree> double timeCall(int reps, F call, Agree agree) {
  call();
  double t0 = now();
  call();
  const double once = agree(std::max(now() - t0, 1e-9));
  const int calls = std::max(1, std::min(100000, int(0.1 / once)));
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    t0 = now();
    for (int i = 0; i < calls; ++i)
      call();
    best = std::min(best, (now() - t0) / calls);
  }
  return agree(best);
}

template <class F> double timeCall(int reps, F call) {
  return timeCall(reps, call, [](double x) { return x; });
}

/// How many copies of a call's operands (`bytes` together) to cycle
/// through so that a call does not find them in the core's own caches, as
/// an instruction of a training step seldom does: 24 MB in all.
size_t copiesFor(double bytes) {
  return size_t(std::clamp(24e6 / bytes, 1.0, 64.0));
}

int memory(int threads, int reps) {
  cpu::setNumThreads(threads);
  for (int64_t n = 1024; n <= (int64_t(1) << 24); n *= 4) {
    const size_t N = static_cast<size_t>(n), k = copiesFor(12.0 * double(n));
    std::vector<std::vector<float>> a(k, std::vector<float>(N, 1.0f)),
        b(k, std::vector<float>(N, 2.0f)), c(k, std::vector<float>(N));
    cpu::Shape s;
    s.rank = 1;
    s.dims[0] = n;
    size_t i = 0;
    double sec = timeCall(reps, [&] {
      ++i;
      cpu::binary(cpu::Binary::Add, a[i % k].data(), s, b[i % k].data(), s, c[i % k].data(), s);
    });
    std::printf("{\"kind\": \"add\", \"threads\": %d, \"elements\": %lld, \"bytes\": %lld, "
                "\"seconds\": %.9g}\n",
                threads, (long long)n, (long long)(12 * n), sec);
    std::fflush(stdout);
  }
  return 0;
}

/// Seconds per element of the elementwise instructions whose arithmetic,
/// not their bytes, sets their time (transcendentals, random bits, row
/// statistics), their operands cycled as memory()'s are.
int arithmetic(int threads, int reps) {
  cpu::setNumThreads(threads);
  const int64_t n = 1 << 18, cols = 512, rows = n / cols;
  const size_t N = static_cast<size_t>(n), C = static_cast<size_t>(cols);
  const size_t k = copiesFor(13.0 * double(n));
  std::vector<std::vector<float>> xs(k, std::vector<float>(N)), ys(k, std::vector<float>(N)),
      dys(k, std::vector<float>(N, 0.5f));
  std::vector<std::vector<uint8_t>> masks(k, std::vector<uint8_t>(N));
  std::vector<float> g(C, 1.0f), dg(C), db(C);
  for (auto &x : xs)
    for (int64_t i = 0; i < n; ++i)
      x[size_t(i)] = float(i % 97) / 50.0f - 1.0f;
  uint64_t counter = 0;
  size_t next = 0;
  float *x = nullptr, *y = nullptr, *dy = nullptr;
  uint8_t *mask = nullptr;
  // Each timed call first takes the next copy of the operands.
  auto timeCall = [&](int reps, auto call) {
    return ::timeCall(reps, [&] {
      size_t j = next++ % k;
      x = xs[j].data(), y = ys[j].data(), dy = dys[j].data(), mask = masks[j].data();
      call();
    });
  };
  auto report = [&](const char *op, double sec) {
    std::printf("{\"kind\": \"kernel\", \"op\": \"%s\", \"threads\": %d, \"elements\": %lld, "
                "\"seconds\": %.9g}\n",
                op, threads, (long long)n, sec);
    std::fflush(stdout);
  };
  report("nn.gelu", timeCall(reps, [&] { cpu::unary(cpu::Unary::GeluErf, x, y, n); }));
  report("nn.gelu_grad",
         timeCall(reps, [&] { cpu::geluGrad(false, x, dy, y, n); }));
  report("nn.exp", timeCall(reps, [&] { cpu::unary(cpu::Unary::Exp, x, y, n); }));
  report("nn.tanh", timeCall(reps, [&] { cpu::unary(cpu::Unary::Tanh, x, y, n); }));
  report("nn.erf", timeCall(reps, [&] { cpu::unary(cpu::Unary::Erf, x, y, n); }));
  report("nn.sigmoid",
         timeCall(reps, [&] { cpu::unary(cpu::Unary::Sigmoid, x, y, n); }));
  report("nn.softmax", timeCall(reps, [&] { cpu::softmax(x, y, rows, cols, 1); }));
  report("nn.softmax_grad",
         timeCall(reps, [&] { cpu::softmaxGrad(x, dy, y, rows, cols, 1); }));
  report("nn.layer_norm", timeCall(reps, [&] {
           cpu::layerNorm(x, g.data(), nullptr, y, rows, cols, 1e-5f);
         }));
  report("nn.layer_norm_grad", timeCall(reps, [&] {
           cpu::layerNormGrad(dy, x, g.data(), y, dg.data(), db.data(), rows,
                              cols, 1e-5f);
         }));
  report("nn.dropout", timeCall(reps, [&] {
           cpu::dropout(x, y, mask, n, 0.1f, 1, 2, ++counter);
         }));
  report("nn.dropout_grad",
         timeCall(reps, [&] { cpu::dropoutGrad(dy, mask, y, n, 0.1f); }));
  return 0;
}

cpu::Shape mat(int64_t r, int64_t c) {
  cpu::Shape s;
  s.rank = 2;
  s.dims[0] = r;
  s.dims[1] = c;
  return s;
}

/// A linear layer's three GEMMs (y = x W, dx = dy W^T, dW += x^T dy) on an
/// m x k x n shape, fp32 and bf16 (bf16 results, a float dW), operands
/// cycled as memory()'s are: seconds per call.
int gemms(int threads, int reps, const std::vector<std::array<int64_t, 3>> &shapes) {
  cpu::setNumThreads(threads);
  for (const auto &[m, k, n] : shapes) {
    const size_t MK = size_t(m * k), KN = size_t(k * n), MN = size_t(m * n);
    const size_t copies = copiesFor(4.0 * double(MK + KN + MN));
    std::vector<std::vector<float>> a(copies, std::vector<float>(MK, 0.5f)),
        b(copies, std::vector<float>(KN, 0.25f)), c(copies, std::vector<float>(MN));
    std::vector<std::vector<cpu::Bf16>> ah(copies, std::vector<cpu::Bf16>(MK)),
        bh(copies, std::vector<cpu::Bf16>(KN)), ch(copies, std::vector<cpu::Bf16>(MN));
    for (size_t j = 0; j < copies; ++j) {
      cpu::cast(a[j].data(), cpu::DType::F32, ah[j].data(), cpu::DType::BF16, int64_t(MK));
      cpu::cast(b[j].data(), cpu::DType::F32, bh[j].data(), cpu::DType::BF16, int64_t(KN));
    }
    const cpu::Shape as = mat(m, k), bs = mat(k, n), cs = mat(m, n);
    size_t i = 0;
    auto form = [&](const char *dtype, const char *which, auto call) {
      double sec = timeCall(reps, [&] { call(++i % copies); });
      std::printf("{\"kind\": \"gemm\", \"dtype\": \"%s\", \"form\": \"%s\", \"threads\": %d, "
                  "\"m\": %lld, \"k\": %lld, \"n\": %lld, \"flops\": %.0f, \"seconds\": %.9g}\n",
                  dtype, which, threads, (long long)m, (long long)k, (long long)n,
                  2.0 * double(m) * double(k) * double(n), sec);
      std::fflush(stdout);
    };
    // The float dW accumulates into b (as a float gradient) in both types.
    auto threeForms = [&](const char *dtype, auto &A, auto &B, auto &C) {
      form(dtype, "y", [&](size_t j) {
        cpu::matmul(A[j].data(), as, false, B[j].data(), bs, false, C[j].data(), cs);
      });
      form(dtype, "dx", [&](size_t j) {
        cpu::matmul(C[j].data(), cs, false, B[j].data(), bs, true, A[j].data(), as);
      });
      form(dtype, "dw", [&](size_t j) {
        cpu::matmul(A[j].data(), as, true, C[j].data(), cs, false, b[j].data(), bs, 1.0f, 1.0f);
      });
    };
    threeForms("f32", a, b, c);
    threeForms("bf16", ah, bh, ch);
  }
  return 0;
}

int links(int reps) {
  comm::MpiCommunicator c(60);
  // The ranks must make the same calls: they agree on the count (the
  // slowest rank's), and report the slowest rank's time.
  auto timeCollective = [&](auto call) {
    return timeCall(reps, call,
                    [&](double x) { return c.blockingAllReduceScalar(x, comm::ReduceOp::Max); });
  };
  const int64_t most = int64_t(16) << 20; // floats: 64 MiB
  comm::Reservation r;
  r.stagingElements = 2 * most;
  c.reserve(r);
  std::vector<float> in(size_t(most), 1.0f), out(size_t(most * c.size()));
  for (int64_t n = 1024; n <= most; n *= 4) {
    comm::TensorArg t;
    t.in = in.data();
    t.out = out.data();
    t.n = n;
    double reduce = timeCollective([&] { c.wait(c.allReduce(&t, 1, comm::ReduceOp::Sum)); });
    comm::TensorArg g = t;
    g.n = n / c.size();
    g.outN = n;
    double gather = timeCollective([&] { c.wait(c.allGather(&g, 1)); });
    // A message from rank 0 to rank 1 and back (half of it is one way).
    double pingpong = timeCollective([&] {
      const size_t bytes = size_t(n) * 4;
      if (c.rank() == 0) {
        c.wait(c.send(in.data(), bytes, 1, 7));
        c.wait(c.recv(out.data(), bytes, 1, 8));
      } else if (c.rank() == 1) {
        c.wait(c.recv(out.data(), bytes, 0, 7));
        c.wait(c.send(in.data(), bytes, 0, 8));
      }
    });
    if (c.rank() == 0) {
      std::printf("{\"kind\": \"all_reduce\", \"ranks\": %d, \"bytes\": %lld, \"seconds\": %.9g}\n",
                  c.size(), (long long)(4 * n), reduce);
      std::printf("{\"kind\": \"all_gather\", \"ranks\": %d, \"bytes\": %lld, \"seconds\": %.9g}\n",
                  c.size(), (long long)(4 * n), gather);
      std::printf("{\"kind\": \"send\", \"ranks\": %d, \"bytes\": %lld, \"seconds\": %.9g}\n",
                  c.size(), (long long)(4 * n), pingpong / 2);
      std::fflush(stdout);
    }
  }
  return 0;
}

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: dsrt_calibrate_bench memory|kernels [--threads T] [--reps R]\n"
                       "       dsrt_calibrate_bench gemm [--threads T] [--reps R] --shape MxKxN...\n"
                       "       mpirun -np 2 dsrt_calibrate_bench comm [--reps R]\n");
  std::exit(2);
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2)
    usage();
  const std::string what = argv[1];
  int threads = 1, reps = 5;
  std::vector<std::array<int64_t, 3>> shapes;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc)
      usage();
    if (a == "--shape") {
      long long m = 0, k = 0, n = 0;
      if (std::sscanf(argv[++i], "%lldx%lldx%lld", &m, &k, &n) != 3 || m <= 0 || k <= 0 || n <= 0)
        usage();
      shapes.push_back({m, k, n});
      continue;
    }
    const int v = std::atoi(argv[++i]);
    if (v <= 0)
      usage();
    if (a == "--threads")
      threads = v;
    else if (a == "--reps")
      reps = v;
    else
      usage();
  }
  try {
    if (what == "memory")
      return memory(threads, reps);
    if (what == "kernels")
      return arithmetic(threads, reps);
    if (what == "gemm")
      return gemms(threads, reps, shapes);
    if (what == "comm") {
      cpu::setNumThreads(1);
      int rc = links(reps);
      comm::finalizeMpi();
      return rc;
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "dsrt_calibrate_bench: %s\n", e.what());
    return 1;
  }
  usage();
}
