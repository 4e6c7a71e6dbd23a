//===- AdamBench.cpp - dsrt's CPU Adam step against memory bandwidth -----===//
//
// For each parameter count: AdamW over fp32 p, g, m, v (cpu::adam, all
// threads), median of --reps after two warm-up steps, as parameters per
// second; and a threaded copy of one 1 GiB buffer into another, the
// bandwidth that bounds the step (Adam reads 16 bytes and writes 12 per
// parameter). bench/cpu_adam.py runs this next to torch.optim in one run.
//
//   dsrt_adam_bench [--reps R] N...      (N: parameters, e.g. 10000000)
//   dsrt_adam_bench [--reps R] --tensors N1,N2,... [--bf16] [--lamb]
//
// Prints per count "adam N params_per_s" and "stream N params_per_s" (the
// same reads and writes, p += g, m += g, v += g, without the math: the
// bound of a step that streams its state once), then "copy bytes_per_s"
// (a threaded memcpy: bytes read plus bytes written per second).
//
// With --tensors, a model's step over those parameter tensors, clipped to
// a global norm (issue 47, item 3): "clipped_unfused" is what an unfused
// plan runs (per tensor the sum of squares, then per tensor the clip's
// scale() and adam()), "clipped_fused" the fused plan's (the sums of
// squares, then one fusedAdam() applying the factor as it reads); each as
// parameters per second. With --bf16 the gradients are bf16, as a mixed
// precision step's are: the unfused step first casts each to fp32 (the
// plan's nn.cast), the fused one reads them narrow. With --lamb the update
// is DeepSpeed's LAMB: unfused per tensor scale(), lambStats() and lamb();
// fused one fusedLambStats() and one fusedLamb() over all of them.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Kernels.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
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
/// The --tensors step, unfused and fused; prints both rates.
int clippedStep(const std::string &list, int reps, bool bf16, bool lamb) {
  std::vector<long long> ns;
  for (size_t at = 0; at < list.size();) {
    size_t comma = std::min(list.find(',', at), list.size());
    ns.push_back(std::atoll(list.substr(at, comma - at).c_str()));
    at = comma + 1;
  }
  long long total = 0;
  std::vector<float *> p, g, m, v;
  std::vector<std::vector<dsrt::cpu::Bf16>> narrow;
  for (long long n : ns) {
    total += n;
    p.push_back(alloc(size_t(n), 0.5f));
    g.push_back(alloc(size_t(n), 0.01f));
    if (bf16) {
      narrow.emplace_back(size_t(n));
      dsrt::cpu::cast(g.back(), dsrt::cpu::DType::F32, narrow.back().data(),
                      dsrt::cpu::DType::BF16, n);
    }
    m.push_back(alloc(size_t(n), 0.0f));
    v.push_back(alloc(size_t(n), 0.0f));
  }
  const float maxNorm = 1e-3f; // below the norm: the clip scales
  bool fusedNow = false;
  auto norm = [&] { // train.clip_coef's / clip_grad_norm's one pass over all
    std::vector<dsrt::cpu::SquaresOf> ts;
    for (size_t k = 0; k < ns.size(); ++k)
      ts.push_back(bf16 && fusedNow
                       ? dsrt::cpu::SquaresOf{narrow[k].data(), dsrt::cpu::DType::BF16, ns[k]}
                       : dsrt::cpu::SquaresOf{g[k], dsrt::cpu::DType::F32, ns[k]});
    double sq = dsrt::cpu::sumSquares(ts.data(), ts.size());
    return float(std::min(1.0, maxNorm / (std::sqrt(sq) + 1e-6)));
  };
  for (int fused = 0; fused < 2; ++fused) {
    std::vector<double> t;
    for (int r = 0; r < reps + 2; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      fusedNow = fused;
      if (bf16 && !fused) // the plan's widening of each gradient
        for (size_t k = 0; k < ns.size(); ++k)
          dsrt::cpu::cast(narrow[k].data(), dsrt::cpu::DType::BF16, g[k],
                          dsrt::cpu::DType::F32, ns[k]);
      const float coef = norm();
      std::vector<std::array<float, 2>> sums(ns.size());
      if (fused) {
        std::vector<dsrt::cpu::AdamTensor> ts;
        for (size_t k = 0; k < ns.size(); ++k)
          ts.push_back({p[k], bf16 ? static_cast<const void *>(narrow[k].data()) : g[k],
                        bf16 ? dsrt::cpu::AdamTensor::Grad::BF16
                             : dsrt::cpu::AdamTensor::Grad::F32,
                        m[k], v[k], ns[k]});
        if (lamb) {
          std::vector<float *> out;
          for (auto &s : sums)
            out.push_back(s.data());
          dsrt::cpu::fusedLambStats(ts.data(), ts.size(), coef, 0.9f, 0.999f, 1e-6f, 0.01f,
                                    out.data());
          const std::vector<const float *> in(out.begin(), out.end());
          dsrt::cpu::fusedLamb(ts.data(), ts.size(), in.data(), coef, 1e-3f, 0.9f, 0.999f, 1e-6f,
                               0.01f, true, 10.0f, 0.01f, r + 1);
        } else {
          dsrt::cpu::fusedAdam(ts.data(), ts.size(), coef, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f,
                               true, true, r + 1);
        }
      } else if (lamb) {
        for (size_t k = 0; k < ns.size(); ++k)
          dsrt::cpu::scale(g[k], ns[k], coef);
        for (size_t k = 0; k < ns.size(); ++k) {
          dsrt::cpu::lambStats(p[k], g[k], m[k], v[k], ns[k], 0.9f, 0.999f, 1e-6f, 0.01f,
                               sums[k].data());
          dsrt::cpu::lamb(p[k], g[k], m[k], v[k], ns[k], 1e-3f, 0.9f, 0.999f, 1e-6f, 0.01f, true,
                          10.0f, 0.01f, r + 1, sums[k].data());
        }
      } else {
        for (size_t k = 0; k < ns.size(); ++k)
          dsrt::cpu::scale(g[k], ns[k], coef);
        for (size_t k = 0; k < ns.size(); ++k)
          dsrt::cpu::adam(p[k], g[k], m[k], v[k], ns[k], 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, true,
                          true, r + 1);
      }
      if (r >= 2)
        t.push_back(seconds(t0));
      // The gradients back where they were (the unfused clip wrote them).
      for (size_t k = 0; k < ns.size(); ++k)
        std::fill(g[k], g[k] + ns[k], 0.01f);
    }
    std::sort(t.begin(), t.end());
    std::printf("%s %zu %lld %.6e\n", fused ? "clipped_fused" : "clipped_unfused", ns.size(),
                total, double(total) / t[t.size() / 2]);
  }
  for (auto *list : {&p, &g, &m, &v})
    for (float *q : *list)
      std::free(q);
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  int reps = 5;
  std::vector<long long> sizes;
  for (int k = 1; k < argc; ++k) {
    std::string a = argv[k];
    if (a == "--reps" && k + 1 < argc)
      reps = std::atoi(argv[++k]);
    else if (a == "--tensors" && k + 1 < argc)
      ++k;
    else if (a == "--bf16" || a == "--lamb")
      continue;
    else
      sizes.push_back(std::atoll(a.c_str()));
  }
  auto flag = [&](const char *name) {
    return std::find_if(argv + 1, argv + argc, [&](const char *a) {
             return std::string(a) == name;
           }) != argv + argc;
  };
  for (int k = 1; k + 1 < argc; ++k)
    if (std::string(argv[k]) == "--tensors")
      return clippedStep(argv[k + 1], reps, flag("--bf16"), flag("--lamb"));
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
