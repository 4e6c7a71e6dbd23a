//===- Overlap.cpp - start collectives early, wait for them late ---------===//
//
// Per block, in program order: each dist.wait sinks to just before the
// first use of its results, but not past the start of the next collective
// of the same kind (one bucket per kind in flight). Then each all_gather
// whose inputs are available earlier (parameter chunks, stage 3) rises to
// just after the wait of the previous all_gather, or to the start of the
// block for the first: the next bucket of parameters is fetched while the
// current one is used.
//
//===----------------------------------------------------------------------===//
#include "passes/DistUtils.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dsc {
#define GEN_PASS_DEF_OVERLAP
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

struct Overlap : impl::OverlapBase<Overlap> {
  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation().walk([&](Block *b) { blocks.push_back(b); });
    for (Block *b : blocks)
      if (failed(run(*b)))
        return signalPassFailure();
  }

  LogicalResult run(Block &block) {
    auto found = distutil::collectivesOf(block, "overlap");
    if (failed(found))
      return failure();
    SmallVector<Operation *> &collectives = *found;
    // 1. Sink the waits.
    for (auto [i, c] : llvm::enumerate(collectives)) {
      dist::WaitOp wait = distutil::waitOf(c);
      Operation *target = block.getTerminator();
      for (Value r : wait.getResults())
        for (Operation *user : r.getUsers())
          if (Operation *u = block.findAncestorOpInBlock(*user))
            if (u->isBeforeInBlock(target))
              target = u;
      for (Operation *next : llvm::drop_begin(collectives, i + 1))
        if (next->getName() == c->getName()) {
          if (next->isBeforeInBlock(target))
            target = next;
          break;
        }
      if (wait->isBeforeInBlock(target))
        wait->moveBefore(target);
    }
    // 2. Prefetch all_gathers one bucket ahead, within their phase (forward
    // or backward pass of a micro-batch).
    Operation *boundary = distutil::forwardEnd(block);
    Operation *previousWait = nullptr;
    for (Operation *c : collectives) {
      if (!isa<dist::AllGatherOp>(c))
        continue;
      Operation *earliest = &block.front();
      for (Value v : c->getOperands())
        if (Operation *def = v.getDefiningOp())
          if (Operation *d = block.findAncestorOpInBlock(*def))
            if (earliest->isBeforeInBlock(d) || earliest == d)
              earliest = d->getNextNode();
      Operation *target = earliest;
      if (previousWait && target->isBeforeInBlock(previousWait->getNextNode()))
        target = previousWait->getNextNode();
      if (distutil::phaseOf(c, boundary) == 1 && !boundary->isBeforeInBlock(target))
        target = boundary->getNextNode();
      if (target->isBeforeInBlock(c))
        c->moveBefore(target);
      previousWait = distutil::waitOf(c);
    }
    return success();
  }
};
} // namespace
} // namespace dsc
