//===- MatmulHalf.cpp - bf16 / fp16 matmul and GEMM epilogues -------------===//
//
// oneDNN's matmul primitive takes the operands where they are: transposes
// are strides of the memory descriptors and broadcast batch dims have size
// 1, so nothing is copied. Creating a primitive costs far more than a small
// GEMM, so each thread keeps the primitives it made, keyed by everything
// that shapes them (dims, transposes, types, alpha, beta, thread count); the
// step loop only swaps data pointers and executes through the C API (no
// std::unordered_map of arguments, no allocation).
//
// The GEMM epilogues (nn.matmul_epilogue, in every float type) run on the
// same primitives: the bias is oneDNN's bias argument and the addend a
// binary-add post-op, both applied to the float32 accumulator before the one
// rounding to the result type.
//
// A 16-bit GEMM whose rows are one GEMM's runs as tasks of rows, one
// single-threaded primitive each (taskGemm, below); so do the epilogues
// with column sums (a bias gradient, in every float type), whose tasks are
// blocks of kColumnSumRows rows summed while they are in cache.
//
// Where oneDNN has nothing better than its reference kernel for a type (no
// fp16 matmul without AVX512_FP16, no bf16 one on pre-AVX-512 CPUs in
// oneDNN 2.x), the operands are widened into per-thread scratch and the
// float matmul runs: slower, same results up to float rounding.
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Half.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstring>
#include <string>
#include <unordered_map>

