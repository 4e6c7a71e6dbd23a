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
#include "passes/DistUtils.h"
#include "passes/LossScale.h"
#include "passes/Passes.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
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
    if ((type == OptimizerKind::OneBitAdam || type == OptimizerKind::ZeroOneAdam ||
         type == OptimizerKind::OneBitLamb) &&
        failed(checkOneBitLayout()))
      return signalPassFailure();
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (failed(rewrite(fn, type)))
        return signalPassFailure();
  }

  /// What OnebitAdam composes with so far: fp32, bf16 and fp16 (DeepSpeed's
  /// wrapper: onebit-compression's one flat tensor), data parallelism
  /// without ZeRO (the ZeRO refusal is the config's: unsound), no pipeline
  /// and no tensor parallelism (not built yet). ZeroOneAdam: the same.
  LogicalResult checkOneBitLayout() {
    ModuleOp module = getOperation();
    const bool zeroOne = type == OptimizerKind::ZeroOneAdam;
    const bool lamb = type == OptimizerKind::OneBitLamb;
    auto refuse = [&](const Twine &what) {
      return module.emitError("optimizer: ")
             << (lamb ? "OneBitLamb" : zeroOne ? "ZeroOneAdam" : "OneBitAdam") << " with " << what
             << " is not built yet; dsc's "
             << (lamb ? "1-bit LAMB" : zeroOne ? "0/1 Adam" : "1-bit Adam")
             << " runs data parallelism (ZeRO stage 0), with gradient accumulation, "
                "clipping and lr schedules";
    };
    if (auto pp = module->getAttrOfType<IntegerAttr>(distutil::kPp); pp && pp.getInt() > 1)
      return refuse("a pipeline (pp " + Twine(pp.getInt()) + ")");
    if (auto tp = module->getAttrOfType<IntegerAttr>("dist.tp"); tp && tp.getInt() > 1)
      return refuse("tensor parallelism (tp " + Twine(tp.getInt()) + ")");
    if (freezeStep < 0)
      return module.emitError("optimizer: freeze-step must be non-negative, got ")
             << (int64_t)freezeStep;
    if (zeroOne && (varUpdateScaler < 0 || localStepScaler < 0 || localStepClipper < 1))
      return module.emitError("optimizer: var-update-scaler and local-step-scaler must be "
                              "non-negative and local-step-clipper at least 1");
    return success();
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

  LogicalResult rewrite(func::FuncOp fn, OptimizerKind kind) {
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
    // DeepSpeed's (and torch's) state names, which checkpoints keep.
    SmallVector<StringRef> stateNames;
    switch (kind) {
    case OptimizerKind::SGD:
      if (momentum > 0.0)
        stateNames.push_back("momentum_buffer");
      break;
    case OptimizerKind::Lion:
      stateNames = {"exp_avg"};
      break;
    case OptimizerKind::Adagrad:
      stateNames = {"sum"};
      break;
    case OptimizerKind::Adam:
    case OptimizerKind::AdamW:
    case OptimizerKind::Lamb:
    case OptimizerKind::OneBitAdam:
      stateNames = {"exp_avg", "exp_avg_sq"};
      break;
    case OptimizerKind::ZeroOneAdam:
      // DeepSpeed's names; lrs (the lrs summed since the last sync) is a
      // scalar, the others the parameter's shape.
      stateNames = {"exp_avg", "exp_avg_sq", "momentum_accumulator", "lrs"};
      break;
    case OptimizerKind::OneBitLamb:
      // DeepSpeed's names; the last ones are scalars. Under bf16 / fp16 the
      // wrapper's one flat tensor has one scaling coefficient, 1.
      stateNames = {"exp_avg", "exp_avg_sq", "exp_avg_sq_fresh", "lamb_coeff_freeze",
                    "last_factor"};
      if (!fn->getParentOfType<ModuleOp>()->hasAttr(TrainDialect::kPrecision))
        stateNames.push_back("scaling_coeff");
      break;
    }
    // All appended in one insertArguments: one at a time, each insertion
    // copies the whole signature and argument attribute list (quadratic).
    unsigned firstNew = fn.getNumArguments();
    SmallVector<Type> newTypes;
    SmallVector<DictionaryAttr> newAttrs;
    for (Update &u : updates) {
      for (StringRef s : stateNames) {
        StringAttr stateName = b.getStringAttr(u.name.getValue() + "/" + s);
        const bool scalar = s == "lrs" || s == "lamb_coeff_freeze" || s == "last_factor" ||
                            s == "scaling_coeff";
        newTypes.push_back(scalar ? Type(RankedTensorType::get({}, b.getF32Type()))
                                  : u.param.getType());
        newAttrs.push_back(
            b.getDictionaryAttr(b.getNamedAttr(TrainDialect::kOptState, stateName)));
        u.stateNames.push_back(stateName);
      }
    }
    newTypes.push_back(RankedTensorType::get({}, b.getI64Type()));
    newAttrs.push_back(
        b.getDictionaryAttr(b.getNamedAttr(TrainDialect::kStep, b.getUnitAttr())));
    SmallVector<unsigned> newIndices(newTypes.size(), firstNew);
    SmallVector<Location> newLocs(newTypes.size(), loc);
    if (failed(fn.insertArguments(newIndices, newTypes, newAttrs, newLocs)))
      return failure();
    unsigned next = firstNew;
    for (Update &u : updates)
      for (size_t k = 0; k < stateNames.size(); ++k)
        u.states.push_back(fn.getArgument(next++));
    Value step = fn.getArgument(next);

    // The learning rate first: it depends only on the step.
    b.setInsertionPointToStart(&body);
    auto sched = buildScheduleParams(b);
    if (failed(sched))
      return failure();
    Value lrValue = train::LrScheduleOp::create(b, loc, RankedTensorType::get({}, b.getF32Type()), step, b.getStringAttr(lrScheduleName(schedule)), *sched);

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

    // 1-bit LAMB: every momentum's scaling coefficient, set once on the
    // first compressed step from all of them (read by each update). Under
    // bf16 / fp16 (DeepSpeed's wrapper's one flat tensor) the coefficient is
    // 1 and the norms are every tensor's (train.onebit_lamb_stats).
    SmallVector<Value> scalings;
    Value lambStats;
    const bool lambFlat =
        kind == OptimizerKind::OneBitLamb &&
        fn->getParentOfType<ModuleOp>()->hasAttr(TrainDialect::kPrecision);
    if (lambFlat) {
      auto scalar = RankedTensorType::get({}, b.getF32Type());
      Value one = arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(scalar, b.getF32FloatAttr(1.0f)));
      scalings.assign(updates.size(), one);
      SmallVector<Value> params, ms, vs, fs;
      for (Update &u : updates) {
        params.push_back(u.param);
        ms.push_back(u.states[0]);
        vs.push_back(u.states[1]);
        fs.push_back(u.states[2]);
      }
      lambStats = train::OneBitLambStatsOp::create(
          b, loc, RankedTensorType::get({3}, b.getF32Type()), params, grads, ms, vs, fs,
          ValueRange{}, step, b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2),
          b.getF64FloatAttr(eps), b.getF64FloatAttr(weightDecay),
          b.getI64IntegerAttr(freezeStep), b.getI64IntegerAttr(1));
    } else if (kind == OptimizerKind::OneBitLamb) {
      SmallVector<Value> momenta, coeffs;
      for (Update &u : updates) {
        momenta.push_back(u.states[0]);
        coeffs.push_back(u.states[5]);
      }
      SmallVector<Type> types(coeffs.size(), RankedTensorType::get({}, b.getF32Type()));
      auto scaling = train::OneBitLambScalingOp::create(
          b, loc, types, momenta, coeffs, step,
          b.getI64IntegerAttr(std::max<int64_t>(freezeStep, 2) + 1));
      llvm::append_range(scalings, scaling.getNewCoeffs());
    }
    SmallVector<Value> newParams, newStates;
    SmallVector<StringAttr> newStateNames;
    for (auto [i, u] : llvm::enumerate(updates)) {
      Value p = u.param;
      Type t = p.getType();
      llvm::append_range(newStateNames, u.stateNames);
      Operation *update = nullptr;
      if (kind == OptimizerKind::OneBitAdam) {
        // One rank: no compression (DeepSpeed calls compressed_allreduce
        // only when size > 1); onebit-compression adds it for dp > 1.
        // Under bf16 / fp16 DeepSpeed's wrapper (FP16_Optimizer) spends
        // the initialising call at construction, with zero gradients: the
        // first training step is call 2.
        const bool wrapped = fn->getParentOfType<ModuleOp>()->hasAttr(TrainDialect::kPrecision);
        update = train::OneBitAdamOp::create(
            b, loc, t, t, t, p, grads[i], u.states[0], u.states[1], lrValue, step, Value(),
            b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps),
            b.getF64FloatAttr(weightDecay), b.getI64IntegerAttr(freezeStep),
            b.getI64IntegerAttr(wrapped ? 1 : 0));
      } else if (kind == OptimizerKind::ZeroOneAdam) {
        // One rank: no compression (DeepSpeed compresses only when size >
        // 1); onebit-compression adds it, and the payload, for dp > 1.
        // bf16 / fp16: the wrapper's initialising call, as for OnebitAdam.
        const bool wrapped = fn->getParentOfType<ModuleOp>()->hasAttr(TrainDialect::kPrecision);
        update = train::ZeroOneAdamOp::create(
            b, loc, TypeRange{t, t, t, t, u.states[3].getType()}, p, grads[i], u.states[0],
            u.states[1], u.states[2], u.states[3], lrValue, step, Value(),
            b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps),
            b.getF64FloatAttr(weightDecay), b.getI64IntegerAttr(freezeStep),
            b.getI64IntegerAttr(varUpdateScaler), b.getI64IntegerAttr(localStepScaler),
            b.getI64IntegerAttr(localStepClipper), b.getI64IntegerAttr(wrapped ? 1 : 0));
      } else if (kind == OptimizerKind::OneBitLamb) {
        // One rank: no compression; onebit-compression adds it for dp > 1.
        Type s = u.states[3].getType();
        update = train::OneBitLambOp::create(
            b, loc, TypeRange{t, t, t, t, s, s}, p, grads[i], u.states[0], u.states[1],
            u.states[2], u.states[3], u.states[4], scalings[i], lrValue, step, Value(),
            lambStats, b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps),
            b.getF64FloatAttr(weightDecay), b.getF64FloatAttr(maxCoeff),
            b.getF64FloatAttr(minCoeff), b.getF64FloatAttr(coeffBeta),
            b.getF64FloatAttr(factorMax), b.getF64FloatAttr(factorMin),
            b.getF64FloatAttr(factorThreshold), b.getI64IntegerAttr(freezeStep),
            b.getI64IntegerAttr(lambFlat ? 1 : 0));
      } else if (kind == OptimizerKind::Lion) {
        update = train::LionOp::create(b, loc, t, t, p, grads[i], u.states[0], lrValue,
                                       b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2),
                                       b.getF64FloatAttr(weightDecay));
      } else if (kind == OptimizerKind::Adagrad) {
        update = train::AdagradOp::create(b, loc, t, t, p, grads[i], u.states[0], lrValue, step,
                                          b.getF64FloatAttr(eps), b.getF64FloatAttr(weightDecay),
                                          b.getF64FloatAttr(lrDecay));
      } else if (kind == OptimizerKind::Lamb) {
        // The trust ratio's sums first (they read the old moments); ZeRO
        // and tensor parallelism all-reduce them where the tensor is split.
        Value stats = train::LambStatsOp::create(
            b, loc, RankedTensorType::get({2}, b.getF32Type()), p, grads[i], u.states[0],
            u.states[1], b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2),
            b.getF64FloatAttr(eps), b.getF64FloatAttr(weightDecay));
        update = train::LambOp::create(
            b, loc, t, t, t, p, grads[i], u.states[0], u.states[1], lrValue, step, stats,
            b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps),
            b.getF64FloatAttr(weightDecay), b.getBoolAttr(biasCorrection),
            b.getF64FloatAttr(maxCoeff), b.getF64FloatAttr(minCoeff));
      }
      if (update) {
        newParams.push_back(update->getResult(0));
        llvm::append_range(newStates, update->getResults().drop_front(1));
        if (!scalings.empty() && !lambFlat)
          newStates.push_back(scalings[i]);
      } else if (kind == OptimizerKind::SGD) {
        Value buffer = u.states.empty() ? Value() : u.states[0];
        auto op = train::SgdOp::create(
            b, loc, p.getType(), buffer ? buffer.getType() : Type(), p, grads[i], lrValue,
            buffer, b.getF64FloatAttr(momentum), b.getF64FloatAttr(dampening),
            b.getF64FloatAttr(weightDecay), nesterov ? b.getUnitAttr() : UnitAttr());
        newParams.push_back(op.getNewParam());
        if (buffer)
          newStates.push_back(op.getNewMomentumBuffer());
      } else {
        auto op = train::AdamOp::create(
            b, loc, t, t, t, p, grads[i], u.states[0], u.states[1], lrValue, step,
            b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps),
            b.getF64FloatAttr(weightDecay), kind == OptimizerKind::AdamW ? b.getUnitAttr() : UnitAttr(),
            b.getBoolAttr(biasCorrection));
        newParams.push_back(op.getNewParam());
        newStates.append({op.getNewExpAvg(), op.getNewExpAvgSq()});
      }
    }

    numUpdates += newParams.size();
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
    // All result attributes at once (setResultAttr copies the whole list).
    SmallVector<DictionaryAttr> resultAttrs;
    auto one = [&](StringRef key, Attribute value) {
      resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(key, value)));
    };
    for (Update &u : updates)
      one(TrainDialect::kUpdated, u.name);
    for (StringAttr name : newStateNames)
      one(TrainDialect::kOptState, name);
    one(TrainDialect::kLoss, b.getUnitAttr());
    one(TrainDialect::kGradNorm, b.getUnitAttr());
    one(TrainDialect::kLr, b.getUnitAttr());
    fn.setAllResultAttrs(resultAttrs);
    return success();
  }
};
} // namespace
} // namespace dsc
