//===- NNGradients.cpp - gradient rules of the nn ops --------------------===//
//
// GradientOpInterface::buildGradients for every forward op. Rules are
// written in nn ops (fused gradient ops where a kernel exists: layer_norm,
// softmax, losses, gelu, gather, slice, dropout), so the backward pass is
// ordinary IR that the later passes (ZeRO, pipeline, memory planning) treat
// like the forward. Broadcast operands receive their gradient summed over
// the broadcast dimensions.
//
//===----------------------------------------------------------------------===//
#include "dialects/nn/NNDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"

#include <cmath>

using namespace mlir;
using namespace dsc::nn;

namespace {
using Grads = SmallVectorImpl<Value>;

RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// A scalar constant of `like`'s element type.
Value scalar(OpBuilder &b, Location loc, Value like, double value) {
  Type elem = tensorOf(like).getElementType();
  auto type = RankedTensorType::get({}, elem);
  return arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getFloatAttr(elem, value)));
}

/// Sums `grad` (shaped like a broadcast result) down to `type`'s shape.
Value reduceToShape(OpBuilder &b, Location loc, Value grad, RankedTensorType type) {
  auto g = tensorOf(grad);
  if (g.getShape() == type.getShape())
    return grad;
  int64_t offset = g.getRank() - type.getRank();
  SmallVector<int64_t> axes;
  for (int64_t i = 0; i < g.getRank(); ++i)
    if (i < offset || (type.getShape()[i - offset] == 1 && g.getShape()[i] != 1))
      axes.push_back(i);
  Value sum = grad;
  if (!axes.empty())
    sum = ReduceSumOp::create(b, loc, grad, b.getDenseI64ArrayAttr(axes),
                              /*keepdims=*/false);
  if (tensorOf(sum).getShape() != type.getShape())
    sum = ReshapeOp::create(b, loc, type, sum);
  return sum;
}

Value mul(OpBuilder &b, Location loc, Value x, Value y) {
  return MulOp::create(b, loc, x, y);
}

/// Fills `grads` with one null per operand of `op`.
void noGradients(Operation *op, Grads &grads) {
  grads.assign(op->getNumOperands(), Value());
}

LogicalResult noRule(Operation *op) {
  return op->emitOpError("has no gradient rule (higher-order gradients are "
                         "not supported)");
}

/// Gradient of a binary elementwise op given d/dlhs and d/drhs as full-size
/// (broadcast) values, each reduced to its operand's shape.
void binaryGrads(OpBuilder &b, Operation *op, Value dl, Value dr, Grads &grads) {
  Location loc = op->getLoc();
  grads.assign(2, Value());
  if (dl && isFloatTensor(op->getOperand(0).getType()))
    grads[0] = reduceToShape(b, loc, dl, tensorOf(op->getOperand(0)));
  if (dr && isFloatTensor(op->getOperand(1).getType()))
    grads[1] = reduceToShape(b, loc, dr, tensorOf(op->getOperand(1)));
}

/// dy where `cond`, zero elsewhere (cond broadcast to dy's shape).
Value maskGrad(OpBuilder &b, Location loc, Value cond, Value dy, bool where) {
  Value zero = scalar(b, loc, dy, 0.0);
  return where ? SelectOp::create(b, loc, cond, dy, zero).getResult()
               : SelectOp::create(b, loc, cond, zero, dy).getResult();
}
} // namespace

#define DSC_NO_GRADIENT_RULE(OP)                                               \
  LogicalResult OP::buildGradients(OpBuilder &, ArrayRef<Value>, Grads &) {    \
    return noRule(*this);                                                      \
  }
DSC_NO_GRADIENT_RULE(LayerNormGradOp)
DSC_NO_GRADIENT_RULE(SoftmaxGradOp)
DSC_NO_GRADIENT_RULE(LogSoftmaxGradOp)
DSC_NO_GRADIENT_RULE(CrossEntropyGradOp)
DSC_NO_GRADIENT_RULE(VocabCeSumsGradOp)
DSC_NO_GRADIENT_RULE(VocabCeLossGradOp)
DSC_NO_GRADIENT_RULE(NllLossGradOp)
DSC_NO_GRADIENT_RULE(GeluGradOp)
DSC_NO_GRADIENT_RULE(GeluWithDerivativeOp)
DSC_NO_GRADIENT_RULE(GatherGradOp)
DSC_NO_GRADIENT_RULE(ConvWeightGradOp)
DSC_NO_GRADIENT_RULE(MaxPoolGradOp)
DSC_NO_GRADIENT_RULE(AvgPoolGradOp)
DSC_NO_GRADIENT_RULE(DropoutGradOp)
DSC_NO_GRADIENT_RULE(AttentionGradOp)
DSC_NO_GRADIENT_RULE(MatmulEpilogueOp)
#undef DSC_NO_GRADIENT_RULE

