//===- AtenOps.cpp - the ATen op table: overload -> nn ops ---------------===//
//
// One converter per ATen overload (or family), reading the arguments by
// their schema names with the schema's defaults. Shape-only ops (view,
// unsqueeze, flatten, expand) take their result shape from the program's
// own type of the result, which torch.export has computed. Each converter
// builds what the ONNX importer builds for the same computation (a linear
// layer is one matmul with a transposed weight, silu is x * sigmoid(x)), so
// one model gives one IR whichever file it came in.
//
//===----------------------------------------------------------------------===//
#include "frontends/aten/AtenImporter.h"

#include "dialects/nn/NNDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace dsc::aten {
namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

LogicalResult done(AtenImporter &g, Value v, size_t k = 0) {
  if (!v)
    return failure();
  g.setOutput(k, v);
  return success();
}

/// The result shape of a shape-only op on `x` from its own arguments, for
/// a program that declares no result types (TorchScript): view / reshape's
/// sizes (one -1 inferred), unsqueeze, squeeze, flatten, expand's sizes (-1
/// keeps a dimension).
std::optional<SmallVector<int64_t>> shapeFromArguments(AtenImporter &g, Value x) {
  const std::string &t = g.node().target;
  SmallVector<int64_t> in(typeOf(x).getShape());
  int64_t rank = int64_t(in.size());
  auto fail = [&](const Twine &why) -> std::optional<SmallVector<int64_t>> {
    (void)g.fail(why);
    return std::nullopt;
  };
  if (t == "aten.view.default" || t == "aten.reshape.default" ||
      t == "aten._unsafe_view.default") {
    auto sizes = g.integers(t == "aten.reshape.default" ? "shape" : "size");
    if (!sizes)
      return std::nullopt;
    int64_t known = 1, numel = typeOf(x).getNumElements();
    int infer = -1;
    for (size_t k = 0; k < sizes->size(); ++k) {
      if ((*sizes)[k] == -1) {
        if (infer >= 0)
          return fail("more than one size is -1");
        infer = int(k);
      } else if ((*sizes)[k] < 0) {
        return fail("size " + Twine((*sizes)[k]) + " is negative");
      } else {
        known *= (*sizes)[k];
      }
    }
    SmallVector<int64_t> out(sizes->begin(), sizes->end());
    if (infer >= 0) {
      if (known == 0 || numel % known)
        return fail("cannot infer the -1 size of " + nn::formatShape(in) + " viewed as " +
                    formatSizes(*sizes));
      out[infer] = numel / known;
    }
    int64_t total = 1;
    for (int64_t d : out)
      total *= d;
    if (total != numel)
      return fail(nn::formatShape(in) + " cannot be viewed as " + formatSizes(*sizes));
    return out;
  }
  if (t == "aten.unsqueeze.default") {
    auto d = g.integer("dim");
    if (!d)
      return std::nullopt;
    auto axis = g.dim(*d, rank + 1);
    if (!axis)
      return std::nullopt;
    in.insert(in.begin() + *axis, 1);
    return in;
  }
  if (t == "aten.squeeze.dim" || t == "aten.squeeze.dims" || t == "aten.squeeze.default") {
    SmallVector<bool> drop(rank, false);
    if (t == "aten.squeeze.default") {
      for (int64_t k = 0; k < rank; ++k)
        drop[k] = in[k] == 1;
    } else {
      auto dims = g.integers("dim");
      if (!dims)
        return std::nullopt;
      for (int64_t d : *dims) {
        auto axis = g.dim(d, rank);
        if (!axis)
          return std::nullopt;
        if (rank)
          drop[*axis] = in[*axis] == 1;
      }
    }
    SmallVector<int64_t> out;
    for (int64_t k = 0; k < rank; ++k)
      if (!drop[k])
        out.push_back(in[k]);
    return out;
  }
  if (t == "aten.flatten.using_ints") {
    auto s = g.integer("start_dim", 0), e = g.integer("end_dim", -1);
    if (!s || !e)
      return std::nullopt;
    if (rank == 0)
      return SmallVector<int64_t>{1};
    auto a = g.dim(*s, rank), b = g.dim(*e, rank);
    if (!a || !b)
      return std::nullopt;
    if (*a > *b)
      return fail("flatten's start_dim comes after its end_dim");
    SmallVector<int64_t> out(in.begin(), in.begin() + *a);
    int64_t n = 1;
    for (int64_t k = *a; k <= *b; ++k)
      n *= in[k];
    out.push_back(n);
    out.append(in.begin() + *b + 1, in.end());
    return out;
  }
  if (t == "aten.expand.default") {
    auto sizes = g.integers("size");
    if (!sizes)
      return std::nullopt;
    int64_t lead = int64_t(sizes->size()) - rank;
    if (lead < 0)
      return fail("expand to fewer dimensions than " + nn::formatShape(in));
    SmallVector<int64_t> out(sizes->begin(), sizes->end());
    for (int64_t k = 0; k < int64_t(out.size()); ++k) {
      int64_t have = k >= lead ? in[k - lead] : 1;
      if (out[k] == -1) {
        if (k < lead)
          return fail("expand's new leading dimension " + Twine(k) + " is -1");
        out[k] = have;
      } else if (have != 1 && have != out[k]) {
        return fail(nn::formatShape(in) + " does not expand to " + formatSizes(*sizes));
      }
    }
    return out;
  }
  return fail("the program gives no type for the result");
}

