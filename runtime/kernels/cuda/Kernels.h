//===- Kernels.h - the CUDA kernels of dsrt (host interface) ---*- C++ -*-===//
//
// The GPU counterparts of runtime/kernels/cpu/Kernels.h, with the same
// contracts (shapes, attribute meanings, dropout's counter-based mask bit
// for bit), on device pointers, enqueued on `stream` (a cudaStream_t; null:
// the default stream) and returning before they finish. Plain C++ here so
// that the executor and the tests need no CUDA headers; Kernels.cu and
// Layout.cu hold the device code, Gemm.cpp the cuBLAS GEMMs. No kernel
// allocates: one that needs temporary device memory takes `scratch` of the
// size its ...ScratchBytes function gives, reserved once by the caller (the
// executor, at load time). Statistics (layer norm, softmax, cross-entropy, sums of
// squares) are computed in float per row with a block reduction: they match
// the CPU kernels to float rounding, not bit for bit; the tests state the
// tolerances. Errors (a launch that fails, no device) throw CudaError.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_KERNELS_CUDA_KERNELS_H
#define DSRT_KERNELS_CUDA_KERNELS_H

#include "runtime/kernels/common/Contracts.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace dsrt::cuda {

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Whether a CUDA device can run kernels; `why` says why not.
bool deviceAvailable(std::string *why = nullptr);
/// The current device's name and memory ("NVIDIA H100 80GB HBM3").
std::string deviceName();
/// Free and total bytes of the current device's memory.
void deviceMemory(size_t *freeBytes, size_t *totalBytes);
/// Device memory (throws CudaError), and copies (synchronous).
void *deviceAlloc(size_t bytes);
void deviceFree(void *p);
void copyToDevice(void *dst, const void *src, size_t bytes);
void copyToHost(void *dst, const void *src, size_t bytes);
void synchronize(void *stream = nullptr);
/// GPU timestamps for --profile: `n` events, each recorded on a stream by
/// its index; elapsedMs reads the time between two once both completed
/// (after synchronize()). Creating them allocates: not in a step loop
/// that must not.
class Events {
public:
  explicit Events(size_t n);
  ~Events();
  Events(const Events &) = delete;
  Events &operator=(const Events &) = delete;
  size_t size() const { return events_.size(); }
  void record(size_t k, void *stream = nullptr);
  float elapsedMs(size_t from, size_t to) const;

private:
  std::vector<void *> events_;
};

/// Whether the memory-bound kernels may use 16-byte vector loads and
/// stores where sizes and alignment allow (the default; DSRT_CUDA_VECTOR=0
/// turns them off). The results are the same bits either way.
void setVectorized(bool on);

/// Zeroes `bytes` of device memory (enqueued).
void zero(void *p, size_t bytes, void *stream = nullptr);

// Kernels templated on the element type T are instantiated for float and
// kernels::Bf16 (bf16 storage: the math is float, each result rounded once to
// nearest even as the CPU's bf16 kernels round, float denormals to zero).

/// y = op(x) over n elements (kernels::Unary's ops).
template <typename T>
void unary(kernels::Unary op, const T *x, T *y, int64_t n, void *stream = nullptr);
/// dx = dy * gelu'(x).
template <typename T>
void geluGrad(bool tanhApprox, const T *x, const T *dy, T *dx, int64_t n,
              void *stream = nullptr);
/// y = gelu(x) and d = gelu'(x), the factor geluGrad multiplies dy by.
template <typename T>
void geluWithDerivative(bool tanhApprox, const T *x, T *y, T *d, int64_t n,
                        void *stream = nullptr);
/// out[r, c] = a[r, c] op b[(r, c) broadcast]: b has the same n elements, or
/// `cols` (a bias along the last dimension), or 1 (a scalar).
template <typename T>
void binary(kernels::Binary op, const T *a, const T *b, int64_t bElements, T *out, int64_t n,
            int64_t cols, void *stream = nullptr);
/// float32 <-> bf16 (to nearest even, as cpu::cast).
void cast(const float *x, kernels::Bf16 *y, int64_t n, void *stream = nullptr);
void cast(const kernels::Bf16 *x, float *y, int64_t n, void *stream = nullptr);

/// Layer norm over rows of `cols` (beta may be null), as cpu::layerNorm;
/// gamma and beta are float (the master parameters) whatever T is.
template <typename T>
void layerNorm(const T *x, const float *gamma, const float *beta, T *y, int64_t rows,
               int64_t cols, float eps, void *stream = nullptr);
/// As cpu::layerNormGrad (dbeta may be null; dgamma/dbeta overwritten).
template <typename T>
void layerNormGrad(const T *dy, const T *x, const float *gamma, T *dx, float *dgamma,
                   float *dbeta, int64_t rows, int64_t cols, float eps, void *scratch,
                   void *stream = nullptr);
size_t layerNormGradScratchBytes(int64_t rows, int64_t cols);
/// Softmax over the last dimension of [rows, n], and its gradient from y.
template <typename T>
void softmax(const T *x, T *y, int64_t rows, int64_t n, void *stream = nullptr);
template <typename T>
void softmaxGrad(const T *y, const T *dy, T *dx, int64_t rows, int64_t n,
                 void *stream = nullptr);

