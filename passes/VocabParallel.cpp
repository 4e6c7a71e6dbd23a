//===- VocabParallel.cpp - Megatron's vocabulary-parallel embedding and loss -===//
//
// Part of the tensor-parallel pass, run before the split propagation: the
// vocabulary dimension of the embedding table and of the LM head is split
// over the tensor-parallel group, as Megatron's VocabParallelEmbedding,
// column-parallel output layer and vocab_parallel_cross_entropy do.
//
//  * The LM head (a GEMM with a parameter W [V, d] read as W^T, optionally
//    a bias [V], reshaped to [N, V] for nn.cross_entropy) becomes column
//    parallel over V: its input passes f, each rank computes its V/tp
//    logits; the loss never sees the whole logits:
//        m   = nn.reduce_max(logits)           this part's row maxima
//        M   = dist.tp_max(m)                  the whole rows' (no gradient)
//        s   = nn.vocab_ce_sums(logits, y, M)  sum exp(l - M), label logit
//        S   = dist.tp_reduce(s)               (g)
//        L   = nn.vocab_ce_loss(S, M, y)       log S0 + M - S1, reduced
//    so a step communicates 2 all-reduces of N and 2N values forward and
//    none backward (the gradient of the part's logits is local).
//  * An embedding table (a parameter [V, d] read only by nn.gather along
//    axis 0, and by the LM head when tied) is split along V: each rank
//    gathers the rows it holds (`dist.tp_part` on the gather: the others
//    read as zeros) and g sums the parts.
//
// A head whose classes tp does not divide (a classifier's 5 classes, a
// vocabulary of 97) stays whole, with the reason on the GEMM for the
// manifest (padding it, as Megatron's --make-vocab-size-divisible-by does,
// lets it split); so does an embedding whose table does not divide.
//
//===----------------------------------------------------------------------===//
#include "passes/VocabParallel.h"

#include "dialects/dist/DistDialect.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/IR/Builders.h"

