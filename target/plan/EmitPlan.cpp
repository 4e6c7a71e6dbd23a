//===- EmitPlan.cpp - the planned step as a dsrt plan directory ----------===//
//
// Reads a step after memory-plan and writes:
//   plan.pb              the program (plan/plan.proto): buffers at
//                        arena offsets and the instruction lists;
//   weights.safetensors  the initial parameters and frozen buffers, by name;
//   model.onnx           the source model without those initializers' data,
//                        which dsrt --export-onnx fills with trained ones;
//   manifest.txt         what a person wants to know before running it;
//   plan.sha256          the SHA-256 of plan.pb and weights.safetensors, which
//                        dsrt checks (`sha256sum -c plan.sha256` too).
// Instruction attributes are encoded per op as documented in
// runtime/core/Ops.cpp, the runtime's table of ops; both sides check arity.
//
//===----------------------------------------------------------------------===//
#include "target/plan/EmitPlan.h"

#include "dialects/dist/DistDialect.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/nn/SourceNode.h"
#include "passes/DistUtils.h"
#include "target/plan/PlanManifest.h"
#include "target/plan/PlanRecords.h"
#include "plan/PipelineItems.h"
#include "dialects/train/TrainDialect.h"
#include "config/DsConfig.h"
#include "config/PlanSettings.h"
#include "io/FileUtil.h"
#include "io/SafeTensors.h"
#include "plan/Instructions.h"
#include "plan/Version.h"

#include "plan.pb.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <optional>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"


using namespace mlir;

