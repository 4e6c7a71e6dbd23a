//===- OneBitCompression.cpp - 1-bit Adam's two phases, planned ----------===//
//
// Input: a data-parallel step (ZeRO stage 0) whose updates are
// train.onebit_adam. DeepSpeed's OnebitAdam (edaa722
// runtime/fp16/onebit/adam.py; docs/deepspeed-optimizers.md, sections 5
// and 6) runs in two phases that this pass plans together, each op marked
// with the optimizer steps it runs on (train.active_steps):
//
//  * warm-up, steps 1..S (S: DeepSpeed's last uncompressed call, in the
//    step's count): the gradients are all-reduced as data-parallel planned
//    them, and the update is Adam without bias correction;
//  * compressed, steps S+1..: the gradient all-reduces are the identity
//    (each rank keeps its local gradient), the clipping norm is the mean of
//    the ranks' local norms (DeepSpeed's clip_grad_norm_ divides by the
//    data-parallel size and all-reduces), and each parameter's momentum
//    b1 m + (1-b1) g goes through the error-compensated 1-bit all-reduce:
//    padded to Np (a multiple of W lcm(W, 8)), compressed with the worker
//    error, its packed signs all_to_all'd and the scales all_gather'ed,
//    each rank the server of one chunk (onebit_server with the server
//    error), the servers' signs and scales all_gather'ed and expanded, and
//    sliced back. The worker (Np) and server (Np/W) errors are optimizer
//    states: arguments and results, updated in place.
//
//===----------------------------------------------------------------------===//
#include "passes/DistUtils.h"
#include "passes/Passes.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <numeric>

