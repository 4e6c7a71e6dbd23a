//===- OpsInternal.h - what the op tables share (internal) -----*- C++ -*-===//
//
// The load-time Check of an instruction, the dtype dispatch of kernels and
// the entry type of the op tables. Ops.cpp holds the table and the
// elementwise, GEMM, normalization, reduction and layout ops; OpsLoss.cpp
// the losses, embeddings and vocabulary-parallel ops; OpsTrain.cpp the
// optimizer, clipping and accumulation ops; OpsDist.cpp the collectives and
// messages.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_CORE_OPSINTERNAL_H
#define DSRT_CORE_OPSINTERNAL_H

#include "config/LrSchedule.h"
#include "plan/Instructions.h"
#include "runtime/core/Executor.h"
#include "runtime/kernels/cpu/Half.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dsrt::ops {
namespace plan = dsc::plan;

/// The counts an attribute layout allows, for a message: "2", "0 or 2",
/// "1, 2 or 4", or "an operand-dependent number of".
inline std::string countsText(const AttributeCounts &c) {
  if (c.operandDependent)
    return "an operand-dependent number of";
  std::vector<std::string> counts;
  for (size_t k = 0; k < 64; ++k)
    if ((c.allowed >> k) & 1)
      counts.push_back(std::to_string(k));
  std::string text;
  for (size_t j = 0; j < counts.size(); ++j)
    text += (j == 0 ? "" : j + 1 == counts.size() ? " or " : ", ") + counts[j];
  return text;
}

struct Check {
  const Instr &i;
  const std::string &where;