/// The result's shape: the program's declared one (torch.export has
/// computed it), else the op's own arguments applied to `x`.
std::optional<SmallVector<int64_t>> resultShape(AtenImporter &g, Value x) {
  if (auto m = g.resultMeta(0))
    return SmallVector<int64_t>(m->sizes.begin(), m->sizes.end());
  return shapeFromArguments(g, x);
}

/// The element type the program declares for result 0, or `fallback`'s.
Type resultElementType(AtenImporter &g, Value fallback) {
  if (auto m = g.resultMeta(0))
    if (Type t = g.elementType(m->dtype))
      return t;
  return fallback ? typeOf(fallback).getElementType() : Type();
}

/// A `dtype` argument's element type; null when it is absent or None.
Type dtypeArgument(AtenImporter &g) {
  if (g.isNone("dtype"))
    return Type();
  auto code = g.integer("dtype");
  return code ? g.elementType(int(*code)) : Type();
}

//===--- Elementwise --------------------------------------------------------===//

/// self OP other (a tensor or a scalar), `alpha` scaling other (add, sub),
/// both in the result's element type (PyTorch's type promotion).
template <typename OpTy> LogicalResult binary(AtenImporter &g) {
  Value self = g.tensor("self");
  if (!self)
    return failure();
  Type et = resultElementType(g, self);
  if (isa<IntegerType>(et) && !isa<IntegerType>(typeOf(self).getElementType()))
    et = typeOf(self).getElementType();
  self = g.cast(self, et);
  Value other = g.operand("other", self);
  if (!other)
    return failure();
  other = g.cast(other, et);
  if (auto alpha = g.real("alpha", 1.0); !alpha)
    return failure();
  else if (*alpha != 1.0)
    other = g.op<nn::MulOp>({other, g.scalar(*alpha, et)});
  return done(g, g.op<OpTy>({self, other}));
}

LogicalResult rsub(AtenImporter &g) { // other - alpha * self
  Value self = g.tensor("self");
  if (!self)
    return failure();
  Value other = g.operand("other", self);
  auto alpha = g.real("alpha", 1.0);
  if (!alpha)
    return failure();
  if (*alpha != 1.0)
    self = g.op<nn::MulOp>({self, g.scalar(*alpha, typeOf(self).getElementType())});
  return done(g, g.op<nn::SubOp>({other, self}));
}

LogicalResult divMode(AtenImporter &g) {
  auto mode = g.string("rounding_mode", std::string());
  if (!mode)
    return failure();
  if (!mode->empty())
    return g.fail("rounding_mode '" + *mode + "' is not supported (dsc divides exactly)");
  return binary<nn::DivOp>(g);
}

template <typename OpTy> LogicalResult unary(AtenImporter &g) {
  Value x = g.tensor("self");
  if (x && !nn::isFloatTensor(x.getType()) && !std::is_same_v<OpTy, nn::NegOp> &&
      !std::is_same_v<OpTy, nn::AbsOp>)
    return g.fail("a floating-point input is expected");
  return done(g, g.unary<OpTy>(x));
}

LogicalResult silu(AtenImporter &g) {
  Value x = g.tensor("self");
  if (x && !nn::isFloatTensor(x.getType()))
    return g.fail("a floating-point input is expected");
  return done(g, g.op<nn::MulOp>({x, g.unary<nn::SigmoidOp>(x)}));
}

LogicalResult gelu(AtenImporter &g) {
  Value x = g.tensor("self");
  auto approx = g.string("approximate", std::string("none"));
  if (!x || !approx)
    return failure();
  auto a = nn::symbolizeGeluApproximation(*approx);
  if (!a)
    return g.fail("approximate '" + *approx + "' is not 'none' or 'tanh'");
  return done(g, g.checked(nn::GeluOp::create(g.builder(), g.loc(), x.getType(), x, *a)));
}

LogicalResult pow(AtenImporter &g) {
  Value x = g.tensor("self");
  if (!x)
    return failure();
  Value e = g.operand("exponent", x);
  return done(g, g.op<nn::PowOp>({x, g.cast(e, typeOf(x).getElementType())}));
}

LogicalResult notOp(AtenImporter &g) {
  Value x = g.tensor("self");
  if (x && !typeOf(x).getElementType().isInteger(1))
    return g.fail("bitwise_not of a non-bool tensor is not supported");
  // Of a constant (a mask buffer), folded here, as the ONNX importer folds
  // Not of a bool initializer.
  if (auto c = x ? x.getDefiningOp<arith::ConstantOp>() : nullptr)
    if (auto d = dyn_cast<DenseElementsAttr>(c.getValue())) {
      SmallVector<bool> flipped;
      for (bool b : d.getValues<bool>())
        flipped.push_back(!b);
      return done(g, arith::ConstantOp::create(
                         g.builder(), g.loc(),
                         DenseElementsAttr::get(d.getType(), ArrayRef<bool>(flipped))));
    }
  return done(g, g.unary<nn::NotOp>(x));
}

template <nn::CmpPredicate P> LogicalResult compare(AtenImporter &g) {
  Value x = g.tensor("self");
  Value y = g.operand("other", x);
  return done(g, g.op<nn::CmpOp>(
                     {x, y}, {g.attr("predicate", nn::CmpPredicateAttr::get(g.context(), P))}));
}

