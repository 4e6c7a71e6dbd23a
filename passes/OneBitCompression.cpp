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
// Under bf16 / fp16 (the module's train.precision) DeepSpeed wraps the
// optimizer in FP16_Optimizer (edaa722 runtime/fp16/fused_optimizer.py),
// which hands OnebitAdam ONE flat fp32 tensor of every parameter: the
// momenta are compressed as one concatenation (one scale per worker and
// server, padded once, one error pair named fp32_flat_group/...), and the
// wrapper clips by each rank's LOCAL norm (get_flattened_grad_norm reduces
// over model parallelism only) while the overflow flag is MAX-reduced over
// the world once the gradient all-reduce is off (utils.py CheckOverflow):
// here the local sum of squares plus 0 x the all-reduced sum, which is NaN
// on every rank when any rank's is not finite.
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

/// The name DeepSpeed's fp16 / bf16 wrapper's one flat tensor gets for its
/// errors (FP16_Optimizer's fp32_groups_flat[0]).
constexpr const char *kFlatGroup = "fp32_flat_group";

/// What one 1-bit all-reduce compresses: one parameter's momentum (fp32),
/// or every parameter's, concatenated in order (bf16 / fp16).
struct Group {
  SmallVector<train::OneBitAdamOp> updates;
  int64_t n = 0;  // elements
  int64_t np = 0; // padded to a multiple of W lcm(W, 8)
  std::string name;
  Value workerError = {}, serverError = {};
};

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
    // bf16 / fp16: DeepSpeed's wrapper's one flat tensor (see the header).
    const bool flat = getOperation()->hasAttr(TrainDialect::kPrecision);
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
    Value clipSumSq;
    if (flat) {
      // FP16_Optimizer: each rank's own norm, the overflow agreed.
      Value total = gated(b, loc, compressed, [&] {
        return distutil::allReduce(b, loc, sumSq, group, dist::ReduceKind::sum);
      });
      Value zero = arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(cast<ShapedType>(sumSq.getType()), b.getF32FloatAttr(0)));
      Value flag = nn::MulOp::create(b, loc, total, zero);
      clipSumSq = nn::AddOp::create(b, loc, sumSq, flag);
    } else {
      Value norm = nn::SqrtOp::create(b, loc, sumSq.getType(), sumSq);
      Value mean = gated(b, loc, compressed, [&] {
        return distutil::allReduce(b, loc, norm, group, dist::ReduceKind::avg);
      });
      clipSumSq = nn::MulOp::create(b, loc, mean, mean);
    }
    auto newClip = train::ClipGradNormOp::create(b, loc, clip->getResultTypes(), clip.getGrads(),
                                                 clipSumSq, clip.getLossScale(),
                                                 clip.getMaxNormAttr());
    clip.replaceAllUsesWith(newClip);
    clip.erase();

    // 3. Each compressed tensor's all-reduce (one per parameter in fp32,
    // one of them all under bf16 / fp16), and its error states.
    SmallVector<Group> groups;
    if (flat)
      groups.push_back(Group{updates, 0, 0, kFlatGroup});
    for (train::OneBitAdamOp u : updates) {
      StringAttr name = paramName(fn, u);
      if (!name)
        return u.emitOpError("onebit-compression: the parameter is not a train.param argument");
      if (!flat)
        groups.push_back(Group{{u}, 0, 0, name.str()});
    }
    SmallVector<Type> errorTypes;
    SmallVector<DictionaryAttr> errorAttrs;
    int64_t w = dp, lcm = std::lcm<int64_t>(w, 8);
    for (Group &g : groups) {
      for (train::OneBitAdamOp u : g.updates)
        g.n += cast<RankedTensorType>(u.getParam().getType()).getNumElements();
      int64_t unit = w * lcm;
      g.np = std::max<int64_t>(unit, (g.n + unit - 1) / unit * unit);
      // Each rank's own errors: checkpoints keep them as the ranks' chunks
      // of one tensor of W x len (dist.shard_of), so a resume on as many
      // ranks restores every rank's.
      for (auto [state, len] :
           {std::pair{"worker_error", g.np}, std::pair{"server_error", g.np / w}}) {
        errorTypes.push_back(RankedTensorType::get({len}, b.getF32Type()));
        errorAttrs.push_back(b.getDictionaryAttr(
            {b.getNamedAttr(TrainDialect::kOptState, b.getStringAttr(g.name + "/" + state)),
             b.getNamedAttr(distutil::kShardOf, b.getDenseI64ArrayAttr({w * len}))}));
      }
    }
    unsigned firstError = fn.getNumArguments();
    SmallVector<unsigned> at(errorTypes.size(), firstError);
    SmallVector<Location> locs(errorTypes.size(), fn.getLoc());
    if (failed(fn.insertArguments(at, errorTypes, errorAttrs, locs)))
      return failure();

    for (auto [k, g] : llvm::enumerate(groups)) {
      g.workerError = fn.getArgument(firstError + 2 * k);
      g.serverError = fn.getArgument(firstError + 2 * k + 1);
    }
    SmallVector<Value> newErrors;
    b.setInsertionPoint(updates.front());
    compressAll(b, groups, group, compressed, newErrors);

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

  /// Compresses each group's momenta b1 m + (1-b1) g (concatenated,
  /// padded to np), gives every update its share of the result as its
  /// `compressed` operand, and appends each group's new worker and server
  /// errors, in order, to `newErrors`.
  void compressAll(OpBuilder &b, MutableArrayRef<Group> groups, dist::GroupAttr group,
                   DenseI64ArrayAttr steps, SmallVector<Value> &newErrors) {
    Location loc = groups.front().updates.front().getLoc();
    int64_t w = group.getSize();
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    double beta1 = groups.front().updates.front().getBeta1().convertToDouble();
    // DeepSpeed's m.mul_(b1).add_(g, alpha=1-b1): both factors rounded to float.
    Value b1 = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(scalar, b.getF32FloatAttr(float(beta1))));
    Value oneMinusB1 = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(scalar, b.getF32FloatAttr(float(1.0 - beta1))));
    auto i8 = [&](int64_t len) { return RankedTensorType::get({len}, b.getI8Type()); };
    auto f32 = [&](int64_t len) { return RankedTensorType::get({len}, b.getF32Type()); };
    auto slice = [&](Value v, int64_t from, int64_t len) {
      return nn::SliceOp::create(b, loc, f32(len), v, b.getDenseI64ArrayAttr({from}),
                                 b.getDenseI64ArrayAttr({from + len}),
                                 b.getDenseI64ArrayAttr({1}));
    };
    gated(b, loc, steps, [&] {
      // Stage by stage over every group (all compressions, then the
      // exchanges, the servers, the gathers, the expansions), so that
      // comm-fusion can bucket each exchange of all groups into one.
      SmallVector<train::OneBitCompressOp> workers;
      for (Group &g : groups) {
        SmallVector<Value> parts;
        for (train::OneBitAdamOp u : g.updates) {
          Value scaled = nn::MulOp::create(b, loc, u.getExpAvg(), b1);
          Value step = nn::MulOp::create(b, loc, u.getGrad(), oneMinusB1);
          parts.push_back(
              distutil::flatten(b, loc, nn::AddOp::create(b, loc, scaled, step)));
        }
        Value flat = parts.size() == 1
                         ? parts[0]
                         : nn::ConcatOp::create(b, loc, parts, b.getI64IntegerAttr(0));
        if (g.np != g.n) // zeros after the momenta, as DeepSpeed's torch.cat
          flat = nn::SliceGradOp::create(b, loc, f32(g.np), flat, b.getDenseI64ArrayAttr({0}),
                                         b.getDenseI64ArrayAttr({g.n}),
                                         b.getDenseI64ArrayAttr({1}));
        workers.push_back(train::OneBitCompressOp::create(b, loc, flat, g.workerError));
      }
      SmallVector<Value> bits, scales;
      for (auto [worker, g] : llvm::zip_equal(workers, groups))
        bits.push_back(distutil::startAndWait<dist::AllToAllOp>(
            b, loc, TypeRange{i8(g.np / 8)}, worker.getBits(), group)[0]);
      for (train::OneBitCompressOp worker : workers)
        scales.push_back(distutil::startAndWait<dist::AllGatherOp>(
            b, loc, TypeRange{f32(w)}, worker.getScale(), group)[0]);
      SmallVector<train::OneBitServerOp> servers;
      for (auto [k, g] : llvm::enumerate(groups))
        servers.push_back(
            train::OneBitServerOp::create(b, loc, bits[k], scales[k], g.serverError));
      SmallVector<Value> allBits, allScales;
      for (auto [server, g] : llvm::zip_equal(servers, groups))
        allBits.push_back(distutil::startAndWait<dist::AllGatherOp>(
            b, loc, TypeRange{i8(g.np / 8)}, server.getBitsOut(), group)[0]);
      for (train::OneBitServerOp server : servers)
        allScales.push_back(distutil::startAndWait<dist::AllGatherOp>(
            b, loc, TypeRange{f32(w)}, server.getScaleOut(), group)[0]);
      for (auto [k, g] : llvm::enumerate(groups)) {
        Value expanded =
            train::OneBitExpandOp::create(b, loc, f32(g.np), allBits[k], allScales[k]);
        int64_t at = 0;
        for (train::OneBitAdamOp u : g.updates) {
          auto type = cast<RankedTensorType>(u.getParam().getType());
          int64_t n = type.getNumElements();
          Value mine = n == g.np ? expanded : slice(expanded, at, n);
          u.getCompressedMutable().assign(distutil::reshape(b, loc, mine, type.getShape()));
          at += n;
        }
        newErrors.append({workers[k].getNewError(), servers[k].getNewError()});
      }
      return success();
    });
  }
};
} // namespace
} // namespace dsc
