//===- AdamBench.cpp - dsrt's CPU Adam step against memory bandwidth -----===//
//
// For each parameter count: AdamW over fp32 p, g, m, v (cpu::adam, all
// threads), median of --reps after two warm-up steps, as parameters per
// second; and a threaded copy of one 1 GiB buffer into another, the
// bandwidth that bounds the step (Adam reads 16 bytes and writes 12 per
// parameter). bench/cpu_adam.py runs this next to torch.optim in one run.
//
//   dsrt_adam_bench [--reps R] N...      (N: parameters, e.g. 10000000)
//
// Prints per count "adam N params_per_s" and "stream N params_per_s" (the
// same reads and writes, p += g, m += g, v += g, without the math: the
// bound of a step that streams its state once), then "copy bytes_per_s"
// (a threaded memcpy: bytes read plus bytes written per second).
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Kernels.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {
float *alloc(size_t n, float v) {
  auto *p = static_cast<float *>(std::aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64));
  // First touch by the threads that will use the pages.
#pragma omp parallel for schedule(static)
  for (long long i = 0; i < (long long)n; ++i)
    p[i] = v + float(i % 1000) * 1e-6f;
  return p;
}
double seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
} // namespace

int main(int argc, char **argv) {
  int reps = 5;
  std::vector<long long> sizes;
  for (int k = 1; k < argc; ++k) {
    std::string a = argv[k];
    if (a == "--reps" && k + 1 < argc)
      reps = std::atoi(argv[++k]);
    else
      sizes.push_back(std::atoll(a.c_str()));
  }
  if (sizes.empty())
    sizes = {10000000, 50000000};
  for (long long n : sizes) {
    float *p = alloc(size_t(n), 0.5f), *g = alloc(size_t(n), 0.01f), *m = alloc(size_t(n), 0.0f),
          *v = alloc(size_t(n), 0.0f);
    std::vector<double> t;
    for (int r = 0; r < reps + 2; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      dsrt::cpu::adam(p, g, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, true, true, r + 1);
      if (r >= 2)
        t.push_back(seconds(t0));
    }
    std::sort(t.begin(), t.end());
    std::printf("adam %lld %.6e\n", n, double(n) / t[t.size() / 2]);
    // The same traffic without the math: read p, g, m, v, write p, m, v.
    t.clear();
    for (int r = 0; r < reps + 2; ++r) {
      auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static)
      for (long long i = 0; i < n; ++i) {
        const float gi = g[i];
        p[i] += gi;
        m[i] += gi;
        v[i] += gi;
      }
      if (r >= 2)
        t.push_back(seconds(t0));
    }
    std::sort(t.begin(), t.end());
    std::printf("stream %lld %.6e\n", n, double(n) / t[t.size() / 2]);
    for (float *q : {p, g, m, v})
      std::free(q);
  }
  // The copy: 1 GiB, threaded like the kernels.
  const size_t bytes = size_t(1) << 30, n = bytes / sizeof(float);
  float *a = alloc(n, 1.0f), *b = alloc(n, 0.0f);
  std::vector<double> t;
  for (int r = 0; r < reps + 2; ++r) {
    auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel
    {
      size_t parts = size_t(omp_get_num_threads()), k = size_t(omp_get_thread_num());
      size_t chunk = (n + parts - 1) / parts, lo = std::min(n, k * chunk),
             hi = std::min(n, lo + chunk);
      std::memcpy(b + lo, a + lo, (hi - lo) * sizeof(float));
    }
    if (r >= 2)
      t.push_back(seconds(t0));
  }
  std::sort(t.begin(), t.end());
  std::printf("copy %.6e\n", 2.0 * double(bytes) / t[t.size() / 2]);
  std::free(a);
  std::free(b);
  return 0;
}