LogicalResult where(AtenImporter &g) {
  Value c = g.tensor("condition"), x = g.tensor("self");
  if (!c || !x)
    return failure();
  Value y = g.operand("other", x);
  return done(g, g.op<nn::SelectOp>({c, x, y}));
}

LogicalResult maskedFill(AtenImporter &g) {
  Value x = g.tensor("self"), mask = g.tensor("mask");
  if (!x || !mask)
    return failure();
  Value fill = g.cast(g.operand("value", x), typeOf(x).getElementType());
  return done(g, g.op<nn::SelectOp>({mask, fill, x}));
}

LogicalResult clamp(AtenImporter &g) {
  Value x = g.tensor("self");
  if (!x)
    return failure();
  Type et = typeOf(x).getElementType();
  if (!g.isNone("min"))
    x = g.op<nn::MaxOp>({x, g.cast(g.operand("min", x), et)});
  if (!g.isNone("max"))
    x = g.op<nn::MinOp>({x, g.cast(g.operand("max", x), et)});
  return done(g, x);
}

LogicalResult identity(AtenImporter &g) { return done(g, g.tensor("self")); }

/// _to_copy, to.dtype, to.device, type_as: a cast to the result's element
/// type (where a tensor lives is dsrt's to decide, not the program's).
LogicalResult toType(AtenImporter &g) {
  Value x = g.tensor("self");
  if (!x)
    return failure();
  Type et = resultElementType(g, Value());
  if (!et && g.node().arg("dtype"))
    et = dtypeArgument(g);
  if (!et && g.node().arg("other"))
    if (Value other = g.tensor("other"))
      et = typeOf(other).getElementType();
  return done(g, g.cast(x, et ? et : typeOf(x).getElementType()));
}

//===--- Contractions, norms, losses ---------------------------------------===//

/// numpy.matmul: a 1-D operand gains a unit dimension the result drops.
LogicalResult matmul(AtenImporter &g) {
  Value a = g.tensor("self"), b = g.tensor(g.node().arg("other") ? "other" : "mat2");
  if (!a || !b)
    return failure();
  if (!nn::isFloatTensor(a.getType()) || !nn::isFloatTensor(b.getType()))
    return g.fail("integer matrix products are not supported");
  bool vecA = typeOf(a).getRank() == 1, vecB = typeOf(b).getRank() == 1;
  if (vecA)
    a = g.reshape(a, {1, typeOf(a).getDimSize(0)});
  if (vecB)
    b = g.reshape(b, {typeOf(b).getDimSize(0), 1});
  Value r = g.op<nn::MatmulOp>({a, b});
  if (!r)
    return failure();
  SmallVector<int64_t> shape(typeOf(r).getShape());
  if (vecB)
    shape.erase(shape.end() - 1);
  if (vecA)
    shape.erase(shape.end() - (vecB ? 1 : 2));
  return done(g, g.reshape(r, shape));
}

/// linear: x W^T (+ b), the form nn-fusion gives the ONNX exporters' output.
LogicalResult linear(AtenImporter &g) {
  Value x = g.tensor("input"), w = g.tensor("weight");
  if (!x || !w)
    return failure();
  Value y = g.op<nn::MatmulOp>({x, w}, {g.attr("transpose_rhs", g.builder().getUnitAttr())});
  if (Value bias = g.optionalTensor("bias"))
    y = g.op<nn::AddOp>({y, bias});
  return done(g, y);
}

/// addmm: beta * self + alpha * (mat1 @ mat2).
LogicalResult addmm(AtenImporter &g) {
  Value c = g.tensor("self"), a = g.tensor("mat1"), b = g.tensor("mat2");
  auto alpha = g.real("alpha", 1.0), beta = g.real("beta", 1.0);
  if (!c || !a || !b || !alpha || !beta)
    return failure();
  Type et = typeOf(a).getElementType();
  Value r = g.op<nn::MatmulOp>({a, b});
  if (*alpha != 1.0)
    r = g.op<nn::MulOp>({r, g.scalar(*alpha, et)});
  if (*beta != 0.0) {
    if (*beta != 1.0)
      c = g.op<nn::MulOp>({c, g.scalar(*beta, et)});
    r = g.op<nn::AddOp>({r, c});
  }
  return done(g, r);
}

LogicalResult layerNorm(AtenImporter &g) {
  Value x = g.tensor("input");
  auto shape = g.integers("normalized_shape");
  auto eps = g.real("eps", 1e-5);
  if (!x || !shape || !eps)
    return failure();
  int64_t rank = typeOf(x).getRank(), n = shape->size();
  if (n < 1 || n > rank)
    return g.fail("normalized_shape of " + Twine(n) + " dims for an input of rank " + Twine(rank));
  Value scale = g.optionalTensor("weight");
  if (!scale)
    scale = g.splat(RankedTensorType::get(*shape, typeOf(x).getElementType()), 1.0);
  SmallVector<Value> operands{x, scale};
  if (Value bias = g.optionalTensor("bias"))
    operands.push_back(bias);
  Value y = g.op<nn::LayerNormOp>(
      operands, {g.attr("axis", g.builder().getI64IntegerAttr(rank == n ? 0 : -n)),
                 g.attr("epsilon", g.builder().getF64FloatAttr(*eps))});
  if (!y)
    return failure();
  // native_layer_norm's mean and rstd are for PyTorch's own backward.
  if (g.resultUsed(1) || g.resultUsed(2))
    return g.fail("its mean and rstd results are used; dsc derives the backward itself");
  return done(g, y);
}

