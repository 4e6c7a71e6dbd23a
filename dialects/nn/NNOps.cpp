//===- NNOps.cpp - nn op shape inference, verifiers and costs ------------===//
//
// Ops whose result type follows from operands and attributes implement
// InferTypeOpInterface: the same function builds the op in the importer and,
// through the generated verifier, rejects a written result type that
// disagrees. Its error messages are the op's verifier messages.
//
//===----------------------------------------------------------------------===//
#include "dialects/nn/NNDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace dsc::nn;

namespace {
using Types = SmallVectorImpl<Type>;

LogicalResult fail(std::optional<Location> loc, const Twine &message) {
  return emitOptionalError(loc, message);
}

/// Maps a possibly negative axis into [0, rank).
FailureOr<int64_t> normalizeAxis(std::optional<Location> loc, int64_t axis,
                                 int64_t rank, StringRef what = "axis") {
  int64_t n = axis < 0 ? axis + rank : axis;
  if (n < 0 || n >= rank) {
    (void)fail(loc, what + " " + Twine(axis) + " is out of range for rank " +
                        Twine(rank));
    return failure();
  }
  return n;
}

RankedTensorType tensorOf(Type t) { return cast<RankedTensorType>(t); }

std::string shapeStr(ArrayRef<int64_t> shape) { return formatShape(shape); }

LogicalResult inferBroadcast(std::optional<Location> loc, Type lhs, Type rhs,
                             Type elementType, Types &results) {
  auto a = tensorOf(lhs), b = tensorOf(rhs);
  auto shape = broadcastShapes(a.getShape(), b.getShape());
  if (failed(shape))
    return fail(loc, "operand shapes " + shapeStr(a.getShape()) + " and " +
                         shapeStr(b.getShape()) + " do not broadcast");
  results.push_back(RankedTensorType::get(*shape, elementType));
  return success();
}

/// gather's result shape: data[:axis] + indices + data[axis+1:].
SmallVector<int64_t> gatheredShape(ArrayRef<int64_t> data, ArrayRef<int64_t> indices,
                                   int64_t axis) {
  SmallVector<int64_t> shape(data.take_front(axis));
  llvm::append_range(shape, indices);
  llvm::append_range(shape, data.drop_front(axis + 1));
  return shape;
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

#define DSC_BINARY_INFER(OP)                                                   \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> l, \
                                     Adaptor a, Types &r) {                    \
    return inferBroadcast(l, a.getLhs().getType(), a.getRhs().getType(),       \
                          tensorOf(a.getLhs().getType()).getElementType(), r); \
  }
DSC_BINARY_INFER(AddOp)
DSC_BINARY_INFER(SubOp)
DSC_BINARY_INFER(MulOp)
DSC_BINARY_INFER(DivOp)
DSC_BINARY_INFER(PowOp)
DSC_BINARY_INFER(MaxOp)
DSC_BINARY_INFER(MinOp)
#undef DSC_BINARY_INFER

LogicalResult CmpOp::inferReturnTypes(MLIRContext *ctx,
                                      std::optional<Location> loc, Adaptor a,
                                      Types &r) {
  return inferBroadcast(loc, a.getLhs().getType(), a.getRhs().getType(),
                        IntegerType::get(ctx, 1), r);
}

LogicalResult SelectOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor a, Types &r) {
  SmallVector<Type, 1> values;
  if (failed(inferBroadcast(loc, a.getLhs().getType(), a.getRhs().getType(),
                            tensorOf(a.getLhs().getType()).getElementType(),
                            values)))
    return failure();
  return inferBroadcast(loc, a.getCond().getType(), values[0],
                        tensorOf(values[0]).getElementType(), r);
}

int64_t GeluOp::getFlops() {
  // erf/tanh evaluation plus the surrounding multiply-adds.
  return 8 * numElements(getType());
}

int64_t GeluWithDerivativeOp::getFlops() {
  // One erf/tanh evaluation, then both products.
  return 10 * numElements(getResult().getType());
}

//===----------------------------------------------------------------------===//
// Contractions and normalizations
//===----------------------------------------------------------------------===//

