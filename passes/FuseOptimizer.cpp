//===- FuseOptimizer.cpp - one Adam update over many parameters ----------===//
//
// After autodiff and the distribution passes, a step ends with one
// train.adam per parameter, each reading a gradient that clip_grad_norm
// wrote clipped (and, in bf16/fp16, an nn.cast widened): per parameter a
// cast pass, a clipping pass and an update pass over the gradient, and one
// runtime call even for a 384-element bias. This pass makes of each run of
// train.adam ops with the same learning rate, step and
// attributes one train.fused_adam; when every gradient clip_grad_norm
// clips is read by such an update, the clip becomes train.clip_coef (the
// norm and the factor, no writes) and the updates apply the factor as they
// read the gradients; a cast to fp32 whose value only they read is read
// through. Each element's arithmetic stays train.adam's.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/dist/DistDialect.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace dsc {
#define GEN_PASS_DEF_FUSEOPTIMIZER
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

/// Whether `b` can join a run that `a` is in: the same learning rate and
/// step values, the same attributes (rates, flags and any marks), and
/// gradients clipped by the same clip_grad_norm or both by none.
bool sameUpdate(train::AdamOp a, train::AdamOp b) {
  return a.getLr() == b.getLr() && a.getStep() == b.getStep() &&
         a->getAttrDictionary() == b->getAttrDictionary() &&
         a.getGrad().getDefiningOp<train::ClipGradNormOp>() ==
             b.getGrad().getDefiningOp<train::ClipGradNormOp>();
}

/// The runs of mutually compatible train.adam ops in `block`, in order. A
/// run may step over pure ops that read none of its updates' results (ZeRO's
/// dist.chunk of the next parameter): the fused op goes at its last update,
/// after them. Any other op (a tier copy, a read of an updated parameter)
/// ends it.
SmallVector<SmallVector<train::AdamOp>> adamRuns(Block &block) {
  SmallVector<SmallVector<train::AdamOp>> runs;
  SmallVector<train::AdamOp> run;
  llvm::SmallPtrSet<Operation *, 16> inRun;
  auto close = [&] {
    if (!run.empty())
      runs.push_back(std::move(run));
    run.clear();
    inRun.clear();
  };
  for (Operation &op : block) {
    auto adam = dyn_cast<train::AdamOp>(op);
    if (!adam) {
      bool readsRun = llvm::any_of(op.getOperands(), [&](Value v) {
        return v.getDefiningOp() && inRun.contains(v.getDefiningOp());
      });
      // dist.chunk (a ZeRO rank's cut of a parameter) only copies; the
      // dialect does not mark it pure.
      bool free = isPure(&op) || isa<dist::ChunkOp>(op);
      if (readsRun || !free || op.getNumRegions())
        close();
      continue;
    }
    if (!run.empty() && !sameUpdate(run.front(), adam))
      close();
    run.push_back(adam);
    inRun.insert(adam);
  }
  close();
  return runs;
}

/// The nn.cast that widens a bf16/fp16 value to f32 and defines `v`, or
/// null.
nn::CastOp widening(Value v) {
  auto widen = v.getDefiningOp<nn::CastOp>();
  if (!widen)
    return nullptr;
  auto from = cast<RankedTensorType>(widen.getInput().getType()).getElementType();
  auto to = cast<RankedTensorType>(v.getType()).getElementType();
  return to.isF32() && (from.isBF16() || from.isF16()) ? widen : nullptr;
}

/// The bf16/fp16 value a gradient was widened from, when the widening
/// (an nn.cast to f32) is read only by `readers`: the fused ops read the
/// narrow value instead.
Value narrowSource(Value grad, const llvm::SmallPtrSetImpl<Operation *> &readers) {
  nn::CastOp widen = widening(grad);
  if (!widen)
    return grad;
  for (Operation *user : grad.getUsers())
    if (!readers.contains(user))
      return grad;
  return widen.getInput();
}

/// The widening in `body` that its yield's operand i is and that nothing
/// else reads, or null.
nn::CastOp yieldedWidening(Block &body, unsigned i) {
  nn::CastOp widen = widening(body.getTerminator()->getOperand(i));
  return widen && widen->getBlock() == &body && widen->hasOneUse() ? widen : nullptr;
}

