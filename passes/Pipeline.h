//===- Pipeline.h - dsc's training-step pipeline ----------------*- C++ -*-===//
//
// The pass pipeline that turns an imported forward+loss module into a
// planned training step, with typed options, registered as
// `dsc-train-pipeline` (as IREE registers its pipelines) so that dsc,
// dsc-opt and the benches run the same passes in the same order:
//
//   dsc-opt m.mlir --pass-pipeline='builtin.module(dsc-train-pipeline{dp=2 zero=3})'
//
// docs/architecture.md ("Pass order") lists the order; test/passes/
// pass-order.test fails when the two differ.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PASSES_PIPELINE_H
#define DSC_PASSES_PIPELINE_H

#include "passes/PassEnums.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <string>

namespace dsrt::config {
struct TrainConfig;
}

namespace dsc {

struct TrainPipelineOptions : mlir::PassPipelineOptions<TrainPipelineOptions> {
  // Layout.
  Option<int64_t> dp{*this, "dp", llvm::cl::desc("data-parallel ranks"), llvm::cl::init(1)};
  Option<int64_t> zero{*this, "zero", llvm::cl::desc("ZeRO stage 0-3 (with dp > 1)"),
                       llvm::cl::init(0)};
  Option<int64_t> tp{*this, "tp", llvm::cl::desc("tensor-parallel ranks"), llvm::cl::init(1)};
  Option<bool> sequenceParallel{*this, "sequence-parallel",
                                llvm::cl::desc("with tp > 1: split the tokens of the "
                                               "norm/dropout/residual regions"),
                                llvm::cl::init(false)};
  Option<int64_t> pp{*this, "pp", llvm::cl::desc("pipeline stages"), llvm::cl::init(1)};
  Option<PartitionMethod> partition{*this, "partition",
                                    llvm::cl::desc("pipeline partition method"),
                                    llvm::cl::init(PartitionMethod::Cost),
                                    DSC_PARTITION_METHOD_VALUES};
  Option<PipelineScheduleKind> schedule{*this, "schedule", llvm::cl::desc("pipeline schedule"),
                                        llvm::cl::init(PipelineScheduleKind::OneFOneB),
                                        DSC_PIPELINE_SCHEDULE_VALUES};
  Option<int64_t> microBatches{*this, "micro-batches",
                               llvm::cl::desc("micro-batches per optimizer step"),
                               llvm::cl::init(1)};
  Option<FuseKind> fuse{*this, "fuse", llvm::cl::desc("what nn-fusion fuses beyond its folds"),
                        llvm::cl::init(FuseKind::None), DSC_FUSE_KIND_VALUES};
  // With fuse = all both are on; with none or attention each adds its pass.
  Option<bool> fuseEpilogues{*this, "fuse-epilogues",
                             llvm::cl::desc("matmul-epilogue: biases and residuals in GEMMs"),
                             llvm::cl::init(false)};
  Option<bool> fuseOptimizer{*this, "fuse-optimizer",
                             llvm::cl::desc("fuse-optimizer: one Adam update over many "
                                            "parameters, clipping and casts folded in"),
                             llvm::cl::init(false)};
  // Precision and memory.
  Option<FloatKind> precision{*this, "precision",
                              llvm::cl::desc("fp32, or bf16/fp16 over fp32 master weights"),
                              llvm::cl::init(FloatKind::FP32), DSC_FLOAT_KIND_VALUES};
  Option<FloatKind> gradAccumDtype{*this, "grad-accum-dtype",
                                   llvm::cl::desc("the type gradients are summed in"),
                                   llvm::cl::init(FloatKind::FP32), DSC_FLOAT_KIND_VALUES};
  Option<FloatKind> commDtype{*this, "comm-dtype",
                              llvm::cl::desc("the type gradients are reduced in"),
                              llvm::cl::init(FloatKind::FP32), DSC_FLOAT_KIND_VALUES};
  Option<RecomputeMode> recompute{*this, "recompute",
                                  llvm::cl::desc("activation checkpointing"),
                                  llvm::cl::init(RecomputeMode::None),
                                  DSC_RECOMPUTE_MODE_VALUES};
  Option<int64_t> recomputeInterval{*this, "recompute-interval",
                                    llvm::cl::desc("layers: keep every interval-th input"),
                                    llvm::cl::init(1)};
  Option<int64_t> recomputeCheckpoints{*this, "recompute-checkpoints",
                                       llvm::cl::desc("layers: inputs kept, evenly spread "
                                                      "(0: use the interval)"),
                                       llvm::cl::init(0)};
  Option<int64_t> recomputeLimit{*this, "recompute-limit",
                                 llvm::cl::desc("layers: recompute only the first N (0: all)"),
                                 llvm::cl::init(0)};
  // The optimizer.
  Option<OptimizerKind> optimizer{*this, "optimizer", llvm::cl::desc("the parameter update"),
                                  llvm::cl::init(OptimizerKind::AdamW),
                                  DSC_OPTIMIZER_KIND_VALUES};
  Option<double> lr{*this, "lr", llvm::cl::desc("learning rate"), llvm::cl::init(1e-3)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("Adam beta1"), llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("Adam beta2"), llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("Adam epsilon"), llvm::cl::init(1e-8)};
  Option<double> weightDecay{*this, "weight-decay", llvm::cl::desc("weight decay"),
                             llvm::cl::init(0.0)};
  Option<bool> biasCorrection{*this, "bias-correction", llvm::cl::desc("Adam bias correction"),
                              llvm::cl::init(true)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                          llvm::cl::init(0.0)};
  Option<double> dampening{*this, "dampening", llvm::cl::desc("SGD dampening"),
                           llvm::cl::init(0.0)};
  Option<bool> nesterov{*this, "nesterov", llvm::cl::desc("SGD Nesterov momentum"),
                        llvm::cl::init(false)};
  Option<double> maxCoeff{*this, "max-coeff", llvm::cl::desc("LAMB's largest trust ratio"),
                          llvm::cl::init(10.0)};
  Option<double> minCoeff{*this, "min-coeff", llvm::cl::desc("LAMB's smallest trust ratio"),
                          llvm::cl::init(0.01)};
  Option<int64_t> freezeStep{*this, "freeze-step",
                             llvm::cl::desc("OnebitAdam's last uncompressed step"),
                             llvm::cl::init(100000)};
  Option<int64_t> varUpdateScaler{*this, "var-update-scaler",
                                  llvm::cl::desc("ZeroOneAdam's var_update_scaler"),
                                  llvm::cl::init(16)};
  Option<int64_t> localStepScaler{*this, "local-step-scaler",
                                  llvm::cl::desc("ZeroOneAdam's local_step_scaler"),
                                  llvm::cl::init(32678)};
  Option<int64_t> localStepClipper{*this, "local-step-clipper",
                                   llvm::cl::desc("ZeroOneAdam's local_step_clipper"),
                                   llvm::cl::init(16)};
  Option<double> coeffBeta{*this, "coeff-beta", llvm::cl::desc("OnebitLamb's coeff_beta"),
                           llvm::cl::init(0.9)};
  Option<double> factorMax{*this, "factor-max", llvm::cl::desc("OnebitLamb's factor_max"),
                           llvm::cl::init(4.0)};
  Option<double> factorMin{*this, "factor-min", llvm::cl::desc("OnebitLamb's factor_min"),
                           llvm::cl::init(0.5)};
  Option<double> factorThreshold{*this, "factor-threshold",
                                 llvm::cl::desc("OnebitLamb's factor_threshold"),
                                 llvm::cl::init(0.1)};
  Option<double> lrDecay{*this, "lr-decay", llvm::cl::desc("Adagrad's lr decay"),
                         llvm::cl::init(0.0)};
  Option<double> clip{*this, "clip", llvm::cl::desc("max global gradient norm (0: none)"),
                      llvm::cl::init(0.0)};
  Option<LrScheduleKind> lrSchedule{*this, "lr-schedule",
                                    llvm::cl::desc("DeepSpeed scheduler type (constant: none)"),
                                    llvm::cl::init(LrScheduleKind::Constant),
                                    DSC_LR_SCHEDULE_VALUES};
  ListOption<std::string> lrScheduleParams{*this, "lr-schedule-params",
                                           llvm::cl::desc("scheduler parameters, name:value")};
  // Data-parallel communication.
  Option<int64_t> persistenceThreshold{*this, "persistence-threshold",
                                       llvm::cl::desc("ZeRO 3: parameters this small stay "
                                                      "whole"),
                                       llvm::cl::init(100000)};
  Option<int64_t> reduceBucket{*this, "reduce-bucket",
                               llvm::cl::desc("elements per gradient reduction bucket"),
                               llvm::cl::init(500000000)};
  Option<int64_t> allgatherBucket{*this, "allgather-bucket",
                                  llvm::cl::desc("elements per all-gather bucket"),
                                  llvm::cl::init(500000000)};
  Option<bool> overlap{*this, "overlap",
                       llvm::cl::desc("start collectives early, wait late (overlap_comm)"),
                       llvm::cl::init(false)};
  // ZeRO-Offload.
  Option<OffloadTier> offloadOptimizer{*this, "offload-optimizer",
                                       llvm::cl::desc("the optimizer state's tier: none, cpu "
                                                      "(host memory) or nvme"),
                                       llvm::cl::init(OffloadTier::None),
                                       DSC_OFFLOAD_TIER_VALUES};
  Option<OffloadTier> offloadParam{*this, "offload-param",
                                   llvm::cl::desc("the parameters' tier (ZeRO-3 only): none, "
                                                  "cpu (host memory) or nvme"),
                                   llvm::cl::init(OffloadTier::None), DSC_OFFLOAD_TIER_VALUES};
  Option<bool> offloadParamNvmeFile{
      *this, "offload-param-nvme-file",
      llvm::cl::desc("both on NVMe: the parameters in a file of their own "
                     "(offload_param.nvme_path differing from offload_optimizer's)"),
      llvm::cl::init(false)};
  Option<int64_t> subGroupSize{*this, "sub-group-size",
                               llvm::cl::desc("parameters per tile of the offloaded update"),
                               llvm::cl::init(1000000000)};
};

/// Checks the options as a whole (ranges, and combinations no pass could
/// run); an empty string when they are sound, else what is wrong.
std::string checkTrainPipelineOptions(const TrainPipelineOptions &options);

/// Adds the training-step pipeline to `pm` (options already checked).
void buildTrainPipeline(mlir::OpPassManager &pm, const TrainPipelineOptions &options);

/// The pipeline options a resolved ds_config compiles with.
void setTrainPipelineOptions(TrainPipelineOptions &options,
                             const dsrt::config::TrainConfig &cfg);

/// Adds the pipeline a resolved ds_config compiles with (dsc's).
void buildTrainPipeline(mlir::OpPassManager &pm, const dsrt::config::TrainConfig &cfg);

/// Registers `dsc-train-pipeline` (for dsc-opt and --pass-pipeline).
void registerTrainPipeline();

} // namespace dsc

#endif // DSC_PASSES_PIPELINE_H