namespace {
/// The type of op(lhs) op(rhs), shared by nn.matmul and nn.matmul_epilogue.
FailureOr<RankedTensorType> matmulResult(std::optional<Location> loc, Type lhsType,
                                         Type rhsType, bool tl, bool tr) {
  auto lhs = tensorOf(lhsType), rhs = tensorOf(rhsType);
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return fail(loc, "operands must have rank >= 2, got " +
                         Twine(lhs.getRank()) + " and " + Twine(rhs.getRank()));
  ArrayRef<int64_t> ls = lhs.getShape(), rs = rhs.getShape();
  int64_t m = ls[ls.size() - 2], k = ls.back();
  if (tl)
    std::swap(m, k);
  int64_t k2 = rs[rs.size() - 2], n = rs.back();
  if (tr)
    std::swap(k2, n);
  if (k != k2)
    return fail(loc, "contracting dimensions differ: lhs " + shapeStr(ls) +
                         " has " + Twine(k) + ", rhs " + shapeStr(rs) +
                         " has " + Twine(k2));
  auto batch = broadcastShapes(ls.drop_back(2), rs.drop_back(2));
  if (failed(batch))
    return fail(loc, "batch dimensions of " + shapeStr(ls) + " and " +
                         shapeStr(rs) + " do not broadcast");
  SmallVector<int64_t> shape = *batch;
  shape.append({m, n});
  return RankedTensorType::get(shape, lhs.getElementType());
}
} // namespace

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor a, Types &r) {
  auto t = matmulResult(loc, a.getLhs().getType(), a.getRhs().getType(),
                        a.getTransposeLhs(), a.getTransposeRhs());
  if (failed(t))
    return failure();
  r.push_back(*t);
  return success();
}

int64_t MatmulOp::getFlops() {
  auto lhs = getLhs().getType();
  int64_t k = getTransposeLhs() ? lhs.getShape()[lhs.getRank() - 2]
                                : lhs.getShape().back();
  return 2 * numElements(getType()) * k;
}

LogicalResult MatmulEpilogueOp::verify() {
  auto product = matmulResult(getLoc(), getLhs().getType(), getRhs().getType(),
                              getTransposeLhs(), getTransposeRhs());
  if (failed(product))
    return failure();
  RankedTensorType type = getResult().getType();
  if (*product != type)
    return emitOpError("result type ") << type << " must be the product's, " << *product;
  if (!getBias() && !getScale() && !getAddend() && !getColumnSum())
    return emitOpError(
        "needs a bias, a scale, an addend or a column_sum (without, it is nn.matmul)");
  if (Value bias = getBias()) {
    auto t = tensorOf(bias.getType());
    int64_t n = type.getShape().back();
    if (t.getRank() != 1 || t.getShape()[0] != n || t.getElementType() != type.getElementType())
      return emitOpError("bias ") << t << " must be a vector of the result's " << n << " columns, of "
                                  << type.getElementType();
  }
  if (Value scale = getScale(); scale && scale.getType() != type)
    return emitOpError("scale type ") << scale.getType() << " must be the result's, " << type;
  if (Value addend = getAddend(); addend && addend.getType() != type)
    return emitOpError("addend type ") << addend.getType() << " must be the result's, " << type;
  if (Value sum = getColumnSum()) {
    auto t = tensorOf(sum.getType());
    int64_t n = type.getShape().back();
    if (t.getRank() != 1 || t.getShape()[0] != n || t.getElementType() != type.getElementType())
      return emitOpError("column_sum ")
             << t << " must be a vector of the result's " << n << " columns, of "
             << type.getElementType();
  }
  return success();
}

int64_t MatmulEpilogueOp::getFlops() {
  auto lhs = getLhs().getType();
  int64_t k = getTransposeLhs() ? lhs.getShape()[lhs.getRank() - 2] : lhs.getShape().back();
  int64_t n = numElements(getResult().getType());
  return 2 * n * k + (getBias() ? n : 0) + (getScale() ? n : 0) + (getAddend() ? n : 0) +
         (getColumnSum() ? n : 0);
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a, Types &r) {
  auto input = tensorOf(a.getInput().getType());
  auto axis = normalizeAxis(loc, (int64_t)a.getAxis(), input.getRank());
  if (failed(axis))
    return failure();
  ArrayRef<int64_t> normalized = input.getShape().drop_front(*axis);
  auto check = [&](Value v, StringRef name) -> LogicalResult {
    if (!v)
      return success();
    auto t = tensorOf(v.getType());
    if (t.getShape() != normalized)
      return fail(loc, name + " shape " + shapeStr(t.getShape()) +
                           " must equal the normalized shape " +
                           shapeStr(normalized));
    return success();
  };
  if (failed(check(a.getScale(), "scale")) || failed(check(a.getBias(), "bias")))
    return failure();
  if (a.getEpsilon().convertToDouble() <= 0)
    return fail(loc, "epsilon must be positive");
  r.push_back(input);
  return success();
}

int64_t LayerNormOp::getFlops() { return 8 * numElements(getType()); }

