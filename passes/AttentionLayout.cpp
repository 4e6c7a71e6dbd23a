//===- AttentionLayout.cpp - attention over the projections' layout -------===//
//
// The exporters split a projection [B, T, H*D] into heads with a reshape
// to [B, T, H, D] and a transpose to [B, H, T, D] before attention, and
// permute the result back before the output projection: per layer four
// copies in the forward and four more in the backward (the result's
// gradient in, the three gradients out), each a pass over the tensor.
// nn.attention reads each head's rows in place with `bshd`, so on the
// differentiated step this pass drops the permutes around it.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/nn/NNDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"

namespace dsc {
#define GEN_PASS_DEF_ATTENTIONLAYOUT
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

/// Whether `t` swaps dimensions r-3 and r-2 of its input and keeps the
/// others: [..., T, H, D] <-> [..., H, T, D].
bool isHeadSwap(nn::TransposeOp t) {
  ArrayRef<int64_t> perm = t.getPermutation();
  const int64_t r = int64_t(perm.size());
  if (r < 3)
    return false;
  for (int64_t d = 0; d < r; ++d) {
    const int64_t want = d == r - 3 ? r - 2 : d == r - 2 ? r - 3 : d;
    if (perm[d] != want)
      return false;
  }
  return true;
}

/// The [..., T, H, D] value that `v` is the head swap of, or null.
Value unswapped(Value v) {
  auto t = v.getDefiningOp<nn::TransposeOp>();
  return t && isHeadSwap(t) ? t.getInput() : Value();
}

/// Whether every use of `v` is a head swap back (that the bshd result
/// then replaces); a value without uses qualifies.
bool onlySwappedBack(Value v) {
  return llvm::all_of(v.getUsers(), [](Operation *u) {
    auto t = dyn_cast<nn::TransposeOp>(u);
    return t && isHeadSwap(t);
  });
}

/// `type` with dimensions r-3 and r-2 swapped.
RankedTensorType swapHeads(Type type) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  std::swap(shape[shape.size() - 3], shape[shape.size() - 2]);
  return RankedTensorType::get(shape, t.getElementType());
}

/// The head swaps that fed an op, each once (one swap may have been its
/// query, key and value), found before the op is erased.
SmallVector<Operation *> swapsOf(ValueRange inputs) {
  SmallVector<Operation *> swaps;
  for (Value v : inputs)
    if (auto t = v.getDefiningOp<nn::TransposeOp>(); t && !llvm::is_contained(swaps, t))
      swaps.push_back(t);
  return swaps;
}

/// Rewrites head-major `op` (nn.attention or nn.attention_grad) in its
/// bshd form when its first `permuted` operands are head swaps and its
/// first `swapped` results are read only through head swaps back: a clone
/// reading the unpermuted values, whose results replace the swaps back (the
/// other results, the stats, are head-major in both layouts). A
/// tensor-parallel split of the heads (dimension r-3 of the head-major
/// operands) moves to r-2. Returns whether it did.
bool toBshd(Operation *op, unsigned permuted, unsigned swapped, IRRewriter &rewriter,
            int64_t &folded) {
  if (op->hasAttr("bshd"))
    return false;
  SmallVector<Value> inputs;
  for (unsigned k = 0; k < permuted; ++k)
    if (!inputs.emplace_back(unswapped(op->getOperand(k))))
      return false;
  for (unsigned r = 0; r < swapped; ++r)
    if (!onlySwappedBack(op->getResult(r)))
      return false;
  rewriter.setInsertionPoint(op);
  Operation *bshd = rewriter.clone(*op);
  for (auto [k, v] : llvm::enumerate(inputs))
    bshd->setOperand(unsigned(k), v);
  for (unsigned r = 0; r < swapped; ++r)
    bshd->getResult(r).setType(swapHeads(op->getResult(r).getType()));
  bshd->setAttr("bshd", rewriter.getUnitAttr());
  const int64_t rank = cast<RankedTensorType>(op->getOperand(0).getType()).getRank();
  if (auto split = bshd->getAttrOfType<DenseI64ArrayAttr>("dist.tp_split")) {
    SmallVector<int64_t> s(split.asArrayRef());
    if (!s.empty() && s[0] == rank - 3)
      s[0] = rank - 2;
    bshd->setAttr("dist.tp_split", rewriter.getDenseI64ArrayAttr(s));
  }
  for (unsigned r = 0; r < op->getNumResults(); ++r) {
    if (r >= swapped) {
      rewriter.replaceAllUsesWith(op->getResult(r), bshd->getResult(r));
      continue;
    }
    for (Operation *u : llvm::make_early_inc_range(op->getResult(r).getUsers())) {
      rewriter.replaceOp(u, bshd->getResult(r));
      ++folded;
    }
  }
  SmallVector<Operation *> swaps = swapsOf(op->getOperands().take_front(permuted));
  rewriter.eraseOp(op);
  for (Operation *t : swaps)
    if (t->use_empty()) {
      rewriter.eraseOp(t);
      ++folded;
    }
  return true;
}

struct AttentionLayoutPass : impl::AttentionLayoutBase<AttentionLayoutPass> {
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<nn::AttentionOp, nn::AttentionGradOp>(op))
        ops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    int64_t folded = 0;
    for (Operation *op : ops) {
      // The forward: query, key and value in, its result out; the
      // gradient: the result's gradient, query, key and value in, their
      // three gradients out.
      if (isa<nn::AttentionOp>(op))
        numAttention += toBshd(op, 3, 1, rewriter, folded);
      else
        numGrads += toBshd(op, 4, 3, rewriter, folded);
    }
    numPermutes += folded;
  }
};

} // namespace
} // namespace dsc
