//===- ElementwiseOps.cpp - ONNX elementwise ops -> nn -------------------===//
#include "frontends/onnx/Composer.h"
#include "frontends/onnx/GraphImporter.h"

#include "dialects/nn/NNDialect.h"

#include <limits>

using namespace mlir;

namespace dsc::onnx_import {
namespace {

/// Casts `v` to `elementType` when they differ (ONNX Pow takes any exponent
/// type; nn ops want one element type).
Value castTo(GraphImporter &g, Value v, Type elementType) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getElementType() == elementType)
    return v;
  return nn::CastOp::create(g.builder(), g.loc(), t.clone(elementType), v);
}

/// ONNX Pow computes an integer base to a float exponent in floating point
/// and converts back; nn.pow needs one element type, so do the same.
LogicalResult pow(GraphImporter &g) {
  Value base = g.input(0), exponent = g.input(1);
  if (!base || !exponent)
    return failure();
  Type bt = cast<RankedTensorType>(base.getType()).getElementType();
  Type et = cast<RankedTensorType>(exponent.getType()).getElementType();
  Type compute = isa<IntegerType>(bt) && isa<FloatType>(et) ? et : bt;
  auto op = g.create<nn::PowOp>({castTo(g, base, compute), castTo(g, exponent, compute)});
  if (failed(op))
    return failure();
  g.setOutput(0, castTo(g, *op, bt));
  return success();
}

template <typename OpTy> LogicalResult binary(GraphImporter &g) {
  Value acc = g.input(0);
  if (!acc)
    return failure();
  Type et = cast<RankedTensorType>(acc.getType()).getElementType();
  // Max/Min are variadic; the others have exactly two inputs.
  for (int k = 1; k < g.node().input_size(); ++k) {
    Value rhs = g.input(k);
    if (!rhs)
      return failure();
    auto op = g.create<OpTy>({acc, castTo(g, rhs, et)});
    if (failed(op))
      return failure();
    acc = *op;
  }
  g.setOutput(0, acc);
  return success();
}

template <nn::CmpPredicate P> LogicalResult compare(GraphImporter &g) {
  Value lhs = g.input(0), rhs = g.input(1);
  if (!lhs || !rhs)
    return failure();
  auto op = g.create<nn::CmpOp>(
      {lhs, rhs}, {g.attr("predicate", nn::CmpPredicateAttr::get(g.context(), P))});
  if (failed(op))
    return failure();
  g.setOutput(0, *op);
  return success();
}

template <typename OpTy> LogicalResult unary(GraphImporter &g) {
  Value x = g.input(0);
  if (!x)
    return failure();
  if (!std::is_same_v<OpTy, nn::NegOp> && !std::is_same_v<OpTy, nn::AbsOp> &&
      !std::is_same_v<OpTy, nn::NotOp> && !nn::isFloatTensor(x.getType()))
    return g.fail("expects a float tensor");
  g.setOutput(0, OpTy::create(g.builder(), g.loc(), x.getType(), x));
  return success();
}

/// ONNX Or / And on run-time bools (nn.MultiheadAttention ors a causal
/// mask with the key padding mask). On 0/1 values Or is max and And is min,
/// so they are computed in float and compared with 0: nn needs no logical
/// ops and dsrt no kernels for them. Constant operands fold before this.
template <typename OpTy> LogicalResult logical(GraphImporter &g) {
  Value a = g.input(0), b = g.input(1);
  if (!a || !b)
    return failure();
  for (Value v : {a, b})
    if (!cast<RankedTensorType>(v.getType()).getElementType().isInteger(1))
      return g.fail("expects bool operands");
  Type f32 = g.builder().getF32Type();
  auto combined = g.create<OpTy>({castTo(g, a, f32), castTo(g, b, f32)});
  if (failed(combined))
    return failure();
  auto op = g.create<nn::CmpOp>(
      {*combined, g.scalar(0.0, f32)},
      {g.attr("predicate", nn::CmpPredicateAttr::get(g.context(), nn::CmpPredicate::ne))});
  if (failed(op))
    return failure();
  g.setOutput(0, *op);
  return success();
}