template <typename Op> static LogicalResult verifySoftmax(Op op) {
  int64_t rank = op.getType().getRank();
  if ((int64_t)op.getAxis() < -rank || (int64_t)op.getAxis() >= rank)
    return op.emitOpError("axis ") << (int64_t)op.getAxis()
                                   << " is out of range for rank " << rank;
  return success();
}
LogicalResult SoftmaxOp::verify() { return verifySoftmax(*this); }
LogicalResult LogSoftmaxOp::verify() { return verifySoftmax(*this); }
int64_t SoftmaxOp::getFlops() { return 5 * numElements(getType()); }
int64_t LogSoftmaxOp::getFlops() { return 5 * numElements(getType()); }

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

static LogicalResult inferLoss(std::optional<Location> loc, Type inputType,
                               Type labelType, Reduction reduction, Types &r) {
  auto input = tensorOf(inputType), labels = tensorOf(labelType);
  if (input.getRank() < 2)
    return fail(loc, "input must be [N, C, ...], got " +
                         shapeStr(input.getShape()));
  SmallVector<int64_t> expected{input.getShape()[0]};
  llvm::append_range(expected, input.getShape().drop_front(2));
  if (labels.getShape() != ArrayRef<int64_t>(expected))
    return fail(loc, "labels shape " + shapeStr(labels.getShape()) +
                         " must be " + shapeStr(expected) + " for input " +
                         shapeStr(input.getShape()));
  // 16-bit logits (a mixed-precision head read as it is) give a float32
  // loss: the kernels widen them exactly and sum in float32.
  Type element = input.getElementType();
  if (element.isBF16() || element.isF16())
    element = Float32Type::get(input.getContext());
  if (reduction == Reduction::none)
    r.push_back(RankedTensorType::get(expected, element));
  else
    r.push_back(RankedTensorType::get({}, element));
  return success();
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *,
                                               std::optional<Location> loc,
                                               Adaptor a, Types &r) {
  return inferLoss(loc, a.getInput().getType(), a.getLabels().getType(),
                   a.getReduction(), r);
}
LogicalResult NllLossOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor a, Types &r) {
  return inferLoss(loc, a.getInput().getType(), a.getLabels().getType(),
                   a.getReduction(), r);
}
int64_t CrossEntropyOp::getFlops() { return 6 * numElements(getInput().getType()); }
int64_t NllLossOp::getFlops() { return numElements(getLabels().getType()); }

LogicalResult VocabCeSumsOp::verify() {
  auto in = getInput().getType();
  if (in.getRank() != 2)
    return emitOpError("input must be [N, C], not ") << shapeStr(in.getShape());
  int64_t n = in.getShape()[0];
  if (getParts() < 1)
    return emitOpError("parts must be at least 1");
  if (getLabels().getType().getShape() != ArrayRef<int64_t>{n} ||
      getMax().getType().getShape() != ArrayRef<int64_t>{n})
    return emitOpError("labels and max must be [") << n << "]";
  if (getResult().getType().getShape() != ArrayRef<int64_t>{2, n})
    return emitOpError("result must be [2, ") << n << "]";
  return success();
}
int64_t VocabCeSumsOp::getFlops() { return 4 * numElements(getInput().getType()); }

LogicalResult VocabCeLossOp::verify() {
  auto sums = getSums().getType();
  if (sums.getRank() != 2 || sums.getShape()[0] != 2)
    return emitOpError("sums must be [2, N], not ") << shapeStr(sums.getShape());
  int64_t n = sums.getShape()[1];
  if (getClasses() < 1)
    return emitOpError("classes must be at least 1");
  if (getLabels().getType().getShape() != ArrayRef<int64_t>{n} ||
      getMax().getType().getShape() != ArrayRef<int64_t>{n})
    return emitOpError("labels and max must be [") << n << "]";
  auto result = getResult().getType();
  bool none = getReduction() == Reduction::none;
  if (none ? result.getShape() != ArrayRef<int64_t>{n} : result.getRank() != 0)
    return emitOpError("result must be ") << (none ? "[N]" : "a scalar");
  return success();
}
int64_t VocabCeLossOp::getFlops() { return 4 * numElements(getLabels().getType()); }

//===----------------------------------------------------------------------===//
// Indexing, reductions and layout
//===----------------------------------------------------------------------===//

LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor a, Types &r) {
  auto data = tensorOf(a.getData().getType());
  auto indices = tensorOf(a.getIndices().getType());
  if (data.getRank() == 0)
    return fail(loc, "data must have rank >= 1");
  auto axis = normalizeAxis(loc, (int64_t)a.getAxis(), data.getRank());
  if (failed(axis))
    return failure();
  r.push_back(RankedTensorType::get(gatheredShape(data.getShape(), indices.getShape(), *axis),
                                    data.getElementType()));
  return success();
}
int64_t GatherOp::getFlops() { return 0; }
// Only the gathered rows are read, not the whole table.
int64_t GatherOp::getBytesRead() {
  return byteSize(getIndices().getType()) + byteSize(getType());
}

