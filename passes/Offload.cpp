//===- Offload.cpp - ZeRO-Offload: the optimizer state in a memory tier ---===//
//
// See Passes.td (offload). Runs after the optimizer, ZeRO and the
// collectives' passes, before memory-plan: the optimizer updates and
// their (possibly sharded) state arguments are final by then.
//
//   %m', %v'         = train.tier_fetch %m, %v {tile = k}
//   %p2, %m2, %v2    = train.adam %p, %g, %m', %v', ...
//   train.tier_store %m2, %v2 to %m, %v {tile = k}
//   return ..., %m, %v     (was %m2, %v2)
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace dsc {
#define GEN_PASS_DEF_OFFLOAD
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

/// One optimizer update's state: (argument, the update's new value).
struct StatePair {
  BlockArgument home;
  Value updated;
  OpOperand *use; // the update's operand that reads the argument
};

struct Offload : impl::OffloadBase<Offload> {
  using OffloadBase::OffloadBase;

  void runOnOperation() override {
    if (device != "cpu" && device != "nvme") {
      getOperation().emitError("offload: device '")
          << device << "' is not a tier dsc plans (cpu: host memory, nvme: a file per rank)";
      return signalPassFailure();
    }
    if (subGroupSize < 0 || alignment <= 0 || (alignment & (alignment - 1))) {
      getOperation().emitError("offload: sub-group-size must be >= 0 and alignment a power "
                               "of two");
      return signalPassFailure();
    }
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (failed(runOn(fn)))
        return signalPassFailure();
  }

  /// The state operands of an optimizer update, or failure with an error.
  FailureOr<SmallVector<StatePair>> statesOf(func::FuncOp fn, Operation *op) {
    SmallVector<StatePair> states;
    auto add = [&](OpOperand &use, Value updated) -> LogicalResult {
      auto arg = dyn_cast<BlockArgument>(use.get());
      if (!arg || arg.getOwner()->getParentOp() != fn ||
          !fn.getArgAttr(arg.getArgNumber(), train::TrainDialect::kOptState))
        return op->emitOpError("offload: the optimizer state operand #")
               << use.getOperandNumber() << " is not a step argument with train.opt_state";
      if (!arg.hasOneUse())
        return op->emitOpError("offload: optimizer state '")
               << fn.getArgAttr(arg.getArgNumber(), train::TrainDialect::kOptState)
               << "' is read by more than its update";
      states.push_back({arg, updated, &use});
      return success();
    };
    if (auto adam = dyn_cast<train::AdamOp>(op)) {
      if (failed(add(adam.getExpAvgMutable(), adam.getNewExpAvg())) ||
          failed(add(adam.getExpAvgSqMutable(), adam.getNewExpAvgSq())))
        return failure();
    } else if (auto sgd = dyn_cast<train::SgdOp>(op)) {
      if (sgd.getMomentumBuffer() &&
          failed(add(sgd.getMomentumBufferMutable()[0], sgd.getNewMomentumBuffer())))
        return failure();
    }
    return states;
  }

  LogicalResult runOn(func::FuncOp fn) {
    // The updates in program order (they sit in the step's epilogue).
    SmallVector<Operation *> updates;
    fn.walk([&](Operation *op) {
      if (isa<train::AdamOp, train::SgdOp>(op))
        updates.push_back(op);
    });
    if (updates.empty())
      return success();
    // DeepSpeed's sub-groups: add parameters until the tile's elements
    // reach sub_group_size; the last update closes the last tile.
    SmallVector<SmallVector<Operation *>> tiles(1);
    int64_t elements = 0;
    for (Operation *op : updates) {
      if (op->getBlock() != updates.front()->getBlock())
        return op->emitOpError("offload: the optimizer updates are not in one block");
      tiles.back().push_back(op);
      elements += cast<RankedTensorType>(op->getOperand(0).getType()).getNumElements();
      if (elements >= subGroupSize) {
        tiles.emplace_back();
        elements = 0;
      }
    }
    if (tiles.back().empty())
      tiles.pop_back();

    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    Builder attrs(fn.getContext());
    int64_t tierBytes = 0, tile = 0;
    for (auto &ops : tiles) {
      SmallVector<StatePair> states;
      for (Operation *op : ops) {
        auto s = statesOf(fn, op);
        if (failed(s))
          return failure();
        states.append(s->begin(), s->end());
      }
      if (states.empty())
        continue; // SGD without momentum: nothing to offload
      // Before the tile's first update in program order, after its last.
      Operation *first = ops.front(), *last = ops.back();
      for (Operation *op : ops) {
        if (op->isBeforeInBlock(first))
          first = op;
        if (last->isBeforeInBlock(op))
          last = op;
      }
      SmallVector<Value> homes, updated;
      for (StatePair &s : states) {
        homes.push_back(s.home);
        updated.push_back(s.updated);
      }
      OpBuilder b(first);
      auto fetch = train::TierFetchOp::create(b, first->getLoc(), homes, tile);
      for (auto [s, staged] : llvm::zip(states, fetch.getStaged()))
        s.use->set(staged);
      b.setInsertionPointAfter(last);
      train::TierStoreOp::create(b, last->getLoc(), updated, homes, tile);
      // The step returns the homes, which the store wrote.
      for (StatePair &s : states) {
        for (OpOperand &use : llvm::make_early_inc_range(s.updated.getUses())) {
          if (isa<train::TierStoreOp>(use.getOwner()))
            continue;
          if (use.getOwner() != ret)
            return use.getOwner()->emitOpError(
                "offload: reads an optimizer state's new value, which lives in its tier");
          use.set(s.home);
        }
        unsigned i = s.home.getArgNumber();
        int64_t bytes = nn::byteSize(s.home.getType());
        fn.setArgAttr(i, "dsc.tier", attrs.getStringAttr(device == "cpu" ? "host" : "nvme"));
        fn.setArgAttr(i, "dsc.tier_offset", attrs.getI64IntegerAttr(tierBytes));
        fn.setArgAttr(i, "dsc.tile", attrs.getI64IntegerAttr(tile));
        tierBytes += (bytes + alignment - 1) / alignment * alignment;
        ++numTiered;
      }
      ++tile;
    }
    numTiles += tile;
    fn->setAttr(device == "cpu" ? "dsc.host_tier_bytes" : "dsc.nvme_tier_bytes",
                attrs.getI64IntegerAttr(tierBytes));
    return success();
  }
};

} // namespace
} // namespace dsc
