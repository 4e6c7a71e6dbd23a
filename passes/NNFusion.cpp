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
#include "mlir/Dialect/Func/IR/FuncOps.h"
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

//===--- attention ---------------------------------------------------------===//

/// A masked score's fill is exact when exp(fill - max) is 0 in float32
/// whatever the row's real scores: -inf, finfo.min or anything below -1e30.
bool isMaskFill(double v) { return v <= -1e30; }

/// Whether constant `c` of shape [1.., T, S] is the causal pattern: `when`
/// at key j > query i and !`when` elsewhere (bool), or 0 at j <= i and a
/// mask fill above (float, additive).
bool isCausal(DenseElementsAttr c, int64_t T, int64_t S, bool when) {
  auto type = cast<RankedTensorType>(c.getType());
  ArrayRef<int64_t> shape = type.getShape();
  int64_t r = shape.size();
  if (r < 2 || shape[r - 2] != T || shape[r - 1] != S ||
      llvm::any_of(shape.drop_back(2), [](int64_t d) { return d != 1; }))
    return false;
  if (type.getElementType().isInteger(1)) {
    auto values = c.getValues<bool>();
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < S; ++j)
        if (values[i * S + j] != ((j > i) == when))
          return false;
    return true;
  }
  if (!isa<FloatType>(type.getElementType()))
    return false;
  auto values = c.getValues<APFloat>();
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < S; ++j) {
      double v = values[i * S + j].convertToDouble();
      if (j > i ? !isMaskFill(v) : v != 0.0)
        return false;
    }
  return true;
}

/// Whether a function argument marked train.param reaches `v`.
bool reachedByParam(Value v) {
  SmallVector<Value> work{v};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value x = work.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(x)) {
      auto fn = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
      if (!fn || fn.getArgAttr(arg.getArgNumber(), "train.param"))
        return true;
      continue;
    }
    for (Value operand : x.getDefiningOp()->getOperands())
      work.push_back(operand);
  }
  return false;
}

/// softmax(mask-or-bias(scale(matmul(q, k^T)))) -> dropout -> matmul(., v)
/// as one nn.attention. Anchored on the softmax; every step must have the
/// next as its only use.
struct FuseAttention : OpRewritePattern<nn::SoftmaxOp> {
  FuseAttention(MLIRContext *ctx, llvm::Statistic &count) : OpRewritePattern(ctx), count(count) {}

  struct Chain {
    nn::MatmulOp scores;
    double scale = 1.0;
    bool divides = false, causal = false;
    Value bias;
    SmallVector<Location> locs;
  };

  /// v = scale(matmul) or matmul, scale a scalar constant multiplying or
  /// dividing it.
  static bool matchScaled(Value v, Chain &c) {
    if (!v.hasOneUse())
      return false;
    if (auto mm = v.getDefiningOp<nn::MatmulOp>()) {
      c.scores = mm;
      c.locs.push_back(mm.getLoc());
      return true;
    }
    auto scalar = [](Value x) -> std::optional<double> {
      auto t = cast<RankedTensorType>(x.getType());
      if (llvm::any_of(t.getShape(), [](int64_t d) { return d != 1; }))
        return std::nullopt;
      return splat(x);
    };
    if (auto mul = v.getDefiningOp<nn::MulOp>()) {
      for (auto [x, k] : {std::make_pair(mul.getLhs(), mul.getRhs()),
                          std::make_pair(mul.getRhs(), mul.getLhs())})
        if (auto s = scalar(k); s && *s > 0 && x.getType() == v.getType()) {
          c.scale = *s;
          c.locs.push_back(mul.getLoc());
          return matchScaled(x, c) && c.scores && c.scores.getResult() == x;
        }
      return false;
    }
    if (auto div = v.getDefiningOp<nn::DivOp>()) {
      auto s = scalar(div.getRhs());
      if (!s || *s <= 0 || div.getLhs().getType() != v.getType())
        return false;
      c.scale = *s;
      c.divides = true;
      c.locs.push_back(div.getLoc());
      return matchScaled(div.getLhs(), c) && c.scores.getResult() == div.getLhs();
    }
    return false;
  }

  /// v = a causal select or additive constant and / or a bias around the
  /// scaled scores.
  static bool matchMasked(Value v, Chain &c, int64_t T, int64_t S) {
    if (!v.hasOneUse())
      return false;
    if (auto sel = v.getDefiningOp<nn::SelectOp>()) {
      DenseElementsAttr cond;
      if (c.causal || !matchPattern(sel.getCond(), m_Constant(&cond)))
        return false;
      for (auto [fill, kept, when] : {std::make_tuple(sel.getLhs(), sel.getRhs(), true),
                                      std::make_tuple(sel.getRhs(), sel.getLhs(), false)}) {
        auto f = splat(fill);
        if (f && isMaskFill(*f) && kept.getType() == v.getType() && isCausal(cond, T, S, when)) {
          c.causal = true;
          c.locs.push_back(sel.getLoc());
          return matchMasked(kept, c, T, S);
        }
      }
      return false;
    }
    if (auto add = v.getDefiningOp<nn::AddOp>()) {
      for (auto [x, other] : {std::make_pair(add.getLhs(), add.getRhs()),
                              std::make_pair(add.getRhs(), add.getLhs())}) {
        if (x.getType() != v.getType())
          continue;
        // The rest of the chain matched with `other` as the causal mask
        // or as the bias; `c` is left as it was when it does not.
        auto tryAs = [&](bool causal) {
          Chain trial = c;
          if (causal)
            trial.causal = true;
          else
            trial.bias = other;
          trial.locs.push_back(add.getLoc());
          if (!matchMasked(x, trial, T, S))
            return false;
          c = trial;
          return true;
        };
        DenseElementsAttr k;
        if (!c.causal && matchPattern(other, m_Constant(&k)) && isCausal(k, T, S, true) &&
            tryAs(true))
          return true;
        if (!c.bias && !reachedByParam(other) && tryAs(false))
          return true;
      }
      return false;
    }
    return matchScaled(v, c);
  }

