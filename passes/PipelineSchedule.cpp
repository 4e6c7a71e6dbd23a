//===- PipelineSchedule.cpp - micro-batches of each stage in 1F1B order --===//
//
// Input: the stage functions of pipeline-split after autodiff (forward ops,
// then backward ops marked `train.backward`; the step returns the loss and
// one gradient per parameter). Replaces gradient-accumulation for pipelines:
// each stage's micro-batch moves into one train.pipeline op, written once,
// whose schedule runs M micro-batches' forward (F) and backward (B) parts
// in the stage's order:
//
//   1f1b   PipeDream-Flush: stage s runs min(P-1-s, M) warm-up forwards,
//          then alternates F and B, then drains the remaining backwards;
//          at most P-s micro-batches are in flight on stage s.
//   zb-h1  zero-bubble (Qi et al., 2023, "H1"): the backward is split into
//          the input gradient B (what the previous stage waits for) and the
//          weight gradient W (the rest). B comes first; up to P-1-s W's are
//          deferred and fill the time the stage would otherwise wait. The
//          order comes from simulating all stages with the ops' costs.
//
// Every op of the body records its phase (`train.phase`: 1 F, 2 B, 3 W);
// the body reads its inputs with `train.load_batch` of its micro-batch
// index, and the input arguments are removed. The op sums the gradients
// (and the last stage's loss) over the micro-batches; they are scaled by
// 1/M once after it, as gradient-accumulation does, and a parameter held by
// several stages (dist.tied_copy) then gets the sum of every holder's
// gradient, added in stage order so that all holders compute the same
// bits. A send in the body completes before the next send on its channel
// (train.pipeline's semantics); the tied sums' sends complete at the end of
// the step. The parameters' low-precision copies are made once, before the
// op (as gradient-accumulation hoists them). pipeline-expand unrolls the
// op into the ops of every item.
//
//===----------------------------------------------------------------------===//
#include "passes/DistUtils.h"
#include "passes/Passes.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <map>