template <typename OpTy> LogicalResult softmax(AtenImporter &g) {
  Value x = g.tensor("self");
  auto d = g.integer("dim");
  if (!x || !d)
    return failure();
  auto axis = g.dim(*d, typeOf(x).getRank());
  if (!axis)
    return failure();
  if (!nn::isFloatTensor(x.getType()))
    return g.fail("a floating-point input is expected");
  Value y = g.checked(OpTy::create(g.builder(), g.loc(), x.getType(), x,
                                   g.builder().getI64IntegerAttr(*axis - typeOf(x).getRank())));
  return done(g, g.cast(y, resultElementType(g, x)));
}

LogicalResult crossEntropy(AtenImporter &g) {
  Value scores = g.tensor("self"), labels = g.tensor("target");
  auto reduction = g.integer("reduction", 1);
  auto ignore = g.integer("ignore_index", -100);
  auto smoothing = g.real("label_smoothing", 0.0);
  if (!scores || !labels || !reduction || !ignore || !smoothing)
    return failure();
  if (!g.isNone("weight"))
    return g.fail("per-class loss weights are not supported");
  if (*smoothing != 0.0)
    return g.fail("label_smoothing is not supported");
  static const nn::Reduction kinds[] = {nn::Reduction::none, nn::Reduction::mean,
                                        nn::Reduction::sum};
  if (*reduction < 0 || *reduction > 2)
    return g.fail("reduction " + Twine(*reduction) + " is not 0 (none), 1 (mean) or 2 (sum)");
  return done(g, g.op<nn::CrossEntropyOp>(
                     {scores, labels},
                     {g.attr("reduction", nn::ReductionAttr::get(g.context(), kinds[*reduction])),
                      g.attr("ignore_index", g.builder().getI64IntegerAttr(*ignore))}));
}

/// nll_loss_forward's results are (loss, total_weight).
LogicalResult nllLoss(AtenImporter &g) {
  Value scores = g.tensor("self"), labels = g.tensor("target");
  auto reduction = g.integer("reduction", 1);
  auto ignore = g.integer("ignore_index", -100);
  if (!scores || !labels || !reduction || !ignore)
    return failure();
  if (!g.isNone("weight"))
    return g.fail("per-class loss weights are not supported");
  static const nn::Reduction kinds[] = {nn::Reduction::none, nn::Reduction::mean,
                                        nn::Reduction::sum};
  if (*reduction < 0 || *reduction > 2)
    return g.fail("reduction " + Twine(*reduction) + " is not 0 (none), 1 (mean) or 2 (sum)");
  if (g.resultUsed(1))
    return g.fail("its total_weight result is used; dsc derives the backward itself");
  return done(g, g.op<nn::NllLossOp>(
                     {scores, labels},
                     {g.attr("reduction", nn::ReductionAttr::get(g.context(), kinds[*reduction])),
                      g.attr("ignore_index", g.builder().getI64IntegerAttr(*ignore))}));
}

template <typename OpTy> LogicalResult reduce(AtenImporter &g) {
  Value x = g.tensor("self");
  if (!x)
    return failure();
  int64_t rank = typeOf(x).getRank();
  auto dims = g.integers("dim", std::vector<int64_t>{});
  auto keep = g.boolean("keepdim", false);
  if (!dims || !keep)
    return failure();
  SmallVector<int64_t> axes;
  for (int64_t d : *dims) {
    auto a = g.dim(d, rank);
    if (!a)
      return failure();
    axes.push_back(*a);
  }
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  SmallVector<NamedAttribute> attrs{g.attr("axes", g.builder().getDenseI64ArrayAttr(axes))};
  if (*keep)
    attrs.push_back(g.attr("keepdims", g.builder().getUnitAttr()));
  Type et = resultElementType(g, x);
  return done(g, g.op<OpTy>({g.cast(x, et)}, attrs));
}

/// Inverted dropout, drawn by dsc's counter-based generator (exact under
/// recomputation); p = 0 or train = False is the identity.
LogicalResult dropout(AtenImporter &g) {
  Value x = g.tensor("input");
  auto p = g.real("p");
  auto train = g.boolean("train", true);
  if (!x || !p || !train)
    return failure();
  if (!(*p >= 0.0 && *p < 1.0))
    return g.fail("p " + std::to_string(*p) + " must be in [0, 1)");
  auto maskType = typeOf(x).clone(g.builder().getI1Type());
  if (!*train || *p == 0.0) {
    g.setOutput(1, g.splat(maskType, 1));
    return done(g, x);
  }
  if (!nn::isFloatTensor(x.getType()))
    return g.fail("a floating-point input is expected");
  auto op = nn::DropoutOp::create(
      g.builder(), g.loc(), TypeRange{x.getType(), maskType}, ValueRange{x},
      {g.attr("ratio", g.builder().getF64FloatAttr(*p)),
       g.attr("rng_stream", g.builder().getI64IntegerAttr(g.nextRngStream()))});
  Value mask = op.getMask();
  Value y = g.checked(op);
  if (y)
    g.setOutput(1, mask);
  return done(g, y);
}