// Ops with boolean results pass no gradient.
#define DSC_NOT_DIFFERENTIABLE(OP)                                             \
  LogicalResult OP::buildGradients(OpBuilder &, ArrayRef<Value>, Grads &g) {   \
    noGradients(*this, g);                                                     \
    return success();                                                          \
  }
DSC_NOT_DIFFERENTIABLE(CmpOp)
DSC_NOT_DIFFERENTIABLE(NotOp)
DSC_NOT_DIFFERENTIABLE(ArgMaxOp)
#undef DSC_NOT_DIFFERENTIABLE

//===--- elementwise ------------------------------------------------------===//

LogicalResult AddOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  binaryGrads(b, *this, dy[0], dy[0], g);
  return success();
}

LogicalResult SubOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  binaryGrads(b, *this, dy[0], NegOp::create(b, getLoc(), dy[0]), g);
  return success();
}

LogicalResult MulOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  Location loc = getLoc();
  binaryGrads(b, *this, mul(b, loc, dy[0], getRhs()), mul(b, loc, dy[0], getLhs()), g);
  return success();
}

LogicalResult DivOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  // d/dl = dy / r;  d/dr = -dy * (l / r) / r = -(dy * y) / r.
  Location loc = getLoc();
  Value dl = DivOp::create(b, loc, dy[0], getRhs());
  Value dr = NegOp::create(b, loc, DivOp::create(b, loc, mul(b, loc, dy[0], getResult()), getRhs()));
  binaryGrads(b, *this, dl, dr, g);
  return success();
}

LogicalResult PowOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  // d/da = dy * b * a^(b-1);  d/db = dy * y * log(a).
  Location loc = getLoc();
  Value one = scalar(b, loc, getLhs(), 1.0);
  Value bm1 = SubOp::create(b, loc, getRhs(), one);
  Value da = mul(b, loc, dy[0], mul(b, loc, getRhs(), PowOp::create(b, loc, getLhs(), bm1)));
  Value db = mul(b, loc, dy[0], mul(b, loc, getResult(), LogOp::create(b, loc, getLhs())));
  binaryGrads(b, *this, da, db, g);
  return success();
}

template <typename Op>
static void minMaxGrads(OpBuilder &b, Op op, Value dy, CmpPredicate pred, Grads &g) {
  // The gradient goes to the operand that was selected (lhs on ties).
  Location loc = op.getLoc();
  Value lhsWins = CmpOp::create(b, loc, pred, op.getLhs(), op.getRhs());
  Value full = BroadcastOp::create(b, loc, op.getType(), dy);
  binaryGrads(b, op, maskGrad(b, loc, lhsWins, full, true),
              maskGrad(b, loc, lhsWins, full, false), g);
}
LogicalResult MaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  minMaxGrads(b, *this, dy[0], CmpPredicate::ge, g);
  return success();
}
LogicalResult MinOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  minMaxGrads(b, *this, dy[0], CmpPredicate::le, g);
  return success();
}

LogicalResult SelectOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  Location loc = getLoc();
  g.assign(3, Value());
  if (isFloatTensor(getLhs().getType()))
    g[1] = reduceToShape(b, loc, maskGrad(b, loc, getCond(), dy[0], true), tensorOf(getLhs()));
  if (isFloatTensor(getRhs().getType()))
    g[2] = reduceToShape(b, loc, maskGrad(b, loc, getCond(), dy[0], false), tensorOf(getRhs()));
  return success();
}

LogicalResult NegOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  g.assign({NegOp::create(b, getLoc(), dy[0])});
  return success();
}

LogicalResult AbsOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  Location loc = getLoc();
  Value negative = CmpOp::create(b, loc, CmpPredicate::lt, getInput(),
                                 scalar(b, loc, getInput(), 0.0));
  g.assign({SelectOp::create(b, loc, negative, NegOp::create(b, loc, dy[0]), dy[0])});
  return success();
}

LogicalResult ExpOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  g.assign({mul(b, getLoc(), dy[0], getResult())});
  return success();
}

LogicalResult LogOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  g.assign({DivOp::create(b, getLoc(), dy[0], getInput())});
  return success();
}

LogicalResult SqrtOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  Location loc = getLoc();
  Value half = mul(b, loc, dy[0], scalar(b, loc, dy[0], 0.5));
  g.assign({DivOp::create(b, loc, half, getResult())});
  return success();
}

