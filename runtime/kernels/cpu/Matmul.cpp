//===- Matmul.cpp - batched, broadcasting matmul on oneDNN / OpenBLAS -----===//
//
// Both libraries take row-major operands directly (dnnl_sgemm is row-major
// by definition, cblas_sgemm with CblasRowMajor), so no operand is copied.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Internal.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdlib>
#include <cstring>
#include <utility>

namespace dsrt::cpu {
using namespace detail;

namespace {

bool useOpenBlas() {
  static const bool use = [] {
    const char *v = std::getenv("DSRT_GEMM");
    return v && std::strcmp(v, "openblas") == 0;
  }();
  return use;
}

void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
           float alpha, const float *A, int64_t lda, const float *B,
           int64_t ldb, float beta, float *C, int64_t ldc) {
  if (useOpenBlas()) {
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, blasint(M), blasint(N),
                blasint(K), alpha, A, blasint(lda), B, blasint(ldb), beta, C,
                blasint(ldc));
    return;
  }
  // Only invalid arguments make it fail, and the shapes here are valid.
  (void)dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', M, N, K, alpha, A,
                   lda, B, ldb, beta, C, ldc);
}

/// Element strides of an operand's matrices along the batch dims of C
/// (0 where the operand broadcasts); returns the operand's batch count.
int64_t batchStrides(const Shape &s, const Shape &cs, int64_t *strides) {
  const int cb = cs.rank - 2, sb = s.rank - 2;
  int64_t count = 1;
  for (int d = cb - 1; d >= 0; --d) {
    int j = d - (cb - sb);
    if (j < 0 || s.dims[j] == 1) {
      strides[d] = 0;
      continue;
    }
    strides[d] = count * s.dims[s.rank - 2] * s.dims[s.rank - 1];
    count *= s.dims[j];
  }
  return count;
}

} // namespace

const char *gemmBackend() { return useOpenBlas() ? "openblas" : "dnnl"; }

void matmul(const float *A, const Shape &as, bool transA, const float *B,
            const Shape &bs, bool transB, float *C, const Shape &cs,
            float alpha, float beta) {
  const int cb = cs.rank - 2;
  const int64_t M = cs.dims[cb], N = cs.dims[cb + 1];
  const int64_t K = transA ? as.dims[as.rank - 2] : as.dims[as.rank - 1];
  const int64_t lda = std::max<int64_t>(1, as.dims[as.rank - 1]);
  const int64_t ldb = std::max<int64_t>(1, bs.dims[bs.rank - 1]);
  int64_t batches = 1;
  for (int d = 0; d < cb; ++d)
    batches *= cs.dims[d];
  if (M == 0 || N == 0 || batches == 0)
    return;
  if (K == 0) {
    if (beta == 0.0f)
      fill(C, batches * M * N, 0.0f);
    else
      scale(C, batches * M * N, beta);
    return;
  }

  int64_t aStride[kMaxRank], bStride[kMaxRank];
  const int64_t aBatches = batchStrides(as, cs, aStride);
  const int64_t bBatches = batchStrides(bs, cs, bStride);
  // A weight shared by every batch (x @ W): the batch is just more rows.
  if (batches == 1 || (bBatches == 1 && aBatches == batches && !transA)) {
    sgemm(transA, transB, M * batches, N, K, alpha, A, lda, B, ldb, beta, C, N);
    return;
  }

  auto offsets = [&](int64_t i) {
    int64_t aOff = 0, bOff = 0;
    for (int d = cb - 1; d >= 0; --d) {
      int64_t idx = i % cs.dims[d];
      i /= cs.dims[d];
      aOff += idx * aStride[d];
      bOff += idx * bStride[d];
    }
    return std::pair<int64_t, int64_t>(aOff, bOff);
  };
  const int threads = omp_get_max_threads();
  // Many independent gemms (attention heads) are cheaper one per thread
  // than each threaded inside the library.
  const bool perThread =
      threads > 1 && (batches >= 2 * threads ||
                      (batches >= threads && M * N * K < (int64_t(1) << 22)));
  if (!perThread) {
    for (int64_t i = 0; i < batches; ++i) {
      auto [aOff, bOff] = offsets(i);
      sgemm(transA, transB, M, N, K, alpha, A + aOff, lda, B + bOff, ldb, beta,
            C + i * M * N, N);
    }
    return;
  }
  // dnnl_sgemm runs single-threaded inside a parallel region by itself;
  // OpenBLAS's own pool has to be told.
  if (useOpenBlas())
    openblas_set_num_threads(1);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < batches; ++i) {
    auto [aOff, bOff] = offsets(i);
    sgemm(transA, transB, M, N, K, alpha, A + aOff, lda, B + bOff, ldb, beta,
          C + i * M * N, N);
  }
  if (useOpenBlas())
    openblas_set_num_threads(threads);
}

} // namespace dsrt::cpu
