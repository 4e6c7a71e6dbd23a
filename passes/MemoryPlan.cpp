//===- MemoryPlan.cpp - schedule, lifetimes and one static arena ---------===//
//
// The step runs in program order (the schedule is the op order; the
// micro-batch body of train.accumulate counts once, and values from outside
// it that the body reads stay live until the body ends). Tensors are grouped
// into storage: a reshape is a view of its operand, optimizer updates and
// clipping write over their inputs, and an elementwise op writes over an
// operand whose storage dies at that op. Model state and constants are laid
// out first; the rest is placed greedy-by-size into the lowest offset that
// no storage with an overlapping lifetime occupies.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/dist/DistDialect.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"
#include "runtime/comm/Staging.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/EquivalenceClasses.h"

namespace dsc {
#define GEN_PASS_DEF_MEMORYPLAN
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {
using train::TrainDialect;

/// Storage classes, in arena order. Everything before kTransient lives for
/// the whole run.
enum class Kind { Param, OptState, Buffer, Input, Step, Constant, Transient };

struct Storage {
  Kind kind = Kind::Transient;
  int64_t bytes = 0, begin = 0, end = 0, offset = -1;
  bool seen = false;
};

bool isInPlaceElementwise(Operation *op) {
  return isa<nn::AddOp, nn::SubOp, nn::MulOp, nn::DivOp, nn::NegOp, nn::ExpOp,
             nn::LogOp, nn::SqrtOp, nn::RsqrtOp, nn::ReciprocalOp, nn::TanhOp,
             nn::ErfOp, nn::ReluOp, nn::SigmoidOp, nn::GeluOp, nn::AbsOp>(op);
}

/// Bytes a collective works in: what dsrt's MPI communicator stages it in
/// (runtime/comm/Staging.h), reserved here so the arena is the whole peak.
int64_t stagingBytes(Operation *op) {
  auto group = op->getAttrOfType<dist::GroupAttr>("group");
  if (!group || isa<dist::SendOp, dist::RecvOp>(op))
    return 0; // point-to-point moves the buffer itself
  auto numel = [](Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); };
  dsrt::comm::Kind kind = isa<dist::AllReduceOp>(op)       ? dsrt::comm::Kind::AllReduce
                          : isa<dist::ReduceScatterOp>(op) ? dsrt::comm::Kind::ReduceScatter
                                                           : dsrt::comm::Kind::AllGather;
  return dsrt::comm::mpiStagingBytes(
      kind, group.getSize(), op->getNumOperands(),
      [&](size_t j) { return numel(op->getOperand(j)); },
      [&](size_t j) { return numel(op->getResult(j)); },
      [&](size_t j) {
        Type e = cast<RankedTensorType>(op->getOperand(j).getType()).getElementType();
        return int64_t(e.getIntOrFloatBitWidth() / 8);
      });
}

struct MemoryPlan : impl::MemoryPlanBase<MemoryPlan> {
  using Base::Base;

  void runOnOperation() override {
    if (alignment <= 0 || (alignment & (alignment - 1))) {
      getOperation().emitError("memory-plan: alignment must be a power of two");
      return signalPassFailure();
    }
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (failed(plan(fn)))
        return signalPassFailure();
  }

  int64_t align(int64_t n) { return (n + alignment - 1) / alignment * alignment; }

