//===- MatmulEpilogue.cpp - fold bias and residual adds into GEMMs --------===//
//
// A linear layer is exported as a matmul and an add of the bias, and a
// transformer block ends with the add of the residual: each add is another
// pass over the GEMM's result (read, write) that oneDNN's post-ops and
// cuBLASLt's epilogues do while the result is still in registers. On the
// planned step, where every use is known, this pass hands them to the GEMM.
// So too the GELU's gradient: the GELU keeps its derivative for the
// backward instead of its input, and the GEMM that makes the output
// gradient multiplies it in (foldGeluGrad).
// A bias gradient, the column sum of a GEMM's result, is summed by that
// GEMM as it stores the rows (foldColumnSum).
// Likewise the casts around a mixed-precision head's loss: the 16-bit
// logits widened only for nn.cross_entropy and its gradient, and that
// gradient narrowed right after, are read and written by the loss kernels
// as they are (foldLossCasts).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>

namespace dsc {
#define GEN_PASS_DEF_MATMULEPILOGUE
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

/// The GEMM behind `v` when the add is its only use and both are in one
/// block: an nn.matmul, or an epilogue that has no addend yet.
Operation *soleProduct(Value v, nn::AddOp add) {
  Operation *def = v.getDefiningOp();
  if (!def || !v.hasOneUse() || def->getBlock() != add->getBlock())
    return nullptr;
  if (isa<nn::MatmulOp>(def))
    return def;
  if (auto e = dyn_cast<nn::MatmulEpilogueOp>(def))
    return e.getAddend() ? nullptr : def;
  return nullptr;
}

/// Whether `a` and `b` are in the same phase (train.backward marks the
/// backward's ops, which pipeline-schedule runs apart).
bool samePhase(Operation *a, Operation *b) {
  return a->hasAttr(train::TrainDialect::kBackward) == b->hasAttr(train::TrainDialect::kBackward);
}

/// What a fold rebuilds of a GEMM: an nn.matmul's operands and transposes,
/// or an epilogue's with its bias, scale, addend and column sum.
struct GemmParts {
  Value lhs, rhs, bias, scale, addend, columnSum;
  bool tl = false, tr = false;
};
std::optional<GemmParts> partsOf(Operation *gemm) {
  GemmParts g;
  if (auto mm = dyn_cast_or_null<nn::MatmulOp>(gemm)) {
    g.tl = mm.getTransposeLhs();
    g.tr = mm.getTransposeRhs();
  } else if (auto e = dyn_cast_or_null<nn::MatmulEpilogueOp>(gemm)) {
    g.tl = e.getTransposeLhs();
    g.tr = e.getTransposeRhs();
    g.bias = e.getBias();
    g.scale = e.getScale();
    g.addend = e.getAddend();
    g.columnSum = e.getColumnSum();
  } else {
    return std::nullopt;
  }
  g.lhs = gemm->getOperand(0);
  g.rhs = gemm->getOperand(1);
  return g;
}

/// Whether `b` is a bias of `product`'s N columns.
bool isBias(Value b, RankedTensorType product) {
  auto t = dyn_cast<RankedTensorType>(b.getType());
  return t && t.getRank() == 1 && t.getShape()[0] == product.getShape().back() &&
         t.getElementType() == product.getElementType();
}

/// `fused` replaces `consumer` (the add or gradient folded into the GEMM)
/// and takes the marks of both (the phase, the GEMM's tensor-parallel
/// kind); the GEMM goes.
void replaceWithEpilogue(IRRewriter &rewriter, nn::MatmulEpilogueOp fused, Operation *consumer,
                         Operation *gemm) {
  for (Operation *from : {consumer, gemm})
    for (NamedAttribute a : from->getDiscardableAttrs())
      fused->setDiscardableAttr(a.getName(), a.getValue());
  rewriter.replaceOp(consumer, fused.getResult());
  rewriter.eraseOp(gemm);
}

/// Folds `add` into the GEMM behind one of its operands; false when neither
/// side qualifies. Adds are visited in program order, so a bias folded first
/// meets its residual next.
bool fold(nn::AddOp add, IRRewriter &rewriter, DominanceInfo &dom, llvm::Statistic &biases,
          llvm::Statistic &addends) {
  for (int side = 0; side < 2; ++side) {
    Value mine = add->getOperand(side), other = add->getOperand(1 - side);
    Operation *gemm = soleProduct(mine, add);
    // Both in one phase of a pipeline stage.
    if (!gemm || !samePhase(gemm, add))
      continue;
    auto type = cast<RankedTensorType>(mine.getType());
    if (add.getType() != type)
      continue; // the other operand broadcasts the sum beyond the product
    GemmParts g = *partsOf(gemm); // soleProduct's: no addend yet

    // A bias comes before the scale: only onto a product not scaled yet.
    const bool asBias = !g.bias && !g.scale && isBias(other, type);
    if (!asBias && other.getType() != type)
      continue;
    // The fused op takes the GEMM's place, so that no operand of the GEMM
    // lives longer than it did (a gradient's GEMM is often summed much
    // later, with the other branch's): the bias or addend must exist there.
    if (!dom.properlyDominates(other, gemm))
      continue;
    (asBias ? g.bias : g.addend) = other;
    ++(asBias ? biases : addends);
    rewriter.setInsertionPoint(gemm);
    auto fused = nn::MatmulEpilogueOp::create(rewriter, add.getLoc(), type, Type(), g.lhs, g.rhs,
                                              g.bias, g.scale, g.addend, g.tl, g.tr);
    replaceWithEpilogue(rewriter, fused, add, gemm);
    return true;
  }
  return false;
}

/// gelu_grad(h, dy) where h is read only by one nn.gelu (of the same
/// approximation) and this gradient, and dy is the only use of a GEMM in
/// the gradient's block and phase: the GELU becomes
/// nn.gelu_with_derivative, and the GEMM an epilogue that multiplies its
/// product by the derivative, which is the gradient. The backward no longer
/// reads h (the derivative is kept in its place, the same bytes) nor writes
/// and reads dy: one pass over [tokens, 4d] instead of three.
bool foldGeluGrad(nn::GeluGradOp grad, IRRewriter &rewriter) {
  Value h = grad.getInput(), dy = grad.getGrad();
  nn::GeluOp gelu;
  for (Operation *user : h.getUsers()) {
    if (user == grad.getOperation())
      continue;
    auto g = dyn_cast<nn::GeluOp>(user);
    if (!g || gelu || g.getApproximation() != grad.getApproximation())
      return false;
    gelu = g;
  }
  Operation *gemm = dy.getDefiningOp();
  if (!gelu || !gemm || !dy.hasOneUse() || gemm->getBlock() != grad->getBlock() ||
      gelu->getBlock() != grad->getBlock() || !samePhase(gemm, grad))
    return false;
  std::optional<GemmParts> g = partsOf(gemm);
  if (!g || g->scale || g->addend || g->columnSum)
    return false;
  // The derivative is made with the GELU, which must come before the GEMM
  // (the forward before the backward): true of every step autodiff makes.
  if (!gelu->isBeforeInBlock(gemm))
    return false;
  rewriter.setInsertionPoint(gelu);
  auto both = nn::GeluWithDerivativeOp::create(rewriter, gelu.getLoc(), gelu.getType(),
                                               gelu.getType(), h, gelu.getApproximationAttr());
  both->setDiscardableAttrs(gelu->getDiscardableAttrDictionary());
  rewriter.replaceOp(gelu, both.getResult());
  rewriter.setInsertionPoint(gemm);
  auto fused = nn::MatmulEpilogueOp::create(rewriter, grad.getLoc(), grad.getType(), Type(),
                                            g->lhs, g->rhs, g->bias, both.getDerivative(),
                                            Value(), g->tl, g->tr);
  replaceWithEpilogue(rewriter, fused, grad, gemm);
  return true;
}

/// reduce_sum(x) over every axis but the last, of x's element type, where x
/// is a GEMM's result (an nn.matmul, or an epilogue without a column sum
/// yet) with an untransposed lhs, in the reduction's block and phase: the
/// bias gradient of a linear layer whose output gradient a GEMM makes (the
/// MLP's first layer, behind the GELU's gradient). The GEMM then sums its
/// rows as it stores them, while they are in cache, in the reduction's
/// order (the same bits), and the reduction's pass over [tokens, N] goes.
/// The GEMM's other users (the weight and input gradients) are untouched.
bool foldColumnSum(nn::ReduceSumOp sum, IRRewriter &rewriter) {
  Value x = sum.getInput();
  auto xt = dyn_cast<RankedTensorType>(x.getType());
  auto st = dyn_cast<RankedTensorType>(sum.getType());
  Operation *gemm = x.getDefiningOp();
  if (!xt || !st || !gemm || xt.getRank() < 2 || st.getRank() != 1 ||
      st.getShape()[0] != xt.getShape().back() || st.getElementType() != xt.getElementType() ||
      int64_t(sum.getAxes().size()) != xt.getRank() - 1 || gemm->getBlock() != sum->getBlock() ||
      !samePhase(gemm, sum))
    return false;
  for (auto [i, axis] : llvm::enumerate(sum.getAxes()))
    if (axis != int64_t(i))
      return false;
  std::optional<GemmParts> g = partsOf(gemm);
  if (!g || g->columnSum || g->tl)
    return false;
  rewriter.setInsertionPoint(gemm);
  auto fused = nn::MatmulEpilogueOp::create(rewriter, gemm->getLoc(), xt, st, g->lhs, g->rhs,
                                            g->bias, g->scale, g->addend, g->tl, g->tr);
  fused->setDiscardableAttrs(gemm->getDiscardableAttrDictionary());
  rewriter.replaceAllUsesWith(x, fused.getResult());
  rewriter.replaceOp(sum, fused.getColumnSum());
  rewriter.eraseOp(gemm);
  return true;
}

/// Whether `c` narrows f32 to `narrow`, a bf16 / fp16 tensor type.
bool castsTo(Operation *op, Type narrow) {
  auto c = dyn_cast_or_null<nn::CastOp>(op);
  return c && cast<RankedTensorType>(c.getInput().getType()).getElementType().isF32() &&
         c.getType() == narrow;
}

/// A cast of 16-bit logits to f32 that only nn.cross_entropy and
/// nn.cross_entropy_grad read (as their logits), each gradient read only by
/// a cast back to the logits' type: the loss reads the 16-bit logits (a
/// widening is exact), the gradient is computed in float and rounded once
/// into the 16-bit type, which is what the cast back did. The same bits,
/// without the two passes over [tokens, vocabulary] floats and their two
/// f32 buffers (GPT-2 small at 8 x 1024 tokens: 1.6 GB each). All or
/// nothing per cast.
bool foldLossCasts(nn::CastOp widen, IRRewriter &rewriter) {
  Value narrow = widen.getInput();
  auto from = cast<RankedTensorType>(narrow.getType());
  if (!cast<RankedTensorType>(widen.getType()).getElementType().isF32() ||
      !(from.getElementType().isBF16() || from.getElementType().isF16()) || widen->use_empty())
    return false;
  for (OpOperand &use : widen->getUses()) {
    Operation *user = use.getOwner();
    if (use.getOperandNumber() != 0)
      return false;
    if (isa<nn::CrossEntropyOp>(user))
      continue;
    auto grad = dyn_cast<nn::CrossEntropyGradOp>(user);
    if (!grad || !grad.getInputGrad().hasOneUse() ||
        !castsTo(*grad.getInputGrad().getUsers().begin(), from))
      return false;
  }
  for (Operation *user : llvm::make_early_inc_range(widen->getUsers())) {
    if (auto ce = dyn_cast<nn::CrossEntropyOp>(user)) {
      ce.getInputMutable().assign(narrow);
      continue;
    }
    auto grad = cast<nn::CrossEntropyGradOp>(user);
    Operation *back = *grad.getInputGrad().getUsers().begin();
    rewriter.setInsertionPoint(grad);
    auto narrowGrad = nn::CrossEntropyGradOp::create(
        rewriter, grad.getLoc(), from, narrow, grad.getLabels(), grad.getGrad(),
        grad.getReductionAttr(), grad.getIgnoreIndexAttr());
    narrowGrad->setDiscardableAttrs(grad->getDiscardableAttrDictionary());
    rewriter.replaceOp(back, narrowGrad.getInputGrad());
    rewriter.eraseOp(grad);
  }
  rewriter.eraseOp(widen);
  return true;
}

struct MatmulEpiloguePass : impl::MatmulEpilogueBase<MatmulEpiloguePass> {
  void runOnOperation() override {
    SmallVector<nn::AddOp> adds;
    getOperation().walk([&](nn::AddOp add) { adds.push_back(add); });
    IRRewriter rewriter(&getContext());
    DominanceInfo dom(getOperation());
    // The GELU gradients first: a gradient summed into the GELU's input
    // gradient then becomes the scaled GEMM's addend.
    SmallVector<nn::GeluGradOp> geluGrads;
    getOperation().walk([&](nn::GeluGradOp g) { geluGrads.push_back(g); });
    for (nn::GeluGradOp g : geluGrads)
      numGeluGrads += foldGeluGrad(g, rewriter);
    for (nn::AddOp add : adds)
      fold(add, rewriter, dom, numBiases, numAddends);
    // The widenings (the fold erases the narrowing casts after the
    // gradients, never another widening).
    SmallVector<nn::CastOp> widenings;
    getOperation().walk([&](nn::CastOp c) {
      auto from = cast<RankedTensorType>(c.getInput().getType()).getElementType();
      if ((from.isBF16() || from.isF16()) &&
          cast<RankedTensorType>(c.getType()).getElementType().isF32())
        widenings.push_back(c);
    });
    for (nn::CastOp c : widenings)
      numLossCasts += foldLossCasts(c, rewriter);
    // Last: the column sum is of what the epilogue finally stores.
    SmallVector<nn::ReduceSumOp> sums;
    getOperation().walk([&](nn::ReduceSumOp r) { sums.push_back(r); });
    for (nn::ReduceSumOp r : sums)
      numColumnSums += foldColumnSum(r, rewriter);
  }
};

} // namespace
} // namespace dsc