/// scaled_dot_product_attention as the math reference computes it:
/// softmax(q k^T * scale + mask) v, the causal mask a lower triangle.
LogicalResult sdpa(AtenImporter &g) {
  Value q = g.tensor("query"), k = g.tensor("key"), v = g.tensor("value");
  auto dropoutP = g.real("dropout_p", 0.0);
  auto causal = g.boolean("is_causal", false);
  auto gqa = g.boolean("enable_gqa", false);
  if (!q || !k || !v || !dropoutP || !causal || !gqa)
    return failure();
  auto qt = typeOf(q), kt = typeOf(k);
  if (qt.getRank() < 2 || kt.getRank() != qt.getRank())
    return g.fail("query and key must have the same rank, at least 2");
  int64_t L = qt.getDimSize(qt.getRank() - 2), S = kt.getDimSize(kt.getRank() - 2),
          E = qt.getDimSize(qt.getRank() - 1);
  if (*gqa && qt.getRank() >= 3 && qt.getDimSize(qt.getRank() - 3) != kt.getDimSize(kt.getRank() - 3))
    return g.fail("grouped-query attention (enable_gqa with fewer key heads) is not supported; "
                  "repeat the key and value heads before attention");
  double scale = 1.0 / std::sqrt(double(E));
  if (!g.isNone("scale")) {
    auto s = g.real("scale");
    if (!s)
      return failure();
    scale = *s;
  }
  Type et = qt.getElementType();
  if (!nn::isFloatTensor(qt))
    return g.fail("floating-point query, key and value are expected");
  Value scores = g.op<nn::MatmulOp>({q, k}, {g.attr("transpose_rhs", g.builder().getUnitAttr())});
  scores = g.op<nn::MulOp>({scores, g.scalar(scale, et)});
  Value ninf = g.scalar(-std::numeric_limits<double>::infinity(), et);
  if (*causal) {
    if (!g.isNone("attn_mask"))
      return g.fail("attn_mask with is_causal=True (PyTorch refuses it too)");
    if (L * S > (int64_t(1) << 28))
      return g.fail("a causal mask of " + Twine(L) + " x " + Twine(S) +
                    " is too large to build as a constant");
    SmallVector<bool> lower(L * S);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < S; ++j)
        lower[i * S + j] = j <= i;
    auto maskType = RankedTensorType::get({L, S}, g.builder().getI1Type());
    Value mask = arith::ConstantOp::create(g.builder(), g.loc(),
                                           DenseElementsAttr::get(maskType, ArrayRef<bool>(lower)));
    scores = g.op<nn::SelectOp>({mask, scores, ninf});
  } else if (Value mask = g.optionalTensor("attn_mask")) {
    if (typeOf(mask).getElementType().isInteger(1))
      scores = g.op<nn::SelectOp>({mask, scores, ninf});
    else
      scores = g.op<nn::AddOp>({scores, g.cast(mask, et)});
  } else if (!g.isNone("attn_mask")) {
    return failure();
  }
  if (!scores)
    return failure();
  Value attn = g.checked(nn::SoftmaxOp::create(g.builder(), g.loc(), scores.getType(), scores,
                                               g.builder().getI64IntegerAttr(-1)));
  if (!attn)
    return failure();
  if (*dropoutP > 0.0) {
    if (*dropoutP >= 1.0)
      return g.fail("dropout_p " + std::to_string(*dropoutP) + " must be in [0, 1)");
    auto maskType = typeOf(attn).clone(g.builder().getI1Type());
    attn = g.checked(nn::DropoutOp::create(
        g.builder(), g.loc(), TypeRange{attn.getType(), maskType}, ValueRange{attn},
        {g.attr("ratio", g.builder().getF64FloatAttr(*dropoutP)),
         g.attr("rng_stream", g.builder().getI64IntegerAttr(g.nextRngStream()))}));
  }
  return done(g, g.op<nn::MatmulOp>({attn, v}));
}

LogicalResult embedding(AtenImporter &g) {
  Value w = g.tensor("weight"), idx = g.tensor("indices");
  auto padding = g.integer("padding_idx", -1);
  auto byFreq = g.boolean("scale_grad_by_freq", false);
  if (!w || !idx || !padding || !byFreq)
    return failure();
  if (*padding != -1)
    return g.fail("padding_idx is not supported (its row would train; PyTorch keeps it fixed)");
  if (*byFreq)
    return g.fail("scale_grad_by_freq is not supported");
  return done(g, g.op<nn::GatherOp>({w, idx}, {g.attr("axis", g.builder().getI64IntegerAttr(0))}));
}

//===--- Layout -------------------------------------------------------------===//

/// view, reshape, unsqueeze, squeeze, flatten: the program's result shape.
LogicalResult reshapeOp(AtenImporter &g) {
  Value x = g.tensor("self");
  if (!x)
    return failure();
  auto shape = resultShape(g, x);
  if (!shape)
    return failure();
  return done(g, g.reshape(x, *shape));
}

LogicalResult expand(AtenImporter &g) {
  Value x = g.tensor("self");
  if (!x)
    return failure();
  auto shape = resultShape(g, x);
  if (!shape)
    return failure();
  if (typeOf(x).getShape() == ArrayRef<int64_t>(*shape))
    return done(g, x);
  return done(g, g.made<nn::BroadcastOp>(typeOf(x).clone(*shape), {x}));
}

LogicalResult transposeInt(AtenImporter &g) {
  Value x = g.tensor("self");
  auto d0 = g.integer("dim0"), d1 = g.integer("dim1");
  if (!x || !d0 || !d1)
    return failure();
  int64_t rank = typeOf(x).getRank();
  auto a = g.dim(*d0, rank), b = g.dim(*d1, rank);
  if (!a || !b)
    return failure();
  if (rank == 0)
    return done(g, x);
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    perm.push_back(d);
  std::swap(perm[*a], perm[*b]);
  return done(g, g.transpose(x, perm));
}

