//===- SequenceParallel.cpp - token-split regions between Megatron's f and g -===//
//
// Sequence parallelism (Korthikanti et al. 2022, "Reducing Activation
// Recomputation in Large Transformer Models"), on the forward graph right
// after `tensor-parallel`: outside the tensor-parallel regions every rank
// computes the same layer norms, dropouts, bias adds and residual adds on
// the whole activation. Here those token-wise ops run on this rank's part of
// the tokens instead, so their activations take 1/tp of the memory:
//
//  * g (`dist.tp_reduce`, an all-reduce of the row-parallel GEMM's partial
//    sums) becomes `dist.sp_scatter {reduce}`: a reduce-scatter, each rank
//    keeping its part of the tokens; backward an all-gather;
//  * f (`dist.tp_copy`) on a token-split input becomes
//    `dist.sp_gather {reduce}`: an all-gather of the parts; backward a
//    reduce-scatter of the column-parallel GEMM's partial input gradients;
//  * the region grows from there through token-wise ops (elementwise
//    arithmetic and activations, dropout, layer norm and reductions over
//    the last dimensions, casts); a value entering it from outside (the
//    embedding's output) goes through `dist.sp_scatter` (this rank's part,
//    a local copy; backward an all-gather), a value leaving it for an op
//    that is not token-wise (the LM head) through `dist.sp_gather` (forward
//    an all-gather; backward each rank keeps its part).
//
// The tokens are split along the first dimension of size > 1 (the
// micro-batch, or the sequence when the micro-batch is 1), whose leading
// dimensions are all 1, so every part is contiguous: Megatron splits the
// sequence of its [s, b, h] layout, which is its outermost dimension; dsc's
// activations are [b, s, h], whose outermost token dimension is the batch.
// The ops in the region are token-wise, so which tokens a rank holds does
// not change what it computes, and the communication is the same: per layer
// and micro-batch 2 all-gathers and 2 reduce-scatters forward, 2 and 2
// backward, in place of 4 all-reduces.
//
// A parameter a token-split op reads (a layer norm's scale and bias, a
// row-parallel GEMM's bias) gets a gradient from this rank's tokens only:
// it is marked `dist.sp_partial`, and tensor-parallel-lower sums those
// gradients over the group once per step; a computed value read whole (the
// position embeddings, broadcast over the batch) goes through f, whose
// gradient is that sum. Dropout on a token-split value is
// marked `dist.tp_split = [dim, 1, tp]`: each rank draws its part of the
// whole tensor's mask, as one rank would.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/dist/DistDialect.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace dsc {
#define GEN_PASS_DEF_SEQUENCEPARALLEL
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

struct SequenceParallel : impl::SequenceParallelBase<SequenceParallel> {
  using SequenceParallelBase::SequenceParallelBase;

