//===- Recompute.cpp - activation checkpointing ---------------------------===//
//
// After autodiff, on a step whose forward and backward ops share one block
// (before gradient-accumulation, or on a pipeline stage before
// pipeline-schedule). A *keep set* of forward values is chosen by the mode;
// every other forward activation the backward pass reads is computed again
// right before its first backward use, from kept values, by clones of the
// forward ops (marked `train.recomputed`, and `train.backward` on a
// pipeline stage), so the original dies after its last forward use and the
// memory plan reuses its bytes. Clones are made once and shared by all
// later backward uses.
//
// Always kept: values that do not depend on the micro-batch (parameters'
// mixed-precision copies, constants), values of ops that read only inputs
// (masks, position ids: pipeline-split's replicable ops), results of ops
// with side effects (pipeline receives), and the values of the last layer
// where its backward starts right after the forward (recomputing it would
// save nothing): a step, or a pipeline's last stage.
//
//   layers     also keeps each layer's input: the values crossing a cut
//              point of passes/Layers.h (the residual stream), every
//              `interval`-th layer; a layer's forward is recomputed just
//              before its backward.
//   selective  also keeps the layer inputs and the outputs of the GEMMs
//              that read a parameter (nn.matmul with a weight): attention
//              scores, softmax, dropout, GELU, layer norm and the
//              elementwise ops are recomputed (Korthikanti et al. 2022).
//              So is the fused nn.attention: it keeps no scores, but its
//              output (the attention projection's input, which Megatron's
//              selective keeps) is recomputed as the unfused chain's is,
//              so a fused plan never keeps more than the unfused one.
//
// Every nn op is a pure function of its operands (dropout's mask of its
// counter-based key), so the clones compute the same bits: training with
// and without recompute is bitwise identical.
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
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace dsc {
#define GEN_PASS_DEF_RECOMPUTE
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {
using train::TrainDialect;

/// Op attribute on a recomputed clone: the layer it belongs to.
constexpr llvm::StringLiteral kRecomputed = TrainDialect::kRecomputed;

struct Recompute : impl::RecomputeBase<Recompute> {
  using Base::Base;
  int64_t maxLayers = 0; // layers of the largest step function

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (interval < 1 || checkpoints < 0 || limit < 0) {
      module.emitError("recompute: interval must be at least 1, checkpoints and limit at "
                       "least 0, got ")
          << (int64_t)interval << ", " << (int64_t)checkpoints << " and " << (int64_t)limit;
      return signalPassFailure();
    }
    if (mode == RecomputeMode::None)
      return;
    double flops = 0;
    int64_t ops = 0;
    OpBuilder fb(module.getContext());
    for (auto fn : module.getOps<func::FuncOp>()) {
      double fnFlops = 0;
      int64_t fnOps = 0;
      if (failed(run(fn, fnFlops, fnOps)))
        return signalPassFailure();
      // Per step function (a pipeline stage's own), for the plan.
      fn->setAttr("train.recomputed_ops", fb.getI64IntegerAttr(fnOps));
      fn->setAttr("train.recomputed_flops", fb.getF64FloatAttr(fnFlops));
      flops += fnFlops;
      ops += fnOps;
    }
    numRecomputed = ops;
    OpBuilder b(module.getContext());
    module->setAttr("train.recompute_layers", b.getI64IntegerAttr(maxLayers));
    module->setAttr("train.recompute",
                    b.getDictionaryAttr({b.getNamedAttr("mode", b.getStringAttr(recomputeModeName(mode))),
                                         b.getNamedAttr("ops", b.getI64IntegerAttr(ops)),
                                         b.getNamedAttr("flops", b.getF64FloatAttr(flops))}));
  }

  LogicalResult run(func::FuncOp fn, double &flops, int64_t &count) {
    if (!distutil::isDifferentiated(fn))
      return success();
    Block &body = fn.getBody().front();
    for (Operation &op : body)
      if (op.getNumRegions())
        return op.emitOpError("recompute: runs after autodiff and before "
                              "gradient-accumulation / pipeline-schedule (no regions yet)");
    auto ret = cast<func::ReturnOp>(body.getTerminator());

    // The forward ops: up to the first op marked train.backward (a
    // pipeline stage), else up to the loss.
    bool pipelined = false;
    for (Operation &op : body)
      pipelined |= op.hasAttr(TrainDialect::kBackward);
    Operation *lossDef = nullptr;
    for (unsigned i = 0; i < fn.getNumResults(); ++i)
      if (fn.getResultAttr(i, TrainDialect::kLoss))
        lossDef = ret.getOperand(i).getDefiningOp();
    SmallVector<Operation *> forward;
    llvm::DenseSet<Operation *> isForward;
    for (Operation &op : body.without_terminator()) {
      if (pipelined ? op.hasAttr(TrainDialect::kBackward) : false)
        break;
      forward.push_back(&op);
      isForward.insert(&op);
      if (!pipelined && &op == lossDef)
        break;
    }
    if (forward.empty())
      return success();
    Operation *firstBackward = forward.back()->getNextNode();

    auto isArg = [&](Value v, StringRef role) {
      auto a = dyn_cast<BlockArgument>(v);
      return a && a.getOwner() == &body && fn.getArgAttr(a.getArgNumber(), role);
    };
    auto isInput = [&](Value v) { return isArg(v, TrainDialect::kInput); };
    auto isParam = [&](Value v) { return isArg(v, TrainDialect::kParam); };
    // Fixed: a function of parameters, buffers and constants only (not of
    // the micro-batch): the same in every micro-batch (mixed precision's
    // parameter copies).
    FixedOps fixedOps = findFixed(forward, isInput, isParam);
    llvm::DenseSet<Operation *> &fixed = fixedOps.ops;
    llvm::DenseSet<Value> &fromParam = fixedOps.fromParam;
    // The layers as pipeline-split finds them, looking through the fixed
    // copies: an op reading a parameter's bf16 copy reads the parameter,
    // and the copies are not activations.
    auto usesParam = [&](Operation *op) {
      return llvm::any_of(op->getOperands(),
                          [&](Value v) { return isParam(v) || fromParam.count(v); });
    };
    LayerSplit cut = findLayers(forward, isInput, usesParam,
                                [&](Operation *op) { return fixed.contains(op); });
    llvm::DenseMap<Operation *, unsigned> layerOf;
    for (auto [l, layer] : llvm::enumerate(cut.layers))
      for (unsigned k = layer.first; k <= layer.last; ++k)
        layerOf[cut.ops[k]] = l;
    unsigned lastLayer = cut.layers.empty() ? 0 : cut.layers.size() - 1;
    // The last layer's values are kept where its backward follows its
    // forward: a step, or the last pipeline stage. On an earlier stage,
    // 1F1B runs P - s - 1 other micro-batches' forwards in between, so its
    // last layer is recomputed like the others.
    bool keepLastLayer = true;
    if (pipelined)
      if (auto stage = fn->getAttrOfType<IntegerAttr>(distutil::kStage))
        if (auto pp = fn->getParentOfType<ModuleOp>()->getAttrOfType<IntegerAttr>(distutil::kPp))
          keepLastLayer = stage.getInt() + 1 >= pp.getInt();
    maxLayers = std::max<int64_t>(maxLayers, int64_t(cut.layers.size()));
    // number_checkpoints: that many kept layer inputs, evenly spread.
    int64_t every = interval;
    if (checkpoints > 0)
      every = std::max<int64_t>(1, (int64_t(cut.layers.size()) + checkpoints - 1) / checkpoints);

    // The keep set.
    llvm::DenseSet<Value> keep;
    for (Operation *op : forward) {
      bool isFixed = fixed.contains(op);
      bool clonable = isPure(op) && op->getNumRegions() == 0;
      auto it = layerOf.find(op);
      bool inLastLayer = it == layerOf.end() || (keepLastLayer && it->second == lastLayer) ||
                         (limit > 0 && int64_t(it->second) >= limit);
      if (isFixed || !clonable || inLastLayer) {
        for (Value r : op->getResults())
          keep.insert(r);
        continue;
      }
      unsigned layer = it->second;
      for (Value r : op->getResults()) {
        // A layer input: read by a later layer's forward op.
        unsigned reach = layer;
        for (Operation *user : r.getUsers())
          if (auto u = layerOf.find(user); u != layerOf.end() && isForward.contains(user))
            reach = std::max(reach, u->second);
        bool crosses = false;
        for (unsigned b = layer + 1; b <= reach && !crosses; ++b)
          crosses = b % every == 0 || b == lastLayer;
        if (crosses)
          keep.insert(r);
      }
      if (mode == RecomputeMode::Selective && isa<nn::MatmulOp, nn::MatmulEpilogueOp>(op)) {
        // A GEMM with a weight (or its mixed-precision copy), with its
        // epilogue's bias and residual if it has one.
        bool weighted = usesParam(op);
        if (weighted)
          for (Value r : op->getResults())
            keep.insert(r);
      }
    }

    // Recompute what the backward pass reads and was not kept.
    auto needs = [&](Value v) {
      Operation *def = v.getDefiningOp();
      return def && isForward.contains(def) && !keep.contains(v);
    };
    IRMapping clones;
    OpBuilder b(fn.getContext());
    std::function<Value(Value)> recompute = [&](Value v) -> Value {
      if (Value c = clones.lookupOrNull(v))
        return c;
      Operation *def = v.getDefiningOp();
      for (Value operand : def->getOperands())
        if (needs(operand))
          recompute(operand);
      Operation *clone = b.clone(*def, clones);
      clone->setAttr(kRecomputed, b.getI64IntegerAttr(layerOf.lookup(def)));
      if (pipelined)
        clone->setAttr(TrainDialect::kBackward, b.getUnitAttr());
      if (auto cost = dyn_cast<nn::CostOpInterface>(def))
        flops += std::max<double>(cost.getFlops(), 0);
      ++count;
      return clones.lookup(v);
    };
    SmallVector<Operation *> backward;
    for (Operation *op = firstBackward; op && op != ret.getOperation(); op = op->getNextNode())
      backward.push_back(op);
    for (Operation *op : backward)
      for (OpOperand &use : op->getOpOperands())
        if (needs(use.get())) {
          b.setInsertionPoint(op);
          use.set(recompute(use.get()));
        }
    return success();
  }
};

} // namespace
} // namespace dsc
