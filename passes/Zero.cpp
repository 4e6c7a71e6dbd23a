//===- Zero.cpp - ZeRO stages 1-3: partition the model state -------------===//
//
// Input: a step after `optimizer` (train.accumulate, train.clip_grad_norm,
// one train.adam / train.sgd per parameter). Each parameter of n elements is
// viewed flat and zero-padded to dp chunks of c = ceil(n / dp); rank r owns
// chunk r of the parameter, of its gradient and of its optimizer states.
//
//   stage 1  states are chunks; gradient sums reduce-scattered after the
//            accumulation; the owned chunk of the parameter (dist.chunk) is
//            updated and all-gathered back into the parameter.
//   stage 2  + gradients: reduce-scattered inside the micro-batch as they
//            are produced, only the chunk accumulated.
//   stage 3  + parameters (above the persistence threshold): the argument
//            is the chunk; gathered before the forward uses and again
//            before the backward uses; updated in place as a chunk.
// With mixed precision (the module's train.precision), stages 1-2 also
// partition the fp32 parameters (the master weights) and gather their
// 16-bit copies once per step, before the micro-batches.
// Clipping needs the global norm: train.sum_sq of the owned chunks,
// all-reduced (sum), feeds train.clip_grad_norm ... sum_sq(...).
//
//===----------------------------------------------------------------------===//
#include "passes/DistUtils.h"
#include "passes/Passes.h"

