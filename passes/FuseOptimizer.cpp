//===- FuseOptimizer.cpp - one Adam or LAMB update over many parameters ---===//
//
// After autodiff and the distribution passes, a step ends with one
// train.adam (or train.lamb with its train.lamb_stats) per parameter, each
// reading a gradient that clip_grad_norm wrote clipped (and, in bf16/fp16,
// an nn.cast widened): per parameter a cast pass, a clipping pass and an
// update pass over the gradient, and one runtime call even for a
// 384-element bias. This pass makes of each run of updates with the same
// learning rate, step and attributes one train.fused_adam or
// train.fused_lamb, and of LAMB's sums of squares one
// train.fused_lamb_stats; when every gradient clip_grad_norm clips is read
// by such ops, the clip becomes train.clip_coef (the norm and the factor,
// no writes) and the fused ops apply the factor as they read the
// gradients; a cast to fp32 whose value only they read is read through.
// Each element's arithmetic stays the unfused ops'.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/DistUtils.h"

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

/// Whether `b` can join a run that `a` is in (train.adam or train.lamb):
/// the same learning rate and step values, the same attributes (rates,
/// flags and any marks), and gradients clipped by the same clip_grad_norm
/// or both by none.
template <typename Update> bool sameUpdate(Update a, Update b) {
  return a.getLr() == b.getLr() && a.getStep() == b.getStep() &&
         a->getAttrDictionary() == b->getAttrDictionary() &&
         a.getGrad().template getDefiningOp<train::ClipGradNormOp>() ==
             b.getGrad().template getDefiningOp<train::ClipGradNormOp>();
}

