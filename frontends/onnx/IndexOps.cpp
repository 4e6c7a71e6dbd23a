//===- IndexOps.cpp - ONNX ArgMax, TopK, OneHot, CumSum, Trilu, GatherElements
//
// The ops of routing and masking (a mixture of experts' gate, causal masks,
// torch.gather), lowered to nn ops:
//   ArgMax          nn.argmax (int64; no gradient);
//   TopK            k rounds of argmax and max, each masking its winner
//                   (values differentiable through the max, indices not);
//   OneHot          a comparison with the positions, then the on / off
//                   values;
//   CumSum          a matmul with a triangle of ones (exact on 0/1 masks;
//                   float only at run time);
//   Trilu           a select with a constant triangle mask;
//   GatherElements  a one-hot of the indices times the data, summed
//                   (so the gradient scatters through the matmul);
//   ScatterElements the transposed product: updates land by the one-hot,
//                   the data is kept where none lands (none) or added to;
//   ScatterND       the same over whole slices along dim 0 (x[idx] = v).
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Composer.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <limits>

using namespace mlir;

namespace dsc::onnx_import {
namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

FailureOr<int64_t> axisOf(GraphImporter &g, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    (void)g.fail("axis " + Twine(axis) + " is out of range for rank " + Twine(rank));
    return failure();
  }
  return a;
}

/// The permutation that moves `axis` last, and its inverse.
SmallVector<int64_t> toLast(int64_t rank, int64_t axis) {
  SmallVector<int64_t> p;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      p.push_back(d);
  p.push_back(axis);
  return p;
}
SmallVector<int64_t> inverse(ArrayRef<int64_t> p) {
  SmallVector<int64_t> inv(p.size());
  for (size_t i = 0; i < p.size(); ++i)
    inv[p[i]] = i;
  return inv;
}

Value permute(Composer &c, Value v, ArrayRef<int64_t> perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i)
    identity &= perm[i] == int64_t(i);
  if (identity || !c.ok())
    return v;
  auto &g = c.importer();
  return c.op<nn::TransposeOp>({v}, {g.attr("permutation", g.builder().getDenseI64ArrayAttr(perm))});
}

Value argmax(Composer &c, Value x, int64_t axis, bool keep) {
  auto &g = c.importer();
  if (!c.ok())
    return {};
  auto t = typeOf(x);
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (d != axis)
      shape.push_back(t.getDimSize(d));
    else if (keep)
      shape.push_back(1);
  SmallVector<NamedAttribute> attrs{g.attr("axis", g.builder().getI64IntegerAttr(axis))};
  if (keep)
    attrs.push_back(g.attr("keepdims", g.builder().getUnitAttr()));
  return c.made<nn::ArgMaxOp>(RankedTensorType::get(shape, g.builder().getI64Type()), {x}, attrs);
}

/// onehot(idx [...], n) as bool [..., n] (idx viewed with a trailing 1).
Value oneHotMask(Composer &c, Value idx, int64_t n) {
  if (!c.ok())
    return {};
  auto t = typeOf(idx);
  SmallVector<int64_t> shape(t.getShape());
  shape.push_back(1);
  int64_t rank = int64_t(shape.size());
  // Separate statements: the IR's op order must not follow the compiler's
  // order of evaluating arguments (GCC and clang differ).
  Value pos = c.positions(n, rank, rank - 1);
  Value column = c.reshape(idx, shape);
  return c.cmp(nn::CmpPredicate::eq, column, pos);
}

/// oneHotMask as `et` (0 / 1), for a matmul.
Value oneHot(Composer &c, Value idx, int64_t n, Type et) {
  Value hit = oneHotMask(c, idx, n);
  if (!c.ok())
    return {};
  return c.made<nn::CastOp>(typeOf(hit).clone(et), {hit});
}

