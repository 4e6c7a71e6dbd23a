//===- TensorParallelLower.cpp - Megatron's f and g as tp collectives -----===//
//
// After the data-parallel passes (the gradients are dp-reduced, their
// buckets fused): Megatron's g (`dist.tp_reduce`) becomes an all-reduce on
// the tensor-parallel group and f (`dist.tp_copy`) disappears (its gradient,
// a g, was derived by autodiff); a split parameter's optimizer states are
// split alike; the global gradient norm counts a split gradient's squares
// summed over the tp group and a whole gradient's once.
//
//===----------------------------------------------------------------------===//
#include "passes/DistUtils.h"
#include "passes/Passes.h"

#include "dialects/dist/DistDialect.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace dsc {
#define GEN_PASS_DEF_TENSORPARALLELLOWER
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {
/// The parameter argument an update (train.adam / train.sgd) writes: the
/// argument itself, or under ZeRO 1-2 the argument flattened and chunked.
BlockArgument updatedParam(func::FuncOp fn, Operation *update) {
  Value v = update->getOperand(0);
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<dist::ChunkOp, nn::ReshapeOp>(def))
      break;
    v = def->getOperand(0);
  }
  auto arg = dyn_cast<BlockArgument>(v);
  return arg && arg.getOwner()->getParentOp() == fn ? arg : BlockArgument();
}

/// Which of the clipping's gradients update a parameter carrying `attr`
/// (by gradient index).
SmallVector<bool> gradsOfParamsWith(func::FuncOp fn, train::ClipGradNormOp clip,
                                    StringRef attr) {
  SmallVector<bool> marked(clip.getGrads().size(), false);
  fn.walk([&](Operation *op) {
    if (!isa<train::OptimizerUpdateOpInterface>(op))
      return;
    BlockArgument arg = updatedParam(fn, op);
    auto grad = dyn_cast<OpResult>(op->getOperand(1));
    if (arg && grad && grad.getOwner() == clip.getOperation() &&
        fn.getArgAttr(arg.getArgNumber(), attr))
      marked[grad.getResultNumber()] = true;
  });
  return marked;
}

/// Under ZeRO the norm is already `all_reduce_dp(sum_sq(owned chunks))`:
/// a split parameter's chunks are summed over the tp group first, so the dp
/// sum counts every element of the whole model once:
/// `all_reduce_dp(all_reduce_tp(sum_sq(split chunks)) + sum_sq(whole chunks))`.
LogicalResult splitZeroNorm(func::FuncOp fn, train::ClipGradNormOp clip,
                            ArrayRef<bool> splitGrad, dist::GroupAttr group) {
  llvm::DenseSet<Value> split, grads;
  for (auto [i, g] : llvm::enumerate(clip.getGrads())) {
    grads.insert(g);
    if (splitGrad[i])
      split.insert(g);
  }
  SmallVector<train::SumSqOp> sums;
  fn.walk([&](train::SumSqOp s) {
    if (llvm::all_of(s->getOperands(), [&](Value v) { return grads.contains(v); }))
      sums.push_back(s);
  });
  // A pipeline stage whose only parameters are tied copies (the LM head of
  // a last stage that holds no layer) adds nothing to the norm: ZeRO summed
  // no chunk there (a zero), and the stage holding the original counts it.
  if (sums.empty() && llvm::all_of(gradsOfParamsWith(fn, clip, distutil::kTiedCopy),
                                   [](bool tied) { return tied; }))
    return success();
  if (sums.size() != 1)
    return clip.emitOpError("tensor-parallel-lower: expected one train.sum_sq of the ZeRO "
                            "chunks feeding the norm, found ")
           << sums.size();
  train::SumSqOp sum = sums[0];
  SmallVector<Value> splitChunks, wholeChunks;
  for (Value v : sum->getOperands())
    (split.contains(v) ? splitChunks : wholeChunks).push_back(v);
  OpBuilder b(sum);
  Location loc = sum.getLoc();
  Value sq = distutil::allReduce(b, loc, distutil::sumOfSquares(b, loc, splitChunks), group,
                                 dist::ReduceKind::sum);
  if (!wholeChunks.empty())
    sq = nn::AddOp::create(b, loc, sq, distutil::sumOfSquares(b, loc, wholeChunks));
  sum.getResult().replaceAllUsesWith(sq);
  sum->erase();
  return success();
}