LogicalResult RsqrtOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  // d/dx x^-1/2 = -1/2 y^3.
  Location loc = getLoc();
  Value y = getResult();
  Value y3 = mul(b, loc, y, mul(b, loc, y, y));
  g.assign({mul(b, loc, mul(b, loc, dy[0], y3), scalar(b, loc, y, -0.5))});
  return success();
}

LogicalResult ReciprocalOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  Location loc = getLoc();
  Value y = getResult();
  g.assign({NegOp::create(b, loc, mul(b, loc, dy[0], mul(b, loc, y, y)))});
  return success();
}

LogicalResult TanhOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  Location loc = getLoc();
  Value y = getResult();
  Value oneMinus = SubOp::create(b, loc, scalar(b, loc, y, 1.0), mul(b, loc, y, y));
  g.assign({mul(b, loc, dy[0], oneMinus)});
  return success();
}

LogicalResult SinOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  Location loc = getLoc();
  g.assign({mul(b, loc, dy[0], CosOp::create(b, loc, getInput()))});
  return success();
}

LogicalResult CosOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  Location loc = getLoc();
  g.assign({NegOp::create(b, loc, mul(b, loc, dy[0], SinOp::create(b, loc, getInput())))});
  return success();
}

LogicalResult ErfOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  // d/dx erf(x) = 2/sqrt(pi) exp(-x^2).
  Location loc = getLoc();
  Value x = getInput();
  Value e = ExpOp::create(b, loc, NegOp::create(b, loc, mul(b, loc, x, x)));
  Value k = scalar(b, loc, x, 2.0 / std::sqrt(M_PI));
  g.assign({mul(b, loc, dy[0], mul(b, loc, e, k))});
  return success();
}

LogicalResult ReluOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  Location loc = getLoc();
  Value positive = CmpOp::create(b, loc, CmpPredicate::gt, getInput(),
                                 scalar(b, loc, getInput(), 0.0));
  g.assign({maskGrad(b, loc, positive, dy[0], true)});
  return success();
}

LogicalResult SigmoidOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  Location loc = getLoc();
  Value y = getResult();
  Value oneMinus = SubOp::create(b, loc, scalar(b, loc, y, 1.0), y);
  g.assign({mul(b, loc, dy[0], mul(b, loc, y, oneMinus))});
  return success();
}

LogicalResult GeluOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  g.assign({GeluGradOp::create(b, getLoc(), getInput(), dy[0], getApproximation())});
  return success();
}

LogicalResult CastOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  g.assign(1, Value());
  if (isFloatTensor(getInput().getType()))
    g[0] = CastOp::create(b, getLoc(), getInput().getType(), dy[0]);
  return success();
}

//===--- contractions and normalizations ----------------------------------===//

LogicalResult MatmulOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  // C = op(A) op(B): dA' = dC B'^T and dB' = A'^T dC, transposed back when
  // the operand itself was transposed; batch broadcasts are summed away.
  Location loc = getLoc();
  Value A = getLhs(), B = getRhs(), dC = dy[0];
  bool tA = getTransposeLhs(), tB = getTransposeRhs();
  Value dA = tA ? MatmulOp::create(b, loc, B, dC, tB, true).getResult()
                : MatmulOp::create(b, loc, dC, B, false, !tB).getResult();
  Value dB;
  auto aType = tensorOf(A), bType = tensorOf(B), cType = tensorOf(dC);
  if (bType.getRank() == 2 && aType.getRank() > 2 && !tA) {
    // A weight shared by every row of a batched activation: fold the batch
    // into the row dimension so dB is one GEMM, not a batch and a reduction.
    int64_t rows = aType.getNumElements() / aType.getShape().back();
    auto flatA = ReshapeOp::create(
        b, loc, RankedTensorType::get({rows, aType.getShape().back()}, aType.getElementType()), A);
    auto flatC = ReshapeOp::create(
        b, loc, RankedTensorType::get({rows, cType.getShape().back()}, cType.getElementType()), dC);
    dB = tB ? MatmulOp::create(b, loc, flatC, flatA, true, false).getResult()
            : MatmulOp::create(b, loc, flatA, flatC, true, false).getResult();
  } else {
    dB = tB ? MatmulOp::create(b, loc, dC, A, true, tA).getResult()
            : MatmulOp::create(b, loc, A, dC, !tA, false).getResult();
  }
  g.assign({reduceToShape(b, loc, dA, aType), reduceToShape(b, loc, dB, bType)});
  return success();
}

