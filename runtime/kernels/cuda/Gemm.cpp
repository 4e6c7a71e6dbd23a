//===- Gemm.cpp - float32 and bf16 GEMMs through cuBLAS -------------------===//
//
// Float32 and bf16 (float accumulation) through cublasGemmEx.
// Row-major C[m, n] = op(A)[m, k] op(B)[k, n] is the column-major
// C^T[n, m] = op(B)^T op(A)^T, so cuBLAS gets B first. Batches: an operand
// holding every batch of the result steps by its matrix size, one holding
// a single matrix by 0 (strided batched); other broadcasts (a batch dim of
// 1 inside several) run one GEMM per result matrix. bf16 operands whose
// rows are not a multiple of 16 bytes are copied to padded rows in the
// caller's scratch around the GEMM (Blas::matmul in Kernels.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cuda/Kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
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

/// cuBLAS' tensor-core kernels on Hopper read and write through TMA, whose
/// row strides must be multiples of 16 bytes.
constexpr int64_t kRowAlign = 16;

/// An operand's storage: `rows` rows of `cols` elements, back to back.
struct Rows {
  int64_t rows = 0, cols = 0;
};
int64_t paddedCols(int64_t cols, size_t eb) {
  int64_t per = kRowAlign / int64_t(eb);
  return (cols + per - 1) / per * per;
}
bool needsPad(const Rows &r, size_t eb) {
  return eb < 4 && r.rows > 0 && (r.cols * int64_t(eb)) % kRowAlign != 0;
}
size_t padBytes(const Rows &r, size_t eb) {
  return (size_t(r.rows * paddedCols(r.cols, eb)) * eb + 255) / 256 * 256;
}

/// The GEMM's sizes and its operands' storage.
struct Geometry {
  int64_t M = 0, N = 0, K = 0, batches = 0, aBatches = 0, bBatches = 0;
  Rows a, b, c;
  /// A batch dim of 1 inside several: one GEMM per result matrix.
  bool perMatrix = false;
};
Geometry geometry(const kernels::Shape &as, bool transA, const kernels::Shape &bs, bool transB,
                  const kernels::Shape &os) {
  Geometry g;
  g.M = os.dims[os.rank - 2];
  g.N = os.dims[os.rank - 1];
  g.K = transA ? as.dims[as.rank - 2] : as.dims[as.rank - 1];
  g.batches = batchCount(os);
  g.aBatches = batchCount(as);
  g.bBatches = batchCount(bs);
  g.a = {g.aBatches * (transA ? g.K : g.M), transA ? g.M : g.K};
  g.b = {g.bBatches * (transB ? g.N : g.K), transB ? g.K : g.N};
  g.c = {g.batches * g.M, g.N};
  g.perMatrix = !((g.aBatches == g.batches || g.aBatches == 1) &&
                  (g.bBatches == g.batches || g.bBatches == 1));
  return g;
}

void copyRows(void *dst, int64_t dstCols, const void *src, int64_t srcCols, int64_t cols,
              int64_t rows, size_t eb, void *stream) {
  if (cudaMemcpy2DAsync(dst, size_t(dstCols) * eb, src, size_t(srcCols) * eb, size_t(cols) * eb,
                        size_t(rows), cudaMemcpyDeviceToDevice,
                        static_cast<cudaStream_t>(stream)) != cudaSuccess)
    throw CudaError("cuBLAS: copying a GEMM operand to padded rows failed");
}

} // namespace

Blas::Blas(void *stream) : stream_(stream) {
  cublasHandle_t h = nullptr;
  check(cublasCreate(&h), "create");
  handle_ = h;
  check(cublasSetStream(h, static_cast<cudaStream_t>(stream)), "set stream");
  workspace_ = deviceAlloc(kWorkspaceBytes);
  const char *pad = std::getenv("DSRT_CUDA_GEMM_PAD");
  pad_ = !(pad && std::strcmp(pad, "0") == 0);
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
  gemm(a, as, transA, b, bs, transB, out, os, CUDA_R_32F, sizeof(float), nullptr);
}

void Blas::matmul(const kernels::Bf16 *a, const kernels::Shape &as, bool transA, const kernels::Bf16 *b,
                  const kernels::Shape &bs, bool transB, kernels::Bf16 *out, const kernels::Shape &os,
                  void *scratch) {
  gemm(a, as, transA, b, bs, transB, out, os, CUDA_R_16BF, sizeof(kernels::Bf16), scratch);
}