  LogicalResult plan(func::FuncOp fn) {
    // 1. Positions in execution order.
    llvm::DenseMap<Operation *, int64_t> pos;
    llvm::DenseMap<Operation *, int64_t> regionEnd; // accumulate -> its yield
    SmallVector<Operation *> order;
    int64_t counter = 1; // 0 is "before the step" (arguments)
    std::function<void(Block &)> number = [&](Block &block) {
      for (Operation &op : block) {
        pos[&op] = counter++;
        order.push_back(&op);
        for (Region &r : op.getRegions())
          for (Block &b : r)
            number(b);
        if (op.getNumRegions())
          regionEnd[&op] = counter - 1;
      }
    };
    number(fn.getBody().front());

    // The position until which a use keeps `v` alive: a use inside a region
    // that `v` is defined outside of lasts until the region's end.
    auto usePos = [&](OpOperand &use, Value v) {
      Operation *user = use.getOwner();
      int64_t p = pos[user];
      Region *defRegion = v.getParentRegion();
      for (Operation *parent = user->getParentOp(); parent && parent != fn;
           parent = parent->getParentOp()) {
        if (parent->getRegion(0).isAncestor(defRegion))
          break;
        p = std::max(p, regionEnd[parent]);
      }
      return p;
    };

    // 2. Values and their storage classes.
    SmallVector<Value> values;
    for (BlockArgument a : fn.getArguments())
      values.push_back(a);
    for (Operation *op : order)
      for (Value r : op->getResults())
        if (isa<RankedTensorType>(r.getType()))
          values.push_back(r);
    llvm::EquivalenceClasses<Value> alias;
    for (Value v : values)
      alias.insert(v);
    auto join = [&](Value a, Value b) { alias.unionSets(a, b); };
    for (Operation *op : order) {
      if (auto r = dyn_cast<nn::ReshapeOp>(op))
        join(r.getInput(), r.getResult());
      else if (auto send = dyn_cast<dist::SendOp>(op))
        join(send.getInput(), send.getHandle()); // the handle is the buffer in flight
      else if (auto w = dyn_cast<dist::WaitOp>(op))
        for (auto [in, out] : llvm::zip(w.getInputs(), w.getResults()))
          join(in, out); // the wait hands over the collective's buffers
      else if (auto adam = dyn_cast<train::AdamOp>(op)) {
        join(adam.getParam(), adam.getNewParam());
        join(adam.getExpAvg(), adam.getNewExpAvg());
        join(adam.getExpAvgSq(), adam.getNewExpAvgSq());
      } else if (auto sgd = dyn_cast<train::SgdOp>(op)) {
        join(sgd.getParam(), sgd.getNewParam());
        if (sgd.getMomentumBuffer())
          join(sgd.getMomentumBuffer(), sgd.getNewMomentumBuffer());
      }
    }

    llvm::DenseMap<Value, Storage> storage; // keyed by leader
    auto leader = [&](Value v) { return alias.getLeaderValue(v); };
    auto kindOf = [&](Value v) -> Kind {
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        unsigned i = arg.getArgNumber();
        if (fn.getArgAttr(i, TrainDialect::kParam))
          return Kind::Param;
        if (fn.getArgAttr(i, TrainDialect::kOptState))
          return Kind::OptState;
        if (fn.getArgAttr(i, TrainDialect::kInput))
          return Kind::Input;
        if (fn.getArgAttr(i, TrainDialect::kStep) || fn.getArgAttr(i, TrainDialect::kLossScale))
          return Kind::Step; // host-written scalars
        return Kind::Buffer;
      }
      if (isa<arith::ConstantOp>(v.getDefiningOp()))
        return Kind::Constant;
      return Kind::Transient;
    };
    for (Value v : values) {
      Storage &s = storage[leader(v)];
      Kind k = kindOf(v);
      if (k != Kind::Transient)
        s.kind = k;
      s.bytes = std::max(s.bytes, nn::byteSize(v.getType()));
      int64_t def = isa<BlockArgument>(v) ? 0 : pos[v.getDefiningOp()];
      int64_t last = def;
      for (OpOperand &use : v.getUses())
        last = std::max(last, usePos(use, v));
      if (!s.seen)
        s.begin = def, s.end = last, s.seen = true;
      s.begin = std::min(s.begin, def);
      s.end = std::max(s.end, last);
    }

    // A non-blocking collective reads its inputs until its wait, and a
    // bucket (or a padded tensor) is packed into staging bytes that live as
    // long: planned here like any buffer, so the arena is the whole peak.
    std::vector<std::pair<Operation *, Storage>> staging;
    for (Operation *op : order)
      if (auto w = dyn_cast<dist::WaitOp>(op))
        if (Operation *c = w.getCollective()) {
          for (Value in : c->getOperands()) {
            Storage &s = storage[leader(in)];
            s.end = std::max(s.end, pos[op]);
          }
          if (int64_t bytes = stagingBytes(c)) {
            Storage s;
            s.bytes = bytes;
            s.begin = pos[c];
            s.end = pos[op];
            staging.push_back({c, s});
          }
        }

    // A step result that replaces a parameter or state (train.updated,
    // train.opt_state) is written where the next step reads it: into the
    // argument's storage, when the argument is no longer read by then (a
    // parameter all-gathered from its updated chunks, ZeRO 1-2).
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      Attribute name = fn.getResultAttr(i, TrainDialect::kUpdated);
      if (!name)
        name = fn.getResultAttr(i, TrainDialect::kOptState);
      if (!name)
        continue;
      for (BlockArgument a : fn.getArguments()) {
        unsigned k = a.getArgNumber();
        if (fn.getArgAttr(k, TrainDialect::kParam) != name &&
            fn.getArgAttr(k, TrainDialect::kOptState) != name)
          continue;
        Value la = leader(a), lv = leader(v);
        if (la == lv || isa<BlockArgument>(v))
          break;
        Storage sa = storage[la], sv = storage[lv];
        if (sv.kind != Kind::Transient || sa.end > sv.begin || sv.bytes > sa.bytes)
          break;
        alias.unionSets(la, lv);
        Storage merged = sa;
        merged.end = std::max(sa.end, sv.end);
        storage[leader(la)] = merged;
        break;
      }
    }

