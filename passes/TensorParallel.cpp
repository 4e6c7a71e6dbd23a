//===- TensorParallel.cpp - Megatron tensor parallelism on the forward graph -===//
//
// Splits the forward graph's GEMM pairs over the tensor-parallel group, as
// Megatron-LM does by hand, by propagating a *split* through the graph:
//
//  * a seed is a GEMM with a parameter weight (W or transpose(W)) and an
//    input that is the same on every rank: it becomes column parallel (each
//    rank computes 1/tp of the output features), its input passes through
//    `dist.tp_copy` (Megatron's f);
//  * the split follows the ops that keep the split dimension whole per rank
//    (elementwise ops, transposes, reshapes that split or merge it as the
//    outer factor, block-aligned slices, softmax/layer norm/reductions over
//    other dimensions, GEMMs batched over it, concatenations of operands
//    split alike), so attention splits by heads, rotary embeddings (halves
//    of each head's dimensions negated and swapped) follow the heads, and
//    the fused QKV projection's output, sliced into q, k and v, splits into
//    `blocks` = 3 blocks, each 1/tp per rank; SwiGLU's gate and up
//    projections read one input and are two seeds sharing one f;
//  * a GEMM that contracts the split dimension with a parameter weight is
//    row parallel: each rank holds a partial sum, made whole by
//    `dist.tp_reduce` (Megatron's g) right after it;
//  * a whole value that carries a gradient and enters the split region
//    broadcast along the split dimension (a per-head RMSNorm's weight) or
//    as the whole operand of a GEMM over split rows passes through f too:
//    each rank's gradient of it is a partial sum, which f's gradient (an
//    all-reduce) completes.
//
// A split that reaches anything else (the loss, a reduction over the split
// dimension, a parameter also used unsplit, a tied embedding) rolls back
// every seed it came from: those GEMMs stay replicated, and the reason is
// recorded (`dist.tp = "replicated"`, `dist.tp_reason`). What remains is
// rewritten in place to the per-rank program: split values and parameters
// get their local types (`dist.tp_split = [dim, blocks, tp]` on a split
// parameter), slices their local bounds, and the GEMMs `dist.tp = "column"`
// or `"row"`. Autodiff then gives f's gradient an all-reduce and g's none.
//
//===----------------------------------------------------------------------===//
#include "passes/DistUtils.h"
#include "passes/Passes.h"
#include "passes/VocabParallel.h"

#include "dialects/dist/DistDialect.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace dsc {
#define GEN_PASS_DEF_TENSORPARALLEL
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

/// How a value is split over the tensor-parallel group: dimension `dim`
/// consists of `blocks` equal blocks, each cut into tp parts; rank r holds
/// part r of every block.
struct Split {
  int64_t dim = -1, blocks = 1;
  bool operator==(const Split &o) const { return dim == o.dim && blocks == o.blocks; }
};

/// A split value and the seeds it derives from.
struct State {
  Split split;
  llvm::SmallVector<unsigned, 4> seeds;
};

int64_t rankOf(Value v) { return cast<RankedTensorType>(v.getType()).getRank(); }
ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

/// A GEMM's parameter weight W, read as is ([in, out]) or transposed
/// ([out, in], as nn.Linear stores it: through transpose(W, [1, 0]) or the
/// GEMM's transpose_rhs).
struct Weight {
  BlockArgument arg;
  bool transposed = false;
};

class Propagation {
public:
  Propagation(func::FuncOp fn, int64_t tp) : fn_(fn), tp_(tp) {}

  /// One attempt with the seeds not banned; false (and bans) on a failure.
  bool run(const llvm::DenseSet<Operation *> &banned, std::string &reason,
           llvm::SmallVectorImpl<unsigned> &culprits);

  llvm::DenseMap<Value, State> states;
  llvm::SmallVector<nn::MatmulOp> seeds, rows;
  /// Whole operands that enter the split region through f, in program
  /// order: the seeds' inputs and the whole values with a gradient that a
  /// split op reads (their gradient on each rank is a partial sum).
  llvm::SmallVector<OpOperand *> entries;
  /// A split the model's sizes forbid (heads, features or a parameter not
  /// divisible by blocks x tp): an error at `fatalOp`, not a rollback.
  Operation *fatalOp = nullptr;
  std::string fatal;
  /// Parameters to split, with how.
  llvm::MapVector<BlockArgument, Split> params;