/// Yields the narrow value `widen` read instead of it, and erases it.
void yieldNarrow(Block &body, unsigned i, nn::CastOp widen) {
  body.getTerminator()->setOperand(i, widen.getInput());
  widen->erase();
}

/// A gradient widened to f32 in train.accumulate's body only to be yielded
/// is yielded narrow:
///  * with several micro-batches the accumulate widens it as it adds it to
///    the f32 sum (what the cast and the addition did, without the cast's
///    pass and buffer);
///  * with one, the sum is the yielded value itself: when it is read after
///    the accumulate only by a clip or as an update's gradient, the sum
///    becomes the narrow value and is widened after the accumulate, where
///    the fusion below reads it through; the sum held through the backward
///    is half the bytes.
/// The values are the same either way.
bool narrowYield(train::AccumulateOp acc, unsigned i) {
  Block &body = acc.getBody().front();
  nn::CastOp widen = yieldedWidening(body, i);
  if (!widen)
    return false;
  Value sum = acc.getResult(i);
  if (acc.getCount() > 1) {
    yieldNarrow(body, i, widen);
    return true;
  }
  for (OpOperand &use : sum.getUses()) {
    bool update = isa<train::AdamOp>(use.getOwner()) && use.getOperandNumber() == 1;
    if (!update && !isa<train::ClipGradNormOp>(use.getOwner()))
      return false;
  }
  auto narrow = cast<RankedTensorType>(widen.getInput().getType());
  yieldNarrow(body, i, widen);
  sum.setType(narrow);
  OpBuilder b(acc->getContext());
  b.setInsertionPointAfter(acc);
  auto wide = nn::CastOp::create(b, acc.getLoc(), RankedTensorType::get(narrow.getShape(),
                                                                       b.getF32Type()), sum);
  sum.replaceAllUsesExcept(wide.getResult(), wide);
  return true;
}

/// A pipeline stage sums what its body yields after each micro-batch's
/// sum phase, into sums filled with zeros first: a gradient widened only
/// to be yielded is yielded narrow and widened as it is added, as with
/// several micro-batches above.
bool narrowYield(train::PipelineOp pipe, unsigned i) {
  Block &body = pipe.getBody().front();
  nn::CastOp widen = yieldedWidening(body, i);
  if (widen)
    yieldNarrow(body, i, widen);
  return bool(widen);
}

