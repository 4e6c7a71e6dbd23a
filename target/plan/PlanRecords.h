//===- PlanRecords.h - the plan-wide records of emit-plan -------*- C++ -*-===//
#ifndef DSC_TARGET_PLAN_PLANRECORDS_H
#define DSC_TARGET_PLAN_PLANRECORDS_H

#include "config/DsConfig.h"
#include "plan.pb.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Operation.h"

namespace dsc {

/// The plan's tp and what the tensor-parallel pass split in `scope` (the
/// module, or a pipeline stage's step), and what not and why.
void describeTensorParallel(mlir::Operation *scope, int64_t tp, plan::Plan &p);
/// The plan's lr schedule: the config's scheduler and optimizer lr, which
/// the step's train.lr_schedule must name.
mlir::LogicalResult checkLrSchedule(mlir::func::FuncOp step,
                                    const dsrt::config::TrainConfig &cfg);
/// 0/1 Adam's rule of its instructions' step classes and ZeRO-Infinity's
/// NVMe tier, from the step (or the first stage's) and the config.
void describeOptimizerRules(mlir::func::FuncOp step, const dsrt::config::TrainConfig &cfg,
                            plan::Plan &p);

} // namespace dsc

#endif // DSC_TARGET_PLAN_PLANRECORDS_H