/// Megatron's sequence-parallel backward: the all-gathered input of the
/// column-parallel GEMMs (f under sequence parallelism) is read again by
/// their weight gradients; holding the whole tensor until then would keep
/// tp times the token-split part alive. Each backward use reads a fresh
/// all-gather of the part instead (one more all-gather per f and
/// micro-batch), as Megatron's linear layers do, so the token-split
/// activations really are 1/tp (Korthikanti et al.'s accounting).
void regatherForBackward(func::FuncOp fn) {
  SmallVector<dist::SpGatherOp> gathers;
  fn.walk([&](dist::SpGatherOp g) {
    if (g.getReduce())
      gathers.push_back(g);
  });
  for (dist::SpGatherOp g : gathers) {
    Block *block = g->getBlock();
    // In a micro-batch body the backward pass follows the loss (the first
    // value the body yields); a pipeline stage marks its backward ops, and
    // pipeline-schedule each op of its train.pipeline body with its phase
    // (2 B, 3 W: the backward).
    Operation *lossOp = nullptr;
    if (isa_and_nonnull<train::AccumulateOp>(block->getParentOp()))
      lossOp = block->getTerminator()->getOperand(0).getDefiningOp();
    auto isBackward = [&](Operation *o) {
      if (!o)
        return false;
      if (auto phase = o->getAttrOfType<IntegerAttr>(train::TrainDialect::kPhase))
        return phase.getInt() >= 2;
      return o->hasAttr(train::TrainDialect::kBackward) ||
             (lossOp && lossOp->getBlock() == block && lossOp->isBeforeInBlock(o));
    };
    if (isBackward(g)) // a backward gather (a g's gradient) already is where it is read
      continue;
    SmallVector<OpOperand *> uses;
    Operation *first = nullptr;
    for (OpOperand &u : g.getResult().getUses()) {
      Operation *o = block->findAncestorOpInBlock(*u.getOwner());
      if (!isBackward(o))
        continue;
      uses.push_back(&u);
      if (!first || o->isBeforeInBlock(first))
        first = o;
    }
    if (uses.empty())
      continue;
    OpBuilder b(first);
    Operation *again = b.clone(*g);
    for (OpOperand *u : uses)
      u->set(again->getResult(0));
  }
}

/// dist.sp_gather / dist.sp_scatter on the flattened tensor: an all-gather,
/// a reduce-scatter (sum) or a local chunk; every part is contiguous.
void lowerSequenceParallel(func::FuncOp fn, std::optional<dist::GroupAttr> &group) {
  SmallVector<Operation *> sps;
  fn.walk([&](Operation *op) {
    if (isa<dist::SpGatherOp, dist::SpScatterOp>(op))
      sps.push_back(op);
  });
  OpBuilder b(fn.getContext());
  for (Operation *op : sps) {
    b.setInsertionPoint(op);
    Location loc = op->getLoc();
    Value in = op->getOperand(0);
    auto out = cast<RankedTensorType>(op->getResult(0).getType());
    Value flat = distutil::flatten(b, loc, in), r;
    if (auto g = dyn_cast<dist::SpGatherOp>(op)) {
      group = g.getGroup();
      r = distutil::allGather(b, loc, flat, out.getNumElements(), g.getGroup());
    } else {
      auto s = cast<dist::SpScatterOp>(op);
      group = s.getGroup();
      r = s.getReduce()
              ? distutil::reduceScatter(b, loc, flat, s.getGroup(), dist::ReduceKind::sum)
              : dist::ChunkOp::create(
                    b, loc, RankedTensorType::get({out.getNumElements()}, out.getElementType()),
                    flat, s.getGroup())
                    .getResult();
    }
    op->getResult(0).replaceAllUsesWith(distutil::reshape(b, loc, r, out.getShape()));
    op->erase();
  }
}