/// The scatters' operands: float data and updates of one type, integer
/// indices, and the reduction (none, or add).
LogicalResult scatterOperands(GraphImporter &g, Value &data, Value &idx, Value &upd, bool &add) {
  data = g.input(0), idx = g.input(1), upd = g.input(2);
  if (!data || !idx || !upd)
    return failure();
  if (!nn::isFloatTensor(data.getType()) ||
      typeOf(upd).getElementType() != typeOf(data).getElementType())
    return g.fail("data and updates must be float tensors of one type");
  if (!isa<IntegerType>(typeOf(idx).getElementType()))
    return g.fail("indices must be integers");
  std::string reduction = attrString(g.node(), "reduction", "none");
  if (reduction != "none" && reduction != "add")
    return g.fail("reduction '" + reduction + "' is not supported (none, add)");
  add = reduction == "add";
  return success();
}

/// What a scatter writes: `landed` added to `out`, which under none is
/// first zeroed where `any` (the positions hit, 0 / 1) says, by a select so
/// that an inf or NaN overwritten stays out.
Value landOn(Composer &c, Value out, Value any, Value landed, bool add) {
  if (!c.ok())
    return {};
  if (!add)
    out = c.op<nn::SelectOp>(
        {c.cmp(nn::CmpPredicate::gt, any, c.scalar(0.5, any)), c.scalar(0.0, out), out});
  return c.op<nn::AddOp>({out, landed});
}

LogicalResult argMax(GraphImporter &g) {
  Value x = g.input(0);
  if (!x)
    return failure();
  if (!nn::isFloatTensor(x.getType()))
    return g.fail("ArgMax of an integer tensor at run time is not supported (argmax a float)");
  if (attrInt(g.node(), "select_last_index", 0) != 0)
    return g.fail("select_last_index 1 is not supported (PyTorch's argmax takes the first)");
  auto axis = axisOf(g, attrInt(g.node(), "axis", 0), typeOf(x).getRank());
  if (failed(axis))
    return failure();
  Composer c(g);
  Value r = argmax(c, x, *axis, attrInt(g.node(), "keepdims", 1) != 0);
  return c.finish(r);
}

LogicalResult topK(GraphImporter &g) {
  Value x = g.input(0);
  if (!x)
    return failure();
  if (!nn::isFloatTensor(x.getType()))
    return g.fail("TopK of an integer tensor at run time is not supported (a float one is)");
  auto kv = g.constantInts(1, "K");
  if (failed(kv))
    return failure();
  if (kv->size() != 1)
    return g.fail("K must hold one value");
  auto xt = typeOf(x);
  auto axis = axisOf(g, attrInt(g.node(), "axis", -1), xt.getRank());
  if (failed(axis))
    return failure();
  int64_t k = (*kv)[0], n = xt.getDimSize(*axis);
  if (k < 1 || k > n)
    return g.fail("K " + Twine(k) + " must be in [1, " + Twine(n) + "] (the axis' size)");
  if (k > 16)
    return g.fail("K " + Twine(k) + " above 16 is not supported: dsc composes TopK from k "
                  "rounds of argmax (a gate's top-k)");
  bool largest = attrInt(g.node(), "largest", 1) != 0;
  if (attrInt(g.node(), "sorted", 1) == 0 && k > 1)
    return g.fail("sorted 0 is not supported (the values come sorted)");
  Composer c(g);
  Value work = largest ? x : c.unary<nn::NegOp>(x);
  Value lowest = c.scalar(-std::numeric_limits<double>::infinity(), x);
  SmallVector<Value> values, indices;
  for (int64_t r = 0; r < k && c.ok(); ++r) {
    Value idx = argmax(c, work, *axis, true);
    Value val = c.reduce<nn::ReduceMaxOp>(work, {*axis}, true);
    values.push_back(largest ? val : c.unary<nn::NegOp>(val));
    indices.push_back(idx);
    if (r + 1 < k) {
      Value hit = c.cmp(nn::CmpPredicate::eq, idx, c.positions(n, xt.getRank(), *axis));
      work = c.op<nn::SelectOp>({hit, lowest, work});
    }
  }
  Value vals = c.concat(values, *axis), idxs = c.concat(indices, *axis);
  if (!c.ok())
    return failure();
  g.setOutput(0, vals);
  if (g.outputUsed(1))
    g.setOutput(1, idxs);
  return success();
}

