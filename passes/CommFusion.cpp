//===- CommFusion.cpp - bucket collectives of the same kind --------------===//
//
// Walks each block's collectives in program order. Collectives with the same
// key (op, group, reduction, element type) join the open bucket of that key
// while the bucket's elements stay within the bucket size and the bucket can
// be placed: at its last member when no earlier member's result is used
// before it (gradients flowing into a reduction), or at its first member
// when every later member's inputs exist there already (parameters to
// gather). One fused op and one dist.wait replace the members. Since the
// walk is the program order, every rank fuses identically.
//
//===----------------------------------------------------------------------===//
#include "passes/DistUtils.h"
#include "passes/Passes.h"

#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dsc {
#define GEN_PASS_DEF_COMMFUSION
#include "passes/Passes.h.inc"

using namespace mlir;


namespace {

struct Bucket {
  SmallVector<Operation *> ops;
  int64_t elements = 0;
  enum Mode { Unset, AtLast, AtFirst } mode = Unset;
};

struct CommFusion : impl::CommFusionBase<CommFusion> {
  using Base::Base;

  void runOnOperation() override {
    if (reduceBucket < 1 || allgatherBucket < 1) {
      getOperation().emitError("comm-fusion: bucket sizes must be at least 1 element");
      return signalPassFailure();
    }
    SmallVector<Block *> blocks;
    getOperation().walk([&](Block *b) { blocks.push_back(b); });
    for (Block *b : blocks)
      if (failed(fuseBlock(*b)))
        return signalPassFailure();
  }

  /// The op of `block` that is or contains `op`.
  static Operation *inBlock(Block &block, Operation *op) {
    return block.findAncestorOpInBlock(*op);
  }

  /// No result of `member` (through its wait) is used before `at`.
  static bool unusedBefore(Block &block, Operation *member, Operation *at) {
    dist::WaitOp wait = distutil::waitOf(member);
    if (!wait)
      return false;
    for (Value r : wait.getResults())
      for (Operation *user : r.getUsers()) {
        Operation *u = inBlock(block, user);
        if (!u || !at->isBeforeInBlock(u))
          return false;
      }
    return true;
  }

  /// Every input of `member` exists at `at`.
  static bool availableAt(Block &block, Operation *member, Operation *at) {
    for (Value v : member->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (!def)
        continue; // a block argument
      Operation *d = inBlock(block, def);
      if (d && !d->isBeforeInBlock(at))
        return false;
    }
    return true;
  }

  bool canJoin(Block &block, Bucket &bucket, Operation *op) {
    Operation *boundary = distutil::forwardEnd(block);
    if (distutil::phaseOf(op, boundary) != distutil::phaseOf(bucket.ops.front(), boundary))
      return false;
    auto tryLast = [&] {
      for (Operation *m : bucket.ops)
        if (!unusedBefore(block, m, op))
          return false;
      return true;
    };
    auto tryFirst = [&] { return availableAt(block, op, bucket.ops.front()); };
    if (bucket.mode == Bucket::AtLast)
      return tryLast();
    if (bucket.mode == Bucket::AtFirst)
      return tryFirst();
    if (tryLast()) {
      bucket.mode = Bucket::AtLast;
      return true;
    }
    if (tryFirst()) {
      bucket.mode = Bucket::AtFirst;
      return true;
    }
    return false;
  }

  void emit(Bucket &bucket) {
    if (bucket.ops.size() < 2)
      return;
    Operation *anchor = bucket.mode == Bucket::AtLast ? bucket.ops.back() : bucket.ops.front();
    OpBuilder b(anchor);
    SmallVector<Value> inputs;
    SmallVector<Type> types;
    for (Operation *m : bucket.ops) {
      llvm::append_range(inputs, m->getOperands());
      llvm::append_range(types, m->getResultTypes());
    }
    OperationState state(anchor->getLoc(), anchor->getName());
    state.addOperands(inputs);
    state.addTypes(types);
    state.addAttributes(anchor->getAttrs());
    Operation *fused = b.create(state);
    ++numBuckets;
    numFused += bucket.ops.size();
    auto wait = dist::WaitOp::create(b, anchor->getLoc(), fused->getResults());
    unsigned k = 0;
    for (Operation *m : bucket.ops) {
      dist::WaitOp old = distutil::waitOf(m);
      for (Value r : old.getResults())
        r.replaceAllUsesWith(wait.getResult(k++));
      old->erase();
      m->erase();
    }
  }

  LogicalResult fuseBlock(Block &block) {
    // The steps an op runs on (train.active_steps) are part of the key: a
    // bucket runs on its members' steps.
    using Key = std::tuple<OperationName, Attribute, Attribute, Type, Attribute>;
    auto collectives = distutil::collectivesOf(block, "comm-fusion");
    if (failed(collectives))
      return failure();
    auto keyLess = [](const Key &a, const Key &b) {
      auto tie = [](const Key &k) {
        return std::make_tuple(std::get<0>(k).getAsOpaquePointer(),
                               std::get<1>(k).getAsOpaquePointer(),
                               std::get<2>(k).getAsOpaquePointer(),
                               std::get<3>(k).getAsOpaquePointer(),
                               std::get<4>(k).getAsOpaquePointer());
      };
      return tie(a) < tie(b);
    };
    std::map<Key, Bucket, decltype(keyLess)> buckets(keyLess);
    SmallVector<Bucket> done;
    for (Operation *op : *collectives) {
      Type elem = cast<RankedTensorType>(op->getOperand(0).getType()).getElementType();
      Key key{op->getName(), op->getAttr("group"), op->getAttr("reduce"), elem,
              op->getAttr(train::TrainDialect::kActiveSteps)};
      int64_t limit = isa<dist::AllGatherOp>(op) ? allgatherBucket : reduceBucket;
      int64_t n = distutil::elementsOf(op);
      auto it = buckets.find(key);
      if (it != buckets.end()) {
        Bucket &bucket = it->second;
        if (bucket.elements + n <= limit && canJoin(block, bucket, op)) {
          bucket.ops.push_back(op);
          bucket.elements += n;
          continue;
        }
        done.push_back(std::move(bucket));
        buckets.erase(it);
      }
      Bucket fresh;
      fresh.ops.push_back(op);
      fresh.elements = n;
      buckets.emplace(key, std::move(fresh));
    }
    for (auto &[key, bucket] : buckets)
      done.push_back(std::move(bucket));
    for (Bucket &bucket : done)
      emit(bucket);
    return success();
  }
};
} // namespace
} // namespace dsc