static LogicalResult inferReduce(std::optional<Location> loc, Type inputType,
                                 ArrayRef<int64_t> axes, bool keepdims,
                                 Types &r) {
  auto input = tensorOf(inputType);
  SmallVector<bool> reduced(input.getRank(), false);
  for (int64_t axis : axes) {
    auto n = normalizeAxis(loc, axis, input.getRank());
    if (failed(n))
      return failure();
    if (reduced[*n])
      return fail(loc, "axis " + Twine(axis) + " is reduced twice");
    reduced[*n] = true;
  }
  SmallVector<int64_t> shape;
  for (auto [i, d] : llvm::enumerate(input.getShape())) {
    if (!reduced[i])
      shape.push_back(d);
    else if (keepdims)
      shape.push_back(1);
  }
  r.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

#define DSC_REDUCE(OP)                                                         \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> l, \
                                     Adaptor a, Types &r) {                    \
    return inferReduce(l, a.getInput().getType(), a.getAxes(),                 \
                       a.getKeepdims(), r);                                    \
  }                                                                            \
  int64_t OP::getFlops() { return numElements(getInput().getType()); }
DSC_REDUCE(ReduceSumOp)
DSC_REDUCE(ReduceMeanOp)
DSC_REDUCE(ReduceMaxOp)
#undef DSC_REDUCE

LogicalResult ArgMaxOp::verify() {
  auto in = getInput().getType();
  int64_t rank = in.getRank(), axis = getAxis();
  if (rank == 0 || axis < 0 || axis >= rank)
    return emitOpError("axis ") << axis << " is out of range for rank " << rank
                                << " (normalized, non-negative)";
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      shape.push_back(in.getDimSize(d));
    else if (getKeepdims())
      shape.push_back(1);
  if (ArrayRef<int64_t>(shape) != getType().getShape() ||
      !getType().getElementType().isInteger(64))
    return emitOpError("result must be i64 ") << shapeStr(shape) << ", is " << getType();
  return success();
}
int64_t ArgMaxOp::getFlops() { return numElements(getInput().getType()); }

LogicalResult ReshapeOp::verify() {
  int64_t in = numElements(getInput().getType()), out = numElements(getType());
  if (in != out)
    return emitOpError("cannot reshape ")
           << in << " elements into " << out << " elements";
  return success();
}
// A reshape of a contiguous buffer is a view: no kernel runs.
int64_t ReshapeOp::getFlops() { return 0; }
int64_t ReshapeOp::getBytesRead() { return 0; }
int64_t ReshapeOp::getBytesWritten() { return 0; }

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a, Types &r) {
  auto input = tensorOf(a.getInput().getType());
  ArrayRef<int64_t> perm = a.getPermutation();
  if ((int64_t)perm.size() != input.getRank())
    return fail(loc, "permutation has " + Twine(perm.size()) +
                         " entries for rank " + Twine(input.getRank()));
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= input.getRank() || seen[p])
      return fail(loc, "permutation " + shapeStr(perm) +
                           " is not a permutation of 0.." +
                           Twine(input.getRank() - 1));
    seen[p] = true;
    shape.push_back(input.getShape()[p]);
  }
  r.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}
int64_t TransposeOp::getFlops() { return 0; }

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc, Adaptor a,
                                        Types &r) {
  auto input = tensorOf(a.getInput().getType());
  ArrayRef<int64_t> start = a.getStart(), limit = a.getLimit(),
                    stride = a.getStride();
  int64_t rank = input.getRank();
  if ((int64_t)start.size() != rank || (int64_t)limit.size() != rank ||
      (int64_t)stride.size() != rank)
    return fail(loc, "start, limit and stride need one entry per dimension (" +
                         Twine(rank) + ")");
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t dim = input.getShape()[i];
    if (stride[i] <= 0)
      return fail(loc, "stride of dimension " + Twine(i) + " must be positive");
    if (start[i] < 0 || start[i] > limit[i] || limit[i] > dim)
      return fail(loc, "dimension " + Twine(i) + " slice [" + Twine(start[i]) +
                           ", " + Twine(limit[i]) + ") is outside [0, " +
                           Twine(dim) + "]");
    shape.push_back((limit[i] - start[i] + stride[i] - 1) / stride[i]);
  }
  r.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}
