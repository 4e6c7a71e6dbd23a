//===- EinsumOps.cpp - ONNX Einsum -> transposes, reshapes, matmuls --------===//
//
// Any Einsum equation with static shapes, lowered to nn ops that autodiff
// already differentiates: the operands are contracted left to right, two at
// a time. For each pair, a label that neither the rest of the equation nor
// the other operand reads is summed out first (nn.reduce_sum); the shared
// labels the rest still needs are batch dimensions, the shared ones it does
// not are contracted, and the others are the rows and columns:
//
//   A -> transpose [batch, rows, contracted] -> reshape [B, M, K]
//   B -> transpose [batch, contracted, cols] -> reshape [B, K, N]
//   nn.matmul -> [B, M, N] -> reshape [batch..., rows..., cols...]
//
// and the result is transposed to the output's order. An outer product is
// the K = 1 case. Ellipses ("...") stand for the leading dimensions, aligned
// from the right as NumPy aligns them; the implicit form (no "->") keeps the
// ellipsis and the labels that occur once, in alphabetical order.
// Refused, with the node named: a label repeated within one operand (a
// diagonal), sizes that differ for one label (broadcasting a label is not
// supported), integer operands.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/Einsum.h"
#include "frontends/onnx/GraphImporter.h"

#include "dialects/nn/NNDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <set>

using namespace mlir;

namespace dsc::onnx_import {
namespace {

class Einsum {
public:
  explicit Einsum(GraphImporter &g) : g_(g) {}

  LogicalResult run() {
    std::vector<std::vector<int64_t>> shapes;
    for (int k = 0; k < g_.node().input_size(); ++k) {
      Value v = g_.input(k);
      if (!v)
        return failure();
      if (!nn::isFloatTensor(v.getType()))
        return g_.fail("operand " + Twine(k) + " is not a float tensor");
      auto shape = cast<RankedTensorType>(v.getType()).getShape();
      shapes.emplace_back(shape.begin(), shape.end());
      operands_.push_back({v, {}});
    }
    std::string why;
    std::optional<EinsumSpec> spec =
        parseEinsum(attrString(g_.node(), "equation", ""), shapes, why);
    if (!spec)
      return g_.fail(why);
    for (size_t k = 0; k < operands_.size(); ++k)
      operands_[k].labels = spec->operands[k];
    const Labels &out = spec->output;
    size_ = spec->size;
    // Left to right, two at a time.
    Operand acc = operands_[0];
    for (size_t k = 1; k < operands_.size(); ++k) {
      std::set<int> later(out.begin(), out.end());
      for (size_t j = k + 1; j < operands_.size(); ++j)
        later.insert(operands_[j].labels.begin(), operands_[j].labels.end());
      auto next = contract(acc, operands_[k], later);
      if (failed(next))
        return failure();
      acc = *next;
    }
    // What remains: sum what the output drops, then its order.
    std::set<int> keep(out.begin(), out.end());
    auto reduced = sumOut(acc, keep);
    if (failed(reduced))
      return failure();
    auto result = permute(*reduced, out);
    if (failed(result))
      return failure();
    g_.setOutput(0, result->value);
    return success();
  }

private:
  struct Operand {
    Value value;
    Labels labels;
  };

  /// Sums the labels of `x` that `keep` does not hold.
  FailureOr<Operand> sumOut(Operand x, const std::set<int> &keep) {
    SmallVector<int64_t> axes;
    Labels left;
    for (size_t d = 0; d < x.labels.size(); ++d)
      (keep.count(x.labels[d]) ? left.push_back(x.labels[d]) : axes.push_back(int64_t(d)));
    if (axes.empty())
      return x;
    auto op = g_.create<nn::ReduceSumOp>(
        {x.value}, {g_.attr("axes", g_.builder().getDenseI64ArrayAttr(axes))});
    if (failed(op))
      return failure();
    return Operand{*op, left};
  }

  /// `x` transposed to the label order `order` (the same set).
  FailureOr<Operand> permute(Operand x, const Labels &order) {
    SmallVector<int64_t> perm;
    bool identity = true;
    for (int l : order) {
      auto it = llvm::find(x.labels, l);
      perm.push_back(it - x.labels.begin());
      identity &= perm.back() == int64_t(perm.size() - 1);
    }
    if (identity)
      return Operand{x.value, order};
    auto op = g_.create<nn::TransposeOp>(
        {x.value}, {g_.attr("permutation", g_.builder().getDenseI64ArrayAttr(perm))});
    if (failed(op))
      return failure();
    return Operand{*op, order};
  }

  Value reshape(Value x, ArrayRef<int64_t> shape) {
    auto t = cast<RankedTensorType>(x.getType());
    if (t.getShape() == shape)
      return x;
    auto type = RankedTensorType::get(shape, t.getElementType());
    // A constant is reshaped here: the plan keeps a constant's bytes, not a
    // view of them.
    if (auto c = x.getDefiningOp<arith::ConstantOp>())
      if (auto dense = dyn_cast<DenseElementsAttr>(c.getValue()))
        return arith::ConstantOp::create(g_.builder(), g_.loc(), type, dense.reshape(type));
    return nn::ReshapeOp::create(g_.builder(), g_.loc(), type, x);
  }

  int64_t product(const Labels &ls) {
    int64_t n = 1;
    for (int l : ls)
      n *= size_[l];
    return n;
  }

  FailureOr<Operand> contract(Operand a, Operand b, const std::set<int> &later) {
    // Labels no one else reads are summed first.
    std::set<int> keepA(later), keepB(later);
    keepA.insert(b.labels.begin(), b.labels.end());
    keepB.insert(a.labels.begin(), a.labels.end());
    auto ra = sumOut(a, keepA), rb = sumOut(b, keepB);
    if (failed(ra) || failed(rb))
      return failure();
    a = *ra;
    b = *rb;
    Labels batch, rows, cols, inner;
    for (int l : a.labels) {
      bool shared = llvm::is_contained(b.labels, l);
      if (shared && later.count(l))
        batch.push_back(l);
      else if (shared)
        inner.push_back(l);
      else
        rows.push_back(l);
    }
    for (int l : b.labels)
      if (!llvm::is_contained(a.labels, l))
        cols.push_back(l);
    auto concat = [](std::initializer_list<const Labels *> parts) {
      Labels r;
      for (const Labels *p : parts)
        r.insert(r.end(), p->begin(), p->end());
      return r;
    };
    auto pa = permute(a, concat({&batch, &rows, &inner}));
    auto pb = permute(b, concat({&batch, &inner, &cols}));
    if (failed(pa) || failed(pb))
      return failure();
    int64_t nb = product(batch), m = product(rows), k = product(inner), n = product(cols);
    SmallVector<int64_t> sa, sb;
    if (!batch.empty()) {
      sa.push_back(nb);
      sb.push_back(nb);
    }
    sa.append({m, k});
    sb.append({k, n});
    auto mm = g_.create<nn::MatmulOp>({reshape(pa->value, sa), reshape(pb->value, sb)});
    if (failed(mm))
      return failure();
    Labels labels = concat({&batch, &rows, &cols});
    SmallVector<int64_t> shape;
    for (int l : labels)
      shape.push_back(size_[l]);
    return Operand{reshape(*mm, shape), labels};
  }

  GraphImporter &g_;
  std::vector<Operand> operands_;
  std::map<int, int64_t> size_;
};

LogicalResult einsum(GraphImporter &g) { return Einsum(g).run(); }

} // namespace

void registerEinsumConverters(ConverterTable &t) { t["Einsum"] = einsum; }

} // namespace dsc::onnx_import
