//===- NNFusion.cpp - fold exported op chains into fused kernels ---------===//
//
// Exporters spell a linear layer as transpose + matmul and GELU as five
// elementwise ops. Each unfused op is a kernel launch and a full pass over
// memory in the forward, and several more in the backward; these patterns
// put them back together before autodiff.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/nn/NNDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace dsc {
#define GEN_PASS_DEF_NNFUSION
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

/// Whether `perm` swaps the two innermost dimensions and keeps the rest.
bool swapsLastTwo(ArrayRef<int64_t> perm) {
  int64_t r = perm.size();
  if (r < 2 || perm[r - 1] != r - 2 || perm[r - 2] != r - 1)
    return false;
  for (int64_t i = 0; i < r - 2; ++i)
    if (perm[i] != i)
      return false;
  return true;
}

struct FoldTransposeIntoMatmul : OpRewritePattern<nn::MatmulOp> {
  FoldTransposeIntoMatmul(MLIRContext *ctx, llvm::Statistic &count)
      : OpRewritePattern(ctx), count(count) {}
  LogicalResult matchAndRewrite(nn::MatmulOp op, PatternRewriter &rewriter) const override {
    auto lhsT = op.getLhs().getDefiningOp<nn::TransposeOp>();
    auto rhsT = op.getRhs().getDefiningOp<nn::TransposeOp>();
    bool foldLhs = lhsT && swapsLastTwo(lhsT.getPermutation());
    bool foldRhs = rhsT && swapsLastTwo(rhsT.getPermutation());
    if (!foldLhs && !foldRhs)
      return failure();
    Value lhs = foldLhs ? lhsT.getInput() : op.getLhs();
    Value rhs = foldRhs ? rhsT.getInput() : op.getRhs();
    bool tl = op.getTransposeLhs() != foldLhs, tr = op.getTransposeRhs() != foldRhs;
    rewriter.replaceOpWithNewOp<nn::MatmulOp>(op, lhs, rhs, tl, tr);
    count += foldLhs + foldRhs;
    return success();
  }
  llvm::Statistic &count;
};

/// The value of a splat float constant, if `v` is one.
std::optional<double> splat(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.isSplat() ||
      !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  return attr.getSplatValue<APFloat>().convertToDouble();
}
bool isConst(Value v, double expected) {
  auto c = splat(v);
  return c && std::abs(*c - expected) <= 1e-6 * std::max(1.0, std::abs(expected));
}

/// For a commutative binary op, the operand that is not `other`-like:
/// returns the operand for which `pred(operand)` holds and the other one.
template <typename Op, typename Pred>
std::optional<std::pair<Value, Value>> split(Op op, Pred pred) {
  if (pred(op.getLhs()))
    return std::make_pair(op.getLhs(), op.getRhs());
  if (pred(op.getRhs()))
    return std::make_pair(op.getRhs(), op.getLhs());
  return std::nullopt;
}

/// mul(mul(x, 1 + erf(x / sqrt2)), 0.5), mul(x, 0.5 * (1 + erf(...))), and
/// the tanh form 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
struct FuseGelu : OpRewritePattern<nn::MulOp> {
  FuseGelu(MLIRContext *ctx, llvm::Statistic &count) : OpRewritePattern(ctx), count(count) {}

  /// pow(x, 3), x * (x * x) or (x * x) * x.
  static bool isCube(Value v, Value x) {
    if (auto pow = v.getDefiningOp<nn::PowOp>())
      return pow.getLhs() == x && isConst(pow.getRhs(), 3.0);
    auto isSquare = [&](Value s) {
      auto m = s.getDefiningOp<nn::MulOp>();
      return m && m.getLhs() == x && m.getRhs() == x;
    };
    auto m = v.getDefiningOp<nn::MulOp>();
    return m && ((m.getLhs() == x && isSquare(m.getRhs())) ||
                 (m.getRhs() == x && isSquare(m.getLhs())));
  }