LogicalResult oneHot(GraphImporter &g) {
  Value idx = g.input(0);
  if (!idx)
    return failure();
  auto depth = g.constantInts(1, "depth");
  if (failed(depth))
    return failure();
  const HostTensor *values = g.constant(2);
  if (!values || values->size() != 2)
    return g.fail("values must be a compile-time [off, on] pair");
  if (depth->size() != 1 || (*depth)[0] < 1)
    return g.fail("depth must be one positive value");
  auto it = typeOf(idx);
  if (!isa<IntegerType>(it.getElementType()))
    return g.fail("indices must be integers at run time");
  int64_t n = (*depth)[0], rank = it.getRank() + 1;
  auto axis = axisOf(g, attrInt(g.node(), "axis", -1), rank);
  if (failed(axis))
    return failure();
  Composer c(g);
  Value hit = oneHotMask(c, idx, n);
  // The depth axis is last; move it where `axis` says.
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank - 1; ++d) {
    if (d == *axis)
      perm.push_back(rank - 1);
    perm.push_back(d);
  }
  if (*axis == rank - 1)
    perm.push_back(rank - 1);
  hit = permute(c, hit, perm);
  Type et = g.elementType(values->dtype);
  if (!et)
    return failure();
  auto outType = typeOf(hit).clone(et);
  Value out;
  if (isa<FloatType>(et)) {
    out = c.op<nn::SelectOp>({hit, g.scalar(values->asDouble(1), et), g.scalar(values->asDouble(0), et)});
  } else {
    if (values->asInt(0) != 0 || values->asInt(1) != 1)
      return g.fail("integer values other than [0, 1] are not supported");
    out = c.made<nn::CastOp>(outType, {hit});
  }
  return c.finish(out);
}

LogicalResult cumSum(GraphImporter &g) {
  Value x = g.input(0);
  if (!x)
    return failure();
  auto axes = g.constantInts(1, "axis");
  if (failed(axes))
    return failure();
  if (axes->size() != 1)
    return g.fail("axis must hold one value");
  if (!nn::isFloatTensor(x.getType()))
    return g.fail("CumSum of an integer tensor at run time is not supported: dsc's integer "
                  "ops move values, and a float cumsum of 0/1 masks is exact (cast first)");
  auto xt = typeOf(x);
  auto axis = axisOf(g, (*axes)[0], xt.getRank());
  if (failed(axis))
    return failure();
  bool exclusive = attrInt(g.node(), "exclusive", 0) != 0;
  bool reverse = attrInt(g.node(), "reverse", 0) != 0;
  int64_t n = xt.getDimSize(*axis);
  // out[..., j] = sum_k x[..., k] * tri[k, j].
  SmallVector<APFloat> tri;
  const llvm::fltSemantics &sem = cast<FloatType>(xt.getElementType()).getFloatSemantics();
  for (int64_t k = 0; k < n; ++k)
    for (int64_t j = 0; j < n; ++j) {
      bool in = reverse ? (exclusive ? k > j : k >= j) : (exclusive ? k < j : k <= j);
      APFloat v(in ? 1.0 : 0.0);
      bool lost = false;
      v.convert(sem, APFloat::rmNearestTiesToEven, &lost);
      tri.push_back(v);
    }
  auto triType = RankedTensorType::get({n, n}, xt.getElementType());
  Value triangle =
      arith::ConstantOp::create(g.builder(), g.loc(), DenseElementsAttr::get(triType, tri));
  Composer c(g);
  auto perm = toLast(xt.getRank(), *axis);
  Value y = c.op<nn::MatmulOp>({permute(c, x, perm), triangle});
  y = permute(c, y, inverse(perm));
  return c.finish(y);
}

