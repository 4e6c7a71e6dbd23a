//===- LayoutOps.cpp - ONNX shape, layout and constant ops -> nn ---------===//
#include "frontends/onnx/GraphImporter.h"

#include "dialects/nn/NNDialect.h"

using namespace mlir;

namespace dsc::onnx_import {
namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

std::string shapeStr(ArrayRef<int64_t> s) { return nn::formatShape(s); }

/// Reshapes input 0 to `shape`. A compile-time input stays on the host, so
/// chains like Shape -> Gather -> Unsqueeze -> Concat fold completely.
LogicalResult emitReshape(GraphImporter &g, ArrayRef<int64_t> shape) {
  RankedTensorType t = g.inputType(0);
  if (!t)
    return failure();
  std::vector<int64_t> dims(shape.begin(), shape.end());
  auto n = checkedNumElements(dims);
  if (!n)
    return g.fail("target " + describeBadShape(dims));
  if (*n != t.getNumElements())
    return g.fail("cannot reshape " + shapeStr(t.getShape()) + " (" +
                  Twine(t.getNumElements()) + " elements) to " + shapeStr(shape));
  if (const HostTensor *c = g.constant(0)) {
    HostTensor r = *c;
    r.shape = dims;
    g.setOutput(0, std::move(r));
    return success();
  }
  Value x = g.input(0);
  if (!x)
    return failure();
  if (t.getShape() == shape)
    g.setOutput(0, x);
  else
    g.setOutput(0, nn::ReshapeOp::create(g.builder(), g.loc(), t.clone(shape), x));
  return success();
}

LogicalResult reshape(GraphImporter &g) {
  RankedTensorType xt = g.inputType(0);
  auto target = g.constantInts(1, "the target shape");
  if (!xt || failed(target))
    return failure();
  ArrayRef<int64_t> in = xt.getShape();
  bool allowZero = attrInt(g.node(), "allowzero", 0);
  SmallVector<int64_t> shape;
  int inferred = -1;
  int64_t known = 1;
  for (size_t k = 0; k < target->size(); ++k) {
    int64_t d = (*target)[k];
    if (d == 0 && !allowZero) {
      if (k >= in.size())
        return g.fail("target dimension " + Twine(k) + " copies an input dimension that does not exist");
      d = in[k];
    }
    if (d == -1) {
      if (inferred >= 0)
        return g.fail("target shape " + shapeStr(*target) + " has more than one -1");
      inferred = (int)k;
      shape.push_back(1);
      continue;
    }
    if (d < 0)
      return g.fail("target dimension " + Twine(d) + " is negative");
    if (__builtin_mul_overflow(known, d, &known))
      return g.fail("target shape " + shapeStr(*target) + " overflows a 64-bit element count");
    shape.push_back(d);
  }
  if (inferred >= 0) {
    int64_t total = xt.getNumElements();
    if (known == 0 || total % known)
      return g.fail("cannot infer the -1 in " + shapeStr(*target) + " for " +
                    Twine(total) + " elements");
    shape[inferred] = total / known;
  }
  return emitReshape(g, shape);
}

LogicalResult flatten(GraphImporter &g) {
  RankedTensorType t = g.inputType(0);
  if (!t)
    return failure();
  int64_t axis = attrInt(g.node(), "axis", 1);
  if (axis < 0)
    axis += t.getRank();
  if (axis < 0 || axis > t.getRank())
    return g.fail("axis out of range");
  int64_t outer = 1;
  for (int64_t k = 0; k < axis; ++k)
    outer *= t.getDimSize(k);
  return emitReshape(g, {outer, t.getNumElements() / std::max<int64_t>(outer, 1)});
}

LogicalResult unsqueeze(GraphImporter &g) {
  RankedTensorType xt = g.inputType(0);
  auto axes = g.constantInts(1, "axes");
  if (!xt || failed(axes))
    return failure();
  ArrayRef<int64_t> in = xt.getShape();
  int64_t rank = in.size() + axes->size();
  std::vector<bool> isNew(rank, false);
  for (int64_t a : *axes) {
    int64_t n = a < 0 ? a + rank : a;
    if (n < 0 || n >= rank || isNew[n])
      return g.fail("axes " + shapeStr(*axes) + " are invalid for output rank " + Twine(rank));
    isNew[n] = true;
  }
  SmallVector<int64_t> shape;
  for (int64_t k = 0, j = 0; k < rank; ++k)
    shape.push_back(isNew[k] ? 1 : in[j++]);
  return emitReshape(g, shape);
}

LogicalResult squeeze(GraphImporter &g) {
  RankedTensorType xt = g.inputType(0);
  if (!xt)
    return failure();
  ArrayRef<int64_t> in = xt.getShape();
  std::vector<bool> drop(in.size(), false);
  if (g.hasInput(1)) {
    auto axes = g.constantInts(1, "axes");
    if (failed(axes))
      return failure();
    for (int64_t a : *axes) {
      int64_t n = a < 0 ? a + (int64_t)in.size() : a;
      if (n < 0 || n >= (int64_t)in.size() || in[n] != 1)
        return g.fail("cannot squeeze axis " + Twine(a) + " of " + shapeStr(in));
      drop[n] = true;
    }
  } else {
    for (size_t k = 0; k < in.size(); ++k)
      drop[k] = in[k] == 1;
  }
  SmallVector<int64_t> shape;
  for (size_t k = 0; k < in.size(); ++k)
    if (!drop[k])
      shape.push_back(in[k]);
  return emitReshape(g, shape);
}

LogicalResult transpose(GraphImporter &g) {
  Value x = g.input(0);
  if (!x)
    return failure();
  int64_t rank = typeOf(x).getRank();
  std::vector<int64_t> perm;
  if (auto p = attrInts(g.node(), "perm"))
    perm = *p;
  else
    for (int64_t k = rank - 1; k >= 0; --k)
      perm.push_back(k);
  bool identity = true;
  for (size_t k = 0; k < perm.size(); ++k)
    identity &= perm[k] == (int64_t)k;
  if (identity && (int64_t)perm.size() == rank) {
    g.setOutput(0, x);
    return success();
  }
  auto op = g.create<nn::TransposeOp>(
      {x}, {g.attr("permutation", g.builder().getDenseI64ArrayAttr(perm))});
  if (failed(op))
    return failure();
  g.setOutput(0, *op);
  return success();
}

/// Emits nn.slice; `lo`/`hi`/`st` are full-rank and already clamped.
LogicalResult emitSlice(GraphImporter &g, Value x, int out, ArrayRef<int64_t> lo,
                        ArrayRef<int64_t> hi, ArrayRef<int64_t> st) {
  bool whole = true;
  for (size_t k = 0; k < lo.size(); ++k)
    whole &= lo[k] == 0 && hi[k] == typeOf(x).getDimSize(k) && st[k] == 1;
  if (whole) {
    g.setOutput(out, x);
    return success();
  }
  auto op = g.create<nn::SliceOp>(
      {x}, {g.attr("start", g.builder().getDenseI64ArrayAttr(lo)),
            g.attr("limit", g.builder().getDenseI64ArrayAttr(hi)),
            g.attr("stride", g.builder().getDenseI64ArrayAttr(st))});
  if (failed(op))
    return failure();
  g.setOutput(out, *op);
  return success();
}

/// ONNX Slice of a compile-time tensor: per axis, a positive step walks
/// [clamp(start, 0, d), clamp(end, 0, d)), a negative one walks down from
/// clamp(start, 0, d - 1) to clamp(end, -1, d - 1), exclusive.
LogicalResult hostSlice(GraphImporter &g, const HostTensor &t, const std::vector<int64_t> &axes,
                        const std::vector<int64_t> &starts, const std::vector<int64_t> &ends,
                        const std::vector<int64_t> &steps) {
  int64_t rank = t.shape.size();
  if (axes.size() != starts.size() || ends.size() != starts.size() ||
      steps.size() != starts.size())
    return g.fail("starts, ends, axes and steps must have the same length");
  // Per dim, the source indices in order.
  std::vector<std::vector<int64_t>> pick(rank);
  for (int64_t d = 0; d < rank; ++d)
    for (int64_t i = 0; i < t.shape[d]; ++i)
      pick[d].push_back(i);
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
    if (a < 0 || a >= rank)
      return g.fail("axis " + Twine(axes[k]) + " is out of range for rank " + Twine(rank));
    int64_t d = t.shape[a], step = steps[k];
    if (step == 0)
      return g.fail("step 0 on axis " + Twine(a));
    int64_t s = starts[k] < 0 ? starts[k] + d : starts[k];
    int64_t e = ends[k] < 0 ? ends[k] + d : ends[k];
    pick[a].clear();
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      for (int64_t i = s; i < e; i += step)
        pick[a].push_back(i);
    } else {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      for (int64_t i = s; i > e; i += step)
        pick[a].push_back(i);
    }
  }
  HostTensor out;
  out.dtype = t.dtype;
  for (int64_t d = 0; d < rank; ++d)
    out.shape.push_back(pick[d].size());
  std::vector<int64_t> strides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * t.shape[d + 1];
  int64_t n = 1;
  for (int64_t v : out.shape)
    n *= v;
  std::vector<int64_t> idx(rank, 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t src = 0;
    for (int64_t d = 0; d < rank; ++d)
      src += pick[d][idx[d]] * strides[d];
    if (t.isFloat())
      out.f.push_back(t.f[src]);
    else
      out.i.push_back(t.i[src]);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < out.shape[d])
        break;
      idx[d] = 0;
    }
  }
  g.setOutput(0, std::move(out));
  return success();
}