    // An in-place update must be the last reader of the old value, also
    // through views (a reshape of the parameter) and of the states.
    for (Operation *op : order) {
      if (!isa<train::AdamOp, train::SgdOp>(op))
        continue;
      for (Value result : op->getResults())
        for (Value v : values) {
          if (leader(v) != leader(result) || v.getDefiningOp() == op)
            continue;
          for (OpOperand &use : v.getUses())
            if (pos[use.getOwner()] > pos[op])
              return use.getOwner()->emitOpError(
                  "reads a parameter or optimizer state after its optimizer update");
        }
    }

    // 3. In place: clipping, and elementwise ops over a dying operand.
    auto tryInPlace = [&](Operation *op, Value operand, Value result) {
      Value lo = leader(operand), lr = leader(result);
      if (lo == lr)
        return;
      Storage &so = storage[lo], &sr = storage[lr];
      if (so.kind != Kind::Transient || sr.kind != Kind::Transient ||
          so.end != pos[op] || operand.getType() != result.getType() ||
          sr.begin != pos[op])
        return;
      Storage merged = so;
      merged.end = std::max(so.end, sr.end);
      alias.unionSets(lo, lr);
      storage[leader(lo)] = merged;
    };
    for (Operation *op : order) {
      if (auto clip = dyn_cast<train::ClipGradNormOp>(op)) {
        for (auto [g, c] : llvm::zip(clip.getGrads(), clip.getClipped()))
          tryInPlace(op, g, c);
      } else if (isInPlaceElementwise(op)) {
        for (Value operand : op->getOperands())
          if (operand.getType() == op->getResult(0).getType()) {
            tryInPlace(op, operand, op->getResult(0));
            break;
          }
      }
    }

    // 4. Offsets: model state first, then greedy-by-size for the rest.
    SmallVector<Value> leaders;
    llvm::DenseSet<Value> seen;
    for (Value v : values)
      if (seen.insert(leader(v)).second)
        leaders.push_back(leader(v));
    int64_t offset = 0;
    for (Kind k : {Kind::Param, Kind::OptState, Kind::Buffer, Kind::Input,
                   Kind::Step, Kind::Constant})
      for (Value l : leaders) {
        Storage &s = storage[l];
        if (s.kind != k)
          continue;
        s.offset = offset;
        offset += align(s.bytes);
      }
    int64_t persistent = offset;
    SmallVector<Storage *> transient;
    for (Value l : leaders)
      if (storage[l].kind == Kind::Transient)
        transient.push_back(&storage[l]);
    for (auto &[op, s] : staging)
      transient.push_back(&s);
    llvm::stable_sort(transient, [&](Storage *a, Storage *b) { return a->bytes > b->bytes; });
    SmallVector<Storage *> placed;
    int64_t arena = persistent;
    for (Storage *sp : transient) {
      Storage &s = *sp;
      SmallVector<std::pair<int64_t, int64_t>> busy;
      for (Storage *o : placed)
        if (o->begin <= s.end && s.begin <= o->end)
          busy.push_back({o->offset, o->offset + align(o->bytes)});
      llvm::sort(busy);
      int64_t candidate = persistent;
      for (auto [lo, hi] : busy) {
        if (candidate + align(s.bytes) <= lo)
          break;
        candidate = std::max(candidate, hi);
      }
      s.offset = candidate;
      arena = std::max(arena, candidate + align(s.bytes));
      placed.push_back(&s);
    }

    // 5. Annotate.
    OpBuilder b(fn.getContext());
    for (BlockArgument a : fn.getArguments())
      fn.setArgAttr(a.getArgNumber(), "dsc.offset",
                    b.getI64IntegerAttr(storage[leader(a)].offset));
    for (Operation *op : order) {
      if (op->getNumResults() == 0)
        continue;
      SmallVector<int64_t> offsets;
      for (Value r : op->getResults())
        offsets.push_back(isa<RankedTensorType>(r.getType())
                              ? storage[leader(r)].offset
                              : -1);
      op->setAttr("dsc.offsets", b.getDenseI64ArrayAttr(offsets));
    }
    for (auto &[op, s] : staging)
      op->setAttr("dsc.staging", b.getDenseI64ArrayAttr({s.offset, s.bytes}));
    fn->setAttr("dsc.arena_bytes", b.getI64IntegerAttr(arena));
    fn->setAttr("dsc.persistent_bytes", b.getI64IntegerAttr(persistent));
    return success();
  }
};
} // namespace
} // namespace dsc