LogicalResult trilu(GraphImporter &g) {
  Value x = g.input(0);
  if (!x)
    return failure();
  int64_t k = 0;
  if (g.hasInput(1)) {
    auto kv = g.constantInts(1, "k");
    if (failed(kv))
      return failure();
    if (kv->size() != 1)
      return g.fail("k must hold one value");
    k = (*kv)[0];
  }
  auto xt = typeOf(x);
  if (xt.getRank() < 2)
    return g.fail("input must have rank >= 2");
  bool upper = attrInt(g.node(), "upper", 1) != 0;
  int64_t rows = xt.getDimSize(xt.getRank() - 2), cols = xt.getDimSize(xt.getRank() - 1);
  SmallVector<bool> keep;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      keep.push_back(upper ? j - i >= k : j - i <= k);
  auto maskType = RankedTensorType::get({rows, cols}, g.builder().getI1Type());
  Value mask = arith::ConstantOp::create(g.builder(), g.loc(),
                                         DenseElementsAttr::get(maskType, ArrayRef<bool>(keep)));
  if (!nn::isFloatTensor(xt))
    return g.fail("Trilu of a non-float tensor at run time is not supported (of constants it "
                  "is evaluated at compile time)");
  Composer c(g);
  Value y = c.op<nn::SelectOp>({mask, x, c.scalar(0.0, x)});
  return c.finish(y);
}

/// GatherElements' and ScatterElements' axis: the indices (of the data's
/// rank) must match the data in every other dim.
FailureOr<int64_t> elementsAxis(GraphImporter &g, RankedTensorType dt, RankedTensorType it) {
  auto axis = axisOf(g, attrInt(g.node(), "axis", 0), dt.getRank());
  if (failed(axis))
    return failure();
  for (int64_t d = 0; d < dt.getRank(); ++d)
    if (d != *axis && it.getDimSize(d) != dt.getDimSize(d)) {
      (void)g.fail("indices " + nn::formatShape(it.getShape()) + " must match the data " +
                   nn::formatShape(dt.getShape()) + " outside the axis (dsc does not take a "
                   "smaller index block)");
      return failure();
    }
  return *axis;
}

LogicalResult gatherElements(GraphImporter &g) {
  Value data = g.input(0), idx = g.input(1);
  if (!data || !idx)
    return failure();
  auto dt = typeOf(data), it = typeOf(idx);
  if (!nn::isFloatTensor(dt))
    return g.fail("GatherElements of a non-float tensor at run time is not supported");
  if (!isa<IntegerType>(it.getElementType()) || it.getRank() != dt.getRank())
    return g.fail("indices must be integers of the data's rank");
  auto axis = elementsAxis(g, dt, it);
  if (failed(axis))
    return failure();
  int64_t n = dt.getDimSize(*axis);
  Composer c(g);
  auto perm = toLast(dt.getRank(), *axis);
  // [..., m, n] one-hot of the indices times the data's [..., n, 1].
  Value oh = oneHot(c, permute(c, idx, perm), n, dt.getElementType());
  Value col = permute(c, data, perm);
  if (c.ok()) {
    SmallVector<int64_t> shape(typeOf(col).getShape());
    shape.push_back(1);
    col = c.reshape(col, shape);
  }
  Value y = c.op<nn::MatmulOp>({oh, col});
  if (c.ok()) {
    SmallVector<int64_t> shape(typeOf(y).getShape().drop_back());
    y = c.reshape(y, shape);
  }
  y = permute(c, y, inverse(perm));
  return c.finish(y);
}