  LogicalResult matchAndRewrite(nn::SoftmaxOp softmax, PatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(softmax.getType());
    int64_t r = type.getRank();
    // The attribute's own getter is unsigned: read it signed (-1 is last).
    int64_t axis = softmax.getAxisAttr().getInt();
    if (r < 2 || (axis < 0 ? axis + r : axis) != r - 1 || !type.getElementType().isF32())
      return failure();
    int64_t T = type.getShape()[r - 2], S = type.getShape()[r - 1];
    // After the softmax: an optional dropout, then the value GEMM.
    Value probs = softmax.getResult();
    nn::DropoutOp dropout;
    if (!probs.hasOneUse())
      return failure();
    Operation *user = *probs.getUsers().begin();
    if ((dropout = dyn_cast<nn::DropoutOp>(user))) {
      if (!dropout.getResult().hasOneUse() || !dropout.getMask().use_empty())
        return failure();
      probs = dropout.getResult();
      user = *probs.getUsers().begin();
    }
    auto pv = dyn_cast<nn::MatmulOp>(user);
    if (!pv || pv.getLhs() != probs || pv.getTransposeLhs() || pv.getTransposeRhs())
      return failure();
    // Before it: the masked, scaled scores.
    Chain c;
    if (!matchMasked(softmax.getInput(), c, T, S) || !c.scores || c.scores.getTransposeLhs())
      return failure();
    Value q = c.scores.getLhs(), kT = c.scores.getRhs(), v = pv.getRhs();
    auto qt = cast<RankedTensorType>(q.getType()), kt = cast<RankedTensorType>(kT.getType()),
         vt = cast<RankedTensorType>(v.getType());
    if (qt.getRank() != r || kt.getRank() != r || vt.getRank() != r ||
        qt.getShape().drop_back(2) != type.getShape().drop_back(2) ||
        kt.getShape().drop_back(2) != type.getShape().drop_back(2) ||
        vt.getShape().drop_back(2) != type.getShape().drop_back(2))
      return failure();
    if (c.bias) {
      auto bt = cast<RankedTensorType>(c.bias.getType());
      auto shape = nn::broadcastShapes(type.getShape(), bt.getShape());
      if (bt.getElementType() != type.getElementType() || failed(shape) ||
          ArrayRef<int64_t>(*shape) != type.getShape())
        return failure();
    }
    // The key as [..., S, E]: the scores GEMM's rhs with its transpose
    // flag, or a transpose whose last two dimensions swap back.
    rewriter.setInsertionPoint(pv);
    Location loc = rewriter.getFusedLoc(c.locs);
    Value k = kT;
    if (!c.scores.getTransposeRhs()) {
      SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, r));
      Value base = kT;
      if (auto t = kT.getDefiningOp<nn::TransposeOp>()) {
        perm = llvm::to_vector(t.getPermutation());
        base = t.getInput();
      }
      std::swap(perm[r - 1], perm[r - 2]);
      if (llvm::equal(perm, llvm::seq<int64_t>(0, r)))
        k = base;
      else
        k = nn::TransposeOp::create(rewriter, loc, base, perm).getResult();
    }
    auto attention = nn::AttentionOp::create(
        rewriter, loc, q, k, v, c.bias, rewriter.getF64FloatAttr(c.scale),
        c.divides ? rewriter.getUnitAttr() : UnitAttr(), c.causal ? rewriter.getUnitAttr() : UnitAttr(),
        rewriter.getF64FloatAttr(dropout ? dropout.getRatio().convertToDouble() : 0.0),
        rewriter.getI64IntegerAttr(dropout ? int64_t(dropout.getRngStream()) : 0));
    rewriter.replaceOp(pv, attention.getResult());
    ++count;
    return success();
  }
  llvm::Statistic &count;
};

struct NNFusion : impl::NNFusionBase<NNFusion> {
  using Base::Base;
  void runOnOperation() override {
    // Attention first: folding its key's transpose into the scores GEMM
    // would not change what it matches, but the chain is whole here.
    if (fuse != FuseKind::None) {
      RewritePatternSet attention(&getContext());
      attention.add<FuseAttention>(&getContext(), numAttention);
      if (failed(applyPatternsGreedily(getOperation(), std::move(attention))))
        return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldTransposeIntoMatmul>(&getContext(), numTransposesFolded);
    patterns.add<FuseGelu>(&getContext(), numGelus);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
} // namespace dsc