  /// If `v` is 1 + erf(x / sqrt2) (or the tanh form), returns x.
  static std::optional<std::pair<Value, nn::GeluApproximation>> onePlusCdf(Value v) {
    auto add = v.getDefiningOp<nn::AddOp>();
    if (!add)
      return std::nullopt;
    auto parts = split(add, [](Value x) { return isConst(x, 1.0); });
    if (!parts)
      return std::nullopt;
    Value inner = parts->second;
    if (auto erf = inner.getDefiningOp<nn::ErfOp>()) {
      if (auto div = erf.getInput().getDefiningOp<nn::DivOp>())
        if (isConst(div.getRhs(), std::sqrt(2.0)))
          return std::make_pair(div.getLhs(), nn::GeluApproximation::none);
      if (auto mul = erf.getInput().getDefiningOp<nn::MulOp>())
        if (auto p = split(mul, [](Value x) { return isConst(x, 1.0 / std::sqrt(2.0)); }))
          return std::make_pair(p->second, nn::GeluApproximation::none);
      return std::nullopt;
    }
    if (auto tanh = inner.getDefiningOp<nn::TanhOp>()) {
      // sqrt(2/pi) * (x + 0.044715 * x^3), x^3 as pow(x, 3) or x*x*x.
      auto scaled = tanh.getInput().getDefiningOp<nn::MulOp>();
      if (!scaled)
        return std::nullopt;
      auto p = split(scaled, [](Value x) { return isConst(x, std::sqrt(2.0 / M_PI)); });
      if (!p)
        return std::nullopt;
      auto sum = p->second.getDefiningOp<nn::AddOp>();
      if (!sum)
        return std::nullopt;
      for (auto [x, cubic] : {std::make_pair(sum.getLhs(), sum.getRhs()),
                              std::make_pair(sum.getRhs(), sum.getLhs())}) {
        auto m = cubic.getDefiningOp<nn::MulOp>();
        if (!m)
          continue;
        auto q = split(m, [](Value c) { return isConst(c, 0.044715); });
        if (!q)
          continue;
        if (isCube(q->second, x))
          return std::make_pair(x, nn::GeluApproximation::tanh);
      }
    }
    return std::nullopt;
  }

  LogicalResult matchAndRewrite(nn::MulOp op, PatternRewriter &rewriter) const override {
    // Look through the three association orders of x * cdf * 0.5.
    std::optional<std::pair<Value, nn::GeluApproximation>> gelu;
    auto tryProduct = [&](Value product, Value half) {
      if (gelu || !isConst(half, 0.5))
        return;
      auto mul = product.getDefiningOp<nn::MulOp>();
      if (!mul)
        return;
      for (auto [x, cdf] : {std::make_pair(mul.getLhs(), mul.getRhs()),
                            std::make_pair(mul.getRhs(), mul.getLhs())})
        if (auto m = onePlusCdf(cdf); m && m->first == x)
          gelu = m;
    };
    tryProduct(op.getLhs(), op.getRhs());
    tryProduct(op.getRhs(), op.getLhs());
    for (auto [x, halfCdf] : {std::make_pair(op.getLhs(), op.getRhs()),
                              std::make_pair(op.getRhs(), op.getLhs())}) {
      if (gelu)
        break;
      auto mul = halfCdf.getDefiningOp<nn::MulOp>();
      if (!mul)
        continue;
      if (auto p = split(mul, [](Value c) { return isConst(c, 0.5); }))
        if (auto m = onePlusCdf(p->second); m && m->first == x)
          gelu = m;
    }
    if (!gelu || gelu->first.getType() != op.getType())
      return failure();
    rewriter.replaceOpWithNewOp<nn::GeluOp>(op, gelu->first, gelu->second);
    ++count;
    return success();
  }
  llvm::Statistic &count;
};

struct NNFusion : impl::NNFusionBase<NNFusion> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldTransposeIntoMatmul>(&getContext(), numTransposesFolded);
    patterns.add<FuseGelu>(&getContext(), numGelus);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
} // namespace dsc