/// ScatterElements (torch.scatter / scatter_add): with the indices' one-hot
/// oh [..., m, n] along the axis, the scattered values are oh^T @ updates
/// and the positions hit are max over m of oh; reduction none keeps data
/// where nothing lands, add adds. An index repeated along the axis sums its
/// updates under none too, where PyTorch keeps one of them (which one it
/// leaves unspecified).
LogicalResult scatterElements(GraphImporter &g) {
  Value data, idx, upd;
  bool add = false;
  if (failed(scatterOperands(g, data, idx, upd, add)))
    return failure();
  auto dt = typeOf(data), it = typeOf(idx);
  if (it.getShape() != typeOf(upd).getShape() || it.getRank() != dt.getRank())
    return g.fail("indices must be shaped like the updates, of the data's rank");
  auto axis = elementsAxis(g, dt, it);
  if (failed(axis))
    return failure();
  int64_t n = dt.getDimSize(*axis);
  Composer c(g);
  auto perm = toLast(dt.getRank(), *axis);
  Value oh = oneHot(c, permute(c, idx, perm), n, dt.getElementType()); // [..., m, n]
  Value u = permute(c, upd, perm);
  if (c.ok()) {
    SmallVector<int64_t> shape(typeOf(u).getShape());
    shape.insert(shape.end() - 1, 1); // [..., 1, m]
    u = c.reshape(u, shape);
  }
  Value out = permute(c, data, perm), landed = c.op<nn::MatmulOp>({u, oh}); // [..., 1, n]
  if (c.ok()) {
    // One statement each: the ops' order must not depend on the compiler's
    // order of evaluating arguments.
    auto shape = typeOf(out).getShape();
    landed = c.reshape(landed, shape);
    Value any = c.reduce<nn::ReduceMaxOp>(oh, {typeOf(oh).getRank() - 2}, true);
    any = c.reshape(any, shape);
    out = landOn(c, out, any, landed, add);
  }
  out = permute(c, out, inverse(perm));
  return c.finish(out);
}

/// ScatterND with indices [..., 1] (torch's `x[idx] = v` along dim 0, and
/// index_put with one index tensor): whole slices of data along dim 0 are
/// replaced (none) or added to (add), by a one-hot matmul as
/// ScatterElements. Indices addressing several leading dims (q > 1) need
/// integer arithmetic on run-time indices, which dsc does not do.
LogicalResult scatterND(GraphImporter &g) {
  Value data, idx, upd;
  bool add = false;
  if (failed(scatterOperands(g, data, idx, upd, add)))
    return failure();
  auto dt = typeOf(data), it = typeOf(idx), ut = typeOf(upd);
  if (it.getRank() < 1 || it.getShape().back() != 1)
    return g.fail("indices addressing " + Twine(it.getRank() ? it.getShape().back() : 0) +
                  " leading dims are not supported (only 1: whole slices along dim 0, as "
                  "x[idx] = v writes them)");
  int64_t k = it.getNumElements(), n = dt.getDimSize(0),
          rest = dt.getNumElements() / std::max<int64_t>(n, 1);
  SmallVector<int64_t> want(it.getShape().drop_back());
  llvm::append_range(want, dt.getShape().drop_front());
  if (ArrayRef<int64_t>(want) != ut.getShape())
    return g.fail("updates must be " + nn::formatShape(want) + " (the indices' leading dims, "
                  "then the data's after dim 0), are " + nn::formatShape(ut.getShape()));
  Composer c(g);
  // oh [k, n]; landed = oh^T @ updates [k, rest] -> [n, rest].
  Value oh = oneHot(c, c.reshape(idx, {k}), n, dt.getElementType());
  Value landed = c.op<nn::MatmulOp>({oh, c.reshape(upd, {k, rest})},
                                    {g.attr("transpose_lhs", g.builder().getUnitAttr())});
  Value any = c.reduce<nn::ReduceMaxOp>(oh, {0}, false);
  any = c.reshape(any, {n, 1});
  Value rows = c.reshape(data, {n, rest});
  Value out = c.reshape(landOn(c, rows, any, landed, add), dt.getShape());
  return c.finish(out);
}

} // namespace

void registerIndexConverters(ConverterTable &t) {
  t["ArgMax"] = argMax;
  t["TopK"] = topK;
  t["OneHot"] = oneHot;
  t["CumSum"] = cumSum;
  t["Trilu"] = trilu;
  t["GatherElements"] = gatherElements;
  t["ScatterElements"] = scatterElements;
  t["ScatterND"] = scatterND;
}

} // namespace dsc::onnx_import