LogicalResult tOp(AtenImporter &g) {
  Value x = g.tensor("self");
  if (!x)
    return failure();
  if (typeOf(x).getRank() > 2)
    return g.fail("t() of a tensor of rank > 2");
  return done(g, typeOf(x).getRank() < 2 ? x : g.transpose(x, {1, 0}));
}

LogicalResult permute(AtenImporter &g) {
  Value x = g.tensor("self");
  auto dims = g.integers("dims");
  if (!x || !dims)
    return failure();
  int64_t rank = typeOf(x).getRank();
  if ((int64_t)dims->size() != rank)
    return g.fail("dims has " + Twine(dims->size()) + " entries for rank " + Twine(rank));
  SmallVector<int64_t> perm;
  SmallVector<bool> seen(rank, false);
  for (int64_t d : *dims) {
    auto a = g.dim(d, rank);
    if (!a)
      return failure();
    if (seen[*a])
      return g.fail("dims names dimension " + Twine(*a) + " twice");
    seen[*a] = true;
    perm.push_back(*a);
  }
  return done(g, g.transpose(x, perm));
}

/// split.Tensor, split_with_sizes, chunk, unbind: slices along `dim`.
LogicalResult split(AtenImporter &g) {
  Value x = g.tensor("self");
  auto d = g.integer("dim", 0);
  if (!x || !d)
    return failure();
  auto axis = g.dim(*d, typeOf(x).getRank());
  if (!axis)
    return failure();
  int64_t n = typeOf(x).getDimSize(*axis);
  const std::string &target = g.node().target;
  std::vector<int64_t> sizes;
  if (target == "aten.split_with_sizes.default") {
    auto s = g.integers("split_sizes");
    if (!s)
      return failure();
    sizes = *s;
  } else if (target == "aten.unbind.int") {
    sizes.assign(n, 1);
  } else {
    int64_t chunk;
    if (target == "aten.chunk.default") {
      auto c = g.integer("chunks");
      if (!c)
        return failure();
      if (*c < 1)
        return g.fail("chunks must be positive");
      chunk = (n + *c - 1) / *c;
    } else {
      auto s = g.integer("split_size");
      if (!s)
        return failure();
      chunk = *s;
    }
    if (chunk < 1 && n > 0)
      return g.fail("split size must be positive");
    for (int64_t at = 0; at < n; at += chunk)
      sizes.push_back(std::min(chunk, n - at));
  }
  int64_t total = 0;
  for (int64_t s : sizes)
    total += s;
  if (total != n || sizes.size() != g.node().outputs.size())
    return g.fail("the pieces do not cover dimension " + Twine(*axis) + " of size " + Twine(n) +
                  " with " + Twine(g.node().outputs.size()) + " results");
  int64_t at = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    Value piece = g.slice(x, *axis, at, at + sizes[k]);
    at += sizes[k];
    if (target == "aten.unbind.int" && piece) {
      SmallVector<int64_t> shape(typeOf(piece).getShape());
      shape.erase(shape.begin() + *axis);
      piece = g.reshape(piece, shape);
    }
    if (!piece)
      return failure();
    g.setOutput(k, piece);
  }
  return success();
}

LogicalResult sliceOp(AtenImporter &g) {
  Value x = g.tensor("self");
  auto d = g.integer("dim", 0), step = g.integer("step", 1);
  if (!x || !d || !step)
    return failure();
  auto axis = g.dim(*d, typeOf(x).getRank());
  if (!axis)
    return failure();
  int64_t n = typeOf(x).getDimSize(*axis);
  auto bound = [&](const char *name, int64_t dflt) -> std::optional<int64_t> {
    if (g.isNone(name))
      return dflt;
    auto v = g.integer(name);
    if (!v)
      return std::nullopt;
    int64_t i = *v < 0 ? *v + n : *v;
    return std::clamp<int64_t>(i, 0, n);
  };
  auto lo = bound("start", 0), hi = bound("end", n);
  if (!lo || !hi)
    return failure();
  if (*step < 1)
    return g.fail("step must be positive");
  return done(g, g.slice(x, *axis, *lo, std::max(*lo, *hi), *step));
}

LogicalResult select(AtenImporter &g) {
  Value x = g.tensor("self");
  auto d = g.integer("dim"), index = g.integer("index");
  if (!x || !d || !index)
    return failure();
  auto axis = g.dim(*d, typeOf(x).getRank());
  if (!axis)
    return failure();
  int64_t n = typeOf(x).getDimSize(*axis), i = *index < 0 ? *index + n : *index;
  if (i < 0 || i >= n)
    return g.fail("index " + Twine(*index) + " is out of range for size " + Twine(n));
  SmallVector<int64_t> shape(typeOf(x).getShape());
  shape.erase(shape.begin() + *axis);
  return done(g, g.reshape(g.slice(x, *axis, i, i + 1), shape));
}

LogicalResult cat(AtenImporter &g) {
  auto xs = g.tensors("tensors");
  auto d = g.integer("dim", 0);
  if (!xs || !d || xs->empty())
    return xs && xs->empty() ? g.fail("cat of no tensors") : failure();
  auto axis = g.dim(*d, typeOf(xs->front()).getRank());
  if (!axis)
    return failure();
  if (xs->size() == 1)
    return done(g, xs->front());
  return done(g, g.op<nn::ConcatOp>(*xs, {g.attr("axis", g.builder().getI64IntegerAttr(*axis))}));
}