/// The attention softmax with its scale and mask fused in, as the unfused
/// ops compute it bit for bit (each step rounded to T as they round):
/// forward y = softmax(select(cond, fill, x * scale)) over the last
/// dimension; backward dx = select(cond, fill, softmaxGrad(y, dy)) * scale.
/// `scale` and `fill` are device scalars of type T; a null `scale` leaves
/// the multiplication out, a null `cond` the select. `cond` holds
/// `condRows` rows of n flags, row r of x taking cond's row r % condRows
/// (a [1, 1, T, T] causal mask under [B, H, T, T] scores); `fillWhen` is
/// the flag value that selects `fill` (the select's true branch holds the
/// fill: 1; its false branch: 0).
struct SoftmaxMask {
  const uint8_t *cond = nullptr;
  int64_t condRows = 1;
  bool fillWhen = true;
};
template <typename T>
void maskedSoftmax(const T *x, const T *scale, SoftmaxMask mask, const T *fill, T *y,
                   int64_t rows, int64_t n, void *stream = nullptr);
template <typename T>
void maskedSoftmaxGrad(const T *y, const T *dy, SoftmaxMask mask, const T *fill, const T *scale,
                       T *dx, int64_t rows, int64_t n, void *stream = nullptr);

/// Cross-entropy of [N, C] logits (inner == 1), reduction 0 none, 1 sum,
/// 2 mean, ignore_index as cpu::crossEntropy; the number of labels
/// outside [0, C) that are not ignored is added to `bad` (device, one
/// int64; may be null). T is float, or bf16 logits read as the float
/// values a cast to float32 would give (the loss is the same bits).
template <typename T>
void crossEntropy(const T *logits, const int64_t *labels, float *loss, int64_t N, int64_t C,
                  int reduction, bool hasIgnore, int64_t ignoreIndex, int64_t *bad,
                  void *scratch, void *stream = nullptr);
size_t crossEntropyScratchBytes(int64_t N);
/// The gradient in float, written as TOut: a bf16 `dlogits` holds the
/// float gradient rounded once, which is what a cast after a float32
/// gradient gives. Instantiated for (float, float) and (bf16, bf16).
template <typename T, typename TOut>
void crossEntropyGrad(const T *logits, const int64_t *labels, const float *dloss, TOut *dlogits,
                      int64_t N, int64_t C, int reduction, bool hasIgnore, int64_t ignoreIndex,
                      void *scratch, void *stream = nullptr);
size_t crossEntropyGradScratchBytes();

/// cpu::dropout's mask, bit for bit, for the same (seed, stream, counter,
/// first); dropoutGrad likewise.
template <typename T>
void dropout(const T *x, T *y, uint8_t *mask, int64_t n, float ratio, uint64_t seed,
             uint64_t rngStream, uint64_t counter, uint64_t first = 0, void *stream = nullptr);
template <typename T>
void dropoutGrad(const T *dy, const uint8_t *mask, T *dx, int64_t n, float ratio,
                 void *stream = nullptr);

/// The embedding: out[j, :] = table[idx[j], :] (negative indices count from
/// the end, rows outside [-A, A) read as zeros, and their number is added
/// to `bad`, device, one int64, when not null); its gradient scatter-adds
/// dy rows into dtable (zeroed first) with atomics (the order of the
/// additions is not fixed: float rounding may differ from the CPU's).
void gather(const float *table, const int64_t *idx, float *out, int64_t A, int64_t inner,
            int64_t nIdx, int64_t *bad = nullptr, void *stream = nullptr);
void gatherGrad(const float *dy, const int64_t *idx, float *dtable, int64_t A, int64_t inner,
                int64_t nIdx, void *stream = nullptr);

/// AdamW / Adam as cpu::adam (in place).
void adam(float *p, const float *g, float *m, float *v, int64_t n, float lr, float beta1,
          float beta2, float eps, float weightDecay, bool decoupled, bool biasCorrection,
          int64_t step, void *stream = nullptr);
/// *out (device, one double) += sum of x[i]^2 over n elements.
void sumSquares(const float *x, int64_t n, double *out, void *stream = nullptr);
/// x *= s; x = v (n elements).
void scale(float *x, int64_t n, float s, void *stream = nullptr);
void fill(float *x, int64_t n, float v, void *stream = nullptr);
/// cond[i, j] = j > i over [T, S]: the keys after each query (the flags
/// maskedSoftmax fills for a causal attention).
void causalFlags(uint8_t *cond, int64_t T, int64_t S, void *stream = nullptr);

//===--- broadcasts and layouts (Layout.cu) -------------------------------===//

/// As cpu::binary: a and b broadcast (numpy) to `os`.
template <typename T>
void binary(kernels::Binary op, const T *a, const kernels::Shape &as, const T *b, const kernels::Shape &bs,
            T *out, const kernels::Shape &os, void *stream = nullptr);
/// As cpu::select: out = cond ? a : b, each broadcast to `os`.
template <typename T>
void select(const uint8_t *cond, const kernels::Shape &cs, const T *a, const kernels::Shape &as,
            const T *b, const kernels::Shape &bs, T *out, const kernels::Shape &os,
            void *stream = nullptr);