  std::optional<Weight> weightOf(nn::MatmulOp mm) const {
    if (mm.getTransposeLhs())
      return std::nullopt;
    Value v = mm.getRhs();
    bool t = mm.getTransposeRhs();
    if (auto arg = dyn_cast<BlockArgument>(v))
      if (isParam(arg) && rankOf(arg) == 2)
        return Weight{arg, t};
    if (auto tr = v.getDefiningOp<nn::TransposeOp>())
      if (auto arg = dyn_cast<BlockArgument>(tr.getInput()))
        if (!t && isParam(arg) && rankOf(arg) == 2 &&
            tr.getPermutation() == ArrayRef<int64_t>{1, 0})
          return Weight{arg, true};
    return std::nullopt;
  }

private:
  /// Whether `v` carries a gradient: a float value computed from a
  /// parameter (masks, rotary tables and inputs do not).
  bool hasGradient(Value v) const {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && isa<FloatType>(t.getElementType()) && differentiable_.contains(v);
  }
  /// A whole operand of a split op whose gradient the op would only sum
  /// over this rank's part: it enters through f.
  void enter(OpOperand &use) {
    if (hasGradient(use.get()))
      entries.push_back(&use);
  }
  bool isParam(BlockArgument a) const {
    // (not one vocab-parallel already split)
    return a.getOwner() == &fn_.getBody().front() &&
           fn_.getArgAttr(a.getArgNumber(), train::TrainDialect::kParam) &&
           !fn_.getArgAttr(a.getArgNumber(), "dist.tp_split");
  }
  bool fail(Operation *op, const std::string &why, ArrayRef<Value> culpritValues,
            std::string &reason, llvm::SmallVectorImpl<unsigned> &culprits) {
    std::string name = op->getName().getStringRef().str();
    reason = name + " " + why;
    for (Value v : culpritValues)
      if (auto it = states.find(v); it != states.end())
        culprits.append(it->second.seeds.begin(), it->second.seeds.end());
    return false;
  }
  /// Records that parameter `arg` is split as `s`, for `from` (seeds).
  bool splitParam(BlockArgument arg, Split s, ArrayRef<unsigned> from, std::string &why) {
    auto &mine = paramSeeds[arg];
    for (unsigned id : from)
      if (!llvm::is_contained(mine, id))
        mine.push_back(id);
    auto [it, inserted] = params.insert({arg, s});
    if (!inserted && !(it->second == s)) {
      why = "needs a parameter split two ways";
      return false;
    }
    if (shapeOf(arg)[s.dim] % (s.blocks * tp_)) {
      why = "would split a parameter of " + std::to_string(shapeOf(arg)[s.dim]) +
            " along dimension " + std::to_string(s.dim) + " into " + std::to_string(s.blocks) +
            " block(s) x tp " + std::to_string(tp_) + ", which does not divide it";
      fatal = why;
      fatalOp = current;
      return false;
    }
    return true;
  }

  mutable func::FuncOp fn_;
  int64_t tp_;
  llvm::DenseMap<BlockArgument, llvm::SmallVector<unsigned, 4>> paramSeeds;
  llvm::DenseSet<Value> differentiable_;
  Operation *current = nullptr; // the op being propagated through
};