LogicalResult LayerNormOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  auto grad = LayerNormGradOp::create(b, getLoc(), getInput().getType(),
                                      getScale().getType(), getScale().getType(),
                                      dy[0], getInput(), getScale(), getAxis(),
                                      getEpsilon());
  g.assign({grad.getInputGrad(), grad.getScaleGrad()});
  if (getBias())
    g.push_back(grad.getBiasGrad());
  return success();
}

LogicalResult SoftmaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  g.assign({SoftmaxGradOp::create(b, getLoc(), getResult(), dy[0], getAxis())});
  return success();
}

LogicalResult LogSoftmaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  g.assign({LogSoftmaxGradOp::create(b, getLoc(), getResult(), dy[0], getAxis())});
  return success();
}

LogicalResult CrossEntropyOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  g.assign({CrossEntropyGradOp::create(b, getLoc(), getInput().getType(), getInput(),
                                       getLabels(), dy[0], getReduction(),
                                       getIgnoreIndexAttr()),
            Value()});
  return success();
}

// The maxima only shift the exponent: the loss does not depend on them.
LogicalResult VocabCeSumsOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  g.assign({VocabCeSumsGradOp::create(b, getLoc(), getInput().getType(), getInput(),
                                      getLabels(), getMax(), dy[0], getParts()),
            Value(), Value()});
  return success();
}

LogicalResult VocabCeLossOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  g.assign({VocabCeLossGradOp::create(b, getLoc(), getSums().getType(), getSums(),
                                      getLabels(), dy[0], getClasses(), getReduction(),
                                      getIgnoreIndexAttr()),
            Value(), Value()});
  return success();
}

LogicalResult NllLossOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  g.assign({NllLossGradOp::create(b, getLoc(), getInput().getType(), getInput(),
                                  getLabels(), dy[0], getReduction(),
                                  getIgnoreIndexAttr()),
            Value()});
  return success();
}

//===--- indexing, reductions and layout ----------------------------------===//

LogicalResult GatherOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  g.assign(2, Value());
  if (isFloatTensor(getData().getType())) {
    auto grad = GatherGradOp::create(b, getLoc(), getData().getType(), dy[0], getIndices(),
                                     getAxis());
    // A vocabulary-parallel part scatters its own rows only.
    if (Attribute part = (*this)->getAttr("dist.tp_part"))
      grad->setAttr("dist.tp_part", part);
    g[0] = grad;
  }
  return success();
}

/// dy of a reduction broadcast back over the reduced axes.
static Value expandReduced(OpBuilder &b, Location loc, Value dy,
                           RankedTensorType input, ArrayRef<int64_t> axes) {
  SmallVector<int64_t> kept(input.getShape());
  for (int64_t a : axes)
    kept[a < 0 ? a + input.getRank() : a] = 1;
  Value v = dy;
  if (tensorOf(dy).getShape() != ArrayRef<int64_t>(kept))
    v = ReshapeOp::create(b, loc, RankedTensorType::get(kept, input.getElementType()), dy);
  return BroadcastOp::create(b, loc, input, v);
}

LogicalResult ReduceSumOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  g.assign({expandReduced(b, getLoc(), dy[0], tensorOf(getInput()), getAxes())});
  return success();
}

LogicalResult ReduceMeanOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  Location loc = getLoc();
  double count = (double)numElements(getInput().getType()) /
                 (double)numElements(getType());
  Value scaled = mul(b, loc, dy[0], scalar(b, loc, dy[0], 1.0 / count));
  g.assign({expandReduced(b, loc, scaled, tensorOf(getInput()), getAxes())});
  return success();
}

LogicalResult ReduceMaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  // Every element equal to the maximum receives the gradient.
  Location loc = getLoc();
  auto input = tensorOf(getInput());
  Value maxB = expandReduced(b, loc, getResult(), input, getAxes());
  Value isMax = CmpOp::create(b, loc, CmpPredicate::eq, getInput(), maxB);
  Value dyB = expandReduced(b, loc, dy[0], input, getAxes());
  g.assign({maskGrad(b, loc, isMax, dyB, true)});
  return success();
}

LogicalResult ReshapeOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  g.assign({ReshapeOp::create(b, getLoc(), getInput().getType(), dy[0])});
  return success();
}

LogicalResult TransposeOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = i;
  g.assign({TransposeOp::create(b, getLoc(), dy[0], b.getDenseI64ArrayAttr(inverse))});
  return success();
}

LogicalResult SliceOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  g.assign({SliceGradOp::create(b, getLoc(), getInput().getType(), dy[0], getStart(),
                                getLimit(), getStride())});
  return success();
}