int64_t SliceOp::getFlops() { return 0; }

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor a, Types &r) {
  if (a.getInputs().empty())
    return fail(loc, "needs at least one input");
  auto first = tensorOf(a.getInputs().front().getType());
  auto axis = normalizeAxis(loc, (int64_t)a.getAxis(), first.getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  shape[*axis] = 0;
  for (Value v : a.getInputs()) {
    auto t = tensorOf(v.getType());
    if (t.getElementType() != first.getElementType())
      return fail(loc, "inputs have different element types");
    if (t.getRank() != first.getRank())
      return fail(loc, "inputs have different ranks");
    for (int64_t i = 0; i < t.getRank(); ++i)
      if (i != *axis && t.getShape()[i] != first.getShape()[i])
        return fail(loc, "input shapes " + shapeStr(first.getShape()) +
                             " and " + shapeStr(t.getShape()) +
                             " differ outside the concatenation axis");
    shape[*axis] += t.getShape()[*axis];
  }
  r.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}
int64_t ConcatOp::getFlops() { return 0; }

LogicalResult BroadcastOp::verify() {
  auto in = getInput().getType(), out = getType();
  auto shape = broadcastShapes(in.getShape(), out.getShape());
  if (failed(shape) || ArrayRef<int64_t>(*shape) != out.getShape())
    return emitOpError("cannot broadcast ")
           << shapeStr(in.getShape()) << " to " << shapeStr(out.getShape());
  return success();
}
int64_t BroadcastOp::getFlops() { return 0; }

//===----------------------------------------------------------------------===//
// Randomness
//===----------------------------------------------------------------------===//

LogicalResult DropoutOp::inferReturnTypes(MLIRContext *ctx,
                                          std::optional<Location> loc,
                                          Adaptor a, Types &r) {
  double ratio = a.getRatio().convertToDouble();
  if (!(ratio >= 0.0 && ratio < 1.0))
    return fail(loc, "ratio " + std::to_string(ratio) + " must be in [0, 1)");
  auto input = tensorOf(a.getInput().getType());
  r.push_back(input);
  r.push_back(RankedTensorType::get(input.getShape(), IntegerType::get(ctx, 1)));
  return success();
}
int64_t DropoutOp::getFlops() { return 2 * numElements(getInput().getType()); }

//===----------------------------------------------------------------------===//
// Fused attention
//===----------------------------------------------------------------------===//

namespace {
/// `shape` with its dimensions r-3 and r-2 swapped: a bshd operand's
/// [..., T, H, E] as the head-major [..., H, T, E] (and back).
SmallVector<int64_t> swapHeads(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape);
  std::swap(s[s.size() - 3], s[s.size() - 2]);
  return s;
}

/// The shapes of an attention's operands: query [..., T, E], key [..., S, E],
/// value [..., S, F], the same leading dimensions, and a bias broadcasting
/// to [..., T, S]; with `bshd` the operands are [..., T, H, E] and so on,
/// checked as their head-major [..., H, T, E]. Fills the result's and the
/// stats' shapes (the stats are head-major in either layout).
LogicalResult checkAttention(std::optional<Location> loc, Type queryType, Type keyType,
                             Type valueType, Type biasType, double scale, double ratio, bool bshd,
                             SmallVectorImpl<int64_t> &result, SmallVectorImpl<int64_t> &stats) {
  auto q = tensorOf(queryType), k = tensorOf(keyType), v = tensorOf(valueType);
  int64_t r = q.getRank();
  const int64_t minRank = bshd ? 3 : 2;
  if (r < minRank || k.getRank() != r || v.getRank() != r)
    return fail(loc, "query, key and value must have one rank >= " + Twine(minRank) +
                         (bshd ? " (bshd: [..., T, H, E])" : "") + ", got " +
                         shapeStr(q.getShape()) + ", " + shapeStr(k.getShape()) + ", " +
                         shapeStr(v.getShape()));
  SmallVector<int64_t> qs(q.getShape()), ks(k.getShape()), vs(v.getShape());
  if (bshd)
    qs = swapHeads(qs), ks = swapHeads(ks), vs = swapHeads(vs);
  // Shapes in messages are the operands' own.
  auto own = [&](ArrayRef<int64_t> s) { return shapeStr(bshd ? swapHeads(s) : SmallVector<int64_t>(s)); };
  const char *lead = bshd ? " must have the same leading dimensions and heads"
                          : " must have the same leading dimensions";
  if (ArrayRef<int64_t>(qs).drop_back(2) != ArrayRef<int64_t>(ks).drop_back(2) ||
      ArrayRef<int64_t>(qs).drop_back(2) != ArrayRef<int64_t>(vs).drop_back(2))
    return fail(loc, "query " + own(qs) + ", key " + own(ks) + " and value " + own(vs) + lead);
  if (ks[r - 1] != qs[r - 1])
    return fail(loc, "key " + own(ks) + " must have the query's feature size " +
                         Twine(qs[r - 1]));
  if (vs[r - 2] != ks[r - 2])
    return fail(loc, "value " + own(vs) + " must have the key's length " + Twine(ks[r - 2]));
  if (!(scale > 0.0) || !std::isfinite(scale))
    return fail(loc, "scale " + std::to_string(scale) + " must be positive and finite");
  if (!(ratio >= 0.0 && ratio < 1.0))
    return fail(loc, "ratio " + std::to_string(ratio) + " must be in [0, 1)");
  SmallVector<int64_t> scores(ArrayRef<int64_t>(qs).drop_back(1));
  scores.push_back(ks[r - 2]);
  if (biasType) {
    auto b = tensorOf(biasType);
    auto shape = broadcastShapes(scores, b.getShape());
    // The bias is added to float32 scores: f32 whatever the query's type
    // (mixed precision keeps it so).
    if (!b.getElementType().isF32() || failed(shape) ||
        ArrayRef<int64_t>(*shape) != ArrayRef<int64_t>(scores))
      return fail(loc, "bias " + shapeStr(b.getShape()) + " must broadcast to the scores " +
                           shapeStr(scores) + " and be f32");
  }
  result.assign(qs.begin(), qs.end() - 1);
  result.push_back(vs[r - 1]);
  if (bshd)
    result = swapHeads(result);
  stats.assign(qs.begin(), qs.end() - 1);
  stats.push_back(2);
  return success();
}

/// Per score element: the scale, the mask or bias, softmax's 5 and
/// dropout's 2, as the unfused ops count them.
int64_t scoreFlops(bool masked, double ratio) { return 1 + (masked ? 1 : 0) + 5 + (ratio > 0 ? 2 : 0); }
} // namespace

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                            Adaptor a, Types &r) {
  SmallVector<int64_t> result, stats;
  Value bias = a.getBias();
  if (failed(checkAttention(loc, a.getQuery().getType(), a.getKey().getType(),
                            a.getValue().getType(), bias ? bias.getType() : Type(),
                            a.getScale().convertToDouble(), a.getRatio().convertToDouble(),
                            bool(a.getBshd()), result, stats)))
    return failure();
  r.push_back(RankedTensorType::get(result, tensorOf(a.getQuery().getType()).getElementType()));
  r.push_back(RankedTensorType::get(stats, Float32Type::get(ctx)));
  return success();
}

