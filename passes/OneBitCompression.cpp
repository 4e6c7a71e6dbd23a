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

/// Builds ops with `build` and marks every op it created with `steps`
/// (train.active_steps or train.step_classes).
template <typename F>
auto gated(OpBuilder &b, Location loc, NamedAttribute steps, F &&build) {
  Block *block = b.getInsertionBlock();
  Block::iterator before = b.getInsertionPoint();
  Operation *prev = before == block->begin() ? nullptr : &*std::prev(before);
  auto result = build();
  Block::iterator from = prev ? std::next(Block::iterator(prev)) : block->begin();
  for (Block::iterator it = from; it != b.getInsertionPoint(); ++it)
    if (!isa<arith::ConstantOp, nn::ReshapeOp, dist::WaitOp>(&*it))
      it->setAttr(steps.getName(), steps.getValue());
  return result;
}

/// The name DeepSpeed's fp16 / bf16 wrapper's one flat tensor gets for its
/// errors (FP16_Optimizer's fp32_groups_flat[0]).
constexpr const char *kFlatGroup = "fp32_flat_group";
/// The name of 1-bit LAMB's flat momentum buffer's errors and padding
/// (DeepSpeed's OnebitLamb.exp_avg_flat[0]).
constexpr const char *kLambFlat = "exp_avg_flat";

/// What one 1-bit all-reduce compresses: one parameter's momentum (fp32),
/// or every parameter's, concatenated in order (bf16 / fp16).
struct Group {
  SmallVector<Operation *> updates; // train.onebit_adam, zero_one_adam or onebit_lamb
  int64_t n = 0;  // elements
  int64_t np = 0; // padded to a multiple of W lcm(W, 8)
  std::string name;
  Value workerError = {}, serverError = {};
  /// 1-bit LAMB: the padding's state (np - n elements) that follows the
  /// momenta instead of zeros, and its new value (the result's padding).
  Value tail = {}, newTail = {};
};

/// Builds DeepSpeed's `m.mul_(b1).add_(g, alpha=1-b1)`: m b1 + (1-b1) g,
/// both factors rounded to float (their constants made at the first use,
/// so that an op of some steps only builds them where it is built).
struct Momentum {
  OpBuilder &b;
  Location loc;
  double beta1;
  Value b1 = {}, oneMinusB1 = {};
  Value operator()(Value m, Value g) {
    if (!b1) {
      auto scalar = RankedTensorType::get({}, b.getF32Type());
      b1 = arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(scalar, b.getF32FloatAttr(float(beta1))));
      oneMinusB1 = arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(scalar, b.getF32FloatAttr(float(1.0 - beta1))));
    }
    Value scaled = nn::MulOp::create(b, loc, m, b1);
    Value step = nn::MulOp::create(b, loc, g, oneMinusB1);
    return nn::AddOp::create(b, loc, scaled, step);
  }
};

struct OneBitCompression : impl::OneBitCompressionBase<OneBitCompression> {
  using Base::Base;
  /// The error states addErrors made, in order.
  SmallVector<StringAttr> errorNames_;

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
    if (!fn.getBody().front().getOps<train::ZeroOneAdamOp>().empty())
      return runZeroOne(fn);
    if (!fn.getBody().front().getOps<train::OneBitLambOp>().empty())
      return runOneBitLamb(fn);
    auto updates = llvm::to_vector(fn.getBody().front().getOps<train::OneBitAdamOp>());
    if (updates.empty())
      return success();
    // bf16 / fp16: DeepSpeed's wrapper's one flat tensor (see the header).
    const bool flat = getOperation()->hasAttr(TrainDialect::kPrecision);
    train::OneBitAdamOp first = updates.front();
    if (failed(switchTogether(ArrayRef(updates))))
      return failure();
    // The last warm-up optimizer step, in the step argument's count.
    const int64_t last = first.lastWarmupCall() - first.getStepOffset();
    OpBuilder b(fn.getContext());
    auto warmup = b.getDenseI64ArrayAttr({1, last});
    NamedAttribute compressed(TrainDialect::kActiveSteps,
                              b.getDenseI64ArrayAttr({last + 1, 0}));
    auto group = dist::GroupAttr::get(fn.getContext(), dist::Axis::dp, dp);