namespace dsrt::cpu {
using namespace detail;

namespace {

using dnnl::memory;

template <class T> constexpr memory::data_type dnnlType() {
  if constexpr (std::is_same_v<T, Bf16>)
    return memory::data_type::bf16;
  else if constexpr (std::is_same_v<T, Fp16>)
    return memory::data_type::f16;
  else
    return memory::data_type::f32;
}

const dnnl::engine &engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

/// oneDNN's reference kernels are correct but far slower than widening to
/// float and calling the float GEMM.
bool fastImpl(const dnnl::matmul::primitive_desc &pd) {
  return std::strncmp(pd.impl_info_str(), "ref", 3) != 0;
}

/// Everything a primitive depends on; compared and hashed as bytes (the
/// constructor zeroes the padding).
struct Key {
  int32_t in, out, threads, rank;
  uint32_t alpha, beta;
  int32_t bias;   // the epilogue's bias (0 or 1)
  int32_t addend; // 0: none, 1: a binary-add post-op, 2: the sum post-op
                  // (the addend is the result's own buffer)
  int32_t scale;  // 0 or 1: a binary-mul post-op first
  int32_t pad = 0;
  int64_t ldc; // C's (and the scale's and addend's) row stride; 0: dense
  int64_t a[kMaxRank][2], b[kMaxRank][2], c[kMaxRank]; // dims, strides
  Key() { std::memset(this, 0, sizeof *this); }
  bool operator==(const Key &o) const {
    return std::memcmp(this, &o, sizeof *this) == 0;
  }
};

static_assert(sizeof(Key) % 8 == 0, "hashed as 64-bit words");

struct KeyHash {
  size_t operator()(const Key &k) const {
    uint64_t h = 0, w;
    for (size_t i = 0; i < sizeof k; i += 8) {
      std::memcpy(&w, reinterpret_cast<const char *>(&k) + i, 8);
      h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
      h ^= h >> 29;
    }
    return size_t(h);
  }
};

struct Primitive {
  bool fast = false; // false: use the widening fallback
  std::string impl;  // oneDNN's name for the kernel it chose
  dnnl::matmul prim;
  dnnl::stream stream;
  memory a, b, c, bias, scale, addend;
};

/// The memory descriptor of a [.., rows, cols] operand stored row-major, or
/// stored as [.., cols, rows] when trans (the transpose is in the strides).
memory::desc operandDesc(memory::data_type t, int rank, const int64_t (*d)[2]) {
  memory::dims dims(rank), strides(rank);
  for (int i = 0; i < rank; ++i) {
    dims[i] = d[i][0];
    strides[i] = d[i][1];
  }
  return memory::desc(dims, t, strides);
}

Primitive makePrimitive(const Key &k, memory::data_type in,
                        memory::data_type out, float alpha, float beta) {
  Primitive p;
  try {
    const memory::desc a = operandDesc(in, k.rank, k.a);
    const memory::desc b = operandDesc(in, k.rank, k.b);
    // C is row-major, dense or with rows ldc apart (a block of a wider
    // result): its strides follow from its dims.
    const memory::dims cd(k.c, k.c + k.rank);
    memory::dims cs(k.rank);
    int64_t s = 1;
    for (int i = k.rank - 1; i >= 0; --i) {
      cs[i] = s;
      s = i == k.rank - 1 && k.ldc ? k.ldc : s * k.c[i];
    }
    const memory::desc cDense(cd, out, cs);
    // The bias: [1, ..., 1, N], of the result's type.
    memory::dims bd(k.rank, 1), bs(k.rank, 1);
    bd[k.rank - 1] = k.c[k.rank - 1];
    for (int i = k.rank - 2; i >= 0; --i)
      bs[i] = bd[k.rank - 1];
    const memory::desc biasDesc = k.bias ? memory::desc(bd, out, bs) : memory::desc();
    dnnl::primitive_attr attr;
    if (alpha != 1.0f)
      attr.set_output_scales(0, {alpha});
    dnnl::post_ops ops;
    if (beta != 0.0f)
      ops.append_sum(beta);
    // The scale multiplies the biased product, before any addend (post-op
    // 0: execute() passes it as the first binary source).
    if (k.scale)
      ops.append_binary(dnnl::algorithm::binary_mul, cDense);
    // An addend in the result's own buffer is oneDNN's sum post-op (its
    // kernels may keep partial sums in the destination while they run
    // through K); another buffer is the binary add's second source.
    if (k.addend == 2)
      ops.append_sum(1.0f);
    else if (k.addend == 1)
      ops.append_binary(dnnl::algorithm::binary_add, cDense);
    if (ops.len() > 0)
      attr.set_post_ops(ops);
    dnnl::matmul::primitive_desc pd(k.bias ? dnnl::matmul::desc(a, b, biasDesc, cDense)
                                           : dnnl::matmul::desc(a, b, cDense),
                                    attr, engine());
    p.impl = pd.impl_info_str();
    p.fast = fastImpl(pd);
    if (p.fast) {
      p.prim = dnnl::matmul(pd);
      p.stream = dnnl::stream(engine());
      p.a = memory(a, engine(), DNNL_MEMORY_NONE);
      p.b = memory(b, engine(), DNNL_MEMORY_NONE);
      p.c = memory(cDense, engine(), DNNL_MEMORY_NONE);
      if (k.bias)
        p.bias = memory(biasDesc, engine(), DNNL_MEMORY_NONE);
      if (k.scale)
        p.scale = memory(cDense, engine(), DNNL_MEMORY_NONE);
      if (k.addend == 1)
        p.addend = memory(cDense, engine(), DNNL_MEMORY_NONE);
    }
  } catch (const dnnl::error &) {
    p.fast = false; // unsupported type or shape: the fallback handles it
  }
  return p;
}

/// The number of matrices in a [..., rows, cols] tensor.
int64_t batchCount(const Shape &s) {
  int64_t n = 1;
  for (int d = 0; d < s.rank - 2; ++d)
    n *= s.dims[d];
  return n;
}

/// Fills the key's dims and strides of operand `s` (padded to C's rank):
/// logical [rows, cols] = [M, K] for A or [K, N] for B.
void describe(const Shape &s, bool trans, int rank, int64_t (*d)[2]) {
  const int64_t r = s.dims[s.rank - 2], c = s.dims[s.rank - 1];
  // Stored [r, c]: logical dims swap when transposed.
  d[rank - 2][0] = trans ? c : r;
  d[rank - 1][0] = trans ? r : c;
  d[rank - 2][1] = trans ? 1 : c;
  d[rank - 1][1] = trans ? c : 1;
  int64_t stride = r * c;
  const int pad = rank - s.rank;
  for (int i = rank - 3; i >= 0; --i) {
    const int j = i - pad;
    const int64_t size = j >= 0 ? s.dims[j] : 1;
    d[i][0] = size;
    d[i][1] = stride;
    stride *= size;
  }
}

/// C = beta * C when K == 0.
template <class TC> void scaleOnly(TC *C, int64_t n, float beta) {
  if constexpr (std::is_same_v<TC, float>) {
    if (beta == 0.0f)
      fill(C, n, 0.0f);
    else
      scale(C, n, beta);
  } else {
    parallelFor(n, kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        C[i] = fromFloat<TC>(beta == 0.0f ? 0.0f : beta * toFloat(C[i]));
    });
  }
}

template <class T> void widen(const T *x, float *y, int64_t n) {
  parallelFor(n, kGrain,
              [&](int64_t b, int64_t e) { convert(x + b, y + b, e - b); });
}
template <class T> void narrow(const float *x, T *y, int64_t n) {
  parallelFor(n, kGrain,
              [&](int64_t b, int64_t e) { convert(x + b, y + b, e - b); });
}

/// The float matmul on widened copies (scratch slots 20-22: no other kernel
/// runs inside this one).
template <class T, class TC>
void widenedMatmul(const T *A, const Shape &as, bool transA, const T *B,
                   const Shape &bs, bool transB, TC *C, const Shape &cs,
                   float alpha, float beta) {
  float *a = scratch<float, 20>(size_t(as.numel()));
  float *b = scratch<float, 21>(size_t(bs.numel()));
  widen(A, a, as.numel());
  widen(B, b, bs.numel());
  if constexpr (std::is_same_v<TC, float>) {
    matmul(a, as, transA, b, bs, transB, C, cs, alpha, beta);
  } else {
    float *c = scratch<float, 22>(size_t(cs.numel()));
    if (beta != 0.0f)
      widen(C, c, cs.numel());
    matmul(a, as, transA, b, bs, transB, c, cs, alpha, beta);
    narrow(c, C, cs.numel());
  }
}

/// Fills `k`, the primitive key of C = op(A) op(B).
template <class T, class TC>
void keyOf(const Shape &as, bool transA, const Shape &bs, bool transB, const Shape &cs,
           float alpha, float beta, Key &k) {
  const int64_t batches = batchCount(cs);
  k.in = int32_t(dnnlType<T>());
  k.out = int32_t(dnnlType<TC>());
  k.threads = omp_get_max_threads();
  std::memcpy(&k.alpha, &alpha, sizeof alpha);
  std::memcpy(&k.beta, &beta, sizeof beta);
  // A weight shared by every batch (x @ W): the batch is just more rows.
  if (batches == 1 ||
      (batchCount(bs) == 1 && batchCount(as) == batches && !transA)) {
    k.rank = 2;
    describe(as, transA, 2, k.a);
    k.a[0][0] *= batches; // [M, K] row-major when batches > 1
    describe(bs, transB, 2, k.b);
    k.c[0] = cs.dims[cs.rank - 2] * batches;
    k.c[1] = cs.dims[cs.rank - 1];
  } else {
    k.rank = cs.rank;
    describe(as, transA, k.rank, k.a);
    describe(bs, transB, k.rank, k.b);
    for (int i = 0; i < cs.rank; ++i)
      k.c[i] = cs.dims[i];
  }
}

/// This thread's primitive for `k` (made on first use).
template <class T, class TC> Primitive &primitiveFor(const Key &k, float alpha, float beta) {
  thread_local std::unordered_map<Key, Primitive, KeyHash> cache;
  auto it = cache.find(k);
  if (it == cache.end())
    it = cache.emplace(k, makePrimitive(k, dnnlType<T>(), dnnlType<TC>(), alpha, beta)).first;
  return it->second;
}

/// Runs `p` on the given data (bias and addend where the key has them).
void execute(Primitive &p, const void *A, const void *B, void *C, const void *bias,
             const void *scale, const void *addend) {
  dnnl_memory_set_data_handle(p.a.get(), const_cast<void *>(A));
  dnnl_memory_set_data_handle(p.b.get(), const_cast<void *>(B));
  dnnl_memory_set_data_handle(p.c.get(), C);
  dnnl_exec_arg_t args[6] = {{DNNL_ARG_SRC, p.a.get()},
                             {DNNL_ARG_WEIGHTS, p.b.get()},
                             {DNNL_ARG_DST, p.c.get()}};
  int n = 3, postOp = 0;
  if (bias) {
    dnnl_memory_set_data_handle(p.bias.get(), const_cast<void *>(bias));
    args[n++] = {DNNL_ARG_BIAS, p.bias.get()};
  }
  if (scale) {
    dnnl_memory_set_data_handle(p.scale.get(), const_cast<void *>(scale));
    args[n++] = {DNNL_ARG_ATTR_MULTIPLE_POST_OP(postOp++) | DNNL_ARG_SRC_1, p.scale.get()};
  }
  if (addend) {
    dnnl_memory_set_data_handle(p.addend.get(), const_cast<void *>(addend));
    args[n++] = {DNNL_ARG_ATTR_MULTIPLE_POST_OP(postOp) | DNNL_ARG_SRC_1, p.addend.get()};
  }
  // Only invalid arguments make it fail, and these were checked when the
  // primitive was created.
  (void)dnnl_primitive_execute(p.prim.get(), p.stream.get(), n, args);
  (void)dnnl_stream_wait(p.stream.get());
}

//===--- GEMMs as tasks of rows ------------------------------------------===//
//
// Where C's rows are those of one GEMM (A's batches fold into rows against
// one B; A transposed only unbatched), the GEMM runs as tasks of rows, one
// single-threaded primitive each, rather than as one primitive split by
// oneDNN: at the bench GPT's shapes on 2 cores of an AMD Zen 5 4-17% faster
// (docs/performance.md, "GEMMs as tasks of rows"). With column sums the
// tasks are kColumnSumRows-row blocks (their order is the sums'), each
// summing its stored rows while they are in cache.

/// Rows of a task, of a task of a transposed A, and the fewest rows worth
/// a task of their own.
constexpr int64_t kMaxTaskRows = 512, kMaxTransposedTaskRows = 1024, kMinTaskRows = 64;

/// The key of a task's GEMM: C[r0 : r0 + rows, c0 : c0 + cols] of a result
/// N wide, from rows of A (stored [K, M] when transA, M = lda) and cols of
/// B. Inside a parallel region (`inRegion`) oneDNN runs on the calling
/// thread alone: a primitive made there is for one thread, and keyed apart.
template <class T, class TC>
Key taskKey(int64_t rows, int64_t K, bool transA, int64_t lda, const Shape &bs, bool transB,
            int64_t cols, int64_t N, float alpha, float beta, bool bias, bool scale,
            int addend, bool inRegion) {
  Key k;
  k.in = int32_t(dnnlType<T>());
  k.out = int32_t(dnnlType<TC>());
  k.threads = inRegion ? 1 : omp_get_max_threads();
  std::memcpy(&k.alpha, &alpha, sizeof alpha);
  std::memcpy(&k.beta, &beta, sizeof beta);
  k.rank = 2;
  k.a[0][0] = rows;
  k.a[0][1] = transA ? 1 : K;
  k.a[1][0] = K;
  k.a[1][1] = transA ? lda : 1;
  describe(bs, transB, 2, k.b);
  k.b[1][0] = cols;
  k.c[0] = rows;
  k.c[1] = cols;
  k.ldc = N;
  k.bias = bias;
  k.addend = addend;
  k.scale = scale;
  return k;
}

/// Whether `k` has a fast primitive, asked once per key and thread without
/// keeping the primitive (the caller's tasks make their own).
template <class T, class TC> bool fastFor(const Key &k, float alpha, float beta) {
  thread_local std::unordered_map<Key, bool, KeyHash> known;
  auto it = known.find(k);
  if (it == known.end())
    it = known.emplace(k, makePrimitive(k, dnnlType<T>(), dnnlType<TC>(), alpha, beta).fast)
             .first;
  return it->second;
}

/// The row tasks of a GEMM without column sums: a multiple of the threads'
/// count of tasks, none over kMaxTaskRows; of a transposed A (a weight
/// gradient, x^T dy) one task per thread, each reading columns of A, at
/// most kMaxTransposedTaskRows of them (the LM head's 4096 ran slower split
/// than whole in the step). None (0 blocks): one thread, too few rows, or
/// a caller in a parallel region (attention's heads), whose GEMM runs on
/// its thread alone: split, it would only be more calls.
RowTasks gemmTasks(int64_t M, int64_t N, bool transA) {
  const int64_t threads = omp_get_max_threads();
  const int64_t perThread = (M + threads - 1) / threads;
  if (threads < 2 || omp_in_parallel() || M < 2 * kMinTaskRows ||
      (transA && perThread > kMaxTransposedTaskRows))
    return RowTasks(0, N, 1, N);
  const int64_t rounds = transA ? 1 : (perThread + kMaxTaskRows - 1) / kMaxTaskRows;
  return RowTasks(M, N,
                  std::max(kMinTaskRows,
                           ((M + threads * rounds - 1) / (threads * rounds) + 15) / 16 * 16),
                  N);
}

/// C = (alpha op(A) B + bias) * scale + addend (+ beta C) as tasks of rows,
/// A's M rows of K (stored [K, M] when transA); with `sums`, also the
/// column sums of the stored C (float, N) in kColumnSumRows's order
/// (Half.h), bitwise what reduce makes of C. false, with nothing written:
/// no tasks (gemmTasks) or no fast kernel for some task (the caller runs
/// the whole GEMM).
template <class T, class TC>
bool taskGemm(const T *A, bool transA, int64_t M, int64_t K, const T *B, const Shape &bs,
              bool transB, int64_t N, float alpha, float beta, const TC *bias, const TC *scale,
              const TC *addend, TC *C, float *sums) {
  const RowTasks tasks = sums ? columnSumTasks(M, N) : gemmTasks(M, N, transA);
  if (tasks.blocks == 0)
    return false;
  const int kind = !addend ? 0 : addend == C ? 2 : 1;
  auto key = [&](int64_t r, int64_t c, bool inRegion) {
    return taskKey<T, TC>(r, K, transA, M, bs, transB, c, N, alpha, beta, bias, scale, kind,
                          inRegion);
  };
  // The tasks' shapes (the last row block and column share may be short),
  // keyed as the tasks will be.
  for (int64_t r : {tasks.blockRows, M - (tasks.blocks - 1) * tasks.blockRows})
    for (int64_t c : {tasks.chunk, N - (tasks.chunks - 1) * tasks.chunk})
      if (!fastFor<T, TC>(key(r, c, tasks.team() > 1 || omp_in_parallel()), alpha, beta))
        return false;
  auto gemm = [&](int64_t r0, int64_t r, int64_t c0, int64_t c) {
    TC *out = C + r0 * N + c0;
    execute(primitiveFor<T, TC>(key(r, c, omp_in_parallel()), alpha, beta),
            transA ? A + r0 : A + r0 * K, B + (transB ? c0 * K : c0), out,
            bias ? bias + c0 : nullptr, scale ? scale + r0 * N + c0 : nullptr,
            kind == 1 ? addend + r0 * N + c0 : nullptr);
    return out;
  };
  if (sums)
    sumColumns(tasks, sums, [&](int64_t, int64_t r0, int64_t r, int64_t c0, int64_t c, float *p) {
      columnPartial(gemm(r0, r, c0, c), r, c, N, p + c0);
    });
  else
    tasks.run([&](int64_t, int64_t r0, int64_t r, int64_t c0, int64_t c) { gemm(r0, r, c0, c); });
  return true;
}

/// Whether C = op(A) op(B) has the rows of one GEMM: M rows of A (its
/// batches folded in, or A transposed and unbatched) against one B.
bool rowsOfOneGemm(const Shape &as, bool transA, const Shape &bs, const Shape &cs) {
  const int64_t batches = batchCount(cs);
  if (transA)
    return batches == 1 && batchCount(as) == 1 && batchCount(bs) == 1;
  return batches == 1 || (batchCount(bs) == 1 && batchCount(as) == batches);
}

template <class T, class TC>
void matmulHalf(const T *A, const Shape &as, bool transA, const T *B,
                const Shape &bs, bool transB, TC *C, const Shape &cs,
                float alpha, float beta) {
  const int cb = cs.rank - 2;
  const int64_t M = cs.dims[cb], N = cs.dims[cb + 1];
  const int64_t K = transA ? as.dims[as.rank - 2] : as.dims[as.rank - 1];
  const int64_t batches = batchCount(cs);
  if (M == 0 || N == 0 || batches == 0)
    return;
  if (K == 0)
    return scaleOnly(C, batches * M * N, beta);
  if (rowsOfOneGemm(as, transA, bs, cs) &&
      taskGemm<T, TC>(A, transA, batches * M, K, B, bs, transB, N, alpha, beta, nullptr, nullptr,
                      nullptr, C, nullptr))
    return;
  Key k;
  keyOf<T, TC>(as, transA, bs, transB, cs, alpha, beta, k);
  Primitive &p = primitiveFor<T, TC>(k, alpha, beta);
  if (!p.fast)
    return widenedMatmul(A, as, transA, B, bs, transB, C, cs, alpha, beta);
  execute(p, A, B, C, nullptr, nullptr, nullptr);
}

/// C = (op(A) op(B) + bias) * scale + addend in float32, rounded to T once.
template <class T>
void epilogue(const T *A, const Shape &as, bool transA, const T *B, const Shape &bs,
              bool transB, const T *bias, const T *scale, const T *addend, T *C,
              const Shape &cs) {
  const int64_t N = cs.dims[cs.rank - 1], n = cs.numel();
  if (n == 0)
    return;
  const int64_t K = transA ? as.dims[as.rank - 2] : as.dims[as.rank - 1];
  if constexpr (kIsHalf<T>)
    if (K > 0 && rowsOfOneGemm(as, transA, bs, cs) &&
        taskGemm<T, T>(A, transA, n / N, K, B, bs, transB, N, 1.0f, 0.0f, bias, scale, addend, C,
                       nullptr))
      return;
  Primitive *p = nullptr;
  if (K > 0) {
    Key k;
    keyOf<T, T>(as, transA, bs, transB, cs, 1.0f, 0.0f, k);
    k.bias = bias != nullptr;
    k.addend = !addend ? 0 : addend == C ? 2 : 1;
    k.scale = scale != nullptr;
    p = &primitiveFor<T, T>(k, 1.0f, 0.0f);
  }
  if (p && p->fast)
    return execute(*p, A, B, C, bias, scale, addend == C ? nullptr : addend);
  // No fast primitive (or K = 0): the float product, then the sum in float
  // and one rounding (scratch slot 23: the widened matmul uses 20-22).
  float *c;
  if constexpr (std::is_same_v<T, float>) {
    c = addend == C ? scratch<float, 23>(size_t(n)) : C; // keep the addend
    matmul(A, as, transA, B, bs, transB, c, cs);
  } else {
    c = scratch<float, 23>(size_t(n));
    widenedMatmul(A, as, transA, B, bs, transB, c, cs, 1.0f, 0.0f);
  }
  // Row by row, the 16-bit operands widened and the sum narrowed with the
  // vector conversions (scratch slots 24-26, per thread).
  const int64_t rows = n / N;
  parallelFor(rows, std::max<int64_t>(1, kGrain / N), [&](int64_t r0, int64_t r1) {
    float *b = nullptr, *row = nullptr, *sr = nullptr;
    if constexpr (!std::is_same_v<T, float>) {
      row = scratch<float, 24>(size_t(N));
      if (bias)
        convert(bias, b = scratch<float, 25>(size_t(N)), N);
      if (scale)
        sr = scratch<float, 26>(size_t(N));
    }
    for (int64_t r = r0; r < r1; ++r) {
      const float *cr = c + r * N;
      if constexpr (std::is_same_v<T, float>) {
        float *out = C + r * N;
        const float *a = addend ? addend + r * N : nullptr;
        const float *sc = scale ? scale + r * N : nullptr;
        for (int64_t j = 0; j < N; ++j)
          out[j] = (cr[j] + (bias ? bias[j] : 0.0f)) * (sc ? sc[j] : 1.0f) + (a ? a[j] : 0.0f);
      } else {
        if (addend)
          convert(addend + r * N, row, N);
        if (scale)
          convert(scale + r * N, sr, N);
        for (int64_t j = 0; j < N; ++j)
          row[j] = (cr[j] + (b ? b[j] : 0.0f)) * (sr ? sr[j] : 1.0f) + (addend ? row[j] : 0.0f);
        convert(row, C + r * N, N);
      }
    }
  });
}

/// The epilogue, and with `sum` its result's column sums [N] in float
/// rounded to T once (nn.matmul_epilogue's column_sum), bitwise reduce's
/// of C: summed as the GEMM stores the rows where they collapse into one
/// GEMM, else by reduce after it.
template <class T>
void epilogueWithSum(const T *A, const Shape &as, bool transA, const T *B, const Shape &bs,
                     bool transB, const T *bias, const T *scale, const T *addend, T *C,
                     const Shape &cs, T *sum) {
  if (!sum)
    return epilogue(A, as, transA, B, bs, transB, bias, scale, addend, C, cs);
  const int64_t N = cs.dims[cs.rank - 1], n = cs.numel();
  if (N == 0)
    return;
  const int64_t rows = n / N;
  const int64_t K = transA ? as.dims[as.rank - 2] : as.dims[as.rank - 1];
  float *y;
  if constexpr (std::is_same_v<T, float>)
    y = sum;
  else
    y = scratch<float, 28>(size_t(N));
  // One row or one column is no matrix to reduce: reduce copies the row or
  // sums the whole column in double.
  if (!(!transA && K > 0 && rows > 1 && N > 1 &&
        rowsOfOneGemm(as, transA, bs, cs) &&
        taskGemm<T, T>(A, false, rows, K, B, bs, transB, N, 1.0f, 0.0f, bias, scale, addend, C,
                       y))) {
    epilogue(A, as, transA, B, bs, transB, bias, scale, addend, C, cs);
    Shape matrix;
    matrix.rank = 2;
    matrix.dims[0] = rows;
    matrix.dims[1] = N;
    reduce(Reduce::Sum, C, matrix, 1, y);
  }
  if constexpr (!std::is_same_v<T, float>)
    convert(y, sum, N);
}

} // namespace