namespace dsc {
using namespace mlir;

namespace {

bool isParam(func::FuncOp fn, Value v) {
  auto a = dyn_cast<BlockArgument>(v);
  return a && a.getOwner() == &fn.getBody().front() &&
         fn.getArgAttr(a.getArgNumber(), train::TrainDialect::kParam) &&
         !fn.getArgAttr(a.getArgNumber(), "dist.tp_split");
}

RankedTensorType withDim(Type t, int64_t dim, int64_t size) {
  auto r = cast<RankedTensorType>(t);
  SmallVector<int64_t> shape(r.getShape());
  shape[dim < 0 ? dim + r.getRank() : dim] = size;
  return r.clone(shape);
}

/// The LM head feeding a cross-entropy: the GEMM, its weight (read as W^T,
/// directly or through a transpose), an optional bias add, an optional
/// reshape; every value in the chain used once.
struct Head {
  nn::CrossEntropyOp ce;
  nn::MatmulOp mm;
  BlockArgument weight;
  nn::TransposeOp transpose; // or null (transpose_rhs)
  nn::AddOp biasAdd;         // or null
  BlockArgument bias;
  nn::ReshapeOp reshape; // or null
};

std::optional<Head> matchHead(func::FuncOp fn, nn::CrossEntropyOp ce) {
  Head h;
  h.ce = ce;
  auto logits = cast<RankedTensorType>(ce.getInput().getType());
  if (logits.getRank() != 2)
    return std::nullopt;
  Value v = ce.getInput();
  auto single = [](Value x) { return x.hasOneUse(); };
  if (auto r = v.getDefiningOp<nn::ReshapeOp>(); r && single(v)) {
    h.reshape = r;
    v = r.getInput();
  }
  if (auto add = v.getDefiningOp<nn::AddOp>(); add && single(v)) {
    for (auto [mine, other] : {std::pair{add.getLhs(), add.getRhs()},
                               std::pair{add.getRhs(), add.getLhs()}})
      if (isParam(fn, mine) && cast<RankedTensorType>(mine.getType()).getRank() == 1 &&
          mine.hasOneUse()) {
        h.biasAdd = add;
        h.bias = cast<BlockArgument>(mine);
        v = other;
        break;
      }
    if (!h.biasAdd)
      return std::nullopt;
  }
  auto mm = v.getDefiningOp<nn::MatmulOp>();
  if (!mm || !single(v) || mm.getTransposeLhs() || mm->hasAttr("dist.tp"))
    return std::nullopt;
  h.mm = mm;
  Value w = mm.getRhs();
  if (mm.getTransposeRhs()) {
    if (!isParam(fn, w))
      return std::nullopt;
  } else {
    auto t = w.getDefiningOp<nn::TransposeOp>();
    if (!t || !t->hasOneUse() || t.getPermutation() != ArrayRef<int64_t>{1, 0} ||
        !isParam(fn, t.getInput()))
      return std::nullopt;
    h.transpose = t;
    w = t.getInput();
  }
  h.weight = cast<BlockArgument>(w);
  auto wt = cast<RankedTensorType>(w.getType());
  if (wt.getRank() != 2 || wt.getDimSize(0) != logits.getDimSize(1))
    return std::nullopt;
  return h;
}

/// Whether every other use of `table` is an embedding gather along axis 0.
bool onlyGathers(Value table, Operation *except) {
  return llvm::all_of(table.getUsers(), [&](Operation *u) {
    if (u == except)
      return true;
    auto g = dyn_cast<nn::GatherOp>(u);
    return g && g.getData() == table && g.getAxis() == 0;
  });
}

void splitArg(func::FuncOp fn, BlockArgument a, int64_t tp) {
  auto t = cast<RankedTensorType>(a.getType());
  a.setType(withDim(t, 0, t.getDimSize(0) / tp));
  OpBuilder b(fn.getContext());
  fn.setArgAttr(a.getArgNumber(), "dist.tp_split", b.getDenseI64ArrayAttr({0, 1, tp}));
}

/// Each rank gathers the rows it holds; g sums the parts.
void splitGathers(BlockArgument table, dist::GroupAttr group, int64_t tp) {
  OpBuilder b(table.getContext());
  for (Operation *u : llvm::make_early_inc_range(table.getUsers())) {
    auto g = dyn_cast<nn::GatherOp>(u);
    if (!g)
      continue;
    g->setAttr("dist.tp_part", b.getI64IntegerAttr(tp));
    b.setInsertionPointAfter(g);
    auto sum = dist::TpReduceOp::create(b, g.getLoc(), g.getResult(), group);
    g.getResult().replaceAllUsesExcept(sum.getResult(), sum);
  }
}

} // namespace

LogicalResult vocabParallel(func::FuncOp fn, int64_t tp, VocabParallelCounts &counts) {
  MLIRContext *ctx = fn.getContext();
  auto group = dist::GroupAttr::get(ctx, dist::Axis::tp, tp);
  OpBuilder b(ctx);
  llvm::SmallVector<nn::CrossEntropyOp> ces;
  fn.walk([&](nn::CrossEntropyOp ce) { ces.push_back(ce); });
  llvm::DenseSet<Value> tables;
  llvm::DenseSet<int64_t> vocabularies; // of the split LM heads
  for (nn::CrossEntropyOp ce : ces) {
    std::optional<Head> h = matchHead(fn, ce);
    if (!h)
      continue;
    Operation *headUse = h->transpose ? h->transpose.getOperation() : h->mm.getOperation();
    if (!onlyGathers(h->weight, headUse))
      continue; // read elsewhere too: the propagation says why it stays whole
    int64_t V = cast<RankedTensorType>(h->weight.getType()).getDimSize(0);
    if (V % tp) {
      // A classifier's 5 classes, a vocabulary of 97: the head (and its
      // table) stay whole on every rank; the manifest says why.
      h->mm->setAttr("dist.tp", b.getStringAttr("replicated"));
      h->mm->setAttr("dist.tp_reason",
                     b.getStringAttr("the " + std::to_string(V) + " classes of the head feeding "
                                     "the loss do not split into tp " + std::to_string(tp) +
                                     " parts (pad them to a multiple of tp, as Megatron's "
                                     "--make-vocab-size-divisible-by does, to split the head)"));
      continue;
    }
    int64_t part = V / tp;
    Location loc = ce.getLoc();

    // The LM head: column parallel over the vocabulary.
    splitArg(fn, h->weight, tp);
    if (h->transpose)
      h->transpose.getResult().setType(withDim(h->transpose.getType(), 1, part));
    b.setInsertionPoint(h->mm);
    auto f = dist::TpCopyOp::create(b, h->mm.getLoc(), h->mm.getLhs(), group);
    h->mm.getLhsMutable().assign(f.getResult());
    h->mm.getResult().setType(withDim(h->mm.getType(), -1, part));
    h->mm->setAttr("dist.tp", b.getStringAttr("column"));
    h->mm->setAttr("dist.tp_vocab", b.getUnitAttr());
    if (h->biasAdd) {
      splitArg(fn, h->bias, tp);
      h->biasAdd.getResult().setType(withDim(h->biasAdd.getType(), -1, part));
    }
    if (h->reshape)
      h->reshape.getResult().setType(withDim(h->reshape.getType(), -1, part));

    // The loss from the parts: maxima, sums, then the loss.
    Value logits = ce.getInput();
    int64_t n = cast<RankedTensorType>(logits.getType()).getDimSize(0);
    auto f32 = Float32Type::get(ctx);
    b.setInsertionPoint(ce);
    Value m = nn::ReduceMaxOp::create(b, loc, RankedTensorType::get({n}, f32), logits,
                                      b.getDenseI64ArrayAttr({1}), /*keepdims=*/false);
    Value M = dist::TpMaxOp::create(b, loc, m, group);
    Value sums = nn::VocabCeSumsOp::create(b, loc, RankedTensorType::get({2, n}, f32), logits,
                                           ce.getLabels(), M, b.getI64IntegerAttr(tp));
    Value S = dist::TpReduceOp::create(b, loc, sums, group);
    Value loss = nn::VocabCeLossOp::create(b, loc, ce.getType(), S, M, ce.getLabels(),
                                           b.getI64IntegerAttr(V), ce.getReductionAttr(),
                                           ce.getIgnoreIndexAttr());
    ce.getResult().replaceAllUsesWith(loss);
    ce->erase();
    ++counts.heads;
    vocabularies.insert(V);
    if (tables.insert(h->weight).second && !h->weight.use_empty()) {
      splitGathers(h->weight, group, tp);
      counts.embeddings += llvm::count_if(h->weight.getUsers(),
                                          [](Operation *u) { return isa<nn::GatherOp>(u); });
    }
  }
  // Untied word embeddings: a table of the split LM head's vocabulary
  // gathered at token ids (not at constant positions: position embeddings
  // stay whole, as in Megatron).
  for (BlockArgument a : fn.getArguments()) {
    auto t = dyn_cast<RankedTensorType>(a.getType());
    if (tables.contains(a) || !isParam(fn, a) || !t || t.getRank() != 2 || a.use_empty() ||
        !vocabularies.contains(t.getDimSize(0)) || !onlyGathers(a, nullptr))
      continue;
    bool tokens = llvm::all_of(a.getUsers(), [](Operation *u) {
      Operation *def = cast<nn::GatherOp>(u).getIndices().getDefiningOp();
      return !def || !def->hasTrait<OpTrait::ConstantLike>();
    });
    if (!tokens)
      continue;
    splitArg(fn, a, tp);
    splitGathers(a, group, tp);
    counts.embeddings +=
        llvm::count_if(a.getUsers(), [](Operation *u) { return isa<nn::GatherOp>(u); });
  }
  return success();
}

} // namespace dsc
