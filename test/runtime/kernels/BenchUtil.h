//===- BenchUtil.h - what the kernel benches share ---------------*- C++ -*-===//
//
// The timing options every kernel bench takes (--threads, --reps, --ms) and
// the timing itself: the best of `reps` repetitions of enough back-to-back
// calls to last about `ms` milliseconds, after a warm-up call (primitive
// creation, page faults, the thread pool). Other processes on a shared
// machine only ever make a repetition slower, hence the best.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_TEST_KERNELS_BENCHUTIL_H
#define DSRT_TEST_KERNELS_BENCHUTIL_H

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace dsrt::cpu::bench {

struct Timing {
  int threads = 2, reps = 7;
  double ms = 200;
};

/// Parses `--flag value` pairs: the timing options into `t`, every other
/// flag through other(flag, value), which returns false for one it does
/// not know. Prints `usage` and exits 2 on anything malformed.
template <class F> void parseArgs(int argc, char **argv, Timing &t, const char *usage, F other) {
  auto fail = [&] {
    std::fprintf(stderr, "usage: %s\n", usage);
    std::exit(2);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc)
      fail();
    const char *v = argv[++i];
    if (a == "--threads")
      t.threads = std::atoi(v);
    else if (a == "--reps")
      t.reps = std::atoi(v);
    else if (a == "--ms")
      t.ms = std::atof(v);
    else if (!other(a, v))
      fail();
  }
  if (t.threads <= 0 || t.reps <= 0 || t.ms <= 0)
    fail();
}

/// Seconds per call of the best repetition of `call`.
template <class F> double bestSeconds(const Timing &t, F call) {
  call();
  auto now = [] { return std::chrono::steady_clock::now(); };
  auto t0 = now();
  call();
  const double once = std::chrono::duration<double>(now() - t0).count();
  const int calls = std::max(1, int(t.ms / 1e3 / std::max(once, 1e-9)));
  double best = 1e30;
  for (int r = 0; r < t.reps; ++r) {
    t0 = now();
    for (int i = 0; i < calls; ++i)
      call();
    best = std::min(best, std::chrono::duration<double>(now() - t0).count() / calls);
  }
  return best;
}

} // namespace dsrt::cpu::bench

#endif // DSRT_TEST_KERNELS_BENCHUTIL_H