  // The token dimension and the leading dimensions through it, from the
  // first g: a value is token-splittable when it has the same rank and
  // the same leading dimensions.
  int64_t rank = 0, dim = -1;
  SmallVector<int64_t> lead;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto tpAttr = module->getAttrOfType<IntegerAttr>("dist.tp");
    if (!tpAttr || tpAttr.getInt() < 2) {
      module.emitError("sequence-parallel: run tensor-parallel first (the module has no tp > 1)");
      return signalPassFailure();
    }
    for (auto fn : module.getOps<func::FuncOp>())
      if (failed(run(fn, tpAttr.getInt())))
        return signalPassFailure();
    module->setAttr("dist.sequence_parallel", UnitAttr::get(module.getContext()));
  }

  bool splittable(Value v) const {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || t.getRank() != rank)
      return false;
    for (int64_t i = 0; i <= dim; ++i)
      if (t.getDimSize(i) != lead[i])
        return false;
    return true;
  }

  /// Whether operand `v` of an elementwise op with a result of rank `rank`
  /// must be split with it (it covers the token dimension with size > 1),
  /// or can be read whole (broadcast along it).
  bool coversTokens(Value v) const {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t)
      return false;
    int64_t aligned = dim - (rank - t.getRank());
    return aligned >= 0 && t.getDimSize(aligned) != 1;
  }

  static int64_t normalized(int64_t axis, int64_t r) { return axis < 0 ? axis + r : axis; }

  /// Ops that compute each token from that token alone, whose operands are
  /// either split with the result or broadcast along the tokens (a
  /// parameter is never split: its gradient would be gathered, not summed).
  bool tokenWise(Operation *op, func::FuncOp fn) const {
    bool elementwise = isa<nn::AddOp, nn::SubOp, nn::MulOp, nn::DivOp, nn::PowOp, nn::MaxOp,
                           nn::MinOp, nn::SelectOp, nn::CmpOp, nn::NegOp, nn::AbsOp, nn::ExpOp,
                           nn::LogOp, nn::SqrtOp, nn::RsqrtOp, nn::ReciprocalOp, nn::TanhOp, nn::SinOp, nn::CosOp,
                           nn::ErfOp, nn::ReluOp, nn::SigmoidOp, nn::NotOp, nn::GeluOp,
                           nn::CastOp, nn::DropoutOp>(op);
    bool ok = elementwise;
    if (auto ln = dyn_cast<nn::LayerNormOp>(op))
      ok = normalized(ln.getAxis(), rank) > dim;
    if (isa<nn::SoftmaxOp>(op))
      ok = normalized(cast<nn::SoftmaxOp>(op).getAxis(), rank) > dim;
    if (isa<nn::ReduceSumOp, nn::ReduceMeanOp, nn::ReduceMaxOp>(op)) {
      auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes");
      ok = op->hasAttr("keepdims") && axes &&
           llvm::all_of(axes.asArrayRef(),
                        [&](int64_t a) { return normalized(a, rank) > dim; });
    }
    if (!ok || op->getNumResults() == 0)
      return false;
    for (Value r : op->getResults())
      if (!splittable(r))
        return false;
    for (Value v : op->getOperands()) {
      if (!coversTokens(v))
        continue;
      if (!splittable(v))
        return false;
      if (auto a = dyn_cast<BlockArgument>(v))
        if (fn.getArgAttr(a.getArgNumber(), train::TrainDialect::kParam))
          return false;
    }
    return true;
  }

  RankedTensorType local(Type t, int64_t tp) const {
    auto r = cast<RankedTensorType>(t);
    SmallVector<int64_t> shape(r.getShape());
    shape[dim] /= tp;
    return r.clone(shape);
  }

  LogicalResult run(func::FuncOp fn, int64_t tp) {
    SmallVector<dist::TpReduceOp> gs;
    SmallVector<dist::TpCopyOp> fs;
    fn.walk([&](dist::TpReduceOp g) { gs.push_back(g); });
    fn.walk([&](dist::TpCopyOp f) { fs.push_back(f); });
    // The hidden states: the type most g's produce (the row-parallel
    // GEMMs' and the embedding's; not the vocabulary-parallel loss's sums).
    llvm::MapVector<Type, int> counts;
    for (dist::TpReduceOp g : gs)
      ++counts[g.getType()];
    Type hiddenType;
    int most = 0;
    for (auto &[t, n] : counts)
      if (n > most && cast<RankedTensorType>(t).getRank() >= 2) {
        most = n;
        hiddenType = t;
      }
    llvm::erase_if(gs, [&](dist::TpReduceOp g) { return g.getType() != hiddenType; });
    if (gs.empty())
      return success(); // nothing was split: nothing between f and g
    auto hidden = cast<RankedTensorType>(hiddenType);
    rank = hidden.getRank();
    dim = 0;
    while (dim < rank && hidden.getDimSize(dim) == 1)
      ++dim;
    if (dim >= rank - 1)
      return gs[0].emitOpError("sequence-parallel: the activation ")
             << hidden << " has no token dimension before its features";
    if (hidden.getDimSize(dim) % tp)
      return gs[0].emitOpError("sequence-parallel: the token dimension ")
             << dim << " of " << hidden << " (the micro-batch, or the sequence with a "
             << "micro-batch of 1) does not split into tp " << tp << " parts";
    lead.assign(hidden.getShape().begin(), hidden.getShape().begin() + dim + 1);

    // The region: values split by tokens, the ops computing them, and the
    // values that enter it from outside.
    llvm::SetVector<Value> region;
    llvm::SetVector<Operation *> ops;
    llvm::DenseSet<Value> entering;
    SmallVector<Value> work;
    auto add = [&](Value v) {
      if (region.insert(v))
        work.push_back(v);
    };
    auto addOp = [&](Operation *op) {
      if (!ops.insert(op))
        return;
      for (Value r : op->getResults())
        add(r);
      for (Value v : op->getOperands())
        if (coversTokens(v))
          add(v);
    };
    for (dist::TpReduceOp g : gs)
      add(g.getResult());
    for (dist::TpCopyOp f : fs)
      if (splittable(f.getInput()))
        add(f.getInput());
    while (!work.empty()) {
      Value v = work.pop_back_val();
      Operation *def = v.getDefiningOp();
      if (!isa_and_nonnull<dist::TpReduceOp>(def)) {
        if (def && tokenWise(def, fn))
          addOp(def);
        else
          entering.insert(v);
      }
      for (Operation *user : v.getUsers())
        if (!isa<dist::TpCopyOp>(user) && tokenWise(user, fn))
          addOp(user);
    }

    // A parameter a token-split op reads gets a partial gradient per rank:
    // summed over the group after the step (tensor-parallel-lower). It must
    // not also be read outside the region (that part of its gradient is
    // whole on every rank).
    OpBuilder b(fn.getContext());
    auto group = dist::GroupAttr::get(fn.getContext(), dist::Axis::tp, tp);
    for (BlockArgument a : fn.getArguments()) {
      if (!fn.getArgAttr(a.getArgNumber(), train::TrainDialect::kParam))
        continue;
      bool inside = false, outside = false;
      for (Operation *user : a.getUsers())
        (ops.contains(user) ? inside : outside) = true;
      if (inside && outside)
        return emitError(a.getLoc(), "sequence-parallel: parameter '")
               << fn.getArgAttrOfType<StringAttr>(a.getArgNumber(), train::TrainDialect::kParam)
                      .getValue()
               << "' is read both by token-split ops and by ops every rank computes whole";
      if (inside)
        fn.setArgAttr(a.getArgNumber(), "dist.sp_partial", b.getUnitAttr());
    }

    // The f's to rewrite (their inputs are split), before the entering
    // values are replaced by their parts.
    SmallVector<dist::TpCopyOp> splitFs;
    for (dist::TpCopyOp f : fs)
      if (region.contains(f.getInput()))
        splitFs.push_back(f);
    // A computed value the region reads whole (broadcast along the tokens,
    // as the position embeddings are) gets a partial gradient per rank too:
    // it goes through f (identity forward, all-reduce backward). Constants
    // and the function's inputs have no gradient.
    llvm::SetVector<Value> broadcast;
    for (Operation *op : ops)
      for (Value v : op->getOperands())
        if (!coversTokens(v) && isa<FloatType>(getElementTypeOrSelf(v.getType())) &&
            v.getDefiningOp() && !v.getDefiningOp()->hasTrait<OpTrait::ConstantLike>())
          broadcast.insert(v);
    for (Value v : broadcast) {
      b.setInsertionPointAfterValue(v);
      auto f = dist::TpCopyOp::create(b, v.getLoc(), v, group);
      v.replaceUsesWithIf(f.getResult(),
                          [&](OpOperand &u) { return ops.contains(u.getOwner()); });
    }
    // Entering values: this rank's part, for the region's ops and f.
    auto dimAttr = b.getI64IntegerAttr(dim);
    for (Value v : entering) {
      if (auto a = dyn_cast<BlockArgument>(v))
        b.setInsertionPointToStart(a.getOwner());
      else
        b.setInsertionPointAfterValue(v);
      auto s = dist::SpScatterOp::create(b, v.getLoc(), local(v.getType(), tp), v, group,
                                         dimAttr, UnitAttr());
      v.replaceUsesWithIf(s.getResult(), [&](OpOperand &u) {
        return ops.contains(u.getOwner()) || isa<dist::TpCopyOp>(u.getOwner());
      });
    }
    // The region's ops compute on parts; their values leave it through an
    // all-gather for every other consumer (f apart, rewritten below).
    for (Operation *op : ops) {
      if (isa<nn::DropoutOp>(op))
        op->setAttr("dist.tp_split", b.getDenseI64ArrayAttr({dim, 1, tp}));
      for (Value r : op->getResults()) {
        Type whole = r.getType();
        r.setType(local(whole, tp));
        bool leaves = llvm::any_of(r.getUsers(), [&](Operation *u) {
          return !ops.contains(u) && !isa<dist::TpCopyOp>(u);
        });
        if (!leaves)
          continue;
        b.setInsertionPointAfterValue(r);
        auto gather =
            dist::SpGatherOp::create(b, r.getLoc(), whole, r, group, dimAttr, UnitAttr());
        r.replaceUsesWithIf(gather.getResult(), [&](OpOperand &u) {
          return u.getOwner() != gather && !ops.contains(u.getOwner()) &&
                 !isa<dist::TpCopyOp>(u.getOwner());
        });
      }
    }
    // g: a reduce-scatter; f on a part: an all-gather (reduce-scatter back).
    for (dist::TpReduceOp g : gs) {
      Value whole = g.getResult();
      b.setInsertionPoint(g);
      auto s = dist::SpScatterOp::create(b, g.getLoc(), local(whole.getType(), tp), g.getInput(),
                                         group, dimAttr, b.getUnitAttr());
      llvm::SmallVector<OpOperand *> outside;
      for (OpOperand &u : whole.getUses())
        if (!ops.contains(u.getOwner()) && !isa<dist::TpCopyOp>(u.getOwner()))
          outside.push_back(&u);
      whole.replaceAllUsesWith(s.getResult());
      if (!outside.empty()) {
        b.setInsertionPointAfter(s);
        auto gather = dist::SpGatherOp::create(b, g.getLoc(), whole.getType(), s.getResult(),
                                               group, dimAttr, UnitAttr());
        for (OpOperand *u : outside)
          u->set(gather.getResult());
      }
      g->erase();
    }
    for (dist::TpCopyOp f : splitFs) {
      Value in = f.getInput();
      b.setInsertionPoint(f);
      auto gather = dist::SpGatherOp::create(b, f.getLoc(), f.getType(), in, group, dimAttr,
                                             b.getUnitAttr());
      f.getResult().replaceAllUsesWith(gather.getResult());
      f->erase();
    }
    numSplit += ops.size();
    return success();
  }
};
} // namespace
} // namespace dsc
