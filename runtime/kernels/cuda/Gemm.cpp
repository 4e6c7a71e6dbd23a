//===- Gemm.cpp - float32 and bf16 GEMMs through cuBLAS -------------------===//
//
// Float32 and bf16 (float accumulation) through cublasGemmEx.
// Row-major C[m, n] = op(A)[m, k] op(B)[k, n] is the column-major
// C^T[n, m] = op(B)^T op(A)^T, so cuBLAS gets B first. Batches: an operand
// holding every batch of the result steps by its matrix size, one holding
// a single matrix by 0 (strided batched); other broadcasts (a batch dim of
// 1 inside several) run one GEMM per result matrix. bf16 operands whose
// rows are not a multiple of 16 bytes are copied to padded rows in the
// caller's scratch around the GEMM (Blas::matmul in Kernels.h), to
// multiples of 64.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cuda/Kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace dsrt::cuda {
namespace {

/// cuBLAS is opened when the first handle is made, not linked: the
/// static initializers of libcublas and libcublasLt (541 MB) took 0.4 s of
/// every dsrt start, CPU runs and `--help` included, longer than a step of
/// a small model. The names are the exported symbols cublas_v2.h maps the
/// API onto (cublasCreate is cublasCreate_v2).
struct CublasApi {
  decltype(&cublasCreate) create;
  decltype(&cublasDestroy) destroy;
  decltype(&cublasSetStream) setStream;
  decltype(&cublasSetWorkspace) setWorkspace;
  decltype(&cublasSetMathMode) setMathMode;
  // The overloads taking a cublasComputeType_t (the header also declares
  // inline ones taking a cudaDataType).
  cublasStatus_t (*gemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                           const void *, const void *, cudaDataType, int, const void *,
                           cudaDataType, int, const void *, void *, cudaDataType, int,
                           cublasComputeType_t, cublasGemmAlgo_t);
  cublasStatus_t (*gemmStridedBatchedEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                         int, int, int, const void *, const void *,
                                         cudaDataType, int, long long, const void *,
                                         cudaDataType, int, long long, const void *, void *,
                                         cudaDataType, int, long long, int,
                                         cublasComputeType_t, cublasGemmAlgo_t);
  decltype(&cublasGetStatusString) statusString;
};

#define DSRT_SYMBOL_NAME(f) #f
#define DSRT_SYMBOL(f) DSRT_SYMBOL_NAME(f)

const CublasApi &cublas() {
  static const CublasApi api = [] {
    const std::string lib = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void *h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char *why = dlerror();
      throw CudaError("cuBLAS: cannot load " + lib + " (CUDA " +
                      std::to_string(CUBLAS_VER_MAJOR) + "'s cuBLAS, which dsrt was built "
                      "against): " + (why ? why : "not found"));
    }
    auto sym = [&](const char *name) {
      void *f = dlsym(h, name);
      if (!f)
        throw CudaError("cuBLAS: " + lib + " has no " + name);
      return f;
    };
    CublasApi a;
    a.create = reinterpret_cast<decltype(a.create)>(sym(DSRT_SYMBOL(cublasCreate)));
    a.destroy = reinterpret_cast<decltype(a.destroy)>(sym(DSRT_SYMBOL(cublasDestroy)));
    a.setStream = reinterpret_cast<decltype(a.setStream)>(sym(DSRT_SYMBOL(cublasSetStream)));
    a.setWorkspace =
        reinterpret_cast<decltype(a.setWorkspace)>(sym(DSRT_SYMBOL(cublasSetWorkspace)));
    a.setMathMode =
        reinterpret_cast<decltype(a.setMathMode)>(sym(DSRT_SYMBOL(cublasSetMathMode)));
    a.gemmEx = reinterpret_cast<decltype(a.gemmEx)>(sym(DSRT_SYMBOL(cublasGemmEx)));
    a.gemmStridedBatchedEx = reinterpret_cast<decltype(a.gemmStridedBatchedEx)>(
        sym(DSRT_SYMBOL(cublasGemmStridedBatchedEx)));
    a.statusString =
        reinterpret_cast<decltype(a.statusString)>(sym(DSRT_SYMBOL(cublasGetStatusString)));
    return a;
  }();
  return api;
}

#undef DSRT_SYMBOL
#undef DSRT_SYMBOL_NAME