namespace dsc {
#define GEN_PASS_DEF_PIPELINESCHEDULE
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {
using train::TrainDialect;

enum Phase { kNone = 0, kForward = 1, kBackward = 2, kWeight = 3 };
struct Item {
  Phase phase;
  int64_t micro;
};

/// The 1F1B order of stage s.
SmallVector<Item> oneFOneB(int64_t s, int64_t P, int64_t M) {
  SmallVector<Item> order;
  int64_t warmup = std::min(P - 1 - s, M);
  for (int64_t k = 0; k < warmup; ++k)
    order.push_back({kForward, k});
  for (int64_t i = 0; i < M - warmup; ++i) {
    order.push_back({kForward, warmup + i});
    order.push_back({kBackward, i});
  }
  for (int64_t k = M - warmup; k < M; ++k)
    order.push_back({kBackward, k});
  return order;
}

/// ZB-H1 orders of every stage, by list-scheduling with costs tF/tB/tW.
std::vector<SmallVector<Item>> zeroBubble(int64_t P, int64_t M, ArrayRef<double> tF,
                                          ArrayRef<double> tB, ArrayRef<double> tW) {
  std::vector<SmallVector<Item>> order(P);
  std::vector<std::vector<double>> doneF(P, std::vector<double>(M, -1)),
      doneB(P, std::vector<double>(M, -1));
  std::vector<int64_t> nextF(P, 0), nextB(P, 0), nextW(P, 0);
  std::vector<double> busy(P, 0);
  auto finished = [&](int64_t s) { return nextW[s] == M; };
  // Global time T: every stage free at T acts by priority; when none can,
  // T moves to the next completion.
  double T = 0;
  for (int64_t guard = 0; guard < 16 * P * M + 64; ++guard) {
    bool acted = false, left = false;
    for (int64_t s = 0; s < P; ++s) {
      if (finished(s))
        continue;
      left = true;
      if (busy[s] > T)
        continue;
      auto known = [&](double d) { return d >= 0 && d <= T; };
      bool canB = nextB[s] < nextF[s] && known(doneF[s][nextB[s]]) &&
                  (s + 1 == P || known(doneB[s + 1][nextB[s]]));
      bool canF = nextF[s] < M && nextF[s] - nextB[s] < P - s &&
                  (s == 0 || known(doneF[s - 1][nextF[s]]));
      bool canW = nextW[s] < nextB[s];
      bool mustW = canW && nextB[s] - nextW[s] > P - 1 - s;
      Phase pick = mustW  ? kWeight
                   : canB ? kBackward
                   : canF ? kForward
                   : canW ? kWeight
                          : kNone;
      if (pick == kNone)
        continue;
      acted = true;
      if (pick == kForward) {
        int64_t k = nextF[s]++;
        busy[s] = doneF[s][k] = T + tF[s];
        order[s].push_back({kForward, k});
      } else if (pick == kBackward) {
        int64_t k = nextB[s]++;
        busy[s] = doneB[s][k] = T + tB[s];
        order[s].push_back({kBackward, k});
      } else {
        int64_t k = nextW[s]++;
        busy[s] = T + tW[s];
        order[s].push_back({kWeight, k});
      }
    }
    if (!left)
      break;
    if (acted)
      continue;
    double next = std::numeric_limits<double>::infinity();
    for (int64_t q = 0; q < P; ++q)
      if (!finished(q) && busy[q] > T)
        next = std::min(next, busy[q]);
    if (!std::isfinite(next))
      return {}; // no stage can ever act: cannot happen for a valid pipeline
    T = next;
  }
  for (int64_t s = 0; s < P; ++s)
    if (!finished(s))
      return {};
  return order;
}

/// Replays per-stage orders with op costs; the predicted bubble fraction:
/// 1 - (busy time of all stages) / (P * makespan).
double predictedBubble(const std::vector<SmallVector<Item>> &orders, int64_t M,
                       ArrayRef<double> tF, ArrayRef<double> tB, ArrayRef<double> tW) {
  int64_t P = orders.size();
  std::vector<std::vector<double>> doneF(P, std::vector<double>(M, -1)),
      doneB(P, std::vector<double>(M, -1));
  std::vector<size_t> next(P, 0);
  std::vector<double> clock(P, 0);
  double busy = 0;
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < P; ++s)
      while (next[s] < orders[s].size()) {
        Item it = orders[s][next[s]];
        double ready = clock[s];
        if (it.phase == kForward && s > 0) {
          if (doneF[s - 1][it.micro] < 0)
            break;
          ready = std::max(ready, doneF[s - 1][it.micro]);
        }
        if (it.phase == kBackward && s + 1 < P) {
          if (doneB[s + 1][it.micro] < 0)
            break;
          ready = std::max(ready, doneB[s + 1][it.micro]);
        }
        double t = it.phase == kForward ? tF[s] : it.phase == kBackward ? tB[s] : tW[s];
        clock[s] = ready + t;
        busy += t;
        (it.phase == kForward ? doneF : doneB)[s][it.micro] =
            it.phase == kWeight ? doneB[s][it.micro] : clock[s];
        ++next[s];
        progress = true;
      }
  }
  double makespan = 0;
  for (double c : clock)
    makespan = std::max(makespan, c);
  return makespan > 0 ? 1.0 - busy / (P * makespan) : 0.0;
}

/// The parts of one stage's single-micro-batch step.
struct StageStep {
  func::FuncOp fn;
  int64_t stage = 0;
  SmallVector<Operation *> forward, backward, weight;
  SmallVector<BlockArgument> inputs;
  double costF = 0, costB = 0, costW = 0;
};

double costOf(ArrayRef<Operation *> ops) {
  double c = 0;
  for (Operation *op : ops)
    c += distutil::opCost(op);
  return c;
}