LogicalResult slice(GraphImporter &g) {
  Value x = g.input(0);
  auto starts = g.constantInts(1, "starts");
  auto ends = g.constantInts(2, "ends");
  if (!x || failed(starts) || failed(ends))
    return failure();
  ArrayRef<int64_t> shape = typeOf(x).getShape();
  int64_t rank = shape.size();
  std::vector<int64_t> axes, steps;
  if (g.hasInput(3)) {
    auto a = g.constantInts(3, "axes");
    if (failed(a))
      return failure();
    axes = *a;
  } else {
    for (size_t k = 0; k < starts->size(); ++k)
      axes.push_back(k);
  }
  if (g.hasInput(4)) {
    auto s = g.constantInts(4, "steps");
    if (failed(s))
      return failure();
    steps = *s;
  } else {
    steps.assign(starts->size(), 1);
  }
  if (axes.size() != starts->size() || ends->size() != starts->size() ||
      steps.size() != starts->size())
    return g.fail("starts, ends, axes and steps must have the same length");
  // A compile-time input (shape arithmetic, pads reversed with step -1 as
  // torch exports F.pad) is sliced here, with ONNX's rules for any step.
  if (const HostTensor *c = g.constant(0))
    return hostSlice(g, *c, axes, *starts, *ends, steps);
  SmallVector<int64_t> lo(rank, 0), hi(shape), st(rank, 1);
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
    if (a < 0 || a >= rank)
      return g.fail("axis " + Twine(axes[k]) + " is out of range for rank " + Twine(rank));
    if (steps[k] <= 0)
      return g.fail("step " + Twine(steps[k]) + " on axis " + Twine(a) +
                    ": only positive steps are supported");
    int64_t d = shape[a];
    auto clampIdx = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + d : v, 0, d); };
    lo[a] = clampIdx((*starts)[k]);
    hi[a] = std::max(lo[a], clampIdx((*ends)[k]));
    st[a] = steps[k];
  }
  return emitSlice(g, x, 0, lo, hi, st);
}