/// The gradients of the parameters a token-split region reads
/// (`dist.sp_partial`) hold this rank's tokens' part: one all-reduce (sum)
/// on the tp group, before the norm and the clipping read them (under ZeRO
/// they are chunks, each the same chunk of the same parameter on every tp
/// rank, so summing chunks sums the parameter).
LogicalResult sumPartialGradients(func::FuncOp fn, train::ClipGradNormOp clip,
                                  std::optional<dist::GroupAttr> group) {
  llvm::SetVector<Value> grads;
  for (auto [i, partial] : llvm::enumerate(gradsOfParamsWith(fn, clip, "dist.sp_partial")))
    if (partial)
      grads.insert(clip.getGrads()[i]);
  if (grads.empty())
    return success();
  if (!group)
    return clip.emitOpError("tensor-parallel-lower: sequence-parallel gradients but no tp group");
  // Before the first reader (the clipping, or ZeRO's sum of squares).
  Block *block = clip->getBlock();
  Operation *first = clip;
  for (Value g : grads)
    for (Operation *user : g.getUsers())
      if (Operation *o = block->findAncestorOpInBlock(*user); o && o->isBeforeInBlock(first))
        first = o;
  for (Value g : grads)
    if (Operation *def = g.getDefiningOp();
        def && (def->getBlock() != block || !def->isBeforeInBlock(first)))
      return def->emitOpError("tensor-parallel-lower: a sequence-parallel gradient is defined "
                              "after its first reader");
  OpBuilder b(first);
  SmallVector<Type> types;
  for (Value g : grads)
    types.push_back(g.getType());
  SmallVector<Value> summed = distutil::startAndWait<dist::AllReduceOp>(
      b, clip.getLoc(), types, grads.getArrayRef(), *group,
      dist::ReduceKindAttr::get(b.getContext(), dist::ReduceKind::sum));
  Operation *wait = summed[0].getDefiningOp();
  Operation *start = wait->getOperand(0).getDefiningOp();
  for (auto [i, g] : llvm::enumerate(grads)) {
    Value v = g;
    v.replaceUsesWithIf(summed[i], [&](OpOperand &u) { return u.getOwner() != start; });
  }
  return success();
}

