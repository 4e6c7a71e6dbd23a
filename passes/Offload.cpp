//===- Offload.cpp - ZeRO-Offload / ZeRO-Infinity: state in memory tiers ---===//
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
// With parameter offload (ZeRO-3's offload_param) the parameter joins its
// tile's fetch and store, and every other reader of it (a gather, a cast,
// a matmul) reads a working copy fetched right before it:
//
//   %p'              = train.tier_fetch %p {tile = k}
//   %full            = dist.all_gather %p' ...
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"
#include "passes/DistUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

#include <optional>

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
    if (persistenceThreshold < 0) {
      getOperation().emitError("offload: persistence-threshold must be >= 0");
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
    if (device == OffloadTier::None)
      return states;
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
    auto update = cast<train::OptimizerUpdateOpInterface>(op);
    for (auto [state, updated] : llvm::zip_equal(update.getOptStates(), update.getOptNewStates()))
      if (failed(add(*state, updated)))
        return failure();
    return states;
  }

  /// The parameter an update writes, if parameter offload tiers it: a
  /// train.param argument above the persistence threshold (ZeRO-3 keeps
  /// those whole and in device memory, and so does DeepSpeed's offload).
  std::optional<StatePair> paramOf(func::FuncOp fn, Operation *op) {
    if (paramDevice == OffloadTier::None)
      return std::nullopt;
    auto arg = dyn_cast<BlockArgument>(op->getOperand(0));
    if (!arg || arg.getOwner()->getParentOp() != fn ||
        !fn.getArgAttr(arg.getArgNumber(), train::TrainDialect::kParam))
      return std::nullopt;
    int64_t whole = cast<RankedTensorType>(arg.getType()).getNumElements();
    if (auto full = fn.getArgAttrOfType<DenseI64ArrayAttr>(arg.getArgNumber(), distutil::kShardOf)) {
      whole = 1;
      for (int64_t d : full.asArrayRef())
        whole *= d;
    }
    if (whole < persistenceThreshold)
      return std::nullopt;
    return StatePair{arg, op->getResult(0), &op->getOpOperand(0)};
  }

  LogicalResult runOn(func::FuncOp fn) {
    // The updates in program order (they sit in the step's epilogue).
    SmallVector<Operation *> updates;
    fn.walk([&](Operation *op) {
      if (isa<train::OptimizerUpdateOpInterface>(op))
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
    // With param-nvme-file the parameters on NVMe count their own bytes
    // and move behind the optimizer state's at the end.
    int64_t hostBytes = 0, nvmeBytes = 0, nvmeParamBytes = 0, tile = 0;
    SmallVector<BlockArgument> ownFile;
    // Each tiered argument in its tier: the tier's name, offset and tile.
    auto place = [&](BlockArgument home, OffloadTier dev, bool param) {
      unsigned i = home.getArgNumber();
      bool host = dev == OffloadTier::Cpu;
      bool own = !host && param && paramNvmeFile;
      if (own)
        ownFile.push_back(home);
      int64_t &at = host ? hostBytes : own ? nvmeParamBytes : nvmeBytes;
      fn.setArgAttr(i, train::TrainDialect::kTier, attrs.getStringAttr(host ? "host" : "nvme"));
      fn.setArgAttr(i, train::TrainDialect::kTierOffset, attrs.getI64IntegerAttr(at));
      fn.setArgAttr(i, train::TrainDialect::kTile, attrs.getI64IntegerAttr(tile));
      at += (nn::byteSize(home.getType()) + alignment - 1) / alignment * alignment;
      ++numTiered;
    };
    SmallVector<BlockArgument> params; // tiered parameters
    for (auto &ops : tiles) {
      SmallVector<StatePair> states;
      SmallVector<bool> isParam;
      for (Operation *op : ops) {
        if (std::optional<StatePair> p = paramOf(fn, op)) {
          states.push_back(*p);
          isParam.push_back(true);
        }
        auto s = statesOf(fn, op);
        if (failed(s))
          return failure();
        states.append(s->begin(), s->end());
        isParam.append(s->size(), false);
      }
      if (states.empty())
        continue; // nothing of this tile is offloaded (SGD without momentum, small parameters)
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
      for (auto [s, param] : llvm::zip(states, isParam)) {
        for (OpOperand &use : llvm::make_early_inc_range(s.updated.getUses())) {
          if (isa<train::TierStoreOp>(use.getOwner()))
            continue;
          if (use.getOwner() != ret)
            return use.getOwner()->emitOpError("offload: reads ")
                   << (param ? "a parameter's new value (parameter offload needs ZeRO stage "
                               "3, whose updated shards are only returned)"
                             : "an optimizer state's new value")
                   << ", which lives in its tier";
          use.set(s.home);
        }
        place(s.home, param ? paramDevice : device, param);
        if (param)
          params.push_back(s.home);
      }
      ++tile;
    }
    numTiles += tile;
    // Every other reader of a tiered parameter (its gathers, casts and
    // the layers that use it whole) reads a working copy fetched right
    // before it: per micro-batch where it sits in the micro-batch's body.
    llvm::MapVector<Operation *, SmallVector<BlockArgument>> readers;
    for (BlockArgument p : params)
      for (OpOperand &use : p.getUses()) {
        Operation *user = use.getOwner();
        if (user == ret || isa<train::TierFetchOp, train::TierStoreOp>(user))
          continue;
        auto &list = readers[user];
        if (!llvm::is_contained(list, p))
          list.push_back(p);
      }
    for (auto &[user, homes] : readers) {
      OpBuilder b(user);
      SmallVector<Value> values(homes.begin(), homes.end());
      int64_t t = fn.getArgAttrOfType<IntegerAttr>(homes.front().getArgNumber(), train::TrainDialect::kTile)
                      .getInt();
      auto fetch = train::TierFetchOp::create(b, user->getLoc(), values, t);
      for (auto [home, staged] : llvm::zip(homes, fetch.getStaged()))
        user->replaceUsesOfWith(home, staged);
      ++numParamFetches;
    }
    if (hostBytes)
      fn->setAttr(train::TrainDialect::kHostTierBytes, attrs.getI64IntegerAttr(hostBytes));
    if (paramNvmeFile && nvmeParamBytes) {
      // The parameters' file begins where the optimizer state's ends (both
      // aligned: every tensor's bytes were rounded up to the alignment).
      for (BlockArgument home : ownFile) {
        unsigned i = home.getArgNumber();
        int64_t at = fn.getArgAttrOfType<IntegerAttr>(i, train::TrainDialect::kTierOffset).getInt();
        fn.setArgAttr(i, train::TrainDialect::kTierOffset, attrs.getI64IntegerAttr(nvmeBytes + at));
      }
      fn->setAttr(train::TrainDialect::kNvmeParamOffset, attrs.getI64IntegerAttr(nvmeBytes));
      nvmeBytes += nvmeParamBytes;
    }
    if (nvmeBytes)
      fn->setAttr(train::TrainDialect::kNvmeTierBytes, attrs.getI64IntegerAttr(nvmeBytes));
    return success();
  }
};

} // namespace
} // namespace dsc