LogicalResult split(GraphImporter &g) {
  Value x = g.input(0);
  if (!x)
    return failure();
  ArrayRef<int64_t> shape = typeOf(x).getShape();
  int64_t rank = shape.size(), axis = attrInt(g.node(), "axis", 0);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    return g.fail("axis out of range");
  std::vector<int64_t> sizes;
  if (g.hasInput(1)) {
    auto s = g.constantInts(1, "split");
    if (failed(s))
      return failure();
    sizes = *s;
  } else {
    int64_t parts = g.node().output_size();
    if (shape[axis] % parts)
      return g.fail("dimension " + Twine(shape[axis]) + " does not split into " +
                    Twine(parts) + " equal parts");
    sizes.assign(parts, shape[axis] / parts);
  }
  int64_t total = 0;
  for (int64_t s : sizes)
    total += s;
  if ((int64_t)sizes.size() != g.node().output_size() || total != shape[axis])
    return g.fail("split sizes " + shapeStr(sizes) + " do not cover dimension " +
                  Twine(shape[axis]) + " with " + Twine(g.node().output_size()) + " outputs");
  int64_t begin = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    SmallVector<int64_t> lo(rank, 0), hi(shape), st(rank, 1);
    lo[axis] = begin;
    hi[axis] = begin + sizes[k];
    begin += sizes[k];
    if (g.outputUsed(k) && failed(emitSlice(g, x, k, lo, hi, st)))
      return failure();
  }
  return success();
}

LogicalResult concat(GraphImporter &g) {
  SmallVector<Value> inputs;
  for (int k = 0; k < g.node().input_size(); ++k) {
    Value v = g.input(k);
    if (!v)
      return failure();
    inputs.push_back(v);
  }
  auto op = g.create<nn::ConcatOp>(
      inputs, {g.attr("axis", g.builder().getI64IntegerAttr(attrInt(g.node(), "axis", 0)))});
  if (failed(op))
    return failure();
  g.setOutput(0, *op);
  return success();
}

LogicalResult expand(GraphImporter &g) {
  Value x = g.input(0);
  auto target = g.constantInts(1, "the target shape");
  if (!x || failed(target))
    return failure();
  for (int64_t d : *target)
    if (d < 0)
      return g.fail("target " + describeBadShape(*target));
  auto shape = nn::broadcastShapes(typeOf(x).getShape(), *target);
  if (failed(shape))
    return g.fail("cannot expand " + shapeStr(typeOf(x).getShape()) + " to " +
                  shapeStr(*target));
  std::vector<int64_t> dims(shape->begin(), shape->end());
  if (!checkedNumElements(dims))
    return g.fail("expanded " + describeBadShape(dims));
  if (typeOf(x).getShape() == ArrayRef<int64_t>(*shape)) {
    g.setOutput(0, x);
    return success();
  }
  g.setOutput(0, nn::BroadcastOp::create(g.builder(), g.loc(), typeOf(x).clone(*shape), x));
  return success();
}

