//===- DataParallel.cpp - average gradients over the ranks (ZeRO 0) ------===//
//
// Every gradient that reaches clipping is all-reduced (avg) once per
// optimizer step. With one micro-batch the boundary is the end of the only
// micro-batch, so the all-reduce goes inside it, right where the backward
// pass yields the gradient, and can overlap the rest of the backward pass.
// With several micro-batches it reduces the sums after the accumulation.
//
//===----------------------------------------------------------------------===//
#include "passes/DistUtils.h"
#include "passes/Passes.h"

#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dsc {
#define GEN_PASS_DEF_DATAPARALLEL
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

struct DataParallel : impl::DataParallelBase<DataParallel> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (dp < 1) {
      module.emitError("data-parallel: dp must be at least 1, got ") << (int64_t)dp;
      return signalPassFailure();
    }
    for (auto fn : module.getOps<func::FuncOp>())
      if (failed(run(fn)))
        return signalPassFailure();
    OpBuilder b(module.getContext());
    module->setAttr(distutil::kDp, b.getI64IntegerAttr(dp));
    module->setAttr(distutil::kZeroStage, b.getI64IntegerAttr(0));
  }

  LogicalResult run(func::FuncOp fn) {
    auto clips = llvm::to_vector(fn.getBody().front().getOps<train::ClipGradNormOp>());
    if (clips.empty())
      return success(); // not a training step
    if (clips.size() > 1)
      return clips[1].emitOpError("data-parallel: one gradient clipping per step expected");
    train::ClipGradNormOp clip = clips[0];
    if (Operation *communicating = distutil::firstCollective(fn))
      return communicating->emitOpError("data-parallel: the step already communicates");
    if (clip.getSumSq())
      return clip.emitOpError("data-parallel: the gradients are already partitioned (zero)");
    auto group = dist::GroupAttr::get(fn.getContext(), dist::Axis::dp, dp);
    Type comm = floatKindType(fn.getContext(), commDtype);
    auto accs = llvm::to_vector(fn.getBody().front().getOps<train::AccumulateOp>());
    train::AccumulateOp acc = accs.empty() ? train::AccumulateOp() : accs[0];
    OpBuilder b(fn.getContext());
    for (OpOperand &operand : clip->getOpOperands()) {
      if (operand.getOperandNumber() >= clip.getGrads().size())
        break;
      ++numReduced;
      Value g = operand.get();
      auto result = dyn_cast<OpResult>(g);
      if (acc && acc.getCount() == 1 && result && result.getOwner() == acc) {
        Operation *yield = acc.getBody().front().getTerminator();
        OpOperand &y = yield->getOpOperand(result.getResultNumber());
        b.setInsertionPointAfterValue(y.get());
        distutil::reduceInto(b, g.getLoc(), y.get(), comm, y, [&](Value v) {
          return distutil::allReduce(b, g.getLoc(), v, group, dist::ReduceKind::avg);
        });
        continue;
      }
      b.setInsertionPointAfterValue(g);
      distutil::reduceInto(b, g.getLoc(), g, comm, operand, [&](Value v) {
        return distutil::allReduce(b, g.getLoc(), v, group, dist::ReduceKind::avg);
      });
    }
    return success();
  }
};
} // namespace
} // namespace dsc
