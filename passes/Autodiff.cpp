//===- Autodiff.cpp - reverse-mode differentiation of the loss -----------===//
//
// The backward pass is built in the same function, after the forward ops:
// walking the forward ops in reverse, each op with a gradient on any of its
// results emits its rule; gradients of a value used several times are
// summed as they arrive (those of slices tiling a value, concatenated). The
// function then returns the loss followed by one gradient per parameter
// (argument order).
//
// A pipeline stage (pipeline-split) also has sinks and sources other than
// the loss: every float `dist.send` of an activation gets its gradient back
// by a `dist.recv` from the same peer (tag + 1), and every float
// `dist.recv` sends its gradient back (zeros when it has none, so the peer
// never waits forever). The ops of the backward pass are marked
// `train.backward` in a pipeline stage, which the pipeline schedule reads.
//
//===----------------------------------------------------------------------===//
#include "passes/DistUtils.h"
#include "passes/LossScale.h"
#include "passes/Passes.h"

#include "dialects/dist/DistDialect.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <functional>

namespace dsc {
#define GEN_PASS_DEF_AUTODIFF
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {
using train::TrainDialect;

/// The index of the `train.loss` result, if any.
std::optional<unsigned> lossResult(func::FuncOp fn) {
  for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i)
    if (fn.getResultAttr(i, TrainDialect::kLoss))
      return i;
  return std::nullopt;
}

/// The gradient `g` of a value whose uses are slices tiling it along one
/// axis (a fused QKV projection split into query, key and value) is, as
/// built, the sum of the slices' padded gradients: a slice_grad per slice
/// (a zero fill and a copy of the whole value each) and an nn.add per
/// pair. Their concatenation along the axis is the same tensor in one
/// pass; returns it, or `g` when the sum is not such a tiling. (A sum of
/// padded parts also turns a -0 of a part into +0: the concatenation
/// keeps the part's sign, the only difference.)
Value concatTiles(Value g, OpBuilder &b) {
  SmallVector<nn::SliceGradOp> tiles;
  // The add tree under g (its inner sums read only by their parent).
  std::function<bool(Value, bool)> collect = [&](Value v, bool root) {
    if (auto add = v.getDefiningOp<nn::AddOp>(); add && (root || v.hasOneUse()))
      return add.getLhs().getType() == add.getType() &&
             add.getRhs().getType() == add.getType() && collect(add.getLhs(), false) &&
             collect(add.getRhs(), false);
    auto tile = v.getDefiningOp<nn::SliceGradOp>();
    if (!tile || root || !v.hasOneUse())
      return false;
    tiles.push_back(tile);
    return true;
  };
  if (!g || !collect(g, true) || tiles.size() < 2)
    return g;
  ArrayRef<int64_t> full = cast<RankedTensorType>(g.getType()).getShape();
  const int64_t rank = int64_t(full.size());
  // The one axis the tiles cut: every other dimension whole, stride 1.
  int64_t axis = -1;
  for (nn::SliceGradOp t : tiles)
    for (int64_t d = 0; d < rank; ++d) {
      if (t.getStride()[d] != 1)
        return g;
      if (t.getStart()[d] == 0 && t.getLimit()[d] == full[d])
        continue;
      if (axis >= 0 && axis != d)
        return g;
      axis = d;
    }
  if (axis < 0)
    return g;
  llvm::sort(tiles, [&](nn::SliceGradOp x, nn::SliceGradOp y) {
    return x.getStart()[axis] < y.getStart()[axis];
  });
  int64_t next = 0;
  SmallVector<Value> parts;
  for (nn::SliceGradOp t : tiles) {
    if (t.getStart()[axis] != next)
      return g;
    next = t.getLimit()[axis];
    parts.push_back(t.getGrad());
  }
  if (next != full[axis])
    return g;
  return nn::ConcatOp::create(b, g.getLoc(), parts, b.getI64IntegerAttr(axis)).getResult();
}

struct Autodiff : impl::AutodiffBase<Autodiff> {
  void runOnOperation() override {
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (lossResult(fn) && failed(differentiate(fn)))
        return signalPassFailure();
  }

  LogicalResult differentiate(func::FuncOp fn) {
    for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i)
      if (fn.getResultAttr(i, TrainDialect::kGrad))
        return fn.emitError("function is already differentiated");
    Block &body = fn.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Value loss = ret.getOperand(*lossResult(fn));

    llvm::DenseMap<Value, Value> grads;
    OpBuilder b(ret);
    auto addGrad = [&](Value v, Value g) {
      Value &slot = grads[v];
      slot = slot ? nn::AddOp::create(b, g.getLoc(), slot, g).getResult() : g;
    };
    auto lossType = cast<RankedTensorType>(loss.getType());
    if (scalesLoss(getOperation())) {
      // fp16: the gradients are those of loss x scale (the seed is the
      // scale), so small ones survive the fp16 backward pass.
      if (!lossType.getElementType().isF32() || lossType.getRank() != 0)
        return fn.emitError("autodiff: loss scaling needs an f32 scalar loss, got ") << lossType;
      FailureOr<Value> scale = lossScaleArgument(fn);
      if (failed(scale))
        return failure();
      addGrad(loss, *scale);
    } else {
      addGrad(loss, arith::ConstantOp::create(
                        b, loss.getLoc(),
                        DenseElementsAttr::get(lossType, b.getFloatAttr(
                                                             lossType.getElementType(), 1.0))));
    }