LogicalResult gather(GraphImporter &g) {
  Value data = g.input(0), indices = g.input(1);
  if (!data || !indices)
    return failure();
  auto op = g.create<nn::GatherOp>(
      {data, indices},
      {g.attr("axis", g.builder().getI64IntegerAttr(attrInt(g.node(), "axis", 0)))});
  if (failed(op))
    return failure();
  g.setOutput(0, *op);
  return success();
}

LogicalResult constant(GraphImporter &g) {
  const onnx::NodeProto &n = g.node();
  if (n.attribute_size() != 1)
    return g.fail("expects exactly one value attribute");
  const onnx::AttributeProto &a = n.attribute(0);
  HostTensor t;
  if (a.name() == "value") {
    if (a.t().data_location() == onnx::TensorProto::EXTERNAL)
      return g.fail("constants with external data are not supported");
    if (auto e = decodeTensor(a.t(), nullptr, t))
      return g.fail("value: " + *e);
  } else if (a.name() == "value_float" || a.name() == "value_floats") {
    t.dtype = onnx::TensorProto::FLOAT;
    if (a.name() == "value_float")
      t.f = {a.f()};
    else
      t.f.assign(a.floats().begin(), a.floats().end()), t.shape = {(int64_t)t.f.size()};
  } else if (a.name() == "value_int" || a.name() == "value_ints") {
    t.dtype = onnx::TensorProto::INT64;
    if (a.name() == "value_int")
      t.i = {a.i()};
    else
      t.i.assign(a.ints().begin(), a.ints().end()), t.shape = {(int64_t)t.i.size()};
  } else {
    return g.fail("attribute '" + a.name() + "' (strings, sparse tensors) is not supported");
  }
  g.setOutput(0, std::move(t));
  return success();
}

LogicalResult constantOfShape(GraphImporter &g) {
  auto dims = g.constantInts(0, "the shape");
  if (failed(dims))
    return failure();
  auto n = checkedNumElements(*dims);
  if (!n)
    return g.fail(describeBadShape(*dims));
  HostTensor value;
  value.dtype = onnx::TensorProto::FLOAT;
  value.f = {0.0};
  if (const auto *a = findAttr(g.node(), "value"))
    if (auto e = decodeTensor(a->t(), nullptr, value))
      return g.fail("value: " + *e);
  if (value.size() != 1)
    return g.fail("value must hold one element");
  if (*n > (int64_t(1) << 20)) {
    Type et = g.elementType(value.dtype);
    if (!et)
      return failure();
    g.setOutput(0, g.splat(RankedTensorType::get(*dims, et), value.asDouble(0)));
    return success();
  }
  HostTensor t;
  t.dtype = value.dtype;
  t.shape = *dims;
  if (value.isFloat())
    t.f.assign(*n, value.f[0]);
  else
    t.i.assign(*n, value.i[0]);
  g.setOutput(0, std::move(t));
  return success();
}

LogicalResult shapeOf(GraphImporter &g) {
  RankedTensorType t = g.inputType(0);
  if (!t)
    return failure();
  int64_t rank = t.getRank();
  auto clampIdx = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  int64_t start = clampIdx(attrInt(g.node(), "start", 0));
  int64_t end = clampIdx(attrInt(g.node(), "end", rank));
  std::vector<int64_t> dims;
  for (int64_t k = start; k < end; ++k)
    dims.push_back(t.getDimSize(k));
  int64_t count = dims.size();
  g.setOutput(0, HostTensor::ofInts(std::move(dims), {count}, onnx::TensorProto::INT64));
  return success();
}

LogicalResult sizeOf(GraphImporter &g) {
  RankedTensorType t = g.inputType(0);
  if (!t)
    return failure();
  g.setOutput(0, HostTensor::ofInts({t.getNumElements()}, {}, onnx::TensorProto::INT64));
  return success();
}

} // namespace

void registerLayoutConverters(ConverterTable &t) {
  t["Reshape"] = reshape;
  t["Flatten"] = flatten;
  t["Unsqueeze"] = unsqueeze;
  t["Squeeze"] = squeeze;
  t["Transpose"] = transpose;
  t["Slice"] = slice;
  t["Split"] = split;
  t["Concat"] = concat;
  t["Expand"] = expand;
  t["Gather"] = gather;
  t["Constant"] = constant;
  t["ConstantOfShape"] = constantOfShape;
  t["Shape"] = shapeOf;
  t["Size"] = sizeOf;
}

} // namespace dsc::onnx_import
