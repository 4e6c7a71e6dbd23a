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

/// Checks query [..., T, E], key [..., S, E], value [..., S, F], the bias
/// broadcasting to the scores [..., T, S], and the attributes.
void checkAttention(const Instr &i, const Check &c, const Tensor *q, const Tensor *k, const Tensor *v,
                    const Tensor *bias) {
  c.layout();
  if (i.ints.size() == 6) {
    // A tensor-parallel part: heads split on a leading dimension, whole.
    c.axis(i.ints[3], q);
    if (i.ints[3] >= q->shape.rank - 2 || i.ints[4] != 1 || i.ints[5] < 1)
      c.fail("tensor-parallel heads must be split whole (one block) on a leading dimension, "
             "got [dim " + std::to_string(i.ints[3]) + ", blocks " + std::to_string(i.ints[4]) +
             ", tp " + std::to_string(i.ints[5]) + "]");
  }
  c.flag(0, "scale_divides");
  c.flag(1, "causal");
  c.floatIn(0, "scale", 1e-30, std::numeric_limits<double>::infinity());
  c.floatIn(1, "ratio", 0, 1);
  c.minRank(q, 2, "query");
  const int r = q->shape.rank;
  if (k->shape.rank != r || v->shape.rank != r ||
      !std::equal(q->shape.dims, q->shape.dims + r - 2, k->shape.dims) ||
      !std::equal(q->shape.dims, q->shape.dims + r - 2, v->shape.dims) ||
      k->shape.dims[r - 1] != q->shape.dims[r - 1] || v->shape.dims[r - 2] != k->shape.dims[r - 2])
    c.fail("query " + Check::shape(q) + ", key " + Check::shape(k) + " and value " +
           Check::shape(v) + " are not [..., T, E], [..., S, E] and [..., S, F]");
  if (bias) {
    c.floats({bias});
    Tensor scores;
    scores.shape = q->shape;
    scores.shape.dims[r - 1] = k->shape.dims[r - 2];
    c.broadcastsTo(bias, &scores);
  }
}

/// The kernel's view of the instruction's operands.
cpu::Attention attentionOf(const Instr &i, const Tensor *q, const Tensor *k, const Tensor *v,
                           const Tensor *bias, const Context &ctx) {
  const int r = q->shape.rank;
  cpu::Attention a;
  a.heads = prod(q->shape, 0, r - 2);
  a.T = q->shape.dims[r - 2], a.E = q->shape.dims[r - 1];
  a.S = k->shape.dims[r - 2], a.F = v->shape.dims[r - 1];
  a.divides = i.ints[0] != 0, a.causal = i.ints[1] != 0;
  a.scale = float(i.floats[0]);
  a.scores = q->shape;
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
  if (i.ints.size() == 6) {
    const int d = int(i.ints[3]);
    a.tpLocal = q->shape.dims[d];
    a.tpWhole = a.tpLocal * i.ints[5];
    a.tpOffset = a.tpLocal * int64_t(ctx.ranks[2]);
    a.tpTrailing = prod(q->shape, d + 1, r - 2);
  }
  return a;
}

/// The query's shape with its last dimension `last` (the result's with the
/// value's feature size, the stats' with 2).
Tensor withLast(const Tensor *q, int64_t last) {
  Tensor t = *q;
  t.shape.dims[q->shape.rank - 1] = last;
  t.numel = t.shape.numel();
  return t;
}

} // namespace

void addAttentionOps(OpTable &t) {
  t["nn.attention"] = {[](Instr &i, const Check &c) {
    if (i.in.size() != 3 && i.in.size() != 4)
      c.arity(3, 2);
    c.arity(i.in.size(), 2);
    const Tensor *bias = i.in.size() == 4 ? i.in[3] : nullptr;
    checkAttention(i, c, i.in[0], i.in[1], i.in[2], bias);
    const Tensor *q = i.in[0], *v = i.in[2], *out = i.out[0], *stats = i.out[1];
    const plan::DType d = c.sameFloat({q, i.in[1], v, out});
    c.floats({stats});
    Tensor result = withLast(q, v->shape.dims[v->shape.rank - 1]), rows = withLast(q, 2);
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
    const Tensor *bias = i.in.size() == 6 ? i.in[5] : nullptr;
    checkAttention(i, c, i.in[1], i.in[2], i.in[3], bias);
    const plan::DType d =
        c.sameFloat({i.in[0], i.in[1], i.in[2], i.in[3], i.out[0], i.out[1], i.out[2]});
    c.floats({i.in[4]});
    c.sameShape(i.in[1], i.out[0]);
    c.sameShape(i.in[2], i.out[1]);
    c.sameShape(i.in[3], i.out[2]);
    const Tensor *q = i.in[1], *v = i.in[3];
    Tensor result = withLast(q, v->shape.dims[v->shape.rank - 1]), rows = withLast(q, 2);
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