/// The runs of mutually compatible updates of type `Update` in `block`, in
/// order. A run may step over pure ops that read none of its updates'
/// results (ZeRO's dist.chunk of the next parameter, LAMB's sums of the
/// next one): the fused op goes at its last update, after them. Any other
/// op (a tier copy, a read of an updated parameter) ends it.
template <typename Update> SmallVector<SmallVector<Update>> updateRuns(Block &block) {
  SmallVector<SmallVector<Update>> runs;
  SmallVector<Update> run;
  llvm::SmallPtrSet<Operation *, 16> inRun;
  auto close = [&] {
    if (!run.empty())
      runs.push_back(std::move(run));
    run.clear();
    inRun.clear();
  };
  for (Operation &op : block) {
    auto update = dyn_cast<Update>(op);
    if (!update) {
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
    if (!run.empty() && !sameUpdate(run.front(), update))
      close();
    run.push_back(update);
    inRun.insert(update);
  }
  close();
  return runs;
}

/// Whether `use` is the gradient operand of an update the pass fuses (or
/// of LAMB's sums of squares).
bool readsAsGradient(OpOperand &use) {
  return isa<train::AdamOp, train::LambOp, train::LambStatsOp>(use.getOwner()) &&
         use.getOperandNumber() == 1;
}

/// The train.lamb_stats in `block` that fuse, in groups: the same rates,
/// their gradients clipped by the same clip_grad_norm or both by none. A
/// group's fused op goes at its last member, so a group is kept only when
/// everything that reads its sums comes after that, a LAMB update counted
/// where its run's fused op goes (`fusedAt`).
SmallVector<SmallVector<train::LambStatsOp>>
statsGroups(Block &block, const llvm::DenseMap<Operation *, Operation *> &fusedAt) {
  SmallVector<SmallVector<train::LambStatsOp>> groups;
  for (auto stats : block.getOps<train::LambStatsOp>()) {
    auto same = [&](SmallVector<train::LambStatsOp> &g) {
      return g.front()->getAttrDictionary() == stats->getAttrDictionary() &&
             g.front().getGrad().getDefiningOp<train::ClipGradNormOp>() ==
                 stats.getGrad().getDefiningOp<train::ClipGradNormOp>();
    };
    auto *g = llvm::find_if(groups, same);
    if (g == groups.end())
      groups.push_back({stats});
    else
      g->push_back(stats);
  }
  llvm::erase_if(groups, [&](SmallVector<train::LambStatsOp> &g) {
    Operation *last = g.back();
    for (train::LambStatsOp stats : g)
      for (Operation *user : stats->getUsers()) {
        Operation *at = fusedAt.lookup(user);
        at = block.findAncestorOpInBlock(at ? *at : *user);
        if (!at || !last->isBeforeInBlock(at))
          return true;
      }
    return false;
  });
  return groups;
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
    if (!readsAsGradient(use) && !isa<train::ClipGradNormOp>(use.getOwner()))
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
    keepWorkingCopies(getOperation());
  }

  /// A parameter whose bf16 / fp16 copy the step casts at its top (mixed
  /// precision's nn.cast, hoisted before the micro-batches) and whose new
  /// value a fused update in that block returns keeps its copy across
  /// steps: a `train.param_copy` argument that the forward reads instead
  /// of the cast and that the update writes as it writes the parameter
  /// (its `copies`), returned as the same `train.param_copy` result.
  /// DeepSpeed's bf16 optimizer keeps such copies too; here the update
  /// writes them in the pass that writes the parameters, so no cast runs
  /// in the step. Every reader of the cast must come before the update. A
  /// ZeRO shard keeps its cast (what is gathered is the whole copy).
  void keepWorkingCopies(func::FuncOp fn) {
    if (fn.isExternal())
      return;
    Block &entry = fn.getBody().front();
    for (Operation &op : llvm::make_early_inc_range(entry)) {
      if (auto f = dyn_cast<train::FusedAdamOp>(op))
        addCopies(fn, f);
      else if (auto f = dyn_cast<train::FusedLambOp>(op))
        addCopies(fn, f);
    }
  }

  /// The casts of parameter argument `arg` to one bf16 / fp16 type, all in
  /// the entry block and read only before `update`; empty where there are
  /// none or they do not qualify.
  static SmallVector<nn::CastOp> castsToKeep(BlockArgument arg, Operation *update) {
    SmallVector<nn::CastOp> casts;
    Block &entry = *update->getBlock();
    for (Operation *user : arg.getUsers()) {
      auto c = dyn_cast<nn::CastOp>(user);
      if (!c)
        continue; // the float32 parameter read as it is (a norm's scale)
      auto to = cast<RankedTensorType>(c.getType()).getElementType();
      if (c->getBlock() != &entry || !(to.isBF16() || to.isF16()) ||
          (!casts.empty() && casts.front().getType() != c.getType()))
        return {};
      for (Operation *reader : c->getUsers()) {
        Operation *at = entry.findAncestorOpInBlock(*reader);
        if (!at || !at->isBeforeInBlock(update))
          return {};
      }
      casts.push_back(c);
    }
    return casts;
  }

  template <typename Fused> void addCopies(func::FuncOp fn, Fused f) {
    auto ret = cast<func::ReturnOp>(f->getBlock()->getTerminator());
    SmallVector<int64_t> copyOf;
    SmallVector<Value> copies;
    SmallVector<StringAttr> names;
    for (auto [k, p] : llvm::enumerate(f.getParams())) {
      auto arg = dyn_cast<BlockArgument>(p);
      if (!arg || arg.getOwner() != f->getBlock())
        continue;
      auto name =
          fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), train::TrainDialect::kParam);
      // A ZeRO shard's copy is gathered whole every step anyway; its cast
      // is 1/dp of the work and stays where it is.
      if (fn.getArgAttr(arg.getArgNumber(), distutil::kShardOf))
        continue;
      // The update's new value is what the step returns for the parameter.
      bool returned = name && llvm::any_of(ret->getOpOperands(), [&](OpOperand &o) {
        return o.get() == f.getNewParams()[k] &&
               fn.getResultAttr(o.getOperandNumber(), train::TrainDialect::kUpdated) == name;
      });
      if (!returned)
        continue;
      SmallVector<nn::CastOp> casts = castsToKeep(arg, f);
      if (casts.empty())
        continue;
      OpBuilder b(fn.getContext());
      unsigned index = fn.getNumArguments();
      DictionaryAttr role =
          b.getDictionaryAttr(b.getNamedAttr(train::TrainDialect::kParamCopy, name));
      if (failed(fn.insertArgument(index, casts.front().getType(), role, fn.getLoc())))
        return signalPassFailure();
      Value copy = fn.getArgument(index);
      for (nn::CastOp c : casts) {
        c.replaceAllUsesWith(copy);
        c->erase();
      }
      copyOf.push_back(int64_t(k));
      copies.push_back(copy);
      names.push_back(name);
    }
    if (copies.empty())
      return;
    OpBuilder b(f);
    Fused g = withCopies(b, f, copies, b.getDenseI64ArrayAttr(copyOf));
    copyMarks(f, g);
    for (auto [old, now] : llvm::zip(f->getResults(), g->getResults()))
      old.replaceAllUsesWith(now);
    f->erase();
    for (auto [j, name] : llvm::enumerate(names)) {
      unsigned r = fn.getNumResults();
      OpBuilder rb(fn.getContext());
      if (failed(fn.insertResult(
              r, g.getNewCopies()[j].getType(),
              rb.getDictionaryAttr(rb.getNamedAttr(train::TrainDialect::kParamCopy, name)))))
        return signalPassFailure();
      ret->insertOperands(r, g.getNewCopies()[j]);
      ++numCopies;
    }
  }

  static train::FusedAdamOp withCopies(OpBuilder &b, train::FusedAdamOp f, ValueRange copies,
                                       DenseI64ArrayAttr copyOf) {
    return train::FusedAdamOp::create(
        b, f.getLoc(), f.getParams(), f.getGrads(), f.getExpAvgs(), f.getExpAvgSqs(), f.getLr(),
        f.getStep(), f.getCoef(), copies, f.getBeta1Attr(), f.getBeta2Attr(), f.getEpsAttr(),
        f.getWeightDecayAttr(), f.getDecoupledWeightDecayAttr(), f.getBiasCorrectionAttr(),
        copyOf);
  }
  static train::FusedLambOp withCopies(OpBuilder &b, train::FusedLambOp f, ValueRange copies,
                                       DenseI64ArrayAttr copyOf) {
    return train::FusedLambOp::create(
        b, f.getLoc(), f.getParams(), f.getGrads(), f.getExpAvgs(), f.getExpAvgSqs(),
        f.getStats(), f.getLr(), f.getStep(), f.getCoef(), copies, f.getBeta1Attr(),
        f.getBeta2Attr(), f.getEpsAttr(), f.getWeightDecayAttr(), f.getBiasCorrectionAttr(),
        f.getMaxCoeffAttr(), f.getMinCoeffAttr(), copyOf);
  }

  void fuseBlock(Block &block) {
    for (auto acc : llvm::make_early_inc_range(block.getOps<train::AccumulateOp>()))
      for (unsigned i = 0; i < acc.getNumResults(); ++i)
        numYields += narrowYield(acc, i);
    for (auto pipe : block.getOps<train::PipelineOp>())
      for (unsigned i = 0; i < pipe.getNumResults(); ++i)
        numYields += narrowYield(pipe, i);
    SmallVector<SmallVector<train::AdamOp>> adamRuns = updateRuns<train::AdamOp>(block);
    SmallVector<SmallVector<train::LambOp>> lambRuns = updateRuns<train::LambOp>(block);
    llvm::DenseMap<Operation *, Operation *> fusedAt; // a LAMB update -> its run's last
    for (auto &run : lambRuns)
      for (train::LambOp l : run)
        fusedAt[l] = run.back();
    SmallVector<SmallVector<train::LambStatsOp>> sums = statsGroups(block, fusedAt);
    if (adamRuns.empty() && lambRuns.empty())
      return;
    // Every op the pass may fuse: the gradients they alone read are read
    // narrow, and the clips they alone read fold.
    llvm::SmallPtrSet<Operation *, 32> fusable;
    for (auto &run : adamRuns)
      fusable.insert(run.begin(), run.end());
    for (auto &run : lambRuns)
      fusable.insert(run.begin(), run.end());
    for (auto &group : sums)
      fusable.insert(group.begin(), group.end());

    // The clip folds when each gradient it clips is read only as a fusable
    // op's gradient.
    SmallVector<train::ClipGradNormOp> clips;
    auto addClip = [&](Value grad) {
      if (auto clip = grad.getDefiningOp<train::ClipGradNormOp>())
        if (!llvm::is_contained(clips, clip))
          clips.push_back(clip);
    };
    for (auto &run : adamRuns)
      for (train::AdamOp a : run)
        addClip(a.getGrad());
    for (auto &run : lambRuns)
      for (train::LambOp l : run)
        addClip(l.getGrad());
    llvm::DenseMap<Operation *, Value> coefOf; // clip -> its factor
    llvm::DenseMap<Operation *, SmallVector<Value>> readOf; // clip -> what clip_coef reads
    for (train::ClipGradNormOp clip : clips) {
      bool foldable = clip->getBlock() == &block;
      for (Value c : clip.getClipped())
        for (OpOperand &use : c.getUses())
          foldable &= fusable.contains(use.getOwner()) && readsAsGradient(use);
      if (!foldable)
        continue;
      // The gradients it reads: the narrow ones where only the clip and the
      // fused ops read the widening.
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

    // A group's gradients: what its clip's coef reads, or the narrow ones
    // where only fusable ops read the widening. Empty where it stays
    // unfused: a lone op is fused only to read its clip's factor.
    auto gradsOf = [&](auto group, Value &coef) {
      SmallVector<Value> grads;
      auto front = group.front();
      auto clip = front.getGrad().template getDefiningOp<train::ClipGradNormOp>();
      coef = clip ? coefOf.lookup(clip) : Value();
      if (group.size() < 2 && !coef)
        return grads;
      for (auto member : group) {
        Value g = member.getGrad();
        grads.push_back(coef ? readOf[clip][cast<OpResult>(g).getResultNumber()]
                             : narrowSource(g, fusable));
      }
      return grads;
    };
    for (auto &run : adamRuns) {
      Value coef;
      if (SmallVector<Value> grads = gradsOf(ArrayRef(run), coef); !grads.empty())
        fuseAdam(run, grads, coef);
    }
    for (auto &run : lambRuns) {
      Value coef;
      if (SmallVector<Value> grads = gradsOf(ArrayRef(run), coef); !grads.empty())
        fuseLamb(run, grads, coef);
    }
    for (auto &group : sums) {
      Value coef;
      if (SmallVector<Value> grads = gradsOf(ArrayRef(group), coef); !grads.empty())
        fuseStats(group, grads, coef);
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

  /// The parameters, exp_avgs and exp_avg_sqs of `run`'s updates.
  template <typename Update>
  static std::array<SmallVector<Value>, 3> updateOperands(ArrayRef<Update> run) {
    std::array<SmallVector<Value>, 3> v;
    for (Update u : run) {
      v[0].push_back(u.getParam());
      v[1].push_back(u.getExpAvg());
      v[2].push_back(u.getExpAvgSq());
    }
    return v;
  }

  /// Replaces `run`'s results by the fused op's and erases the updates.
  template <typename Update, typename Fused> void replaceRun(ArrayRef<Update> run, Fused fused) {
    copyMarks(run.front(), fused);
    for (size_t k = 0; k < run.size(); ++k) {
      Update u = run[k];
      u.getNewParam().replaceAllUsesWith(fused.getNewParams()[k]);
      u.getNewExpAvg().replaceAllUsesWith(fused.getNewExpAvgs()[k]);
      u.getNewExpAvgSq().replaceAllUsesWith(fused.getNewExpAvgSqs()[k]);
    }
    for (Update u : run)
      eraseWithWidenings(u, u.getGrad());
    numUpdates += run.size();
    ++numFused;
  }

  /// `run` as one train.fused_adam at its last update, reading `grads`
  /// (multiplied by `coef` when there is one).
  void fuseAdam(ArrayRef<train::AdamOp> run, ArrayRef<Value> grads, Value coef) {
    train::AdamOp first = run.front();
    auto [params, avgs, avgSqs] = updateOperands(run);
    train::AdamOp last = run.back();
    OpBuilder b(last);
    auto fused = train::FusedAdamOp::create(
        b, last.getLoc(), params, grads, avgs, avgSqs, first.getLr(), first.getStep(),
        coef, /*copies=*/ValueRange(), first.getBeta1Attr(), first.getBeta2Attr(),
        first.getEpsAttr(), first.getWeightDecayAttr(), first.getDecoupledWeightDecayAttr(),
        first.getBiasCorrectionAttr(), b.getDenseI64ArrayAttr({}));
    replaceRun(run, fused);
  }

  /// `run` as one train.fused_lamb at its last update.
  void fuseLamb(ArrayRef<train::LambOp> run, ArrayRef<Value> grads, Value coef) {
    train::LambOp first = run.front();
    auto [params, avgs, avgSqs] = updateOperands(run);
    SmallVector<Value> stats;
    for (train::LambOp l : run)
      stats.push_back(l.getStats());
    train::LambOp last = run.back();
    OpBuilder b(last);
    auto fused = train::FusedLambOp::create(
        b, last.getLoc(), params, grads, avgs, avgSqs, stats, first.getLr(),
        first.getStep(), coef, /*copies=*/ValueRange(), first.getBeta1Attr(),
        first.getBeta2Attr(), first.getEpsAttr(), first.getWeightDecayAttr(),
        first.getBiasCorrectionAttr(), first.getMaxCoeffAttr(), first.getMinCoeffAttr(),
        b.getDenseI64ArrayAttr({}));
    replaceRun(run, fused);
  }

  /// `group` as one train.fused_lamb_stats at its last member.
  void fuseStats(ArrayRef<train::LambStatsOp> group, ArrayRef<Value> grads, Value coef) {
    train::LambStatsOp first = group.front();
    SmallVector<Value> params, avgs, avgSqs;
    for (train::LambStatsOp s : group) {
      params.push_back(s.getParam());
      avgs.push_back(s.getExpAvg());
      avgSqs.push_back(s.getExpAvgSq());
    }
    train::LambStatsOp last = group.back();
    OpBuilder b(last);
    auto fused = train::FusedLambStatsOp::create(
        b, last.getLoc(), params, grads, avgs, avgSqs, coef, first.getBeta1Attr(),
        first.getBeta2Attr(), first.getEpsAttr(), first.getWeightDecayAttr());
    copyMarks(first, fused);
    for (auto [stats, sum] : llvm::zip_equal(group, fused.getSums()))
      train::LambStatsOp(stats).getSums().replaceAllUsesWith(sum);
    for (train::LambStatsOp s : group)
      eraseWithWidenings(s, s.getGrad());
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
