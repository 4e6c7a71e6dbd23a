//===- Gemm.cpp - float32 and bf16 GEMMs through cuBLAS -------------------===//
//
// Float32 and bf16 (float accumulation) through cublasGemmEx.
// Row-major C[m, n] = op(A)[m, k] op(B)[k, n] is the column-major
// C^T[n, m] = op(B)^T op(A)^T, so cuBLAS gets B first. Batches: an operand
// holding every batch of the result steps by its matrix size, one holding
// a single matrix by 0 (strided batched); other broadcasts (a batch dim of
// 1 inside several) run one GEMM per result matrix.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cuda/Kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

namespace dsrt::cuda {
namespace {

void check(cublasStatus_t s, const char *what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw CudaError(std::string("cuBLAS: ") + what + ": " + cublasGetStatusString(s));
}

/// cuBLAS' recommended workspace on Hopper.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

int64_t batchCount(const kernels::Shape &s) {
  int64_t n = 1;
  for (int d = 0; d + 2 < s.rank; ++d)
    n *= s.dims[d];
  return n;
}

/// Offset (in elements) of result batch `b`'s matrix in operand `s`
/// (batch dims broadcast right-aligned to `os`'s).
int64_t batchOffset(const kernels::Shape &s, const kernels::Shape &os, int64_t b) {
  int ob = os.rank - 2, sb = s.rank - 2;
  int64_t matrix = s.dims[s.rank - 2] * s.dims[s.rank - 1];
  int64_t off = 0, stride = matrix;
  for (int d = ob - 1; d >= 0; --d) {
    int64_t idx = b % os.dims[d];
    b /= os.dims[d];
    int sd = d - (ob - sb);
    if (sd < 0)
      continue;
    if (s.dims[sd] != 1)
      off += idx * stride;
    stride *= s.dims[sd];
  }
  return off;
}

} // namespace

Blas::Blas(void *stream) : stream_(stream) {
  cublasHandle_t h = nullptr;
  check(cublasCreate(&h), "create");
  handle_ = h;
  check(cublasSetStream(h, static_cast<cudaStream_t>(stream)), "set stream");
  workspace_ = deviceAlloc(kWorkspaceBytes);
  check(cublasSetWorkspace(h, workspace_, kWorkspaceBytes), "set workspace");
  check(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "set math mode");
}

Blas::~Blas() {
  if (handle_)
    cublasDestroy(static_cast<cublasHandle_t>(handle_));
  deviceFree(workspace_);
}

void Blas::matmul(const float *a, const kernels::Shape &as, bool transA, const float *b,
                  const kernels::Shape &bs, bool transB, float *out, const kernels::Shape &os) {
  gemm(a, as, transA, b, bs, transB, out, os, CUDA_R_32F, sizeof(float));
}

void Blas::matmul(const kernels::Bf16 *a, const kernels::Shape &as, bool transA, const kernels::Bf16 *b,
                  const kernels::Shape &bs, bool transB, kernels::Bf16 *out, const kernels::Shape &os) {
  gemm(a, as, transA, b, bs, transB, out, os, CUDA_R_16BF, sizeof(kernels::Bf16));
}

void Blas::gemm(const void *av, const kernels::Shape &as, bool transA, const void *bv,
                const kernels::Shape &bs, bool transB, void *outv, const kernels::Shape &os,
                int dataType, size_t elementBytes) {
  auto h = static_cast<cublasHandle_t>(handle_);
  auto type = cudaDataType_t(dataType);
  const char *a = static_cast<const char *>(av), *b = static_cast<const char *>(bv);
  char *out = static_cast<char *>(outv);
  const int64_t M = os.dims[os.rank - 2], N = os.dims[os.rank - 1];
  const int64_t K = transA ? as.dims[as.rank - 2] : as.dims[as.rank - 1];
  const int64_t batches = batchCount(os);
  if (M == 0 || N == 0 || batches == 0)
    return;
  const float one = 1.0f, zero = 0.0f;
  if (K == 0) { // an empty sum
    if (cudaMemsetAsync(out, 0, size_t(batches * M * N) * elementBytes,
                        static_cast<cudaStream_t>(stream_)) != cudaSuccess)
      throw CudaError("cuBLAS: zeroing an empty product failed");
    return;
  }
  const cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = int(transB ? K : N), lda = int(transA ? M : K), ldc = int(N);
  const int64_t aBatches = batchCount(as), bBatches = batchCount(bs);
  const int64_t aMatrix = M * K, bMatrix = K * N, cMatrix = M * N;
  const cublasComputeType_t compute = CUBLAS_COMPUTE_32F;

  // b shared by every batch and a's rows contiguous: one GEMM of
  // batches * M rows.
  if (bBatches == 1 && !transA && aBatches == batches) {
    check(cublasGemmEx(h, opB, opA, int(N), int(batches * M), int(K), &one, b, type, ldb, a, type,
                       int(K), &zero, out, type, ldc, compute, CUBLAS_GEMM_DEFAULT),
          "gemm");
    return;
  }
  if ((aBatches == batches || aBatches == 1) && (bBatches == batches || bBatches == 1)) {
    check(cublasGemmStridedBatchedEx(h, opB, opA, int(N), int(M), int(K), &one, b, type, ldb,
                                     bBatches == 1 ? 0 : bMatrix, a, type, lda,
                                     aBatches == 1 ? 0 : aMatrix, &zero, out, type, ldc, cMatrix,
                                     int(batches), compute, CUBLAS_GEMM_DEFAULT),
          "gemm strided batched");
    return;
  }
  for (int64_t k = 0; k < batches; ++k)
    check(cublasGemmEx(h, opB, opA, int(N), int(M), int(K), &one,
                       b + batchOffset(bs, os, k) * int64_t(elementBytes), type, ldb,
                       a + batchOffset(as, os, k) * int64_t(elementBytes), type, lda, &zero,
                       out + k * cMatrix * int64_t(elementBytes), type, ldc, compute,
                       CUBLAS_GEMM_DEFAULT),
          "gemm (broadcast batch)");
}

} // namespace dsrt::cuda
