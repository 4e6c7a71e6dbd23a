//===- TrainDialect.cpp - roles, optimizer updates, step regions ---------===//
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace dsc::train;

#include "dialects/train/TrainDialect.cpp.inc"
#include "dialects/train/TrainInterfaces.cpp.inc"

void TrainDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/train/TrainOps.cpp.inc"
      >();
}

static bool isStaticFloatTensor(Type t) {
  auto tensor = dyn_cast<RankedTensorType>(t);
  return tensor && tensor.hasStaticShape() &&
         isa<FloatType>(tensor.getElementType());
}

static bool isHalfTensor(Type t) {
  auto tensor = dyn_cast<RankedTensorType>(t);
  return tensor && tensor.hasStaticShape() &&
         (tensor.getElementType().isBF16() || tensor.getElementType().isF16());
}

static bool isScalarOf(Type t, bool isFloat) {
  auto tensor = dyn_cast<RankedTensorType>(t);
  if (!tensor || tensor.getRank() != 0)
    return false;
  return isFloat ? isa<FloatType>(tensor.getElementType())
                 : tensor.getElementType().isSignlessInteger(64);
}

/// Named roles (`train.param = "name"` ...) carry a non-empty string.
static FailureOr<StringRef> roleName(Operation *op, NamedAttribute attr,
                                     StringRef where, unsigned index) {
  auto value = dyn_cast<StringAttr>(attr.getValue());
  if (!value || value.getValue().empty()) {
    op->emitError("'") << attr.getName().getValue() << "' of " << where << " "
                       << index << " must be a non-empty name string";
    return failure();
  }
  return value.getValue();
}

/// A non-negative i64 attribute, or an error naming `name` on `op`.
static LogicalResult nonNegative(Operation *op, StringRef name, Attribute value) {
  auto i = dyn_cast<IntegerAttr>(value);
  if (!i || !i.getType().isSignlessInteger(64) || i.getInt() < 0)
    return op->emitError("'") << name << "' must be a non-negative i64, got " << value;
  return success();
}

/// The memory plan's op and function attributes (TrainOps.td).
static LogicalResult verifyPlannedAttribute(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == TrainDialect::kOffsets) {
    auto offsets = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!offsets || offsets.size() != int64_t(op->getNumResults()))
      return op->emitOpError("'") << name << "' must be array<i64> with one offset per result ("
                                  << op->getNumResults() << "), got " << attr.getValue();
    for (int64_t o : offsets.asArrayRef())
      if (o < 0)
        return op->emitOpError("'") << name << "' holds the negative offset " << o;
    return success();
  }
  if (name == TrainDialect::kStaging) {
    auto range = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!range || range.size() != 2 || range[0] < 0 || range[1] < 0)
      return op->emitOpError("'") << name
                                  << "' must be array<i64: offset, bytes>, both >= 0, got "
                                  << attr.getValue();
    return success();
  }
  if (!isa<FunctionOpInterface>(op))
    return op->emitOpError("'") << name << "' belongs on a function";
  return nonNegative(op, name, attr.getValue());
}

LogicalResult TrainDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  StringRef attrName = attr.getName().getValue();
  if (attrName == kStash || attrName == kItemSlots) {
    auto pipe = dyn_cast<PipelineOp>(op);
    auto values = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!pipe || !values)
      return op->emitOpError("'") << attrName << "' belongs on train.pipeline as array<i64>";
    for (int64_t v : values.asArrayRef())
      if (v < 0)
        return op->emitOpError("'") << attrName << "' holds the negative " << v;
    if (attrName == kStash && (values.size() != 3 || values[2] < 1))
      return op->emitOpError("'") << attrName
                                  << "' must be array<i64: offset, slot_bytes, slots>, slots >= 1";
    if (attrName == kItemSlots && values.size() * 2 != pipe.getSchedule().size())
      return op->emitOpError("'") << attrName << "' has " << values.size() << " slots for "
                                  << pipe.getSchedule().size() / 2 << " items";
    return success();
  }
  if (attrName == kOffsets || attrName == kStaging || attrName == kArenaBytes ||
      attrName == kPersistentBytes || attrName == kHostTierBytes ||
      attrName == kNvmeTierBytes || attrName == kArenaBytesWithoutRecompute ||
      attrName == kArenaBytesWithoutFusion)
    return verifyPlannedAttribute(op, attr);
  if (attrName == kPeakLiveBytes) {
    if (failed(verifyPlannedAttribute(op, attr)))
      return failure();
    auto arena = op->getAttrOfType<IntegerAttr>(kArenaBytes);
    if (arena && cast<IntegerAttr>(attr.getValue()).getInt() > arena.getInt())
      return op->emitOpError("'") << kPeakLiveBytes << "' (" << attr.getValue()
                                  << ") exceeds the arena's " << arena.getInt()
                                  << " bytes: no arena holds less than what is live at once";
    return success();
  }
  if (attrName == kNvmeParamOffset) {
    if (failed(verifyPlannedAttribute(op, attr)))
      return failure();
    auto tier = op->getAttrOfType<IntegerAttr>(kNvmeTierBytes);
    if (!tier)
      return op->emitOpError("'") << kNvmeParamOffset << "' needs '" << kNvmeTierBytes << "'";
    if (cast<IntegerAttr>(attr.getValue()).getInt() > tier.getInt())
      return op->emitOpError("'") << kNvmeParamOffset << "' (" << attr.getValue()
                                  << ") lies past the NVMe tier's " << tier.getInt() << " bytes";
    return success();
  }
  if (attrName == kPrecision) {
    auto p = dyn_cast<StringAttr>(attr.getValue());
    if (!isa<ModuleOp>(op) || !p || (p.getValue() != "bf16" && p.getValue() != "fp16"))
      return op->emitError("'") << kPrecision
                                << "' is a module attribute, \"bf16\" or \"fp16\"; got "
                                << attr.getValue();
    return success();
  }
  if (attr.getName() == kStepClasses) {
    auto classes = dyn_cast<IntegerAttr>(attr.getValue());
    if (!classes || classes.getInt() < 1 || classes.getInt() > dsrt::kAllStepClasses)
      return op->emitOpError("'") << kStepClasses << "' must be a mask of step classes (1 to "
                                  << dsrt::kAllStepClasses << "), got " << attr.getValue();
    if (op->hasAttr(kActiveSteps))
      return op->emitOpError("has both '") << kActiveSteps << "' and '" << kStepClasses
                                           << "': an op runs by one rule";
    return success();
  }
  if (attr.getName() != kActiveSteps)
    return success();
  auto steps = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
  if (!steps || steps.size() != 2)
    return op->emitOpError("'") << kActiveSteps << "' must be array<i64: first, last>, got "
                                << attr.getValue();
  if (steps[0] < 1 || (steps[1] != 0 && steps[1] < steps[0]))
    return op->emitOpError("'")
           << kActiveSteps << "' = [" << steps[0] << ", " << steps[1]
           << "] is no range of optimizer steps (first >= 1; last 0 for no end, or >= first)";
  return success();
}