LogicalResult identity(GraphImporter &g) {
  Value x = g.input(0);
  if (!x)
    return failure();
  g.setOutput(0, x);
  return success();
}

LogicalResult where(GraphImporter &g) {
  Value c = g.input(0), a = g.input(1), b = g.input(2);
  if (!c || !a || !b)
    return failure();
  auto op = g.create<nn::SelectOp>({c, a, b});
  if (failed(op))
    return failure();
  g.setOutput(0, *op);
  return success();
}

LogicalResult castOp(GraphImporter &g) {
  Value x = g.input(0);
  if (!x)
    return failure();
  Type et = g.elementType((int32_t)attrInt(g.node(), "to", 0));
  if (!et)
    return failure();
  g.setOutput(0, castTo(g, x, et));
  return success();
}

/// IsNaN: x != x. IsInf: |x| == inf, or one sign of it.
LogicalResult isNaN(GraphImporter &g) {
  Value x = g.input(0);
  if (!x)
    return failure();
  if (!nn::isFloatTensor(x.getType()))
    return g.fail("a floating-point input is expected");
  Composer c(g);
  return c.finish(c.cmp(nn::CmpPredicate::ne, x, x));
}

LogicalResult isInf(GraphImporter &g) {
  Value x = g.input(0);
  if (!x)
    return failure();
  if (!nn::isFloatTensor(x.getType()))
    return g.fail("a floating-point input is expected");
  bool negative = attrInt(g.node(), "detect_negative", 1) != 0,
       positive = attrInt(g.node(), "detect_positive", 1) != 0;
  Composer c(g);
  double inf = std::numeric_limits<double>::infinity();
  if (positive && negative)
    return c.finish(c.cmp(nn::CmpPredicate::eq, c.unary<nn::AbsOp>(x), c.scalar(inf, x)));
  if (positive || negative)
    return c.finish(c.cmp(nn::CmpPredicate::eq, x, c.scalar(positive ? inf : -inf, x)));
  return c.finish(g.splat(Composer::typeOf(x).clone(g.builder().getI1Type()), 0));
}

} // namespace

void registerElementwiseConverters(ConverterTable &t) {
  t["Add"] = binary<nn::AddOp>;
  t["Sub"] = binary<nn::SubOp>;
  t["Mul"] = binary<nn::MulOp>;
  t["Div"] = binary<nn::DivOp>;
  t["Pow"] = pow;
  t["Max"] = binary<nn::MaxOp>;
  t["Min"] = binary<nn::MinOp>;
  t["Equal"] = compare<nn::CmpPredicate::eq>;
  t["Less"] = compare<nn::CmpPredicate::lt>;
  t["LessOrEqual"] = compare<nn::CmpPredicate::le>;
  t["Greater"] = compare<nn::CmpPredicate::gt>;
  t["GreaterOrEqual"] = compare<nn::CmpPredicate::ge>;
  t["Where"] = where;
  t["Not"] = unary<nn::NotOp>;
  t["Or"] = logical<nn::MaxOp>;
  t["And"] = logical<nn::MinOp>;
  t["Neg"] = unary<nn::NegOp>;
  t["Abs"] = unary<nn::AbsOp>;
  t["Exp"] = unary<nn::ExpOp>;
  t["Log"] = unary<nn::LogOp>;
  t["Sqrt"] = unary<nn::SqrtOp>;
  t["Reciprocal"] = unary<nn::ReciprocalOp>;
  t["Tanh"] = unary<nn::TanhOp>;
  t["Sin"] = unary<nn::SinOp>;
  t["Cos"] = unary<nn::CosOp>;
  t["Erf"] = unary<nn::ErfOp>;
  t["Relu"] = unary<nn::ReluOp>;
  t["Sigmoid"] = unary<nn::SigmoidOp>;
  t["Identity"] = identity;
  t["IsNaN"] = isNaN;
  t["IsInf"] = isInf;
  t["Cast"] = castOp;
}

} // namespace dsc::onnx_import
