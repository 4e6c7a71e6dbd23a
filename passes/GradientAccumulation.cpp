//===- GradientAccumulation.cpp - micro-batches per optimizer step -------===//
//
// Moves the differentiated step into `train.accumulate steps`. The body
// yields the loss and the gradients of one micro-batch; the results are
// their sums, which are scaled by 1/steps. Summing first and scaling once
// costs one pass over the gradients per step instead of one per
// micro-batch; in float32 the difference to DeepSpeed's per-micro-batch
// `loss / gas` is rounding only.
//
//===----------------------------------------------------------------------===//
#include "passes/DistUtils.h"
#include "passes/Passes.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace dsc {
#define GEN_PASS_DEF_GRADIENTACCUMULATION
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {
using train::TrainDialect;

struct GradientAccumulation
    : impl::GradientAccumulationBase<GradientAccumulation> {
  using Base::Base;

  void runOnOperation() override {
    if (steps < 1) {
      getOperation().emitError("gradient-accumulation: steps must be at least 1, got ")
          << (int64_t)steps;
      return signalPassFailure();
    }
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (failed(wrap(fn)))
        return signalPassFailure();
  }

  LogicalResult wrap(func::FuncOp fn) {
    if (!distutil::isDifferentiated(fn))
      return success();
    Block &body = fn.getBody().front();
    if (!body.getOps<train::AccumulateOp>().empty())
      return fn.emitError("gradients are already accumulated");
    auto ret = cast<func::ReturnOp>(body.getTerminator());

    OpBuilder b(ret);
    Location loc = fn.getLoc();
    auto acc = train::AccumulateOp::create(b, loc, ret.getOperandTypes(), steps);
    for (unsigned i = 0; i < fn.getNumResults(); ++i)
      if (fn.getResultAttr(i, TrainDialect::kGrad))
        ++numAccumulated;
    Block *inner = b.createBlock(&acc.getBody(), {}, {b.getIndexType()}, {loc});
    // Everything but the terminator and the new op moves into the body.
    inner->getOperations().splice(inner->end(), body.getOperations(),
                                  body.begin(), Block::iterator(acc));
    b.setInsertionPointToEnd(inner);
    train::YieldOp::create(b, loc, ret.getOperands());
    // A parameter's low-precision copy (mixed-precision) is the same in
    // every micro-batch: made once per step, before them (after the
    // previous step's update).
    // (Inputs are not: each micro-batch loads its own.)
    auto isWeight = [&](Value v) {
      auto arg = dyn_cast<BlockArgument>(v);
      return arg && arg.getOwner() == &body &&
             (fn.getArgAttr(arg.getArgNumber(), train::TrainDialect::kParam) ||
              fn.getArgAttr(arg.getArgNumber(), train::TrainDialect::kBuffer));
    };
    for (Operation &op : llvm::make_early_inc_range(*inner))
      if (auto c = dyn_cast<nn::CastOp>(op); c && isWeight(c.getInput()))
        c->moveBefore(acc);

    // grad_accum_dtype bf16/fp16: each gradient is summed in that type
    // (the gradient of the parameter's 16-bit copy before its cast back, or
    // the gradient cast down) and cast to fp32 once after the micro-batches.
    Type accum;
    if (accumDtype != FloatKind::FP32)
      accum = floatKindType(b.getContext(), accumDtype);
    SmallVector<unsigned> narrowed;
    SmallVector<nn::CastOp> deadCasts; // the casts back, once nothing reads them
    if (accum) {
      auto yield = cast<train::YieldOp>(inner->getTerminator());
      OpBuilder yb(yield);
      for (unsigned i = 0; i < fn.getNumResults(); ++i) {
        if (!fn.getResultAttr(i, TrainDialect::kGrad))
          continue;
        Value g = yield.getOperand(i);
        auto type = cast<RankedTensorType>(g.getType());
        if (!type.getElementType().isF32())
          continue;
        Value low;
        auto c = g.getDefiningOp<nn::CastOp>();
        if (c && cast<RankedTensorType>(c.getInput().getType()).getElementType() == accum)
          low = c.getInput();
        else
          low = nn::CastOp::create(yb, g.getLoc(), type.clone(accum), g);
        yield->setOperand(i, low);
        if (c)
          deadCasts.push_back(c);
        acc.getResult(i).setType(type.clone(accum));
        narrowed.push_back(i);
      }
    }

    b.setInsertionPoint(ret);
    SmallVector<Value> results(acc.getResults());
    for (unsigned i : narrowed)
      results[i] = nn::CastOp::create(
          b, loc, cast<RankedTensorType>(results[i].getType()).clone(b.getF32Type()), results[i]);
    if (steps > 1)
      for (Value &v : results) {
        auto type = cast<RankedTensorType>(v.getType());
        auto scalarType = RankedTensorType::get({}, type.getElementType());
        Value inv = arith::ConstantOp::create(
            b, loc,
            DenseElementsAttr::get(scalarType,
                                   b.getFloatAttr(type.getElementType(), 1.0 / steps)));
        v = nn::MulOp::create(b, loc, v, inv);
      }
    ret->setOperands(results);
    for (nn::CastOp c : deadCasts)
      if (c->use_empty())
        c->erase();
    return success();
  }
};
} // namespace
} // namespace dsc