int64_t AttentionOp::getFlops() {
  auto q = getQuery().getType(), v = getValue().getType();
  int64_t S = getKey().getType().getShape().end()[-2];
  int64_t scores = numElements(q) / q.getShape().back() * S;
  return 2 * scores * (q.getShape().back() + v.getShape().back()) +
         scores * scoreFlops(getCausal() || getBias(), getRatio().convertToDouble());
}

LogicalResult AttentionGradOp::verify() {
  SmallVector<int64_t> result, stats;
  Value bias = getBias();
  if (failed(checkAttention(getLoc(), getQuery().getType(), getKey().getType(),
                            getValue().getType(), bias ? bias.getType() : Type(),
                            getScale().convertToDouble(), getRatio().convertToDouble(),
                            getBshd(), result, stats)))
    return failure();
  auto q = getQuery().getType();
  if (getGrad().getType() != RankedTensorType::get(result, q.getElementType()))
    return emitOpError("grad ") << getGrad().getType() << " must be the forward's result type "
                                << RankedTensorType::get(result, q.getElementType());
  auto f32 = Float32Type::get(getContext());
  if (getStats().getType() != RankedTensorType::get(stats, f32))
    return emitOpError("stats ") << getStats().getType() << " must be "
                                 << RankedTensorType::get(stats, f32);
  return success();
}