//===--- Constants ----------------------------------------------------------===//

/// arange, full, ones, zeros (and their _like forms): compile-time tensors
/// of the result's declared type.
LogicalResult arange(AtenImporter &g) {
  auto m = g.resultMeta(0);
  if (!m) {
    // From the arguments (TorchScript): PyTorch's rule, int64 unless a
    // bound is a float (then the default float32), or the dtype given.
    auto number = [&](const char *name, double dflt, bool &isFloat) -> std::optional<double> {
      const aten::Arg *a = g.node().arg(name);
      if (!a)
        return dflt;
      isFloat |= a->kind == aten::Arg::Float;
      return g.real(name);
    };
    bool isFloat = false;
    auto end = number("end", 0, isFloat), start = number("start", 0, isFloat),
         step = number("step", 1, isFloat);
    if (!end || !start || !step)
      return failure();
    if (*step == 0)
      return g.fail("arange's step is 0");
    TensorMeta meta;
    Type given = dtypeArgument(g);
    meta.dtype = int(isFloat ? ScalarType::Float : ScalarType::Long);
    double n = std::ceil((*end - *start) / *step);
    meta.sizes = {int64_t(std::max(0.0, n))};
    m = meta;
    if (given) {
      for (int code : {int(ScalarType::Float), int(ScalarType::Long), int(ScalarType::Int),
                       int(ScalarType::Double), int(ScalarType::Half),
                       int(ScalarType::BFloat16)})
        if (g.elementType(code) == given)
          m->dtype = code;
    }
  }
  Type et = g.elementType(m->dtype);
  if (!et || m->sizes.size() != 1)
    return g.fail("arange of another type or rank");
  double start = 0, step = 1;
  if (g.node().arg("start")) {
    auto s = g.real("start");
    if (!s)
      return failure();
    start = *s;
  }
  if (g.node().arg("step")) {
    auto s = g.real("step");
    if (!s)
      return failure();
    step = *s;
  }
  auto type = RankedTensorType::get(m->sizes, et);
  int64_t n = m->sizes[0];
  if (n > (int64_t(1) << 24))
    return g.fail("arange of " + Twine(n) + " elements is too large to build as a constant");
  DenseElementsAttr attr;
  if (auto ft = dyn_cast<FloatType>(et)) {
    SmallVector<APFloat> v;
    for (int64_t i = 0; i < n; ++i) {
      APFloat x(start + double(i) * step);
      bool lost;
      x.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      v.push_back(x);
    }
    attr = DenseElementsAttr::get(type, v);
  } else {
    SmallVector<APInt> v;
    for (int64_t i = 0; i < n; ++i)
      v.push_back(APInt(et.getIntOrFloatBitWidth(), uint64_t(int64_t(start + double(i) * step)),
                        true, true));
    attr = DenseElementsAttr::get(type, v);
  }
  return done(g, arith::ConstantOp::create(g.builder(), g.loc(), attr));
}

LogicalResult fill(AtenImporter &g) {
  auto m = g.resultMeta(0);
  Type et = m ? g.elementType(m->dtype) : Type();
  SmallVector<int64_t> sizes;
  if (m) {
    if (!et)
      return g.fail("element type " + scalarTypeName(m->dtype) + " is not supported");
    sizes.assign(m->sizes.begin(), m->sizes.end());
  } else if (llvm::StringRef(g.node().target).contains("_like")) {
    // From the arguments (TorchScript): self's shape, its type or dtype.
    Value self = g.tensor("self");
    if (!self)
      return failure();
    sizes.assign(typeOf(self).getShape().begin(), typeOf(self).getShape().end());
    et = dtypeArgument(g);
    if (!et)
      et = typeOf(self).getElementType();
  } else {
    auto s = g.integers("size");
    if (!s)
      return failure();
    sizes.assign(s->begin(), s->end());
    et = dtypeArgument(g);
    if (!et)
      et = g.builder().getF32Type();
  }
  const std::string &target = g.node().target;
  double v = 0;
  if (llvm::StringRef(target).contains("ones"))
    v = 1;
  else if (llvm::StringRef(target).contains("full")) {
    auto f = g.real("fill_value");
    if (!f)
      return failure();
    v = *f;
  }
  return done(g, g.splat(RankedTensorType::get(sizes, et), v));
}