struct PipelineSchedule : impl::PipelineScheduleBase<PipelineSchedule> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto ppAttr = module->getAttrOfType<IntegerAttr>(distutil::kPp);
    if (!ppAttr) {
      module.emitError("pipeline-schedule: no dist.pp on the module (run pipeline-split first)");
      return signalPassFailure();
    }
    int64_t P = ppAttr.getInt(), M = microBatches;
    if (M < P) {
      module.emitError("pipeline-schedule: ")
          << pipelineScheduleName(schedule) << " needs at least as many micro-batches as stages, got M = " << M
          << " < P = " << P
          << " (raise gradient_accumulation_steps / --micro-batches, or use fewer stages)";
      return signalPassFailure();
    }
    std::vector<StageStep> steps(P);
    SmallVector<bool> seen(P, false);
    for (auto fn : module.getOps<func::FuncOp>()) {
      auto s = fn->getAttrOfType<IntegerAttr>(distutil::kStage);
      if (!s)
        continue;
      if (s.getInt() < 0 || s.getInt() >= P || seen[s.getInt()]) {
        fn.emitError("pipeline-schedule: stage ") << s.getInt() << " is out of range or repeated";
        return signalPassFailure();
      }
      seen[s.getInt()] = true;
      steps[s.getInt()].fn = fn;
      steps[s.getInt()].stage = s.getInt();
    }
    for (int64_t s = 0; s < P; ++s)
      if (!seen[s]) {
        module.emitError("pipeline-schedule: no function for stage ") << s;
        return signalPassFailure();
      }
    if (failed(checkPairs(steps)))
      return signalPassFailure();
    for (StageStep &st : steps)
      if (failed(classify(st)))
        return signalPassFailure();

    std::vector<SmallVector<Item>> orders(P);
    SmallVector<double> tF, tB, tW;
    for (StageStep &st : steps) {
      tF.push_back(std::max(1.0, st.costF));
      tB.push_back(std::max(1.0, st.costB));
      tW.push_back(schedule == PipelineScheduleKind::ZBH1 ? std::max(1.0, st.costW) : 0.0);
    }
    if (schedule == PipelineScheduleKind::OneFOneB) {
      for (int64_t s = 0; s < P; ++s)
        orders[s] = oneFOneB(s, P, M);
    } else {
      orders = zeroBubble(P, M, tF, tB, tW);
      if (orders.empty()) {
        module.emitError("pipeline-schedule: no zb-h1 order found");
        return signalPassFailure();
      }
    }

    // Tied parameters: the stages holding each name, and a tag per name
    // above every tag in use.
    std::map<std::string, SmallVector<int64_t>> holders;
    int64_t maxTag = -1;
    for (StageStep &st : steps) {
      for (BlockArgument a : st.fn.getArguments())
        if (auto name = st.fn.getArgAttrOfType<StringAttr>(a.getArgNumber(), TrainDialect::kParam))
          holders[name.str()].push_back(st.stage);
      st.fn.walk([&](dist::SendOp op) { maxTag = std::max<int64_t>(maxTag, op.getTag()); });
    }
    int64_t nextTag = (maxTag + 2) / 2 * 2;
    std::map<std::string, int64_t> tiedTag;
    for (auto &[name, list] : holders)
      if (list.size() > 1) {
        tiedTag[name] = nextTag;
        nextTag += 2;
      }

    for (StageStep &st : steps)
      if (failed(buildTemplate(st, orders[st.stage], M, P, holders, tiedTag)))
        return signalPassFailure();
    OpBuilder b(module.getContext());
    module->setAttr("dist.bubble", b.getF64FloatAttr(predictedBubble(orders, M, tF, tB, tW)));
    module->setAttr(distutil::kMicroBatches, b.getI64IntegerAttr(M));
    module->setAttr("dist.schedule", b.getStringAttr(pipelineScheduleName(schedule)));
  }

  /// Every send has a recv of the same type and tag on the peer, and back.
  LogicalResult checkPairs(std::vector<StageStep> &steps) {
    // (from, to, tag) -> types in order.
    std::map<std::tuple<int64_t, int64_t, int64_t>, SmallVector<std::pair<Type, Operation *>>>
        sends, recvs;
    for (StageStep &st : steps) {
      st.fn.walk([&](Operation *op) {
        if (auto s = dyn_cast<dist::SendOp>(op))
          sends[{st.stage, st.stage + s.getPeer(), s.getTag()}].push_back(
              {s.getInput().getType(), op});
        if (auto r = dyn_cast<dist::RecvOp>(op))
          recvs[{st.stage + r.getPeer(), st.stage, r.getTag()}].push_back({r.getType(), op});
      });
    }
    for (auto &[key, list] : sends) {
      auto [from, to, tag] = key;
      auto &other = recvs[key];
      for (size_t i = 0; i < list.size(); ++i) {
        if (i >= other.size())
          return list[i].second->emitOpError("pipeline-schedule: send to stage ")
                 << to << " (tag " << tag << ") has no matching dist.recv there";
        if (list[i].first != other[i].first)
          return list[i].second->emitOpError("pipeline-schedule: sends ")
                 << list[i].first << " to stage " << to << " (tag " << tag
                 << "), which receives " << other[i].first;
      }
    }
    for (auto &[key, list] : recvs) {
      auto [from, to, tag] = key;
      if (list.size() > sends[key].size())
        return list[sends[key].size()].second->emitOpError("pipeline-schedule: recv from stage ")
               << from << " (tag " << tag << ") has no matching dist.send there";
    }
    return success();
  }

  /// Splits the step into forward, input-gradient and weight-gradient ops.
  LogicalResult classify(StageStep &st) {
    func::FuncOp fn = st.fn;
    Block &body = fn.getBody().front();
    if (!body.getOps<train::AccumulateOp>().empty())
      return fn.emitError("pipeline-schedule: the step is already accumulated (run "
                          "pipeline-schedule instead of gradient-accumulation)");
    bool grads = false;
    for (unsigned i = 0; i < fn.getNumResults(); ++i)
      grads |= static_cast<bool>(fn.getResultAttr(i, TrainDialect::kGrad));
    if (!grads || !fn.getResultAttr(0, TrainDialect::kLoss))
      return fn.emitError("pipeline-schedule: run autodiff first (the stage returns no "
                          "gradients)");
    for (BlockArgument a : fn.getArguments())
      if (fn.getArgAttr(a.getArgNumber(), TrainDialect::kInput))
        st.inputs.push_back(a);
    SmallVector<Operation *> backward;
    for (Operation &op : body.without_terminator())
      (op.hasAttr(TrainDialect::kBackward) ? backward : st.forward).push_back(&op);
    // B: what the backward sends need (and the receives); W: the rest.
    llvm::DenseSet<Operation *> needed;
    SmallVector<Operation *> work;
    for (Operation *op : backward)
      if (isa<dist::SendOp, dist::RecvOp, dist::WaitOp>(op))
        work.push_back(op);
    llvm::DenseSet<Operation *> inBackward(backward.begin(), backward.end());
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      if (!needed.insert(op).second)
        continue;
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp(); def && inBackward.contains(def))
          work.push_back(def);
      // A send's wait comes with it.
      for (Operation *user : op->getUsers())
        if (isa<dist::WaitOp>(user) && inBackward.contains(user))
          work.push_back(user);
    }
    for (Operation *op : backward)
      (schedule == PipelineScheduleKind::ZBH1 && !needed.contains(op) ? st.weight : st.backward).push_back(op);
    st.costF = costOf(st.forward);
    st.costB = costOf(st.backward);
    st.costW = costOf(st.weight);
    return success();
  }

  /// Moves the stage's single micro-batch into a train.pipeline op with
  /// its schedule; the sums it returns are then combined over tied
  /// holders and scaled by 1/M outside it.
  LogicalResult buildTemplate(StageStep &st, ArrayRef<Item> order, int64_t M, int64_t P,
                              const std::map<std::string, SmallVector<int64_t>> &holders,
                              const std::map<std::string, int64_t> &tiedTag) {
    func::FuncOp fn = st.fn;
    MLIRContext *ctx = fn.getContext();
    Block &body = fn.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    OpBuilder b(ret);
    Location loc = fn.getLoc();
    bool last = st.stage + 1 == P;
    IRMapping map;
    SmallVector<Attribute> names;
    SmallVector<Type> inputTypes;
    for (BlockArgument a : st.inputs) {
      names.push_back(fn.getArgAttr(a.getArgNumber(), TrainDialect::kInput));
      inputTypes.push_back(a.getType());
    }
    // A parameter's low-precision copy (mixed-precision) is the same in
    // every micro-batch: made once per step, before them, as
    // gradient-accumulation does (cloned with each micro-batch, the P - s
    // in flight on stage s each held a copy of the stage's weights).
    auto isWeight = [&](Value v) {
      auto arg = dyn_cast<BlockArgument>(v);
      return arg && arg.getOwner() == &body &&
             (fn.getArgAttr(arg.getArgNumber(), TrainDialect::kParam) ||
              fn.getArgAttr(arg.getArgNumber(), TrainDialect::kBuffer));
    };
    SmallVector<Operation *> hoisted, perMicro;
    for (Operation *op : st.forward) {
      auto c = dyn_cast<nn::CastOp>(op);
      if (!c || !isWeight(c.getInput())) {
        perMicro.push_back(op);
        continue;
      }
      map.map(c.getResult(), b.clone(*op)->getResult(0));
      hoisted.push_back(op);
    }
    st.forward = std::move(perMicro);

    // What is summed: the last stage's loss after each forward, the
    // gradients after the backward part that ends a micro-batch.
    unsigned n = ret.getNumOperands();
    unsigned first = last ? 0 : 1;
    Phase gradPhase = schedule == PipelineScheduleKind::ZBH1 ? kWeight : kBackward;
    SmallVector<Type> sumTypes;
    SmallVector<int64_t> sumPhases;
    for (unsigned i = first; i < n; ++i) {
      sumTypes.push_back(ret.getOperand(i).getType());
      sumPhases.push_back(i == 0 ? kForward : gradPhase);
    }
    SmallVector<int64_t> items;
    for (const Item &item : order) {
      items.push_back(item.phase);
      items.push_back(item.micro);
    }
    auto pipe = train::PipelineOp::create(b, loc, sumTypes, M, b.getDenseI64ArrayAttr(items),
                                          b.getDenseI64ArrayAttr(sumPhases));
    {
      OpBuilder::InsertionGuard guard(b);
      Block *inner = b.createBlock(&pipe.getBody(), {}, {b.getIndexType()}, {loc});
      auto mark = [&](Operation *op, Phase phase) {
        op->setAttr(TrainDialect::kPhase, b.getI64IntegerAttr(phase));
      };
      auto load = train::LoadBatchOp::create(b, loc, inputTypes, IntegerAttr(),
                                             inner->getArgument(0), b.getArrayAttr(names));
      mark(load, kForward);
      for (auto [a, v] : llvm::zip(st.inputs, load.getResults()))
        map.map(a, v);
      for (auto [ops, phase] : {std::pair{&st.forward, kForward}, {&st.backward, kBackward},
                                {&st.weight, kWeight}})
        for (Operation *op : *ops) {
          Operation *c = b.clone(*op, map);
          c->removeAttr(TrainDialect::kBackward);
          mark(c, phase);
        }
      SmallVector<Value> yielded;
      for (unsigned i = first; i < n; ++i)
        yielded.push_back(map.lookupOrDefault(ret.getOperand(i)));
      train::YieldOp::create(b, loc, yielded);
    }
    SmallVector<Value> sums(n);
    for (unsigned i = first; i < n; ++i)
      sums[i] = pipe.getResult(i - first);

    // Stages before the last have no loss: they return zero.
    if (!last) {
      auto type = cast<RankedTensorType>(ret.getOperand(0).getType());
      sums[0] = arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), 0.0)));
    }

    // Tied parameters: every holder adds all holders' sums in stage order.
    auto group = dist::GroupAttr::get(ctx, dist::Axis::pp, P);
    for (unsigned i = 1; i < n; ++i) {
      auto name = fn.getResultAttrOfType<StringAttr>(i, TrainDialect::kGrad);
      auto it = tiedTag.find(name.str());
      if (it == tiedTag.end())
        continue;
      const SmallVector<int64_t> &list = holders.at(name.str());
      SmallVector<Value> parts;
      for (int64_t h : list)
        if (h != st.stage) {
          auto send = dist::SendOp::create(b, loc, sums[i], group, h - st.stage, it->second);
          dist::WaitOp::create(b, loc, send->getResults());
        }
      for (int64_t h : list) {
        if (h == st.stage) {
          parts.push_back(sums[i]);
          continue;
        }
        auto recv = dist::RecvOp::create(b, loc, sums[i].getType(), group, h - st.stage,
                                         it->second);
        parts.push_back(dist::WaitOp::create(b, loc, recv->getResults()).getResult(0));
      }
      Value total = parts[0];
      for (Value p : llvm::drop_begin(parts))
        total = nn::AddOp::create(b, loc, total, p);
      sums[i] = total;
    }
    if (M > 1)
      for (unsigned i = last ? 0 : 1; i < n; ++i) {
        auto type = cast<RankedTensorType>(sums[i].getType());
        auto scalarType = RankedTensorType::get({}, type.getElementType());
        Value inv = arith::ConstantOp::create(
            b, loc,
            DenseElementsAttr::get(scalarType, b.getFloatAttr(type.getElementType(), 1.0 / M)));
        sums[i] = nn::MulOp::create(b, loc, sums[i], inv);
      }
    ret->setOperands(sums);

    // The single-micro-batch ops go; then the input arguments.
    SmallVector<Operation *> old(hoisted);
    llvm::append_range(old, st.forward);
    llvm::append_range(old, st.backward);
    llvm::append_range(old, st.weight);
    for (Operation *op : llvm::reverse(old)) {
      op->dropAllUses();
      op->erase();
    }
    llvm::BitVector erase(fn.getNumArguments());
    for (BlockArgument a : st.inputs)
      erase.set(a.getArgNumber());
    if (failed(fn.eraseArguments(erase)))
      return failure();
    // The tied sums' sends complete at the end of the step.
    return distutil::deferSendWaits(llvm::to_vector(body.getOps<dist::SendOp>()), ret);
  }
};
} // namespace
} // namespace dsc
