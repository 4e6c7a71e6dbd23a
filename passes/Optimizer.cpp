//===- Optimizer.cpp - parameter updates, clipping and the lr schedule ---===//
//
// Input: a step returning the loss and one `train.grad` per parameter.
// Output: the same step returning, in order, the updated parameters
// (`train.updated`), the updated optimizer states (`train.opt_state`), the
// loss, the global gradient norm and the learning rate. The optimizer
// states and the step counter become arguments, so the step is a pure
// function the runtime calls with the states in place.
//
//===----------------------------------------------------------------------===//
#include "passes/LossScale.h"
#include "passes/Passes.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace dsc {
#define GEN_PASS_DEF_OPTIMIZER
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {
using train::TrainDialect;

struct Optimizer : impl::OptimizerBase<Optimizer> {
  using Base::Base;

  void runOnOperation() override {
    std::string kind = StringRef(type).lower();
    if (kind != "adam" && kind != "adamw" && kind != "sgd") {
      getOperation().emitError("optimizer: unknown type '")
          << type.getValue() << "' (expected adam, adamw or sgd)";
      return signalPassFailure();
    }
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (failed(rewrite(fn, kind)))
        return signalPassFailure();
  }

  FailureOr<DictionaryAttr> buildScheduleParams(OpBuilder &b) {
    SmallVector<NamedAttribute> params;
    params.push_back(b.getNamedAttr("lr", b.getF64FloatAttr(lr)));
    for (const std::string &p : scheduleParams) {
      auto [name, value] = StringRef(p).split(':');
      double v;
      if (name.empty() || value.trim().getAsDouble(v)) {
        getOperation().emitError("optimizer: schedule parameter '")
            << p << "' is not name:number";
        return failure();
      }
      params.push_back(b.getNamedAttr(name, b.getF64FloatAttr(v)));
    }
    return b.getDictionaryAttr(params);
  }

  LogicalResult rewrite(func::FuncOp fn, StringRef kind) {
    SmallVector<unsigned> gradResults;
    std::optional<unsigned> lossIndex;
    for (unsigned i = 0; i < fn.getNumResults(); ++i) {
      if (fn.getResultAttr(i, TrainDialect::kGrad))
        gradResults.push_back(i);
      if (fn.getResultAttr(i, TrainDialect::kLoss))
        lossIndex = i;
    }
    if (gradResults.empty())
      return success();
    if (!lossIndex)
      return fn.emitError("optimizer: a differentiated step needs its train.loss result");

    Block &body = fn.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    MLIRContext *ctx = fn.getContext();
    OpBuilder b(ctx);
    Location loc = fn.getLoc();

    // Map each gradient to its parameter argument by name.
    llvm::StringMap<BlockArgument> params;
    for (BlockArgument arg : fn.getArguments())
      if (auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), TrainDialect::kParam))
        params[name.getValue()] = arg;
    struct Update {
      BlockArgument param;
      Value grad;
      StringAttr name;
      SmallVector<Value> states;       // state arguments
      SmallVector<StringAttr> stateNames;
    };
    SmallVector<Update> updates;
    for (unsigned i : gradResults) {
      auto name = fn.getResultAttrOfType<StringAttr>(i, TrainDialect::kGrad);
      auto it = params.find(name.getValue());
      if (it == params.end())
        return fn.emitError("optimizer: gradient of unknown parameter '")
               << name.getValue() << "'";
      updates.push_back({it->second, ret.getOperand(i), name, {}, {}});
    }

    // New arguments: one or two states per parameter, then the step.
    SmallVector<StringRef> stateNames;
    if (kind == "sgd") {
      if (momentum > 0.0)
        stateNames.push_back("momentum_buffer");
    } else {
      stateNames = {"exp_avg", "exp_avg_sq"};
    }
    for (Update &u : updates) {
      for (StringRef s : stateNames) {
        unsigned index = fn.getNumArguments();
        StringAttr stateName = b.getStringAttr(u.name.getValue() + "/" + s);
        if (failed(fn.insertArgument(
                index, u.param.getType(),
                b.getDictionaryAttr(b.getNamedAttr(TrainDialect::kOptState, stateName)), loc)))
          return failure();
        u.states.push_back(fn.getArgument(index));
        u.stateNames.push_back(stateName);
      }
    }
    auto stepType = RankedTensorType::get({}, b.getI64Type());
    unsigned stepIndex = fn.getNumArguments();
    if (failed(fn.insertArgument(stepIndex, stepType,
                                 b.getDictionaryAttr(b.getNamedAttr(
                                     TrainDialect::kStep, b.getUnitAttr())),
                                 loc)))
      return failure();
    Value step = fn.getArgument(stepIndex);

    // The learning rate first: it depends only on the step.
    b.setInsertionPointToStart(&body);
    auto sched = buildScheduleParams(b);
    if (failed(sched))
      return failure();
    Value lrValue = train::LrScheduleOp::create(b, loc, RankedTensorType::get({}, b.getF32Type()), step, b.getStringAttr(schedule), *sched);

    b.setInsertionPoint(ret);
    SmallVector<Value> grads;
    for (Update &u : updates)
      grads.push_back(u.grad);
    // Without clipping (clip = 0) the op passes the gradients through and
    // only computes the norm for the metrics, as DeepSpeed reports it.
    Value lossScale;
    if (scalesLoss(fn->getParentOfType<ModuleOp>())) {
      FailureOr<Value> scale = lossScaleArgument(fn);
      if (failed(scale))
        return failure();
      lossScale = *scale;
    }
    auto clipOp = train::ClipGradNormOp::create(b, loc, grads, lossScale,
                                                std::max(0.0, (double)clip));
    for (auto [i, g] : llvm::enumerate(clipOp.getClipped()))
      grads[i] = g;
    Value norm = clipOp.getNorm();

    SmallVector<Value> newParams, newStates;
    SmallVector<StringAttr> newStateNames;
    for (auto [i, u] : llvm::enumerate(updates)) {
      Value p = u.param;
      llvm::append_range(newStateNames, u.stateNames);
      if (kind == "sgd") {
        Value buffer = u.states.empty() ? Value() : u.states[0];
        auto op = train::SgdOp::create(
            b, loc, p.getType(), buffer ? buffer.getType() : Type(), p, grads[i], lrValue,
            buffer, b.getF64FloatAttr(momentum), b.getF64FloatAttr(dampening),
            b.getF64FloatAttr(weightDecay), nesterov ? b.getUnitAttr() : UnitAttr());
        newParams.push_back(op.getNewParam());
        if (buffer)
          newStates.push_back(op.getNewMomentumBuffer());
      } else {
        Type t = p.getType();
        auto op = train::AdamOp::create(
            b, loc, t, t, t, p, grads[i], u.states[0], u.states[1], lrValue, step,
            b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps),
            b.getF64FloatAttr(weightDecay), kind == "adamw" ? b.getUnitAttr() : UnitAttr(),
            b.getBoolAttr(biasCorrection));
        newParams.push_back(op.getNewParam());
        newStates.append({op.getNewExpAvg(), op.getNewExpAvgSq()});
      }
    }

    // Results: updated params, updated states, loss, grad norm, lr.
    SmallVector<Value> results(newParams);
    llvm::append_range(results, newStates);
    Value loss = ret.getOperand(*lossIndex);
    results.append({loss, norm, lrValue});
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    SmallVector<Type> types;
    for (Value v : results)
      types.push_back(v.getType());
    fn.setType(FunctionType::get(ctx, fn.getArgumentTypes(), types));
    fn.setAllResultAttrs(ArrayRef<DictionaryAttr>{});
    unsigned r = 0;
    for (Update &u : updates)
      fn.setResultAttr(r++, TrainDialect::kUpdated, u.name);
    for (StringAttr name : newStateNames)
      fn.setResultAttr(r++, TrainDialect::kOptState, name);
    fn.setResultAttr(r++, TrainDialect::kLoss, b.getUnitAttr());
    fn.setResultAttr(r++, TrainDialect::kGradNorm, b.getUnitAttr());
    fn.setResultAttr(r++, TrainDialect::kLr, b.getUnitAttr());
    return success();
  }
};
} // namespace
} // namespace dsc