void check(cublasStatus_t s, const char *what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw CudaError(std::string("cuBLAS: ") + what + ": " + cublas().statusString(s));
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

/// cuBLAS' fast tensor-core kernels for 16-bit operands want rows of a
/// multiple of 16 bytes and a k that is a multiple of 8 elements. A dim
/// that is not a multiple of 8 is padded to a multiple of `align`: of 64
/// by default, since with a k of 50264 (8) the vocabulary head's dh GEMM
/// took 4.9 ms where 50304 (64) took 0.82 (H200, bench/gpu_gemm_align.py).
constexpr int64_t kDefaultAlign = 64;
int64_t up(int64_t v, int64_t align) {
  return v % 8 == 0 ? v : (v + align - 1) / align * align;
}

/// One operand's matrices: `batches` of rows x cols, back to back, and
/// the padded copy's rows x cols.
struct Operand {
  int64_t batches = 0, rows = 0, cols = 0, padRows = 0, padCols = 0;
  bool padded() const { return rows != padRows || cols != padCols; }
  size_t padBytes(size_t eb) const {
    return (size_t(batches * padRows * padCols) * eb + 255) / 256 * 256;
  }
};

/// The GEMM's sizes, its operands' storage and their padded copies
/// (k and n rounded up to multiples of 8, and m where it is a's row
/// length, a transposed).
struct Geometry {
  int64_t M = 0, N = 0, K = 0, batches = 0, aBatches = 0, bBatches = 0;
  int64_t Mp = 0, Np = 0, Kp = 0;
  Operand a, b, c;
  /// A batch dim of 1 inside several: one GEMM per result matrix.
  bool perMatrix = false;
  bool pads() const { return a.padded() || b.padded() || c.padded(); }
};
/// `align`: 0 pads nothing.
Geometry geometry(const kernels::Shape &as, bool transA, const kernels::Shape &bs, bool transB,
                  const kernels::Shape &os, int64_t align) {
  Geometry g;
  g.M = os.dims[os.rank - 2];
  g.N = os.dims[os.rank - 1];
  g.K = transA ? as.dims[as.rank - 2] : as.dims[as.rank - 1];
  g.batches = batchCount(os);
  g.aBatches = batchCount(as);
  g.bBatches = batchCount(bs);
  g.perMatrix = !((g.aBatches == g.batches || g.aBatches == 1) &&
                  (g.bBatches == g.batches || g.bBatches == 1));
  bool pad = align && !g.perMatrix && g.M && g.N && g.K && g.batches;
  g.Mp = pad && transA ? up(g.M, align) : g.M;
  g.Np = pad ? up(g.N, align) : g.N;
  g.Kp = pad ? up(g.K, align) : g.K;
  auto operand = [](int64_t batches, bool trans, int64_t r, int64_t c, int64_t pr, int64_t pc) {
    return trans ? Operand{batches, c, r, pc, pr} : Operand{batches, r, c, pr, pc};
  };
  g.a = operand(g.aBatches, transA, g.M, g.K, g.Mp, g.Kp);
  g.b = operand(g.bBatches, transB, g.K, g.N, g.Kp, g.Np);
  g.c = Operand{g.batches, g.M, g.N, g.Mp, g.Np};
  return g;
}

} // namespace