namespace dsc {
namespace {
using train::TrainDialect;

int64_t normalize(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

plan::DType dtypeOf(Type t) {
  Type e = cast<RankedTensorType>(t).getElementType();
  if (e.isF32())
    return plan::F32;
  if (e.isF64())
    return plan::F64;
  if (e.isBF16())
    return plan::BF16;
  if (e.isF16())
    return plan::F16;
  if (e.isInteger(64))
    return plan::I64;
  if (e.isInteger(32))
    return plan::I32;
  if (e.isInteger(1))
    return plan::BOOL;
  if (e.isInteger(8))
    return plan::U8;
  return plan::DTYPE_UNSPECIFIED;
}

/// The plan instruction of `op` (plan/Instructions.h), chosen by
/// its class, so that renaming an op in a dialect changes no plan; null for
/// an op dsrt has no kernel for.
const char *instructionOf(Operation *op) {
  return llvm::TypeSwitch<Operation *, const char *>(op)
      .Case<dist::AllGatherOp>([](Operation *) { return "dist.all_gather"; })
      .Case<dist::AllToAllOp>([](Operation *) { return "dist.all_to_all"; })
      .Case<dist::AllReduceOp>([](Operation *) { return "dist.all_reduce"; })
      .Case<dist::ChunkOp>([](Operation *) { return "dist.chunk"; })
      .Case<dist::RecvOp>([](Operation *) { return "dist.recv"; })
      .Case<dist::ReduceScatterOp>([](Operation *) { return "dist.reduce_scatter"; })
      .Case<dist::SendOp>([](Operation *) { return "dist.send"; })
      .Case<dist::WaitOp>([](Operation *) { return "dist.wait"; })
      .Case<nn::AbsOp>([](Operation *) { return "nn.abs"; })
      .Case<nn::AddOp>([](Operation *) { return "nn.add"; })
      .Case<nn::AttentionOp>([](Operation *) { return "nn.attention"; })
      .Case<nn::AttentionGradOp>([](Operation *) { return "nn.attention_grad"; })
      .Case<nn::BroadcastOp>([](Operation *) { return "nn.broadcast"; })
      .Case<nn::CastOp>([](Operation *) { return "nn.cast"; })
      .Case<nn::CmpOp>([](Operation *) { return "nn.cmp"; })
      .Case<nn::ConcatOp>([](Operation *) { return "nn.concat"; })
      .Case<nn::CrossEntropyOp>([](Operation *) { return "nn.cross_entropy"; })
      .Case<nn::CrossEntropyGradOp>([](Operation *) { return "nn.cross_entropy_grad"; })
      .Case<nn::DivOp>([](Operation *) { return "nn.div"; })
      .Case<nn::DropoutOp>([](Operation *) { return "nn.dropout"; })
      .Case<nn::DropoutGradOp>([](Operation *) { return "nn.dropout_grad"; })
      .Case<nn::ErfOp>([](Operation *) { return "nn.erf"; })
      .Case<nn::ExpOp>([](Operation *) { return "nn.exp"; })
      .Case<nn::GatherOp>([](Operation *) { return "nn.gather"; })
      .Case<nn::GatherGradOp>([](Operation *) { return "nn.gather_grad"; })
      .Case<nn::GeluOp>([](Operation *) { return "nn.gelu"; })
      .Case<nn::GeluGradOp>([](Operation *) { return "nn.gelu_grad"; })
      .Case<nn::GeluWithDerivativeOp>([](Operation *) { return "nn.gelu_with_derivative"; })
      .Case<nn::LayerNormOp>([](Operation *) { return "nn.layer_norm"; })
      .Case<nn::LayerNormGradOp>([](Operation *) { return "nn.layer_norm_grad"; })
      .Case<nn::LogOp>([](Operation *) { return "nn.log"; })
      .Case<nn::LogSoftmaxOp>([](Operation *) { return "nn.log_softmax"; })
      .Case<nn::LogSoftmaxGradOp>([](Operation *) { return "nn.log_softmax_grad"; })
      .Case<nn::MatmulOp>([](Operation *) { return "nn.matmul"; })
      .Case<nn::MatmulEpilogueOp>([](Operation *) { return "nn.matmul_epilogue"; })
      .Case<nn::ArgMaxOp>([](Operation *) { return "nn.argmax"; })
      .Case<nn::ConvOp>([](Operation *) { return "nn.conv"; })
      .Case<nn::ConvInputGradOp>([](Operation *) { return "nn.conv_input_grad"; })
      .Case<nn::ConvWeightGradOp>([](Operation *) { return "nn.conv_weight_grad"; })
      .Case<nn::MaxPoolOp>([](Operation *) { return "nn.max_pool"; })
      .Case<nn::MaxPoolGradOp>([](Operation *) { return "nn.max_pool_grad"; })
      .Case<nn::AvgPoolOp>([](Operation *) { return "nn.avg_pool"; })
      .Case<nn::AvgPoolGradOp>([](Operation *) { return "nn.avg_pool_grad"; })
      .Case<nn::MaxOp>([](Operation *) { return "nn.max"; })
      .Case<nn::MinOp>([](Operation *) { return "nn.min"; })
      .Case<nn::MulOp>([](Operation *) { return "nn.mul"; })
      .Case<nn::NegOp>([](Operation *) { return "nn.neg"; })
      .Case<nn::NotOp>([](Operation *) { return "nn.not"; })
      .Case<nn::NllLossOp>([](Operation *) { return "nn.nll_loss"; })
      .Case<nn::NllLossGradOp>([](Operation *) { return "nn.nll_loss_grad"; })
      .Case<nn::PowOp>([](Operation *) { return "nn.pow"; })
      .Case<nn::ReciprocalOp>([](Operation *) { return "nn.reciprocal"; })
      .Case<nn::ReduceMaxOp>([](Operation *) { return "nn.reduce_max"; })
      .Case<nn::ReduceMeanOp>([](Operation *) { return "nn.reduce_mean"; })
      .Case<nn::ReduceSumOp>([](Operation *) { return "nn.reduce_sum"; })
      .Case<nn::ReluOp>([](Operation *) { return "nn.relu"; })
      .Case<nn::RsqrtOp>([](Operation *) { return "nn.rsqrt"; })
      .Case<nn::SelectOp>([](Operation *) { return "nn.select"; })
      .Case<nn::SigmoidOp>([](Operation *) { return "nn.sigmoid"; })
      .Case<nn::SliceOp>([](Operation *) { return "nn.slice"; })
      .Case<nn::SliceGradOp>([](Operation *) { return "nn.slice_grad"; })
      .Case<nn::SoftmaxOp>([](Operation *) { return "nn.softmax"; })
      .Case<nn::SoftmaxGradOp>([](Operation *) { return "nn.softmax_grad"; })
      .Case<nn::SqrtOp>([](Operation *) { return "nn.sqrt"; })
      .Case<nn::SubOp>([](Operation *) { return "nn.sub"; })
      .Case<nn::TanhOp>([](Operation *) { return "nn.tanh"; })
      .Case<nn::SinOp>([](Operation *) { return "nn.sin"; })
      .Case<nn::CosOp>([](Operation *) { return "nn.cos"; })
      .Case<nn::TransposeOp>([](Operation *) { return "nn.transpose"; })
      .Case<nn::VocabCeLossOp>([](Operation *) { return "nn.vocab_ce_loss"; })
      .Case<nn::VocabCeLossGradOp>([](Operation *) { return "nn.vocab_ce_loss_grad"; })
      .Case<nn::VocabCeSumsOp>([](Operation *) { return "nn.vocab_ce_sums"; })
      .Case<nn::VocabCeSumsGradOp>([](Operation *) { return "nn.vocab_ce_sums_grad"; })
      .Case<train::AdamOp>([](Operation *) { return "train.adam"; })
      .Case<train::FusedAdamOp>([](Operation *) { return "train.fused_adam"; })
      .Case<train::ClipCoefOp>([](Operation *) { return "train.clip_coef"; })
      .Case<train::AdagradOp>([](Operation *) { return "train.adagrad"; })
      .Case<train::LambOp>([](Operation *) { return "train.lamb"; })
      .Case<train::LambStatsOp>([](Operation *) { return "train.lamb_stats"; })
      .Case<train::FusedLambOp>([](Operation *) { return "train.fused_lamb"; })
      .Case<train::FusedLambStatsOp>([](Operation *) { return "train.fused_lamb_stats"; })
      .Case<train::LionOp>([](Operation *) { return "train.lion"; })
      .Case<train::ClipGradNormOp>([](Operation *) { return "train.clip_grad_norm"; })
      .Case<train::LrScheduleOp>([](Operation *) { return "train.lr_schedule"; })
      .Case<train::OneBitCompressOp>([](Operation *) { return "train.onebit_compress"; })
      .Case<train::OneBitServerOp>([](Operation *) { return "train.onebit_server"; })
      .Case<train::OneBitExpandOp>([](Operation *) { return "train.onebit_expand"; })
      .Case<train::OneBitAdamOp>([](Operation *) { return "train.onebit_adam"; })
      .Case<train::ZeroOneAdamOp>([](Operation *) { return "train.zero_one_adam"; })
      .Case<train::OneBitLambOp>([](Operation *) { return "train.onebit_lamb"; })
      .Case<train::OneBitLambScalingOp>([](Operation *) { return "train.onebit_lamb_scaling"; })
      .Case<train::OneBitLambStatsOp>([](Operation *) { return "train.onebit_lamb_stats"; })
      .Case<train::ZeroOneAdamPayloadOp>([](Operation *) { return "train.zero_one_payload"; })
      .Case<train::ResetAtOp>([](Operation *) { return "train.reset_at"; })
      .Case<train::SgdOp>([](Operation *) { return "train.sgd"; })
      .Case<train::SumSqOp>([](Operation *) { return "train.sum_sq"; })
      .Case<train::TierFetchOp>([](Operation *) { return "tier.fetch"; })
      .Case<train::TierStoreOp>([](Operation *) { return "tier.store"; })
      .Default([](Operation *) { return nullptr; });
}

class Emitter {
public:
  Emitter(func::FuncOp fn, plan::Plan &p, int64_t dp) : fn_(fn), plan_(p), dp_(dp) {}

  LogicalResult run() {
    auto arena = fn_->getAttrOfType<IntegerAttr>(TrainDialect::kArenaBytes);
    auto persistent = fn_->getAttrOfType<IntegerAttr>(TrainDialect::kPersistentBytes);
    if (!arena || !persistent)
      return fn_.emitError("emit-plan: run memory-plan first (no train.arena_bytes)");
    plan_.set_arena_bytes(arena.getInt());
    if (auto tier = fn_->getAttrOfType<IntegerAttr>(TrainDialect::kHostTierBytes))
      plan_.set_host_tier_bytes(uint64_t(tier.getInt()));
    if (auto tier = fn_->getAttrOfType<IntegerAttr>(TrainDialect::kNvmeTierBytes)) {
      plan::NvmeTier *nvme = plan_.mutable_nvme_tier();
      nvme->set_bytes(uint64_t(tier.getInt()));
      // The parameters' own file (param_path set from the config): where
      // it begins; all of the tier when this function tiered no parameter.
      if (!nvme->param_path().empty()) {
        auto at = fn_->getAttrOfType<IntegerAttr>(TrainDialect::kNvmeParamOffset);
        nvme->set_param_offset(uint64_t(at ? at.getInt() : tier.getInt()));
      }
    }
    plan_.set_persistent_bytes(persistent.getInt());
    if (auto peak = fn_->getAttrOfType<IntegerAttr>(TrainDialect::kPeakLiveBytes))
      plan_.set_peak_live_bytes(uint64_t(peak.getInt()));
    // Activation checkpointing: what the recompute pass did (module
    // train.recompute, per function its ops and flops) and the arena the
    // same step needs without it (dsc compiles it once more to know).
    if (auto rc = fn_->getParentOfType<ModuleOp>()->getAttrOfType<DictionaryAttr>(
            "train.recompute")) {
      if (auto mode = rc.getAs<StringAttr>("mode"))
        plan_.set_recompute(mode.getValue().str());
      if (auto ops = fn_->getAttrOfType<IntegerAttr>("train.recomputed_ops"))
        plan_.set_recomputed_ops(ops.getInt());
      if (auto flops = fn_->getAttrOfType<FloatAttr>("train.recomputed_flops"))
        plan_.set_recomputed_flops(flops.getValueAsDouble());
    }
    if (auto without = fn_->getAttrOfType<IntegerAttr>(TrainDialect::kArenaBytesWithoutRecompute))
      plan_.set_arena_bytes_without_recompute(uint64_t(without.getInt()));
    if (auto unfused = fn_->getAttrOfType<IntegerAttr>(TrainDialect::kArenaBytesWithoutFusion))
      plan_.set_arena_bytes_without_fusion(uint64_t(unfused.getInt()));
    {
      // The model's fused ops: recomputed clones are not more.
      int64_t attention = 0, bshd = 0, biases = 0, addends = 0, scales = 0, sums = 0;
      fn_.walk([&](Operation *op) {
        if (op->hasAttr(TrainDialect::kRecomputed))
          return;
        attention += isa<nn::AttentionOp>(op);
        if (auto at = dyn_cast<nn::AttentionOp>(op))
          bshd += at.getBshd();
        if (auto e = dyn_cast<nn::MatmulEpilogueOp>(op))
          biases += e.getBias() != nullptr, addends += e.getAddend() != nullptr,
          scales += e.getScale() != nullptr, sums += e.getColumnSum() != nullptr;
        auto countFused = [&](auto f) {
          plan_.set_fused_updates(plan_.fused_updates() + 1);
          plan_.set_fused_update_tensors(plan_.fused_update_tensors() +
                                         int64_t(f.getParams().size()));
          for (Value g : f.getGrads())
            plan_.set_fused_update_narrow_grads(
                plan_.fused_update_narrow_grads() +
                !cast<RankedTensorType>(g.getType()).getElementType().isF32());
        };
        if (auto f = dyn_cast<train::FusedAdamOp>(op))
          countFused(f);
        if (auto f = dyn_cast<train::FusedLambOp>(op)) {
          countFused(f);
          plan_.set_fused_lamb_updates(plan_.fused_lamb_updates() + 1);
        }
        plan_.set_fused_clips(plan_.fused_clips() + isa<train::ClipCoefOp>(op));
      });
      plan_.set_fused_attention(attention);
      plan_.set_attention_bshd(bshd);
      plan_.set_epilogue_biases(biases);
      plan_.set_epilogue_addends(addends);
      plan_.set_epilogue_scales(scales);
      plan_.set_epilogue_column_sums(sums);
    }

    for (BlockArgument a : fn_.getArguments())
      if (failed(addArgument(a)))
        return failure();
    sliceEval();
    plan::Program *prog = plan_.mutable_program();
    auto *current = prog->mutable_micro_batch();
    bool sawAccumulate = false, sawPipeline = false;
    for (Operation &op : fn_.getBody().front()) {
      if (auto acc = dyn_cast<train::AccumulateOp>(op)) {
        if (sawAccumulate)
          return acc.emitOpError("emit-plan: one accumulate region per step");
        sawAccumulate = true;
        // Everything before it is the prologue.
        prog->mutable_prologue()->Swap(prog->mutable_micro_batch());
        prog->set_micro_batches(acc.getCount());
        // Each yielded value is added to its sum right after its sum point
        // (as memory-plan planned it), or is its sum (one micro-batch).
        Operation *yield = acc.getBody().front().getTerminator();
        llvm::DenseMap<Operation *, SmallVector<unsigned>> addAfter;
        for (auto [i, sum] : llvm::enumerate(acc.getResults())) {
          if (acc.isSumInPlace(i)) {
            if (failed(gradientBuffer(sum, *prog)))
              return failure();
            continue;
          }
          if (failed(fillSum(sum, i, *prog)))
            return failure();
          addAfter[acc.getSumPoint(i)].push_back(i); // null: at the yield
        }
        auto addSums = [&](Operation *point) -> LogicalResult {
          for (unsigned i : addAfter.lookup(point))
            if (failed(accumulateInto(acc, i, *prog->mutable_micro_batch())))
              return failure();
          return success();
        };
        for (Operation &inner : acc.getBody().front()) {
          if (&inner == yield) {
            if (failed(addSums(nullptr)))
              return failure();
            continue;
          }
          if (failed(emitMarked(&inner, *prog->mutable_micro_batch())) ||
              failed(addSums(&inner)))
            return failure();
        }
        current = prog->mutable_epilogue();
        continue;
      }
      if (auto pipe = dyn_cast<train::PipelineOp>(op)) {
        if (sawAccumulate || sawPipeline)
          return pipe.emitOpError("emit-plan: one accumulate or pipeline region per step");
        sawPipeline = true;
        if (failed(emitPipeline(pipe, *prog)))
          return failure();
        current = prog->mutable_epilogue();
        continue;
      }
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        if (failed(checkResults(ret)))
          return failure();
        continue;
      }
      if (failed(emitMarked(&op, *current)))
        return failure();
    }
    if (!sawAccumulate)
      prog->set_micro_batches(1);
    // A pipeline stage without a train.pipeline op (its schedule unrolled,
    // pipeline-expand): one list, run once per step.
    if (!sawAccumulate && !sawPipeline && fn_->hasAttr(distutil::kStage))
      prog->mutable_prologue()->Swap(prog->mutable_micro_batch());
    return success();
  }

  /// A region's sum (train.accumulate, train.pipeline) among the
  /// gradient buffers (for --explain), unless a scalar (the loss).
  LogicalResult gradientBuffer(Value sum, plan::Program &prog) {
    auto index = bufferFor(sum);
    if (failed(index))
      return failure();
    if (!cast<RankedTensorType>(sum.getType()).getShape().empty())
      prog.add_gradient_buffers(*index);
    return success();
  }

  /// Sum `i` of a region, zero-filled in the prologue (before the region).
  LogicalResult fillSum(Value sum, unsigned i, plan::Program &prog) {
    if (failed(gradientBuffer(sum, prog)))
      return failure();
    plan::Instr *fill = prog.add_prologue();
    fill->set_op("fill");
    fill->add_outputs(*bufferFor(sum));
    fill->add_floats(0.0);
    fill->set_eval(evalSums_.contains(i));
    return success();
  }

  /// Adds a micro-batch's yielded value `i` of `region` into its sum.
  LogicalResult accumulateInto(Operation *region, unsigned i,
                               google::protobuf::RepeatedPtrField<plan::Instr> &list) {
    Operation *yield = region->getRegion(0).front().getTerminator();
    auto in = bufferFor(yield->getOperand(i)), out = bufferFor(region->getResult(i));
    if (failed(in) || failed(out))
      return failure();
    plan::Instr *add = list.Add();
    add->set_op("accumulate");
    add->add_inputs(*in);
    add->add_outputs(*out);
    add->set_eval(evalSums_.contains(i));
    return success();
  }

  /// A pipeline stage's micro-batches (train.pipeline, plan format 13):
  /// what precedes the op is the prologue; each phase's ops are emitted
  /// once, into Program.pipeline's list of that phase, each yielded value
  /// accumulated into its sum (zero-filled in the prologue) right after its
  /// sum point; the schedule's items carry the slots memory-plan gave
  /// them. dsrt unrolls the items (plan/PipelineItems.h).
  LogicalResult emitPipeline(train::PipelineOp pipe, plan::Program &prog) {
    prog.mutable_prologue()->Swap(prog.mutable_micro_batch());
    auto stash = pipe->getAttrOfType<DenseI64ArrayAttr>(TrainDialect::kStash);
    auto itemSlots = pipe->getAttrOfType<DenseI64ArrayAttr>(TrainDialect::kItemSlots);
    if (!stash || !itemSlots)
      return pipe.emitOpError("emit-plan: the pipeline has no slots (run memory-plan)");
    Block &body = pipe.getBody().front();
    pipeBody_ = &body;
    stashBegin_ = stash[0];
    stashEnd_ = stash[0] + stash[1];
    plan::PipelineSchedule &ps = *prog.mutable_pipeline();
    ps.set_slots(uint32_t(stash[2]));
    ps.set_slot_bytes(uint64_t(stash[1]));
    ArrayRef<int64_t> items = pipe.getSchedule();
    for (size_t j = 0; j < items.size(); j += 2) {
      ps.add_items(items[j]);
      ps.add_items(items[j + 1]);
      ps.add_items(itemSlots[j / 2]);
    }
    auto listOf = [&](int64_t phase) {
      return phase == 1 ? ps.mutable_forward() : phase == 2 ? ps.mutable_backward()
                                                            : ps.mutable_weight();
    };
    llvm::DenseMap<Operation *, SmallVector<unsigned>> addAfter;
    for (auto [i, sum] : llvm::enumerate(pipe.getResults())) {
      if (failed(fillSum(sum, i, prog)))
        return failure();
      addAfter[pipe.getSumPoint(i)].push_back(i); // null: a value from outside
    }
    for (Operation &inner : body.without_terminator()) {
      auto &list = *listOf(train::PipelineOp::phaseOf(&inner));
      if (failed(emitMarked(&inner, list)))
        return failure();
      for (unsigned i : addAfter.lookup(&inner))
        if (failed(accumulateInto(pipe, i, list)))
          return failure();
    }
    // A sum of a value from outside the body: added in its sum phase.
    for (unsigned i : addAfter.lookup(nullptr))
      if (failed(accumulateInto(pipe, i, *listOf(pipe.getSumPhases()[i]))))
        return failure();
    pipeBody_ = nullptr;
    return success();
  }

  /// Parameter and frozen-buffer names (weights to read).
  const std::set<std::string> &weightNames() const { return weights_; }
  /// Parameter names (the weights dsrt trains and writes back).
  const std::set<std::string> &paramNames() const { return params_; }
  /// The buffer of a named argument (parameter, state, input).
  const plan::Buffer &named(const std::string &name) const {
    return plan_.buffers(named_.at(name));
  }

private:
  /// The evaluation program (plan format 6): the ops the step's loss
  /// depends on, found backwards from the returned loss through operands
  /// (an accumulate's sum through its yielded value, the loss of each
  /// micro-batch), plus a pipeline stage's forward sends (train.phase 1),
  /// whose receivers' forward reads them, and the wait of every collective
  /// taken. That is the forward and the loss with the gathers, casts and
  /// messages they read, and nothing of the backward pass, the optimizer
  /// or train.assign: run alone in program order it computes the loss of
  /// the current weights and writes no model state. Each op is a pure
  /// function of its operands, so leaving the other instructions out only
  /// leaves out writes the memory plan already kept clear of these values'
  /// lifetimes. A forward that writes model state (BatchNormalization's
  /// running statistics) evaluates differently in eval mode (with those
  /// statistics): the plan then says why it has no evaluation program.
  void sliceEval() {
    Operation *ret = fn_.getBody().front().getTerminator();
    SmallVector<Operation *> ops;
    SmallVector<Value> values;
    auto addOp = [&](Operation *op) {
      if (evalOps_.insert(op).second)
        ops.push_back(op);
    };
    for (auto [i, v] : llvm::enumerate(ret->getOperands()))
      if (fn_.getResultAttr(i, TrainDialect::kLoss))
        values.push_back(v);
    bool assigns = false;
    fn_.walk([&](Operation *op) {
      assigns |= isa<train::AssignOp>(op);
      auto phase = op->getAttrOfType<IntegerAttr>(TrainDialect::kPhase);
      if (isa<dist::SendOp>(op) && phase && phase.getInt() == 1)
        addOp(op);
    });
    if (assigns)
      plan_.set_eval_refused(
          "its forward updates model buffers in place (train.assign: BatchNormalization's "
          "running statistics), and evaluating such a model uses those statistics instead of "
          "the batch's, which the training step's forward does not compute");
    while (!ops.empty() || !values.empty()) {
      if (!values.empty()) {
        Value v = values.pop_back_val();
        auto r = dyn_cast<OpResult>(v);
        if (!r)
          continue; // an argument: model state or an input
        if (isa<train::AccumulateOp, train::PipelineOp>(r.getOwner())) {
          unsigned i = r.getResultNumber();
          if (evalSums_.insert(i).second)
            values.push_back(r.getOwner()->getRegion(0).front().getTerminator()->getOperand(i));
          continue;
        }
        addOp(r.getOwner());
        continue;
      }
      Operation *op = ops.pop_back_val();
      for (Value v : op->getOperands())
        values.push_back(v);
      for (Operation *user : op->getUsers())
        if (isa<dist::WaitOp>(user))
          addOp(user);
    }
  }

  /// emitOp, marking the instructions of an op of the evaluation slice.
  LogicalResult emitMarked(Operation *op, google::protobuf::RepeatedPtrField<plan::Instr> &list) {
    int before = list.size();
    if (failed(emitOp(op, list)))
      return failure();
    if (evalOps_.contains(op))
      for (int k = before; k < list.size(); ++k)
        list.Mutable(k)->set_eval(true);
    return success();
  }

  FailureOr<int64_t> offsetOf(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner()->getParentOp() == fn_)
        if (auto o = fn_.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), TrainDialect::kOffset))
          return o.getInt();
    } else if (auto offsets =
                   v.getDefiningOp()->getAttrOfType<DenseI64ArrayAttr>(TrainDialect::kOffsets)) {
      int64_t o = offsets[cast<OpResult>(v).getResultNumber()];
      if (o >= 0)
        return o;
    }
    emitError(v.getLoc(), "emit-plan: a value has no planned offset (run memory-plan)");
    return failure();
  }

  FailureOr<uint32_t> newBuffer(Value v, plan::Role role, StringRef name) {
    auto offset = offsetOf(v);
    if (failed(offset))
      return failure();
    plan::DType dtype = dtypeOf(v.getType());
    if (dtype == plan::DTYPE_UNSPECIFIED) {
      emitError(v.getLoc(), "emit-plan: element type ")
          << cast<RankedTensorType>(v.getType()).getElementType()
          << " has no runtime kernels";
      return failure();
    }
    plan::Buffer *b = plan_.add_buffers();
    b->set_name(name.str());
    b->set_dtype(dtype);
    for (int64_t d : cast<RankedTensorType>(v.getType()).getShape())
      b->add_shape(d);
    b->set_offset(*offset);
    b->set_role(role);
    // A pipeline body's value in the slots' block: micro-batch state.
    if (pipeBody_ && v.getParentBlock() == pipeBody_ && *offset >= stashBegin_ &&
        *offset < stashEnd_)
      b->set_slotted(true);
    uint32_t index = plan_.buffers_size() - 1;
    buffers_[v] = index;
    if (!name.empty())
      named_[name.str()] = index;
    return index;
  }

  LogicalResult addArgument(BlockArgument a) {
    if (failed(addRole(a)))
      return failure();
    auto shard = fn_.getArgAttrOfType<DenseI64ArrayAttr>(a.getArgNumber(), distutil::kShardOf);
    auto split = fn_.getArgAttrOfType<DenseI64ArrayAttr>(a.getArgNumber(), "dist.tp_split");
    plan::Buffer *b = plan_.mutable_buffers(buffers_.lookup(a));
    // full_shape is the whole logical tensor: a ZeRO shard's unsharded
    // shape, a tp part's whole shape, or (both) the whole of the tp part a
    // ZeRO chunk is cut from.
    ArrayRef<int64_t> full = shard ? shard.asArrayRef()
                                   : cast<RankedTensorType>(a.getType()).getShape();
    if (shard)
      b->set_shard_count(dp_);
    ArrayRef<int64_t> s = split ? split.asArrayRef() : ArrayRef<int64_t>(); // dim, blocks, tp
    if (split) {
      if (s.size() != 3 || s[0] < 0 || s[0] >= int64_t(full.size()))
        return emitError(a.getLoc(), "emit-plan: malformed dist.tp_split");
      for (int64_t v : s)
        b->add_tp_split(v);
    }
    if (shard || split)
      for (auto [i, d] : llvm::enumerate(full))
        b->add_full_shape(split && int64_t(i) == s[0] ? d * s[2] : d);
    return success();
  }

  /// An offloaded argument's buffer lives in its tier (the offload pass).
  void setTier(FailureOr<uint32_t> index, unsigned arg) {
    if (succeeded(index))
      if (auto tier = fn_.getArgAttrOfType<StringAttr>(arg, TrainDialect::kTier))
        plan_.mutable_buffers(*index)->set_tier(tier.getValue() == "nvme" ? plan::NVME
                                                                          : plan::HOST);
  }

  LogicalResult addRole(BlockArgument a) {
    unsigned i = a.getArgNumber();
    auto named = [&](StringRef attr) { return fn_.getArgAttrOfType<StringAttr>(i, attr); };
    FailureOr<uint32_t> index;
    if (auto n = named(TrainDialect::kParam)) {
      index = newBuffer(a, plan::PARAM, n.getValue());
      weights_.insert(n.getValue().str());
      params_.insert(n.getValue().str());
      setTier(index, i);
    } else if (auto n = named(TrainDialect::kBuffer)) {
      index = newBuffer(a, plan::FROZEN, n.getValue());
      weights_.insert(n.getValue().str());
    } else if (auto n = named(TrainDialect::kOptState)) {
      index = newBuffer(a, plan::OPT_STATE, n.getValue());
      setTier(index, i);
    } else if (auto n = named(TrainDialect::kParamCopy)) {
      index = newBuffer(a, plan::PARAM_COPY, n.getValue().str() + dsrt::kParamCopySuffix);
    } else if (auto n = named(TrainDialect::kInput)) {
      index = newBuffer(a, plan::INPUT, n.getValue());
      if (succeeded(index)) {
        auto shape = cast<RankedTensorType>(a.getType()).getShape();
        if (shape.empty())
          return fn_.emitError("emit-plan: input '")
                 << n.getValue() << "' is a scalar; inputs need a batch dimension";
        if (plan_.micro_batch_size() && plan_.micro_batch_size() != shape[0])
          return fn_.emitError("emit-plan: inputs disagree on the batch size (")
                 << plan_.micro_batch_size() << " vs " << shape[0] << " for '"
                 << n.getValue() << "')";
        plan_.set_micro_batch_size(shape[0]);
      }
    } else if (fn_.getArgAttr(i, TrainDialect::kStep)) {
      index = newBuffer(a, plan::STEP, "step");
      if (succeeded(index))
        plan_.set_step_buffer(*index);
    } else if (fn_.getArgAttr(i, TrainDialect::kLossScale)) {
      index = newBuffer(a, plan::LOSS_SCALE, "loss_scale");
    } else {
      return fn_.emitError("emit-plan: argument ") << i << " has no train.* role";
    }
    return failure(failed(index));
  }

  FailureOr<uint32_t> bufferFor(Value v) {
    if (auto it = buffers_.find(v); it != buffers_.end())
      return it->second;
    if (auto cst = v.getDefiningOp<arith::ConstantOp>()) {
      // Equal constants are one buffer (memory-plan placed them as one).
      if (auto it = constants_.find(cst.getValue()); it != constants_.end()) {
        buffers_[v] = it->second;
        return it->second;
      }
      auto index = newBuffer(v, plan::CONSTANT, "");
      if (failed(index))
        return failure();
      auto dense = dyn_cast<DenseElementsAttr>(cst.getValue());
      if (!dense)
        return cst.emitOpError("emit-plan: only dense constants are supported");
      std::string bytes;
      Type e = dense.getElementType();
      int64_t n = dense.getNumElements();
      auto append = [&](const auto &x) {
        bytes.append(reinterpret_cast<const char *>(&x), sizeof x);
      };
      if (e.isF32()) {
        for (const APFloat &x : dense.getValues<APFloat>())
          append(x.convertToFloat());
      } else if (e.isF64()) {
        for (const APFloat &x : dense.getValues<APFloat>())
          append(x.convertToDouble());
      } else if (e.isBF16() || e.isF16()) {
        // The 16 bits as the mixed-precision pass rounded them.
        for (const APFloat &x : dense.getValues<APFloat>())
          append(uint16_t(x.bitcastToAPInt().getZExtValue()));
      } else if (e.isInteger(1)) {
        bytes.reserve(size_t(n));
        for (bool x : dense.getValues<bool>())
          bytes.push_back(x ? 1 : 0);
      } else if (e.isInteger(64)) {
        for (const APInt &x : dense.getValues<APInt>())
          append(int64_t(x.getSExtValue()));
      } else if (e.isInteger(32)) {
        for (const APInt &x : dense.getValues<APInt>())
          append(int32_t(x.getSExtValue()));
      } else {
        return cst.emitOpError("emit-plan: constant of type ") << e << " is not supported";
      }
      plan_.mutable_buffers(*index)->set_data(bytes);
      constants_[cst.getValue()] = *index;
      return index;
    }
    return newBuffer(v, plan::ACTIVATION, "");
  }

  LogicalResult checkResults(func::ReturnOp ret) {
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      auto index = bufferFor(v);
      if (failed(index))
        return failure();
      if (fn_.getResultAttr(i, TrainDialect::kLoss))
        plan_.set_loss_buffer(*index);
      else if (fn_.getResultAttr(i, TrainDialect::kGradNorm))
        plan_.set_grad_norm_buffer(*index);
      else if (fn_.getResultAttr(i, TrainDialect::kLr))
        plan_.set_lr_buffer(*index);
      else if (fn_.getResultAttr(i, TrainDialect::kUpdated) ||
               fn_.getResultAttr(i, TrainDialect::kOptState) ||
               fn_.getResultAttr(i, TrainDialect::kParamCopy)) {
        // Updated state must land where the next step reads it.
        Attribute role = fn_.getResultAttr(i, TrainDialect::kUpdated);
        if (!role)
          role = fn_.getResultAttr(i, TrainDialect::kOptState);
        std::string name = cast<StringAttr>(role ? role
                                                 : fn_.getResultAttr(i, TrainDialect::kParamCopy))
                               .str();
        if (!role)
          name += dsrt::kParamCopySuffix;
        auto state = named_.find(name);
        if (state == named_.end() ||
            plan_.buffers(state->second).offset() != plan_.buffers(*index).offset())
          return ret.emitOpError("emit-plan: the update of '")
                 << name << "' is not in place";
      } else {
        return ret.emitOpError("emit-plan: result ") << i << " has no train.* role";
      }
    }
    return success();
  }

  /// The buffers of `base` and of `view`, a value over the same bytes (a
  /// reshape, a wait's result): a new view's Buffer.view_of names the
  /// base's own buffer, so that dsrt counts the bytes in use while either is.
  LogicalResult emitView(Value base, Value view) {
    auto b = bufferFor(base);
    if (failed(b))
      return failure();
    bool fresh = !buffers_.count(view);
    auto v = bufferFor(view);
    if (failed(v))
      return failure();
    if (fresh && *v != *b) {
      const plan::Buffer &root = plan_.buffers(int(*b));
      plan_.mutable_buffers(int(*v))->set_view_of(root.has_view_of() ? root.view_of() : *b);
    }
    return success();
  }

  LogicalResult emitOp(Operation *op, google::protobuf::RepeatedPtrField<plan::Instr> &list) {
    if (isa<arith::ConstantOp>(op))
      return success(); // a CONSTANT buffer, created at its first use
    if (auto reshape = dyn_cast<nn::ReshapeOp>(op)) {
      // A view: a second buffer over the same bytes.
      auto in = offsetOf(reshape.getInput()), out = offsetOf(reshape.getResult());
      if (failed(in) || failed(out))
        return failure();
      if (*in != *out)
        return op->emitOpError("emit-plan: reshape is not a view (offsets differ)");
      // The viewed bytes must be there: a constant read only through its
      // view gets its CONSTANT buffer (and so its data) here.
      return emitView(reshape.getInput(), reshape.getResult());
    }
    if (auto wait = dyn_cast<dist::WaitOp>(op)) {
      // Completes the collective; its results are views of the
      // collective's buffers.
      for (auto [in, out] : llvm::zip(wait.getInputs(), wait.getResults())) {
        auto a = offsetOf(in), b = offsetOf(out);
        if (failed(a) || failed(b))
          return failure();
        if (*a != *b)
          return op->emitOpError("emit-plan: a wait's results must share the collective's buffers");
        if (failed(emitView(in, out)))
          return failure();
      }
      auto handle = handles_.find(wait.getCollective());
      if (handle == handles_.end())
        return op->emitOpError("emit-plan: a wait before its collective");
      plan::Instr *instr = list.Add();
      instr->set_op("dist.wait");
      instr->add_ints(handle->second);
      // A wait runs on the steps its collective runs on.
      markSteps(wait.getCollective(), *instr);
      return success();
    }
    if (auto load = dyn_cast<train::LoadBatchOp>(op)) {
      // The inputs of micro-batch k, which the data loader fills.
      plan::Instr *instr = list.Add();
      instr->set_op("load_batch");
      instr->add_ints(load.getMicroAttr() ? load.getMicroAttr().getInt() : 0); // a body's: its item's
      for (auto [v, name] : llvm::zip(load.getInputs(), load.getNames())) {
        auto index = newBuffer(v, plan::INPUT, cast<StringAttr>(name).getValue());
        if (failed(index))
          return failure();
        int64_t batch = cast<RankedTensorType>(v.getType()).getShape()[0];
        if (plan_.micro_batch_size() && plan_.micro_batch_size() != batch)
          return op->emitOpError("emit-plan: inputs disagree on the batch size");
        plan_.set_micro_batch_size(batch);
        instr->add_outputs(*index);
      }
      markSchedule(op, *instr);
      return success();
    }
    if (auto assign = dyn_cast<train::AssignOp>(op)) {
      // The value in, the model buffer out (written in place).
      plan::Instr *instr = list.Add();
      instr->set_op("train.assign");
      auto in = bufferFor(assign.getValue()), out = bufferFor(assign.getBuffer());
      if (failed(in) || failed(out))
        return failure();
      instr->add_inputs(*in);
      instr->add_outputs(*out);
      markSchedule(op, *instr);
      return success();
    }
    if (isa<train::TierFetchOp, train::TierStoreOp>(op)) {
      // tier.fetch: the homes in, their working copies out; tier.store:
      // the updated copies in, the homes out. ints: the tile.
      plan::Instr *instr = list.Add();
      instr->set_op(instructionOf(op));
      bool fetch = isa<train::TierFetchOp>(op);
      auto store = dyn_cast<train::TierStoreOp>(op);
      ValueRange ins = fetch ? ValueRange(op->getOperands()) : ValueRange(store.getValues());
      ValueRange outs = fetch ? ValueRange(op->getResults()) : ValueRange(store.getHomes());
      for (auto [range, add] :
           {std::pair{ins, &plan::Instr::add_inputs}, std::pair{outs, &plan::Instr::add_outputs}})
        for (Value v : range) {
          auto index = bufferFor(v);
          if (failed(index))
            return failure();
          (instr->*add)(*index);
        }
      instr->add_ints(op->getAttrOfType<IntegerAttr>("tile").getInt());
      return success();
    }
    plan::Instr instr;
    const char *name = instructionOf(op);
    if (!name)
      return op->emitOpError("emit-plan: no runtime kernel for this op");
    assert(dsrt::isPlanInstruction(name) && "instructionOf names a plan instruction");
    instr.set_op(name);
    markSchedule(op, instr);
    if (auto cost = dyn_cast<nn::CostOpInterface>(op))
      instr.set_flops(double(cost.getFlops()));
    if (std::string node = nn::sourceNode(op->getLoc()); !node.empty())
      instr.set_source(node);
    markSteps(op, instr);
    if (auto group = op->getAttrOfType<dist::GroupAttr>("group")) {
      dist::Axis axis = group.getAxis();
      // The plan's groups are dp (0), pp (1) and tp (2); no dsrt runs a
      // collective over the whole world.
      if (axis == dist::Axis::world)
        return op->emitOpError("emit-plan: a collective over the world group has no plan "
                               "axis (dsrt runs dp, pp and tp groups)");
      instr.set_axis(axis == dist::Axis::pp ? 1 : axis == dist::Axis::tp ? 2 : 0);
    }
    for (Value v : op->getOperands()) {
      auto index = bufferFor(v);
      if (failed(index))
        return failure();
      instr.add_inputs(*index);
    }
    // A send's result is its handle, not a buffer.
    for (Value v : isa<dist::SendOp>(op) ? ValueRange() : ValueRange(op->getResults())) {
      auto index = bufferFor(v);
      if (failed(index))
        return failure();
      instr.add_outputs(*index);
    }
    if (failed(encodeAttributes(op, instr)))
      return failure();
    // dsrt's kernels take what the instruction's layout lists (plan/
    // Instructions.h); anything else is refused here, naming the op, and
    // never reaches a dsrt that would refuse the plan.
    if (instr.outputs_size() || instr.inputs_size()) {
      const plan::DType d =
          plan_.buffers(int(instr.outputs_size() ? instr.outputs(0) : instr.inputs(0))).dtype();
      if (!dsrt::instructionTakes(name, plan::DType_Name(d))) {
        std::string takes;
        for (int k = plan::DType_MIN; k <= plan::DType_MAX; ++k)
          if (plan::DType_IsValid(k) && k != plan::DTYPE_UNSPECIFIED &&
              dsrt::instructionTakes(name, plan::DType_Name(plan::DType(k))))
            takes += (takes.empty() ? "" : ", ") + plan::DType_Name(plan::DType(k));
        return op->emitOpError("emit-plan: dsrt has no kernel for ")
               << name << " on " << plan::DType_Name(d) << " values (its kernels take "
               << takes << "); compute it in one of those (a Cast in the model)";
      }
    }
    recordIndexBound(op);
    if (auto staging = op->getAttrOfType<DenseI64ArrayAttr>(TrainDialect::kStaging)) {
      instr.set_staging_offset(staging[0]);
      instr.set_staging_bytes(staging[1]);
    }
    *list.Add() = std::move(instr);
    return success();
  }

  /// An input read as indices: the range its values must lie in.
  void recordIndexBound(Operation *op) {
    auto bound = [&](Value indices, int64_t n, std::optional<int64_t> ignore = std::nullopt) {
      while (auto r = indices.getDefiningOp<nn::ReshapeOp>()) // a view of the input
        indices = r.getInput();
      auto it = buffers_.find(indices);
      if (it == buffers_.end() || n <= 0)
        return;
      plan::Buffer *b = plan_.mutable_buffers(it->second);
      if (b->role() == plan::INPUT && (b->index_bound() == 0 || n < b->index_bound()))
        b->set_index_bound(n);
      if (b->role() == plan::INPUT && ignore)
        b->set_ignore_index(*ignore);
    };
    auto dim = [](Value v, int64_t axis) {
      auto t = cast<RankedTensorType>(v.getType());
      return t.getShape()[axis < 0 ? axis + t.getRank() : axis];
    };
    if (auto g = dyn_cast<nn::GatherOp>(op)) {
      auto parts = g->getAttrOfType<IntegerAttr>("dist.tp_part");
      bound(g.getIndices(), dim(g.getData(), g.getAxis()) * (parts ? parts.getInt() : 1));
    } else if (auto v = dyn_cast<nn::VocabCeLossOp>(op))
      bound(v.getLabels(), v.getClasses(), v.getIgnoreIndex());
    else if (auto ce = dyn_cast<nn::CrossEntropyOp>(op))
      bound(ce.getLabels(), dim(ce.getInput(), 1), ce.getIgnoreIndex()); // classes: dim 1
    else if (auto nll = dyn_cast<nn::NllLossOp>(op))
      bound(nll.getLabels(), dim(nll.getInput(), 1), nll.getIgnoreIndex());
  }

  /// The micro-batch and phase a pipeline schedule gave the op.
  static void markSchedule(Operation *op, plan::Instr &instr) {
    if (auto k = op->getAttrOfType<IntegerAttr>(TrainDialect::kMicro))
      instr.set_micro_batch(k.getInt());
    if (auto p = op->getAttrOfType<IntegerAttr>(TrainDialect::kPhase))
      instr.set_phase(p.getInt());
  }

  /// The optimizer steps the op runs on: train.active_steps (a range) or
  /// train.step_classes (0/1 Adam's classes).
  static void markSteps(Operation *op, plan::Instr &instr) {
    if (auto steps = op->getAttrOfType<DenseI64ArrayAttr>(TrainDialect::kActiveSteps)) {
      instr.set_first_step(steps[0]);
      instr.set_last_step(steps[1]);
    }
    if (auto classes = op->getAttrOfType<IntegerAttr>(TrainDialect::kStepClasses))
      instr.set_step_classes(uint32_t(classes.getInt()));
  }

  /// ZeroOneAdam's policy, as train.zero_one_adam and _payload carry it.
  static void zeroOneInts(const dsrt::ZeroOneRule &r, plan::Instr &instr) {
    for (int64_t v : {r.varFreezeStep, r.varUpdateScaler, r.localStepScaler, r.localStepClipper,
                      r.stepOffset})
      instr.add_ints(v);
  }

  int64_t newHandle(Operation *op) {
    int64_t h = (int64_t)handles_.size();
    handles_[op] = h;
    return h;
  }

  static int64_t reductionCode(nn::Reduction r) {
    switch (r) {
    case nn::Reduction::none:
      return 0;
    case nn::Reduction::sum:
      return 1;
    case nn::Reduction::mean:
      return 2;
    }
    return 2;
  }

  /// train.adam's and train.fused_adam's rates and flags.
  template <typename AdamLike> static void encodeAdam(AdamLike o, plan::Instr &instr) {
    for (APFloat f : {o.getBeta1(), o.getBeta2(), o.getEps(), o.getWeightDecay()})
      instr.add_floats(f.convertToDouble());
    instr.add_ints(o.getDecoupledWeightDecay());
    instr.add_ints(o.getBiasCorrection());
  }

  /// LAMB's rates (train.lamb_stats, train.lamb and their fused ops).
  template <typename LambLike> static void encodeLambRates(LambLike o, plan::Instr &instr) {
    for (APFloat f : {o.getBeta1(), o.getBeta2(), o.getEps(), o.getWeightDecay()})
      instr.add_floats(f.convertToDouble());
  }

  template <typename LossOp> static void encodeLoss(LossOp op, plan::Instr &instr) {
    instr.add_ints(reductionCode(op.getReduction()));
    instr.add_ints(op.getIgnoreIndex().has_value());
    instr.add_ints(op.getIgnoreIndex().value_or(0));
  }

  LogicalResult encodeAttributes(Operation *op, plan::Instr &instr) {
    auto rankOf = [](Value v) { return cast<RankedTensorType>(v.getType()).getRank(); };
    auto ints = [&](ArrayRef<int64_t> values) {
      for (int64_t v : values)
        instr.add_ints(v);
    };
    bool ok = true;
    llvm::TypeSwitch<Operation *>(op)
        .Case<nn::AddOp, nn::SubOp, nn::MulOp, nn::DivOp, nn::PowOp, nn::MaxOp,
              nn::MinOp, nn::SelectOp, nn::NegOp, nn::AbsOp, nn::ExpOp, nn::LogOp,
              nn::SqrtOp, nn::RsqrtOp, nn::ReciprocalOp, nn::TanhOp, nn::SinOp, nn::CosOp, nn::ErfOp,
              nn::ReluOp, nn::SigmoidOp, nn::NotOp, nn::CastOp, nn::BroadcastOp,
              train::LrScheduleOp>([](Operation *) {})
        .Case([&](nn::CmpOp o) { instr.add_ints((int64_t)o.getPredicate()); })
        .Case([&](nn::GeluOp o) {
          instr.add_ints(o.getApproximation() == nn::GeluApproximation::tanh);
        })
        .Case([&](nn::GeluGradOp o) {
          instr.add_ints(o.getApproximation() == nn::GeluApproximation::tanh);
        })
        .Case([&](nn::GeluWithDerivativeOp o) {
          instr.add_ints(o.getApproximation() == nn::GeluApproximation::tanh);
        })
        .Case([&](nn::MatmulOp o) {
          instr.add_ints(o.getTransposeLhs());
          instr.add_ints(o.getTransposeRhs());
        })
        .Case([&](nn::MatmulEpilogueOp o) {
          instr.add_ints(o.getTransposeLhs());
          instr.add_ints(o.getTransposeRhs());
          instr.add_ints(o.getBias() ? 1 : 0);
          instr.add_ints(o.getAddend() ? 1 : 0);
          if (o.getScale())
            instr.add_ints(1);
        })
        .Case([&](nn::LayerNormOp o) {
          instr.add_ints(normalize(o.getAxis(), rankOf(o.getInput())));
          instr.add_floats(o.getEpsilon().convertToDouble());
        })
        .Case([&](nn::LayerNormGradOp o) {
          instr.add_ints(normalize(o.getAxis(), rankOf(o.getInput())));
          instr.add_floats(o.getEpsilon().convertToDouble());
        })
        .Case<nn::SoftmaxOp, nn::LogSoftmaxOp>([&](auto o) {
          instr.add_ints(normalize(o.getAxis(), rankOf(o.getInput())));
        })
        .Case<nn::SoftmaxGradOp, nn::LogSoftmaxGradOp>([&](auto o) {
          instr.add_ints(normalize(o.getAxis(), rankOf(o.getOutput())));
        })
        .Case<nn::CrossEntropyOp, nn::NllLossOp, nn::CrossEntropyGradOp,
              nn::NllLossGradOp>([&](auto o) { encodeLoss(o, instr); })
        .Case([&](nn::GatherOp o) {
          instr.add_ints(normalize(o.getAxis(), rankOf(o.getData())));
          // A vocabulary-parallel part of the table: the number of parts.
          if (auto parts = o->getAttrOfType<IntegerAttr>("dist.tp_part"))
            instr.add_ints(parts.getInt());
        })
        .Case([&](nn::GatherGradOp o) {
          instr.add_ints(normalize(o.getAxis(), rankOf(o.getDataGrad())));
          if (auto parts = o->getAttrOfType<IntegerAttr>("dist.tp_part"))
            instr.add_ints(parts.getInt());
        })
        .Case<nn::VocabCeSumsOp, nn::VocabCeSumsGradOp>(
            [&](auto o) { instr.add_ints(o.getParts()); })
        .Case<nn::VocabCeLossOp, nn::VocabCeLossGradOp>([&](auto o) {
          instr.add_ints(o.getClasses());
          encodeLoss(o, instr);
        })
        .Case<nn::ReduceSumOp, nn::ReduceMeanOp, nn::ReduceMaxOp>([&](auto o) {
          for (int64_t a : o.getAxes())
            instr.add_ints(normalize(a, rankOf(o.getInput())));
        })
        .Case([&](nn::TransposeOp o) { ints(o.getPermutation()); })
        .Case([&](nn::SliceOp o) {
          ints(o.getStart());
          ints(o.getStride());
        })
        .Case([&](nn::SliceGradOp o) {
          ints(o.getStart());
          ints(o.getStride());
        })
        .Case([&](nn::ArgMaxOp o) { instr.add_ints(o.getAxis()); })
        .Case<nn::ConvOp, nn::ConvInputGradOp, nn::ConvWeightGradOp>([&](auto o) {
          ints(o.getStrides());
          ints(o.getPads());
          ints(o.getDilations());
          instr.add_ints(o.getGroups());
        })
        .Case<nn::MaxPoolOp, nn::MaxPoolGradOp>([&](auto o) {
          ints(o.getKernelShape());
          ints(o.getStrides());
          ints(o.getPads());
          ints(o.getDilations());
        })
        .Case<nn::AvgPoolOp, nn::AvgPoolGradOp>([&](auto o) {
          ints(o.getKernelShape());
          ints(o.getStrides());
          ints(o.getPads());
          instr.add_ints(o.getCountIncludePad() ? 1 : 0);
        })
        .Case([&](nn::ConcatOp o) {
          instr.add_ints(normalize(o.getAxis(), rankOf(o.getResult())));
        })
        .Case([&](nn::DropoutOp o) {
          instr.add_ints(o.getRngStream());
          // On a tensor-parallel part: [dim, blocks, tp] (its mask bits are
          // the whole tensor's).
          if (auto split = o->getAttrOfType<DenseI64ArrayAttr>("dist.tp_split"))
            for (int64_t v : split.asArrayRef())
              instr.add_ints(v);
          instr.add_floats(o.getRatio().convertToDouble());
        })
        .Case([&](nn::DropoutGradOp o) {
          instr.add_floats(o.getRatio().convertToDouble());
        })
        .Case<nn::AttentionOp, nn::AttentionGradOp>([&](auto o) {
          instr.add_ints(o.getScaleDivides() ? 1 : 0);
          instr.add_ints(o.getCausal() ? 1 : 0);
          instr.add_ints(o.getRngStream());
          instr.add_ints(o.getBshd() ? 1 : 0);
          // On a tensor-parallel part: [dim, blocks, tp] (its dropout bits
          // are the whole tensor's).
          if (auto split = o->template getAttrOfType<DenseI64ArrayAttr>("dist.tp_split"))
            for (int64_t v : split.asArrayRef())
              instr.add_ints(v);
          instr.add_floats(o.getScale().convertToDouble());
          instr.add_floats(o.getRatio().convertToDouble());
        })
        .Case([&](train::ClipGradNormOp o) {
          for (auto [g, c] : llvm::zip(o.getGrads(), o.getClipped()))
            if (buffers_.lookup(g) != buffers_.lookup(c) &&
                *offsetOf(g) != *offsetOf(c)) {
              o.emitOpError("emit-plan: clipping must run in place");
              ok = false;
            }
          instr.add_floats(o.getMaxNorm().convertToDouble());
          instr.add_ints(o.getSumSq() ? 1 : 0);
          instr.add_ints(o.getLossScale() ? 1 : 0);
        })
        .Case([&](train::ClipCoefOp o) {
          instr.add_floats(o.getMaxNorm().convertToDouble());
          instr.add_ints(o.getSumSq() ? 1 : 0);
          instr.add_ints(o.getLossScale() ? 1 : 0);
        })
        .Case<dist::AllReduceOp, dist::ReduceScatterOp>([&](auto o) {
          instr.add_ints(o.getGroup().getSize());
          instr.add_ints((int64_t)o.getReduce());
          instr.add_ints(newHandle(o));
        })
        .Case<dist::AllGatherOp, dist::AllToAllOp>([&](auto o) {
          instr.add_ints(o.getGroup().getSize());
          instr.add_ints(newHandle(o));
        })
        .Case([&](dist::ChunkOp o) { instr.add_ints(o.getGroup().getSize()); })
        .Case<dist::SendOp, dist::RecvOp>([&](auto o) {
          instr.add_ints(o.getGroup().getSize());
          instr.add_ints(o.getPeer());
          instr.add_ints(o.getTag());
          instr.add_ints(newHandle(o));
        })
        .Case<train::SumSqOp, train::OneBitCompressOp, train::OneBitServerOp,
              train::OneBitExpandOp>([](Operation *) {})
        .Case([&](train::AdamOp o) { encodeAdam(o, instr); })
        .Case([&](train::FusedAdamOp o) {
          encodeAdam(o, instr);
          instr.add_ints(o.getCoef() ? 1 : 0);
          for (int64_t k : o.getCopyOf())
            instr.add_ints(k);
        })
        .Case([&](train::OneBitAdamOp o) {
          instr.add_floats(o.getBeta1().convertToDouble());
          instr.add_floats(o.getBeta2().convertToDouble());
          instr.add_floats(o.getEps().convertToDouble());
          instr.add_floats(o.getWeightDecay().convertToDouble());
          instr.add_ints(o.getFreezeStep());
          instr.add_ints(o.getStepOffset());
        })
        .Case([&](train::ZeroOneAdamOp o) {
          instr.add_floats(o.getBeta1().convertToDouble());
          instr.add_floats(o.getBeta2().convertToDouble());
          instr.add_floats(o.getEps().convertToDouble());
          instr.add_floats(o.getWeightDecay().convertToDouble());
          zeroOneInts(o.rule(), instr);
        })
        .Case([&](train::ZeroOneAdamPayloadOp o) {
          instr.add_floats(o.getBeta1().convertToDouble());
          instr.add_floats(o.getEps().convertToDouble());
          instr.add_floats(o.getWeightDecay().convertToDouble());
          zeroOneInts(o.rule(), instr);
        })
        .Case([&](train::ResetAtOp o) { instr.add_ints(o.getAt()); })
        .Case([&](train::OneBitLambOp o) {
          for (APFloat f : {o.getBeta1(), o.getBeta2(), o.getEps(), o.getWeightDecay(),
                            o.getMaxCoeff(), o.getMinCoeff(), o.getCoeffBeta(), o.getFactorMax(),
                            o.getFactorMin(), o.getFactorThreshold()})
            instr.add_floats(f.convertToDouble());
          instr.add_ints(o.getFreezeStep());
          instr.add_ints(o.getStepOffset());
          instr.add_ints(o.getCompressed() ? 1 : 0);
          instr.add_ints(o.getStats() ? 1 : 0);
        })
        .Case([&](train::OneBitLambStatsOp o) {
          for (APFloat f : {o.getBeta1(), o.getBeta2(), o.getEps(), o.getWeightDecay()})
            instr.add_floats(f.convertToDouble());
          instr.add_ints(o.getFreezeStep());
          instr.add_ints(o.getStepOffset());
          instr.add_ints(o.getCompressed().empty() ? 0 : 1);
          instr.add_ints(int64_t(o.getParams().size()));
        })
        .Case([&](train::OneBitLambScalingOp o) { instr.add_ints(o.getAt()); })
        .Case([&](train::LionOp o) {
          instr.add_floats(o.getBeta1().convertToDouble());
          instr.add_floats(o.getBeta2().convertToDouble());
          instr.add_floats(o.getWeightDecay().convertToDouble());
        })
        .Case([&](train::AdagradOp o) {
          instr.add_floats(o.getEps().convertToDouble());
          instr.add_floats(o.getWeightDecay().convertToDouble());
          instr.add_floats(o.getLrDecay().convertToDouble());
        })
        .Case<train::LambStatsOp, train::FusedLambStatsOp>([&](auto o) {
          encodeLambRates(o, instr);
          if constexpr (std::is_same_v<decltype(o), train::FusedLambStatsOp>)
            instr.add_ints(o.getCoef() ? 1 : 0);
        })
        .Case<train::LambOp, train::FusedLambOp>([&](auto o) {
          encodeLambRates(o, instr);
          instr.add_floats(o.getMaxCoeff().convertToDouble());
          instr.add_floats(o.getMinCoeff().convertToDouble());
          instr.add_ints(o.getBiasCorrection());
          if constexpr (std::is_same_v<decltype(o), train::FusedLambOp>) {
            instr.add_ints(o.getCoef() ? 1 : 0);
            for (int64_t k : o.getCopyOf())
              instr.add_ints(k);
          }
        })
        .Case([&](train::SgdOp o) {
          instr.add_floats(o.getMomentum().convertToDouble());
          instr.add_floats(o.getDampening().convertToDouble());
          instr.add_floats(o.getWeightDecay().convertToDouble());
          instr.add_ints(o.getNesterov());
        })
        .Default([&](Operation *o) {
          o->emitOpError("emit-plan: no runtime kernel for this op");
          ok = false;
        });
    return success(ok);
  }

  func::FuncOp fn_;
  plan::Plan &plan_;
  int64_t dp_ = 1;
  llvm::DenseMap<Operation *, int64_t> handles_; // collective -> its handle
  /// While a train.pipeline body is emitted: the body, and slot 0's bytes.
  Block *pipeBody_ = nullptr;
  int64_t stashBegin_ = 0, stashEnd_ = 0;
  llvm::DenseSet<Operation *> evalOps_;  // the evaluation slice (sliceEval)
  llvm::DenseSet<unsigned> evalSums_;    // accumulate results it reads
  llvm::DenseMap<Value, uint32_t> buffers_;
  llvm::DenseMap<Attribute, uint32_t> constants_; // one buffer per constant value
  std::map<std::string, uint32_t> named_;
  std::set<std::string> weights_, params_;
};

} // namespace