  [[noreturn]] void fail(const std::string &message) const {
    throw PlanError(where + ": " + message);
  }
  void arity(size_t in, size_t out) const {
    if (i.in.size() != in || i.out.size() != out)
      fail("expects " + std::to_string(in) + " inputs and " + std::to_string(out) +
           " outputs, has " + std::to_string(i.in.size()) + " and " + std::to_string(i.out.size()));
  }
  /// Refuses attribute counts outside the instruction's declared layout
  /// (plan/Instructions.h, kInstructionLayouts: the one place they are
  /// written). A layout with a list sized by the operands (conv's
  /// strides[r], ...) passes any number of integers here unless the binder
  /// gives `ints`, the count it computed from the operand shapes.
  void layout(std::optional<size_t> ints = std::nullopt) const {
    const InstructionLayout *l = instructionLayout(i.op);
    if (!l)
      fail("'" + i.op + "' has no attribute layout (plan/Instructions.h)");
    const AttributeCounts declaredInts = attributeCounts(l->ints);
    const AttributeCounts declaredFloats = attributeCounts(l->floats);
    bool intsFit = ints ? i.ints.size() == *ints : declaredInts.allows(i.ints.size());
    if (!intsFit || !declaredFloats.allows(i.floats.size()))
      fail("expects " + (ints ? std::to_string(*ints) : countsText(declaredInts)) +
           " integer and " + countsText(declaredFloats) + " float attributes, has " +
           std::to_string(i.ints.size()) + " and " + std::to_string(i.floats.size()));
  }
  void dtype(const Tensor *t, plan::DType d, const char *what) const {
    if (t->dtype != d)
      fail(std::string(what) + " must be " + plan::DType_Name(d) + ", is " +
           plan::DType_Name(t->dtype));
  }
  void floats(std::initializer_list<const Tensor *> ts) const {
    for (const Tensor *t : ts)
      dtype(t, plan::F32, "operand");
  }
  /// The float type all of `ts` share: F32, or BF16 / F16 (mixed
  /// precision: 16-bit storage, float math in the kernel).
  /// sameFloat, or all int64.
  plan::DType sameMoved(std::initializer_list<const Tensor *> ts) const {
    if ((*ts.begin())->dtype != plan::I64)
      return sameFloat(ts);
    for (const Tensor *t : ts)
      dtype(t, plan::I64, "operand");
    return plan::I64;
  }
  plan::DType sameFloat(std::initializer_list<const Tensor *> ts) const {
    plan::DType d = (*ts.begin())->dtype;
    if (d != plan::F32 && d != plan::BF16 && d != plan::F16)
      fail(std::string("operand must be F32, BF16 or F16, is ") + plan::DType_Name(d));
    for (const Tensor *t : ts)
      dtype(t, d, "operand");
    return d;
  }
  void sameShape(const Tensor *a, const Tensor *b) const {
    if (a->numel != b->numel || a->shape.rank != b->shape.rank ||
        !std::equal(a->shape.dims, a->shape.dims + a->shape.rank, b->shape.dims))
      fail("shapes " + shape(a) + " and " + shape(b) + " differ");
  }
  void broadcastsTo(const Tensor *a, const Tensor *out) const {
    int off = out->shape.rank - a->shape.rank;
    bool ok = off >= 0;
    for (int d = 0; ok && d < a->shape.rank; ++d)
      ok = a->shape.dims[d] == 1 || a->shape.dims[d] == out->shape.dims[d + off];
    if (!ok)
      fail("operand " + shape(a) + " does not broadcast to " + shape(out));
  }
  void inPlace(const Tensor *in, const Tensor *out) const {
    if (in->offset != out->offset)
      fail("the update must be in place (result at offset " + std::to_string(out->offset) +
           ", state at " + std::to_string(in->offset) + ")");
  }
  void axis(int64_t a, const Tensor *t) const {
    if (a < 0 || a >= std::max(t->shape.rank, 1))
      fail("axis " + std::to_string(a) + " out of range for rank " + std::to_string(t->shape.rank));
  }
  /// A one-element buffer of dtype d (the kernel reads or writes element 0).
  void scalar(const Tensor *t, plan::DType d, const char *what) const {
    dtype(t, d, what);
    if (t->numel != 1)
      fail(std::string(what) + " must be a scalar (one element), has shape " + shape(t));
  }
  void minRank(const Tensor *t, int rank, const char *what) const {
    if (t->shape.rank < rank)
      fail(std::string(what) + " " + shape(t) + " must have rank >= " + std::to_string(rank));
  }
  /// Integer attribute k is a flag.
  void flag(size_t k, const char *what) const {
    if (i.ints[k] != 0 && i.ints[k] != 1)
      fail(std::string(what) + " must be 0 or 1, is " + std::to_string(i.ints[k]));
  }
  /// Float attribute k lies in [lo, hi) (never NaN; hi = inf: finite).
  void floatIn(size_t k, const char *what, double lo, double hi) const {
    auto text = [](double v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", v);
      return std::string(buf);
    };
    double v = i.floats[k];
    if (!(v >= lo && v < hi))
      fail(std::string(what) + " " + text(v) + " must lie in [" + text(lo) + ", " + text(hi) + ")");
  }
  /// a * b for element counts of different buffers: each is bounded by
  /// kMaxPlanElements, their product need not fit in 64 bits.
  int64_t mul(int64_t a, int64_t b) const {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r) || r > kMaxPlanElements)
      fail("element count " + std::to_string(a) + " x " + std::to_string(b) + " is too large");
    return r;
  }
  int64_t add(int64_t a, int64_t b) const {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r) || r > kMaxPlanElements)
      fail("element count " + std::to_string(a) + " + " + std::to_string(b) + " is too large");
    return r;
  }
  static std::string shape(const Tensor *t) {
    std::string r = "[";
    for (int d = 0; d < t->shape.rank; ++d)
      r += (d ? "," : "") + std::to_string(t->shape.dims[d]);
    return r + "]";
  }
};

inline int64_t prod(const cpu::Shape &s, int from, int to) {
  int64_t n = 1;
  for (int d = from; d < to; ++d)
    n *= s.dims[d];
  return n;
}

/// g = {outer, n, inner} around `axis`.
inline void splitAround(Instr &i, const Tensor *t, int64_t axis) {
  i.g[0] = prod(t->shape, 0, (int)axis);
  i.g[1] = t->shape.rank ? t->shape.dims[axis] : 1;
  i.g[2] = prod(t->shape, (int)axis + 1, t->shape.rank);
}

/// Element type tags for byFloat.
template <typename T> struct Tag {
  using type = T;
};
/// A tensor's elements as T (float, cpu::Bf16 or cpu::Fp16).
template <typename T> T *as(const Tensor *t) { return static_cast<T *>(t->data); }

/// The kernel `make` builds for the element type of float dtype d: `make`
/// is a generic lambda taking a Tag and returning a captureless kernel
/// that reads its operands with as<T>() (one instance per type, chosen at
/// load time, nothing decided in the step).
template <typename Make> KernelFn byFloat(plan::DType d, Make &&make) {
  switch (d) {
  case plan::BF16:
    return make(Tag<cpu::Bf16>{});
  case plan::F16:
    return make(Tag<cpu::Fp16>{});
  default:
    return make(Tag<float>{});
  }
}