// The forward recomputed (its two GEMMs' first, QK^T, and the score work),
// then dP' = dO V^T, dV = P'^T dO, dQ = dS K and dK = dS^T Q.
int64_t AttentionGradOp::getFlops() {
  auto q = getQuery().getType(), v = getValue().getType();
  int64_t S = getKey().getType().getShape().end()[-2];
  int64_t scores = numElements(q) / q.getShape().back() * S;
  int64_t E = q.getShape().back(), F = v.getShape().back();
  return scores * (2 * E + 4 * F + 4 * E) +
         scores * (scoreFlops(getCausal() || getBias(), getRatio().convertToDouble()) + 4);
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

int64_t dsc::nn::windowExtent(int64_t in, int64_t kernel, int64_t stride, int64_t padBegin,
                              int64_t padEnd, int64_t dilation, bool ceil) {
  int64_t span = in + padBegin + padEnd - ((kernel - 1) * dilation + 1);
  if (span < 0)
    return 0;
  int64_t out = (span + (ceil ? stride - 1 : 0)) / stride + 1;
  if (ceil && (out - 1) * stride >= in + padBegin)
    --out;
  return out;
}

FailureOr<SmallVector<int64_t>>
dsc::nn::windowOutputDims(ArrayRef<int64_t> input, ArrayRef<int64_t> kernel,
                          ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                          ArrayRef<int64_t> dilations, bool ceil, std::string &why) {
  int64_t r = int64_t(input.size()) - 2;
  if (r < 1 || r > 3) {
    why = "expects [N, C] and 1 to 3 spatial dims, got " + shapeStr(input);
    return failure();
  }
  auto sized = [&](ArrayRef<int64_t> v, int64_t n, StringRef what) {
    if (int64_t(v.size()) == n)
      return true;
    why = (what + " needs " + Twine(n) + " entries for " + Twine(r) +
           " spatial dims, got " + Twine(v.size()))
              .str();
    return false;
  };
  if (!sized(kernel, r, "kernel_shape") || !sized(strides, r, "strides") ||
      !sized(pads, 2 * r, "pads (begins, then ends)") || !sized(dilations, r, "dilations"))
    return failure();
  SmallVector<int64_t> out;
  for (int64_t i = 0; i < r; ++i) {
    int64_t k = kernel[i], s = strides[i], d = dilations[i], pb = pads[i], pe = pads[r + i];
    if (k < 1 || s < 1 || d < 1 || pb < 0 || pe < 0) {
      why = ("spatial dim " + Twine(i) + ": kernel " + Twine(k) + ", stride " + Twine(s) +
             ", dilation " + Twine(d) + " must be >= 1 and pads " + Twine(pb) + ", " +
             Twine(pe) + " >= 0")
                .str();
      return failure();
    }
    int64_t e = windowExtent(input[2 + i], k, s, pb, pe, d, ceil);
    if (e < 1) {
      why = ("spatial dim " + Twine(i) + ": a window of " + Twine((k - 1) * d + 1) +
             " does not fit in size " + Twine(input[2 + i]) + " padded by " + Twine(pb) +
             " and " + Twine(pe))
                .str();
      return failure();
    }
    out.push_back(e);
  }
  return out;
}

namespace {
/// Checks conv's operand shapes: input/input_grad [N, C, S...], weight
/// [O, C / groups, K...], output/grad [N, O, R...].
LogicalResult verifyConv(Operation *op, ArrayRef<int64_t> in, ArrayRef<int64_t> w,
                         ArrayRef<int64_t> out, ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                         ArrayRef<int64_t> dilations, int64_t groups) {
  if (w.size() != in.size() || out.size() != in.size())
    return op->emitOpError("input ") << shapeStr(in) << ", weight " << shapeStr(w)
                                     << " and output " << shapeStr(out)
                                     << " must have the same rank";
  if (groups < 1 || in.size() < 3 || in[1] % groups || w[0] % groups || w[1] * groups != in[1])
    return op->emitOpError("weight ") << shapeStr(w) << " does not fit input channels "
                                      << (in.size() > 1 ? in[1] : 0) << " in " << groups
                                      << " groups (it needs [O, C / groups, K...], O "
                                         "divisible by groups)";
  std::string why;
  auto dims = windowOutputDims(in, w.drop_front(2), strides, pads, dilations, false, why);
  if (failed(dims))
    return op->emitOpError(why);
  SmallVector<int64_t> shape{in[0], w[0]};
  llvm::append_range(shape, *dims);
  if (ArrayRef<int64_t>(shape) != out)
    return op->emitOpError("output shape ") << shapeStr(out) << " is not the convolution's "
                                            << shapeStr(shape) << " for input " << shapeStr(in);
  return success();
}

int64_t convFlops(ArrayRef<int64_t> out, ArrayRef<int64_t> w, int64_t groups) {
  (void)groups; // weight dim 1 is already C / groups
  int64_t perOut = 2;
  for (int64_t d : w.drop_front(1))
    perOut *= d;
  int64_t n = 1;
  for (int64_t d : out)
    n *= d;
  return n * perOut;
}

LogicalResult verifyPool(Operation *op, ArrayRef<int64_t> in, ArrayRef<int64_t> out,
                         ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                         ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations, bool ceil) {
  std::string why;
  auto dims = windowOutputDims(in, kernel, strides, pads, dilations, ceil, why);
  if (failed(dims))
    return op->emitOpError(why);
  SmallVector<int64_t> shape(in.take_front(2));
  llvm::append_range(shape, *dims);
  if (ArrayRef<int64_t>(shape) != out)
    return op->emitOpError("output shape ") << shapeStr(out) << " is not the pooling's "
                                            << shapeStr(shape) << " for input " << shapeStr(in);
  return success();
}

SmallVector<int64_t> ones(size_t n) { return SmallVector<int64_t>(n, 1); }
} // namespace

LogicalResult ConvOp::verify() {
  return verifyConv(*this, getInput().getType().getShape(), getWeight().getType().getShape(),
                    getType().getShape(), getStrides(), getPads(), getDilations(), getGroups());
}
int64_t ConvOp::getFlops() {
  return convFlops(getType().getShape(), getWeight().getType().getShape(), getGroups());
}
LogicalResult ConvInputGradOp::verify() {
  return verifyConv(*this, getType().getShape(), getWeight().getType().getShape(),
                    getGrad().getType().getShape(), getStrides(), getPads(), getDilations(),
                    getGroups());
}
int64_t ConvInputGradOp::getFlops() {
  return convFlops(getGrad().getType().getShape(), getWeight().getType().getShape(), getGroups());
}
LogicalResult ConvWeightGradOp::verify() {
  return verifyConv(*this, getInput().getType().getShape(), getType().getShape(),
                    getGrad().getType().getShape(), getStrides(), getPads(), getDilations(),
                    getGroups());
}
int64_t ConvWeightGradOp::getFlops() {
  return convFlops(getGrad().getType().getShape(), getType().getShape(), getGroups());
}
LogicalResult MaxPoolOp::verify() {
  return verifyPool(*this, getInput().getType().getShape(), getType().getShape(),
                    getKernelShape(), getStrides(), getPads(), getDilations(), getCeilMode());
}
int64_t MaxPoolOp::getFlops() {
  int64_t k = 1;
  for (int64_t d : getKernelShape())
    k *= d;
  return numElements(getType()) * k;
}
LogicalResult MaxPoolGradOp::verify() {
  return verifyPool(*this, getInput().getType().getShape(), getGrad().getType().getShape(),
                    getKernelShape(), getStrides(), getPads(), getDilations(), getCeilMode());
}
int64_t MaxPoolGradOp::getFlops() {
  int64_t k = 1;
  for (int64_t d : getKernelShape())
    k *= d;
  return numElements(getGrad().getType()) * k;
}
LogicalResult AvgPoolOp::verify() {
  auto in = getInput().getType().getShape();
  return verifyPool(*this, in, getType().getShape(), getKernelShape(), getStrides(), getPads(),
                    ones(getKernelShape().size()), getCeilMode());
}
int64_t AvgPoolOp::getFlops() {
  int64_t k = 1;
  for (int64_t d : getKernelShape())
    k *= d;
  return numElements(getType()) * k;
}
LogicalResult AvgPoolGradOp::verify() {
  return verifyPool(*this, getType().getShape(), getGrad().getType().getShape(),
                    getKernelShape(), getStrides(), getPads(), ones(getKernelShape().size()),
                    getCeilMode());
}
int64_t AvgPoolGradOp::getFlops() {
  int64_t k = 1;
  for (int64_t d : getKernelShape())
    k *= d;
  return numElements(getGrad().getType()) * k;
}

//===----------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------===//

LogicalResult GatherGradOp::verify() {
  // The gradient's shape must be what gather of data_grad at indices makes.
  auto data = getDataGrad().getType();
  if (data.getRank() == 0)
    return emitOpError("data gradient must have rank >= 1");
  int64_t rank = data.getRank();
  int64_t axis = (int64_t)getAxis() < 0 ? (int64_t)getAxis() + rank : (int64_t)getAxis();
  if (axis < 0 || axis >= rank)
    return emitOpError("axis ") << (int64_t)getAxis() << " is out of range for rank " << rank;
  auto shape = gatheredShape(data.getShape(), getIndices().getType().getShape(), axis);
  if (ArrayRef<int64_t>(shape) != getGrad().getType().getShape())
    return emitOpError("gradient shape ")
           << shapeStr(getGrad().getType().getShape()) << " is not the gathered shape "
           << shapeStr(shape);
  return success();
}

LogicalResult SliceGradOp::verify() {
  auto input = getInputGrad().getType();
  ArrayRef<int64_t> start = getStart(), limit = getLimit(), stride = getStride();
  int64_t rank = input.getRank();
  if ((int64_t)start.size() != rank || (int64_t)limit.size() != rank ||
      (int64_t)stride.size() != rank)
    return emitOpError("start, limit and stride need one entry per dimension (")
           << rank << ")";
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i) {
    if (stride[i] <= 0 || start[i] < 0 || start[i] > limit[i] ||
        limit[i] > input.getShape()[i])
      return emitOpError("dimension ") << i << " slice [" << start[i] << ", "
                                       << limit[i] << ") step " << stride[i]
                                       << " is invalid for size "
                                       << input.getShape()[i];
    shape.push_back((limit[i] - start[i] + stride[i] - 1) / stride[i]);
  }
  if (ArrayRef<int64_t>(shape) != getGrad().getType().getShape())
    return emitOpError("gradient shape ")
           << shapeStr(getGrad().getType().getShape())
           << " is not the slice's result shape " << shapeStr(shape);
  return success();
}

#define GET_OP_CLASSES
#include "dialects/nn/NNOps.cpp.inc"