LogicalResult TrainDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                     unsigned argIndex,
                                                     NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  // The memory plan's (TrainOps.td).
  if (name == kOffset || name == kTierOffset || name == kTile)
    return nonNegative(op, name, attr.getValue());
  if (name == kTier) {
    auto tier = dyn_cast<StringAttr>(attr.getValue());
    if (!tier || (tier.getValue() != "host" && tier.getValue() != "nvme"))
      return op->emitError("'") << kTier << "' (argument " << argIndex
                                << ") is \"host\" or \"nvme\", got " << attr.getValue();
    return success();
  }
  if (name != kParam && name != kBuffer && name != kInput && name != kOptState &&
      name != kParamCopy && name != kStep && name != kLossScale)
    return op->emitError("unknown argument attribute '") << name << "'";
  auto fn = dyn_cast<FunctionOpInterface>(op);
  if (!fn)
    return op->emitError("'") << name << "' belongs on a function argument";
  Type type = fn.getArgumentTypes()[argIndex];
  if (name == kStep) {
    if (!isa<UnitAttr>(attr.getValue()) || !isScalarOf(type, /*isFloat=*/false))
      return op->emitError("'train.step' (argument ")
             << argIndex << ") is a unit attribute on a tensor<i64> scalar";
    return success();
  }
  if (name == kLossScale) {
    if (!isa<UnitAttr>(attr.getValue()) || !isScalarOf(type, /*isFloat=*/true) ||
        !cast<RankedTensorType>(type).getElementType().isF32())
      return op->emitError("'train.loss_scale' (argument ")
             << argIndex << ") is a unit attribute on a tensor<f32> scalar";
    return success();
  }
  auto value = roleName(op, attr, "argument", argIndex);
  if (failed(value))
    return failure();
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return op->emitError("argument ")
           << argIndex << " ('" << *value
           << "') must be a statically shaped tensor, got " << type;
  if ((name == kParam || name == kOptState) && !isStaticFloatTensor(type))
    return op->emitError(name == kParam ? "parameter '" : "optimizer state '")
           << *value << "' must be a float tensor, got " << type;
  if (name == kParamCopy && !isHalfTensor(type))
    return op->emitError("the working copy of '")
           << *value << "' (argument " << argIndex << ") must be a bf16 or f16 tensor, got "
           << type;
  return success();
}

LogicalResult TrainDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                        unsigned resultIndex,
                                                        NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  bool scalarRole = name == kLoss || name == kGradNorm || name == kLr;
  bool namedRole = name == kGrad || name == kUpdated || name == kOptState || name == kParamCopy;
  if (!scalarRole && !namedRole)
    return op->emitError("unknown result attribute '") << name << "'";
  auto fn = dyn_cast<FunctionOpInterface>(op);
  if (!fn)
    return op->emitError("'") << name << "' belongs on a function result";
  Type type = fn.getResultTypes()[resultIndex];
  if (namedRole) {
    if (failed(roleName(op, attr, "result", resultIndex)))
      return failure();
    if (!isStaticFloatTensor(type) || (name == kParamCopy && !isHalfTensor(type)))
      return op->emitError("'")
             << name << "' result " << resultIndex << " must be a "
             << (name == kParamCopy ? "bf16 or f16" : "float") << " tensor, got " << type;
    return success();
  }
  if (!isScalarOf(type, /*isFloat=*/true))
    return op->emitError("the ")
           << (name == kLoss ? "loss" : name) << " (result " << resultIndex
           << ") must be a scalar float tensor, got " << type;
  for (unsigned k = 0; k < resultIndex; ++k)
    if (fn.getResultAttr(k, name))
      return op->emitError("results ")
             << k << " and " << resultIndex << " are both marked " << name
             << "; a step has one";
  return success();
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

static LogicalResult checkRate(Operation *op, StringRef name, double v,
                               double lo, double hi) {
  if (!(v >= lo && v < hi))
    return op->emitOpError() << name << " = " << v << " must be in [" << lo
                             << ", " << hi << ")";
  return success();
}

