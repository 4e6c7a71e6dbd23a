//===- PipelineExpand.cpp - a pipeline stage's micro-batches, one by one --===//
//
// Unrolls each train.pipeline (pipeline-schedule's form of a stage's
// micro-batches) into the ops of every item of its schedule: item (phase,
// k) clones the body's ops of that phase for micro-batch k, each marked
// `train.micro` k and `train.phase`; the body's load_batch reads
// micro-batch k. A yielded value is added to its sum right after it is
// computed in the items of its sum phase (the first micro-batch's value is
// the sum), so a gradient dies into its sum at once instead of every
// gradient of a micro-batch living until its backward ends. The op's
// results are then the sums. Sends keep the op's semantics: each one's wait
// moves to before the next send on its channel, the last ones' to the end
// of the stage's items.
//
//===----------------------------------------------------------------------===//
#include "passes/DistUtils.h"
#include "passes/Passes.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace dsc {
#define GEN_PASS_DEF_PIPELINEEXPAND
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {
using train::TrainDialect;

LogicalResult expand(train::PipelineOp pipe) {
  OpBuilder b(pipe);
  Location loc = pipe.getLoc();
  Block &body = pipe.getBody().front();
  Operation *yield = body.getTerminator();
  int64_t M = pipe.getCount();
  ArrayRef<int64_t> sumPhases = pipe.getSumPhases();
  SmallVector<IRMapping> maps(M);
  SmallVector<Value> sums(pipe.getNumResults());
  SmallVector<dist::SendOp> sends;
  auto mark = [&](Operation *op, int64_t k, int64_t phase) {
    op->setAttr(TrainDialect::kMicro, b.getI64IntegerAttr(k));
    op->setAttr(TrainDialect::kPhase, b.getI64IntegerAttr(phase));
  };
  ArrayRef<int64_t> items = pipe.getSchedule();
  for (size_t j = 0; j < items.size(); j += 2) {
    int64_t phase = items[j], k = items[j + 1];
    for (Operation &op : body.without_terminator()) {
      if (train::PipelineOp::phaseOf(&op) != phase)
        continue;
      Operation *c;
      if (auto load = dyn_cast<train::LoadBatchOp>(op)) {
        auto fixed = train::LoadBatchOp::create(b, load.getLoc(), load.getResultTypes(),
                                                b.getI64IntegerAttr(k), Value(),
                                                load.getNamesAttr());
        for (auto [from, to] : llvm::zip(load.getResults(), fixed.getResults()))
          maps[k].map(from, to);
        c = fixed;
      } else {
        c = b.clone(op, maps[k]);
      }
      mark(c, k, phase);
      if (auto send = dyn_cast<dist::SendOp>(c))
        sends.push_back(send);
    }
    // The values summed after this item: added right after each is
    // computed (or after the previous sum, when that comes later).
    OpBuilder::InsertionGuard guard(b);
    for (unsigned i = 0; i < sums.size(); ++i) {
      if (sumPhases[i] != phase)
        continue;
      Value v = maps[k].lookupOrDefault(yield->getOperand(i));
      if (!sums[i]) {
        sums[i] = v;
        continue;
      }
      Operation *after = v.getDefiningOp();
      if (Operation *s = sums[i].getDefiningOp(); s && after && after->isBeforeInBlock(s))
        after = s;
      if (after)
        b.setInsertionPointAfter(after);
      else
        b.setInsertionPoint(pipe);
      auto add = nn::AddOp::create(b, loc, sums[i], v);
      mark(add, k, phase);
      sums[i] = add;
    }
  }
  // Each send completes before the next on its channel, the last ones
  // once the stage's last item is done.
  if (failed(distutil::deferSendWaits(sends, pipe)))
    return failure();
  pipe->replaceAllUsesWith(sums);
  pipe->erase();
  return success();
}

struct PipelineExpand : impl::PipelineExpandBase<PipelineExpand> {
  void runOnOperation() override {
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      auto pipes = llvm::to_vector(fn.getBody().front().getOps<train::PipelineOp>());
      if (pipes.empty())
        continue;
      for (train::PipelineOp pipe : pipes)
        if (failed(expand(pipe)))
          return signalPassFailure();
    }
  }
};
} // namespace
} // namespace dsc