#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dsc {
#define GEN_PASS_DEF_ZERO
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {
using train::TrainDialect;

struct Param {
  BlockArgument arg;
  Operation *update = nullptr; // train.adam / train.sgd
  unsigned gradIndex = 0;      // operand of the clipping
  int64_t numel = 0;
  RankedTensorType fullType, chunkType;
  bool partitioned = false; // stage 3: the argument itself is the chunk
  /// Stage 3 with mixed precision: the low-precision copy of the owned
  /// chunk, which is what is gathered (null: the fp32 chunk is).
  Value low;
};

/// Replaces the casts of `p`'s argument to a narrower float type
/// (mixed-precision's copy; a tied embedding also reads the fp32 table
/// directly) by one cast of the chunk (`p.low`, typed as the chunk) whose
/// uses are theirs: the gathers inserted next read the low chunk for those
/// uses and the fp32 chunk for the others.
void gatherLowCopies(OpBuilder &b, Block &top, Param &p) {
  SmallVector<nn::CastOp> casts;
  unsigned width = p.fullType.getElementType().getIntOrFloatBitWidth();
  for (OpOperand &use : p.arg.getUses()) {
    auto c = dyn_cast<nn::CastOp>(use.getOwner());
    if (!c || use.getOwner() == p.update)
      continue;
    Type e = cast<RankedTensorType>(c.getType()).getElementType();
    if (!isa<FloatType>(e) || e.getIntOrFloatBitWidth() >= width ||
        (!casts.empty() && c.getType() != casts.front().getType()))
      continue;
    casts.push_back(c);
  }
  if (casts.empty())
    return;
  Type low = cast<RankedTensorType>(casts.front().getType()).getElementType();
  Operation *first = top.findAncestorOpInBlock(*casts.front());
  for (nn::CastOp c : casts)
    if (Operation *o = top.findAncestorOpInBlock(*c); o->isBeforeInBlock(first))
      first = o;
  b.setInsertionPoint(first);
  // Typed as the chunk already: shardArgument makes the argument the chunk
  // before anything verifies.
  p.low = nn::CastOp::create(b, casts.front().getLoc(), p.chunkType.clone(low), p.arg);
  for (nn::CastOp c : casts) {
    c.getResult().replaceAllUsesWith(p.low);
    c.erase();
  }
}

struct Zero : impl::ZeroBase<Zero> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (stage < 1 || stage > 3) {
      module.emitError("zero: stage must be 1, 2 or 3 (stage 0 is the data-parallel pass), got ")
          << (int64_t)stage;
      return signalPassFailure();
    }
    if (dp < 1) {
      module.emitError("zero: dp must be at least 1, got ") << (int64_t)dp;
      return signalPassFailure();
    }
    if (persistenceThreshold < 0) {
      module.emitError("zero: persistence-threshold must be >= 0");
      return signalPassFailure();
    }
    for (auto fn : module.getOps<func::FuncOp>())
      if (failed(run(fn)))
        return signalPassFailure();
    OpBuilder b(module.getContext());
    module->setAttr(distutil::kDp, b.getI64IntegerAttr(dp));
    module->setAttr(distutil::kZeroStage, b.getI64IntegerAttr(stage));
  }

  /// Marks argument `a` as a chunk of `full` and retypes it.
  void shardArgument(func::FuncOp fn, BlockArgument a, RankedTensorType full,
                     RankedTensorType chunk) {
    OpBuilder b(fn.getContext());
    fn.setArgAttr(a.getArgNumber(), distutil::kShardOf,
                  b.getDenseI64ArrayAttr(full.getShape()));
    a.setType(chunk);
  }

  LogicalResult run(func::FuncOp fn) {
    Block &top = fn.getBody().front();
    auto clips = llvm::to_vector(top.getOps<train::ClipGradNormOp>());
    if (clips.empty())
      return success(); // not a training step
    train::ClipGradNormOp clip = clips[0];
    if (clips.size() > 1 || clip.getSumSq())
      return clip.emitOpError("zero: expected one unpartitioned gradient clipping per step");
    auto accs = llvm::to_vector(top.getOps<train::AccumulateOp>());
    // A pipeline stage (pipeline-schedule) sums its micro-batches'
    // gradients in its train.pipeline op: every stage reduces them once per
    // step, after the flush, as stage 1 does.
    bool pipelined = fn->hasAttr(distutil::kStage);
    if (!pipelined && accs.size() != 1)
      return fn.emitError("zero: expected one train.accumulate (run gradient-accumulation)");
    train::AccumulateOp acc = pipelined ? train::AccumulateOp() : accs[0];
    if (Operation *communicating = distutil::firstCollective(fn))
      return communicating->emitOpError(
          "zero: the step already communicates (data-parallel ran?)");
    MLIRContext *ctx = fn.getContext();
    auto group = dist::GroupAttr::get(ctx, dist::Axis::dp, dp);
    Type comm = floatKindType(ctx, commDtype);
    OpBuilder b(ctx);
    Location loc = clip.getLoc();

    // Mixed precision at stages 1-2: the fp32 master weights are
    // partitioned with the optimizer states (DeepSpeed's layout: 2P
    // bytes of 16-bit parameters, 12P/dp of fp32 master and moments), and
    // each rank gathers the 16-bit copies once per step, before the first
    // micro-batch (half the bytes of gathering fp32 parameters after the
    // update, and the same values: the copies are cast from the updated
    // masters).
    bool mixed = stage < 3 && fn->getParentOfType<ModuleOp>()->hasAttr(TrainDialect::kPrecision);

    // 1. The parameters and their updates.
    SmallVector<Param> params;
    for (Operation &op : top) {
      if (!isa<train::OptimizerUpdateOpInterface>(op))
        continue;
      Param p;
      p.update = &op;
      p.arg = dyn_cast<BlockArgument>(op.getOperand(0));
      if (!p.arg || !fn.getArgAttr(p.arg.getArgNumber(), TrainDialect::kParam))
        return op.emitOpError("zero: the updated value is not a train.param argument");
      auto grad = dyn_cast<OpResult>(op.getOperand(1));
      if (!grad || grad.getOwner() != clip.getOperation())
        return op.emitOpError("zero: the gradient does not come from the clipping");
      p.gradIndex = grad.getResultNumber();
      p.fullType = cast<RankedTensorType>(p.arg.getType());
      p.numel = p.fullType.getNumElements();
      p.chunkType = RankedTensorType::get({distutil::chunkSize(p.numel, dp)},
                                          p.fullType.getElementType());
      p.partitioned = (stage == 3 && p.numel >= persistenceThreshold) || mixed;
      params.push_back(p);
    }
    if (params.size() != clip.getGrads().size())
      return clip.emitOpError("zero: ") << clip.getGrads().size() << " gradients but "
                                        << params.size() << " parameter updates";

    // 2. Gradient chunks.
    SmallVector<Value> chunks(params.size());
    SmallVector<Operation *> dead;
    Operation *yield = acc ? acc.getBody().front().getTerminator() : nullptr;
    for (Param &p : params) {
      Value g = clip.getGrads()[p.gradIndex];
      if (stage == 1 || pipelined) {
        b.setInsertionPoint(clip);
        // In communication_data_type (cast back below, after every
        // reduce-scatter, so comm-fusion can bucket them).
        Value flat = distutil::flatten(b, g.getLoc(), g);
        chunks[p.gradIndex] = distutil::reduceScatter(
            b, g.getLoc(), distutil::castElements(b, g.getLoc(), flat, comm), group,
            dist::ReduceKind::avg);
        continue;
      }
      // Stages 2-3: reduce-scatter where the micro-batch yields the
      // gradient; the sum (and its 1/N scaling) becomes a chunk.
      Operation *scale = nullptr;
      Value sum = g;
      if (auto mul = g.getDefiningOp<nn::MulOp>())
        if (mul.getRhs().getDefiningOp<arith::ConstantOp>() &&
            cast<RankedTensorType>(mul.getRhs().getType()).getRank() == 0) {
          scale = mul;
          sum = mul.getLhs();
        }
      auto result = dyn_cast<OpResult>(sum);
      if (!result || result.getOwner() != acc.getOperation())
        return clip.emitOpError("zero: gradient ")
               << p.gradIndex << " is not a sum of train.accumulate";
      OpOperand &y = yield->getOpOperand(result.getResultNumber());
      // Right where the backward pass produces the gradient, in
      // communication_data_type, cast back where the micro-batch yields it.
      b.setInsertionPointAfterValue(y.get());
      distutil::reduceInto(b, y.get().getLoc(), distutil::flatten(b, y.get().getLoc(), y.get()),
                           comm, y, [&](Value v) {
                             return distutil::reduceScatter(b, v.getLoc(), v, group,
                                                            dist::ReduceKind::avg);
                           });
      result.setType(p.chunkType);
      Value chunk = result;
      if (scale) {
        b.setInsertionPoint(scale);
        chunk = nn::MulOp::create(b, scale->getLoc(), p.chunkType, result,
                                  cast<nn::MulOp>(scale).getRhs());
        dead.push_back(scale);
      }
      chunks[p.gradIndex] = chunk;
    }

    // Stage 1: the reduced chunks back in the gradients' type.
    if (stage == 1 || pipelined) {
      b.setInsertionPoint(clip);
      for (Param &p : params)
        chunks[p.gradIndex] = distutil::castElements(b, loc, chunks[p.gradIndex],
                                                     p.chunkType.getElementType());
    }

    // 3. Global norm and clipping of the chunks.
    b.setInsertionPoint(clip);
    // A parameter another pipeline stage also holds counts there only.
    SmallVector<Value> counted;
    for (Param &p : params)
      if (!fn.getArgAttr(p.arg.getArgNumber(), distutil::kTiedCopy))
        counted.push_back(chunks[p.gradIndex]);
    Value sumSq = distutil::sumOfSquares(b, loc, counted);
    sumSq = distutil::allReduce(b, loc, sumSq, group, dist::ReduceKind::sum);
    SmallVector<Type> clipTypes;
    for (Value c : chunks)
      clipTypes.push_back(c.getType());
    clipTypes.push_back(clip.getNorm().getType());
    auto newClip = train::ClipGradNormOp::create(b, loc, clipTypes, chunks, sumSq,
                                                 clip.getLossScale(), clip.getMaxNormAttr());
    clip.getNorm().replaceAllUsesWith(newClip.getNorm());

    // 4. Stage 3: gather the partitioned parameters where the step uses
    // them, once for the forward uses and once for the backward uses. A
    // parameter the step reads only through its mixed-precision copy
    // (nn.cast to bf16/fp16, once per step) is gathered as that copy: the
    // owned chunk is cast, and the gather moves half the bytes.
    if (stage == 3 || mixed)
      for (Param &p : params)
        if (p.partitioned)
          gatherLowCopies(b, top, p);
    if ((stage == 3 && pipelined) || mixed) {
      // One gather per step, before the first micro-batch's first use.
      for (Param &p : params) {
        if (!p.partitioned)
          continue;
        for (Value source : {p.low, Value(p.arg)}) {
          if (!source)
            continue;
          SmallVector<OpOperand *> uses;
          Operation *first = nullptr;
          for (OpOperand &use : source.getUses()) {
            // (The update and LAMB's sums read the owned chunk, rebuilt below.)
            if (use.getOwner() == p.update || isa<train::LambStatsOp>(use.getOwner()) ||
                (p.low && use.getOwner() == p.low.getDefiningOp()))
              continue;
            uses.push_back(&use);
            Operation *o = top.findAncestorOpInBlock(*use.getOwner());
            if (!first || o->isBeforeInBlock(first))
              first = o;
          }
          if (first) {
            b.setInsertionPoint(first);
            Value full = distutil::allGather(b, p.arg.getLoc(), source, p.numel, group);
            full = distutil::reshape(b, p.arg.getLoc(), full, p.fullType.getShape());
            for (OpOperand *u : uses)
              u->set(full);
          }
        }
        shardArgument(fn, p.arg, p.fullType, p.chunkType);
      }
    } else if (stage == 3) {
      Block &body = acc.getBody().front();
      Value loss = yield->getOperand(0);
      Operation *lossOp = loss.getDefiningOp();
      for (Param &p : params) {
        if (!p.partitioned)
          continue;
        for (Value source : {p.low, Value(p.arg)}) {
          if (!source)
            continue;
          SmallVector<OpOperand *> forward, backward;
          for (OpOperand &use : source.getUses()) {
            Operation *user = body.findAncestorOpInBlock(*use.getOwner());
            if (!user)
              continue; // the update, outside the micro-batch
            bool isForward = lossOp && lossOp->getBlock() == &body &&
                             !lossOp->isBeforeInBlock(user);
            (isForward ? forward : backward).push_back(&use);
          }
          for (auto *uses : {&forward, &backward}) {
            if (uses->empty())
              continue;
            Operation *first = body.findAncestorOpInBlock(*(*uses)[0]->getOwner());
            for (OpOperand *u : *uses) {
              Operation *o = body.findAncestorOpInBlock(*u->getOwner());
              if (o->isBeforeInBlock(first))
                first = o;
            }
            b.setInsertionPoint(first);
            Value full = distutil::allGather(b, p.arg.getLoc(), source, p.numel, group);
            full = distutil::reshape(b, p.arg.getLoc(), full, p.fullType.getShape());
            for (OpOperand *u : *uses)
              u->set(full);
          }
        }
        shardArgument(fn, p.arg, p.fullType, p.chunkType);
      }
    }

    // 5. Updates of the owned chunks.
    auto ret = cast<func::ReturnOp>(top.getTerminator());
    b.setInsertionPoint(clip);
    // The owned chunk of each parameter, made where its update goes (or
    // before LAMB's sums, which read it).
    SmallVector<Value> owned(params.size());
    auto ownedChunk = [&](size_t i) {
      const Param &p = params[i];
      if (!owned[i])
        owned[i] = p.partitioned ? Value(p.arg)
                                 : Value(dist::ChunkOp::create(
                                       b, loc, p.chunkType, distutil::flatten(b, loc, p.arg), group));
      return owned[i];
    };
    for (Param &p : params) {
      // States: the update's state operands, arguments.
      for (OpOperand *o : cast<train::OptimizerUpdateOpInterface>(p.update).getOptStates()) {
        auto a = dyn_cast<BlockArgument>(o->get());
        if (a && fn.getArgAttr(a.getArgNumber(), TrainDialect::kOptState) &&
            !fn.getArgAttr(a.getArgNumber(), distutil::kShardOf))
          shardArgument(fn, a, cast<RankedTensorType>(a.getType()), p.chunkType);
      }
    }
    // LAMB's trust ratios are of whole tensors: each chunk's sums of
    // squares, summed over the ranks in one all-reduce (as the clipping
    // norm's are) before the first update.
    SmallVector<Operation *> deadStats;
    SmallVector<Value> lambStats(params.size());
    {
      SmallVector<Value> partial;
      SmallVector<size_t> of;
      for (auto [i, p] : llvm::enumerate(params)) {
        auto lamb = dyn_cast<train::LambOp>(p.update);
        if (!lamb)
          continue;
        auto old = lamb.getStats().getDefiningOp<train::LambStatsOp>();
        if (!old)
          return lamb.emitOpError("zero: the trust ratio's sums do not come from train.lamb_stats");
        partial.push_back(train::LambStatsOp::create(
            b, loc, old.getType(), ownedChunk(i), newClip.getClipped()[p.gradIndex], lamb.getExpAvg(),
            lamb.getExpAvgSq(), old.getBeta1Attr(), old.getBeta2Attr(), old.getEpsAttr(),
            old.getWeightDecayAttr()));
        of.push_back(i);
        deadStats.push_back(old);
      }
      if (!partial.empty())
        for (auto [k, sum] : llvm::enumerate(distutil::allReduceSums(b, loc, partial, group)))
          lambStats[of[k]] = sum;
    }
    for (auto [i, p] : llvm::enumerate(params)) {
      ++numChunkUpdates;
      numPartitioned += p.partitioned;
      Value chunk = ownedChunk(i);
      Operation *update = b.clone(*p.update);
      update->setOperand(0, chunk);
      update->setOperand(1, newClip.getClipped()[p.gradIndex]);
      if (lambStats[i])
        cast<train::LambOp>(update).getStatsMutable().assign(lambStats[i]);
      for (OpResult r : update->getResults())
        r.setType(p.chunkType);
      Value newParam = update->getResult(0);
      if (!p.partitioned) {
        newParam = distutil::allGather(b, loc, newParam, p.numel, group);
        // The view back to the parameter's shape goes where the step
        // returns it, so nothing reads the gathered value before the end.
        OpBuilder atEnd(ret);
        newParam = distutil::reshape(atEnd, loc, newParam, p.fullType.getShape());
      }
      for (OpOperand &use : llvm::make_early_inc_range(p.update->getResult(0).getUses()))
        use.set(newParam);
      for (unsigned i = 1; i < p.update->getNumResults(); ++i)
        p.update->getResult(i).replaceAllUsesWith(update->getResult(i));
    }

    // 6. Erase the replaced ops (users first) and retype the function.
    for (Param &p : params)
      p.update->erase();
    for (Operation *op : deadStats)
      op->erase();
    if (!clip->use_empty())
      return clip.emitOpError("zero: the unpartitioned gradients are still used");
    clip->erase();
    for (Operation *op : dead)
      op->erase();
    fn.setType(FunctionType::get(ctx, top.getArgumentTypes(), ret.getOperandTypes()));
    return success();
  }
};
} // namespace
} // namespace dsc