struct FuseOptimizer : impl::FuseOptimizerBase<FuseOptimizer> {
  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation()->walk([&](Block *block) { blocks.push_back(block); });
    for (Block *block : blocks)
      fuseBlock(*block);
  }

  void fuseBlock(Block &block) {
    for (auto acc : llvm::make_early_inc_range(block.getOps<train::AccumulateOp>()))
      for (unsigned i = 0; i < acc.getNumResults(); ++i)
        numYields += narrowYield(acc, i);
    for (auto pipe : block.getOps<train::PipelineOp>())
      for (unsigned i = 0; i < pipe.getNumResults(); ++i)
        numYields += narrowYield(pipe, i);
    SmallVector<SmallVector<train::AdamOp>> runs = adamRuns(block);
    if (runs.empty())
      return;
    llvm::SmallPtrSet<Operation *, 32> inRuns;
    for (auto &run : runs)
      for (train::AdamOp a : run)
        inRuns.insert(a);

    // The clip folds when each gradient it clips is read only as an
    // update's gradient, in the runs.
    SmallVector<train::ClipGradNormOp> clips;
    for (auto &run : runs)
      for (train::AdamOp a : run)
        if (auto clip = a.getGrad().getDefiningOp<train::ClipGradNormOp>())
          if (!llvm::is_contained(clips, clip))
            clips.push_back(clip);
    llvm::DenseMap<Operation *, Value> coefOf; // clip -> its factor
    llvm::DenseMap<Operation *, SmallVector<Value>> readOf; // clip -> what clip_coef reads
    for (train::ClipGradNormOp clip : clips) {
      bool foldable = clip->getBlock() == &block;
      for (Value c : clip.getClipped())
        for (OpOperand &use : c.getUses()) {
          auto a = dyn_cast<train::AdamOp>(use.getOwner());
          foldable &= a && inRuns.contains(a) && use.getOperandNumber() == 1;
        }
      if (!foldable)
        continue;
      // The gradients it reads: the narrow ones where only the clip and the
      // updates read the widening.
      llvm::SmallPtrSet<Operation *, 8> readers;
      readers.insert(clip);
      for (Value c : clip.getClipped())
        for (Operation *u : c.getUsers())
          readers.insert(u);
      SmallVector<Value> grads;
      for (Value g : clip.getGrads())
        grads.push_back(narrowSource(g, readers));
      OpBuilder b(clip);
      auto coef = train::ClipCoefOp::create(b, clip.getLoc(), grads, clip.getSumSq(),
                                            clip.getLossScale(), clip.getMaxNormAttr());
      copyMarks(clip, coef);
      clip.getNorm().replaceAllUsesWith(coef.getNorm());
      coefOf[clip] = coef.getCoef();
      readOf[clip] = grads;
      ++numClips;
    }

    for (auto &run : runs) {
      Value coef;
      if (auto clip = run.front().getGrad().getDefiningOp<train::ClipGradNormOp>())
        coef = coefOf.lookup(clip);
      // A lone update is fused only to read its clip's factor.
      if (run.size() < 2 && !coef)
        continue;
      fuseRun(run, coef, coef ? ArrayRef<Value>(readOf[run.front().getGrad().getDefiningOp()])
                              : ArrayRef<Value>());
    }
    // The folded clips (their gradients now read through) and widenings
    // nothing reads any more.
    for (train::ClipGradNormOp clip : clips)
      if (coefOf.count(clip))
        eraseWithWidenings(clip, clip.getGrads());
  }

  /// Erases `op` (its results unused), then the casts among `grads`' definitions
  /// that nothing reads any more: the widenings the fused ops read through.
  void eraseWithWidenings(Operation *op, ValueRange grads) {
    SmallVector<Operation *> casts;
    for (Value g : grads)
      if (auto c = g.getDefiningOp<nn::CastOp>())
        casts.push_back(c);
    op->erase();
    for (Operation *c : casts)
      if (c->use_empty()) {
        c->erase();
        ++numCasts;
      }
  }

  /// `run` as one train.fused_adam at its last update; with `coef`, the
  /// gradients are the clip's operands `clipRead` (what clip_coef reads).
  void fuseRun(ArrayRef<train::AdamOp> run, Value coef, ArrayRef<Value> clipRead) {
    train::AdamOp first = run.front(), last = run.back();
    SmallVector<Value> params, grads, avgs, avgSqs;
    llvm::SmallPtrSet<Operation *, 16> readers;
    for (train::AdamOp a : run)
      readers.insert(a);
    for (train::AdamOp a : run) {
      params.push_back(a.getParam());
      Value g = a.getGrad();
      if (coef)
        g = clipRead[cast<OpResult>(g).getResultNumber()];
      else
        g = narrowSource(g, readers);
      grads.push_back(g);
      avgs.push_back(a.getExpAvg());
      avgSqs.push_back(a.getExpAvgSq());
    }
    OpBuilder b(last);
    auto fused = train::FusedAdamOp::create(
        b, last.getLoc(), params, grads, avgs, avgSqs, first.getLr(), first.getStep(), coef,
        first.getBeta1Attr(), first.getBeta2Attr(), first.getEpsAttr(),
        first.getWeightDecayAttr(), first.getDecoupledWeightDecayAttr(),
        first.getBiasCorrectionAttr());
    copyMarks(first, fused);
    for (size_t k = 0; k < run.size(); ++k) {
      train::AdamOp a = run[k];
      a.getNewParam().replaceAllUsesWith(fused.getNewParams()[k]);
      a.getNewExpAvg().replaceAllUsesWith(fused.getNewExpAvgs()[k]);
      a.getNewExpAvgSq().replaceAllUsesWith(fused.getNewExpAvgSqs()[k]);
    }
    for (train::AdamOp a : run)
      eraseWithWidenings(a, a.getGrad());
    numUpdates += run.size();
    ++numFused;
  }

  /// The discardable marks (a pipeline stage's phase, the active steps).
  static void copyMarks(Operation *from, Operation *to) {
    for (NamedAttribute a : from->getDiscardableAttrs())
      to->setAttr(a.getName(), a.getValue());
  }
};

} // namespace
} // namespace dsc