LogicalResult emitPlan(ModuleOp module, const EmitPlanOptions &options) {
  // The step: one function, or one per pipeline stage (dist.stage).
  SmallVector<func::FuncOp> steps;
  for (auto fn : module.getOps<func::FuncOp>())
    for (BlockArgument a : fn.getArguments())
      if (fn.getArgAttr(a.getArgNumber(), TrainDialect::kStep)) {
        steps.push_back(fn);
        break;
      }
  if (steps.empty())
    return module.emitError("emit-plan: no training step (run autodiff, "
                            "gradient-accumulation, optimizer and memory-plan first)");
  int64_t pp = 1;
  if (auto a = module->getAttrOfType<IntegerAttr>(distutil::kPp))
    pp = a.getInt();
  if ((int64_t)steps.size() != pp)
    return module.emitError("emit-plan: ") << steps.size() << " training steps for " << pp
                                           << (pp == 1 ? " stage" : " stages");
  if (pp > 1)
    llvm::sort(steps, [](func::FuncOp a, func::FuncOp b) {
      return a->getAttrOfType<IntegerAttr>(distutil::kStage).getInt() <
             b->getAttrOfType<IntegerAttr>(distutil::kStage).getInt();
    });
  plan::Plan p;
  p.set_format_version(dsrt::kPlanFormatVersion);
  p.set_producer("dsc " DSC_VERSION_STRING);
  auto source = module->getAttrOfType<StringAttr>("dsc.source");
  if (!source)
    return module.emitError("emit-plan: the module has no dsc.source (the model to read weights from)");
  p.set_source_model(source.getValue().str());
  p.set_no_weights(module->hasAttr("dsc.no_weights"));
  p.set_ds_config(dsrt::config::toJson(options.config)); // the record (plan.proto)
  int64_t dp = 1, zeroStage = 0;
  if (auto a = module->getAttrOfType<IntegerAttr>(distutil::kDp))
    dp = a.getInt();
  if (auto a = module->getAttrOfType<IntegerAttr>(distutil::kZeroStage))
    zeroStage = a.getInt();
  p.set_dp(dp);
  p.set_zero_stage(zeroStage);
  int64_t tp = 1;
  if (auto a = module->getAttrOfType<IntegerAttr>("dist.tp"))
    tp = a.getInt();
  if (tp > 1)
    describeTensorParallel(module, tp, p);
  std::vector<std::unique_ptr<Emitter>> emitters;
  std::set<std::string> weightNames, paramNames;
  // The settings dsrt reads, typed (format 9): precision and loss scaler,
  // lr schedule, monitors, and the digests of the compiled-in groups.
  if (failed(checkLrSchedule(steps[0], options.config)))
    return failure();
  dsrt::config::writePlanSettings(dsrt::config::planSettingsOf(options.config), p);
  describeOptimizerRules(steps[0], options.config, p);
  if (pp == 1) {
    emitters.push_back(std::make_unique<Emitter>(steps[0], p, dp));
  } else {
    p.set_pp(pp);
    if (auto a = module->getAttrOfType<IntegerAttr>(distutil::kMicroBatches))
      p.set_pipeline_micro_batches(a.getInt());
    if (auto a = module->getAttrOfType<StringAttr>("dist.schedule"))
      p.set_schedule(a.getValue().str());
    for (int64_t s = 0; s < pp; ++s) {
      plan::Plan *stage = p.add_stages();
      stage->set_format_version(dsrt::kPlanFormatVersion);
      stage->set_producer(p.producer());
      stage->set_source_model(p.source_model());
      stage->set_no_weights(p.no_weights());
      stage->set_ds_config(p.ds_config());
      stage->set_precision(p.precision());
      if (p.has_loss_scaler())
        *stage->mutable_loss_scaler() = p.loss_scaler();
      *stage->mutable_lr_schedule() = p.lr_schedule();
      *stage->mutable_run_settings() = p.run_settings();
      *stage->mutable_compiled_settings() = p.compiled_settings();
      if (p.has_nvme_tier()) // the bytes are each stage's
        *stage->mutable_nvme_tier() = p.nvme_tier();
      stage->set_dp(dp);
      stage->set_zero_stage(zeroStage);
      if (tp > 1)
        describeTensorParallel(steps[s], tp, *stage);
      stage->set_stage(s);
      stage->set_has_loss(s + 1 == pp);
      stage->set_pipeline_micro_batches(p.pipeline_micro_batches());
      stage->set_schedule(p.schedule());
      emitters.push_back(std::make_unique<Emitter>(steps[s], *stage, dp));
    }
  }
  for (auto &e : emitters) {
    if (failed(e->run()))
      return failure();
    weightNames.insert(e->weightNames().begin(), e->weightNames().end());
    paramNames.insert(e->paramNames().begin(), e->paramNames().end());
  }
  if (pp > 1) {
    p.set_micro_batch_size(p.stages(0).micro_batch_size());
    p.set_has_loss(true);
    for (const plan::Plan &stage : p.stages())
      if (!stage.eval_refused().empty() && p.eval_refused().empty())
        p.set_eval_refused("stage " + std::to_string(stage.stage()) + ": " +
                           stage.eval_refused());
  }
  // The buffer of a weight, in the first stage that has it.
  auto named = [&](const std::string &name) -> const plan::Buffer & {
    for (auto &e : emitters)
      if (e->weightNames().count(name))
        return e->named(name);
    return emitters[0]->named(name);
  };

  // The manifest and --simulate read each stage's step in run order: its
  // pipeline items unrolled (in memory; plan.pb keeps the schedule).
  // (Only a pipeline has items: a single stage's plan is read as it is.)
  std::optional<plan::Plan> unrolled;
  if (pp > 1) {
    unrolled = p;
    for (plan::Plan &stage : *unrolled->mutable_stages())
      if (std::string bad = dsrt::unrollPipeline(stage); !bad.empty())
        return module.emitError("emit-plan: stage ") << stage.stage() << ": " << bad;
  }
  const plan::Plan &run = unrolled ? *unrolled : p;

  // The manifest: what the plan holds and needs, per stage.
  auto write = [&](llvm::raw_ostream &os) {
    if (pp == 1)
      return writeManifest(p, options.config, os);
    double bubble = 0;
    if (auto a = module->getAttrOfType<FloatAttr>("dist.bubble"))
      bubble = a.getValueAsDouble();
    int64_t layers = 0;
    if (auto a = module->getAttrOfType<IntegerAttr>("dist.layers"))
      layers = a.getInt();
    int64_t M = p.pipeline_micro_batches();
    os << "pipeline:         " << pp << " stages x " << dp << " data-parallel ranks"
       << (tp > 1 ? " x tp " + std::to_string(tp) : std::string()) << " = " << pp * dp * tp
       << " ranks (rank = "
       << (tp > 1 ? "(dp_index * " + std::to_string(pp) + " + stage) * " + std::to_string(tp) +
                        " + tp_rank"
                  : "dp_index * " + std::to_string(pp) + " + stage")
       << "), " << layers
       << " layers, " << M << " micro-batches per step, schedule " << p.schedule() << "\n";
    os << llvm::format("predicted bubble: %.1f%% (1F1B with equal stages: (P-1)/(M+P-1) = "
                       "%.1f%%)\n",
                       100 * bubble, 100.0 * (pp - 1) / double(M + pp - 1));
    // Each stage's micro-batch is written once (its slots hold the
    // micro-batches in flight); the step runs its items.
    os << "stage  layers    parameters   planned peak  slots  slot bytes  instructions "
          "written / run a step\n";
    for (int64_t s = 0; s < pp; ++s) {
      const plan::Plan &st = p.stages(s);
      int64_t params = 0;
      for (const plan::Buffer &b : st.buffers())
        if (b.role() == plan::PARAM)
          params += b.shard_count() > 1 ? numel(b.full_shape()) : numel(b.shape());
      auto l = steps[s]->getAttrOfType<DenseI64ArrayAttr>("dist.layers");
      std::string range = l ? std::to_string(l[0]) + "-" + std::to_string(l[1]) : "?";
      const plan::Program &prog = st.program();
      const plan::PipelineSchedule &ps = prog.pipeline();
      int64_t written = prog.prologue_size() + prog.epilogue_size() + ps.forward_size() +
                        ps.backward_size() + ps.weight_size();
      int64_t ran = run.stages(s).program().prologue_size();
      os << llvm::format("%5lld  %-8s %12lld   %12s  %5u  %10s  %lld / %lld\n", (long long)s,
                         range.c_str(), (long long)params, humanBytes(st.arena_bytes()).c_str(),
                         ps.slots(), humanBytes(int64_t(ps.slot_bytes())).c_str(),
                         (long long)written, (long long)ran);
    }
    for (int64_t s = 0; s < pp; ++s) {
      os << "\n== stage " << s << " ==\n";
      writeManifest(run.stages(s), options.config, os);
    }
  };
  if (options.inspect)
    options.inspect(run);
  if (options.dir.empty()) {
    // In memory only (dsc --simulate without -o): no weights are read.
    if (options.manifest)
      write(*options.manifest);
    return success();
  }

  if (auto ec = llvm::sys::fs::create_directories(options.dir))
    return module.emitError("emit-plan: cannot create '") << options.dir << "': " << ec.message();

  // Weights first: if they cannot be read, no plan.pb is left behind.
  std::vector<std::pair<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>> weights;
  std::string skeleton;
  if (!options.weights)
    return module.emitError("emit-plan: no source of the initial weights");
  if (llvm::Error e = options.weights(
          weightNames,
          [&](const std::string &name, const std::vector<int64_t> &shape,
              const std::vector<float> &values) {
            weights.push_back({name, {shape, values}});
          },
          // dsrt --export-onnx writes back only what it trains; frozen
          // tensors keep their data in the skeleton.
          &skeleton, &paramNames))
    return module.emitError("emit-plan: ") << llvm::toString(std::move(e));
  for (auto &w : weights) {
    const plan::Buffer &b = named(w.first);
    const auto &shape = b.full_shape_size() ? b.full_shape() : b.shape();
    if (!std::equal(shape.begin(), shape.end(), w.second.first.begin(), w.second.first.end()))
      return module.emitError("emit-plan: initializer '")
             << w.first << "' has another shape than the parameter";
  }
  std::vector<dsrt::io::TensorRef> refs;
  for (auto &w : weights)
    refs.push_back({w.first, dsrt::io::DType::F32, w.second.first, w.second.second.data()});
  try {
    dsrt::io::writeSafeTensors(options.dir + "/weights.safetensors", refs,
                               {{"format", "pt"}, {"producer", "dsc"}});
  } catch (const std::exception &e) {
    return module.emitError("emit-plan: ") << e.what();
  }

  // Deterministic: the same step gives the same plan.pb bytes (and
  // checksum); protobuf writes map entries (LrSchedule.params) in hash
  // order otherwise.
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream raw(&bytes);
    google::protobuf::io::CodedOutputStream out(&raw);
    out.SetSerializationDeterministic(true);
    if (!p.SerializeToCodedStream(&out) || out.HadError())
      return module.emitError("emit-plan: cannot serialize the plan");
  }
  try {
    // A model that came as ONNX, for dsrt --export-onnx to fill in (a
    // .pt2 has none: its plan exports safetensors).
    if (!skeleton.empty())
      dsrt::io::writeFileAtomically(options.dir + "/model.onnx",
                                    {{skeleton.data(), skeleton.size()}});
    // The checksums dsrt verifies (io/FileUtil.h), before plan.pb.
    dsrt::io::writeChecksums(
        options.dir,
        {{"plan.pb", dsrt::io::sha256Hex(bytes.data(), bytes.size())},
         {"weights.safetensors", dsrt::io::sha256File(options.dir + "/weights.safetensors")}});
    // plan.pb last: a directory with a plan.pb is a complete plan.
    dsrt::io::writeFileAtomically(options.dir + "/plan.pb", {{bytes.data(), bytes.size()}});
  } catch (const std::exception &e) {
    return module.emitError("emit-plan: ") << e.what();
  }

  std::error_code ec;
  llvm::raw_fd_ostream manifest(options.dir + "/manifest.txt", ec);
  if (ec)
    return module.emitError("emit-plan: ") << ec.message();
  write(manifest);
  if (options.manifest)
    write(*options.manifest);
  return success();
}

} // namespace dsc
