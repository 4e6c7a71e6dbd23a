//===- PlanRecords.cpp - the plan-wide records of emit-plan ---------------===//
//
// What a plan says once, beside its instructions: the tensor-parallel
// split, the lr schedule it names, 0/1 Adam's step rule and the NVMe tier.
//
//===----------------------------------------------------------------------===//
#include "target/plan/PlanRecords.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

namespace dsc {

using train::TrainDialect;

void describeTensorParallel(Operation *scope, int64_t tp, plan::Plan &p) {
  p.set_tp(uint32_t(tp));
  // A GEMM with an epilogue (matmul-epilogue) keeps its matmul's marks.
  scope->walk([&](Operation *mm) {
    auto kind = mm->getAttrOfType<StringAttr>("dist.tp");
    if (!kind || !isa<nn::MatmulOp, nn::MatmulEpilogueOp>(mm))
      return;
    if (kind.getValue() == "column")
      p.set_tp_column_gemms(p.tp_column_gemms() + 1);
    else if (kind.getValue() == "row")
      p.set_tp_row_gemms(p.tp_row_gemms() + 1);
    else if (auto reason = mm->getAttrOfType<StringAttr>("dist.tp_reason")) {
      std::string weight = "?";
      Value rhs = mm->getOperand(1);
      if (auto t = rhs.getDefiningOp<nn::TransposeOp>())
        rhs = t.getInput();
      if (auto c = rhs.getDefiningOp<nn::CastOp>())
        rhs = c.getInput();
      if (auto arg = dyn_cast<BlockArgument>(rhs))
        if (auto f = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()))
          if (auto n = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(), TrainDialect::kParam))
            weight = n.getValue().str();
      p.add_tp_whole_gemms(weight + ": " + reason.getValue().str());
    }
  });
}


LogicalResult checkLrSchedule(func::FuncOp step, const dsrt::config::TrainConfig &cfg) {
  const dsrt::config::SchedulerConfig &s = cfg.scheduler;
  std::string expected = s.type.empty() ? "constant" : s.type;
  WalkResult walk = step.walk([&](train::LrScheduleOp op) {
    if (op.getKind() == expected)
      return WalkResult::advance();
    op.emitOpError("emit-plan: the step's schedule is ")
        << op.getKind() << ", the baked config's " << expected;
    return WalkResult::interrupt();
  });
  if (walk.wasInterrupted())
    return failure();
  return success();
}

void describeOptimizerRules(func::FuncOp step, const dsrt::config::TrainConfig &cfg,
                            plan::Plan &p) {
  // 0/1 Adam: the rule of its instructions' step classes (format 7).
  for (auto update : step.getOps<train::ZeroOneAdamOp>()) {
    dsrt::ZeroOneRule r = update.rule();
    plan::StepRule *rule = p.mutable_step_rule();
    rule->set_var_freeze_step(r.varFreezeStep);
    rule->set_var_update_scaler(r.varUpdateScaler);
    rule->set_local_step_scaler(r.localStepScaler);
    rule->set_local_step_clipper(r.localStepClipper);
    rule->set_step_offset(r.stepOffset);
    break;
  }
  // ZeRO-Infinity's optimizer state and/or parameters on NVMe: where and
  // how (each stage's emitter sets the bytes and where the parameters'
  // own file begins, when they have one).
  if (std::string nvme = cfg.zero.nvmeTierPath(); !nvme.empty()) {
    plan::NvmeTier *t = p.mutable_nvme_tier();
    t->set_path(nvme);
    t->set_param_path(cfg.zero.nvmeParamPath());
    t->set_block_size(uint64_t(cfg.aio.blockSize));
    t->set_queue_depth(uint32_t(cfg.aio.queueDepth));
    t->set_single_submit(cfg.aio.singleSubmit);
    t->set_pipeline_read(cfg.zero.pipelineRead);
    t->set_pipeline_write(cfg.zero.pipelineWrite);
  }
}

} // namespace dsc
