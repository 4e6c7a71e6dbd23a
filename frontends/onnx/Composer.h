//===- Composer.h - building a node's lowering from nn ops ------*- C++ -*-===//
//
// The converters that lower one ONNX node to several nn ops (activations,
// Pad, the recurrent layers, BatchNormalization) chain many creations; a
// Composer stops at the first failure (which the importer has reported for
// the node) and then returns null values, so a converter checks once at
// the end.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_FRONTENDS_ONNX_COMPOSER_H
#define DSC_FRONTENDS_ONNX_COMPOSER_H

#include "frontends/onnx/GraphImporter.h"

#include "dialects/nn/NNDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

namespace dsc::onnx_import {

class Composer {
public:
  explicit Composer(GraphImporter &g) : g_(g) {}

  bool ok() const { return ok_; }
  GraphImporter &importer() { return g_; }
  static mlir::RankedTensorType typeOf(mlir::Value v) {
    return mlir::cast<mlir::RankedTensorType>(v.getType());
  }
  mlir::Type elementType(mlir::Value v) const { return typeOf(v).getElementType(); }
  mlir::Value scalar(double v, mlir::Value like) { return g_.scalar(v, elementType(like)); }

  /// An op whose result types are inferred.
  template <typename OpTy>
  mlir::Value op(mlir::ValueRange operands, llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    if (!ok_)
      return {};
    auto r = g_.create<OpTy>(operands, attrs);
    if (mlir::failed(r)) {
      ok_ = false;
      return {};
    }
    return *r;
  }
  /// An op with an explicit result type, verified now so that a bad shape
  /// is the node's error.
  template <typename OpTy>
  mlir::Value made(mlir::Type result, mlir::ValueRange operands,
                   llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    if (!ok_)
      return {};
    auto op = OpTy::create(g_.builder(), g_.loc(), mlir::TypeRange{result}, operands, attrs);
    if (mlir::failed(g_.verifyNew(op.getOperation()))) {
      ok_ = false;
      return {};
    }
    return op->getResult(0);
  }
  mlir::Value cmp(nn::CmpPredicate p, mlir::Value a, mlir::Value b) {
    return op<nn::CmpOp>({a, b}, {g_.attr("predicate", nn::CmpPredicateAttr::get(g_.context(), p))});
  }
  template <typename OpTy> mlir::Value unary(mlir::Value x) {
    if (!ok_)
      return {};
    return OpTy::create(g_.builder(), g_.loc(), x.getType(), x);
  }
  /// x > t ? a : b.
  mlir::Value above(mlir::Value x, double t, mlir::Value a, mlir::Value b) {
    return op<nn::SelectOp>({cmp(nn::CmpPredicate::gt, x, scalar(t, x)), a, b});
  }
  mlir::Value reshape(mlir::Value v, llvm::ArrayRef<int64_t> shape) {
    if (!ok_)
      return {};
    if (typeOf(v).getShape() == shape)
      return v;
    return made<nn::ReshapeOp>(typeOf(v).clone(shape), {v});
  }
  mlir::Value slice(mlir::Value v, llvm::ArrayRef<int64_t> start, llvm::ArrayRef<int64_t> limit,
                    llvm::ArrayRef<int64_t> stride) {
    if (!ok_)
      return {};
    bool whole = true;
    for (size_t d = 0; d < start.size(); ++d)
      whole &= start[d] == 0 && limit[d] == typeOf(v).getDimSize(d) && stride[d] == 1;
    if (whole)
      return v;
    auto &b = g_.builder();
    return op<nn::SliceOp>({v}, {g_.attr("start", b.getDenseI64ArrayAttr(start)),
                                 g_.attr("limit", b.getDenseI64ArrayAttr(limit)),
                                 g_.attr("stride", b.getDenseI64ArrayAttr(stride))});
  }
  /// v[lo:hi] along `axis`, the other dims whole.
  mlir::Value sliceAxis(mlir::Value v, int64_t axis, int64_t lo, int64_t hi) {
    if (!ok_)
      return {};
    auto shape = typeOf(v).getShape();
    llvm::SmallVector<int64_t> start(shape.size(), 0), limit(shape), stride(shape.size(), 1);
    start[axis] = lo;
    limit[axis] = hi;
    return slice(v, start, limit, stride);
  }
  mlir::Value concat(mlir::ValueRange vs, int64_t axis) {
    if (vs.size() == 1)
      return vs.front();
    return op<nn::ConcatOp>(vs, {g_.attr("axis", g_.builder().getI64IntegerAttr(axis))});
  }
  template <typename OpTy>
  mlir::Value reduce(mlir::Value v, llvm::ArrayRef<int64_t> axes, bool keepdims) {
    llvm::SmallVector<mlir::NamedAttribute> attrs{
        g_.attr("axes", g_.builder().getDenseI64ArrayAttr(axes))};
    if (keepdims)
      attrs.push_back(g_.attr("keepdims", g_.builder().getUnitAttr()));
    return op<OpTy>({v}, attrs);
  }
  /// The int64 constant 0, 1, ..., n - 1 along `axis` of a rank-`rank`
  /// tensor (the other dims 1): what an index is compared with.
  mlir::Value positions(int64_t n, int64_t rank, int64_t axis) {
    llvm::SmallVector<int64_t> shape(rank, 1), pos(n);
    shape[axis] = n;
    for (int64_t k = 0; k < n; ++k)
      pos[k] = k;
    auto type = mlir::RankedTensorType::get(shape, g_.builder().getI64Type());
    return mlir::arith::ConstantOp::create(
        g_.builder(), g_.loc(), mlir::DenseElementsAttr::get(type, llvm::ArrayRef<int64_t>(pos)));
  }
  /// The node's output 0 is `v`, unless the composition failed.
  mlir::LogicalResult finish(mlir::Value v) {
    if (!ok_ || !v)
      return mlir::failure();
    g_.setOutput(0, v);
    return mlir::success();
  }
  /// Marks the composition failed with `message` as the node's error.
  mlir::Value fail(const llvm::Twine &message) {
    if (ok_)
      (void)g_.fail(message);
    ok_ = false;
    return {};
  }

private:
  GraphImporter &g_;
  bool ok_ = true;
};

} // namespace dsc::onnx_import

#endif // DSC_FRONTENDS_ONNX_COMPOSER_H