LogicalResult ConcatOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  Location loc = getLoc();
  auto out = tensorOf(getResult());
  int64_t axis = (int64_t)getAxis() < 0 ? (int64_t)getAxis() + out.getRank() : (int64_t)getAxis();
  SmallVector<int64_t> start(out.getRank(), 0), limit(out.getShape()),
      stride(out.getRank(), 1);
  g.clear();
  for (Value in : getInputs()) {
    int64_t size = tensorOf(in).getShape()[axis];
    limit[axis] = start[axis] + size;
    g.push_back(isFloatTensor(in.getType())
                    ? SliceOp::create(b, loc, dy[0], b.getDenseI64ArrayAttr(start),
                                      b.getDenseI64ArrayAttr(limit),
                                      b.getDenseI64ArrayAttr(stride))
                          .getResult()
                    : Value());
    start[axis] += size;
  }
  return success();
}

LogicalResult BroadcastOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  g.assign({reduceToShape(b, getLoc(), dy[0], getInput().getType())});
  return success();
}

LogicalResult DropoutOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  g.assign({DropoutGradOp::create(b, getLoc(), dy[0], getMask(), getRatio())});
  return success();
}

// The bias gets no gradient (see the op); the stats are only the backward's.
LogicalResult AttentionOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  if (!dy[0]) {
    g.assign(getNumOperands(), Value());
    return success();
  }
  auto grad = AttentionGradOp::create(b, getLoc(), dy[0], getQuery(), getKey(), getValue(),
                                      getStats(), getBias(), getScaleAttr(), getScaleDividesAttr(),
                                      getCausalAttr(), getRatioAttr(), getRngStreamAttr(),
                                      getBshdAttr());
  // A tensor-parallel part (tensor-parallel's mark): the backward redraws
  // the dropout bits of the same part of the whole tensor.
  if (Attribute split = (*this)->getAttr("dist.tp_split"))
    grad->setAttr("dist.tp_split", split);
  g.assign({grad.getQueryGrad(), grad.getKeyGrad(), grad.getValueGrad()});
  if (getBias())
    g.push_back(Value());
  return success();
}

// slice_grad also pads in forward (ONNX Pad): its input gradient is the
// slice of the output gradient at the same positions.
LogicalResult SliceGradOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  g.assign({SliceOp::create(b, getLoc(), dy[0], getStartAttr(), getLimitAttr(), getStrideAttr())
                .getResult()});
  return success();
}

//===--- convolution and pooling ------------------------------------------===//

LogicalResult ConvOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  Location loc = getLoc();
  Value dx = ConvInputGradOp::create(b, loc, getInput().getType(), dy[0], getWeight(),
                                     getStridesAttr(), getPadsAttr(), getDilationsAttr(),
                                     getGroupsAttr());
  Value dw = ConvWeightGradOp::create(b, loc, getWeight().getType(), getInput(), dy[0],
                                      getStridesAttr(), getPadsAttr(), getDilationsAttr(),
                                      getGroupsAttr());
  g.assign({dx, dw});
  return success();
}

// conv_input_grad is linear in both operands (it is also ConvTranspose's
// forward): out[n, c, p*s - pad + k*d] += grad[n, o, p] * weight[o, c, k], so
// d grad = conv(d out, weight) and d weight = conv_weight_grad(d out, grad).
LogicalResult ConvInputGradOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  Location loc = getLoc();
  Value dgrad = ConvOp::create(b, loc, getGrad().getType(), dy[0], getWeight(), getStridesAttr(),
                               getPadsAttr(), getDilationsAttr(), getGroupsAttr());
  Value dw = ConvWeightGradOp::create(b, loc, getWeight().getType(), dy[0], getGrad(),
                                      getStridesAttr(), getPadsAttr(), getDilationsAttr(),
                                      getGroupsAttr());
  g.assign({dgrad, dw});
  return success();
}

LogicalResult MaxPoolOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  g.assign({MaxPoolGradOp::create(b, getLoc(), getInput().getType(), getInput(), dy[0],
                                  getKernelShapeAttr(), getStridesAttr(), getPadsAttr(),
                                  getDilationsAttr(), getCeilModeAttr())
                .getResult()});
  return success();
}

LogicalResult AvgPoolOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, Grads &g) {
  g.assign({AvgPoolGradOp::create(b, getLoc(), getInput().getType(), dy[0],
                                  getKernelShapeAttr(), getStridesAttr(), getPadsAttr(),
                                  getCeilModeAttr(), getCountIncludePadAttr())
                .getResult()});
  return success();
}
