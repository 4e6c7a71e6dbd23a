//===- OpsDist.cpp - collectives and messages -===//
//
// dist.all_reduce / reduce_scatter / all_gather / all_to_all / wait / chunk / send / recv and
// load_batch (their attributes: plan/Instructions.h; their operands: Ops.cpp).
//
//===----------------------------------------------------------------------===//
#include "runtime/core/OpsInternal.h"

#include <cstring>

namespace dsrt::ops {
namespace {

/// The group size, the reduction (all_reduce / reduce_scatter) and the
/// handle of a collective; k float inputs and k outputs whose sizes fit
/// `kind`.
void bindCollective(Instr &i, const Check &c, comm::Kind kind) {
  bool reduces = kind == comm::Kind::AllReduce || kind == comm::Kind::ReduceScatter;
  if (i.in.empty() || i.in.size() != i.out.size())
    c.fail("expects k inputs and k outputs (k >= 1), has " + std::to_string(i.in.size()) +
           " and " + std::to_string(i.out.size()));
  c.layout();
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
    // adds one type; a move may also carry raw bytes (U8: the 1-bit
    // optimizers' packed signs).
    if (!reduces && in->dtype == plan::U8)
      c.dtype(out, plan::U8, "output");
    else
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
    case comm::Kind::AllToAll:
      if (out->numel != in->numel || in->numel % group)
        c.fail(which + "output " + Check::shape(out) + " and input " + Check::shape(in) +
               " are not the same " + std::to_string(group) + " equal chunks");
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
  else if (K == comm::Kind::AllGather)
    h = c->allGather(i.comm.data(), i.comm.size(), i.label.c_str(), i.staging);
  else
    h = c->allToAll(i.comm.data(), i.comm.size(), i.label.c_str(), i.staging);
  ctx.handles[size_t(i.ints.back())] = {c, h};
}

/// dist.send / dist.recv: group size, peer (a relative offset), tag, handle.
void bindMessage(Instr &i, const Check &c, bool send) {
  c.arity(send ? 1 : 0, send ? 0 : 1);
  c.layout();
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
  // A pipeline body's send (plan format 13) sends a copy in its staging
  // bytes, the channel's buffer: its input is an item's, which the next
  // item may overwrite before the send completes.
  if (send && i.stagingBytes && i.stagingBytes < i.in[0]->bytes())
    c.fail("staging of " + std::to_string(i.stagingBytes) + " bytes for a message of " +
           std::to_string(i.in[0]->bytes()));
  if (send)
    i.run = [](const Instr &i, Context &ctx) {
      comm::Communicator *c = ctx.comms[i.axis];
      const void *from = i.in[0]->data;
      if (i.stagingBytes) {
        std::memcpy(i.staging, from, i.in[0]->bytes());
        from = i.staging;
      }
      ctx.handles[size_t(i.ints[3])] = {
          c, c->send(from, i.in[0]->bytes(), ctx.ranks[i.axis] + int(i.ints[1]),
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

} // namespace

void addDistOps(OpTable &t) {
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
  t["dist.all_to_all"] = {[](Instr &i, const Check &c) {
    bindCollective(i, c, comm::Kind::AllToAll);
    i.run = runCollective<comm::Kind::AllToAll>;
  }};
  t["dist.wait"] = {[](Instr &i, const Check &c) {
    c.arity(0, 0);
    c.layout();
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
    c.layout();
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
    c.layout();
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

} // namespace dsrt::ops