/// As cpu::transpose: result dim d is x's dim perm[d].
template <typename T>
void transpose(const T *x, const kernels::Shape &xs, const int64_t *perm, T *y,
               void *stream = nullptr);
/// As cpu::slice and cpu::sliceGrad (start and step per dim).
template <typename T>
void slice(const T *x, const kernels::Shape &xs, const int64_t *start, const int64_t *step, T *y,
           const kernels::Shape &ys, void *stream = nullptr);
template <typename T>
void sliceGrad(const T *dy, const kernels::Shape &ys, const int64_t *start, const int64_t *step,
               T *dx, const kernels::Shape &xs, void *stream = nullptr);
/// As cpu::concat: y [ys] the inputs xs[k] [shapes[k]] one after the other
/// along `axis` (device pointers; the array itself on the host).
template <typename T>
void concat(const T *const *xs, const kernels::Shape *shapes, int count, int axis, T *y,
            const kernels::Shape &ys, void *stream = nullptr);
/// As cpu::reduce, adding in double. Sums and means over leading axes
/// (a bias gradient) add row slices in parallel into `scratch` of
/// reduceScratchBytes, then the slices in order; the others give each
/// result element one thread adding in row-major order (Max: the maximum).
size_t reduceScratchBytes(const kernels::Shape &xs, uint32_t axesMask);
template <typename T>
void reduce(kernels::Reduce op, const T *x, const kernels::Shape &xs, uint32_t axesMask, T *y,
            void *scratch, void *stream = nullptr);

/// 16-bit matrices between their rows and padded rows (Layout.cu): dst's
/// `batches` matrices of dstRows x dstCols get src's rows x cols, zeros
/// elsewhere (dstRows >= rows, dstCols >= cols); and back, the rows x cols
/// of src's srcRows x srcCols matrices to contiguous ones.
void padMatrices16(const void *src, int64_t batches, int64_t rows, int64_t cols, void *dst,
                   int64_t dstRows, int64_t dstCols, void *stream = nullptr);
void unpadMatrices16(const void *src, int64_t srcRows, int64_t srcCols, int64_t batches,
                     int64_t rows, int64_t cols, void *dst, void *stream = nullptr);

//===--- GEMM (Gemm.cpp, cuBLAS) ------------------------------------------===//

/// A cuBLAS handle with its own workspace (nothing allocated after the
/// constructor), bound to one stream. Float32 GEMMs in cuBLAS' default
/// math (float accumulation, no TF32).
class Blas {
public:
  explicit Blas(void *stream = nullptr);
  ~Blas();
  Blas(const Blas &) = delete;
  Blas &operator=(const Blas &) = delete;
  /// As cpu::matmul: out[..., m, n] = op(a)[..., m, k] op(b)[..., k, n],
  /// the batch dims broadcast (numpy) to out's. One strided-batched GEMM
  /// (the batch folded into rows where b has none and a is not
  /// transposed), else one GEMM per result matrix.
  void matmul(const float *a, const kernels::Shape &as, bool transA, const float *b,
              const kernels::Shape &bs, bool transB, float *out, const kernels::Shape &os);
  /// The same on bf16 operands and result: float accumulation
  /// (CUBLAS_COMPUTE_32F), the result rounded once, as cpu::matmul's bf16
  /// GEMM. With `scratch` (of scratchBytes), a product whose k, n or (a
  /// transposed) m is not a multiple of 8 (a 50257-token vocabulary) runs
  /// on copies padded with zeros to multiples of 64: cuBLAS' fast
  /// tensor-core kernels want 16-byte rows and a k that is a multiple of
  /// 8, and run 5-7x slower on an H200 without them (and a k of 50264
  /// still 6x slower than 50304). The zeros add nothing to any sum; the
  /// padded result's extra rows and columns are dropped.
  void matmul(const kernels::Bf16 *a, const kernels::Shape &as, bool transA, const kernels::Bf16 *b,
              const kernels::Shape &bs, bool transB, kernels::Bf16 *out, const kernels::Shape &os,
              void *scratch = nullptr);
  /// The scratch the bf16 matmul pads in (0: none needed).
  static size_t scratchBytes(const kernels::Shape &as, bool transA, const kernels::Shape &bs,
                             bool transB, const kernels::Shape &os);
  /// The multiple an unaligned dim is padded to (DSRT_CUDA_GEMM_PAD: 0
  /// turns the padding off, 8 pads less, to measure what each buys).
  int64_t padAlign() const { return align_; }

private:
  /// Both element types: cudaDataType_t as int (no CUDA header here).
  void gemm(const void *a, const kernels::Shape &as, bool transA, const void *b,
            const kernels::Shape &bs, bool transB, void *out, const kernels::Shape &os, int dataType,
            size_t elementBytes, void *scratch);
  void *handle_ = nullptr;
  void *workspace_ = nullptr;
  void *stream_ = nullptr;
  int64_t align_ = 64;
};

} // namespace dsrt::cuda

#endif // DSRT_KERNELS_CUDA_KERNELS_H