    SmallVector<Operation *> forward;
    for (Operation &op : body.without_terminator())
      forward.push_back(&op);
    unsigned before = body.getOperations().size();
    Operation *lastForward = forward.empty() ? nullptr : forward.back();
    auto isFloat = [](Value v) {
      return isa<FloatType>(cast<RankedTensorType>(v.getType()).getElementType());
    };
    for (Operation *op : llvm::reverse(forward)) {
      // Pipeline boundaries (see the file comment).
      if (auto send = dyn_cast<dist::SendOp>(op)) {
        if (!isFloat(send.getInput()))
          continue;
        Location loc = send.getLoc();
        auto recv = dist::RecvOp::create(b, loc, send.getInput().getType(), send.getGroup(),
                                         send.getPeer(), send.getTag() + 1);
        auto wait = dist::WaitOp::create(b, loc, recv->getResults());
        addGrad(send.getInput(), wait.getResult(0));
        continue;
      }
      if (auto recv = dyn_cast<dist::RecvOp>(op)) {
        if (!isFloat(recv.getResult()))
          continue;
        Value g = grads.lookup(recv.getResult());
        Location loc = recv.getLoc();
        if (!g) {
          auto type = cast<RankedTensorType>(recv.getType());
          g = arith::ConstantOp::create(
              b, loc, DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), 0.0)));
        }
        auto send = dist::SendOp::create(b, loc, g, recv.getGroup(), recv.getPeer(),
                                         recv.getTag() + 1);
        dist::WaitOp::create(b, loc, send->getResults());
        continue;
      }
      if (auto wait = dyn_cast<dist::WaitOp>(op)) {
        // A wait hands its operands through.
        for (auto [in, out] : llvm::zip(wait.getInputs(), wait.getResults()))
          if (Value g = grads.lookup(out))
            addGrad(in, g);
        continue;
      }
      SmallVector<Value> resultGrads;
      bool any = false;
      for (Value r : op->getResults()) {
        // Every use of r came later: its gradient is whole here.
        if (Value g = grads.lookup(r))
          grads[r] = concatTiles(g, b);
        resultGrads.push_back(grads.lookup(r));
        any |= static_cast<bool>(resultGrads.back());
      }
      if (!any || op->hasTrait<OpTrait::ConstantLike>())
        continue;
      auto rule = dyn_cast<nn::GradientOpInterface>(op);
      if (!rule)
        return op->emitOpError("is on the path to the loss but has no gradient rule");
      SmallVector<Value> operandGrads;
      if (failed(rule.buildGradients(b, resultGrads, operandGrads)))
        return failure();
      for (auto [i, g] : llvm::enumerate(operandGrads))
        if (g && rule.isDifferentiableOperand(i))
          addGrad(op->getOperand(i), g);
    }
    // A parameter's gradient is whole now too (before the marks below).
    for (BlockArgument arg : fn.getArguments())
      if (fn.getArgAttr(arg.getArgNumber(), TrainDialect::kParam))
        if (Value g = grads.lookup(arg))
          grads[arg] = concatTiles(g, b);
    numGradientOps += body.getOperations().size() - before;
    if (fn->hasAttr(distutil::kStage))
      for (Operation *op = lastForward ? lastForward->getNextNode() : &body.front(); op != ret;
           op = op->getNextNode())
        op->setAttr(TrainDialect::kBackward, b.getUnitAttr());

    // Results: the original ones, then a gradient per parameter.
    SmallVector<Value> results(ret.getOperands());
    SmallVector<std::pair<unsigned, StringAttr>> added;
    for (BlockArgument arg : fn.getArguments()) {
      auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), TrainDialect::kParam);
      if (!name)
        continue;
      Value g = grads.lookup(arg);
      if (!g)
        return fn.emitError("the loss does not depend on parameter '")
               << name.getValue() << "'";
      added.push_back({(unsigned)results.size(), name});
      results.push_back(g);
    }
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    SmallVector<Type> types;
    for (Value v : results)
      types.push_back(v.getType());
    SmallVector<DictionaryAttr> resAttrs;
    for (unsigned i = 0; i < fn.getNumResults(); ++i)
      resAttrs.push_back(fn.getResultAttrDict(i));
    fn.setType(FunctionType::get(fn.getContext(), fn.getArgumentTypes(), types));
    for (unsigned i = 0; i < resAttrs.size(); ++i)
      fn.setResultAttrs(i, resAttrs[i]);
    for (auto [index, name] : added)
      fn.setResultAttr(index, TrainDialect::kGrad, name);

    // Gradient rules build every operand's gradient; drop the unused ones.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (isOpTriviallyDead(&op))
        op.erase();
    return success();
  }
};
} // namespace
} // namespace dsc