LogicalResult SgdOp::verify() {
  double momentum = getMomentum().convertToDouble();
  if (failed(checkRate(*this, "momentum", momentum, 0.0, 1.0)) ||
      failed(checkRate(*this, "dampening", getDampening().convertToDouble(),
                       0.0, 1.0)) ||
      failed(checkRate(*this, "weight_decay",
                       getWeightDecay().convertToDouble(), 0.0, 1e30)))
    return failure();
  if (getParam().getType() != getGrad().getType() ||
      getParam().getType() != getNewParam().getType())
    return emitOpError("param, grad and new_param must have the same type");
  bool hasBuffer = static_cast<bool>(getMomentumBuffer());
  if (hasBuffer != static_cast<bool>(getNewMomentumBuffer()))
    return emitOpError("the momentum buffer operand and its updated result "
                       "must both be present or both be absent");
  if (hasBuffer != (momentum > 0.0))
    return emitOpError("a momentum buffer is required exactly when momentum > 0");
  if (hasBuffer && (getMomentumBuffer().getType() != getParam().getType() ||
                    getNewMomentumBuffer().getType() != getParam().getType()))
    return emitOpError("momentum buffer must have the parameter's type");
  if (getNesterov() && (momentum == 0.0 || getDampening().convertToDouble() != 0.0))
    return emitOpError("nesterov requires momentum > 0 and dampening = 0");
  return success();
}

SmallVector<OpOperand *> SgdOp::getOptStates() {
  SmallVector<OpOperand *> states;
  for (OpOperand &o : getMomentumBufferMutable())
    states.push_back(&o);
  return states;
}

SmallVector<OpOperand *> AdamOp::getOptStates() {
  return {&getExpAvgMutable(), &getExpAvgSqMutable()};
}

LogicalResult AdamOp::verify() {
  if (failed(checkRate(*this, "beta1", getBeta1().convertToDouble(), 0.0, 1.0)) ||
      failed(checkRate(*this, "beta2", getBeta2().convertToDouble(), 0.0, 1.0)) ||
      failed(checkRate(*this, "weight_decay",
                       getWeightDecay().convertToDouble(), 0.0, 1e30)))
    return failure();
  if (!(getEps().convertToDouble() > 0.0))
    return emitOpError("eps must be positive");
  return success();
}

SmallVector<OpOperand *> OneBitAdamOp::getOptStates() {
  return {&getExpAvgMutable(), &getExpAvgSqMutable()};
}

static LogicalResult verifyLambRates(Operation *op, double beta1, double beta2, double eps,
                                     double weightDecay);

LogicalResult OneBitAdamOp::verify() {
  // Adam's rates, checked as LAMB's are.
  if (failed(verifyLambRates(*this, getBeta1().convertToDouble(), getBeta2().convertToDouble(),
                             getEps().convertToDouble(), getWeightDecay().convertToDouble())))
    return failure();
  if (getFreezeStepAttr().getInt() < 0)
    return emitOpError("freeze_step must be non-negative, got ") << getFreezeStepAttr().getInt();
  if (getStepOffset() != 0 && getStepOffset() != 1)
    return emitOpError("step_offset must be 0 or 1 (DeepSpeed's fp16 wrapper spends one call), "
                       "got ")
           << getStepOffset();
  if (Value c = getCompressed(); c && c.getType() != getParam().getType())
    return emitOpError("compressed momentum ")
           << c.getType() << " must have the parameter's type " << getParam().getType();
  return success();
}

SmallVector<OpOperand *> ZeroOneAdamOp::getOptStates() {
  return {&getExpAvgMutable(), &getExpAvgSqMutable(), &getMomentumAccumulatorMutable(),
          &getLrsMutable()};
}

/// ZeroOneAdam's policy attributes, as DeepSpeed's constructor takes them.
template <typename Op>
static dsrt::ZeroOneRule zeroOneRule(Op op) {
  dsrt::ZeroOneRule r;
  r.varFreezeStep = op.getVarFreezeStep();
  r.varUpdateScaler = op.getVarUpdateScaler();
  r.localStepScaler = op.getLocalStepScaler();
  r.localStepClipper = op.getLocalStepClipper();
  r.stepOffset = op.getStepOffset();
  return r;
}
dsrt::ZeroOneRule ZeroOneAdamOp::rule() { return zeroOneRule(*this); }
dsrt::ZeroOneRule ZeroOneAdamPayloadOp::rule() { return zeroOneRule(*this); }

template <typename Op>
static LogicalResult verifyZeroOneRule(Op op) {
  dsrt::ZeroOneRule r = zeroOneRule(op);
  if (r.varFreezeStep < 0 || r.varUpdateScaler < 0 || r.localStepScaler < 0)
    return op.emitOpError("var_freeze_step, var_update_scaler and local_step_scaler must be "
                          "non-negative");
  if (r.localStepClipper < 1)
    return op.emitOpError("local_step_clipper must be at least 1 (the largest "
                          "local_step_interval), got ")
           << r.localStepClipper;
  if (r.stepOffset != 0 && r.stepOffset != 1)
    return op.emitOpError("step_offset must be 0 or 1 (DeepSpeed's fp16 wrapper spends one "
                          "call), got ")
           << r.stepOffset;
  return success();
}

LogicalResult ZeroOneAdamOp::verify() {
  if (failed(verifyLambRates(*this, getBeta1().convertToDouble(), getBeta2().convertToDouble(),
                             getEps().convertToDouble(), getWeightDecay().convertToDouble())) ||
      failed(verifyZeroOneRule(*this)))
    return failure();
  if (Value c = getCompressed(); c && c.getType() != getParam().getType())
    return emitOpError("compressed ")
           << c.getType() << " must have the parameter's type " << getParam().getType();
  return success();
}

LogicalResult ZeroOneAdamPayloadOp::verify() {
  if (failed(verifyLambRates(*this, getBeta1().convertToDouble(), 0.5, getEps().convertToDouble(),
                             getWeightDecay().convertToDouble())))
    return failure();
  return verifyZeroOneRule(*this);
}

LogicalResult ResetAtOp::verify() {
  if (getAtAttr().getInt() < 1)
    return emitOpError("at must be an optimizer step (>= 1), got ") << getAtAttr().getInt();
  return success();
}

SmallVector<OpOperand *> OneBitLambOp::getOptStates() {
  return {&getExpAvgMutable(), &getExpAvgSqMutable(), &getExpAvgSqFreshMutable(),
          &getLambCoeffFreezeMutable(), &getLastFactorMutable()};
}