namespace dsc {
#define GEN_PASS_DEF_ONEBITCOMPRESSION
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {
using train::TrainDialect;

/// Builds ops with `build` and marks every op it created with `steps`.
template <typename F>
auto gated(OpBuilder &b, Location loc, DenseI64ArrayAttr steps, F &&build) {
  Block *block = b.getInsertionBlock();
  Block::iterator before = b.getInsertionPoint();
  Operation *prev = before == block->begin() ? nullptr : &*std::prev(before);
  auto result = build();
  Block::iterator from = prev ? std::next(Block::iterator(prev)) : block->begin();
  for (Block::iterator it = from; it != b.getInsertionPoint(); ++it)
    if (!isa<arith::ConstantOp, nn::ReshapeOp, dist::WaitOp>(&*it))
      it->setAttr(TrainDialect::kActiveSteps, steps);
  return result;
}

struct OneBitCompression : impl::OneBitCompressionBase<OneBitCompression> {
  using Base::Base;

  void runOnOperation() override {
    if (dp < 2) {
      getOperation().emitError("onebit-compression: needs dp >= 2 (one rank compresses "
                               "nothing), got ")
          << (int64_t)dp;
      return signalPassFailure();
    }
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (failed(run(fn)))
        return signalPassFailure();
  }

  LogicalResult run(func::FuncOp fn) {
    auto updates = llvm::to_vector(fn.getBody().front().getOps<train::OneBitAdamOp>());
    if (updates.empty())
      return success();
    train::OneBitAdamOp first = updates.front();
    for (train::OneBitAdamOp u : updates) {
      if (u.getCompressed())
        return u.emitOpError("onebit-compression: the momentum is compressed already");
      if (u.getFreezeStep() != first.getFreezeStep() ||
          u.getStepOffset() != first.getStepOffset() || u.getBeta1() != first.getBeta1())
        return u.emitOpError("onebit-compression: every update of a step switches together "
                             "(one freeze_step, step_offset and beta1)");
    }
    // The last warm-up optimizer step, in the step argument's count.
    const int64_t last = first.lastWarmupCall() - first.getStepOffset();
    OpBuilder b(fn.getContext());
    auto warmup = b.getDenseI64ArrayAttr({1, last});
    auto compressed = b.getDenseI64ArrayAttr({last + 1, 0});
    auto group = dist::GroupAttr::get(fn.getContext(), dist::Axis::dp, dp);

    // 1. The gradient reductions run in the warm-up only.
    WalkResult walk = fn.walk([&](Operation *op) {
      if (!distutil::isCollective(op))
        return WalkResult::advance();
      auto reduce = dyn_cast<dist::AllReduceOp>(op);
      if (!reduce || reduce.getGroup() != group || reduce.getReduce() != dist::ReduceKind::avg) {
        if (isa<dist::ReduceScatterOp>(op))
          op->emitOpError("onebit-compression: the gradients are partitioned (ZeRO): a 1-bit "
                          "optimizer compresses each parameter's whole momentum with one scale "
                          "and one error buffer, which ZeRO leaves each rank only a part of "
                          "(DeepSpeed asserts \"1bit-Adam is not compatible with ZeRO\"); use "
                          "ZeRO stage 0 with it, or Adam/AdamW with ZeRO");
        else
          op->emitOpError("onebit-compression: expected only data-parallel's gradient averages "
                          "(ZeRO stage 0) before the compression is planned");
        return WalkResult::interrupt();
      }
      op->setAttr(TrainDialect::kActiveSteps, warmup);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();

    // 2. The clipping norm: in the compressed phase the mean of the local
    // norms (an average of sqrt(sum_sq), squared back for clip_grad_norm);
    // in the warm-up the gradients are averaged already and the skipped
    // reduction leaves the one norm every rank has.
    auto clips = llvm::to_vector(fn.getBody().front().getOps<train::ClipGradNormOp>());
    if (clips.size() != 1)
      return fn.emitError("onebit-compression: expected one train.clip_grad_norm, found ")
             << clips.size();
    train::ClipGradNormOp clip = clips[0];
    if (clip.getSumSq())
      return clip.emitOpError("onebit-compression: the gradients are partitioned already");
    Location loc = clip.getLoc();
    b.setInsertionPoint(clip);
    Value sumSq = distutil::sumOfSquares(b, loc, clip.getGrads());
    Value norm = nn::SqrtOp::create(b, loc, sumSq.getType(), sumSq);
    Value mean = gated(b, loc, compressed, [&] {
      return distutil::allReduce(b, loc, norm, group, dist::ReduceKind::avg);
    });
    Value squared = nn::MulOp::create(b, loc, mean, mean);
    auto newClip = train::ClipGradNormOp::create(b, loc, clip->getResultTypes(), clip.getGrads(),
                                                 squared, clip.getLossScale(),
                                                 clip.getMaxNormAttr());
    clip.replaceAllUsesWith(newClip);
    clip.erase();

    // 3. Each momentum's compressed all-reduce, and its error states.
    SmallVector<Type> errorTypes;
    SmallVector<DictionaryAttr> errorAttrs;
    SmallVector<int64_t> sizes; // Np per update
    int64_t w = dp, lcm = std::lcm<int64_t>(w, 8);
    for (train::OneBitAdamOp u : updates) {
      int64_t n = cast<RankedTensorType>(u.getParam().getType()).getNumElements();
      int64_t unit = w * lcm, np = std::max<int64_t>(unit, (n + unit - 1) / unit * unit);
      sizes.push_back(np);
      StringAttr name = paramName(fn, u);
      if (!name)
        return u.emitOpError("onebit-compression: the parameter is not a train.param argument");
      // Each rank's own errors: checkpoints keep them as the ranks' chunks
      // of one tensor of W x len (dist.shard_of), so a resume on as many
      // ranks restores every rank's.
      for (auto [state, len] : {std::pair{"worker_error", np}, std::pair{"server_error", np / w}}) {
        errorTypes.push_back(RankedTensorType::get({len}, b.getF32Type()));
        errorAttrs.push_back(b.getDictionaryAttr(
            {b.getNamedAttr(TrainDialect::kOptState,
                            b.getStringAttr(name.getValue() + "/" + state)),
             b.getNamedAttr(distutil::kShardOf, b.getDenseI64ArrayAttr({w * len}))}));
      }
    }
    unsigned firstError = fn.getNumArguments();
    SmallVector<unsigned> at(errorTypes.size(), firstError);
    SmallVector<Location> locs(errorTypes.size(), fn.getLoc());
    if (failed(fn.insertArguments(at, errorTypes, errorAttrs, locs)))
      return failure();

    // Stage by stage over every parameter (all compressions, then the
    // exchanges, the servers, the gathers, the expansions), so that
    // comm-fusion can bucket each exchange of all parameters into one.
    SmallVector<Value> workerErrors, serverErrors;
    for (size_t k = 0; k < updates.size(); ++k) {
      workerErrors.push_back(fn.getArgument(firstError + 2 * k));
      serverErrors.push_back(fn.getArgument(firstError + 2 * k + 1));
    }
    SmallVector<Value> newErrors;
    b.setInsertionPoint(updates.front());
    SmallVector<Value> momenta =
        compressAll(b, updates, sizes, workerErrors, serverErrors, group, compressed, newErrors);
    for (auto [u, m] : llvm::zip_equal(updates, momenta))
      u.getCompressedMutable().assign(m);

    // The new errors are results, written where the next step reads them.
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    SmallVector<Value> results(ret.getOperands());
    llvm::append_range(results, newErrors);
    SmallVector<DictionaryAttr> resultAttrs;
    for (unsigned i = 0; i < fn.getNumResults(); ++i)
      resultAttrs.push_back(fn.getResultAttrDict(i));
    for (DictionaryAttr attrs : errorAttrs)
      resultAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(TrainDialect::kOptState, attrs.get(TrainDialect::kOptState))));
    b.setInsertionPoint(ret);
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    SmallVector<Type> types;
    for (Value v : results)
      types.push_back(v.getType());
    fn.setType(FunctionType::get(fn.getContext(), fn.getArgumentTypes(), types));
    fn.setAllResultAttrs(resultAttrs);
    numCompressed += updates.size();
    return success();
  }

  static StringAttr paramName(func::FuncOp fn, train::OneBitAdamOp u) {
    auto arg = dyn_cast<BlockArgument>(u.getParam());
    if (!arg)
      return {};
    return fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), TrainDialect::kParam);
  }