Blas::Blas(void *stream) : stream_(stream) {
  cublasHandle_t h = nullptr;
  check(cublas().create(&h), "create");
  handle_ = h;
  check(cublas().setStream(h, static_cast<cudaStream_t>(stream)), "set stream");
  workspace_ = deviceAlloc(kWorkspaceBytes);
  // DSRT_CUDA_GEMM_PAD=0 turns the padding off, =8 pads to multiples of
  // 8 (to measure what each buys).
  align_ = kDefaultAlign;
  if (const char *pad = std::getenv("DSRT_CUDA_GEMM_PAD")) {
    char *end = nullptr;
    long v = std::strtol(pad, &end, 10);
    if (!*pad || *end || v < 0 || v % 8 || v > 4096)
      throw CudaError(std::string("DSRT_CUDA_GEMM_PAD=") + pad +
                      ": expected 0 (no padding) or a multiple of 8 up to 4096");
    align_ = v;
  }
  check(cublas().setWorkspace(h, workspace_, kWorkspaceBytes), "set workspace");
  // Float sums throughout: no split-k partial sums rounded to bf16 (the
  // CPU kernels' contract, and PyTorch's with
  // allow_bf16_reduced_precision_reduction off).
  check(cublas().setMathMode(h, cublasMath_t(CUBLAS_DEFAULT_MATH |
                                          CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
        "set math mode");
}

Blas::~Blas() {
  if (handle_)
    cublas().destroy(static_cast<cublasHandle_t>(handle_));
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
  Geometry g = geometry(as, transA, bs, transB, os, kDefaultAlign);
  size_t bytes = 0;
  for (const Operand *o : {&g.a, &g.b, &g.c})
    if (o->padded())
      bytes += o->padBytes(eb);
  return bytes;
}

void Blas::gemm(const void *av, const kernels::Shape &as, bool transA, const void *bv,
                const kernels::Shape &bs, bool transB, void *outv, const kernels::Shape &os,
                int dataType, size_t elementBytes, void *scratch) {
  auto h = static_cast<cublasHandle_t>(handle_);
  auto type = cudaDataType_t(dataType);
  const char *a = static_cast<const char *>(av), *b = static_cast<const char *>(bv);
  char *out = static_cast<char *>(outv);
  const Geometry g =
      geometry(as, transA, bs, transB, os, scratch && elementBytes == 2 ? align_ : 0);
  const int64_t batches = g.batches;
  if (g.M == 0 || g.N == 0 || batches == 0)
    return;
  const float one = 1.0f, zero = 0.0f;
  if (g.K == 0) { // an empty sum
    if (cudaMemsetAsync(out, 0, size_t(batches * g.M * g.N) * elementBytes,
                        static_cast<cudaStream_t>(stream_)) != cudaSuccess)
      throw CudaError("cuBLAS: zeroing an empty product failed");
    return;
  }
  // The padded copies in `scratch` (zeros around each matrix).
  char *result = out;
  if (g.pads()) {
    char *s = static_cast<char *>(scratch);
    auto padIn = [&](const char *&p, const Operand &o) {
      if (!o.padded())
        return;
      padMatrices16(p, o.batches, o.rows, o.cols, s, o.padRows, o.padCols, stream_);
      p = s;
      s += o.padBytes(elementBytes);
    };
    padIn(a, g.a);
    padIn(b, g.b);
    if (g.c.padded())
      out = s;
  }
  const int64_t M = g.Mp, N = g.Np, K = g.Kp;
  const cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = int(transB ? K : N), lda = int(transA ? M : K), ldc = int(N);
  const int64_t aBatches = g.aBatches, bBatches = g.bBatches;
  const int64_t aMatrix = M * K, bMatrix = K * N, cMatrix = M * N;
  const cublasComputeType_t compute = CUBLAS_COMPUTE_32F;

  // b shared by every batch and a's rows contiguous: one GEMM of
  // batches * M rows.
  if (bBatches == 1 && !transA && aBatches == batches) {
    check(cublas().gemmEx(h, opB, opA, int(N), int(batches * M), int(K), &one, b, type, ldb, a, type,
                       int(K), &zero, out, type, ldc, compute, CUBLAS_GEMM_DEFAULT),
          "gemm");
  } else if (!g.perMatrix) {
    check(cublas().gemmStridedBatchedEx(h, opB, opA, int(N), int(M), int(K), &one, b, type, ldb,
                                     bBatches == 1 ? 0 : bMatrix, a, type, lda,
                                     aBatches == 1 ? 0 : aMatrix, &zero, out, type, ldc, cMatrix,
                                     int(batches), compute, CUBLAS_GEMM_DEFAULT),
          "gemm strided batched");
  } else {
    for (int64_t k = 0; k < batches; ++k)
      check(cublas().gemmEx(h, opB, opA, int(N), int(M), int(K), &one,
                         b + batchOffset(bs, os, k) * int64_t(elementBytes), type, ldb,
                         a + batchOffset(as, os, k) * int64_t(elementBytes), type, lda, &zero,
                         out + k * cMatrix * int64_t(elementBytes), type, ldc, compute,
                         CUBLAS_GEMM_DEFAULT),
            "gemm (broadcast batch)");
  }
  if (g.c.padded())
    unpadMatrices16(out, g.c.padRows, g.c.padCols, batches, g.M, g.N, result, stream_);
}

} // namespace dsrt::cuda