LogicalResult OneBitLambOp::verify() {
  if (failed(verifyLambRates(*this, getBeta1().convertToDouble(), getBeta2().convertToDouble(),
                             getEps().convertToDouble(), getWeightDecay().convertToDouble())))
    return failure();
  const double minCoeff = getMinCoeff().convertToDouble(),
               maxCoeff = getMaxCoeff().convertToDouble();
  if (!(minCoeff >= 0) || !(minCoeff <= maxCoeff))
    return emitOpError("min_coeff must lie in [0, max_coeff], got ")
           << minCoeff << " and " << maxCoeff;
  const double cb = getCoeffBeta().convertToDouble();
  if (!(cb >= 0 && cb <= 1))
    return emitOpError("coeff_beta must lie in [0, 1], got ") << cb;
  const double fmin = getFactorMin().convertToDouble(), fmax = getFactorMax().convertToDouble();
  if (!(fmin >= 0) || !(fmin <= fmax) || !(getFactorThreshold().convertToDouble() >= 0))
    return emitOpError("factor_min must lie in [0, factor_max] and factor_threshold be "
                       "non-negative");
  if (getFreezeStepAttr().getInt() < 0)
    return emitOpError("freeze_step must be non-negative, got ")
           << getFreezeStepAttr().getInt();
  if (getStepOffset() != 0 && getStepOffset() != 1)
    return emitOpError("step_offset must be 0 or 1, got ") << getStepOffset();
  if (Value c = getCompressed(); c && c.getType() != getParam().getType())
    return emitOpError("compressed momentum ")
           << c.getType() << " must have the parameter's type " << getParam().getType();
  if (Value s = getStats(); s && cast<RankedTensorType>(s.getType()).getDimSize(0) != 3)
    return emitOpError("stats must be tensor<3xf32> (train.onebit_lamb_stats'), got ")
           << s.getType();
  return success();
}

LogicalResult OneBitLambStatsOp::verify() {
  const size_t n = getParams().size();
  if (n == 0 || getGrads().size() != n || getExpAvgs().size() != n ||
      getExpAvgSqs().size() != n || getExpAvgSqFreshes().size() != n ||
      (!getCompressed().empty() && getCompressed().size() != n))
    return emitOpError("takes as many gradients, moments (and compressed momenta, if any) as "
                       "parameters, at least one");
  for (size_t k = 0; k < n; ++k) {
    Type t = getParams()[k].getType();
    if (getGrads()[k].getType() != t || getExpAvgs()[k].getType() != t ||
        getExpAvgSqs()[k].getType() != t || getExpAvgSqFreshes()[k].getType() != t ||
        (!getCompressed().empty() && getCompressed()[k].getType() != t))
      return emitOpError("tensor ") << k << "'s gradient, moments and compressed momentum "
                                    << "must have its parameter's type " << t;
  }
  if (cast<RankedTensorType>(getStats().getType()).getDimSize(0) != 3)
    return emitOpError("gives 3 statistics, not ") << getStats().getType();
  return verifyLambRates(*this, getBeta1().convertToDouble(), getBeta2().convertToDouble(),
                         getEps().convertToDouble(), getWeightDecay().convertToDouble());
}

LogicalResult OneBitLambScalingOp::verify() {
  if (getExpAvgs().empty())
    return emitOpError("scales no momentum");
  if (getNewCoeffs().size() != getCoeffs().size())
    return emitOpError("has ") << getCoeffs().size() << " coefficients and "
                               << getNewCoeffs().size() << " new ones";
  if (getAtAttr().getInt() < 1)
    return emitOpError("at must be an optimizer step (>= 1), got ") << getAtAttr().getInt();
  return success();
}

SmallVector<OpOperand *> LionOp::getOptStates() { return {&getExpAvgMutable()}; }

LogicalResult LionOp::verify() {
  if (failed(checkRate(*this, "beta1", getBeta1().convertToDouble(), 0.0, 1.0)) ||
      failed(checkRate(*this, "beta2", getBeta2().convertToDouble(), 0.0, 1.0)) ||
      failed(checkRate(*this, "weight_decay", getWeightDecay().convertToDouble(), 0.0, 1e30)))
    return failure();
  return success();
}

SmallVector<OpOperand *> AdagradOp::getOptStates() { return {&getSumMutable()}; }

LogicalResult AdagradOp::verify() {
  if (failed(checkRate(*this, "weight_decay", getWeightDecay().convertToDouble(), 0.0, 1e30)) ||
      failed(checkRate(*this, "lr_decay", getLrDecay().convertToDouble(), 0.0, 1e30)))
    return failure();
  if (!(getEps().convertToDouble() > 0.0))
    return emitOpError("eps must be positive");
  return success();
}

/// LAMB's hyperparameters, shared by train.lamb and train.lamb_stats.
static LogicalResult verifyLambRates(Operation *op, double beta1, double beta2, double eps,
                                     double weightDecay) {
  if (failed(checkRate(op, "beta1", beta1, 0.0, 1.0)) ||
      failed(checkRate(op, "beta2", beta2, 0.0, 1.0)) ||
      failed(checkRate(op, "weight_decay", weightDecay, 0.0, 1e30)))
    return failure();
  if (!(eps > 0.0))
    return op->emitOpError("eps must be positive");
  return success();
}

static bool isPairOfSums(Type t) {
  auto tensor = cast<RankedTensorType>(t);
  return tensor.getRank() == 1 && tensor.getDimSize(0) == 2;
}

static int64_t length(Value v) { return cast<RankedTensorType>(v.getType()).getDimSize(0); }

