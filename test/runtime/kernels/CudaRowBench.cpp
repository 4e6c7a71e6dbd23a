//===- CudaRowBench.cpp - the CUDA row kernels against memory bandwidth --===//
//
// Times (CUDA events, median of 20 after 3 warm-up calls) the softmax, its
// gradient and the fused attention softmax on GPT-2 small's scores
// ([8, 12, 1024, 1024] bf16; also rows of 1020, which take the
// element-by-element path), and a device-to-device copy of the same bytes
// for the bandwidth they could reach. Prints one row per kernel: ms, and
// GB/s of the bytes it must move. Runs on a GPU (scripts/gpu/check.sh):
//
//   dsrt_cuda_row_bench
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cuda/Kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

namespace gpu = dsrt::cuda;
using dsrt::kernels::Bf16;

static double medianMs(const std::function<void()> &fn) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int k = 0; k < 3; ++k)
    fn();
  std::vector<float> ms;
  for (int k = 0; k < 20; ++k) {
    cudaEventRecord(a);
    fn();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int main() {
  std::string why;
  if (!gpu::deviceAvailable(&why)) {
    std::printf("dsrt_cuda_row_bench: no GPU (%s)\n", why.c_str());
    return 0;
  }
  std::printf("%s\n| kernel | row | ms | GB/s moved |\n| --- | --- | --- | --- |\n",
              gpu::deviceName().c_str());
  for (int64_t n : {1024, 1020}) {
    const int64_t rows = 8 * 12 * 1024, elems = rows * n, t = 1024;
    const size_t bytes = size_t(elems) * sizeof(Bf16);
    auto *x = static_cast<Bf16 *>(gpu::deviceAlloc(bytes));
    auto *y = static_cast<Bf16 *>(gpu::deviceAlloc(bytes));
    auto *dy = static_cast<Bf16 *>(gpu::deviceAlloc(bytes));
    auto *dx = static_cast<Bf16 *>(gpu::deviceAlloc(bytes));
    auto *mask = static_cast<uint8_t *>(gpu::deviceAlloc(size_t(t * n)));
    auto *scalars = static_cast<Bf16 *>(gpu::deviceAlloc(64));
    cudaMemset(x, 0x3c, bytes); // 0x3c3c: about 0.0115 everywhere
    cudaMemset(dy, 0x3c, bytes);
    cudaMemset(mask, 0, size_t(t * n));
    cudaMemset(scalars, 0, 64);
    gpu::SoftmaxMask m{mask, t, true};
    auto row = [&](const char *name, double moved, const std::function<void()> &fn) {
      double ms = medianMs(fn);
      std::printf("| %s | %lld | %.3f | %.0f |\n", name, (long long)n, ms, moved / ms / 1e6);
    };
    row("copy (cudaMemcpy)", 2.0 * bytes,
        [&] { cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice); });
    row("softmax", 2.0 * bytes, [&] { gpu::softmax(x, y, rows, n); });
    row("softmax, scaled and masked", 2.0 * bytes,
        [&] { gpu::maskedSoftmax(x, scalars, m, scalars + 1, y, rows, n); });
    row("softmax gradient", 3.0 * bytes, [&] { gpu::softmaxGrad(y, dy, dx, rows, n); });
    row("softmax gradient, masked and scaled", 3.0 * bytes,
        [&] { gpu::maskedSoftmaxGrad(y, dy, m, scalars + 1, scalars, dx, rows, n); });
    gpu::synchronize();
    for (void *p : {static_cast<void *>(x), static_cast<void *>(y), static_cast<void *>(dy),
                    static_cast<void *>(dx), static_cast<void *>(mask),
                    static_cast<void *>(scalars)})
      gpu::deviceFree(p);
  }
  return 0;
}