struct TensorParallelLower : impl::TensorParallelLowerBase<TensorParallelLower> {
  void runOnOperation() override {
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (failed(lower(fn)))
        return signalPassFailure();
      // The collectives lowered inside a pipeline stage's micro-batch run
      // in the phase of what reads them.
      fn.walk([](train::PipelineOp pipe) { pipe.inferPhases(); });
    }
  }

  LogicalResult lower(func::FuncOp fn) {
    OpBuilder b(fn.getContext());
    std::optional<dist::GroupAttr> group;
    fn.walk([&](dist::TpCopyOp f) {
      group = f.getGroup();
      f.getResult().replaceAllUsesWith(f.getInput());
      f->erase();
    });
    fn.walk([&](dist::TpMaxOp m) {
      group = m.getGroup();
      b.setInsertionPoint(m);
      m.getResult().replaceAllUsesWith(distutil::allReduce(b, m.getLoc(), m.getInput(),
                                                           m.getGroup(), dist::ReduceKind::max));
      m->erase();
    });
    fn.walk([&](dist::TpReduceOp g) {
      group = g.getGroup();
      b.setInsertionPoint(g);
      Value sum = distutil::allReduce(b, g.getLoc(), g.getInput(), g.getGroup(),
                                      dist::ReduceKind::sum);
      g.getResult().replaceAllUsesWith(sum);
      g->erase();
    });
    // A split parameter's optimizer states are split alike (under ZeRO
    // both split and sharded: each rank's chunk of its tp part).
    SmallVector<train::LambOp> splitLambs;
    fn.walk([&](Operation *op) {
      if (!isa<train::OptimizerUpdateOpInterface>(op))
        return;
      BlockArgument arg = updatedParam(fn, op);
      if (!arg)
        return;
      Attribute split = fn.getArgAttr(arg.getArgNumber(), "dist.tp_split");
      if (!split)
        return;
      for (OpOperand *st : cast<train::OptimizerUpdateOpInterface>(op).getOptStates())
        if (auto sa = dyn_cast<BlockArgument>(st->get()); sa && sa.getOwner()->getParentOp() == fn)
          fn.setArgAttr(sa.getArgNumber(), "dist.tp_split", split);
      // LAMB's trust ratio is of the whole tensor: its part's sums of
      // squares are summed over the group.
      if (auto lamb = dyn_cast<train::LambOp>(op))
        splitLambs.push_back(lamb);
    });
    // One all-reduce for all of them, before the first update.
    if (!splitLambs.empty()) {
      if (!group)
        return splitLambs[0].emitOpError(
            "tensor-parallel-lower: a split parameter but no tp group");
      Operation *first = splitLambs[0];
      SmallVector<Value> partial;
      for (train::LambOp lamb : splitLambs) {
        if (lamb->getBlock() != first->getBlock())
          return lamb.emitOpError("tensor-parallel-lower: the LAMB updates are not in one block");
        if (lamb->isBeforeInBlock(first))
          first = lamb;
        partial.push_back(lamb.getStats());
      }
      // Each update's train.lamb_stats sits right before it: the sums
      // move before the first update (they read the parameters, clipped
      // gradients and states, all defined before the updates).
      for (Value v : partial)
        if (Operation *def = v.getDefiningOp();
            def && def->getBlock() == first->getBlock() && first->isBeforeInBlock(def)) {
          if (!isa<train::LambStatsOp>(def))
            return def->emitOpError("tensor-parallel-lower: LAMB's sums come after its first "
                                    "update and are not a train.lamb_stats");
          def->moveBefore(first);
        }
      b.setInsertionPoint(first);
      for (auto [lamb, sum] :
           llvm::zip_equal(splitLambs, distutil::allReduceSums(b, first->getLoc(), partial, *group)))
        lamb.getStatsMutable().assign(sum);
    }
    regatherForBackward(fn);
    lowerSequenceParallel(fn, group);
    // The global gradient norm: a split parameter's gradient is split too,
    // so its squares are summed over the group; a whole one counts once.
    SmallVector<train::ClipGradNormOp> clips;
    fn.walk([&](train::ClipGradNormOp c) { clips.push_back(c); });
    bool partial = llvm::any_of(fn.getArguments(), [&](BlockArgument a) {
      return static_cast<bool>(fn.getArgAttr(a.getArgNumber(), "dist.sp_partial"));
    });
    if (clips.empty()) {
      if (partial)
        return fn.emitError("tensor-parallel-lower: sequence-parallel parameters but no "
                            "train.clip_grad_norm to sum their gradients before");
      return success();
    }
    if (clips.size() > 1)
      return clips[1].emitOpError("tensor-parallel-lower: one gradient clipping per step");
    train::ClipGradNormOp clip = clips[0];
    if (partial && failed(sumPartialGradients(fn, clip, *group)))
      return failure();
    SmallVector<bool> splitGrad = gradsOfParamsWith(fn, clip, "dist.tp_split");
    bool any = llvm::is_contained(splitGrad, true);
    if (!any)
      return success();
    if (!group)
      return clip.emitOpError("tensor-parallel-lower: split parameters but no tp group");
    if (clip.getSumSq())
      return splitZeroNorm(fn, clip, splitGrad, *group);
    b.setInsertionPoint(clip);
    Location loc = clip.getLoc();
    // A parameter another pipeline stage also holds (a tied embedding)
    // counts there only.
    SmallVector<bool> tiedCopy = gradsOfParamsWith(fn, clip, distutil::kTiedCopy);
    SmallVector<Value> split, whole;
    for (auto [i, g] : llvm::enumerate(clip.getGrads()))
      if (!tiedCopy[i])
        (splitGrad[i] ? split : whole).push_back(g);
    Value sumSq = distutil::allReduce(b, loc, distutil::sumOfSquares(b, loc, split), *group,
                                      dist::ReduceKind::sum);
    if (!whole.empty())
      sumSq = nn::AddOp::create(b, loc, sumSq, distutil::sumOfSquares(b, loc, whole));
    auto newClip = train::ClipGradNormOp::create(b, loc, clip->getResultTypes(), clip.getGrads(),
                                                 sumSq, clip.getLossScale(),
                                                 clip.getMaxNormAttr());
    clip->replaceAllUsesWith(newClip->getResults());
    clip->erase();
    return success();
  }
};
} // namespace
} // namespace dsc