const char *bf16GemmPath() {
  static const std::string path = [] {
    Key k;
    k.rank = 2;
    const Shape s{2, {64, 64}};
    describe(s, false, 2, k.a);
    describe(s, false, 2, k.b);
    k.c[0] = k.c[1] = 64;
    Primitive p =
        makePrimitive(k, memory::data_type::bf16, memory::data_type::f32, 1, 0);
    return p.fast ? "onednn " + p.impl
                  : std::string("fp32 gemm on widened operands");
  }();
  return path.c_str();
}

void matmul(const Bf16 *A, const Shape &as, bool transA, const Bf16 *B,
            const Shape &bs, bool transB, float *C, const Shape &cs,
            float alpha, float beta) {
  matmulHalf(A, as, transA, B, bs, transB, C, cs, alpha, beta);
}
void matmul(const Bf16 *A, const Shape &as, bool transA, const Bf16 *B,
            const Shape &bs, bool transB, Bf16 *C, const Shape &cs, float alpha,
            float beta) {
  matmulHalf(A, as, transA, B, bs, transB, C, cs, alpha, beta);
}
void matmul(const Fp16 *A, const Shape &as, bool transA, const Fp16 *B,
            const Shape &bs, bool transB, float *C, const Shape &cs,
            float alpha, float beta) {
  matmulHalf(A, as, transA, B, bs, transB, C, cs, alpha, beta);
}
void matmul(const Fp16 *A, const Shape &as, bool transA, const Fp16 *B,
            const Shape &bs, bool transB, Fp16 *C, const Shape &cs, float alpha,
            float beta) {
  matmulHalf(A, as, transA, B, bs, transB, C, cs, alpha, beta);
}

void matmulEpilogue(const float *A, const Shape &as, bool transA, const float *B,
                    const Shape &bs, bool transB, const float *bias, const float *scale,
                    const float *addend, float *C, const Shape &cs, float *columnSum) {
  epilogueWithSum(A, as, transA, B, bs, transB, bias, scale, addend, C, cs, columnSum);
}
void matmulEpilogue(const Bf16 *A, const Shape &as, bool transA, const Bf16 *B,
                    const Shape &bs, bool transB, const Bf16 *bias, const Bf16 *scale,
                    const Bf16 *addend, Bf16 *C, const Shape &cs, Bf16 *columnSum) {
  epilogueWithSum(A, as, transA, B, bs, transB, bias, scale, addend, C, cs, columnSum);
}
void matmulEpilogue(const Fp16 *A, const Shape &as, bool transA, const Fp16 *B,
                    const Shape &bs, bool transB, const Fp16 *bias, const Fp16 *scale,
                    const Fp16 *addend, Fp16 *C, const Shape &cs, Fp16 *columnSum) {
  epilogueWithSum(A, as, transA, B, bs, transB, bias, scale, addend, C, cs, columnSum);
}

} // namespace dsrt::cpu