bool Propagation::run(const llvm::DenseSet<Operation *> &banned, std::string &reason,
                      llvm::SmallVectorImpl<unsigned> &culprits) {
  states.clear();
  fatal.clear();
  fatalOp = nullptr;
  seeds.clear();
  rows.clear();
  params.clear();
  paramSeeds.clear();
  entries.clear();
  Block &body = fn_.getBody().front();
  differentiable_.clear();
  for (BlockArgument a : body.getArguments())
    if (isParam(a))
      differentiable_.insert(a);
  for (Operation &op : body)
    if (llvm::any_of(op.getOperands(), [&](Value v) { return differentiable_.contains(v); }))
      differentiable_.insert(op.result_begin(), op.result_end());
  auto stateOf = [&](Value v) -> const State * {
    auto it = states.find(v);
    return it == states.end() ? nullptr : &it->second;
  };
  auto merged = [&](ArrayRef<Value> vs) {
    llvm::SmallVector<unsigned, 4> s;
    for (Value v : vs)
      if (const State *st = stateOf(v))
        for (unsigned id : st->seeds)
          if (!llvm::is_contained(s, id))
            s.push_back(id);
    return s;
  };

  for (Operation &opRef : body) {
    Operation *op = &opRef;
    current = op;
    llvm::SmallVector<Value> splitOperands;
    for (Value v : op->getOperands())
      if (stateOf(v))
        splitOperands.push_back(v);

    if (auto mm = dyn_cast<nn::MatmulOp>(op)) {
      Value lhs = mm.getLhs(), rhs = mm.getRhs();
      const State *ls = stateOf(lhs), *rs = stateOf(rhs);
      std::optional<Weight> w = weightOf(mm);
      int64_t lr = rankOf(lhs), rr = rankOf(rhs), outRank = rankOf(mm.getResult());
      if (!ls && !rs) {
        // A seed: column parallel, unless banned.
        if (w && !banned.contains(op) && !op->hasAttr("dist.tp")) {
          int64_t n = shapeOf(mm.getResult()).back(); // output features
          int64_t blocks = 1;
          // The output sliced into k equal blocks along the features (a
          // fused QKV projection), directly or after a bias add.
          Value out = mm.getResult();
          if (out.hasOneUse())
            if (auto add = dyn_cast<nn::AddOp>(*out.getUsers().begin()))
              out = add.getResult();
          llvm::SmallVector<nn::SliceOp> slices;
          for (Operation *u : out.getUsers())
            if (auto s = dyn_cast<nn::SliceOp>(u))
              slices.push_back(s);
          if (slices.size() > 1 && slices.size() == size_t(std::distance(out.getUsers().begin(),
                                                                         out.getUsers().end())) &&
              n % int64_t(slices.size()) == 0)
            blocks = int64_t(slices.size());
          unsigned id = seeds.size();
          seeds.push_back(mm);
          entries.push_back(&mm.getLhsMutable());
          // W [out, in] seen transposed: split W's dim 0; W [in, out]: dim 1.
          std::string why;
          if (!splitParam(w->arg, Split{w->transposed ? 0 : 1, blocks}, {id}, why)) {
            reason = "nn.matmul " + why;
            culprits.append(paramSeeds[w->arg].begin(), paramSeeds[w->arg].end());
            return false;
          }
          states[mm.getResult()] = State{Split{outRank - 1, blocks}, {id}};
        }
        continue;
      }
      auto seedsHere = merged({lhs, rhs});
      // Row parallel: the contracted dimension is split, the weight is a
      // parameter.
      if (ls && !rs && ls->split.dim == lr - 1 && w && rr == 2 && !mm.getTransposeLhs()) {
        std::string why;
        if (!splitParam(w->arg, Split{w->transposed ? 1 : 0, ls->split.blocks}, seedsHere,
                        why)) {
          culprits.append(paramSeeds[w->arg].begin(), paramSeeds[w->arg].end());
          return fail(op, why, {lhs}, reason, culprits);
        }
        rows.push_back(mm);
        continue; // the result is whole after g
      }
      // Batched over the split dimension (attention heads).
      if (ls && rs && lr == rr && ls->split == rs->split && ls->split.dim < lr - 2) {
        states[mm.getResult()] = State{ls->split, seedsHere};
        continue;
      }
      bool plain = !mm.getTransposeLhs() && !mm.getTransposeRhs();
      // Rows of the left operand (the whole right one's gradient sums
      // over them: it enters through f).
      if (plain && ls && !rs && ls->split.dim == lr - 2) {
        enter(mm.getRhsMutable());
        states[mm.getResult()] = State{Split{outRank - 2, ls->split.blocks}, seedsHere};
        continue;
      }
      // Columns of the right operand.
      if (plain && !ls && rs && rs->split.dim == rr - 1) {
        enter(mm.getLhsMutable());
        states[mm.getResult()] = State{Split{outRank - 1, rs->split.blocks}, seedsHere};
        continue;
      }
      return fail(op, "combines split operands in a way tensor parallelism does not cover",
                  splitOperands, reason, culprits);
    }
    if (splitOperands.empty())
      continue;
    auto seedsHere = merged(splitOperands);
    const State &first = *stateOf(splitOperands.front());
    Split s = first.split;

    if (isa<func::ReturnOp>(op))
      return fail(op, "returns a split value (the loss must be whole)", splitOperands, reason,
                  culprits);
    if (auto t = dyn_cast<nn::TransposeOp>(op)) {
      ArrayRef<int64_t> perm = t.getPermutation();
      int64_t d = std::find(perm.begin(), perm.end(), s.dim) - perm.begin();
      states[t.getResult()] = State{Split{d, s.blocks}, seedsHere};
      continue;
    }
    if (auto r = dyn_cast<nn::ReshapeOp>(op)) {
      ArrayRef<int64_t> in = shapeOf(r.getInput()), out = shapeOf(r.getResult());
      // The split dimension's group of input and output dims with equal
      // products; the split must be the group's outer factor.
      int64_t before = 1;
      for (int64_t i = 0; i < s.dim; ++i)
        before *= in[i];
      int64_t acc = 1, j = 0;
      while (j < int64_t(out.size()) && acc < before)
        acc *= out[j++];
      if (acc != before)
        return fail(op, "reshapes the split dimension across an outer one", splitOperands,
                    reason, culprits);
      while (j < int64_t(out.size()) && out[j] == 1 && in[s.dim] != 1)
        ++j;
      if (j >= int64_t(out.size()))
        return fail(op, "drops the split dimension", splitOperands, reason, culprits);
      int64_t n = in[s.dim], m = out[j];
      bool ok = false;
      if (m == n) {
        ok = true; // kept (other dims regrouped around it)
      } else if (m < n && n % m == 0) {
        // split: the outer factor (attention heads) keeps the split
        if (m % (s.blocks * tp_)) {
          fatalOp = op;
          fatal = "splits " + std::to_string(m) + " attention heads (or groups) over tp " +
                  std::to_string(tp_) + ", which does not divide them";
          return false;
        }
        ok = true;
      } else if (m > n && m % n == 0) {
        // merged with inner dims: rank r's part of each block stays contiguous
        int64_t inner = 1;
        for (int64_t i = s.dim + 1; i < int64_t(in.size()) && inner < m / n; ++i)
          inner *= in[i];
        ok = inner == m / n;
      }
      if (!ok)
        return fail(op, "reshapes the split dimension so that a rank's part is not contiguous",
                    splitOperands, reason, culprits);
      states[r.getResult()] = State{Split{j, s.blocks}, seedsHere};
      continue;
    }
    if (auto sl = dyn_cast<nn::SliceOp>(op)) {
      int64_t n = shapeOf(sl.getInput())[s.dim], block = n / s.blocks;
      int64_t start = sl.getStart()[s.dim], limit = sl.getLimit()[s.dim];
      int64_t stride = sl.getStride()[s.dim];
      if (stride != 1 || start % block || limit % block)
        return fail(op, "slices the split dimension across a block", splitOperands, reason,
                    culprits);
      states[sl.getResult()] = State{Split{s.dim, (limit - start) / block}, seedsHere};
      continue;
    }
    if (auto c = dyn_cast<nn::ConcatOp>(op)) {
      // Rotary embeddings' rotate_half (the halves of each head's dimensions
      // swapped): along another dimension, every operand split alike;
      // along the split one, blocks of one size, which append.
      // The attribute's own getter is unsigned: read it signed, so that
      // torch.cat's dim=-1 normalizes to the last dimension.
      int64_t axis = c.getAxisAttr().getInt();
      if (axis < 0)
        axis += rankOf(c.getResult());
      int64_t blocks = 0, blockSize = -1;
      for (Value v : c.getInputs()) {
        const State *vs = stateOf(v);
        if (!vs)
          return fail(op, "concatenates a split value with a whole one", splitOperands, reason,
                      culprits);
        if (vs->split.dim != s.dim || (axis != s.dim && vs->split.blocks != s.blocks))
          return fail(op, "concatenates operands split differently", splitOperands, reason,
                      culprits);
        int64_t size = shapeOf(v)[s.dim] / vs->split.blocks;
        if (blockSize >= 0 && size != blockSize)
          return fail(op, "concatenates blocks of different sizes along the split dimension",
                      splitOperands, reason, culprits);
        blockSize = size;
        blocks += vs->split.blocks;
      }
      states[c.getResult()] =
          State{Split{s.dim, axis == s.dim ? blocks : s.blocks}, seedsHere};
      continue;
    }
    if (isa<nn::ReduceSumOp, nn::ReduceMeanOp, nn::ReduceMaxOp>(op)) {
      // RMSNorm's mean of squares over a head's dimensions: each rank
      // reduces its own heads whole.
      int64_t rank = rankOf(splitOperands.front()), d = s.dim;
      for (int64_t a : op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef()) {
        a = a < 0 ? a + rank : a;
        if (a == s.dim)
          return fail(op, "reduces over the split dimension", splitOperands, reason, culprits);
        if (a < s.dim && !op->hasAttr("keepdims"))
          --d;
      }
      states[op->getResult(0)] = State{Split{d, s.blocks}, seedsHere};
      continue;
    }
    if (auto bc = dyn_cast<nn::BroadcastOp>(op)) {
      // Expanded along other dimensions (grouped-query attention's
      // repeat_kv): the split dimension keeps its size.
      int64_t d = s.dim + rankOf(bc.getResult()) - rankOf(bc.getInput());
      if (shapeOf(bc.getResult())[d] != shapeOf(bc.getInput())[s.dim])
        return fail(op, "broadcasts along the split dimension", splitOperands, reason, culprits);
      states[bc.getResult()] = State{Split{d, s.blocks}, seedsHere};
      continue;
    }
    // Elementwise (with broadcasting): every operand split alike at the
    // result's dimension, or of size 1 there, or a parameter to split.
    if (isa<nn::AddOp, nn::SubOp, nn::MulOp, nn::DivOp, nn::PowOp, nn::MaxOp, nn::MinOp,
            nn::SelectOp, nn::CmpOp>(op)) {
      Value res = op->getResult(0);
      int64_t rr = rankOf(res);
      int64_t at = s.dim + (rr - rankOf(splitOperands.front()));
      for (OpOperand &use : op->getOpOperands()) {
        Value v = use.get();
        int64_t vd = at - (rr - rankOf(v));
        const State *vs = stateOf(v);
        if (vs) {
          if (vs->split.dim != vd || vs->split.blocks != s.blocks)
            return fail(op, "combines operands split differently", splitOperands, reason,
                        culprits);
          continue;
        }
        if (vd < 0 || shapeOf(v)[vd] == 1) {
          // Broadcast along the split dimension: whole on every rank (a
          // per-head norm's weight, the rotary tables, a mask).
          enter(use);
          continue;
        }
        auto arg = dyn_cast<BlockArgument>(v);
        std::string why;
        if (!arg || !isParam(arg))
          return fail(op, "combines a split value with a whole one of full width",
                      splitOperands, reason, culprits);
        if (!splitParam(arg, Split{vd, s.blocks}, seedsHere, why)) {
          culprits.append(paramSeeds[arg].begin(), paramSeeds[arg].end());
          return fail(op, why, splitOperands, reason, culprits);
        }
      }
      states[res] = State{Split{at, s.blocks}, seedsHere};
      continue;
    }
    if (isa<nn::NegOp, nn::AbsOp, nn::ExpOp, nn::LogOp, nn::SqrtOp, nn::RsqrtOp,
            nn::ReciprocalOp, nn::TanhOp, nn::SinOp, nn::CosOp, nn::ErfOp, nn::ReluOp, nn::SigmoidOp, nn::NotOp,
            nn::GeluOp, nn::CastOp>(op)) {
      states[op->getResult(0)] = State{s, seedsHere};
      continue;
    }
    if (auto d = dyn_cast<nn::DropoutOp>(op)) {
      // Its mask is drawn per element index: the rewrite marks it with the
      // split (dist.tp_split), and the runtime draws each rank's part of
      // the whole tensor's mask, so it equals the unsplit run's.
      states[d.getResult()] = State{s, seedsHere};
      states[d.getMask()] = State{s, seedsHere};
      continue;
    }
    if (auto at = dyn_cast<nn::AttentionOp>(op)) {
      // Each rank attends over its own heads: query, key and value split
      // alike on a leading (head) dimension, a bias split alike there or
      // broadcast along it. The rewrite marks the op (dist.tp_split) so
      // that its dropout draws the whole tensor's bits, as nn.dropout's.
      int64_t r = rankOf(at.getQuery());
      if (s.dim >= r - 2)
        return fail(op, "attends over the split dimension", splitOperands, reason, culprits);
      for (Value v : {at.getQuery(), at.getKey(), at.getValue()}) {
        const State *vs = stateOf(v);
        if (!vs || vs->split.dim != s.dim || vs->split.blocks != s.blocks)
          return fail(op, "needs its query, key and value split alike on a head dimension",
                      splitOperands, reason, culprits);
      }
      if (Value bias = at.getBias()) {
        int64_t bd = s.dim - (r - rankOf(bias));
        const State *bs = stateOf(bias);
        if (bs ? bs->split.dim != bd || bs->split.blocks != s.blocks
               : !(bd < 0 || shapeOf(bias)[bd] == 1))
          return fail(op, "adds a bias that is neither split like its heads nor broadcast "
                          "along them",
                      splitOperands, reason, culprits);
      }
      states[at.getResult()] = State{s, seedsHere};
      states[at.getStats()] = State{s, seedsHere};
      continue;
    }
    if (isa<nn::SoftmaxOp, nn::LogSoftmaxOp>(op)) {
      int64_t axis = op->getAttrOfType<IntegerAttr>("axis").getInt();
      if (axis < 0)
        axis += rankOf(op->getResult(0));
      if (axis == s.dim)
        return fail(op, "normalizes over the split dimension", splitOperands, reason, culprits);
      states[op->getResult(0)] = State{s, seedsHere};
      continue;
    }
    if (auto ln = dyn_cast<nn::LayerNormOp>(op)) {
      int64_t axis = ln.getAxis();
      if (axis < 0)
        axis += rankOf(ln.getInput());
      if (!stateOf(ln.getInput()) || s.dim >= axis)
        return fail(op, "normalizes over the split dimension", splitOperands, reason, culprits);
      states[ln.getResult()] = State{s, seedsHere};
      continue;
    }
    return fail(op, "reads a split value and has no tensor-parallel rule", splitOperands,
                reason, culprits);
  }
  // A parameter split for the region must not also be read whole.
  auto splitUse = [&](Operation *u) {
    return llvm::any_of(u->getResults(), [&](Value r) { return states.count(r) > 0; }) ||
           llvm::is_contained(rows, u) || llvm::is_contained(seeds, u);
  };
  for (auto &[arg, s] : params)
    for (Operation *user : arg.getUsers()) {
      bool split = splitUse(user);
      if (auto t = dyn_cast<nn::TransposeOp>(user); t && !split)
        split = !t->use_empty() && llvm::all_of(t->getUsers(), splitUse);
      if (!split) {
        reason = "its weight is also read whole (by " + user->getName().getStringRef().str() +
                 "; a tied parameter?)";
        culprits.append(paramSeeds[arg].begin(), paramSeeds[arg].end());
        return false;
      }
    }
  return true;
}