  /// The compressed momenta of `updates`; appends the new worker and
  /// server errors of each, in order, to `newErrors`.
  SmallVector<Value> compressAll(OpBuilder &b, MutableArrayRef<train::OneBitAdamOp> updates,
                                 ArrayRef<int64_t> sizes, ArrayRef<Value> workerErrors,
                                 ArrayRef<Value> serverErrors, dist::GroupAttr group,
                                 DenseI64ArrayAttr steps, SmallVector<Value> &newErrors) {
    Location loc = updates.front().getLoc();
    int64_t w = group.getSize();
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    double beta1 = updates.front().getBeta1().convertToDouble();
    // DeepSpeed's m.mul_(b1).add_(g, alpha=1-b1): both factors rounded to float.
    Value b1 = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(scalar, b.getF32FloatAttr(float(beta1))));
    Value oneMinusB1 = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(scalar, b.getF32FloatAttr(float(1.0 - beta1))));
    auto i8 = [&](int64_t len) { return RankedTensorType::get({len}, b.getI8Type()); };
    auto f32 = [&](int64_t len) { return RankedTensorType::get({len}, b.getF32Type()); };
    auto numel = [](train::OneBitAdamOp u) {
      return cast<RankedTensorType>(u.getParam().getType()).getNumElements();
    };
    return gated(b, loc, steps, [&] {
      size_t count = updates.size();
      SmallVector<train::OneBitCompressOp> workers;
      for (auto [u, np] : llvm::zip_equal(updates, sizes)) {
        Value scaled = nn::MulOp::create(b, loc, u.getExpAvg(), b1);
        Value step = nn::MulOp::create(b, loc, u.getGrad(), oneMinusB1);
        Value m = nn::AddOp::create(b, loc, scaled, step);
        Value flat = distutil::flatten(b, loc, m);
        int64_t n = numel(u);
        if (np != n) // zeros after the momentum, as DeepSpeed's torch.cat
          flat = nn::SliceGradOp::create(b, loc, f32(np), flat, b.getDenseI64ArrayAttr({0}),
                                         b.getDenseI64ArrayAttr({n}),
                                         b.getDenseI64ArrayAttr({1}));
        workers.push_back(
            train::OneBitCompressOp::create(b, loc, flat, workerErrors[workers.size()]));
      }
      SmallVector<Value> bits, scales;
      for (auto [worker, np] : llvm::zip_equal(workers, sizes))
        bits.push_back(distutil::startAndWait<dist::AllToAllOp>(
            b, loc, TypeRange{i8(np / 8)}, worker.getBits(), group)[0]);
      for (train::OneBitCompressOp worker : workers)
        scales.push_back(distutil::startAndWait<dist::AllGatherOp>(
            b, loc, TypeRange{f32(w)}, worker.getScale(), group)[0]);
      SmallVector<train::OneBitServerOp> servers;
      for (size_t k = 0; k < count; ++k)
        servers.push_back(
            train::OneBitServerOp::create(b, loc, bits[k], scales[k], serverErrors[k]));
      SmallVector<Value> allBits, allScales;
      for (auto [server, np] : llvm::zip_equal(servers, sizes))
        allBits.push_back(distutil::startAndWait<dist::AllGatherOp>(
            b, loc, TypeRange{i8(np / 8)}, server.getBitsOut(), group)[0]);
      for (train::OneBitServerOp server : servers)
        allScales.push_back(distutil::startAndWait<dist::AllGatherOp>(
            b, loc, TypeRange{f32(w)}, server.getScaleOut(), group)[0]);
      SmallVector<Value> momenta;
      for (size_t k = 0; k < count; ++k) {
        int64_t np = sizes[k], n = numel(updates[k]);
        Value expanded =
            train::OneBitExpandOp::create(b, loc, f32(np), allBits[k], allScales[k]);
        if (np != n)
          expanded = nn::SliceOp::create(b, loc, f32(n), expanded, b.getDenseI64ArrayAttr({0}),
                                         b.getDenseI64ArrayAttr({n}),
                                         b.getDenseI64ArrayAttr({1}));
        auto type = cast<RankedTensorType>(updates[k].getParam().getType());
        momenta.push_back(distutil::reshape(b, loc, expanded, type.getShape()));
        newErrors.append({workers[k].getNewError(), servers[k].getNewError()});
      }
      return momenta;
    });
  }
};
} // namespace
} // namespace dsc