const std::map<std::string, Converter> &table() {
  static const std::map<std::string, Converter> t = {
      // Elementwise.
      {"aten.add.Tensor", binary<nn::AddOp>},
      {"aten.add.Scalar", binary<nn::AddOp>},
      {"aten.sub.Tensor", binary<nn::SubOp>},
      {"aten.sub.Scalar", binary<nn::SubOp>},
      {"aten.rsub.Scalar", rsub},
      {"aten.rsub.Tensor", rsub},
      {"aten.mul.Tensor", binary<nn::MulOp>},
      {"aten.mul.Scalar", binary<nn::MulOp>},
      {"aten.div.Tensor", binary<nn::DivOp>},
      {"aten.div.Scalar", binary<nn::DivOp>},
      {"aten.div.Tensor_mode", divMode},
      {"aten.maximum.default", binary<nn::MaxOp>},
      {"aten.minimum.default", binary<nn::MinOp>},
      {"aten.pow.Tensor_Scalar", pow},
      {"aten.pow.Tensor_Tensor", pow},
      {"aten.neg.default", unary<nn::NegOp>},
      {"aten.abs.default", unary<nn::AbsOp>},
      {"aten.exp.default", unary<nn::ExpOp>},
      {"aten.log.default", unary<nn::LogOp>},
      {"aten.sqrt.default", unary<nn::SqrtOp>},
      {"aten.rsqrt.default", unary<nn::RsqrtOp>},
      {"aten.reciprocal.default", unary<nn::ReciprocalOp>},
      {"aten.tanh.default", unary<nn::TanhOp>},
      {"aten.sin.default", unary<nn::SinOp>},
      {"aten.cos.default", unary<nn::CosOp>},
      {"aten.erf.default", unary<nn::ErfOp>},
      {"aten.relu.default", unary<nn::ReluOp>},
      {"aten.sigmoid.default", unary<nn::SigmoidOp>},
      {"aten.silu.default", silu},
      {"aten.gelu.default", gelu},
      {"aten.bitwise_not.default", notOp},
      {"aten.logical_not.default", notOp},
      {"aten.eq.Tensor", compare<nn::CmpPredicate::eq>},
      {"aten.eq.Scalar", compare<nn::CmpPredicate::eq>},
      {"aten.lt.Tensor", compare<nn::CmpPredicate::lt>},
      {"aten.lt.Scalar", compare<nn::CmpPredicate::lt>},
      {"aten.le.Tensor", compare<nn::CmpPredicate::le>},
      {"aten.le.Scalar", compare<nn::CmpPredicate::le>},
      {"aten.gt.Tensor", compare<nn::CmpPredicate::gt>},
      {"aten.gt.Scalar", compare<nn::CmpPredicate::gt>},
      {"aten.ge.Tensor", compare<nn::CmpPredicate::ge>},
      {"aten.ge.Scalar", compare<nn::CmpPredicate::ge>},
      {"aten.where.self", where},
      {"aten.masked_fill.Scalar", maskedFill},
      {"aten.masked_fill.Tensor", maskedFill},
      {"aten.clamp.default", clamp},
      {"aten.clone.default", identity},
      {"aten.contiguous.default", identity},
      {"aten.alias.default", identity},
      {"aten.detach.default", identity},
      {"aten.lift_fresh_copy.default", identity},
      {"aten._to_copy.default", toType},
      {"aten.to.device", toType},
      {"aten.to.dtype", toType},
      {"aten.type_as.default", toType},
      // Contractions, norms, losses.
      {"aten.linear.default", linear},
      {"aten.matmul.default", matmul},
      {"aten.mm.default", matmul},
      {"aten.bmm.default", matmul},
      {"aten.addmm.default", addmm},
      {"aten.layer_norm.default", layerNorm},
      {"aten.native_layer_norm.default", layerNorm},
      {"aten.softmax.int", softmax<nn::SoftmaxOp>},
      {"aten._softmax.default", softmax<nn::SoftmaxOp>},
      {"aten.log_softmax.int", softmax<nn::LogSoftmaxOp>},
      {"aten._log_softmax.default", softmax<nn::LogSoftmaxOp>},
      {"aten.cross_entropy_loss.default", crossEntropy},
      {"aten.nll_loss.default", nllLoss},
      {"aten.nll_loss_forward.default", nllLoss},
      {"aten.mean.dim", reduce<nn::ReduceMeanOp>},
      {"aten.mean.default", reduce<nn::ReduceMeanOp>},
      {"aten.sum.dim_IntList", reduce<nn::ReduceSumOp>},
      {"aten.sum.default", reduce<nn::ReduceSumOp>},
      {"aten.amax.default", reduce<nn::ReduceMaxOp>},
      {"aten.dropout.default", dropout},
      {"aten.native_dropout.default", dropout},
      {"aten.scaled_dot_product_attention.default", sdpa},
      {"aten.embedding.default", embedding},
      // Layout.
      {"aten.view.default", reshapeOp},
      {"aten.reshape.default", reshapeOp},
      {"aten._unsafe_view.default", reshapeOp},
      {"aten.unsqueeze.default", reshapeOp},
      {"aten.squeeze.dim", reshapeOp},
      {"aten.squeeze.dims", reshapeOp},
      {"aten.squeeze.default", reshapeOp},
      {"aten.flatten.using_ints", reshapeOp},
      {"aten.expand.default", expand},
      {"aten.transpose.int", transposeInt},
      {"aten.t.default", tOp},
      {"aten.permute.default", permute},
      {"aten.split.Tensor", split},
      {"aten.split_with_sizes.default", split},
      {"aten.chunk.default", split},
      {"aten.unbind.int", split},
      {"aten.slice.Tensor", sliceOp},
      {"aten.select.int", select},
      {"aten.cat.default", cat},
      // Constants.
      {"aten.arange.default", arange},
      {"aten.arange.start", arange},
      {"aten.arange.start_step", arange},
      {"aten.full.default", fill},
      {"aten.full_like.default", fill},
      {"aten.ones.default", fill},
      {"aten.ones_like.default", fill},
      {"aten.zeros.default", fill},
      {"aten.zeros_like.default", fill},
  };
  return t;
}

} // namespace

const std::map<std::string, Converter> &opTable() { return table(); }

} // namespace dsc::aten