/// A LAMB update's rates and trust-ratio clamp (train.lamb, train.fused_lamb).
template <typename Lamb> static LogicalResult verifyLambUpdate(Lamb op) {
  if (failed(verifyLambRates(op, op.getBeta1().convertToDouble(), op.getBeta2().convertToDouble(),
                             op.getEps().convertToDouble(), op.getWeightDecay().convertToDouble())))
    return failure();
  double lo = op.getMinCoeff().convertToDouble(), hi = op.getMaxCoeff().convertToDouble();
  if (!(lo >= 0.0 && lo <= hi))
    return op.emitOpError("needs 0 <= min_coeff <= max_coeff, got min_coeff = ")
           << lo << ", max_coeff = " << hi;
  return success();
}

/// A LAMB update's sums computed with its rates.
template <typename Lamb, typename Stats>
static LogicalResult verifySameLambRates(Lamb op, Stats stats) {
  if (stats.getBeta1() != op.getBeta1() || stats.getBeta2() != op.getBeta2() ||
      stats.getEps() != op.getEps() || stats.getWeightDecay() != op.getWeightDecay())
    return op.emitOpError("its ") << stats->getName() << " has other betas, eps or weight_decay";
  return success();
}
static RankedTensorType vec(int64_t n, Type e) { return RankedTensorType::get({n}, e); }

void OneBitCompressOp::build(OpBuilder &b, OperationState &state, Value input, Value error) {
  int64_t n = length(input);
  build(b, state, vec(n / 8, b.getI8Type()), vec(1, b.getF32Type()), input.getType(), input,
        error);
}

LogicalResult OneBitCompressOp::verify() {
  int64_t n = length(getInput());
  if (n % 8 != 0)
    return emitOpError("input length ") << n << " is not a multiple of 8 (eight signs a byte)";
  if (length(getBits()) != n / 8)
    return emitOpError("bits must hold ") << n / 8 << " bytes, got " << length(getBits());
  if (length(getScale()) != 1)
    return emitOpError("scale must be tensor<1xf32>, got ") << getScale().getType();
  return success();
}

void OneBitServerOp::build(OpBuilder &b, OperationState &state, Value bits, Value scales,
                           Value error) {
  int64_t n = length(error);
  build(b, state, vec(n / 8, b.getI8Type()), vec(1, b.getF32Type()), error.getType(), bits,
        scales, error);
}

LogicalResult OneBitServerOp::verify() {
  int64_t n = length(getError()), w = length(getScales());
  if (n % 8 != 0)
    return emitOpError("chunk length ") << n << " is not a multiple of 8 (eight signs a byte)";
  if (w < 1)
    return emitOpError("needs the scales of at least one worker");
  if (length(getBits()) != w * (n / 8))
    return emitOpError("bits must hold ")
           << w << " workers' " << n / 8 << " bytes, got " << length(getBits());
  if (length(getBitsOut()) != n / 8)
    return emitOpError("bits_out must hold ") << n / 8 << " bytes, got " << length(getBitsOut());
  if (length(getScaleOut()) != 1)
    return emitOpError("scale_out must be tensor<1xf32>, got ") << getScaleOut().getType();
  return success();
}

LogicalResult OneBitExpandOp::verify() {
  int64_t bytes = length(getBits()), w = length(getScales()), n = length(getResult());
  if (w < 1)
    return emitOpError("needs the scales of at least one chunk");
  if (bytes % w != 0 || n != 8 * bytes)
    return emitOpError("result length must be 8 x ")
           << bytes << " bytes = " << 8 * bytes << " in " << w << " equal chunks, got " << n;
  return success();
}

LogicalResult LambStatsOp::verify() {
  if (!isPairOfSums(getSums().getType()))
    return emitOpError("result must be tensor<2xf32> (the squares of the parameter and of "
                       "the update), got ")
           << getSums().getType();
  return verifyLambRates(*this, getBeta1().convertToDouble(), getBeta2().convertToDouble(),
                         getEps().convertToDouble(), getWeightDecay().convertToDouble());
}

SmallVector<OpOperand *> LambOp::getOptStates() {
  return {&getExpAvgMutable(), &getExpAvgSqMutable()};
}

LogicalResult LambOp::verify() {
  if (!isPairOfSums(getStats().getType()))
    return emitOpError("stats must be tensor<2xf32> (train.lamb_stats), got ")
           << getStats().getType();
  if (failed(verifyLambUpdate(*this)))
    return failure();
  if (auto stats = getStats().getDefiningOp<LambStatsOp>())
    return verifySameLambRates(*this, stats);
  return success();
}

void ClipGradNormOp::build(OpBuilder &b, OperationState &state,
                           ValueRange grads, Value lossScale, double maxNorm) {
  SmallVector<Type> types(grads.getTypes());
  types.push_back(RankedTensorType::get({}, b.getF32Type()));
  build(b, state, types, grads, /*sum_sq=*/Value(), lossScale, b.getF64FloatAttr(maxNorm));
}

LogicalResult ClipGradNormOp::verify() {
  if (!(getMaxNorm().convertToDouble() >= 0.0))
    return emitOpError("max_norm must be >= 0 (0 reports the norm without clipping)");
  if (getGrads().getTypes() != getClipped().getTypes())
    return emitOpError("clipped gradients must have the gradients' types");
  return success();
}

LogicalResult ClipCoefOp::verify() {
  if (!(getMaxNorm().convertToDouble() >= 0.0))
    return emitOpError("max_norm must be >= 0 (0 only unscales)");
  if (getGrads().empty())
    return emitOpError("needs at least one gradient");
  return success();
}