struct TensorParallel : impl::TensorParallelBase<TensorParallel> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tp < 1) {
      module.emitError("tensor-parallel: tp must be at least 1, got ") << (int64_t)tp;
      return signalPassFailure();
    }
    if (tp == 1)
      return;
    for (auto fn : module.getOps<func::FuncOp>())
      if (failed(split(fn)))
        return signalPassFailure();
    module->setAttr("dist.tp", IntegerAttr::get(IntegerType::get(&getContext(), 64), tp));
  }

  LogicalResult split(func::FuncOp fn) {
    MLIRContext *ctx = fn.getContext();
    // The embedding, LM head and loss over the vocabulary first.
    VocabParallelCounts vocab;
    if (failed(vocabParallel(fn, tp, vocab)))
      return failure();
    numVocabHeads += vocab.heads;
    Propagation prop(fn, tp);
    llvm::DenseSet<Operation *> banned;
    llvm::DenseMap<Operation *, std::string> reasons;
    // Each failure bans at least one seed: at most one run per seed.
    for (;;) {
      std::string reason;
      llvm::SmallVector<unsigned> culprits;
      if (prop.run(banned, reason, culprits))
        break;
      bool progress = false;
      for (unsigned id : culprits) {
        Operation *seed = prop.seeds[id];
        if (banned.insert(seed).second) {
          reasons[seed] = reason;
          progress = true;
        }
      }
      if (!prop.fatal.empty())
        return (prop.fatalOp ? prop.fatalOp->emitOpError() : fn.emitError())
               << "tensor-parallel: " << prop.fatal;
      if (!progress)
        return fn.emitError("tensor-parallel: no progress after: ") << reason;
    }

    auto group = dist::GroupAttr::get(ctx, dist::Axis::tp, tp);
    auto local = [&](Value v, Split s) {
      auto t = cast<RankedTensorType>(v.getType());
      SmallVector<int64_t> shape(t.getShape());
      shape[s.dim] /= tp;
      return t.clone(shape);
    };
    // Every split dimension must divide into blocks x tp.
    for (auto &[v, st] : prop.states)
      if (shapeOf(v)[st.split.dim] % (st.split.blocks * tp))
        return emitError(v.getLoc(), "tensor-parallel: a tensor's dimension ")
               << st.split.dim << " of size " << shapeOf(v)[st.split.dim]
               << " does not split into " << st.split.blocks << " block(s) x tp " << (int64_t)tp
               << " (attention heads or features not divisible by tp?)";

    OpBuilder b(ctx);
    // f: once per value, before its first split reader (entries are in
    // program order).
    llvm::DenseMap<Value, Value> copies;
    for (OpOperand *use : prop.entries) {
      Value in = use->get();
      Value &c = copies[in];
      if (!c) {
        b.setInsertionPoint(use->getOwner());
        c = dist::TpCopyOp::create(b, use->getOwner()->getLoc(), in, group).getResult();
      }
      use->set(c);
    }
    for (nn::MatmulOp seed : prop.seeds)
      seed->setAttr("dist.tp", b.getStringAttr("column"));
    // Local types and slice bounds; dropout on a split tensor draws the
    // whole tensor's mask bits (the runtime maps its part's elements).
    for (auto &[v, st] : prop.states) {
      if (auto d = v.getDefiningOp<nn::DropoutOp>(); d && v == d.getResult())
        d->setAttr("dist.tp_split",
                   b.getDenseI64ArrayAttr({st.split.dim, st.split.blocks, int64_t(tp)}));
      if (auto at = v.getDefiningOp<nn::AttentionOp>(); at && v == at.getResult())
        at->setAttr("dist.tp_split",
                    b.getDenseI64ArrayAttr({st.split.dim, st.split.blocks, int64_t(tp)}));
      if (auto sl = v.getDefiningOp<nn::SliceOp>()) {
        SmallVector<int64_t> start(sl.getStart()), limit(sl.getLimit());
        start[st.split.dim] /= tp;
        limit[st.split.dim] /= tp;
        sl.setStart(start);
        sl.setLimit(limit);
      }
      v.setType(local(v, st.split));
    }
    for (auto &[arg, s] : prop.params) {
      arg.setType(local(arg, s));
      fn.setArgAttr(arg.getArgNumber(), "dist.tp_split",
                    b.getDenseI64ArrayAttr({s.dim, s.blocks, int64_t(tp)}));
      for (Operation *user : arg.getUsers())
        if (auto t = dyn_cast<nn::TransposeOp>(user)) {
          auto tt = cast<RankedTensorType>(t.getResult().getType());
          SmallVector<int64_t> shape(tt.getShape());
          shape[1 - s.dim] /= tp;
          t.getResult().setType(tt.clone(shape));
        }
    }
    // g: after each row-parallel GEMM.
    for (nn::MatmulOp row : prop.rows) {
      row->setAttr("dist.tp", b.getStringAttr("row"));
      b.setInsertionPointAfter(row);
      auto g = dist::TpReduceOp::create(b, row.getLoc(), row.getResult(), group);
      row.getResult().replaceAllUsesExcept(g.getResult(), g);
    }
    // The GEMMs with a parameter weight left whole, and why.
    fn.walk([&](nn::MatmulOp mm) {
      if (mm->hasAttr("dist.tp") || !prop.weightOf(mm))
        return;
      mm->setAttr("dist.tp", b.getStringAttr("replicated"));
      auto it = reasons.find(mm);
      mm->setAttr("dist.tp_reason",
                  b.getStringAttr(it != reasons.end() ? it->second
                                                      : std::string("its input is split")));
    });
    fn.setFunctionType(FunctionType::get(ctx, fn.getBody().front().getArgumentTypes(),
                                         fn.getResultTypes()));
    numColumn += prop.seeds.size();
    numRow += prop.rows.size();
    return success();
  }
};
} // namespace
} // namespace dsc
