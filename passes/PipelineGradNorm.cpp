//===- PipelineGradNorm.cpp - the gradient norm over all pipeline stages -===//
//
// Each stage holds the gradients of its own parameters, so its
// train.clip_grad_norm sees a part of the model. The norm becomes global:
//   * without sum_sq (no ZeRO): train.sum_sq of the stage's gradients;
//   * with sum_sq (ZeRO: already summed over the dp group): that sum;
// then `dist.all_reduce sum` over the pp group feeds the clipping. A
// parameter held by several stages counts once: its copies (dist.tied_copy)
// are left out of the sum.
//
//===----------------------------------------------------------------------===//
#include "passes/DistUtils.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dsc {
#define GEN_PASS_DEF_PIPELINEGRADNORM
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

struct PipelineGradNorm : impl::PipelineGradNormBase<PipelineGradNorm> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto pp = module->getAttrOfType<IntegerAttr>(distutil::kPp);
    if (!pp) {
      module.emitError("pipeline-grad-norm: no dist.pp on the module (run pipeline-split first)");
      return signalPassFailure();
    }
    auto group = dist::GroupAttr::get(module.getContext(), dist::Axis::pp, pp.getInt());
    for (auto fn : module.getOps<func::FuncOp>())
      if (fn->hasAttr(distutil::kStage) && failed(run(fn, group)))
        return signalPassFailure();
  }

  /// Whether clipped gradient `i` belongs to a dist.tied_copy parameter:
  /// its update (train.adam / train.sgd) reads such an argument.
  static bool isTiedCopy(func::FuncOp fn, Value clipped) {
    for (Operation *user : clipped.getUsers())
      if (isa<train::OptimizerUpdateOpInterface>(user))
        if (auto a = dyn_cast<BlockArgument>(user->getOperand(0)))
          return static_cast<bool>(fn.getArgAttr(a.getArgNumber(), distutil::kTiedCopy));
    return false;
  }

  LogicalResult run(func::FuncOp fn, dist::GroupAttr group) {
    auto clips = llvm::to_vector(fn.getBody().front().getOps<train::ClipGradNormOp>());
    if (clips.empty())
      return success();
    if (clips.size() > 1)
      return clips[1].emitOpError("pipeline-grad-norm: one gradient clipping per step expected");
    train::ClipGradNormOp clip = clips[0];
    OpBuilder b(clip);
    Location loc = clip.getLoc();
    if (Value sumSq = clip.getSumSq()) {
      if (auto ar = sumSq.getDefiningOp<dist::WaitOp>())
        if (auto c = dyn_cast_or_null<dist::AllReduceOp>(ar.getCollective()))
          if (c.getGroup().getAxis() == dist::Axis::pp)
            return clip.emitOpError("pipeline-grad-norm: the norm is already global");
      clip.getSumSqMutable().assign(
          distutil::allReduce(b, loc, sumSq, group, dist::ReduceKind::sum));
      return success();
    }
    SmallVector<Value> own;
    for (auto [g, c] : llvm::zip(clip.getGrads(), clip.getClipped()))
      if (!isTiedCopy(fn, c))
        own.push_back(g);
    Value sq = distutil::sumOfSquares(b, loc, own);
    sq = distutil::allReduce(b, loc, sq, group, dist::ReduceKind::sum);
    SmallVector<Type> types(clip.getClipped().getTypes());
    types.push_back(clip.getNorm().getType());
    auto global = train::ClipGradNormOp::create(b, loc, types, clip.getGrads(), sq,
                                                clip.getLossScale(), clip.getMaxNormAttr());
    clip->replaceAllUsesWith(global->getResults());
    clip->erase();
    return success();
  }
};
} // namespace
} // namespace dsc