/// The tensors of a fused update (train.fused_adam, train.fused_lamb_stats,
/// train.fused_lamb): at least one f32 parameter, and per parameter a
/// gradient of its shape (f32, bf16 or f16) and its moments (whose types
/// the ops' traits match).
static LogicalResult verifyFusedTensors(Operation *op, ValueRange params, ValueRange grads,
                                        ValueRange expAvgs, ValueRange expAvgSqs) {
  const size_t n = params.size();
  if (n == 0)
    return op->emitOpError("needs at least one parameter");
  if (grads.size() != n || expAvgs.size() != n || expAvgSqs.size() != n)
    return op->emitOpError("needs one gradient, exp_avg and exp_avg_sq per parameter; has ")
           << n << " parameters, " << grads.size() << " gradients, " << expAvgs.size()
           << " exp_avgs and " << expAvgSqs.size() << " exp_avg_sqs";
  for (size_t k = 0; k < n; ++k) {
    auto p = cast<RankedTensorType>(params[k].getType());
    auto g = cast<RankedTensorType>(grads[k].getType());
    if (!p.getElementType().isF32())
      return op->emitOpError("parameter ") << k << " must be f32 (the master weights), is " << p;
    if (g.getShape() != p.getShape())
      return op->emitOpError("gradient ") << k << " has shape " << g << ", its parameter " << p;
    if (!g.getElementType().isF32() && !g.getElementType().isBF16() &&
        !g.getElementType().isF16())
      return op->emitOpError("gradient ") << k << " must be f32, bf16 or f16, is " << g;
  }
  return success();
}

/// The new parameters, exp_avgs and exp_avg_sqs of a fused update, in that
/// order: its operands' types.
template <typename Adaptor>
static void inferUpdatedTypes(Adaptor adaptor, SmallVectorImpl<Type> &types) {
  for (ValueRange group : {adaptor.getParams(), adaptor.getExpAvgs(), adaptor.getExpAvgSqs(),
                           adaptor.getCopies()})
    llvm::append_range(types, group.getTypes());
}

/// A fused update's working copies: one bf16 / fp16 copy per index of
/// `copyOf`, each of its parameter's shape, no parameter twice.
static LogicalResult verifyCopies(Operation *op, ValueRange params, ValueRange copies,
                                  ArrayRef<int64_t> copyOf) {
  if (copies.size() != copyOf.size())
    return op->emitOpError("has ") << copies.size() << " copies and " << copyOf.size()
                                   << " copy_of indices";
  llvm::SmallDenseSet<int64_t, 8> seen;
  for (auto [c, k] : llvm::zip_equal(copies, copyOf)) {
    if (k < 0 || k >= int64_t(params.size()) || !seen.insert(k).second)
      return op->emitOpError("copy_of ")
             << k << " must name a parameter (0 to " << params.size() - 1 << ") once";
    auto p = cast<RankedTensorType>(params[k].getType());
    auto t = cast<RankedTensorType>(c.getType());
    if (!isHalfTensor(t) || t.getShape() != p.getShape())
      return op->emitOpError("the copy of parameter ")
             << k << " must be a bf16 or f16 tensor of its shape " << p << ", is " << t;
  }
  return success();
}

LogicalResult FusedAdamOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  inferUpdatedTypes(adaptor, types);
  return success();
}

LogicalResult FusedAdamOp::verify() {
  if (failed(checkRate(*this, "beta1", getBeta1().convertToDouble(), 0.0, 1.0)) ||
      failed(checkRate(*this, "beta2", getBeta2().convertToDouble(), 0.0, 1.0)) ||
      failed(checkRate(*this, "weight_decay", getWeightDecay().convertToDouble(), 0.0, 1e30)))
    return failure();
  if (!(getEps().convertToDouble() > 0.0))
    return emitOpError("eps must be positive");
  if (failed(verifyFusedTensors(*this, getParams(), getGrads(), getExpAvgs(), getExpAvgSqs())))
    return failure();
  return verifyCopies(*this, getParams(), getCopies(), getCopyOf());
}

LogicalResult FusedLambStatsOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location>,
                                                 Adaptor adaptor,
                                                 SmallVectorImpl<Type> &types) {
  types.assign(adaptor.getParams().size(), RankedTensorType::get({2}, Float32Type::get(ctx)));
  return success();
}

LogicalResult FusedLambStatsOp::verify() {
  if (failed(verifyLambRates(*this, getBeta1().convertToDouble(), getBeta2().convertToDouble(),
                             getEps().convertToDouble(), getWeightDecay().convertToDouble())))
    return failure();
  return verifyFusedTensors(*this, getParams(), getGrads(), getExpAvgs(), getExpAvgSqs());
}

LogicalResult FusedLambOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  inferUpdatedTypes(adaptor, types);
  return success();
}

LogicalResult FusedLambOp::verify() {
  if (failed(verifyLambUpdate(*this)) ||
      failed(verifyFusedTensors(*this, getParams(), getGrads(), getExpAvgs(), getExpAvgSqs())))
    return failure();
  if (getStats().size() != getParams().size())
    return emitOpError("needs one stats per parameter; has ")
           << getParams().size() << " parameters and " << getStats().size() << " stats";
  for (auto [k, s] : llvm::enumerate(getStats()))
    if (!isPairOfSums(s.getType()))
      return emitOpError("stats ") << k << " must be tensor<2xf32> (train.fused_lamb_stats), got "
                                   << s.getType();
  if (auto stats = getStats().front().getDefiningOp<FusedLambStatsOp>())
    if (failed(verifySameLambRates(*this, stats)))
      return failure();
  return verifyCopies(*this, getParams(), getCopies(), getCopyOf());
}

LogicalResult LrScheduleOp::verify() {
  static const char *kinds[] = {"constant", "WarmupLR", "WarmupDecayLR",
                                "WarmupCosineLR", "OneCycle", "LRRangeTest"};
  if (!llvm::is_contained(kinds, getKind()))
    return emitOpError("unknown schedule '")
           << getKind()
           << "' (expected constant, WarmupLR, WarmupDecayLR, WarmupCosineLR, "
              "OneCycle or LRRangeTest)";
  for (NamedAttribute p : getParams())
    if (!isa<FloatAttr, IntegerAttr, StringAttr, BoolAttr>(p.getValue()))
      return emitOpError("schedule parameter '")
             << p.getName().getValue() << "' must be a number, bool or string";
  return success();
}

