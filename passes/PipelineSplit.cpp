//===- PipelineSplit.cpp - cut the forward graph into pipeline stages ----===//
//
// Runs on the forward graph (before autodiff), so that each stage is an
// ordinary differentiable function: autodiff gives every `dist.send` and
// `dist.recv` its backward counterpart.
//
//  1. Ops that read only inputs and constants (masks, position ids) are
//     *replicable*: every stage that needs one computes it itself instead of
//     receiving it.
//  2. The other ops, in program order, are cut into *layers* at the points
//     where the fewest activations are live (one, the residual stream, for
//     a transformer); a segment without parameters joins the next one.
//  3. Layers are partitioned into `stages` contiguous groups: equal layer
//     counts (`uniform`), balanced parameter elements (`parameters`) or
//     balanced flops of the ops' cost interface (`cost`), minimizing the
//     largest group.
//  4. Stage s becomes function @<name>_stage<s> (attribute dist.stage = s)
//     with the parameters and buffers it uses and every model input (the
//     data loader feeds all stages alike). A value used on a later stage is
//     sent there once (`dist.send` + `dist.wait` after its definition,
//     `dist.recv` + `dist.wait` before its first use; peer = the stage
//     distance, tag = 2 * channel). Stages before the last return a zero
//     loss. A parameter used on several stages is held by each; those after
//     the first mark it `dist.tied_copy`.
//
//===----------------------------------------------------------------------===//
#include "passes/DistUtils.h"
#include "passes/Layers.h"
#include "passes/Passes.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace dsc {
#define GEN_PASS_DEF_PIPELINESPLIT
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {
using train::TrainDialect;

/// Contiguous partition of `w` into `parts` non-empty groups minimizing the
/// largest group sum; returns the first layer of each group.
SmallVector<unsigned> balance(ArrayRef<double> w, unsigned parts) {
  unsigned n = w.size();
  SmallVector<double> prefix(n + 1, 0);
  for (unsigned i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + w[i];
  const double inf = std::numeric_limits<double>::infinity();
  // best[p][i]: the smallest max over p groups of the first i layers.
  std::vector<std::vector<double>> best(parts + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<unsigned>> cut(parts + 1, std::vector<unsigned>(n + 1, 0));
  best[0][0] = 0;
  for (unsigned p = 1; p <= parts; ++p)
    for (unsigned i = p; i <= n; ++i)
      for (unsigned j = p - 1; j < i; ++j) {
        double v = std::max(best[p - 1][j], prefix[i] - prefix[j]);
        // Ties go to the later cut: earlier stages get fewer layers, which
        // suits 1F1B, where they hold more micro-batches in flight.
        if (v <= best[p][i]) {
          best[p][i] = v;
          cut[p][i] = j;
        }
      }
  SmallVector<unsigned> starts(parts);
  unsigned i = n;
  for (unsigned p = parts; p >= 1; --p) {
    starts[p - 1] = cut[p][i];
    i = cut[p][i];
  }
  return starts;
}

struct PipelineSplit : impl::PipelineSplitBase<PipelineSplit> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (stages < 1) {
      module.emitError("pipeline-split: stages must be at least 1, got ") << (int64_t)stages;
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> steps;
    for (auto fn : module.getOps<func::FuncOp>())
      for (unsigned i = 0; i < fn.getNumResults(); ++i)
        if (fn.getResultAttr(i, TrainDialect::kLoss))
          steps.push_back(fn);
    if (steps.size() != 1) {
      module.emitError("pipeline-split: expected one function with a train.loss result, found ")
          << steps.size();
      return signalPassFailure();
    }
    if (failed(split(module, steps[0])))
      return signalPassFailure();
  }

  LogicalResult split(ModuleOp module, func::FuncOp fn) {
    Block &body = fn.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    if (fn.getNumResults() != 1)
      return fn.emitError("pipeline-split: the step must return only its loss");
    for (Operation &op : body)
      if (op.getNumRegions())
        return op.emitOpError("pipeline-split: ops with regions cannot be split yet");
    if (distutil::firstCollective(fn) || !body.getOps<dist::SendOp>().empty())
      return fn.emitError("pipeline-split: the step already communicates");

    auto isInput = [&](Value v) {
      auto a = dyn_cast<BlockArgument>(v);
      return a && fn.getArgAttr(a.getArgNumber(), TrainDialect::kInput);
    };
    auto isParam = [&](Value v) {
      auto a = dyn_cast<BlockArgument>(v);
      return a && fn.getArgAttr(a.getArgNumber(), TrainDialect::kParam);
    };
    // 1-2. Replicable ops, cut points and layers (passes/Layers.h), looking
    // through the fixed ops (mixed precision's parameter copies, which it
    // places at the top): they are not activations, and each stage gets
    // its own copy of those it reads, as of the replicable ones.
    SmallVector<Operation *> all;
    for (Operation &op : body.without_terminator())
      all.push_back(&op);
    FixedOps fixed = findFixed(all, isInput, isParam);
    auto usesParam = [&](Operation *op) {
      return llvm::any_of(op->getOperands(),
                          [&](Value v) { return isParam(v) || fixed.fromParam.count(v); });
    };
    LayerSplit cut =
        findLayers(all, isInput, usesParam, [&](Operation *op) { return fixed.ops.contains(op); });
    if (cut.ops.empty())
      return fn.emitError("pipeline-split: the loss does not depend on any parameter");
    SmallVector<Operation *> &ops = cut.ops;
    llvm::DenseSet<Operation *> &replicable = cut.replicable;
    llvm::DenseMap<Operation *, unsigned> index;
    for (auto [i, op] : llvm::enumerate(ops))
      index[op] = i;
    SmallVector<Layer> &layers = cut.layers;
    int minWidth = cut.minWidth;
    unsigned n = ops.size();
    if ((int64_t)layers.size() < stages)
      return fn.emitError("pipeline-split: ")
             << (int64_t)stages << " stages but the model has only " << layers.size()
             << " layers to cut between (cut points are where " << minWidth
             << (minWidth == 1 ? " activation is" : " activations are")
             << " live); use fewer stages";

    // 3. Weights and the partition.
    SmallVector<double> weights;
    for (Layer &l : layers) {
      double w = 0;
      llvm::DenseSet<Value> seenParams;
      for (unsigned k = l.first; k <= l.last; ++k) {
        Operation *op = ops[k];
        if (method == PartitionMethod::Uniform) {
          w = 1;
        } else if (method == PartitionMethod::Parameters) {
          for (Value v : op->getOperands()) {
            auto a = dyn_cast<BlockArgument>(v);
            if (a && fn.getArgAttr(a.getArgNumber(), TrainDialect::kParam) &&
                seenParams.insert(v).second)
              w += nn::numElements(v.getType());
          }
        } else {
          w += distutil::opCost(op);
        }
      }
      l.weight = w;
      weights.push_back(w);
    }
    SmallVector<unsigned> starts = balance(weights, stages);
    SmallVector<unsigned> stageOf(n);
    for (unsigned s = 0; s < starts.size(); ++s) {
      unsigned endLayer = s + 1 < starts.size() ? starts[s + 1] : layers.size();
      for (unsigned l = starts[s]; l < endLayer; ++l)
        for (unsigned k = layers[l].first; k <= layers[l].last; ++k)
          stageOf[k] = s;
    }
    Value loss = ret.getOperand(0);
    Operation *lossDef = loss.getDefiningOp();
    if (!lossDef || replicable.contains(lossDef))
      return fn.emitError("pipeline-split: the loss does not depend on any parameter");
    if (stageOf[index[lossDef]] + 1 != (unsigned)stages)
      return lossDef->emitOpError("pipeline-split: the loss must be computed by the last op");

    // 4. The stage functions.
    MLIRContext *ctx = fn.getContext();
    OpBuilder b(ctx);
    auto group = dist::GroupAttr::get(ctx, dist::Axis::pp, stages);
    SmallVector<func::FuncOp> fns;
    SmallVector<IRMapping> maps(stages);
    // Which stages use each argument, directly or through the fixed ops
    // they copy.
    llvm::DenseMap<Value, SmallVector<unsigned>> argStages;
    std::function<void(Value, unsigned)> useIn = [&](Value v, unsigned s) {
      if (isa<BlockArgument>(v)) {
        auto &list = argStages[v];
        if (!llvm::is_contained(list, s))
          list.push_back(s);
        return;
      }
      if (Operation *def = v.getDefiningOp(); def && fixed.ops.contains(def))
        for (Value o : def->getOperands())
          useIn(o, s);
    };
    for (unsigned k = 0; k < n; ++k)
      for (Value v : ops[k]->getOperands())
        useIn(v, stageOf[k]);
    // Replicable ops read inputs only, and every stage has every input.
    int64_t channel = 0;
    for (unsigned s = 0; s < stages; ++s) {
      b.setInsertionPoint(fn);
      SmallVector<Type> argTypes;
      SmallVector<DictionaryAttr> argAttrs;
      SmallVector<BlockArgument> kept;
      for (BlockArgument a : fn.getArguments()) {
        auto it = argStages.find(a);
        bool used = it != argStages.end() && llvm::is_contained(it->second, s);
        if (!isInput(a) && !used)
          continue;
        kept.push_back(a);
        argTypes.push_back(a.getType());
        NamedAttrList attrs(fn.getArgAttrDict(a.getArgNumber()));
        if (used && it->second.front() != s && !isInput(a))
          attrs.set(distutil::kTiedCopy, b.getUnitAttr());
        argAttrs.push_back(attrs.getDictionary(ctx));
      }
      auto stageFn = func::FuncOp::create(
          b, fn.getLoc(), (fn.getName() + "_stage" + Twine(s)).str(),
          FunctionType::get(ctx, argTypes, {loss.getType()}));
      stageFn.setAllArgAttrs(argAttrs);
      stageFn.setResultAttr(0, TrainDialect::kLoss, b.getUnitAttr());
      stageFn->setAttr(distutil::kStage, b.getI64IntegerAttr(s));
      Block *entry = stageFn.addEntryBlock();
      for (auto [a, na] : llvm::zip(kept, entry->getArguments()))
        maps[s].map(a, na);
      fns.push_back(stageFn);
    }

    // Clones `v` (replicable or fixed) into stage s at the builder's point.
    std::function<Value(Value, unsigned)> local = [&](Value v, unsigned s) -> Value {
      if (Value m = maps[s].lookupOrNull(v))
        return m;
      Operation *def = v.getDefiningOp();
      for (Value o : def->getOperands())
        local(o, s);
      Operation *c = b.clone(*def, maps[s]);
      (void)c;
      return maps[s].lookup(v);
    };
    llvm::DenseMap<std::pair<Value, unsigned>, Value> received;
    for (unsigned k = 0; k < n; ++k) {
      Operation *op = ops[k];
      unsigned s = stageOf[k];
      Block &dst = fns[s].getBody().front();
      for (Value v : op->getOperands()) {
        if (maps[s].contains(v))
          continue;
        Operation *def = v.getDefiningOp();
        b.setInsertionPointToEnd(&dst);
        if (!def || replicable.contains(def) || fixed.ops.contains(def)) {
          local(v, s);
          continue;
        }
        unsigned from = stageOf[index[def]];
        int64_t tag = 2 * channel++;
        // Send right after the definition on the producing stage.
        Value produced = maps[from].lookup(v);
        b.setInsertionPointAfterValue(produced);
        auto send = dist::SendOp::create(b, op->getLoc(), produced, group,
                                         (int64_t)s - (int64_t)from, tag);
        dist::WaitOp::create(b, op->getLoc(), send->getResults());
        b.setInsertionPointToEnd(&dst);
        auto recv = dist::RecvOp::create(b, op->getLoc(), v.getType(), group,
                                         (int64_t)from - (int64_t)s, tag);
        auto wait = dist::WaitOp::create(b, op->getLoc(), recv->getResults());
        maps[s].map(v, wait.getResult(0));
      }
      b.setInsertionPointToEnd(&dst);
      b.clone(*op, maps[s]);
    }
    for (unsigned s = 0; s < stages; ++s) {
      b.setInsertionPointToEnd(&fns[s].getBody().front());
      Value l;
      if (s + 1 == (unsigned)stages) {
        l = maps[s].lookup(loss);
      } else {
        auto type = cast<RankedTensorType>(loss.getType());
        l = arith::ConstantOp::create(
            b, fn.getLoc(), DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), 0.0)));
      }
      func::ReturnOp::create(b, ret.getLoc(), l);
    }
    // Layers per stage, for --explain.
    for (unsigned s = 0; s < stages; ++s) {
      unsigned endLayer = s + 1 < starts.size() ? starts[s + 1] : layers.size();
      fns[s]->setAttr("dist.layers", b.getDenseI64ArrayAttr({starts[s], endLayer - 1}));
    }
    module->setAttr(distutil::kPp, b.getI64IntegerAttr(stages));
    module->setAttr("dist.layers", b.getI64IntegerAttr(layers.size()));
    numLayers = layers.size();
    numChannels = channel;
    fn.erase();
    return success();
  }
};
} // namespace
} // namespace dsc