/// byFloat, and int64 (the layout ops that move indices and labels).
template <typename Make> KernelFn byMoved(plan::DType d, Make &&make) {
  if (d == plan::I64)
    return make(Tag<int64_t>{});
  return byFloat(d, std::forward<Make>(make));
}

inline void noteBad(Context &c, int64_t bad, const Instr &i) {
  if (bad && !c.badIndices)
    c.badIndexOp = i.op;
  c.badIndices += bad;
}

/// The kernel of an instruction with nothing to compute (an empty tensor,
/// whose kernel would divide by its zero extent).
inline void runNothing(const Instr &, Context &) {}

/// gather / gather_grad with empty rows (g = {outer, A, 0, nIdx}): nothing
/// moves, but an index outside [-A, A) is still reported.
inline void countBadIndices(const Instr &i, Context &ctx) {
  const int64_t *idx = i.in[1]->i64(), a = i.g[1];
  int64_t bad = 0;
  for (int64_t j = 0; j < i.g[3]; ++j)
    bad += idx[j] < -a || idx[j] >= a;
  noteBad(ctx, bad, i);
}

/// Group sizes are checked against the plan's dp / pp after binding; until
/// then they only need to be sane.
inline void groupSize(const Check &c, int64_t group) {
  if (group < 1 || group > kMaxPlanRanks)
    c.fail("group size " + std::to_string(group) + " must lie in [1, " +
           std::to_string(kMaxPlanRanks) + "]");
}

/// A fused update's parameters (train.fused_adam, train.fused_lamb): its
/// outputs are the N parameters and their two moments, then the K working
/// copies that the integers after its `flags` flags name (copy_of, plan
/// format 19); 0 where the counts do not add up.
inline size_t fusedParameters(const Instr &i, size_t flags) {
  const size_t copies = i.ints.size() - flags;
  return i.out.size() >= copies && (i.out.size() - copies) % 3 == 0
             ? (i.out.size() - copies) / 3
             : 0;
}

/// The betas an update with betas (train.adam, train.lamb(_stats),
/// train.lion) uses this step: its own (floats 0 and 1), except under
/// OneCycle with cycle_momentum, where DeepSpeed writes the scheduler's
/// (momentum, 0.99) into the optimizer before each update (the executor
/// evaluates them once per step: Context::cycledBetas).
inline std::pair<float, float> stepBetas(const Instr &i, const Context &ctx) {
  if (ctx.cycledBetas)
    return {ctx.beta1, ctx.beta2};
  return {float(i.floats[0]), float(i.floats[1])};
}

/// train.clip_grad_norm's decision, one for the CPU and the CUDA kernels:
/// from the global sum of squares `sq` (and fp16's loss scale, the input
/// after the sum when the plan has one), writes the norm into the norm
/// buffer's host copy and returns the factor the gradients are multiplied
/// by (1: left as they are): torch.nn.utils.clip_grad_norm_'s and
/// DeepSpeed's max_norm / (norm + 1e-6) when the norm exceeds max_norm,
/// with fp16's loss scale divided out in the same multiplication
/// (DeepSpeed's combined_scale). A non-finite norm stops the step before
/// any update: fp16 sets Context::overflow and returns nothing (the loss
/// scaler skips the step); otherwise it throws NonFiniteError (DeepSpeed's
/// fp32 optimizer would apply NaN to every parameter).
/// The decision itself: `lossScale` is fp16's (null without one), `norm`
/// the buffer the norm goes to, maxNorm the bound (0: none).
inline std::optional<double> clipDecision(Context &ctx, double sq, const float *lossScale,
                                          double maxNorm, float *norm) {
  double scale = lossScale ? double(*lossScale) : 1.0;
  double value = std::sqrt(sq) / scale;
  *norm = (float)value;
  if (!std::isfinite(value)) {
    if (lossScale) {
      ctx.overflow = true;
      return std::nullopt;
    }
    throw NonFiniteError(ctx.step, value);
  }
  double coef = maxNorm > 0 ? maxNorm / (value + 1e-6) : 1.0;
  return std::min(coef, 1.0) / scale;
}
inline std::optional<double> clipFactor(const Instr &i, Context &ctx, double sq) {
  size_t n = i.out.size() - 1;
  return clipDecision(ctx, sq, i.g[1] ? i.in[n + i.g[0]]->f32() : nullptr, i.floats[0],
                      i.out[n]->f32());
}
/// train.clip_coef's (N gradients [, sum_sq] [, loss_scale] -> norm,
/// coef): clip_grad_norm's decision, the factor written as a float (what
/// clip_grad_norm multiplies by; 1 when it leaves the gradients as they
/// are). g[0], g[1]: has_sum_sq, has_loss_scale.
inline void clipCoef(const Instr &i, Context &ctx, double sq) {
  size_t n = i.in.size() - size_t(i.g[0]) - size_t(i.g[1]);
  std::optional<double> coef = clipDecision(ctx, sq, i.g[1] ? i.in[n + i.g[0]]->f32() : nullptr,
                                            i.floats[0], i.out[0]->f32());
  *i.out[1]->f32() = coef ? (float)*coef : 1.0f;
}