//===----------------------------------------------------------------------===//
// Step structure
//===----------------------------------------------------------------------===//

/// The region's yield must produce exactly the op's result types.
/// Whether `yielded` may be summed into a result of type `sum`: the same
/// type, or (`widening`, train.accumulate) a bf16/fp16 value of an f32
/// sum's shape, widened as it is added.
static bool sumsInto(Type yielded, Type sum, bool widening) {
  if (yielded == sum)
    return true;
  auto y = dyn_cast<RankedTensorType>(yielded), s = dyn_cast<RankedTensorType>(sum);
  return widening && y && s && y.getShape() == s.getShape() && s.getElementType().isF32() &&
         (y.getElementType().isBF16() || y.getElementType().isF16());
}

static LogicalResult verifyYield(Operation *op, Region &body, bool widening = false) {
  auto yield = dyn_cast<YieldOp>(body.front().getTerminator());
  if (!yield)
    return op->emitOpError("body must end with train.yield");
  TypeRange types = yield.getValues().getTypes(), sums = op->getResultTypes();
  bool ok = types.size() == sums.size();
  for (size_t i = 0; ok && i < types.size(); ++i)
    ok = sumsInto(types[i], sums[i], widening);
  if (!ok)
    return op->emitOpError("yields ")
           << yield.getValues().size() << " values of types (" << types
           << ") but has result types (" << sums << ")"
           << (widening ? " (a bf16 or fp16 value may be summed into an f32 result of its shape)"
                        : "");
  return success();
}

LogicalResult AccumulateOp::verifyRegions() {
  if ((int64_t)getCount() < 1)
    return emitOpError("count must be at least 1, got ") << (int64_t)getCount();
  Block &body = getBody().front();
  if (body.getNumArguments() != 1 || !body.getArgument(0).getType().isIndex())
    return emitOpError("body must take the micro-batch index as its one "
                       "argument of type index");
  return verifyYield(*this, getBody(), /*widening=*/true);
}

/// The op of `body` after which yielded value `i` is summed: its
/// definition or its last other reader in the body.
static Operation *sumPointIn(Block &body, unsigned i) {
  Value v = body.getTerminator()->getOperand(i);
  Operation *def = v.getDefiningOp();
  if (!def || def->getBlock() != &body)
    return nullptr;
  Operation *point = def;
  for (Operation *user : v.getUsers()) {
    Operation *inBody = body.findAncestorOpInBlock(*user);
    if (inBody && inBody != body.getTerminator() && point->isBeforeInBlock(inBody))
      point = inBody;
  }
  return point;
}

int64_t PipelineOp::phaseOf(Operation *op) {
  auto phase = op->getAttrOfType<IntegerAttr>(TrainDialect::kPhase);
  return phase ? phase.getInt() : 0;
}

void PipelineOp::inferPhases() {
  Block &body = getBody().front();
  Builder b(getContext());
  // Readers come after what they read: backwards, each op's readers are
  // already known; then forwards, what an op without readers reads.
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (phaseOf(&op))
      continue;
    int64_t phase = 0;
    for (Operation *user : op.getUsers())
      if (Operation *o = body.findAncestorOpInBlock(*user); o && phaseOf(o))
        phase = phase ? std::min(phase, phaseOf(o)) : phaseOf(o);
    if (phase)
      op.setAttr(TrainDialect::kPhase, b.getI64IntegerAttr(phase));
  }
  for (Operation &op : body.without_terminator()) {
    if (phaseOf(&op))
      continue;
    int64_t phase = 1;
    for (Value v : op.getOperands())
      if (Operation *def = v.getDefiningOp(); def && def->getBlock() == &body)
        phase = std::max(phase, phaseOf(def));
    op.setAttr(TrainDialect::kPhase, b.getI64IntegerAttr(phase));
  }
}

LogicalResult PipelineOp::verifyRegions() {
  int64_t count = getCount();
  if (count < 1)
    return emitOpError("count must be at least 1, got ") << count;
  Block &body = getBody().front();
  if (body.getNumArguments() != 1 || !body.getArgument(0).getType().isIndex())
    return emitOpError("body must take the micro-batch index as its one argument of type index");
  if (failed(verifyYield(*this, getBody(), /*widening=*/true)))
    return failure();
  // The schedule's phases: F and B, and W when it has any.
  ArrayRef<int64_t> items = getSchedule();
  if (items.size() % 2)
    return emitOpError("schedule must hold (phase, micro-batch) pairs, has ")
           << items.size() << " numbers";
  int64_t last = 2;
  for (size_t j = 0; j < items.size(); j += 2)
    last = std::max(last, items[j]);
  // Each op has a phase of the schedule and reads nothing of a later phase;
  // only train.load_batch reads the micro-batch index.
  for (Operation &op : body.without_terminator()) {
    int64_t phase = phaseOf(&op);
    if (phase < 1 || phase > last)
      return op.emitOpError("in a train.pipeline body needs train.phase ")
             << (last == 3 ? "1 (F), 2 (B) or 3 (W)" : "1 (F) or 2 (B)");
    for (Value v : op.getOperands()) {
      if (v == body.getArgument(0) && !isa<LoadBatchOp>(op))
        return op.emitOpError("reads the micro-batch index, which only train.load_batch may");
      if (Operation *def = v.getDefiningOp(); def && def->getBlock() == &body &&
                                              phaseOf(def) > phase)
        return op.emitOpError("of phase ")
               << phase << " reads a value of the later phase " << phaseOf(def);
    }
  }
  ArrayRef<int64_t> sumPhases = getSumPhases();
  if (sumPhases.size() != getNumResults())
    return emitOpError("has ") << sumPhases.size() << " sum_phases for " << getNumResults()
                               << " results";
  for (auto [i, p] : llvm::enumerate(sumPhases))
    if (p < 1 || p > last)
      return emitOpError("sum_phases[") << i << "] = " << p << " is not a phase of the schedule";
  // Every micro-batch's phases once each, in order.
  if (items.size() != size_t(2 * last * count))
    return emitOpError("schedule has ")
           << items.size() / 2 << " items, expected " << last * count << " (" << last
           << " phases of " << count << " micro-batches)";
  SmallVector<int64_t> next(count, 1);
  for (size_t j = 0; j < items.size(); j += 2) {
    int64_t phase = items[j], micro = items[j + 1];
    if (micro < 0 || micro >= count)
      return emitOpError("schedule item ") << j / 2 << " names micro-batch " << micro
                                           << ", outside [0, " << count << ")";
    if (phase != next[micro])
      return emitOpError("schedule item ")
             << j / 2 << " runs phase " << phase << " of micro-batch " << micro
             << ", whose next phase is " << next[micro];
    ++next[micro];
  }
  return success();
}

