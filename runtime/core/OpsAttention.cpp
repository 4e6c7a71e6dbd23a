//===- OpsAttention.cpp - the fused attention instructions ----------------===//
//
// nn.attention (query, key, value[, bias] -> result, stats) and
// nn.attention_grad (grad, query, key, value, stats[, bias] -> query, key
// and value gradients); their attributes: plan/Instructions.h. query,
// key, value, the result and the gradients share one float type (f32,
// bf16 or f16: a mixed-precision plan's); the bias and the stats are f32.
// Dropout draws nn.dropout's bits with nn.dropout's counter.
//
//===----------------------------------------------------------------------===//
#include "runtime/core/OpsInternal.h"

namespace dsrt::ops {

namespace {

using Shape = decltype(Tensor::shape);

/// `t`'s shape with dimensions r-3 and r-2 swapped: a bshd operand
/// [..., T, H, E] as the head-major [..., H, T, E].
Tensor headMajor(const Tensor *t) {
  Tensor h = *t;
  const int r = t->shape.rank;
  std::swap(h.shape.dims[r - 3], h.shape.dims[r - 2]);
  return h;
}

/// The operands as the kernel sees them: head-major [..., H, T, E] views
/// (bshd operands swapped back), so the checks and the geometry read one
/// layout.
struct Operands {
  Tensor q, k, v;
  bool bshd;
  Operands(const Instr &i, const Tensor *q_, const Tensor *k_, const Tensor *v_)
      : q(*q_), k(*k_), v(*v_), bshd(i.ints[3] != 0) {
    if (bshd && q_->shape.rank >= 3 && k_->shape.rank >= 3 && v_->shape.rank >= 3)
      q = headMajor(q_), k = headMajor(k_), v = headMajor(v_);
  }
};

/// Checks query [..., T, E], key [..., S, E], value [..., S, F] (with bshd
/// [..., T, H, E] and so on), the bias broadcasting to the scores
/// [..., (H,) T, S], and the attributes.
void checkAttention(const Instr &i, const Check &c, const Tensor *q, const Tensor *k,
                    const Tensor *v, const Tensor *bias) {
  c.layout();
  c.flag(0, "scale_divides");
  c.flag(1, "causal");
  c.flag(3, "bshd");
  const bool bshd = i.ints[3] != 0;
  c.minRank(q, bshd ? 3 : 2, "query");
  const int r = q->shape.rank;
  if (i.ints.size() == 7) {
    // A tensor-parallel part: heads split whole on a head dimension (a
    // leading one, or H of bshd's [..., T, H, E]).
    c.axis(i.ints[4], q);
    const int64_t d = i.ints[4];
    const bool headDim = bshd ? d < r - 3 || d == r - 2 : d < r - 2;
    if (!headDim || i.ints[5] != 1 || i.ints[6] < 1)
      c.fail("tensor-parallel heads must be split whole (one block) on a head dimension, "
             "got [dim " + std::to_string(d) + ", blocks " + std::to_string(i.ints[5]) +
             ", tp " + std::to_string(i.ints[6]) + "]");
  }
  c.floatIn(0, "scale", 1e-30, std::numeric_limits<double>::infinity());
  c.floatIn(1, "ratio", 0, 1);
  const Operands o(i, q, k, v);
  const Shape &qs = o.q.shape, &ks = o.k.shape, &vs = o.v.shape;
  if (ks.rank != r || vs.rank != r || !std::equal(qs.dims, qs.dims + r - 2, ks.dims) ||
      !std::equal(qs.dims, qs.dims + r - 2, vs.dims) || ks.dims[r - 1] != qs.dims[r - 1] ||
      vs.dims[r - 2] != ks.dims[r - 2])
    c.fail("query " + Check::shape(q) + ", key " + Check::shape(k) + " and value " +
           Check::shape(v) + " are not " +
           (bshd ? "[..., T, H, E], [..., S, H, E] and [..., S, H, F]"
                 : "[..., T, E], [..., S, E] and [..., S, F]"));
  if (bias) {
    c.floats({bias});
    Tensor scores;
    scores.shape = qs;
    scores.shape.dims[r - 1] = ks.dims[r - 2];
    c.broadcastsTo(bias, &scores);
  }
}

/// The kernel's view of the instruction's operands.
cpu::Attention attentionOf(const Instr &i, const Tensor *q_, const Tensor *k_, const Tensor *v_,
                           const Tensor *bias, const Context &ctx) {
  const Operands o(i, q_, k_, v_);
  const Shape &qs = o.q.shape;
  const int r = qs.rank;
  cpu::Attention a;
  a.heads = prod(qs, 0, r - 2);
  a.T = qs.dims[r - 2], a.E = qs.dims[r - 1];
  a.S = o.k.shape.dims[r - 2], a.F = o.v.shape.dims[r - 1];
  a.divides = i.ints[0] != 0, a.causal = i.ints[1] != 0;
  a.bshd = o.bshd;
  a.H = o.bshd ? qs.dims[r - 3] : 1;
  a.scale = float(i.floats[0]);
  a.scores = qs;
  a.scores.dims[r - 1] = a.S;
  if (bias) {
    a.bias = static_cast<const float *>(bias->data);
    a.biasShape = bias->shape;
  }
  // nn.dropout's draw: the global micro-batch of a pipeline, else the
  // run's counter; evaluation keeps every probability.
  a.ratio = ctx.eval ? 0.0f : float(i.floats[1]);
  a.seed = ctx.seed, a.stream = uint64_t(i.ints[2]);
  a.counter = ctx.pipelined ? uint64_t(ctx.globalMicroBatch(i.microBatch)) : ctx.rngCounter;
  if (i.ints.size() == 7) {
    // The split dimension among the head-major heads [..., H]: bshd's H
    // (dimension r-2 of the operand) is the last of them.
    const int d = o.bshd && i.ints[4] == r - 2 ? r - 3 : int(i.ints[4]);
    a.tpLocal = qs.dims[d];
    a.tpWhole = a.tpLocal * i.ints[6];
    a.tpOffset = a.tpLocal * int64_t(ctx.ranks[2]);
    a.tpTrailing = prod(qs, d + 1, r - 2);
  }
  return a;
}

/// The result's shape (the query's with the value's feature size) and the
/// stats' (head-major [..., H, T, 2] in either layout).
Tensor resultOf(const Tensor *q, const Tensor *v) {
  Tensor t = *q;
  t.shape.dims[q->shape.rank - 1] = v->shape.dims[v->shape.rank - 1];
  t.numel = t.shape.numel();
  return t;
}
Tensor statsOf(const Instr &i, const Tensor *q) {
  Tensor t = i.ints[3] ? headMajor(q) : *q;
  t.shape.dims[q->shape.rank - 1] = 2;
  t.numel = t.shape.numel();
  return t;
}

/// The attributes' count: scale_divides, causal, rng_stream, bshd and the
/// optional tensor-parallel [dim, blocks, tp].
void checkInts(const Instr &i, const Check &c) {
  if (i.ints.size() != 4 && i.ints.size() != 7)
    c.fail("has " + std::to_string(i.ints.size()) +
           " integer attributes; expected 4 (scale_divides, causal, rng_stream, bshd) or 7 "
           "(and a tensor-parallel [dim, blocks, tp])");
}

} // namespace

void addAttentionOps(OpTable &t) {
  t["nn.attention"] = {[](Instr &i, const Check &c) {
    if (i.in.size() != 3 && i.in.size() != 4)
      c.arity(3, 2);
    c.arity(i.in.size(), 2);
    checkInts(i, c);
    const Tensor *bias = i.in.size() == 4 ? i.in[3] : nullptr;
    checkAttention(i, c, i.in[0], i.in[1], i.in[2], bias);
    const Tensor *q = i.in[0], *v = i.in[2], *out = i.out[0], *stats = i.out[1];
    const plan::DType d = c.sameFloat({q, i.in[1], v, out});
    c.floats({stats});
    Tensor result = resultOf(q, v), rows = statsOf(i, q);
    c.sameShape(&result, out);
    c.sameShape(&rows, stats);
    i.run = byFloat(d, [](auto tag) -> KernelFn {
      using T = typename decltype(tag)::type;
      return [](const Instr &i, Context &ctx) {
        const Tensor *bias = i.in.size() == 4 ? i.in[3] : nullptr;
        cpu::attention(as<T>(i.in[0]), as<T>(i.in[1]), as<T>(i.in[2]), as<T>(i.out[0]),
                       i.out[1]->f32(), attentionOf(i, i.in[0], i.in[1], i.in[2], bias, ctx));
      };
    });
  }};
  t["nn.attention_grad"] = {[](Instr &i, const Check &c) {
    if (i.in.size() != 5 && i.in.size() != 6)
      c.arity(5, 3);
    c.arity(i.in.size(), 3);
    checkInts(i, c);
    const Tensor *bias = i.in.size() == 6 ? i.in[5] : nullptr;
    checkAttention(i, c, i.in[1], i.in[2], i.in[3], bias);
    const plan::DType d =
        c.sameFloat({i.in[0], i.in[1], i.in[2], i.in[3], i.out[0], i.out[1], i.out[2]});
    c.floats({i.in[4]});
    c.sameShape(i.in[1], i.out[0]);
    c.sameShape(i.in[2], i.out[1]);
    c.sameShape(i.in[3], i.out[2]);
    const Tensor *q = i.in[1], *v = i.in[3];
    Tensor result = resultOf(q, v), rows = statsOf(i, q);
    c.sameShape(&result, i.in[0]);
    c.sameShape(&rows, i.in[4]);
    i.run = byFloat(d, [](auto tag) -> KernelFn {
      using T = typename decltype(tag)::type;
      return [](const Instr &i, Context &ctx) {
        const Tensor *bias = i.in.size() == 6 ? i.in[5] : nullptr;
        cpu::attentionGrad(as<T>(i.in[0]), as<T>(i.in[1]), as<T>(i.in[2]), as<T>(i.in[3]),
                           i.in[4]->f32(), as<T>(i.out[0]), as<T>(i.out[1]), as<T>(i.out[2]),
                           attentionOf(i, i.in[1], i.in[2], i.in[3], bias, ctx));
      };
    });
  }};
}

} // namespace dsrt::ops
