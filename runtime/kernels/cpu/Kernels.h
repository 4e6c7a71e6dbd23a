//===- Kernels.h - dsrt CPU kernels -----------------------------*- C++ -*-===//
//
// The CPU kernels the dsrt executor calls, one function per plan
// instruction kind (forward and backward). Contract:
//   * float tensors are float32 (bf16 / fp16 where a function takes Bf16 /
//     Fp16: see "16-bit floats" below), dense, row-major; integer ids int64;
//     booleans one byte each (0 or 1);
//   * shapes are `Shape` values (no heap); broadcasting is numpy-style
//     (right-aligned, size-1 or missing dims stretch);
//   * kernels never allocate on the heap in steady state (scratch lives in
//     thread_local buffers grown once, or in the caller's arena), are
//     threaded with OpenMP and vectorizable, and never throw;
//   * outputs never alias inputs unless a function says so;
//   * "Grad" kernels overwrite their outputs (they do not accumulate).
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_KERNELS_CPU_KERNELS_H
#define DSRT_KERNELS_CPU_KERNELS_H

#include "runtime/kernels/common/Contracts.h"

#include <cstddef>
#include <cstdint>

namespace dsrt::cpu {

// The contracts the CPU and CUDA kernels share (common/Contracts.h).
using kernels::Bf16;
using kernels::Binary;
using kernels::Fp16;
using kernels::kMaxRank;
using kernels::Reduce;
using kernels::Shape;
using kernels::Unary;

/// Number of OpenMP threads the kernels use (0 = OpenMP's default).
void setNumThreads(int n);
int numThreads();
/// Flushes denormals to zero on every kernel thread: gradients and Adam
/// moments decay into the denormal range, where x86 arithmetic is ~100x
/// slower (PyTorch's oneDNN/MKL paths do the same). Call after
/// setNumThreads.
void flushDenormals();

//===--- elementwise ------------------------------------------------------===//

/// out = a op b with a, b broadcast to `os`. Fast paths: same shape, scalar
/// operand, and an operand that broadcasts along leading dims (a bias).
void binary(Binary op, const float *a, const Shape &as, const float *b,
            const Shape &bs, float *out, const Shape &os);

/// y = op(x) over n elements; y may alias x.
void unary(Unary op, const float *x, float *y, int64_t n);

/// dx = dy * d(op)/dx for op in {GeluErf, GeluTanh}, given the input x.
void geluGrad(bool tanhApprox, const float *x, const float *dy, float *dx,
              int64_t n);
/// y = gelu(x) (unary's GeluErf / GeluTanh) and d = gelu'(x), the factor
/// geluGrad multiplies dy by, from one evaluation; y and d do not alias x.
void geluWithDerivative(bool tanhApprox, const float *x, float *y, float *d, int64_t n);
void geluWithDerivative(bool tanhApprox, const Bf16 *x, Bf16 *y, Bf16 *d, int64_t n);
void geluWithDerivative(bool tanhApprox, const Fp16 *x, Fp16 *y, Fp16 *d, int64_t n);

enum class Cmp { Eq, Ne, Lt, Le, Gt, Ge };
/// out (bool) = a cmp b, broadcast to `os`. Float and int64 versions.
void compare(Cmp op, const float *a, const Shape &as, const float *b,
             const Shape &bs, uint8_t *out, const Shape &os);
void compareI64(Cmp op, const int64_t *a, const Shape &as, const int64_t *b,
                const Shape &bs, uint8_t *out, const Shape &os);
/// out = cond ? a : b, all three broadcast to `os`.
void select(const uint8_t *cond, const Shape &cs, const float *a,
            const Shape &as, const float *b, const Shape &bs, float *out,
            const Shape &os);
void logicalNot(const uint8_t *x, uint8_t *y, int64_t n);

enum class DType { F32, F64, I64, I32, Bool, BF16, F16 };
/// Elementwise conversion (float -> int truncates toward zero like C++).
/// To BF16 / F16: round to nearest even (see "16-bit floats"); from F64 and
/// the integers with a single rounding (exact for integers up to 2^53).
/// BF16 / F16 to anything: through the exact float value.
void cast(const void *x, DType from, void *y, DType to, int64_t n);

/// y = x broadcast to `ys`.
void broadcastTo(const float *x, const Shape &xs, float *y, const Shape &ys);
/// The same for elements of any type of `elementBytes` (1, 2, 4 or 8)
/// bytes: bool masks and integer indices broadcast like floats.
void broadcastTo(const void *x, const Shape &xs, void *y, const Shape &ys,
                 size_t elementBytes);

//===--- contractions -----------------------------------------------------===//

/// C[..., m, n] = alpha * sum_k op(A)[..., m, k] op(B)[..., k, n] + beta * C.
/// op transposes the two innermost dims when trans* is set. Both operands
/// have rank >= 2; batch (leading) dims broadcast to those of `cs`.
/// Uses oneDNN's dnnl_sgemm (or OpenBLAS when DSRT_GEMM=openblas is set in
/// the environment at first call).
void matmul(const float *A, const Shape &as, bool transA, const float *B,
            const Shape &bs, bool transB, float *C, const Shape &cs,
            float alpha = 1.0f, float beta = 0.0f);
/// The GEMM library matmul uses: "dnnl" or "openblas".
const char *gemmBackend();

//===--- reductions -------------------------------------------------------===//

/// y = reduce x over the axes whose bit is set in `axesMask`; y has x's
/// element order with the reduced dims removed (same as keepdims layout).
void reduce(Reduce op, const float *x, const Shape &xs, uint32_t axesMask,
            float *y);

/// The order in which reduce sums the columns of a [rows, cols] matrix
/// (rows, cols > 1 once size-1 dims are dropped and the reduced leading
/// axes merged: a bias gradient), as does the GEMM epilogue that makes
/// the matrix: blocks of
/// kColumnSumRows rows, each block's rows added in order to a float zero,
/// then the blocks' partial sums added in order (the first one as it is).
/// Only the rows split the work arithmetically, so the sums do not depend
/// on how threads take the columns, nor on the thread count.
constexpr int64_t kColumnSumRows = 256;


/// sum of squares of x[0..n) accumulated in double (for the global norm).
double sumSquares(const float *x, int64_t n);
/// The same of the exactly widened values, in the same order: bitwise
/// sumSquares of x's cast to float.
double sumSquares(const Bf16 *x, int64_t n);
double sumSquares(const Fp16 *x, int64_t n);
/// One tensor of a multi-tensor sum of squares: `data` holds n elements of
/// `type` (F32, BF16 or F16).
struct SquaresOf {
  const void *data;
  DType type;
  int64_t n;
};
/// sum over k of sumSquares(ts[k]), added in k order: bitwise that loop,
/// in one parallel pass over every tensor's chunks (a clip's 76 gradients,
/// most of them small, otherwise wake the threads 76 times).
double sumSquares(const SquaresOf *ts, size_t k);
/// x *= s (in place).
void scale(float *x, int64_t n, float s);
/// y += x.
void accumulate(const float *x, float *y, int64_t n);
/// x[0..n) = v.
void fill(float *x, int64_t n, float v);

//===--- normalization and softmax ----------------------------------------===//
// The tensors are viewed as [outer, n, inner]; softmax runs along n.

void softmax(const float *x, float *y, int64_t outer, int64_t n,
             int64_t inner);
void logSoftmax(const float *x, float *y, int64_t outer, int64_t n,
                int64_t inner);
/// dx = y * (dy - sum_n(dy * y)).
void softmaxGrad(const float *y, const float *dy, float *dx, int64_t outer,
                 int64_t n, int64_t inner);
/// dx = dy - exp(y) * sum_n(dy), with y = log_softmax(x).
void logSoftmaxGrad(const float *y, const float *dy, float *dx, int64_t outer,
                    int64_t n, int64_t inner);

/// Layer norm over rows of length `cols`: y = (x - mean) * rstd * gamma + beta
/// (beta may be null). Statistics in float, biased variance, like PyTorch.
void layerNorm(const float *x, const float *gamma, const float *beta, float *y,
               int64_t rows, int64_t cols, float eps);
/// Recomputes mean/rstd from x. dbeta may be null; dgamma/dbeta overwritten.
void layerNormGrad(const float *dy, const float *x, const float *gamma,
                   float *dx, float *dgamma, float *dbeta, int64_t rows,
                   int64_t cols, float eps);

//===--- losses -----------------------------------------------------------===//
// logits viewed as [N, C, inner], labels as [N, inner] (int64). Labels equal
// to ignoreIndex (when hasIgnore) contribute nothing and are not counted by
// the mean. reduction: 0 none (loss has N*inner elements), 1 sum, 2 mean.
// Return the number of labels outside [0, C) that are not ignored (0 = ok);
// such labels are skipped.

/// T is float, Bf16 or Fp16: 16-bit logits are widened (exactly) as they
/// are read, so the loss is the same bits as of their float32 cast.
template <class T>
int64_t crossEntropy(const T *logits, const int64_t *labels, float *loss, int64_t N, int64_t C,
                     int64_t inner, int reduction, bool hasIgnore, int64_t ignoreIndex);
/// dlogits from the upstream gradient dloss (a scalar for sum/mean, N*inner
/// values for none), computed in float and, for 16-bit T, rounded once:
/// the float gradient's cast, bit for bit.
template <class T>
int64_t crossEntropyGrad(const T *logits, const int64_t *labels, const float *dloss, T *dlogits,
                         int64_t N, int64_t C, int64_t inner, int reduction, bool hasIgnore,
                         int64_t ignoreIndex);
/// Same conventions with log-probabilities as input.
int64_t nllLoss(const float *logp, const int64_t *labels, float *loss,
                int64_t N, int64_t C, int64_t inner, int reduction,
                bool hasIgnore, int64_t ignoreIndex);
int64_t nllLossGrad(const int64_t *labels, const float *dloss, float *dlogp,
                    int64_t N, int64_t C, int64_t inner, int reduction,
                    bool hasIgnore, int64_t ignoreIndex);

// Vocabulary-parallel cross entropy over [N, C] logits holding classes
// [first, first + C) of this rank (Megatron's), in phases around the tp
// group's all-reduces: the row maxima (all-reduced max), then per sample
// stats[n] = sum_c exp(x - max) and stats[N + n] = the label's logit if
// this rank holds it, else 0 (all-reduced sum), then the loss from the
// summed stats with labels checked against the whole vocabulary `C`
// (crossEntropyPartLoss; returns the number of bad labels).
void crossEntropyPartMax(const float *logits, int64_t N, int64_t C, float *rowMax);
void crossEntropyPartSums(const float *logits, const int64_t *labels, const float *gmax,
                          int64_t N, int64_t C, int64_t first, float *stats);
int64_t crossEntropyPartLoss(const float *stats, const float *gmax, const int64_t *labels,
                             float *loss, int64_t N, int64_t C, int reduction, bool hasIgnore,
                             int64_t ignoreIndex);
/// dstats = (dloss-scale / sum, -dloss-scale) per valid sample.
void crossEntropyPartLossGrad(const float *stats, const int64_t *labels, const float *dloss,
                              float *dstats, int64_t N, int64_t C, int reduction,
                              bool hasIgnore, int64_t ignoreIndex);
/// dlogits = dstats[n] * exp(x - max) + dstats[N + n] at this rank's label.
void crossEntropyPartSumsGrad(const float *logits, const int64_t *labels, const float *gmax,
                              const float *dstats, float *dlogits, int64_t N, int64_t C,
                              int64_t first);

//===--- indexing and layout ----------------------------------------------===//

/// data viewed as [outer, A, inner]; out = [outer, nIdx, inner] with
/// out[o, j, :] = data[o, idx[j], :]. Negative indices count from the end
/// (ONNX). Returns the number of indices outside [-A, A) (their rows are
/// zero-filled).
int64_t gather(const float *data, const int64_t *idx, float *out,
               int64_t outer, int64_t A, int64_t inner, int64_t nIdx);
/// The same on int64 elements (a layout op moves indices too: one row of a
/// one-hot router's ids).
int64_t gather(const int64_t *data, const int64_t *idx, int64_t *out,
               int64_t outer, int64_t A, int64_t inner, int64_t nIdx);
/// The vocabulary-parallel embedding: `data` is rows [first, first + A) of
/// a [whole, inner] table; indices are normalized and checked against
/// `whole`, the rows of other parts are zeros (the tp group sums them).
/// Returns the number of indices outside [-whole, whole).
int64_t gatherPart(const float *data, const int64_t *idx, float *out, int64_t A,
                   int64_t inner, int64_t nIdx, int64_t first, int64_t whole);
/// Its backward: dtable (the part, zeroed first) += the dy rows of its
/// indices.
int64_t gatherGradPart(const float *dy, const int64_t *idx, float *dtable, int64_t A,
                       int64_t inner, int64_t nIdx, int64_t first, int64_t whole);
/// Embedding backward: dtable (zeroed first) += dy rows scattered to idx.
/// Deterministic (no atomics; same result with any thread count).
int64_t gatherGrad(const float *dy, const int64_t *idx, float *dtable,
                   int64_t outer, int64_t A, int64_t inner, int64_t nIdx);

/// y = x permuted: y.dims[i] = x.dims[perm[i]].
void transpose(const float *x, const Shape &xs, const int64_t *perm, float *y);
/// The same on int64 elements (indices: a one-hot router's expert ids
/// transposed).
void transpose(const int64_t *x, const Shape &xs, const int64_t *perm, int64_t *y);

/// y = x[start : start + ys*stride : stride] per dim (ys = result shape).
void slice(const float *x, const Shape &xs, const int64_t *start,
           const int64_t *stride, float *y, const Shape &ys);
/// The same on int64 elements (indices and labels: a shifted target row).
void slice(const int64_t *x, const Shape &xs, const int64_t *start,
           const int64_t *stride, int64_t *y, const Shape &ys);
/// dx = zeros(xs); dx[slice] = dy.
void sliceGrad(const float *dy, const Shape &ys, const int64_t *start,
               const int64_t *stride, float *dx, const Shape &xs);

/// out = concat(inputs, axis); shapes equal except along `axis`.
void concat(const float *const *inputs, const Shape *shapes, int count,
            int axis, float *out, const Shape &os);
void concat(const int64_t *const *inputs, const Shape *shapes, int count, int axis,
            int64_t *out, const Shape &os);

/// idx[o, i] = the k in [0, n) with the largest x[o, k, i] (x viewed as
/// [outer, n, inner]): the first of equal maxima, a NaN wins (PyTorch's
/// argmax). Float and 16-bit inputs.
void argmax(const float *x, int64_t outer, int64_t n, int64_t inner, int64_t *idx);
void argmax(const Bf16 *x, int64_t outer, int64_t n, int64_t inner, int64_t *idx);
void argmax(const Fp16 *x, int64_t outer, int64_t n, int64_t inner, int64_t *idx);

//===--- convolution and pooling ------------------------------------------===//

/// A window over the spatial dims of [N, C, S...] (1 to 3 of them), as the
/// nn dialect's attributes give it; dilation 1 is dense.
struct Window {
  int spatial = 0;
  int64_t kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, padBegin[3] = {},
          padEnd[3] = {}, dilation[3] = {1, 1, 1};
};

enum class ConvPass { Forward, InputGrad, WeightGrad };
/// The convolution of x [N, C, S...] with w [O, C / groups, K...] into y
/// [N, O, R...] (kernel sizes from `ws`, not `win.kernel`) on oneDNN:
/// Forward writes y, InputGrad writes x from dy = y (also ConvTranspose's
/// forward), WeightGrad writes w from x and dy = y. Primitives are made
/// once per shape and window and kept.
void conv(ConvPass pass, float *x, const Shape &xs, float *w, const Shape &ws, float *y,
          const Shape &ys, const Window &win, int64_t groups);
/// The oneDNN implementation conv runs for these shapes ("gemm:jit", ...).
const char *convImpl(ConvPass pass, const Shape &xs, const Shape &ws, const Shape &ys,
                     const Window &win, int64_t groups);

/// Max over each window of x into y; padding never wins; of equal maxima
/// the first in window order (PyTorch's rule, a NaN wins).
void maxPool(const float *x, const Shape &xs, float *y, const Shape &ys, const Window &win);
/// dx = zeros; each window's dy added at its maximum (found again in x).
void maxPoolGrad(const float *x, const Shape &xs, const float *dy, const Shape &ys, float *dx,
                 const Window &win);
/// Mean over each window, divided as PyTorch does: with includePad by the
/// window's extent clipped to the padded input, else by its in-input count.
void avgPool(const float *x, const Shape &xs, float *y, const Shape &ys, const Window &win,
             bool includePad);
void avgPoolGrad(const float *dy, const Shape &ys, float *dx, const Shape &xs, const Window &win,
                 bool includePad);

//===--- dropout ----------------------------------------------------------===//

/// Counter-based RNG (no state): element i of stream `stream` at draw
/// `counter` (the runtime passes step * micro_batches + micro_batch) keeps
/// its value with probability 1 - ratio. Recomputing with the same
/// (seed, stream, counter) gives the same mask.
/// y = keep ? x / (1 - ratio) : 0; mask = keep. `first`: the index of
/// element 0 in a larger tensor whose mask this is a part of (a tensor-
/// parallel rank's run), so the part draws the whole tensor's bits.
void dropout(const float *x, float *y, uint8_t *mask, int64_t n, float ratio,
             uint64_t seed, uint64_t stream, uint64_t counter, uint64_t first = 0);
/// dx = mask ? dy / (1 - ratio) : 0.
void dropoutGrad(const float *dy, const uint8_t *mask, float *dx, int64_t n,
                 float ratio);

//===--- fused attention --------------------------------------------------===//

/// nn.attention over `heads` independent heads (the leading dimensions,
/// flattened): query [heads, T, E], key [heads, S, E], value [heads, S, F].
struct Attention {
  int64_t heads = 0, T = 0, S = 0, E = 0, F = 0;
  /// Multiplies the scores, or divides them with `divides`.
  float scale = 1.0f;
  bool divides = false;
  /// Key j > query i masked (probability exactly 0).
  bool causal = false;
  /// The operands are [lead, T, H, E] (and the result [lead, T, H, F])
  /// instead of [heads, T, E]: head h = l * H + i reads its rows at a
  /// stride of H rows; the stats and the heads' order are head-major.
  bool bshd = false;
  int64_t H = 1;
  /// Added to the scaled scores: [..., T, S] broadcast (numpy) to `scores`,
  /// the scores' full shape, whose leading dimensions are the heads.
  const float *bias = nullptr;
  Shape biasShape, scores;
  /// Dropout of the probabilities, drawing nn.dropout's bits for (seed,
  /// stream, counter) at index first + (head * T + i) * S + j.
  float ratio = 0.0f;
  uint64_t seed = 0, stream = 0, counter = 0, first = 0;
  /// A tensor-parallel part's heads (tpLocal > 0): the heads split on one
  /// leading dimension of tpLocal here and tpWhole in the whole tensor,
  /// this part's from tpOffset, with tpTrailing heads per index of the
  /// dimensions after it. Local head h = (o * tpLocal + i) * tpTrailing + t
  /// draws the bits of whole head (o * tpWhole + tpOffset + i) * tpTrailing + t.
  int64_t tpLocal = 0, tpWhole = 0, tpOffset = 0, tpTrailing = 1;
};

/// result [heads, T, F] (bshd: [lead, T, H, F]) and stats [heads, T, 2]
/// (each row's maximum and the reciprocal of its sum of exponentials). The
/// scores live one head at a time in per-thread scratch; the probabilities are the unfused chain's
/// (matmul, mul or div, select or add, softmax, dropout) bit for bit where
/// the GEMM library computes a head's scores as the batched matmul does.
/// T is float, Bf16 or Fp16: the GEMMs read half operands as they are and
/// the probabilities and the scores' gradient rounded to T (float
/// accumulation, as FlashAttention), the row steps are float32's and the
/// result is rounded once; the bias and the stats are float.
template <class T>
void attention(const T *q, const T *k, const T *v, T *result, float *stats, const Attention &a);
/// dq, dk, dv from the result's gradient `dresult` and the forward's stats,
/// recomputing the probabilities and the dropout bits.
template <class T>
void attentionGrad(const T *dresult, const T *q, const T *k, const T *v, const float *stats,
                   T *dq, T *dk, T *dv, const Attention &a);

//===--- optimizers (in place, DeepSpeed / torch semantics) ---------------===//

/// DeepSpeed's OnebitAdam (edaa722 runtime/fp16/onebit/adam.py) in one of
/// its phases: Init changes nothing; Warmup is Adam without bias correction
/// on g; Compressed takes m from `compressed` (the 1-bit all-reduced
/// momentum) or, when it is null (one rank), m = b1 m + (1-b1) g, and
/// leaves v frozen. Warmup and Compressed then do p -= lr (m / (sqrt(v) +
/// eps) + wd p). Each operation rounded to float, in DeepSpeed's order.
enum class OneBitPhase { Init, Warmup, Compressed };
void onebitAdam(float *p, const float *g, float *m, float *v, const float *compressed,
                int64_t n, float lr, float beta1, float beta2, float eps, float weightDecay,
                OneBitPhase phase);
/// DeepSpeed's OnebitLamb (edaa722 runtime/fp16/onebit/lamb.py) on one
/// tensor, in one of OneBitPhase's phases (the train.onebit_lamb op's
/// description has the rule of each). Warmup reads and writes
/// lambCoeffFreeze; Compressed takes m from `compressed / scalingCoeff`
/// (the 1-bit all-reduce of the scaled momentum) or, when it is null (one
/// rank), from `((b1 m + (1-b1) g) scalingCoeff) / scalingCoeff`, and
/// reads and writes lastFactor (`firstCompressed`: it counts as 1).
/// `freezeNow`: v_fresh = v after the warm-up moments (t == freeze_step).
struct OneBitLambParams {
  float lr, beta1, beta2, eps, weightDecay;
  double maxCoeff, minCoeff, coeffBeta, factorMax, factorMin, factorThreshold;
};
void onebitLamb(float *p, const float *g, float *m, float *v, float *vFresh,
                float *lambCoeffFreeze, float *lastFactor, float scalingCoeff,
                const float *compressed, int64_t n, const OneBitLambParams &a, OneBitPhase phase,
                bool freezeNow, bool firstCompressed, const float *stats = nullptr);
/// What onebitLamb reduces over one tensor (scaling coefficient 1, as one
/// flat tensor's), from the values it is about to compute, without writing
/// them, added into `stats`: in the warm-up [|p|^2, |u|^2, 0], compressed
/// [max((sqrt(v) + eps) / (sqrt(v_fresh) + eps)), |u0|^2, |u|^2] (the max
/// taken with stats[0], the sums added, in double).
void onebitLambStats(const float *p, const float *g, const float *m, const float *v,
                     const float *vFresh, const float *compressed, int64_t n,
                     const OneBitLambParams &a, OneBitPhase phase, double stats[3]);
/// 1-bit LAMB's scaling coefficients: coeff[k] = mean_q rms(m_q) / rms(m_k),
/// rms(m) = |m| / sqrt(numel), each rms rounded to float as DeepSpeed's
/// tensor arithmetic rounds it.
void onebitLambScaling(const float *const *m, const int64_t *n, int k, float *coeff);
/// DeepSpeed's ZeroOneAdam (edaa722 runtime/fp16/onebit/zoadam.py) on a
/// step of class `cls` (plan/StepRule.h; the train.zero_one_adam
/// op's description has the rule of each), each operation rounded to float
/// in DeepSpeed's order. `compressed` (null: one rank) is the 1-bit
/// all-reduce of the local gradient on a compressed-gradient step, of
/// zeroOnePayload's u (sqrt(v) + eps) on a sync step. `lrs` is the scalar
/// sum of the lrs since the last sync.
void zeroOneAdam(float *p, const float *g, float *m, float *v, float *u, float *lrs,
                 const float *compressed, int64_t n, float lr, float beta1, float beta2,
                 float eps, float weightDecay, uint32_t cls);
/// What train.zero_one_adam's 1-bit all-reduce carries on a step of class
/// `cls`: g on a compressed-gradient step; on a sync step the momentum
/// accumulator after the local update times sqrt(v) + eps.
void zeroOnePayload(float *out, const float *p, const float *g, const float *m, const float *v,
                    const float *u, int64_t n, float lr, float beta1, float eps,
                    float weightDecay, uint32_t cls);
/// step counts from 1. decoupled: AdamW (p -= lr*wd*p before the Adam
/// update, as torch.optim.AdamW); otherwise L2 (g += wd*p). eps is added
/// after sqrt(v_hat). All arithmetic in float like torch's CPU kernels.
void adam(float *p, const float *g, float *m, float *v, int64_t n, float lr,
          float beta1, float beta2, float eps, float weightDecay,
          bool decoupled, bool biasCorrection, int64_t step);
/// One parameter of a fused Adam or LAMB step: its gradient is float32,
/// bf16 or fp16 (`g` points at that type).
struct AdamTensor {
  enum class Grad : uint8_t { F32, BF16, F16 };
  enum class Copy : uint8_t { None, BF16, F16 };
  float *p;
  const void *g;
  Grad grad;
  float *m, *v;
  int64_t n;
  /// The parameter's bf16 / fp16 working copy, written with its new value
  /// (a cast of it, as nn.cast rounds) as the update goes; none by default.
  void *copy = nullptr;
  Copy copyType = Copy::None;
};
/// adam() over every tensor of `t` as one element range split across the
/// threads, each gradient widened to float and multiplied by `gradScale`
/// as it is read (clipping): element by element what adam() computes on
/// the clipped float32 gradient, bitwise.
void fusedAdam(const AdamTensor *t, size_t count, float gradScale, float lr, float beta1,
               float beta2, float eps, float weightDecay, bool decoupled, bool biasCorrection,
               int64_t step);
/// lambStats() of every tensor of `t` (its p, g, m and v; the gradient
/// widened and multiplied by `gradScale` as it is read) as one range of
/// chunks split across the threads: sums[k] gets tensor k's two sums,
/// bitwise lambStats' on the clipped float32 gradient.
void fusedLambStats(const AdamTensor *t, size_t count, float gradScale, float beta1,
                    float beta2, float eps, float weightDecay, float *const *sums);
/// lamb() over every tensor of `t` as one element range split across the
/// threads, tensor k's trust ratio from sums[k], each gradient read as in
/// fusedLambStats: bitwise lamb() on the clipped float32 gradient.
void fusedLamb(const AdamTensor *t, size_t count, const float *const *sums, float gradScale,
               float lr, float beta1, float beta2, float eps, float weightDecay,
               bool biasCorrection, float maxCoeff, float minCoeff, int64_t step);
/// torch.optim.SGD: g += wd*p; with momentum: buf = g on the first step,
/// else buf = momentum*buf + (1-dampening)*g; g = nesterov ? g +
/// momentum*buf : buf; p -= lr*g. buf may be null when momentum == 0.
void sgd(float *p, const float *g, float *buf, int64_t n, float lr,
         float momentum, float dampening, float weightDecay, bool nesterov,
         bool firstStep);

/// DeepSpeed's FusedLion: c = b1 m + (1-b1) g; p = p (1 - lr wd) + (c > 0 ?
/// -lr : lr); m = b2 m + (1-b2) g (kernels/common/OptimElements.h).
void lion(float *p, const float *g, float *m, int64_t n, float lr, float beta1, float beta2,
          float weightDecay);
/// torch.optim.Adagrad: g += wd p; sum += g^2; p -= clr g / (sqrt(sum) +
/// eps), clr = lr / (1 + (step-1) lr_decay); step counts from 1.
void adagrad(float *p, const float *g, float *sum, int64_t n, float lr, float eps,
             float weightDecay, float lrDecay, int64_t step);
/// DeepSpeed's FusedLamb, first part: sums[0] = sum(p^2), sums[1] =
/// sum(u^2) with u = m'/(sqrt(v')+eps) + wd p over these n elements (in
/// double, the same for every thread count); writes nothing else.
void lambStats(const float *p, const float *g, const float *m, const float *v, int64_t n,
               float beta1, float beta2, float eps, float weightDecay, float sums[2]);
/// Second part: writes m', v' and p -= step_size * trust_ratio * u, the
/// ratio from the whole tensor's sums (lambStats, summed over its parts).
void lamb(float *p, const float *g, float *m, float *v, int64_t n, float lr, float beta1,
          float beta2, float eps, float weightDecay, bool biasCorrection, float maxCoeff,
          float minCoeff, int64_t step, const float sums[2]);

//===--- 1-bit compression (DeepSpeed's compressed all-reduce) ------------===//
// One rank's side of each phase of the error-feedback sign compression of
// 1-bit Adam / 0/1 Adam / 1-bit LAMB (Compress.cpp). n is a multiple of 8;
// bits hold n / 8 bytes, the first element in the most significant bit.

/// Worker: x = v + error; a = |x| / sqrt(n); bits = (x >= 0 or NaN);
/// error = x - a sgn(x). Returns a.
float onebitCompress(const float *v, float *error, int64_t n, uint8_t *bits);
/// Server of one chunk: c = sum over the `world` workers of sgn_w (a_w /
/// world) + serverError (workerBits: the workers' bits of this chunk back
/// to back, n / 8 bytes each, as an all_to_all delivers them; scales[w]:
/// worker w's a); b = |c| / sqrt(n); bits = (c >= 0 or NaN);
/// serverError = c - b sgn(c). Returns b.
float onebitServer(const uint8_t *workerBits, const float *scales, int world,
                   float *serverError, int64_t n, uint8_t *bits);
/// out = scale * sgn, element i from bit i.
void onebitExpand(const uint8_t *bits, float scale, int64_t n, float *out);

//===--- 16-bit floats: bf16 and fp16 storage, float math -----------------===//
// Same contracts as the float kernels above, with every float tensor of the
// signature in Bf16 or Fp16 except where a parameter says float. Inputs are
// widened to float exactly, all arithmetic and every reduction is in float
// (softmax / log-softmax / layer-norm statistics, dot products), and each
// output element is rounded once to its storage type:
//   * float -> bf16: round to nearest even; NaN stays NaN; float denormals
//     become a zero of the same sign (as AVX512_BF16's vcvtneps2bf16 does);
//   * float -> fp16: IEEE round to nearest even (fp16 subnormals kept,
//     overflow to inf); fp16 is storage only, with no fp16 arithmetic.
// Every path (AVX512_BF16, AVX-512F, portable) gives the same bits.

/// Instruction sets of the conversions (cast, and the 16-bit kernels'
/// widening and narrowing of their tiles), in increasing order.
enum class HalfIsa { Portable, Avx512F, Avx512Bf16 };
/// The set in use: the best this CPU has (detected at the first call), or a
/// lower one when the environment says DSRT_HALF_ISA=portable|avx512f.
HalfIsa halfIsa();
/// Uses `isa`, or the CPU's best if that is lower; returns the set now in
/// use (for tests and benchmarks).
HalfIsa setHalfIsa(HalfIsa isa);
/// The path float <-> bf16 conversions take: "avx512bf16", "avx512f" or
/// "portable" (fp16 uses vcvtps2ph / vcvtph2ps on both AVX-512 paths).
const char *bf16Path();
/// The bf16 GEMM: "onednn <implementation>" (e.g. "onednn
/// brg:avx512_core_bf16") or "fp32 gemm on widened operands" where oneDNN has
/// no bf16 kernel better than its reference one for this CPU.
const char *bf16GemmPath();

/// matmul with 16-bit operands and float accumulation, C in float or in the
/// operands' type: same shapes, transposes, batch broadcasting and alpha /
/// beta as the float matmul. They run on oneDNN's matmul primitive
/// (AVX512_BF16 dot products where the CPU has them), one primitive per
/// shape created on first use and then reused. Where oneDNN has only its
/// reference kernel (fp16 without AVX512_FP16; bf16 where bf16GemmPath()
/// says so) the operands are widened into per-thread scratch and the float
/// matmul runs.
void matmul(const Bf16 *A, const Shape &as, bool transA, const Bf16 *B,
            const Shape &bs, bool transB, float *C, const Shape &cs,
            float alpha = 1.0f, float beta = 0.0f);
void matmul(const Bf16 *A, const Shape &as, bool transA, const Bf16 *B,
            const Shape &bs, bool transB, Bf16 *C, const Shape &cs,
            float alpha = 1.0f, float beta = 0.0f);
void matmul(const Fp16 *A, const Shape &as, bool transA, const Fp16 *B,
            const Shape &bs, bool transB, float *C, const Shape &cs,
            float alpha = 1.0f, float beta = 0.0f);
void matmul(const Fp16 *A, const Shape &as, bool transA, const Fp16 *B,
            const Shape &bs, bool transB, Fp16 *C, const Shape &cs,
            float alpha = 1.0f, float beta = 0.0f);

/// nn.matmul_epilogue: C = (op(A) op(B) + bias) * scale + addend, each
/// optional (the bias [N] broadcast over C's rows, the scale and the
/// addend C's shape), formed from the float32 accumulator and rounded to
/// C's type once. oneDNN's matmul primitive with a bias and binary-mul and
/// binary-add post-ops, cached per shape as the 16-bit matmul's; where it
/// has no fast kernel, the float product and one elementwise pass. The
/// float version's GEMM is the primitive, not dnnl_sgemm: its sums may
/// differ from matmul's in the last bit. With `columnSum` ([N]), also C's
/// column sums (a bias gradient) in float rounded once, bitwise what
/// reduce and a cast make of C: where C's rows collapse into one GEMM
/// (lhs not transposed, one rhs) each block of kColumnSumRows rows runs
/// as its own single-threaded GEMM and is summed while it is in cache.
void matmulEpilogue(const float *A, const Shape &as, bool transA, const float *B,
                    const Shape &bs, bool transB, const float *bias, const float *scale,
                    const float *addend, float *C, const Shape &cs,
                    float *columnSum = nullptr);
void matmulEpilogue(const Bf16 *A, const Shape &as, bool transA, const Bf16 *B,
                    const Shape &bs, bool transB, const Bf16 *bias, const Bf16 *scale,
                    const Bf16 *addend, Bf16 *C, const Shape &cs,
                    Bf16 *columnSum = nullptr);
void matmulEpilogue(const Fp16 *A, const Shape &as, bool transA, const Fp16 *B,
                    const Shape &bs, bool transB, const Fp16 *bias, const Fp16 *scale,
                    const Fp16 *addend, Fp16 *C, const Shape &cs,
                    Fp16 *columnSum = nullptr);

void binary(Binary op, const Bf16 *a, const Shape &as, const Bf16 *b,
            const Shape &bs, Bf16 *out, const Shape &os);
void binary(Binary op, const Fp16 *a, const Shape &as, const Fp16 *b,
            const Shape &bs, Fp16 *out, const Shape &os);
void unary(Unary op, const Bf16 *x, Bf16 *y, int64_t n);
void unary(Unary op, const Fp16 *x, Fp16 *y, int64_t n);
void geluGrad(bool tanhApprox, const Bf16 *x, const Bf16 *dy, Bf16 *dx,
              int64_t n);
void geluGrad(bool tanhApprox, const Fp16 *x, const Fp16 *dy, Fp16 *dx,
              int64_t n);
/// Compared by value (-0 == +0; NaN is unordered), as the float kernel.
/// (A 16-bit broadcast is broadcastTo with elementBytes 2.)
void compare(Cmp op, const Bf16 *a, const Shape &as, const Bf16 *b,
             const Shape &bs, uint8_t *out, const Shape &os);
void compare(Cmp op, const Fp16 *a, const Shape &as, const Fp16 *b,
             const Shape &bs, uint8_t *out, const Shape &os);
void select(const uint8_t *cond, const Shape &cs, const Bf16 *a,
            const Shape &as, const Bf16 *b, const Shape &bs, Bf16 *out,
            const Shape &os);
void select(const uint8_t *cond, const Shape &cs, const Fp16 *a,
            const Shape &as, const Fp16 *b, const Shape &bs, Fp16 *out,
            const Shape &os);

/// Reductions of 16-bit tensors into float results (a bias gradient).
void reduce(Reduce op, const Bf16 *x, const Shape &xs, uint32_t axesMask,
            float *y);
void reduce(Reduce op, const Fp16 *x, const Shape &xs, uint32_t axesMask,
            float *y);
/// y (float) += x.
void accumulate(const Bf16 *x, float *y, int64_t n);
void accumulate(const Fp16 *x, float *y, int64_t n);

void softmax(const Bf16 *x, Bf16 *y, int64_t outer, int64_t n, int64_t inner);
void softmax(const Fp16 *x, Fp16 *y, int64_t outer, int64_t n, int64_t inner);
void logSoftmax(const Bf16 *x, Bf16 *y, int64_t outer, int64_t n,
                int64_t inner);
void logSoftmax(const Fp16 *x, Fp16 *y, int64_t outer, int64_t n,
                int64_t inner);
void softmaxGrad(const Bf16 *y, const Bf16 *dy, Bf16 *dx, int64_t outer,
                 int64_t n, int64_t inner);
void softmaxGrad(const Fp16 *y, const Fp16 *dy, Fp16 *dx, int64_t outer,
                 int64_t n, int64_t inner);
void logSoftmaxGrad(const Bf16 *y, const Bf16 *dy, Bf16 *dx, int64_t outer,
                    int64_t n, int64_t inner);
void logSoftmaxGrad(const Fp16 *y, const Fp16 *dy, Fp16 *dx, int64_t outer,
                    int64_t n, int64_t inner);

/// gamma, beta and their gradients stay float: they are the fp32 master
/// parameters themselves (no per-step cast, and dgamma / dbeta feed the
/// fp32 optimizer directly); x, y, dy, dx are 16-bit.
void layerNorm(const Bf16 *x, const float *gamma, const float *beta, Bf16 *y,
               int64_t rows, int64_t cols, float eps);
void layerNorm(const Fp16 *x, const float *gamma, const float *beta, Fp16 *y,
               int64_t rows, int64_t cols, float eps);
void layerNormGrad(const Bf16 *dy, const Bf16 *x, const float *gamma, Bf16 *dx,
                   float *dgamma, float *dbeta, int64_t rows, int64_t cols,
                   float eps);
void layerNormGrad(const Fp16 *dy, const Fp16 *x, const float *gamma, Fp16 *dx,
                   float *dgamma, float *dbeta, int64_t rows, int64_t cols,
                   float eps);

/// Embedding from a 16-bit table; its gradient accumulates the 16-bit rows
/// of dy into a float dtable (same determinism as the float kernel).
int64_t gather(const Bf16 *data, const int64_t *idx, Bf16 *out, int64_t outer,
               int64_t A, int64_t inner, int64_t nIdx);
int64_t gather(const Fp16 *data, const int64_t *idx, Fp16 *out, int64_t outer,
               int64_t A, int64_t inner, int64_t nIdx);
int64_t gatherGrad(const Bf16 *dy, const int64_t *idx, float *dtable,
                   int64_t outer, int64_t A, int64_t inner, int64_t nIdx);
int64_t gatherGrad(const Fp16 *dy, const int64_t *idx, float *dtable,
                   int64_t outer, int64_t A, int64_t inner, int64_t nIdx);

void transpose(const Bf16 *x, const Shape &xs, const int64_t *perm, Bf16 *y);
void transpose(const Fp16 *x, const Shape &xs, const int64_t *perm, Fp16 *y);
void slice(const Bf16 *x, const Shape &xs, const int64_t *start,
           const int64_t *stride, Bf16 *y, const Shape &ys);
void slice(const Fp16 *x, const Shape &xs, const int64_t *start,
           const int64_t *stride, Fp16 *y, const Shape &ys);
void sliceGrad(const Bf16 *dy, const Shape &ys, const int64_t *start,
               const int64_t *stride, Bf16 *dx, const Shape &xs);
void sliceGrad(const Fp16 *dy, const Shape &ys, const int64_t *start,
               const int64_t *stride, Fp16 *dx, const Shape &xs);
void concat(const Bf16 *const *inputs, const Shape *shapes, int count, int axis,
            Bf16 *out, const Shape &os);
void concat(const Fp16 *const *inputs, const Shape *shapes, int count, int axis,
            Fp16 *out, const Shape &os);

/// The same mask as the float dropout for the same (seed, stream, counter),
/// element for element; kept values are x / (1 - ratio) rounded once.
void dropout(const Bf16 *x, Bf16 *y, uint8_t *mask, int64_t n, float ratio,
             uint64_t seed, uint64_t stream, uint64_t counter, uint64_t first = 0);
void dropout(const Fp16 *x, Fp16 *y, uint8_t *mask, int64_t n, float ratio,
             uint64_t seed, uint64_t stream, uint64_t counter, uint64_t first = 0);
void dropoutGrad(const Bf16 *dy, const uint8_t *mask, Bf16 *dx, int64_t n,
                 float ratio);
void dropoutGrad(const Fp16 *dy, const uint8_t *mask, Fp16 *dx, int64_t n,
                 float ratio);

} // namespace dsrt::cpu

#endif // DSRT_KERNELS_CPU_KERNELS_H