Operation *AccumulateOp::getSumPoint(unsigned i) { return sumPointIn(getBody().front(), i); }

Operation *PipelineOp::getSumPoint(unsigned i) { return sumPointIn(getBody().front(), i); }

bool AccumulateOp::isSumInPlace(unsigned i) {
  if (getCount() != 1 || !getSumPoint(i))
    return false;
  Operation *yield = getBody().front().getTerminator();
  Value v = yield->getOperand(i);
  for (unsigned j = 0; j < i; ++j) // a value yielded twice: its first sum
    if (yield->getOperand(j) == v)
      return false;
  return v.getType() == getResult(i).getType();
}

LogicalResult LoadBatchOp::verify() {
  if (static_cast<bool>(getMicroAttr()) == static_cast<bool>(getIndex()))
    return emitOpError("needs the micro-batch as either a number or an index operand");
  if (getMicroAttr() && getMicroAttr().getInt() < 0)
    return emitOpError("micro-batch index must be non-negative, got ")
           << getMicroAttr().getInt();
  if (getIndex() && !isa_and_nonnull<PipelineOp>((*this)->getParentOp()))
    return emitOpError("takes its micro-batch as an operand only in a train.pipeline body");
  if (getNames().size() != getInputs().size())
    return emitOpError("names ") << getNames().size() << " inputs but has "
                                 << getInputs().size() << " results";
  for (Value v : getInputs())
    if (cast<RankedTensorType>(v.getType()).getRank() == 0)
      return emitOpError("inputs need a batch dimension; a result is a scalar");
  return success();
}

LogicalResult AssignOp::verify() {
  auto arg = dyn_cast<BlockArgument>(getBuffer());
  auto fn = arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()) : func::FuncOp();
  if (!fn || !fn.getArgAttr(arg.getArgNumber(), TrainDialect::kBuffer))
    return emitOpError("target is not a step argument with train.buffer (model state)");
  if (getBuffer().getType() != getValue().getType())
    return emitOpError("value type ") << getValue().getType() << " is not the buffer's "
                                      << getBuffer().getType();
  return success();
}

/// A tier op's `homes` must be step arguments that the offload pass gave a
/// memory tier (`train.tier`).
static LogicalResult verifyHomes(Operation *op, ValueRange homes) {
  for (Value h : homes) {
    auto arg = dyn_cast<BlockArgument>(h);
    auto fn = arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()) : func::FuncOp();
    if (!fn || !fn.getArgAttr(arg.getArgNumber(), TrainDialect::kTier))
      return op->emitOpError("operand is not a step argument with a memory tier (train.tier)");
  }
  return success();
}

void TierFetchOp::build(OpBuilder &b, OperationState &state, ValueRange homes, int64_t tile) {
  state.addOperands(homes);
  state.addTypes(homes.getTypes());
  state.addAttribute(getTileAttrName(state.name), b.getI64IntegerAttr(tile));
}

LogicalResult TierFetchOp::verify() {
  if (getTileAttr().getInt() < 0)
    return emitOpError("tile must be non-negative, got ") << getTileAttr().getInt();
  if (getHomes().size() != getStaged().size())
    return emitOpError("fetches ") << getHomes().size() << " tensors into "
                                   << getStaged().size() << " results";
  for (auto [h, s] : llvm::zip(getHomes(), getStaged()))
    if (h.getType() != s.getType())
      return emitOpError("a working copy's type ")
             << s.getType() << " is not its home's " << h.getType();
  return verifyHomes(*this, getHomes());
}

LogicalResult TierStoreOp::verify() {
  if (getTileAttr().getInt() < 0)
    return emitOpError("tile must be non-negative, got ") << getTileAttr().getInt();
  if (getValues().size() != getHomes().size())
    return emitOpError("stores ") << getValues().size() << " values to " << getHomes().size()
                                  << " homes";
  for (auto [v, h] : llvm::zip(getValues(), getHomes()))
    if (h.getType() != v.getType())
      return emitOpError("a value's type ") << v.getType() << " is not its home's "
                                            << h.getType();
  return verifyHomes(*this, getHomes());
}

/// load_batch's micro-batch: a number, or the pipeline body's index operand.
static ParseResult parseMicroBatch(OpAsmParser &parser, IntegerAttr &micro,
                                   std::optional<OpAsmParser::UnresolvedOperand> &index) {
  OpAsmParser::UnresolvedOperand operand;
  OptionalParseResult r = parser.parseOptionalOperand(operand);
  if (r.has_value()) {
    if (failed(*r))
      return failure();
    index = operand;
    return success();
  }
  int64_t k = 0;
  if (parser.parseInteger(k))
    return failure();
  micro = parser.getBuilder().getI64IntegerAttr(k);
  return success();
}

static void printMicroBatch(OpAsmPrinter &p, Operation *, IntegerAttr micro, Value index) {
  if (index)
    p << index;
  else
    p << micro.getInt();
}

#define GET_OP_CLASSES
#include "dialects/train/TrainOps.cpp.inc"
