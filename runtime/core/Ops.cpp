//===- Ops.cpp - the ops a plan may use, their checks and kernels --------===//
//
// One entry per op name that dsc's emit-plan writes. Attribute encoding
// (Instr.ints / Instr.floats), in the order listed:
//   nn.<binary> (add sub mul div pow max min), nn.<unary>, nn.not,
//   nn.cast, nn.broadcast (any dtype), nn.select     -
//   nn.cmp                 ints: predicate (eq ne lt le gt ge = 0..5)
//   nn.gelu, nn.gelu_grad  ints: tanh approximation (0/1)
//   nn.matmul              ints: transpose_lhs, transpose_rhs
//   nn.layer_norm(_grad)   ints: axis;  floats: epsilon
//   nn.softmax, nn.log_softmax, and their _grad: ints: axis
//   nn.cross_entropy, nn.nll_loss, and their _grad:
//                          ints: reduction (0 none, 1 sum, 2 mean),
//                                has_ignore_index, ignore_index
//   nn.gather, nn.gather_grad, nn.concat: ints: axis
//   nn.reduce_sum/mean/max ints: the reduced axes
//   nn.transpose           ints: permutation
//   nn.slice, nn.slice_grad: ints: start[rank], stride[rank]
//   nn.dropout             ints: rng stream; floats: ratio
//   nn.dropout_grad        floats: ratio
//   train.lr_schedule      - (the schedule is the plan's baked config)
//   train.clip_grad_norm   floats: max_norm (0: only the norm); ints:
//                          has_sum_sq, has_loss_scale (older plans: none)
//   train.adam             floats: beta1, beta2, eps, weight_decay;
//                          ints: decoupled, bias_correction
//   train.sgd              floats: momentum, dampening, weight_decay;
//                          ints: nesterov
//   fill                   floats: value
//   accumulate             -   (out += in)
//   train.sum_sq           -   (k inputs -> f32 scalar: sum of squares)
//                          with has_sum_sq the input after the gradients is
//                          the global sum of squares (sharded gradients),
//                          with has_loss_scale the last input is fp16's
//                          loss scale (overflow: Context::overflow)
//   load_batch             ints: micro-batch m (pipeline plans only; 0 <= m
//                          < pipeline_micro_batches). 0 inputs, k outputs:
//                          INPUT buffers (the model's inputs this stage
//                          reads, the same names, order and shapes for
//                          every m), filled by the data loader with global
//                          micro-batch ((step - 1) * M + m) * dp + dp index,
//                          which also becomes the dropout counter.
// Communication. Instr.axis names the group: 0 the data-parallel group
// (the ranks of this pipeline stage, the plan's dp), 1 the pipeline group
// (the ranks of this data-parallel index, one per stage, pp). Collectives
// and messages are non-blocking: the instruction starts one, `dist.wait`
// with the same handle completes it; until then its inputs must not be
// written nor its outputs read (the memory plan guarantees it). Handles
// are one namespace over both groups. Collectives: k inputs, k outputs.
//   dist.all_reduce        ints: group size, reduce (0 sum 1 avg 2 max
//                          3 min), handle
//   dist.reduce_scatter    ints: group size, reduce, handle. Output j is
//                          chunk `rank` of input j flattened and
//                          zero-padded to size chunks of ceil(n / size)
//   dist.all_gather        ints: group size, handle. Output j is the
//                          concatenation of every rank's input j, cut to
//                          its length (any n with ceil(n / size) = chunk)
//   dist.wait              ints: handle (0 inputs, 0 outputs)
//   dist.chunk             ints: group size. 1 input, 1 output: chunk
//                          `rank` of the flattened input, zero-padded as
//                          for reduce_scatter (a local copy)
//   dist.send              ints: group size, peer, tag, handle. 1 input
//                          (any dtype), 0 outputs: its bytes go to the rank
//                          `peer` steps along the group (+1 the next
//                          pipeline stage, -1 the previous; inside the
//                          group). No staging.
//   dist.recv              ints: group size, peer, tag, handle. 0 inputs,
//                          1 output (any dtype): filled from the rank `peer`
//                          steps along the group. Messages pair by (source,
//                          destination, tag), several with one tag in the
//                          order sent; a size mismatch fails the wait.
// Dropout in a pipeline plan draws from the global micro-batch of its
// Instr.micro_batch (the instructions of several micro-batches interleave).
// Axes are non-negative. Every check runs at load time; kernels trust them:
// each shape relation a kernel relies on (element counts, broadcasts, batch
// dims, the non-concatenated dims), dtypes of every operand, one-element
// scalars, flags 0/1 and the attribute ranges of the dialects' verifiers.
// Element counts of different buffers multiply with overflow checks (one
// buffer's are bounded by the executor), and an empty tensor whose kernel
// would divide by its zero extent runs no kernel.
//
//===----------------------------------------------------------------------===//
#include "runtime/config/LrSchedule.h"
#include "runtime/core/Executor.h"
#include "runtime/kernels/cpu/Half.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>

