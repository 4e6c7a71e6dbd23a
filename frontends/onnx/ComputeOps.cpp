//===- ComputeOps.cpp - ONNX contractions, norms, losses -> nn -----------===//
#include "frontends/onnx/GraphImporter.h"

#include "dialects/nn/NNDialect.h"

using namespace mlir;

namespace dsc::onnx_import {
namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

Value reshape(GraphImporter &g, Value v, ArrayRef<int64_t> shape) {
  auto t = typeOf(v);
  if (t.getShape() == shape)
    return v;
  return nn::ReshapeOp::create(g.builder(), g.loc(), t.clone(shape), v);
}

/// nn.matmul is a floating-point kernel (cuBLAS/oneDNN GEMM).
LogicalResult requireFloat(GraphImporter &g, Value a, Value b) {
  if (!nn::isFloatTensor(a.getType()) || !nn::isFloatTensor(b.getType()))
    return g.fail("integer matrix products are not supported; dsc multiplies "
                  "floating-point tensors (cast the operands to float)");
  return success();
}

LogicalResult matmul(GraphImporter &g) {
  Value a = g.input(0), b = g.input(1);
  if (!a || !b || failed(requireFloat(g, a, b)))
    return failure();
  // ONNX follows numpy.matmul: a 1-D operand gains a unit dimension that the
  // result then drops.
  bool vecA = typeOf(a).getRank() == 1, vecB = typeOf(b).getRank() == 1;
  if (vecA)
    a = reshape(g, a, {1, typeOf(a).getDimSize(0)});
  if (vecB)
    b = reshape(g, b, {typeOf(b).getDimSize(0), 1});
  auto op = g.create<nn::MatmulOp>({a, b});
  if (failed(op))
    return failure();
  Value r = *op;
  SmallVector<int64_t> shape(typeOf(r).getShape());
  if (vecB)
    shape.erase(shape.end() - 1);
  if (vecA)
    shape.erase(shape.end() - (vecB ? 1 : 2));
  g.setOutput(0, reshape(g, r, shape));
  return success();
}

LogicalResult gemm(GraphImporter &g) {
  Value a = g.input(0), b = g.input(1);
  if (!a || !b || failed(requireFloat(g, a, b)))
    return failure();
  SmallVector<NamedAttribute> attrs;
  if (attrInt(g.node(), "transA", 0))
    attrs.push_back(g.attr("transpose_lhs", g.builder().getUnitAttr()));
  if (attrInt(g.node(), "transB", 0))
    attrs.push_back(g.attr("transpose_rhs", g.builder().getUnitAttr()));
  auto op = g.create<nn::MatmulOp>({a, b}, attrs);
  if (failed(op))
    return failure();
  Value r = *op;
  Type et = typeOf(r).getElementType();
  double alpha = attrFloat(g.node(), "alpha", 1.0), beta = attrFloat(g.node(), "beta", 1.0);
  if (alpha != 1.0) {
    auto scaled = g.create<nn::MulOp>({r, g.scalar(alpha, et)});
    if (failed(scaled))
      return failure();
    r = *scaled;
  }
  if (g.hasInput(2) && beta != 0.0) {
    Value c = g.input(2);
    if (!c)
      return failure();
    if (beta != 1.0) {
      auto scaled = g.create<nn::MulOp>({c, g.scalar(beta, et)});
      if (failed(scaled))
        return failure();
      c = *scaled;
    }
    auto sum = g.create<nn::AddOp>({r, c});
    if (failed(sum))
      return failure();
    r = *sum;
  }
  g.setOutput(0, r);
  return success();
}

LogicalResult layerNorm(GraphImporter &g) {
  Value x = g.input(0), scale = g.input(1);
  if (!x || !scale)
    return failure();
  int64_t axis = attrInt(g.node(), "axis", -1);
  double eps = attrFloat(g.node(), "epsilon", 1e-5);
  SmallVector<Value> operands{x, scale};
  if (g.hasInput(2)) {
    Value bias = g.input(2);
    if (!bias)
      return failure();
    operands.push_back(bias);
  }
  auto op = g.create<nn::LayerNormOp>(
      operands, {g.attr("axis", g.builder().getI64IntegerAttr(axis)),
                 g.attr("epsilon", g.builder().getF64FloatAttr(eps))});
  if (failed(op))
    return failure();
  g.setOutput(0, *op);
  if (g.outputUsed(1) || g.outputUsed(2)) {
    // Mean and inverse standard deviation, for graphs that keep them.
    int64_t rank = typeOf(x).getRank(), a = axis < 0 ? axis + rank : axis;
    SmallVector<int64_t> axes;
    for (int64_t k = a; k < rank; ++k)
      axes.push_back(k);
    auto axesAttr = g.attr("axes", g.builder().getDenseI64ArrayAttr(axes));
    auto keep = g.attr("keepdims", g.builder().getUnitAttr());
    auto mean = g.create<nn::ReduceMeanOp>({x}, {axesAttr, keep});
    if (failed(mean))
      return failure();
    auto centered = g.create<nn::SubOp>({x, *mean});
    if (failed(centered))
      return failure();
    auto sq = g.create<nn::MulOp>({*centered, *centered});
    if (failed(sq))
      return failure();
    auto var = g.create<nn::ReduceMeanOp>({*sq}, {axesAttr, keep});
    if (failed(var))
      return failure();
    Type et = typeOf(x).getElementType();
    auto shifted = g.create<nn::AddOp>({*var, g.scalar(eps, et)});
    if (failed(shifted))
      return failure();
    g.setOutput(1, *mean);
    g.setOutput(2, nn::RsqrtOp::create(g.builder(), g.loc(), shifted->getType(), *shifted));
  }
  return success();
}

template <typename OpTy> LogicalResult softmax(GraphImporter &g) {
  Value x = g.input(0);
  if (!x)
    return failure();
  int64_t axis = attrInt(g.node(), "axis", -1), rank = typeOf(x).getRank();
  if (axis < -rank || axis >= rank)
    return g.fail("axis " + Twine(axis) + " is out of range for rank " + Twine(rank));
  g.setOutput(0, OpTy::create(g.builder(), g.loc(), x.getType(), x,
                              g.builder().getI64IntegerAttr(axis)));
  return success();
}

template <typename OpTy> LogicalResult loss(GraphImporter &g) {
  Value scores = g.input(0), labels = g.input(1);
  if (!scores || !labels)
    return failure();
  if (g.hasInput(2))
    return g.fail("per-class loss weights are not supported");
  std::string red = attrString(g.node(), "reduction", "mean");
  auto reduction = nn::symbolizeReduction(red);
  if (!reduction)
    return g.fail("reduction '" + red + "' is not one of none, sum, mean");
  SmallVector<NamedAttribute> attrs{
      g.attr("reduction", nn::ReductionAttr::get(g.context(), *reduction))};
  if (const auto *ii = findAttr(g.node(), "ignore_index"))
    attrs.push_back(g.attr("ignore_index", g.builder().getI64IntegerAttr(ii->i())));
  auto op = g.create<OpTy>({scores, labels}, attrs);
  if (failed(op))
    return failure();
  g.setOutput(0, *op);
  if constexpr (std::is_same_v<OpTy, nn::CrossEntropyOp>)
    if (g.outputUsed(1))
      g.setOutput(1, nn::LogSoftmaxOp::create(g.builder(), g.loc(), scores.getType(),
                                              scores, g.builder().getI64IntegerAttr(1)));
  return success();
}

LogicalResult dropout(GraphImporter &g) {
  Value x = g.input(0);
  if (!x)
    return failure();
  double ratio = 0.5;
  if (g.hasInput(1)) {
    const HostTensor *r = g.constant(1);
    if (!r || r->size() != 1)
      return g.fail("ratio must be a compile-time scalar");
    ratio = r->dtype == onnx::TensorProto::FLOAT ? widen((float)r->asDouble(0))
                                                 : r->asDouble(0);
  }
  bool training = false;
  if (g.hasInput(2)) {
    const HostTensor *t = g.constant(2);
    if (!t || t->size() != 1)
      return g.fail("training_mode must be a compile-time scalar");
    training = t->asInt(0) != 0;
  }
  if (!(ratio >= 0.0 && ratio < 1.0))
    return g.fail("ratio " + std::to_string(ratio) + " must be in [0, 1)");
  auto maskType = typeOf(x).clone(g.builder().getI1Type());
  if (!training || ratio == 0.0) {
    // Inference-mode (or p = 0) dropout is the identity; its mask keeps all.
    g.setOutput(0, x);
    if (g.outputUsed(1))
      g.setOutput(1, g.splat(maskType, 1));
    return success();
  }
  auto op = g.create<nn::DropoutOp>(
      {x},
      {g.attr("ratio", g.builder().getF64FloatAttr(ratio)),
       g.attr("rng_stream", g.builder().getI64IntegerAttr(g.nextRngStream()))},
      /*numResults=*/2);
  if (failed(op))
    return failure();
  g.setOutput(0, op->getResult());
  g.setOutput(1, op->getMask());
  return success();
}

template <typename OpTy> LogicalResult reduce(GraphImporter &g) {
  Value x = g.input(0);
  if (!x)
    return failure();
  std::vector<int64_t> axes;
  bool axesFromInput = std::is_same_v<OpTy, nn::ReduceSumOp>; // opset 13+
  if (axesFromInput && g.hasInput(1)) {
    auto c = g.constantInts(1, "axes");
    if (failed(c))
      return failure();
    axes = *c;
  } else if (auto a = attrInts(g.node(), "axes")) {
    axes = *a;
  }
  if (axes.empty()) {
    if (attrInt(g.node(), "noop_with_empty_axes", 0)) {
      g.setOutput(0, x);
      return success();
    }
    for (int64_t k = 0; k < typeOf(x).getRank(); ++k)
      axes.push_back(k);
  }
  SmallVector<NamedAttribute> attrs{
      g.attr("axes", g.builder().getDenseI64ArrayAttr(axes))};
  if (attrInt(g.node(), "keepdims", 1))
    attrs.push_back(g.attr("keepdims", g.builder().getUnitAttr()));
  auto op = g.create<OpTy>({x}, attrs);
  if (failed(op))
    return failure();
  g.setOutput(0, *op);
  return success();
}

} // namespace

void registerComputeConverters(ConverterTable &t) {
  t["MatMul"] = matmul;
  t["Gemm"] = gemm;
  t["LayerNormalization"] = layerNorm;
  t["Softmax"] = softmax<nn::SoftmaxOp>;
  t["LogSoftmax"] = softmax<nn::LogSoftmaxOp>;
  t["SoftmaxCrossEntropyLoss"] = loss<nn::CrossEntropyOp>;
  t["NegativeLogLikelihoodLoss"] = loss<nn::NllLossOp>;
  t["Dropout"] = dropout;
  t["ReduceSum"] = reduce<nn::ReduceSumOp>;
  t["ReduceMean"] = reduce<nn::ReduceMeanOp>;
  t["ReduceMax"] = reduce<nn::ReduceMaxOp>;
}

} // namespace dsc::onnx_import
