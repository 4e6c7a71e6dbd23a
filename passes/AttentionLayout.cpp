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

/// Replaces the head swaps of `from` by `to` (already in their layout).
void replaceSwapsBack(Value from, Value to, IRRewriter &rewriter, int64_t &folded) {
  for (Operation *u : llvm::make_early_inc_range(from.getUsers())) {
    rewriter.replaceOp(u, to);
    ++folded;
  }
}

/// The op's discardable attributes on `to`, a tensor-parallel split of the
/// heads (dimension r-3 of the head-major operands) moved to r-2.
void copyMarks(Operation *from, Operation *to, int64_t rank) {
  for (NamedAttribute a : from->getDiscardableAttrs()) {
    Attribute value = a.getValue();
    if (a.getName() == "dist.tp_split")
      if (auto split = dyn_cast<DenseI64ArrayAttr>(value)) {
        SmallVector<int64_t> s(split.asArrayRef());
        if (!s.empty() && s[0] == rank - 3)
          s[0] = rank - 2;
        value = DenseI64ArrayAttr::get(from->getContext(), s);
      }
    to->setDiscardableAttr(a.getName(), value);
  }
}

/// The head swaps that fed an op, each once (one swap may have been its
/// query, key and value), found before the op is erased.
SmallVector<Operation *> swapsOf(ArrayRef<Value> inputs) {
  SmallVector<Operation *> swaps;
  for (Value v : inputs)
    if (auto t = v.getDefiningOp<nn::TransposeOp>(); t && !llvm::is_contained(swaps, t))
      swaps.push_back(t);
  return swaps;
}

/// Erases those of `swaps` that nothing reads any more.
void eraseDeadSwaps(ArrayRef<Operation *> swaps, IRRewriter &rewriter, int64_t &folded) {
  for (Operation *t : swaps)
    if (t->use_empty()) {
      rewriter.eraseOp(t);
      ++folded;
    }
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
      if (auto at = dyn_cast<nn::AttentionOp>(op)) {
        Value q = unswapped(at.getQuery()), k = unswapped(at.getKey()),
              v = unswapped(at.getValue());
        if (at.getBshd() || !q || !k || !v || !onlySwappedBack(at.getResult()))
          continue;
        rewriter.setInsertionPoint(at);
        auto fused = nn::AttentionOp::create(
            rewriter, at.getLoc(), q, k, v, at.getBias(), at.getScaleAttr(),
            at.getScaleDividesAttr(), at.getCausalAttr(), at.getRatioAttr(),
            at.getRngStreamAttr(), rewriter.getUnitAttr());
        copyMarks(at, fused, at.getQuery().getType().getRank());
        replaceSwapsBack(at.getResult(), fused.getResult(), rewriter, folded);
        // The stats are head-major in both layouts.
        rewriter.replaceAllUsesWith(at.getStats(), fused.getStats());
        SmallVector<Operation *> swaps = swapsOf({at.getQuery(), at.getKey(), at.getValue()});
        rewriter.eraseOp(at);
        eraseDeadSwaps(swaps, rewriter, folded);
        ++numAttention;
        continue;
      }
      auto g = cast<nn::AttentionGradOp>(op);
      Value dy = unswapped(g.getGrad()), q = unswapped(g.getQuery()), k = unswapped(g.getKey()),
            v = unswapped(g.getValue());
      if (g.getBshd() || !dy || !q || !k || !v ||
          !llvm::all_of(g->getResults(), onlySwappedBack))
        continue;
      rewriter.setInsertionPoint(g);
      auto fused = nn::AttentionGradOp::create(
          rewriter, g.getLoc(), dy, q, k, v, g.getStats(), g.getBias(), g.getScaleAttr(),
          g.getScaleDividesAttr(), g.getCausalAttr(), g.getRatioAttr(), g.getRngStreamAttr(),
          rewriter.getUnitAttr());
      copyMarks(g, fused, g.getQuery().getType().getRank());
      for (auto [from, to] : llvm::zip(g->getResults(), fused->getResults()))
        replaceSwapsBack(from, to, rewriter, folded);
      SmallVector<Operation *> swaps =
          swapsOf({g.getGrad(), g.getQuery(), g.getKey(), g.getValue()});
      rewriter.eraseOp(g);
      eraseDeadSwaps(swaps, rewriter, folded);
      ++numGrads;
    }
    numPermutes += folded;
  }
};

} // namespace
} // namespace dsc