namespace dsrt {
namespace plan = dsc::plan;

namespace {

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
  void attrs(size_t ints, size_t floats) const {
    if (i.ints.size() != ints || i.floats.size() != floats)
      fail("expects " + std::to_string(ints) + " integer and " + std::to_string(floats) +
           " float attributes, has " + std::to_string(i.ints.size()) + " and " +
           std::to_string(i.floats.size()));
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

int64_t prod(const cpu::Shape &s, int from, int to) {
  int64_t n = 1;
  for (int d = from; d < to; ++d)
    n *= s.dims[d];
  return n;
}

/// g = {outer, n, inner} around `axis`.
void splitAround(Instr &i, const Tensor *t, int64_t axis) {
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

void noteBad(Context &c, int64_t bad, const Instr &i) {
  if (bad && !c.badIndices)
    c.badIndexOp = i.op;
  c.badIndices += bad;
}

/// The kernel of an instruction with nothing to compute (an empty tensor,
/// whose kernel would divide by its zero extent).
void runNothing(const Instr &, Context &) {}

/// gather / gather_grad with empty rows (g = {outer, A, 0, nIdx}): nothing
/// moves, but an index outside [-A, A) is still reported.
void countBadIndices(const Instr &i, Context &ctx) {
  const int64_t *idx = i.in[1]->i64(), a = i.g[1];
  int64_t bad = 0;
  for (int64_t j = 0; j < i.g[3]; ++j)
    bad += idx[j] < -a || idx[j] >= a;
  noteBad(ctx, bad, i);
}

/// Group sizes are checked against the plan's dp / pp after binding; until
/// then they only need to be sane.
void groupSize(const Check &c, int64_t group) {
  if (group < 1 || group > kMaxPlanRanks)
    c.fail("group size " + std::to_string(group) + " must lie in [1, " +
           std::to_string(kMaxPlanRanks) + "]");
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
  c.attrs(0, 0);
  plan::DType d = c.sameFloat({i.in[0], i.in[1], i.out[0]});
  c.broadcastsTo(i.in[0], i.out[0]);
  c.broadcastsTo(i.in[1], i.out[0]);
  i.run = byFloat(d, [](auto tag) -> KernelFn {
    return runBinary<B, typename decltype(tag)::type>;
  });
}
template <cpu::Unary U> void bindUnary(Instr &i, const Check &c) {
  c.arity(1, 1);
  c.attrs(0, 0);
  plan::DType d = c.sameFloat({i.in[0], i.out[0]});
  c.sameShape(i.in[0], i.out[0]);
  i.run = byFloat(d, [](auto tag) -> KernelFn {
    return runUnary<U, typename decltype(tag)::type>;
  });
}

cpu::DType kernelDType(plan::DType d) {
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

/// The group size, the reduction (all_reduce / reduce_scatter) and the
/// handle of a collective; k float inputs and k outputs whose sizes fit
/// `kind`.
void bindCollective(Instr &i, const Check &c, comm::Kind kind) {
  bool reduces = kind != comm::Kind::AllGather;
  if (i.in.empty() || i.in.size() != i.out.size())
    c.fail("expects k inputs and k outputs (k >= 1), has " + std::to_string(i.in.size()) +
           " and " + std::to_string(i.out.size()));
  c.attrs(reduces ? 3 : 2, 0);
  int64_t group = i.ints[0], handle = i.ints.back();
  groupSize(c, group);
  if (reduces && (i.ints[1] < 0 || i.ints[1] > 3))
    c.fail("unknown reduction " + std::to_string(i.ints[1]) + " (0 sum, 1 avg, 2 max, 3 min)");
  if (handle < 0 || handle > 65535)
    c.fail("handle " + std::to_string(handle) + " out of range [0, 65535]");
  // The communicator sizes a bucket's staging from these sums.
  int64_t inTotal = 0, outTotal = 0;
  for (size_t j = 0; j < i.in.size(); ++j) {
    const Tensor *in = i.in[j], *out = i.out[j];
    // F32, or BF16 / F16 (mixed precision: the parameter copies ZeRO
    // gathers, gradients reduced in communication_data_type). A reduction
    // adds one type.
    c.sameFloat({in, out});
    if (reduces && in->dtype != i.in[0]->dtype)
      c.fail("operand " + std::to_string(j) + ": a reduction's operands share one type; operand 0 is " +
             plan::DType_Name(i.in[0]->dtype) + ", this one " + plan::DType_Name(in->dtype));
    inTotal = c.add(inTotal, in->numel);
    outTotal = c.add(outTotal, out->numel);
    std::string which = "operand " + std::to_string(j) + ": ";
    switch (kind) {
    case comm::Kind::AllReduce:
      if (in->numel != out->numel)
        c.fail(which + "input " + Check::shape(in) + " and output " + Check::shape(out) +
               " differ in size");
      break;
    case comm::Kind::ReduceScatter:
      if (out->numel != comm::chunkOf(in->numel, group))
        c.fail(which + "output " + Check::shape(out) + " is not a chunk of ceil(n/" +
               std::to_string(group) + ") of input " + Check::shape(in));
      break;
    case comm::Kind::AllGather:
      if (comm::chunkOf(out->numel, group) != in->numel)
        c.fail(which + "output " + Check::shape(out) + " is not " + std::to_string(group) +
               " chunks of input " + Check::shape(in));
      break;
    }
  }
  i.comm.assign(i.in.size(), comm::TensorArg());
}

template <comm::Kind K> void runCollective(const Instr &i, Context &ctx) {
  comm::Communicator *c = ctx.comms[i.axis];
  comm::Handle h;
  if (K == comm::Kind::AllReduce)
    h = c->allReduce(i.comm.data(), i.comm.size(), comm::ReduceOp(i.ints[1]), i.label.c_str(),
                     i.staging);
  else if (K == comm::Kind::ReduceScatter)
    h = c->reduceScatter(i.comm.data(), i.comm.size(), comm::ReduceOp(i.ints[1]),
                         i.label.c_str(), i.staging);
  else
    h = c->allGather(i.comm.data(), i.comm.size(), i.label.c_str(), i.staging);
  ctx.handles[size_t(i.ints.back())] = {c, h};
}

/// dist.send / dist.recv: group size, peer (a relative offset), tag, handle.
void bindMessage(Instr &i, const Check &c, bool send) {
  c.arity(send ? 1 : 0, send ? 0 : 1);
  c.attrs(4, 0);
  int64_t group = i.ints[0], peer = i.ints[1], tag = i.ints[2], handle = i.ints[3];
  groupSize(c, group);
  if (peer == 0 || peer <= -group || peer >= group)
    c.fail("peer " + std::to_string(peer) + " must be a non-zero offset inside the group of " +
           std::to_string(group));
  if (tag < 0 || tag > comm::Communicator::kMaxTag)
    c.fail("tag " + std::to_string(tag) + " out of range [0, " +
           std::to_string(comm::Communicator::kMaxTag) + "]");
  if (handle < 0 || handle > 65535)
    c.fail("handle " + std::to_string(handle) + " out of range [0, 65535]");
  if (send)
    i.run = [](const Instr &i, Context &ctx) {
      comm::Communicator *c = ctx.comms[i.axis];
      ctx.handles[size_t(i.ints[3])] = {
          c, c->send(i.in[0]->data, i.in[0]->bytes(), ctx.ranks[i.axis] + int(i.ints[1]),
                     int(i.ints[2]), i.label.c_str())};
    };
  else
    i.run = [](const Instr &i, Context &ctx) {
      comm::Communicator *c = ctx.comms[i.axis];
      ctx.handles[size_t(i.ints[3])] = {
          c, c->recv(i.out[0]->data, i.out[0]->bytes(), ctx.ranks[i.axis] + int(i.ints[1]),
                     int(i.ints[2]), i.label.c_str())};
    };
}

void addDistOps(std::map<std::string, OpDef> &t) {
  t["dist.all_reduce"] = {[](Instr &i, const Check &c) {
    bindCollective(i, c, comm::Kind::AllReduce);
    i.run = runCollective<comm::Kind::AllReduce>;
  }};
  t["dist.reduce_scatter"] = {[](Instr &i, const Check &c) {
    bindCollective(i, c, comm::Kind::ReduceScatter);
    i.run = runCollective<comm::Kind::ReduceScatter>;
  }};
  t["dist.all_gather"] = {[](Instr &i, const Check &c) {
    bindCollective(i, c, comm::Kind::AllGather);
    i.run = runCollective<comm::Kind::AllGather>;
  }};
  t["dist.wait"] = {[](Instr &i, const Check &c) {
    c.arity(0, 0);
    c.attrs(1, 0);
    if (i.ints[0] < 0 || i.ints[0] > 65535)
      c.fail("handle " + std::to_string(i.ints[0]) + " out of range [0, 65535]");
    i.run = [](const Instr &i, Context &ctx) {
      const Context::Started &s = ctx.handles[size_t(i.ints[0])];
      s.comm->wait(s.handle);
    };
  }};
  t["dist.send"] = {[](Instr &i, const Check &c) { bindMessage(i, c, true); }};
  t["dist.recv"] = {[](Instr &i, const Check &c) { bindMessage(i, c, false); }};
  t["load_batch"] = {[](Instr &i, const Check &c) {
    if (!i.in.empty() || i.out.empty())
      c.fail("expects 0 inputs and at least one output, has " + std::to_string(i.in.size()) +
             " and " + std::to_string(i.out.size()));
    c.attrs(1, 0);
    if (i.ints[0] < 0)
      c.fail("micro-batch " + std::to_string(i.ints[0]) + " must be non-negative");
    for (const Tensor *t : i.out)
      if (t->role != plan::INPUT)
        c.fail("writes buffer '" + t->name + "', which is a " + plan::Role_Name(t->role) +
               ", not an INPUT");
    i.run = [](const Instr &i, Context &ctx) {
      int64_t global = ctx.globalMicroBatch(i.ints[0]);
      ctx.rngCounter = uint64_t(global);
      if (!ctx.load)
        throw PlanError(i.label + ": load_batch without a data loader");
      ctx.load(ctx.loader, global, i.out);
    };
  }};
  t["dist.chunk"] = {[](Instr &i, const Check &c) {
    c.arity(1, 1);
    c.attrs(1, 0);
    int64_t group = i.ints[0];
    groupSize(c, group);
    if (i.in[0]->dtype != i.out[0]->dtype)
      c.fail("input and output dtypes differ");
    if (i.out[0]->numel != comm::chunkOf(i.in[0]->numel, group))
      c.fail("output " + Check::shape(i.out[0]) + " is not a chunk of ceil(n/" +
             std::to_string(group) + ") of input " + Check::shape(i.in[0]));
    i.run = [](const Instr &i, Context &ctx) {
      // Elements [rank * c, (rank + 1) * c) of the input zero-padded to
      // size chunks of c.
      int64_t c = i.out[0]->numel, n = i.in[0]->numel;
      int64_t rank = ctx.ranks[i.axis];
      int64_t have = std::max<int64_t>(0, std::min(c, n - rank * c));
      size_t esize = i.out[0]->bytes() / size_t(std::max<int64_t>(c, 1));
      if (have)
        std::memmove(i.out[0]->data,
                     static_cast<const char *>(i.in[0]->data) + size_t(rank * c) * esize,
                     size_t(have) * esize);
      std::memset(static_cast<char *>(i.out[0]->data) + size_t(have) * esize, 0,
                  size_t(c - have) * esize);
    };
  }};
}

const std::map<std::string, OpDef> &table() {
  static const std::map<std::string, OpDef> ops = [] {
    std::map<std::string, OpDef> t;
    t["nn.add"] = {bindBinary<cpu::Binary::Add>};
    t["nn.sub"] = {bindBinary<cpu::Binary::Sub>};
    t["nn.mul"] = {bindBinary<cpu::Binary::Mul>};
    t["nn.div"] = {bindBinary<cpu::Binary::Div>};
    t["nn.pow"] = {bindBinary<cpu::Binary::Pow>};
    t["nn.max"] = {bindBinary<cpu::Binary::Max>};
    t["nn.min"] = {bindBinary<cpu::Binary::Min>};
    t["nn.neg"] = {bindUnary<cpu::Unary::Neg>};
    t["nn.abs"] = {bindUnary<cpu::Unary::Abs>};
    t["nn.exp"] = {bindUnary<cpu::Unary::Exp>};
    t["nn.log"] = {bindUnary<cpu::Unary::Log>};
    t["nn.sqrt"] = {bindUnary<cpu::Unary::Sqrt>};
    t["nn.rsqrt"] = {bindUnary<cpu::Unary::Rsqrt>};
    t["nn.reciprocal"] = {bindUnary<cpu::Unary::Reciprocal>};
    t["nn.tanh"] = {bindUnary<cpu::Unary::Tanh>};
    t["nn.erf"] = {bindUnary<cpu::Unary::Erf>};
    t["nn.relu"] = {bindUnary<cpu::Unary::Relu>};
    t["nn.sigmoid"] = {bindUnary<cpu::Unary::Sigmoid>};

    t["nn.not"] = {[](Instr &i, const Check &c) {
      c.arity(1, 1);
      c.attrs(0, 0);
      c.dtype(i.in[0], plan::BOOL, "input");
      c.dtype(i.out[0], plan::BOOL, "result");
      c.sameShape(i.in[0], i.out[0]);
      i.run = [](const Instr &i, Context &) {
        cpu::logicalNot(i.in[0]->u8(), i.out[0]->u8(), i.out[0]->numel);
      };
    }};
    t["nn.gelu"] = {[](Instr &i, const Check &c) {
      c.arity(1, 1);
      c.attrs(1, 0);
      c.flag(0, "tanh approximation");
      plan::DType d = c.sameFloat({i.in[0], i.out[0]});
      c.sameShape(i.in[0], i.out[0]);
      i.run = byFloat(d, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cpu::unary(i.ints[0] ? cpu::Unary::GeluTanh : cpu::Unary::GeluErf, as<T>(i.in[0]),
                     as<T>(i.out[0]), i.out[0]->numel);
        };
      });
    }};
    t["nn.gelu_grad"] = {[](Instr &i, const Check &c) {
      c.arity(2, 1);
      c.attrs(1, 0);
      c.flag(0, "tanh approximation");
      plan::DType d = c.sameFloat({i.in[0], i.in[1], i.out[0]});
      c.sameShape(i.in[0], i.out[0]);
      c.sameShape(i.in[1], i.out[0]);
      i.run = byFloat(d, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cpu::geluGrad(i.ints[0] != 0, as<T>(i.in[0]), as<T>(i.in[1]), as<T>(i.out[0]),
                        i.out[0]->numel);
        };
      });
    }};
    t["nn.cmp"] = {[](Instr &i, const Check &c) {
      c.arity(2, 1);
      c.attrs(1, 0);
      if (i.ints[0] < 0 || i.ints[0] > 5)
        c.fail("unknown comparison predicate " + std::to_string(i.ints[0]));
      c.dtype(i.out[0], plan::BOOL, "result");
      plan::DType d = i.in[0]->dtype;
      if (i.in[1]->dtype != d ||
          (d != plan::F32 && d != plan::BF16 && d != plan::F16 && d != plan::I64))
        c.fail("operands must both be F32 (or BF16, or F16) or both I64");
      c.broadcastsTo(i.in[0], i.out[0]);
      c.broadcastsTo(i.in[1], i.out[0]);
      i.run = d != plan::I64
                  ? byFloat(d, [](auto tag) -> KernelFn {
                      using T = typename decltype(tag)::type;
                      return [](const Instr &i, Context &) {
                        cpu::compare(cpu::Cmp(i.ints[0]), as<T>(i.in[0]), i.in[0]->shape,
                                     as<T>(i.in[1]), i.in[1]->shape, i.out[0]->u8(),
                                     i.out[0]->shape);
                      };
                    })
                  : KernelFn([](const Instr &i, Context &) {
                      cpu::compareI64(cpu::Cmp(i.ints[0]), i.in[0]->i64(), i.in[0]->shape,
                                      i.in[1]->i64(), i.in[1]->shape, i.out[0]->u8(),
                                      i.out[0]->shape);
                    });
    }};
    t["nn.select"] = {[](Instr &i, const Check &c) {
      c.arity(3, 1);
      c.attrs(0, 0);
      c.dtype(i.in[0], plan::BOOL, "condition");
      plan::DType d = c.sameFloat({i.in[1], i.in[2], i.out[0]});
      for (int k = 0; k < 3; ++k)
        c.broadcastsTo(i.in[k], i.out[0]);
      i.run = byFloat(d, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cpu::select(i.in[0]->u8(), i.in[0]->shape, as<T>(i.in[1]), i.in[1]->shape,
                      as<T>(i.in[2]), i.in[2]->shape, as<T>(i.out[0]), i.out[0]->shape);
        };
      });
    }};
    t["nn.cast"] = {[](Instr &i, const Check &c) {
      c.arity(1, 1);
      c.attrs(0, 0);
      if (i.in[0]->numel != i.out[0]->numel)
        c.fail("element counts differ");
      i.run = [](const Instr &i, Context &) {
        cpu::cast(i.in[0]->data, kernelDType(i.in[0]->dtype), i.out[0]->data,
                  kernelDType(i.out[0]->dtype), i.out[0]->numel);
      };
    }};
    t["nn.broadcast"] = {[](Instr &i, const Check &c) {
      c.arity(1, 1);
      c.attrs(0, 0);
      // Any element type: a bool mask input is broadcast too (the key
      // padding mask of nn.MultiheadAttention). g[0]: the element size.
      c.dtype(i.out[0], i.in[0]->dtype, "result");
      c.broadcastsTo(i.in[0], i.out[0]);
      i.g[0] = i.in[0]->numel ? int64_t(i.in[0]->bytes() / size_t(i.in[0]->numel)) : 1;
      i.run = [](const Instr &i, Context &) {
        cpu::broadcastTo(i.in[0]->data, i.in[0]->shape, i.out[0]->data, i.out[0]->shape,
                         size_t(i.g[0]));
      };
    }};
    t["nn.matmul"] = {[](Instr &i, const Check &c) {
      c.arity(2, 1);
      c.attrs(2, 0);
      plan::DType dt = c.sameFloat({i.in[0], i.in[1], i.out[0]});
      c.flag(0, "transpose_lhs");
      c.flag(1, "transpose_rhs");
      const cpu::Shape &a = i.in[0]->shape, &b = i.in[1]->shape, &o = i.out[0]->shape;
      if (a.rank < 2 || b.rank < 2 || o.rank < 2)
        c.fail("operands must have rank >= 2");
      int64_t m = i.ints[0] ? a.dims[a.rank - 1] : a.dims[a.rank - 2];
      int64_t k = i.ints[0] ? a.dims[a.rank - 2] : a.dims[a.rank - 1];
      int64_t k2 = i.ints[1] ? b.dims[b.rank - 1] : b.dims[b.rank - 2];
      int64_t n = i.ints[1] ? b.dims[b.rank - 2] : b.dims[b.rank - 1];
      std::string shapes = Check::shape(i.in[0]) + " x " + Check::shape(i.in[1]) + " -> " +
                           Check::shape(i.out[0]);
      if (k != k2 || o.dims[o.rank - 2] != m || o.dims[o.rank - 1] != n)
        c.fail("shapes " + shapes + " do not multiply");
      // The kernel walks the result's batch index and steps each operand by
      // it (stride 0 where the operand has 1 or no such dim): the batch dims
      // must broadcast (numpy) to exactly the result's.
      int ob = o.rank - 2, ab = a.rank - 2, bb = b.rank - 2;
      if (ob != std::max(ab, bb))
        c.fail("batch dimensions of " + shapes + " do not broadcast to the result's");
      for (int d = 0; d < ob; ++d) {
        int64_t ad = d >= ob - ab ? a.dims[d - (ob - ab)] : 1;
        int64_t bd = d >= ob - bb ? b.dims[d - (ob - bb)] : 1;
        if ((ad != 1 && bd != 1 && ad != bd) || o.dims[d] != (ad == 1 ? bd : ad))
          c.fail("batch dimensions of " + shapes + " do not broadcast to the result's");
      }
      // OpenBLAS takes 32-bit sizes; the kernel may fold the batch into rows.
      int64_t rows = n ? i.out[0]->numel / n : 0;
      for (int64_t v : {rows, n, k, a.dims[a.rank - 1], b.dims[b.rank - 1]})
        if (v > INT32_MAX)
          c.fail("shapes " + shapes + ": a matrix dimension exceeds 2^31 - 1, the GEMM limit");
      i.run = byFloat(dt, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cpu::matmul(as<T>(i.in[0]), i.in[0]->shape, i.ints[0] != 0, as<T>(i.in[1]),
                      i.in[1]->shape, i.ints[1] != 0, as<T>(i.out[0]), i.out[0]->shape);
        };
      });
    }};
    t["nn.layer_norm"] = {[](Instr &i, const Check &c) {
      if (i.in.size() != 2 && i.in.size() != 3)
        c.fail("expects 2 or 3 inputs");
      c.arity(i.in.size(), 1);
      c.attrs(1, 1);
      // x and y share a float type; scale and bias are fp32 (with mixed
      // precision they are the master parameters themselves).
      plan::DType d = c.sameFloat({i.in[0], i.out[0]});
      c.floats({i.in[1]});
      if (i.in.size() == 3)
        c.floats({i.in[2]});
      c.floatIn(0, "epsilon", 0, INFINITY);
      c.axis(i.ints[0], i.in[0]);
      c.sameShape(i.in[0], i.out[0]);
      i.g[0] = prod(i.in[0]->shape, 0, (int)i.ints[0]);
      i.g[1] = prod(i.in[0]->shape, (int)i.ints[0], i.in[0]->shape.rank);
      if (i.in[1]->numel != i.g[1] || (i.in.size() == 3 && i.in[2]->numel != i.g[1]))
        c.fail("scale and bias need " + std::to_string(i.g[1]) + " elements");
      // Empty rows: nothing to normalize (the kernel divides by the row).
      i.run = i.in[0]->numel == 0 ? runNothing : byFloat(d, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cpu::layerNorm(as<T>(i.in[0]), i.in[1]->f32(),
                         i.in.size() == 3 ? i.in[2]->f32() : nullptr, as<T>(i.out[0]), i.g[0],
                         i.g[1], (float)i.floats[0]);
        };
      });
    }};
    t["nn.layer_norm_grad"] = {[](Instr &i, const Check &c) {
      c.arity(3, 3);
      c.attrs(1, 1);
      // dy, x and dx share a float type; the scale and its gradients are fp32.
      plan::DType d = c.sameFloat({i.in[0], i.in[1], i.out[0]});
      c.floats({i.in[2], i.out[1], i.out[2]});
      c.floatIn(0, "epsilon", 0, INFINITY);
      c.axis(i.ints[0], i.in[1]);
      c.sameShape(i.in[0], i.in[1]);
      c.sameShape(i.in[1], i.out[0]);
      i.g[0] = prod(i.in[1]->shape, 0, (int)i.ints[0]);
      i.g[1] = prod(i.in[1]->shape, (int)i.ints[0], i.in[1]->shape.rank);
      if (i.in[2]->numel != i.g[1] || i.out[1]->numel != i.g[1] || i.out[2]->numel != i.g[1])
        c.fail("scale and its gradients need " + std::to_string(i.g[1]) + " elements");
      if (i.in[1]->numel == 0) {
        // No rows (or empty ones): the scale's gradients are empty sums,
        // and the kernel would divide by the zero extent.
        i.run = [](const Instr &i, Context &) {
          cpu::fill(i.out[1]->f32(), i.out[1]->numel, 0.0f);
          cpu::fill(i.out[2]->f32(), i.out[2]->numel, 0.0f);
        };
        return;
      }
      i.run = byFloat(d, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cpu::layerNormGrad(as<T>(i.in[0]), as<T>(i.in[1]), i.in[2]->f32(), as<T>(i.out[0]),
                             i.out[1]->f32(), i.out[2]->f32(), i.g[0], i.g[1],
                             (float)i.floats[0]);
        };
      });
    }};
    // softmax / log_softmax and their gradients: one float type, fp32
    // statistics inside the kernel. `kernelOf(d)` picks the instance.
    auto softmaxLike = [&](const char *name, KernelFn (*kernelOf)(plan::DType), bool grad) {
      t[name] = {[kernelOf, grad](Instr &i, const Check &c) {
        c.arity(grad ? 2 : 1, 1);
        c.attrs(1, 0);
        plan::DType d = grad ? c.sameFloat({i.in[0], i.in[1], i.out[0]})
                             : c.sameFloat({i.in[0], i.out[0]});
        c.sameShape(i.in[0], i.out[0]);
        if (grad)
          c.sameShape(i.in[1], i.out[0]);
        c.axis(i.ints[0], i.in[0]);
        splitAround(i, i.in[0], i.ints[0]);
        // Empty: nothing to compute (the kernel divides by the axis' size).
        i.run = i.in[0]->numel ? kernelOf(d) : runNothing;
      }};
    };
    softmaxLike(
        "nn.softmax",
        [](plan::DType d) {
          return byFloat(d, [](auto tag) -> KernelFn {
            using T = typename decltype(tag)::type;
            return [](const Instr &i, Context &) {
              cpu::softmax(as<T>(i.in[0]), as<T>(i.out[0]), i.g[0], i.g[1], i.g[2]);
            };
          });
        },
        false);
    softmaxLike(
        "nn.log_softmax",
        [](plan::DType d) {
          return byFloat(d, [](auto tag) -> KernelFn {
            using T = typename decltype(tag)::type;
            return [](const Instr &i, Context &) {
              cpu::logSoftmax(as<T>(i.in[0]), as<T>(i.out[0]), i.g[0], i.g[1], i.g[2]);
            };
          });
        },
        false);
    softmaxLike(
        "nn.softmax_grad",
        [](plan::DType d) {
          return byFloat(d, [](auto tag) -> KernelFn {
            using T = typename decltype(tag)::type;
            return [](const Instr &i, Context &) {
              cpu::softmaxGrad(as<T>(i.in[0]), as<T>(i.in[1]), as<T>(i.out[0]), i.g[0], i.g[1],
                               i.g[2]);
            };
          });
        },
        true);
    softmaxLike(
        "nn.log_softmax_grad",
        [](plan::DType d) {
          return byFloat(d, [](auto tag) -> KernelFn {
            using T = typename decltype(tag)::type;
            return [](const Instr &i, Context &) {
              cpu::logSoftmaxGrad(as<T>(i.in[0]), as<T>(i.in[1]), as<T>(i.out[0]), i.g[0],
                                  i.g[1], i.g[2]);
            };
          });
        },
        true);

    // Losses: input [N, C, inner...], labels [N, inner...].
    auto lossGeometry = [](Instr &i, const Check &c, const Tensor *input, const Tensor *labels) {
      if (i.ints[0] < 0 || i.ints[0] > 2)
        c.fail("unknown reduction " + std::to_string(i.ints[0]));
      c.flag(1, "has_ignore_index");
      if (input->shape.rank < 2)
        c.fail("input must be [N, C, ...]");
      c.dtype(labels, plan::I64, "labels");
      i.g[0] = input->shape.dims[0];
      i.g[1] = input->shape.dims[1];
      i.g[2] = prod(input->shape, 2, input->shape.rank);
      // The kernels divide by C; a loss over no classes means nothing.
      if (i.g[1] < 1)
        c.fail("input " + Check::shape(input) + " has no classes (dimension 1 is 0)");
      if (labels->numel != i.g[0] * i.g[2])
        c.fail("labels " + Check::shape(labels) + " do not match input " + Check::shape(input));
    };
    auto lossForward = [&](const char *name, bool logits) {
      t[name] = {[lossGeometry, logits](Instr &i, const Check &c) {
        c.arity(2, 1);
        c.attrs(3, 0);
        c.floats({i.in[0], i.out[0]});
        lossGeometry(i, c, i.in[0], i.in[1]);
        int64_t expected = i.ints[0] == 0 ? i.g[0] * i.g[2] : 1;
        if (i.out[0]->numel != expected)
          c.fail("loss must have " + std::to_string(expected) + " elements");
        i.run = logits ? KernelFn([](const Instr &i, Context &ctx) {
          noteBad(ctx,
                  cpu::crossEntropy(i.in[0]->f32(), i.in[1]->i64(), i.out[0]->f32(), i.g[0],
                                    i.g[1], i.g[2], (int)i.ints[0], i.ints[1] != 0, i.ints[2]),
                  i);
        })
                       : KernelFn([](const Instr &i, Context &ctx) {
                           noteBad(ctx,
                                   cpu::nllLoss(i.in[0]->f32(), i.in[1]->i64(), i.out[0]->f32(),
                                                i.g[0], i.g[1], i.g[2], (int)i.ints[0],
                                                i.ints[1] != 0, i.ints[2]),
                                   i);
                         });
      }};
    };
    lossForward("nn.cross_entropy", true);
    lossForward("nn.nll_loss", false);
    auto lossBackward = [&](const char *name, bool logits) {
      t[name] = {[lossGeometry, logits](Instr &i, const Check &c) {
        c.arity(3, 1);
        c.attrs(3, 0);
        c.floats({i.in[0], i.in[2], i.out[0]});
        c.sameShape(i.in[0], i.out[0]);
        lossGeometry(i, c, i.in[0], i.in[1]);
        int64_t expected = i.ints[0] == 0 ? i.g[0] * i.g[2] : 1;
        if (i.in[2]->numel != expected)
          c.fail("loss gradient must have " + std::to_string(expected) + " elements");
        // Bad labels are counted once, by the forward op.
        i.run = logits ? KernelFn([](const Instr &i, Context &) {
          cpu::crossEntropyGrad(i.in[0]->f32(), i.in[1]->i64(), i.in[2]->f32(), i.out[0]->f32(),
                                i.g[0], i.g[1], i.g[2], (int)i.ints[0], i.ints[1] != 0,
                                i.ints[2]);
        })
                       : KernelFn([](const Instr &i, Context &) {
                           cpu::nllLossGrad(i.in[1]->i64(), i.in[2]->f32(), i.out[0]->f32(),
                                            i.g[0], i.g[1], i.g[2], (int)i.ints[0],
                                            i.ints[1] != 0, i.ints[2]);
                         });
      }};
    };
    lossBackward("nn.cross_entropy_grad", true);
    lossBackward("nn.nll_loss_grad", false);

    // ints: axis, then (a vocabulary-parallel part of the table along axis
    // 0) the number of parts: this part is rows [tp rank * A, + A) of A * parts.
    auto vocabPart = [](Instr &i, const Check &c, const Tensor *table) {
      c.attrs(i.ints.size() == 2 ? 2 : 1, 0);
      if (i.ints.size() == 2 && (i.ints[0] != 0 || i.ints[1] < 1 || i.g[0] != 1 ||
                                 c.mul(i.g[1], i.ints[1]) < 1 || table->dtype != plan::F32))
        c.fail("a vocabulary-parallel part is a float32 table split along axis 0 into " +
               std::to_string(i.ints.size() == 2 ? i.ints[1] : 0) + " parts");
    };
    t["nn.gather"] = {[vocabPart](Instr &i, const Check &c) {
      c.arity(2, 1);
      c.floats({i.in[0], i.out[0]});
      c.dtype(i.in[1], plan::I64, "indices");
      c.minRank(i.in[0], 1, "data");
      if (i.ints.empty())
        c.fail("expects the axis");
      c.axis(i.ints[0], i.in[0]);
      splitAround(i, i.in[0], i.ints[0]);
      vocabPart(i, c, i.in[0]);
      i.g[3] = i.in[1]->numel;
      if (i.out[0]->numel != c.mul(c.mul(i.g[0], i.g[3]), i.g[2]))
        c.fail("result " + Check::shape(i.out[0]) + " is not the gathered shape");
      if (i.ints.size() == 2) {
        i.run = [](const Instr &i, Context &ctx) {
          noteBad(ctx,
                  cpu::gatherPart(i.in[0]->f32(), i.in[1]->i64(), i.out[0]->f32(), i.g[1],
                                  i.g[2], i.g[3], ctx.ranks[2] * i.g[1], i.g[1] * i.ints[1]),
                  i);
        };
        return;
      }
      // Empty rows: nothing to copy (the kernel divides by the row length),
      // but the indices are still checked.
      i.run = i.g[2] == 0 ? countBadIndices : KernelFn([](const Instr &i, Context &ctx) {
        noteBad(ctx,
                cpu::gather(i.in[0]->f32(), i.in[1]->i64(), i.out[0]->f32(), i.g[0], i.g[1],
                            i.g[2], i.g[3]),
                i);
      });
    }};
    t["nn.gather_grad"] = {[vocabPart](Instr &i, const Check &c) {
      c.arity(2, 1);
      c.floats({i.in[0], i.out[0]});
      c.dtype(i.in[1], plan::I64, "indices");
      c.minRank(i.out[0], 1, "data gradient");
      if (i.ints.empty())
        c.fail("expects the axis");
      c.axis(i.ints[0], i.out[0]);
      splitAround(i, i.out[0], i.ints[0]);
      vocabPart(i, c, i.out[0]);
      i.g[3] = i.in[1]->numel;
      if (i.in[0]->numel != c.mul(c.mul(i.g[0], i.g[3]), i.g[2]))
        c.fail("gradient " + Check::shape(i.in[0]) + " is not the gathered shape");
      if (i.ints.size() == 2) {
        if (i.in[0]->dtype != plan::F32)
          c.fail("a vocabulary-parallel part's gradient is float32");
        i.run = [](const Instr &i, Context &ctx) {
          noteBad(ctx,
                  cpu::gatherGradPart(i.in[0]->f32(), i.in[1]->i64(), i.out[0]->f32(), i.g[1],
                                      i.g[2], i.g[3], ctx.ranks[2] * i.g[1],
                                      i.g[1] * i.ints[1]),
                  i);
        };
        return;
      }
      i.run = i.g[2] == 0 ? countBadIndices : KernelFn([](const Instr &i, Context &ctx) {
        noteBad(ctx,
                cpu::gatherGrad(i.in[0]->f32(), i.in[1]->i64(), i.out[0]->f32(), i.g[0], i.g[1],
                                i.g[2], i.g[3]),
                i);
      });
    }};
    // Vocabulary-parallel cross-entropy (Megatron's): ints [parts] for the
    // sums, [classes, reduction, has_ignore, ignore_index] for the loss.
    auto vocabRows = [](Instr &i, const Check &c, const Tensor *logits) {
      c.dtype(logits, plan::F32, "logits");
      if (logits->shape.rank != 2)
        c.fail("logits must be [N, C], not " + Check::shape(logits));
      i.g[0] = logits->shape.dims[0];
      i.g[1] = logits->shape.dims[1];
      if (i.g[1] < 1)
        c.fail("logits " + Check::shape(logits) + " have no classes");
    };
    auto rowVector = [](const Check &c, const Tensor *t, int64_t n, plan::DType d,
                        const char *what) {
      c.dtype(t, d, what);
      if (t->numel != n)
        c.fail(std::string(what) + " " + Check::shape(t) + " must have " + std::to_string(n) +
               " elements");
    };
    t["nn.vocab_ce_sums"] = {[vocabRows, rowVector](Instr &i, const Check &c) {
      c.arity(3, 1);
      c.attrs(1, 0);
      vocabRows(i, c, i.in[0]);
      rowVector(c, i.in[1], i.g[0], plan::I64, "labels");
      rowVector(c, i.in[2], i.g[0], plan::F32, "max");
      rowVector(c, i.out[0], c.mul(2, i.g[0]), plan::F32, "sums");
      if (i.ints[0] < 1)
        c.fail("parts must be at least 1");
      i.run = [](const Instr &i, Context &ctx) {
        cpu::crossEntropyPartSums(i.in[0]->f32(), i.in[1]->i64(), i.in[2]->f32(), i.g[0],
                                  i.g[1], ctx.ranks[2] * i.g[1], i.out[0]->f32());
      };
    }};
    t["nn.vocab_ce_sums_grad"] = {[vocabRows, rowVector](Instr &i, const Check &c) {
      c.arity(4, 1);
      c.attrs(1, 0);
      vocabRows(i, c, i.in[0]);
      rowVector(c, i.in[1], i.g[0], plan::I64, "labels");
      rowVector(c, i.in[2], i.g[0], plan::F32, "max");
      rowVector(c, i.in[3], c.mul(2, i.g[0]), plan::F32, "sums gradient");
      c.dtype(i.out[0], plan::F32, "logits gradient");
      c.sameShape(i.in[0], i.out[0]);
      i.run = [](const Instr &i, Context &ctx) {
        cpu::crossEntropyPartSumsGrad(i.in[0]->f32(), i.in[1]->i64(), i.in[2]->f32(),
                                      i.in[3]->f32(), i.out[0]->f32(), i.g[0], i.g[1],
                                      ctx.ranks[2] * i.g[1]);
      };
    }};
    auto vocabLoss = [rowVector](Instr &i, const Check &c, const Tensor *sums,
                                 const Tensor *labels) {
      c.attrs(4, 0);
      c.dtype(sums, plan::F32, "sums");
      if (sums->shape.rank != 2 || sums->shape.dims[0] != 2)
        c.fail("sums must be [2, N], not " + Check::shape(sums));
      i.g[0] = sums->shape.dims[1];
      rowVector(c, labels, i.g[0], plan::I64, "labels");
      if (i.ints[0] < 1 || i.ints[1] < 0 || i.ints[1] > 2)
        c.fail("classes must be positive and reduction 0, 1 or 2");
    };
    t["nn.vocab_ce_loss"] = {[vocabLoss, rowVector](Instr &i, const Check &c) {
      c.arity(3, 1);
      vocabLoss(i, c, i.in[0], i.in[2]);
      rowVector(c, i.in[1], i.g[0], plan::F32, "max");
      rowVector(c, i.out[0], i.ints[1] == 0 ? i.g[0] : 1, plan::F32, "loss");
      i.run = [](const Instr &i, Context &ctx) {
        noteBad(ctx,
                cpu::crossEntropyPartLoss(i.in[0]->f32(), i.in[1]->f32(), i.in[2]->i64(),
                                          i.out[0]->f32(), i.g[0], i.ints[0], (int)i.ints[1],
                                          i.ints[2] != 0, i.ints[3]),
                i);
      };
    }};
    t["nn.vocab_ce_loss_grad"] = {[vocabLoss, rowVector](Instr &i, const Check &c) {
      c.arity(3, 1);
      vocabLoss(i, c, i.in[0], i.in[1]);
      rowVector(c, i.in[2], i.ints[1] == 0 ? i.g[0] : 1, plan::F32, "loss gradient");
      c.dtype(i.out[0], plan::F32, "sums gradient");
      c.sameShape(i.in[0], i.out[0]);
      // Bad labels are counted once, by the forward op.
      i.run = [](const Instr &i, Context &) {
        cpu::crossEntropyPartLossGrad(i.in[0]->f32(), i.in[1]->i64(), i.in[2]->f32(),
                                      i.out[0]->f32(), i.g[0], i.ints[0], (int)i.ints[1],
                                      i.ints[2] != 0, i.ints[3]);
      };
    }};
    auto reduce = [&](const char *name, cpu::Reduce kind) {
      t[name] = {[kind](Instr &i, const Check &c) {
        c.arity(1, 1);
        plan::DType d = c.sameFloat({i.in[0], i.out[0]});
        if (!i.floats.empty())
          c.fail("takes no float attributes");
        uint32_t mask = 0;
        int64_t kept = 1;
        for (int64_t a : i.ints) {
          c.axis(a, i.in[0]);
          mask |= 1u << a;
        }
        for (int d = 0; d < i.in[0]->shape.rank; ++d)
          if (!(mask & (1u << d)))
            kept *= i.in[0]->shape.dims[d];
        if (i.out[0]->numel != kept)
          c.fail("result " + Check::shape(i.out[0]) + " does not match the reduction");
        i.g[0] = mask;
        i.g[1] = (int64_t)kind;
        if (d == plan::F32) {
          i.run = [](const Instr &i, Context &) {
            cpu::reduce(cpu::Reduce(i.g[1]), i.in[0]->f32(), i.in[0]->shape, (uint32_t)i.g[0],
                        i.out[0]->f32());
          };
          return;
        }
        // A 16-bit reduction (a bias gradient under mixed precision) sums in
        // float into scratch reserved here, then rounds once into the result.
        i.scratch.assign(size_t(i.out[0]->numel), 0.0f);
        i.run = byFloat(d, [](auto tag) -> KernelFn {
          using T = typename decltype(tag)::type;
          return [](const Instr &i, Context &) {
            cpu::reduce(cpu::Reduce(i.g[1]), as<T>(i.in[0]), i.in[0]->shape, (uint32_t)i.g[0],
                        i.scratch.data());
            cpu::cast(i.scratch.data(), cpu::DType::F32, i.out[0]->data,
                      kernelDType(i.out[0]->dtype), i.out[0]->numel);
          };
        });
      }};
    };
    reduce("nn.reduce_sum", cpu::Reduce::Sum);
    reduce("nn.reduce_mean", cpu::Reduce::Mean);
    reduce("nn.reduce_max", cpu::Reduce::Max);
    t["nn.transpose"] = {[](Instr &i, const Check &c) {
      c.arity(1, 1);
      plan::DType dt = c.sameFloat({i.in[0], i.out[0]});
      int r = i.in[0]->shape.rank;
      if ((int)i.ints.size() != r || i.out[0]->shape.rank != r)
        c.fail("permutation needs one entry per dimension");
      uint32_t seen = 0;
      for (int d = 0; d < r; ++d) {
        c.axis(i.ints[d], i.in[0]);
        seen |= 1u << i.ints[d];
        if (i.out[0]->shape.dims[d] != i.in[0]->shape.dims[i.ints[d]])
          c.fail("result shape does not match the permutation");
      }
      if (seen != (r ? (1u << r) - 1 : 0))
        c.fail("not a permutation");
      i.run = byFloat(dt, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cpu::transpose(as<T>(i.in[0]), i.in[0]->shape, i.ints.data(), as<T>(i.out[0]));
        };
      });
    }};
    auto sliceLike = [&](const char *name, bool grad) {
      t[name] = {[grad](Instr &i, const Check &c) {
        c.arity(1, 1);
        plan::DType dt = c.sameFloat({i.in[0], i.out[0]});
        const Tensor *big = grad ? i.out[0] : i.in[0], *small = grad ? i.in[0] : i.out[0];
        int r = big->shape.rank;
        c.minRank(big, 1, "sliced operand"); // the kernel walks rows of the last dim
        if ((int)i.ints.size() != 2 * r || small->shape.rank != r)
          c.fail("needs start and stride per dimension");
        for (int d = 0; d < r; ++d) {
          int64_t &start = i.ints[d], &stride = i.ints[r + d], n = small->shape.dims[d];
          int64_t last = 0;
          if (start < 0 || stride <= 0 ||
              (n > 0 && (__builtin_mul_overflow(n - 1, stride, &last) ||
                         __builtin_add_overflow(start, last, &last) ||
                         last >= big->shape.dims[d])))
            c.fail("dimension " + std::to_string(d) + " slice is out of bounds");
          // One element (or none) takes no step: a stride past the end is
          // then harmless, but the kernel's offset arithmetic would overflow.
          if (n <= 1)
            stride = 1;
          if (n == 0)
            start = 0;
        }
        i.run = grad ? byFloat(dt, [](auto tag) -> KernelFn {
          using T = typename decltype(tag)::type;
          return [](const Instr &i, Context &) {
            int r = i.out[0]->shape.rank;
            cpu::sliceGrad(as<T>(i.in[0]), i.in[0]->shape, i.ints.data(), i.ints.data() + r,
                           as<T>(i.out[0]), i.out[0]->shape);
          };
        })
                     : byFloat(dt, [](auto tag) -> KernelFn {
                         using T = typename decltype(tag)::type;
                         return [](const Instr &i, Context &) {
                           int r = i.in[0]->shape.rank;
                           cpu::slice(as<T>(i.in[0]), i.in[0]->shape, i.ints.data(),
                                      i.ints.data() + r, as<T>(i.out[0]), i.out[0]->shape);
                         };
                       });
      }};
    };
    sliceLike("nn.slice", false);
    sliceLike("nn.slice_grad", true);
    t["nn.concat"] = {[](Instr &i, const Check &c) {
      if (i.in.empty() || i.out.size() != 1)
        c.fail("expects inputs and one output");
      c.attrs(1, 0);
      plan::DType dt = c.sameFloat({i.out[0]});
      c.minRank(i.out[0], 1, "result");
      c.axis(i.ints[0], i.out[0]);
      // The kernel copies rows of the result's inner size from each input:
      // every dimension but the axis must be the result's.
      const cpu::Shape &os = i.out[0]->shape;
      int64_t total = 0;
      for (size_t k = 0; k < i.in.size(); ++k) {
        const Tensor *t = i.in[k];
        c.dtype(t, dt, "input");
        bool same = t->shape.rank == os.rank;
        for (int d = 0; same && d < os.rank; ++d)
          same = d == i.ints[0] || t->shape.dims[d] == os.dims[d];
        if (!same)
          c.fail("input " + std::to_string(k) + " " + Check::shape(t) +
                 " differs from the result " + Check::shape(i.out[0]) + " outside axis " +
                 std::to_string(i.ints[0]));
        total = c.add(total, t->shape.dims[i.ints[0]]);
        i.shapes.push_back(t->shape);
      }
      if (total != os.dims[i.ints[0]])
        c.fail("inputs do not add up to the result along the axis");
      i.ptrs.assign(i.in.size(), nullptr);
      // i.ptrs holds the inputs' addresses (the executor fills them as
      // floats); the 16-bit kernels read them as their own type.
      i.run = byFloat(dt, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cpu::concat(reinterpret_cast<const T *const *>(i.ptrs.data()), i.shapes.data(),
                      (int)i.in.size(), (int)i.ints[0], as<T>(i.out[0]), i.out[0]->shape);
        };
      });
    }};
    t["nn.dropout"] = {[](Instr &i, const Check &c) {
      c.arity(1, 2);
      // ints: stream, then [dim, blocks, tp] on a tensor-parallel part.
      c.attrs(i.ints.size() == 4 ? 4 : 1, 1);
      if (i.ints.size() == 4) {
        // The part's runs of the whole tensor (as for a split parameter).
        Tensor &whole = i.tpWhole;
        whole = *i.out[0];
        whole.tpDim = i.ints[1];
        whole.tpBlocks = i.ints[2];
        whole.tpSize = i.ints[3];
        c.axis(whole.tpDim, i.out[0]);
        if (whole.tpBlocks < 1 || whole.tpSize < 1)
          c.fail("tensor-parallel blocks and size must be positive");
        whole.fullShape = i.out[0]->shape;
        whole.fullShape.dims[whole.tpDim] *= whole.tpSize;
        if (i.out[0]->shape.dims[whole.tpDim] % whole.tpBlocks)
          c.fail("the split dimension does not divide into its blocks");
      }
      plan::DType dt = c.sameFloat({i.in[0], i.out[0]});
      c.dtype(i.out[1], plan::BOOL, "mask");
      c.sameShape(i.in[0], i.out[0]);
      c.sameShape(i.in[0], i.out[1]);
      c.floatIn(0, "ratio", 0, 1);
      i.run = byFloat(dt, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &ctx) {
          uint64_t counter = ctx.pipelined ? uint64_t(ctx.globalMicroBatch(i.microBatch))
                                           : ctx.rngCounter;
          if (i.ints.size() == 4) {
            // A tensor-parallel rank's part: each run draws the whole
            // tensor's bits for its elements, as the unsplit run does.
            for (const TpRun &r : tpRuns(i.tpWhole, ctx.ranks[2]))
              cpu::dropout(as<T>(i.in[0]) + r.part, as<T>(i.out[0]) + r.part,
                           i.out[1]->u8() + r.part, r.count, (float)i.floats[0], ctx.seed,
                           (uint64_t)i.ints[0], counter, uint64_t(r.whole));
            return;
          }
          cpu::dropout(as<T>(i.in[0]), as<T>(i.out[0]), i.out[1]->u8(), i.out[0]->numel,
                       (float)i.floats[0], ctx.seed, (uint64_t)i.ints[0], counter);
        };
      });
    }};
    t["nn.dropout_grad"] = {[](Instr &i, const Check &c) {
      c.arity(2, 1);
      c.attrs(0, 1);
      c.floatIn(0, "ratio", 0, 1);
      plan::DType dt = c.sameFloat({i.in[0], i.out[0]});
      c.dtype(i.in[1], plan::BOOL, "mask");
      c.sameShape(i.in[0], i.out[0]);
      c.sameShape(i.in[1], i.out[0]);
      i.run = byFloat(dt, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        return [](const Instr &i, Context &) {
          cpu::dropoutGrad(as<T>(i.in[0]), i.in[1]->u8(), as<T>(i.out[0]), i.out[0]->numel,
                           (float)i.floats[0]);
        };
      });
    }};

    t["train.lr_schedule"] = {[](Instr &i, const Check &c) {
      c.arity(1, 1);
      c.attrs(0, 0);
      c.scalar(i.in[0], plan::I64, "step");
      c.scalar(i.out[0], plan::F32, "lr");
      i.run = [](const Instr &i, Context &ctx) {
        // DeepSpeed's schedules count updates from 0.
        *i.out[0]->f32() = (float)config::learningRate(*ctx.config, *i.in[0]->i64() - 1);
      };
    }};
    t["train.clip_grad_norm"] = {[](Instr &i, const Check &c) {
      // N gradients [, the global sum of squares (sharded gradients)]
      // [, the loss scale (fp16)] -> N results and the norm. ints:
      // has_sum_sq, has_loss_scale (a plan without them: the sum of squares
      // exactly when there is one more input than outputs - 1).
      size_t n = i.out.size() >= 1 ? i.out.size() - 1 : 0;
      if (i.ints.size() != 0 && i.ints.size() != 2)
        c.fail("expects 0 or 2 ints (has_sum_sq, has_loss_scale), got " +
               std::to_string(i.ints.size()));
      if (i.ints.size() == 2) {
        c.flag(0, "has_sum_sq");
        c.flag(1, "has_loss_scale");
      }
      bool sharded = i.ints.size() == 2 ? i.ints[0] != 0 : i.in.size() == n + 1;
      bool scaled = i.ints.size() == 2 && i.ints[1] != 0;
      if (n == 0 || i.in.size() != n + sharded + scaled)
        c.fail("expects N gradients (sharded: then the global sum of squares; fp16: then the "
               "loss scale), N results and the norm");
      if (i.floats.size() != 1)
        c.fail("expects 1 float (max_norm), got " + std::to_string(i.floats.size()));
      for (size_t k = 0; k < n; ++k) {
        c.floats({i.in[k], i.out[k]});
        c.sameShape(i.in[k], i.out[k]);
        c.inPlace(i.in[k], i.out[k]);
      }
      c.scalar(i.out[n], plan::F32, "norm");
      if (sharded)
        c.scalar(i.in[n], plan::F32, "sum of squares");
      if (scaled)
        c.scalar(i.in[n + sharded], plan::F32, "loss scale");
      if (!(i.floats[0] >= 0)) // inf: never clip
        c.fail("max_norm " + std::to_string(i.floats[0]) + " must be >= 0");
      i.g[0] = sharded;
      i.g[1] = scaled;
      i.run = [](const Instr &i, Context &ctx) {
        size_t n = i.out.size() - 1;
        double sq = 0;
        if (i.g[0])
          sq = *i.in[n]->f32();
        else
          for (size_t k = 0; k < n; ++k)
            sq += cpu::sumSquares(i.in[k]->f32(), i.in[k]->numel);
        double scale = i.g[1] ? double(*i.in[n + i.g[0]]->f32()) : 1.0;
        double norm = std::sqrt(sq) / scale;
        *i.out[n]->f32() = (float)norm;
        // The updates follow this instruction. fp16: an overflow skips them
        // (the loss scaler halves the scale); otherwise stopping here keeps
        // the weights of the last finite step (DeepSpeed's fp32 optimizer
        // would apply NaN to every parameter).
        if (!std::isfinite(norm)) {
          if (i.g[1]) {
            ctx.overflow = true;
            return;
          }
          throw NonFiniteError(ctx.step, norm);
        }
        // torch.nn.utils.clip_grad_norm_ / DeepSpeed: scale when the norm
        // exceeds max_norm, by max_norm / (norm + 1e-6); fp16 divides the
        // loss scale out in the same multiplication (DeepSpeed's
        // combined_scale).
        double coef = i.floats[0] > 0 ? i.floats[0] / (norm + 1e-6) : 1.0;
        coef = std::min(coef, 1.0) / scale;
        if (coef != 1.0)
          for (size_t k = 0; k < n; ++k)
            cpu::scale(i.out[k]->f32(), i.out[k]->numel, (float)coef);
      };
    }};
    t["train.adam"] = {[](Instr &i, const Check &c) {
      c.arity(6, 3);
      c.attrs(2, 4);
      c.floats({i.in[0], i.in[1], i.in[2], i.in[3], i.out[0], i.out[1], i.out[2]});
      c.scalar(i.in[4], plan::F32, "lr");
      c.scalar(i.in[5], plan::I64, "step");
      // What train.adam's verifier accepts.
      c.floatIn(0, "beta1", 0, 1);
      c.floatIn(1, "beta2", 0, 1);
      c.floatIn(2, "eps", 0, INFINITY);
      if (i.floats[2] == 0)
        c.fail("eps must be positive");
      c.floatIn(3, "weight_decay", 0, 1e30);
      c.flag(0, "decoupled");
      c.flag(1, "bias_correction");
      for (int k = 1; k < 4; ++k)
        c.sameShape(i.in[0], i.in[k]);
      for (int k = 0; k < 3; ++k)
        c.sameShape(i.in[0], i.out[k]);
      c.inPlace(i.in[0], i.out[0]);
      c.inPlace(i.in[2], i.out[1]);
      c.inPlace(i.in[3], i.out[2]);
      i.run = [](const Instr &i, Context &ctx) {
        if (ctx.overflow) // fp16: the loss scaler skips this step
          return;
        // In place: the outputs view the parameter and state bytes.
        cpu::adam(i.out[0]->f32(), i.in[1]->f32(), i.out[1]->f32(), i.out[2]->f32(),
                  i.out[0]->numel, *i.in[4]->f32(), (float)i.floats[0], (float)i.floats[1],
                  (float)i.floats[2], (float)i.floats[3], i.ints[0] != 0, i.ints[1] != 0,
                  *i.in[5]->i64());
      };
    }};
    t["train.sgd"] = {[](Instr &i, const Check &c) {
      bool momentum = i.in.size() == 4;
      c.arity(momentum ? 4 : 3, momentum ? 2 : 1);
      c.attrs(1, 3);
      c.floats({i.in[0], i.in[1], i.out[0]});
      c.scalar(i.in[2], plan::F32, "lr");
      c.sameShape(i.in[0], i.in[1]);
      c.sameShape(i.in[0], i.out[0]);
      c.inPlace(i.in[0], i.out[0]);
      if (momentum) {
        c.floats({i.in[3], i.out[1]});
        c.sameShape(i.in[0], i.in[3]);
        c.sameShape(i.in[0], i.out[1]);
        c.inPlace(i.in[3], i.out[1]);
      }
      // What train.sgd's verifier accepts.
      c.floatIn(0, "momentum", 0, 1);
      c.floatIn(1, "dampening", 0, 1);
      c.floatIn(2, "weight_decay", 0, 1e30);
      c.flag(0, "nesterov");
      if (momentum != (i.floats[0] > 0))
        c.fail("a momentum buffer (4 inputs, 2 outputs) is needed exactly when momentum > 0");
      if (i.ints[0] && (i.floats[0] == 0 || i.floats[1] != 0))
        c.fail("nesterov needs momentum > 0 and dampening 0");
      i.run = [](const Instr &i, Context &ctx) {
        if (ctx.overflow) // fp16: the loss scaler skips this step
          return;
        bool momentum = i.in.size() == 4;
        cpu::sgd(i.out[0]->f32(), i.in[1]->f32(), momentum ? i.out[1]->f32() : nullptr,
                 i.out[0]->numel, *i.in[2]->f32(), (float)i.floats[0], (float)i.floats[1],
                 (float)i.floats[2], i.ints[0] != 0, ctx.optimizerStep == 1);
      };
    }};
    t["train.sum_sq"] = {[](Instr &i, const Check &c) {
      if (i.in.empty() || i.out.size() != 1)
        c.fail("expects at least one input and one output");
      c.attrs(0, 0);
      for (const Tensor *t : i.in)
        c.floats({t});
      c.dtype(i.out[0], plan::F32, "result");
      if (i.out[0]->numel != 1)
        c.fail("the result must be a scalar");
      i.run = [](const Instr &i, Context &) {
        // In input order, in double: the same on every rank and thread count.
        double sq = 0;
        for (const Tensor *t : i.in)
          sq += cpu::sumSquares(t->f32(), t->numel);
        *i.out[0]->f32() = (float)sq;
      };
    }};
    t["fill"] = {[](Instr &i, const Check &c) {
      c.arity(0, 1);
      c.attrs(0, 1);
      plan::DType d = c.sameFloat({i.out[0]});
      if (d == plan::F32)
        i.run = [](const Instr &i, Context &) {
          cpu::fill(i.out[0]->f32(), i.out[0]->numel, (float)i.floats[0]);
        };
      else
        // 16-bit sums (grad_accum_dtype bf16 / fp16): the value rounded once.
        i.run = [](const Instr &i, Context &) {
          float v = (float)i.floats[0];
          uint16_t bits = i.out[0]->dtype == plan::BF16 ? cpu::detail::bf16Bits(v)
                                                        : cpu::detail::f16Bits(v);
          std::fill(i.out[0]->u16(), i.out[0]->u16() + i.out[0]->numel, bits);
        };
    }};
    t["accumulate"] = {[](Instr &i, const Check &c) {
      c.arity(1, 1);
      c.attrs(0, 0);
      plan::DType d = c.sameFloat({i.in[0], i.out[0]});
      c.sameShape(i.in[0], i.out[0]);
      // out += in; 16-bit sums (grad_accum_dtype) round every addition.
      i.run = byFloat(d, [](auto tag) -> KernelFn {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_same_v<T, float>)
          return [](const Instr &i, Context &) {
            cpu::accumulate(i.in[0]->f32(), i.out[0]->f32(), i.out[0]->numel);
          };
        else
          return [](const Instr &i, Context &) {
            cpu::binary(cpu::Binary::Add, as<T>(i.out[0]), i.out[0]->shape, as<T>(i.in[0]),
                        i.in[0]->shape, as<T>(i.out[0]), i.out[0]->shape);
          };
      });
    }};
    addDistOps(t);
    return t;
  }();
  return ops;
}
} // namespace

void bindInstr(Instr &instr, const std::string &where) {
  auto it = table().find(instr.op);
  if (it == table().end())
    throw PlanError(where + ": unknown op '" + instr.op +
                    "' (the plan was written by a newer dsc?)");
  it->second.bind(instr, Check{instr, where});
}

std::vector<std::string> knownOps() {
  std::vector<std::string> names;
  for (auto &[name, def] : table())
    names.push_back(name);
  return names;
}

} // namespace dsrt
