//===- DistUtils.h - building blocks of the data-parallel passes -*- C++ -*-===//
//
// What data-parallel, zero, comm-fusion and overlap share: the attribute
// names they record, the chunk size of a flattened tensor, and builders for
// a collective with its dist.wait.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PASSES_DISTUTILS_H
#define DSC_PASSES_DISTUTILS_H

#include "dialects/dist/DistDialect.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <map>

namespace dsc::distutil {

/// Argument attribute: this argument is chunk `rank` of a tensor of this
/// (full) shape, flattened and zero-padded to dp chunks.
inline constexpr llvm::StringLiteral kShardOf = "dist.shard_of";
/// Module attributes: data-parallel ranks and ZeRO stage of the step
/// (declared and verified by the dist dialect).
inline constexpr llvm::StringLiteral kDp = dist::DistDialect::kDp;
inline constexpr llvm::StringLiteral kZeroStage = dist::DistDialect::kZeroStage;
/// Pipelines: module attributes `dist.pp` (stages) and `dist.micro_batches`;
/// function attribute `dist.stage` (the stage a function is); argument
/// attribute `dist.tied_copy` (a parameter another, earlier stage also
/// holds: its gradient is summed with that stage's and counted once in the
/// gradient norm).
inline constexpr llvm::StringLiteral kPp = dist::DistDialect::kPp;
inline constexpr llvm::StringLiteral kMicroBatches = dist::DistDialect::kMicroBatches;
inline constexpr llvm::StringLiteral kStage = dist::DistDialect::kStage;
inline constexpr llvm::StringLiteral kTiedCopy = "dist.tied_copy";

/// Whether `fn` is a differentiated step (it returns train.grad results).
inline bool isDifferentiated(mlir::func::FuncOp fn) {
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (fn.getResultAttr(i, train::TrainDialect::kGrad))
      return true;
  return false;
}

/// Elements of each of `dp` chunks of an n-element tensor.
inline int64_t chunkSize(int64_t n, int64_t dp) { return (n + dp - 1) / dp; }

inline bool isCollective(mlir::Operation *op) {
  return mlir::isa<dist::AllReduceOp, dist::ReduceScatterOp, dist::AllGatherOp,
                   dist::AllToAllOp>(op);
}

/// The first collective in `op` (a function), or null: a step that already
/// communicates is not partitioned again.
inline mlir::Operation *firstCollective(mlir::Operation *op) {
  mlir::Operation *found = nullptr;
  op->walk([&](mlir::Operation *o) {
    if (!found && isCollective(o))
      found = o;
  });
  return found;
}

/// The dist.wait completing collective `op` (null when none).
inline dist::WaitOp waitOf(mlir::Operation *op) {
  for (mlir::Operation *user : op->getUsers())
    if (auto w = mlir::dyn_cast<dist::WaitOp>(user))
      return w;
  return {};
}

/// Sends that never block a pipeline stage's schedule: each one's dist.wait
/// moves to just before the next of `sends` on its channel (peer and tag),
/// the last one's to just before `end`. The buffers kept for sends in
/// flight stay one per channel.
inline mlir::LogicalResult deferSendWaits(llvm::ArrayRef<dist::SendOp> sends,
                                          mlir::Operation *end) {
  std::map<std::pair<int64_t, int64_t>, llvm::SmallVector<dist::SendOp>> channels;
  for (dist::SendOp s : sends)
    channels[{s.getPeer(), s.getTag()}].push_back(s);
  for (auto &[key, list] : channels)
    for (size_t i = 0; i < list.size(); ++i) {
      dist::WaitOp w = waitOf(list[i]);
      if (!w)
        return list[i].emitOpError("a pipeline send without its dist.wait");
      w->moveBefore(i + 1 < list.size() ? list[i + 1].getOperation() : end);
    }
  return mlir::success();
}

/// Elements of the whole tensors a collective works on: the inputs of a
/// reduction, the results of a gather (what bucket sizes count).
inline int64_t elementsOf(mlir::Operation *op) {
  int64_t n = 0;
  auto values = mlir::isa<dist::AllGatherOp>(op) ? mlir::ValueRange(op->getResults())
                                                  : mlir::ValueRange(op->getOperands());
  for (mlir::Value v : values)
    n += mlir::cast<mlir::RankedTensorType>(v.getType()).getNumElements();
  return n;
}

/// In a micro-batch body (train.accumulate), the op computing the loss: the
/// end of the forward pass. Stage 3 gathers do not move or fuse across it, so
/// a parameter gathered for the backward pass is not held during the forward
/// pass. Null elsewhere.
inline mlir::Operation *forwardEnd(mlir::Block &block) {
  auto acc = mlir::dyn_cast_or_null<train::AccumulateOp>(block.getParentOp());
  if (!acc || block.empty())
    return nullptr;
  mlir::Operation *yield = block.getTerminator();
  if (yield->getNumOperands() == 0)
    return nullptr;
  mlir::Operation *def = yield->getOperand(0).getDefiningOp();
  return def && def->getBlock() == &block ? def : nullptr;
}

/// The collectives of `block` in program order; an error (naming `pass`) on
/// one that no dist.wait completes.
inline mlir::FailureOr<llvm::SmallVector<mlir::Operation *>>
collectivesOf(mlir::Block &block, llvm::StringRef pass) {
  llvm::SmallVector<mlir::Operation *> found;
  for (mlir::Operation &op : block)
    if (isCollective(&op)) {
      if (!waitOf(&op))
        return op.emitOpError(pass) << ": a collective without its dist.wait";
      found.push_back(&op);
    }
  return found;
}

/// 0 before or at `boundary` (or when there is none), 1 after it.
inline int phaseOf(mlir::Operation *op, mlir::Operation *boundary) {
  return boundary && boundary->isBeforeInBlock(op) ? 1 : 0;
}

/// An op's cost for balancing pipeline stages: its flops, plus the bytes it
/// moves at one flop per 8 bytes (so a gather, without arithmetic, counts).
inline double opCost(mlir::Operation *op) {
  auto c = mlir::dyn_cast<nn::CostOpInterface>(op);
  if (!c)
    return 0;
  return std::max<double>(c.getFlops(), 0) + double(c.getBytesRead() + c.getBytesWritten()) / 8;
}
/// train.sum_sq of `values` (a zero scalar when there are none: a stage
/// whose only parameter is counted on another stage).
inline mlir::Value sumOfSquares(mlir::OpBuilder &b, mlir::Location loc, mlir::ValueRange values) {
  auto scalar = mlir::RankedTensorType::get({}, b.getF32Type());
  if (values.empty())
    return mlir::arith::ConstantOp::create(
        b, loc, mlir::DenseElementsAttr::get(scalar, b.getF32FloatAttr(0)));
  return train::SumSqOp::create(b, loc, scalar, values);
}
inline mlir::Value reshape(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                           llvm::ArrayRef<int64_t> shape) {
  auto t = mlir::cast<mlir::RankedTensorType>(v.getType());
  if (t.getShape() == shape)
    return v;
  return nn::ReshapeOp::create(b, loc, mlir::RankedTensorType::get(shape, t.getElementType()),
                               v);
}

inline mlir::Value flatten(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v) {
  auto t = mlir::cast<mlir::RankedTensorType>(v.getType());
  return reshape(b, loc, v, {t.getNumElements()});
}

/// Starts `Op` on `inputs` with result types `types` and waits for it right
/// away; returns the wait's results. (overlap moves the wait later.)
template <typename Op, typename... Extra>
llvm::SmallVector<mlir::Value> startAndWait(mlir::OpBuilder &b, mlir::Location loc,
                                            mlir::TypeRange types, mlir::ValueRange inputs,
                                            Extra... extra) {
  auto op = Op::create(b, loc, types, inputs, extra...);
  auto wait = dist::WaitOp::create(b, loc, op->getResults());
  return llvm::SmallVector<mlir::Value>(wait.getResults());
}

inline mlir::Value allReduce(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                             dist::GroupAttr group, dist::ReduceKind kind) {
  return startAndWait<dist::AllReduceOp>(
      b, loc, v.getType(), v, group,
      dist::ReduceKindAttr::get(b.getContext(), kind))[0];
}

/// Sums each of `parts` (1-D tensors of one element type, such as LAMB's
/// pairs of sums of squares) over `group` in one all-reduce: concatenated,
/// reduced and sliced back, one collective however many parts.
inline llvm::SmallVector<mlir::Value> allReduceSums(mlir::OpBuilder &b, mlir::Location loc,
                                                    mlir::ValueRange parts,
                                                    dist::GroupAttr group) {
  if (parts.size() == 1)
    return {allReduce(b, loc, parts[0], group, dist::ReduceKind::sum)};
  mlir::Value all = nn::ConcatOp::create(b, loc, parts, b.getI64IntegerAttr(0));
  mlir::Value sum = allReduce(b, loc, all, group, dist::ReduceKind::sum);
  llvm::SmallVector<mlir::Value> out;
  int64_t at = 0;
  for (mlir::Value part : parts) {
    int64_t n = mlir::cast<mlir::RankedTensorType>(part.getType()).getDimSize(0);
    out.push_back(nn::SliceOp::create(b, loc, part.getType(), sum, b.getDenseI64ArrayAttr({at}),
                                      b.getDenseI64ArrayAttr({at + n}),
                                      b.getDenseI64ArrayAttr({1})));
    at += n;
  }
  return out;
}

/// Chunk `rank` of the 1-D `flat`, reduced over the group.
inline mlir::Value reduceScatter(mlir::OpBuilder &b, mlir::Location loc, mlir::Value flat,
                                 dist::GroupAttr group, dist::ReduceKind kind) {
  auto t = mlir::cast<mlir::RankedTensorType>(flat.getType());
  auto chunk = mlir::RankedTensorType::get({chunkSize(t.getNumElements(), group.getSize())},
                                           t.getElementType());
  return startAndWait<dist::ReduceScatterOp>(
      b, loc, mlir::TypeRange{chunk}, flat, group,
      dist::ReduceKindAttr::get(b.getContext(), kind))[0];
}

/// `v` with element type `elem` (an nn.cast, or v itself when it has it).
inline mlir::Value castElements(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                                mlir::Type elem) {
  auto t = mlir::cast<mlir::RankedTensorType>(v.getType());
  if (t.getElementType() == elem)
    return v;
  return nn::CastOp::create(b, loc, t.clone(elem), v);
}

/// A gradient reduction in communication_data_type `commElem`, read by
/// `use`: `reduce` gets v cast to it (built at b's insertion point), and
/// `use` reads the result cast back to v's type, built right before its
/// owner, so the wait's first use stays late and comm-fusion can still
/// bucket the reductions (DeepSpeed casts the gradients to
/// communication_data_type before the reduction and copies the result into
/// the fp32 gradient).
template <typename Reduce>
void reduceInto(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v, mlir::Type commElem,
                mlir::OpOperand &use, Reduce &&reduce) {
  mlir::Type own = mlir::cast<mlir::RankedTensorType>(v.getType()).getElementType();
  mlir::Value r = reduce(castElements(b, loc, v, commElem ? commElem : own));
  mlir::OpBuilder at(use.getOwner());
  use.set(castElements(at, loc, r, own));
}

/// The n-element tensor whose chunks the ranks hold.
inline mlir::Value allGather(mlir::OpBuilder &b, mlir::Location loc, mlir::Value chunk,
                             int64_t n, dist::GroupAttr group) {
  auto t = mlir::cast<mlir::RankedTensorType>(chunk.getType());
  auto full = mlir::RankedTensorType::get({n}, t.getElementType());
  return startAndWait<dist::AllGatherOp>(b, loc, mlir::TypeRange{full}, chunk, group)[0];
}

} // namespace dsc::distutil

#endif // DSC_PASSES_DISTUTILS_H
