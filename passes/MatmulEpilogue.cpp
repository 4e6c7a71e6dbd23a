//===- MatmulEpilogue.cpp - fold bias and residual adds into GEMMs --------===//
//
// A linear layer is exported as a matmul and an add of the bias, and a
// transformer block ends with the add of the residual: each add is another
// pass over the GEMM's result (read, write) that oneDNN's post-ops and
// cuBLASLt's epilogues do while the result is still in registers. On the
// planned step, where every use is known, this pass hands them to the GEMM.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"

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

/// Whether `b` is a bias of `product`'s N columns.
bool isBias(Value b, RankedTensorType product) {
  auto t = dyn_cast<RankedTensorType>(b.getType());
  return t && t.getRank() == 1 && t.getShape()[0] == product.getShape().back() &&
         t.getElementType() == product.getElementType();
}

/// Folds `add` into the GEMM behind one of its operands; false when neither
/// side qualifies. Adds are visited in program order, so a bias folded first
/// meets its residual next.
bool fold(nn::AddOp add, IRRewriter &rewriter, DominanceInfo &dom, llvm::Statistic &biases,
          llvm::Statistic &addends) {
  for (int side = 0; side < 2; ++side) {
    Value mine = add->getOperand(side), other = add->getOperand(1 - side);
    Operation *gemm = soleProduct(mine, add);
    // Both in one phase of a pipeline stage (train.backward marks the
    // backward's ops, which pipeline-schedule runs apart).
    if (!gemm || gemm->hasAttr(train::TrainDialect::kBackward) !=
                     add->hasAttr(train::TrainDialect::kBackward))
      continue;
    auto type = cast<RankedTensorType>(mine.getType());
    if (add.getType() != type)
      continue; // the other operand broadcasts the sum beyond the product
    Value lhs = gemm->getOperand(0), rhs = gemm->getOperand(1), bias, addend;
    bool tl, tr;
    if (auto mm = dyn_cast<nn::MatmulOp>(gemm)) {
      tl = mm.getTransposeLhs();
      tr = mm.getTransposeRhs();
    } else {
      auto e = cast<nn::MatmulEpilogueOp>(gemm);
      tl = e.getTransposeLhs();
      tr = e.getTransposeRhs();
      bias = e.getBias();
    }
    const bool asBias = !bias && isBias(other, type);
    if (!asBias && other.getType() != type)
      continue;
    // The fused op takes the GEMM's place, so that no operand of the GEMM
    // lives longer than it did (a gradient's GEMM is often summed much
    // later, with the other branch's): the bias or addend must exist there.
    if (!dom.properlyDominates(other, gemm))
      continue;
    (asBias ? bias : addend) = other;
    ++(asBias ? biases : addends);
    rewriter.setInsertionPoint(gemm);
    auto fused = nn::MatmulEpilogueOp::create(rewriter, add.getLoc(), type, lhs, rhs, bias,
                                              addend, tl, tr);
    // The marks of both (the phase, the GEMM's tensor-parallel kind).
    for (Operation *from : {static_cast<Operation *>(add), gemm})
      for (NamedAttribute a : from->getDiscardableAttrs())
        fused->setDiscardableAttr(a.getName(), a.getValue());
    rewriter.replaceOp(add, fused.getResult());
    rewriter.eraseOp(gemm);
    return true;
  }
  return false;
}

struct MatmulEpiloguePass : impl::MatmulEpilogueBase<MatmulEpiloguePass> {
  void runOnOperation() override {
    SmallVector<nn::AddOp> adds;
    getOperation().walk([&](nn::AddOp add) { adds.push_back(add); });
    IRRewriter rewriter(&getContext());
    DominanceInfo dom(getOperation());
    for (nn::AddOp add : adds)
      fold(add, rewriter, dom, numBiases, numAddends);
  }
};

} // namespace
} // namespace dsc
