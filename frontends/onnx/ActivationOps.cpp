//===- ActivationOps.cpp - ONNX activations -> nn compositions -----------===//
//
// The activations torch exports besides Relu, Gelu, Tanh and Sigmoid, each
// lowered to nn ops that autodiff, the memory plan, recompute, mixed
// precision and the parallel passes already handle. Each composition takes
// PyTorch's branch at the boundary (x > 0, not x >= 0), so that its gradient
// there is PyTorch's; a branch that could overflow (exp of a large x) is
// evaluated on a masked input, so that the branch it is not taken on never
// holds an inf that its zero gradient would turn into a NaN.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Composer.h"

#include "dialects/nn/NNDialect.h"

using namespace mlir;

namespace dsc::onnx_import {
namespace {

/// The float input 0, or null after an error naming the node.
Value floatInput(GraphImporter &g) {
  Value x = g.input(0);
  if (x && !nn::isFloatTensor(x.getType())) {
    (void)g.fail("expects a float tensor");
    return {};
  }
  return x;
}

/// The node's output, `build(c, x)` of its float input 0.
template <typename F> LogicalResult compose(GraphImporter &g, F build) {
  Value x = floatInput(g);
  if (!x)
    return failure();
  Composer c(g);
  Value out = build(c, x);
  if (!c.ok() || !out)
    return failure();
  g.setOutput(0, out);
  return success();
}

/// The ELU family: x > 0 ? scale * x : coef * (exp(x * inScale) - 1), the
/// exponential on the masked input (0 where x > 0) so that it never
/// overflows. PyTorch's elu kernel computes exactly this (negcoef = alpha *
/// scale, negiptcoef = input_scale).
Value eluLike(Composer &c, Value x, double scale, double coef, double inScale) {
  Value zero = c.scalar(0.0, x);
  Value positive = c.cmp(nn::CmpPredicate::gt, x, zero);
  Value masked = c.op<nn::SelectOp>({positive, zero, x});
  if (inScale != 1.0)
    masked = c.op<nn::MulOp>({masked, c.scalar(inScale, x)});
  Value negative =
      c.op<nn::MulOp>({c.op<nn::SubOp>({c.unary<nn::ExpOp>(masked), c.scalar(1.0, x)}),
                       c.scalar(coef, x)});
  Value pos = scale == 1.0 ? x : c.op<nn::MulOp>({x, c.scalar(scale, x)});
  return c.op<nn::SelectOp>({positive, pos, negative});
}

LogicalResult elu(GraphImporter &g) {
  double alpha = attrFloat(g.node(), "alpha", 1.0);
  return compose(g, [&](Composer &c, Value x) -> Value {
    return eluLike(c, x, 1.0, alpha, 1.0);
  });
}

LogicalResult selu(GraphImporter &g) {
  // ONNX's defaults are torch's constants (as float32).
  double alpha = attrFloat(g.node(), "alpha", 1.67326319217681884765625);
  double gamma = attrFloat(g.node(), "gamma", 1.05070102214813232421875);
  return compose(g, [&](Composer &c, Value x) -> Value {
    return eluLike(c, x, gamma, alpha * gamma, 1.0);
  });
}

LogicalResult celu(GraphImporter &g) {
  double alpha = attrFloat(g.node(), "alpha", 1.0);
  if (alpha == 0)
    return g.fail("alpha must not be 0 (CELU divides by it)");
  return compose(g, [&](Composer &c, Value x) -> Value {
    return eluLike(c, x, 1.0, alpha, 1.0 / alpha);
  });
}

/// Softplus: log(1 + exp(x)), and x itself above 20 as PyTorch's softplus
/// (threshold 20) returns it, where log(1 + exp(x)) rounds to x in float
/// and exp(x) would overflow further up.
LogicalResult softplus(GraphImporter &g) {
  return compose(g, [&](Composer &c, Value x) -> Value {
    Value big = c.cmp(nn::CmpPredicate::gt, x, c.scalar(20.0, x));
    Value masked = c.op<nn::SelectOp>({big, c.scalar(0.0, x), x});
    Value soft = c.unary<nn::LogOp>(c.op<nn::AddOp>({c.unary<nn::ExpOp>(masked), c.scalar(1.0, x)}));
    return c.op<nn::SelectOp>({big, x, soft});
  });
}

LogicalResult leakyRelu(GraphImporter &g) {
  double alpha = attrFloat(g.node(), "alpha", 0.01);
  return compose(g, [&](Composer &c, Value x) -> Value {
    return c.above(x, 0.0, x, c.op<nn::MulOp>({x, c.scalar(alpha, x)}));
  });
}

/// PRelu: x > 0 ? x : slope * x, the slope (a trained parameter, one per
/// channel or one in all) broadcast to x.
LogicalResult prelu(GraphImporter &g) {
  Value slope = g.input(1);
  if (!slope)
    return failure();
  return compose(g, [&](Composer &c, Value x) {
    return c.above(x, 0.0, x, c.op<nn::MulOp>({slope, x}));
  });
}

/// max(0, min(1, alpha * x + beta)), clamped with selects so that the
/// gradient is alpha strictly inside and 0 at and beyond the ends, as
/// PyTorch's hardsigmoid_backward (-3 < x < 3).
Value hardSigmoidOf(Composer &c, Value x, double alpha, double beta) {
  Value y = c.op<nn::AddOp>({c.op<nn::MulOp>({x, c.scalar(alpha, x)}), c.scalar(beta, x)});
  Value zero = c.scalar(0.0, x), one = c.scalar(1.0, x);
  Value low = c.cmp(nn::CmpPredicate::le, y, zero);
  Value high = c.cmp(nn::CmpPredicate::ge, y, one);
  return c.op<nn::SelectOp>({low, zero, c.op<nn::SelectOp>({high, one, y})});
}

LogicalResult hardSigmoid(GraphImporter &g) {
  double alpha = attrFloat(g.node(), "alpha", 0.2), beta = attrFloat(g.node(), "beta", 0.5);
  return compose(g, [&](Composer &c, Value x) { return hardSigmoidOf(c, x, alpha, beta); });
}

/// HardSwish: x * HardSigmoid(x) with alpha 1/6, beta 0.5 (opset 14).
LogicalResult hardSwish(GraphImporter &g) {
  return compose(g, [&](Composer &c, Value x) {
    return c.op<nn::MulOp>({x, hardSigmoidOf(c, x, 1.0 / 6.0, 0.5)});
  });
}

/// Softsign: x / (1 + |x|), as torch composes it.
LogicalResult softsign(GraphImporter &g) {
  return compose(g, [&](Composer &c, Value x) {
    Value den = c.op<nn::AddOp>({c.unary<nn::AbsOp>(x), c.scalar(1.0, x)});
    return c.op<nn::DivOp>({x, den});
  });
}

/// ThresholdedRelu: x > alpha ? x : 0.
LogicalResult thresholdedRelu(GraphImporter &g) {
  double alpha = attrFloat(g.node(), "alpha", 1.0);
  return compose(g, [&](Composer &c, Value x) { return c.above(x, alpha, x, c.scalar(0.0, x)); });
}

/// Clip (torch.clamp, ReLU6, Hardtanh): the bounds where x passes them,
/// x elsewhere; PyTorch's gradient passes where min <= x <= max (a select
/// on x < min and x > max, so equality keeps x and its gradient). Opset 11
/// on: min and max are optional inputs; before it, attributes.
LogicalResult clip(GraphImporter &g) {
  Value lo, hi;
  if (g.opset() >= 11) {
    if (g.hasInput(1) && !(lo = g.input(1)))
      return failure();
    if (g.hasInput(2) && !(hi = g.input(2)))
      return failure();
    for (Value v : {lo, hi})
      if (v && cast<RankedTensorType>(v.getType()).getRank() != 0)
        return g.fail("min and max must be scalars");
  }
  return compose(g, [&](Composer &c, Value x) -> Value {
    Type et = c.elementType(x);
    if (g.opset() < 11) {
      if (auto a = findAttr(g.node(), "min"))
        lo = g.scalar(widen(a->f()), et);
      if (auto a = findAttr(g.node(), "max"))
        hi = g.scalar(widen(a->f()), et);
    }
    Value y = x;
    if (lo)
      y = c.op<nn::SelectOp>({c.cmp(nn::CmpPredicate::lt, x, lo), lo, y});
    if (hi)
      y = c.op<nn::SelectOp>({c.cmp(nn::CmpPredicate::gt, x, hi), hi, y});
    return y;
  });
}

} // namespace

void registerActivationConverters(ConverterTable &t) {
  t["Clip"] = clip;
  t["Elu"] = elu;
  t["Selu"] = selu;
  t["Celu"] = celu;
  t["Softplus"] = softplus;
  t["LeakyRelu"] = leakyRelu;
  t["PRelu"] = prelu;
  t["HardSigmoid"] = hardSigmoid;
  t["HardSwish"] = hardSwish;
  t["Softsign"] = softsign;
  t["ThresholdedRelu"] = thresholdedRelu;
}

} // namespace dsc::onnx_import