    // 1. The gradient reductions run in the warm-up only.
    if (failed(markWarmup(fn, warmup, group)))
      return failure();

    // 2. The clipping norm: in the compressed phase the mean of the local
    // norms (fp32) or each rank's own (bf16 / fp16).
    if (failed(replaceClipNorm(fn, b, group, compressed, flat)))
      return failure();

    // 3. Each compressed tensor's all-reduce (one per parameter in fp32,
    // one of them all under bf16 / fp16), and its error states.
    SmallVector<Group> groups;
    if (failed(groupsOf(fn, b, updates, flat ? kFlatGroup : nullptr, groups)))
      return failure();
    // What each compresses: its momentum b1 m + (1-b1) g.
    b.setInsertionPoint(updates.front());
    Momentum next{b, updates.front().getLoc(), first.getBeta1().convertToDouble()};
    auto momentum = [&](Operation *op) -> Value {
      auto u = cast<train::OneBitAdamOp>(op);
      return next(u.getExpAvg(), u.getGrad());
    };
    auto setCompressed = [](Operation *op, Value v) {
      cast<train::OneBitAdamOp>(op).getCompressedMutable().assign(v);
    };
    SmallVector<Value> newErrors;
    compressAll(b, groups, group, compressed, momentum, setCompressed, newErrors);
    appendErrorResults(fn, b, newErrors);
    numCompressed += updates.size();
    return success();
  }

  /// 0/1 Adam (train.zero_one_adam): the gradient all-reduces on the
  /// initialising and variance steps, the clipping norm of the other steps
  /// as for OnebitAdam's compressed phase (the mean of the local norms;
  /// under bf16 / fp16 each rank's own, the overflow agreed), and one 1-bit
  /// all-reduce per parameter (bf16 / fp16: of their flat concatenation)
  /// on the compressed-gradient and sync steps of what
  /// train.zero_one_payload gives (the local gradient, or the synchronised
  /// momentum's u (sqrt(v) + eps)), its errors zeroed once on the first
  /// local step.
  LogicalResult runZeroOne(func::FuncOp fn) {
    const bool flat = getOperation()->hasAttr(TrainDialect::kPrecision);
    auto updates = llvm::to_vector(fn.getBody().front().getOps<train::ZeroOneAdamOp>());
    train::ZeroOneAdamOp first = updates.front();
    const dsrt::ZeroOneRule rule = first.rule();
    for (train::ZeroOneAdamOp u : updates) {
      dsrt::ZeroOneRule r = u.rule();
      if (u.getCompressed())
        return u.emitOpError("onebit-compression: the update is compressed already");
      if (r.varFreezeStep != rule.varFreezeStep || r.varUpdateScaler != rule.varUpdateScaler ||
          r.localStepScaler != rule.localStepScaler ||
          r.localStepClipper != rule.localStepClipper || r.stepOffset != rule.stepOffset)
        return u.emitOpError("onebit-compression: every update of a step follows one policy "
                             "(var_freeze_step, var_update_scaler, local_step_scaler, "
                             "local_step_clipper, step_offset)");
    }
    OpBuilder b(fn.getContext());
    auto classes = [&](uint32_t mask) {
      return NamedAttribute(b.getStringAttr(TrainDialect::kStepClasses),
                            b.getI64IntegerAttr(mask));
    };
    auto group = dist::GroupAttr::get(fn.getContext(), dist::Axis::dp, dp);
    // 1. The gradient averages: on DeepSpeed's initialising call (whose
    // clipping norm is the average's) and the variance steps.
    WalkResult walk = fn.walk([&](Operation *op) {
      if (!distutil::isCollective(op))
        return WalkResult::advance();
      auto reduce = dyn_cast<dist::AllReduceOp>(op);
      if (!reduce || reduce.getGroup() != group || reduce.getReduce() != dist::ReduceKind::avg) {
        op->emitOpError("onebit-compression: expected only data-parallel's gradient averages "
                        "(ZeRO stage 0) before the compression is planned");
        return WalkResult::interrupt();
      }
      NamedAttribute on = classes(dsrt::kStepInit | dsrt::kStepVariance);
      op->setAttr(on.getName(), on.getValue());
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    // 2. The clipping norm on the other steps: the mean of the local norms.
    const uint32_t local = dsrt::kStepCompressedGrad | dsrt::kStepLocal;
    if (failed(replaceClipNorm(fn, b, group, classes(local), flat)))
      return failure();
    // 3. One compressed all-reduce per parameter, or of them all.
    SmallVector<Group> groups;
    if (failed(groupsOf(fn, b, updates, flat ? kFlatGroup : nullptr, groups)))
      return failure();
    b.setInsertionPoint(updates.front());
    Location loc = first.getLoc();
    const uint32_t sent = dsrt::kStepCompressedGrad | dsrt::kStepSync;
    // DeepSpeed zeroes the errors once, after the last unfrozen call.
    for (Group &g : groups)
      (void)gated(b, loc, classes(sent), [&] {
        Value step = cast<train::ZeroOneAdamOp>(g.updates.front()).getStep();
        g.workerError = train::ResetAtOp::create(b, loc, g.workerError.getType(), g.workerError, step,
                                                 rule.firstFrozenStep());
        g.serverError = train::ResetAtOp::create(b, loc, g.serverError.getType(), g.serverError, step,
                                                 rule.firstFrozenStep());
        return success();
      });
    auto payload = [&](Operation *op) -> Value {
      auto u = cast<train::ZeroOneAdamOp>(op);
      return train::ZeroOneAdamPayloadOp::create(
          b, loc, u.getParam().getType(), u.getParam(), u.getGrad(), u.getExpAvg(),
          u.getExpAvgSq(), u.getMomentumAccumulator(), u.getLr(), u.getStep(),
          u.getBeta1Attr(), u.getEpsAttr(), u.getWeightDecayAttr(), u.getVarFreezeStepAttr(),
          u.getVarUpdateScalerAttr(), u.getLocalStepScalerAttr(), u.getLocalStepClipperAttr(),
          u.getStepOffsetAttr());
    };
    auto setCompressed = [](Operation *op, Value v) {
      cast<train::ZeroOneAdamOp>(op).getCompressedMutable().assign(v);
    };
    SmallVector<Value> newErrors;
    compressAll(b, groups, group, classes(sent), payload, setCompressed, newErrors);
    appendErrorResults(fn, b, newErrors);
    numCompressed += updates.size();
    return success();
  }

  /// 1-bit LAMB (train.onebit_lamb, fp32): OnebitAdam's two phases, with
  /// every tensor's scaled momentum (b1 m + (1-b1) g) scaling_coeff in ONE
  /// compressed all-reduce (DeepSpeed re-points every exp_avg into one flat
  /// buffer), whose padding is a state: DeepSpeed's buffer keeps the last
  /// result there and compresses it again.
  LogicalResult runOneBitLamb(func::FuncOp fn) {
    // bf16 / fp16: DeepSpeed's wrapper's one flat tensor (scaling
    // coefficient 1, the norms train.onebit_lamb_stats' over all of it).
    const bool flat = getOperation()->hasAttr(TrainDialect::kPrecision);
    auto stats = llvm::to_vector(fn.getBody().front().getOps<train::OneBitLambStatsOp>());
    if (stats.size() > 1 || flat != !stats.empty())
      return fn.emitError("onebit-compression: 1-bit LAMB under bf16 / fp16 takes one "
                          "train.onebit_lamb_stats, and in fp32 none; found ")
             << stats.size();
    auto updates = llvm::to_vector(fn.getBody().front().getOps<train::OneBitLambOp>());
    train::OneBitLambOp first = updates.front();
    if (failed(switchTogether(ArrayRef(updates))))
      return failure();
    const int64_t last = first.lastWarmupCall() - first.getStepOffset();
    OpBuilder b(fn.getContext());
    auto group = dist::GroupAttr::get(fn.getContext(), dist::Axis::dp, dp);
    if (failed(markWarmup(fn, b.getDenseI64ArrayAttr({1, last}), group)))
      return failure();
    NamedAttribute compressed(b.getStringAttr(TrainDialect::kActiveSteps),
                              b.getDenseI64ArrayAttr({last + 1, 0}));
    if (failed(replaceClipNorm(fn, b, group, compressed, flat)))
      return failure();
    SmallVector<Group> groups;
    if (failed(groupsOf(fn, b, updates, kLambFlat, groups)))
      return failure();
    // The padding's state, after the errors (a result after theirs).
    Group &g = groups.front();
    if (g.np != g.n) {
      unsigned at = fn.getNumArguments();
      auto type = RankedTensorType::get({g.np - g.n}, b.getF32Type());
      StringAttr name = b.getStringAttr(std::string(kLambFlat) + "/exp_avg_padding");
      if (failed(fn.insertArguments(
              {at}, {type},
              {b.getDictionaryAttr(b.getNamedAttr(TrainDialect::kOptState, name))},
              {fn.getLoc()})))
        return failure();
      g.tail = fn.getArgument(at);
      errorNames_.push_back(name);
    }
    // The chain goes before what reads it: the stats, or the first update.
    b.setInsertionPoint(flat ? stats.front().getOperation() : updates.front().getOperation());
    Momentum next{b, first.getLoc(), first.getBeta1().convertToDouble()};
    auto scaled = [&](Operation *op) -> Value {
      auto u = cast<train::OneBitLambOp>(op);
      Value m = next(u.getExpAvg(), u.getGrad());
      return flat ? m // times 1
                  : nn::MulOp::create(b, first.getLoc(), m, u.getScalingCoeff()).getResult();
    };
    SmallVector<Value> statsCompressed;
    auto setCompressed = [&](Operation *op, Value v) {
      cast<train::OneBitLambOp>(op).getCompressedMutable().assign(v);
      statsCompressed.push_back(v);
    };
    SmallVector<Value> newErrors;
    compressAll(b, groups, group, compressed, scaled, setCompressed, newErrors);
    if (flat)
      stats.front().getCompressedMutable().assign(statsCompressed);
    if (g.newTail)
      newErrors.push_back(g.newTail);
    appendErrorResults(fn, b, newErrors);
    numCompressed += updates.size();
    return success();
  }

  /// Marks the data-parallel gradient averages to run on `steps` only (a
  /// 1-bit optimizer's warm-up); anything else is refused.
  LogicalResult markWarmup(func::FuncOp fn, DenseI64ArrayAttr steps, dist::GroupAttr group) {
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
      op->setAttr(TrainDialect::kActiveSteps, steps);
      return WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  }

  /// Replaces the function's train.clip_grad_norm's sum of squares. fp32:
  /// by the square of the mean of the ranks' local norms (DeepSpeed's
  /// clip_grad_norm_ divides by the data-parallel size and all-reduces).
  /// `flat` (bf16 / fp16, FP16_Optimizer): each rank's own, plus 0 x the
  /// all-reduced sum, so that every rank sees any rank's overflow. The
  /// all-reduce runs on `steps`; on the others the gradients are averaged
  /// already and the skipped reduction leaves the one norm every rank has.
  LogicalResult replaceClipNorm(func::FuncOp fn, OpBuilder &b, dist::GroupAttr group,
                                NamedAttribute steps, bool flat) {
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
      Value total = gated(b, loc, steps, [&] {
        return distutil::allReduce(b, loc, sumSq, group, dist::ReduceKind::sum);
      });
      Value zero = arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(cast<ShapedType>(sumSq.getType()), b.getF32FloatAttr(0)));
      Value flag = nn::MulOp::create(b, loc, total, zero);
      clipSumSq = nn::AddOp::create(b, loc, sumSq, flag);
    } else {
      Value norm = nn::SqrtOp::create(b, loc, sumSq.getType(), sumSq);
      Value mean = gated(b, loc, steps, [&] {
        return distutil::allReduce(b, loc, norm, group, dist::ReduceKind::avg);
      });
      clipSumSq = nn::MulOp::create(b, loc, mean, mean);
    }
    auto newClip = train::ClipGradNormOp::create(b, loc, clip->getResultTypes(), clip.getGrads(),
                                                 clipSumSq, clip.getLossScale(),
                                                 clip.getMaxNormAttr());
    clip.replaceAllUsesWith(newClip);
    clip.erase();
    return success();
  }

  /// 1-bit Adam's and 1-bit LAMB's updates, none compressed yet, all
  /// switching on one step with one beta1 (the momenta compressed together).
  template <typename Op> static LogicalResult switchTogether(ArrayRef<Op> updates) {
    Op first = updates.front();
    for (Op u : updates) {
      if (u.getCompressed())
        return u.emitOpError("onebit-compression: the momentum is compressed already");
      if (u.getFreezeStep() != first.getFreezeStep() ||
          u.getStepOffset() != first.getStepOffset() || u.getBeta1() != first.getBeta1())
        return u.emitOpError("onebit-compression: every update of a step switches together "
                             "(one freeze_step, step_offset and beta1)");
    }
    return success();
  }

  /// What the compressed all-reduces take: one group of every update named
  /// `flatName` (a flat tensor), or without it one per update named after
  /// its parameter; with their error states (addErrors).
  template <typename Range>
  LogicalResult groupsOf(func::FuncOp fn, OpBuilder &b, const Range &updates,
                         const char *flatName, SmallVector<Group> &groups) {
    if (flatName)
      groups.push_back(Group{SmallVector<Operation *>(updates.begin(), updates.end()), 0, 0,
                             flatName});
    for (auto u : updates) {
      StringAttr name = paramName(fn, u.getParam());
      if (!name)
        return u.emitOpError("onebit-compression: the parameter is not a train.param argument");
      if (!flatName)
        groups.push_back(Group{{u}, 0, 0, name.str()});
    }
    return addErrors(fn, b, groups);
  }

  /// Each group's worker and server errors, as new train.opt_state
  /// arguments (set in the groups).
  LogicalResult addErrors(func::FuncOp fn, OpBuilder &b, MutableArrayRef<Group> groups) {
    SmallVector<Type> errorTypes;
    SmallVector<DictionaryAttr> errorAttrs;
    int64_t w = dp, lcm = std::lcm<int64_t>(w, 8);
    errorNames_.clear();
    for (Group &g : groups) {
      for (Operation *u : g.updates)
        g.n += cast<RankedTensorType>(u->getOperand(0).getType()).getNumElements();
      int64_t unit = w * lcm;
      g.np = std::max<int64_t>(unit, (g.n + unit - 1) / unit * unit);
      // Each rank's own errors: checkpoints keep them as the ranks' chunks
      // of one tensor of W x len (dist.shard_of), so a resume on as many
      // ranks restores every rank's.
      for (auto [state, len] :
           {std::pair{"worker_error", g.np}, std::pair{"server_error", g.np / w}}) {
        StringAttr name = b.getStringAttr(g.name + "/" + state);
        errorTypes.push_back(RankedTensorType::get({len}, b.getF32Type()));
        errorAttrs.push_back(
            b.getDictionaryAttr({b.getNamedAttr(TrainDialect::kOptState, name),
                                 b.getNamedAttr(distutil::kShardOf, b.getDenseI64ArrayAttr({w * len}))}));
        errorNames_.push_back(name);
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
    return success();
  }

  /// The new errors are results (train.opt_state, in addErrors' order),
  /// written where the next step reads them.
  void appendErrorResults(func::FuncOp fn, OpBuilder &b, ArrayRef<Value> newErrors) {
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    SmallVector<Value> results(ret.getOperands());
    llvm::append_range(results, newErrors);
    SmallVector<DictionaryAttr> resultAttrs;
    for (unsigned i = 0; i < fn.getNumResults(); ++i)
      resultAttrs.push_back(fn.getResultAttrDict(i));
    for (StringAttr name : errorNames_)
      resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(TrainDialect::kOptState, name)));
    b.setInsertionPoint(ret);
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    SmallVector<Type> types;
    for (Value v : results)
      types.push_back(v.getType());
    fn.setType(FunctionType::get(fn.getContext(), fn.getArgumentTypes(), types));
    fn.setAllResultAttrs(resultAttrs);
  }

  static StringAttr paramName(func::FuncOp fn, Value param) {
    auto arg = dyn_cast<BlockArgument>(param);
    if (!arg)
      return {};
    return fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), TrainDialect::kParam);
  }

  /// Compresses what `input` gives for each group's updates (concatenated,
  /// padded to np), gives every update its share of the result (through
  /// `setCompressed`), and appends each group's new worker and server
  /// errors, in order, to `newErrors`. Every op it builds runs on `steps`.
  void compressAll(OpBuilder &b, MutableArrayRef<Group> groups, dist::GroupAttr group,
                   NamedAttribute steps, function_ref<Value(Operation *)> input,
                   function_ref<void(Operation *, Value)> setCompressed,
                   SmallVector<Value> &newErrors) {
    Location loc = groups.front().updates.front()->getLoc();
    int64_t w = group.getSize();
    auto i8 = [&](int64_t len) { return RankedTensorType::get({len}, b.getI8Type()); };
    auto f32 = [&](int64_t len) { return RankedTensorType::get({len}, b.getF32Type()); };
    auto slice = [&](Value v, int64_t from, int64_t len) {
      return nn::SliceOp::create(b, loc, f32(len), v, b.getDenseI64ArrayAttr({from}),
                                 b.getDenseI64ArrayAttr({from + len}),
                                 b.getDenseI64ArrayAttr({1}));
    };
    (void)gated(b, loc, steps, [&] {
      // Stage by stage over every group (all compressions, then the
      // exchanges, the servers, the gathers, the expansions), so that
      // comm-fusion can bucket each exchange of all groups into one.
      SmallVector<train::OneBitCompressOp> workers;
      for (Group &g : groups) {
        SmallVector<Value> parts;
        for (Operation *u : g.updates)
          parts.push_back(distutil::flatten(b, loc, input(u)));
        if (g.tail) // 1-bit LAMB: the padding's own state
          parts.push_back(g.tail);
        Value flat = parts.size() == 1
                         ? parts[0]
                         : nn::ConcatOp::create(b, loc, parts, b.getI64IntegerAttr(0));
        if (g.np != g.n && !g.tail) // zeros after the momenta, as DeepSpeed's torch.cat
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
        for (Operation *u : g.updates) {
          auto type = cast<RankedTensorType>(u->getOperand(0).getType());
          int64_t n = type.getNumElements();
          Value mine = n == g.np ? expanded : slice(expanded, at, n);
          setCompressed(u, distutil::reshape(b, loc, mine, type.getShape()));
          at += n;
        }
        if (g.tail)
          g.newTail = slice(expanded, g.n, g.np - g.n);
        newErrors.append({workers[k].getNewError(), servers[k].getNewError()});
      }
      return success();
    });
  }
};
} // namespace
} // namespace dsc