size_t Blas::scratchBytes(const kernels::Shape &as, bool transA, const kernels::Shape &bs,
                          bool transB, const kernels::Shape &os) {
  const size_t eb = sizeof(kernels::Bf16);
  Geometry g = geometry(as, transA, bs, transB, os);
  if (g.perMatrix || g.M == 0 || g.N == 0 || g.K == 0 || g.batches == 0)
    return 0;
  size_t bytes = 0;
  for (const Rows &r : {g.a, g.b, g.c})
    if (needsPad(r, eb))
      bytes += padBytes(r, eb);
  return bytes;
}

void Blas::gemm(const void *av, const kernels::Shape &as, bool transA, const void *bv,
                const kernels::Shape &bs, bool transB, void *outv, const kernels::Shape &os,
                int dataType, size_t elementBytes, void *scratch) {
  auto h = static_cast<cublasHandle_t>(handle_);
  auto type = cudaDataType_t(dataType);
  const char *a = static_cast<const char *>(av), *b = static_cast<const char *>(bv);
  char *out = static_cast<char *>(outv);
  const Geometry g = geometry(as, transA, bs, transB, os);
  const int64_t M = g.M, N = g.N, K = g.K, batches = g.batches;
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
  int64_t ldb = transB ? K : N, lda = transA ? M : K, ldc = N;
  const int64_t aBatches = g.aBatches, bBatches = g.bBatches;
  int64_t aMatrix = M * K, bMatrix = K * N, cMatrix = M * N;
  const cublasComputeType_t compute = CUBLAS_COMPUTE_32F;

  // Rows that are not a multiple of 16 bytes: padded copies in `scratch`
  // (the batch stride grows with the row).
  char *result = out;
  bool padResult = false;
  if (pad_ && scratch && !g.perMatrix) {
    char *s = static_cast<char *>(scratch);
    auto padIn = [&](const char *&p, const Rows &r, int64_t &ld, int64_t &matrix) {
      if (!needsPad(r, elementBytes))
        return;
      int64_t cols = paddedCols(r.cols, elementBytes);
      copyRows(s, cols, p, r.cols, r.cols, r.rows, elementBytes, stream_);
      matrix = matrix / r.cols * cols;
      ld = cols;
      p = s;
      s += padBytes(r, elementBytes);
    };
    padIn(a, g.a, lda, aMatrix);
    padIn(b, g.b, ldb, bMatrix);
    if (needsPad(g.c, elementBytes)) {
      padResult = true;
      ldc = paddedCols(N, elementBytes);
      cMatrix = M * ldc;
      out = s;
    }
  }

  // b shared by every batch and a's rows contiguous: one GEMM of
  // batches * M rows.
  if (bBatches == 1 && !transA && aBatches == batches) {
    check(cublasGemmEx(h, opB, opA, int(N), int(batches * M), int(K), &one, b, type, int(ldb), a,
                       type, int(lda), &zero, out, type, int(ldc), compute, CUBLAS_GEMM_DEFAULT),
          "gemm");
  } else if (!g.perMatrix) {
    check(cublasGemmStridedBatchedEx(h, opB, opA, int(N), int(M), int(K), &one, b, type, int(ldb),
                                     bBatches == 1 ? 0 : bMatrix, a, type, int(lda),
                                     aBatches == 1 ? 0 : aMatrix, &zero, out, type, int(ldc),
                                     cMatrix, int(batches), compute, CUBLAS_GEMM_DEFAULT),
          "gemm strided batched");
  } else {
    for (int64_t k = 0; k < batches; ++k)
      check(cublasGemmEx(h, opB, opA, int(N), int(M), int(K), &one,
                         b + batchOffset(bs, os, k) * int64_t(elementBytes), type, int(ldb),
                         a + batchOffset(as, os, k) * int64_t(elementBytes), type, int(lda), &zero,
                         out + k * cMatrix * int64_t(elementBytes), type, int(ldc), compute,
                         CUBLAS_GEMM_DEFAULT),
            "gemm (broadcast batch)");
  }
  if (padResult)
    copyRows(result, N, out, ldc, N, g.c.rows, elementBytes, stream_);
}

} // namespace dsrt::cuda