struct OpDef {
  std::function<void(Instr &, const Check &)> bind; // validates, sets i.run
};

template <cpu::Binary B, typename T> void runBinary(const Instr &i, Context &) {
  cpu::binary(B, as<T>(i.in[0]), i.in[0]->shape, as<T>(i.in[1]), i.in[1]->shape,
              as<T>(i.out[0]), i.out[0]->shape);
}
template <cpu::Unary U, typename T> void runUnary(const Instr &i, Context &) {
  cpu::unary(U, as<T>(i.in[0]), as<T>(i.out[0]), i.out[0]->numel);
}

template <cpu::Binary B> void bindBinary(Instr &i, const Check &c) {
  c.arity(2, 1);
  c.layout();
  plan::DType d = c.sameFloat({i.in[0], i.in[1], i.out[0]});
  c.broadcastsTo(i.in[0], i.out[0]);
  c.broadcastsTo(i.in[1], i.out[0]);
  i.run = byFloat(d, [](auto tag) -> KernelFn {
    return runBinary<B, typename decltype(tag)::type>;
  });
}
template <cpu::Unary U> void bindUnary(Instr &i, const Check &c) {
  c.arity(1, 1);
  c.layout();
  plan::DType d = c.sameFloat({i.in[0], i.out[0]});
  c.sameShape(i.in[0], i.out[0]);
  i.run = byFloat(d, [](auto tag) -> KernelFn {
    return runUnary<U, typename decltype(tag)::type>;
  });
}

inline cpu::DType kernelDType(plan::DType d) {
  switch (d) {
  case plan::F32:
    return cpu::DType::F32;
  case plan::F64:
    return cpu::DType::F64;
  case plan::I64:
    return cpu::DType::I64;
  case plan::I32:
    return cpu::DType::I32;
  case plan::BF16:
    return cpu::DType::BF16;
  case plan::F16:
    return cpu::DType::F16;
  default:
    return cpu::DType::Bool;
  }
}

using OpTable = std::map<std::string, OpDef>;
void addLossOps(OpTable &t);  // OpsLoss.cpp
void addTrainOps(OpTable &t); // OpsTrain.cpp
void addDistOps(OpTable &t);  // OpsDist.cpp
void addAttentionOps(OpTable &t); // OpsAttention.cpp

/// Whether two tensors have the same shape.
inline bool sameShape(const Tensor *a, const Tensor *b) {
  return a->shape.rank == b->shape.rank &&
         std::equal(a->shape.dims, a->shape.dims + a->shape.rank, b->shape.dims);
}

/// A tensor's planned bytes: its offset in its tier's space (the device
/// arena, the host tier). The fusions run when the plan is bound, before
/// the buffers have addresses, so they compare offsets.
struct Region {
  int tier;
  uint64_t begin, end;
  explicit Region(const Tensor *t)
      : tier(int(t->tier)), begin(t->offset), end(t->offset + t->bytes()) {}
  bool overlaps(const Tensor *t) const {
    Region o(t);
    return o.tier == tier && o.begin < end && begin < o.end && o.end > o.begin && end > begin;
  }
  bool same(const Tensor *t) const {
    Region o(t);
    return o.tier == tier && o.begin == begin && o.end == end;
  }
};

/// Whether two tensors' arena bytes overlap (Ops.cpp).
bool bytesOverlap(const Tensor *a, const Tensor *b);
/// Whether no instruction of `list` from index `from` on reads `t`'s bytes
/// before one overwrites them (a list that ends first: no, it may run
/// again or hand them to the next list).
bool deadAfter(const std::vector<Instr> &list, size_t from, const Tensor *t);

} // namespace dsrt::ops

#endif // DSRT_CORE_OPSINTERNAL_H
