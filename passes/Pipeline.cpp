//===- Pipeline.cpp - dsc's training-step pipeline ------------------------===//
#include "passes/Pipeline.h"

#include "passes/Passes.h"
#include "config/DsConfig.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

#include <algorithm>
#include <cstdio>

namespace dsc {

std::string checkTrainPipelineOptions(const TrainPipelineOptions &o) {
  auto atLeast = [](llvm::StringRef name, int64_t v, int64_t min) {
    return v >= min ? std::string()
                    : name.str() + " must be at least " + std::to_string(min) + ", got " +
                          std::to_string(v);
  };
  for (std::string e : {atLeast("dp", o.dp, 1), atLeast("tp", o.tp, 1), atLeast("pp", o.pp, 1),
                        atLeast("micro-batches", o.microBatches, 1),
                        atLeast("recompute-interval", o.recomputeInterval, 1),
                        atLeast("recompute-checkpoints", o.recomputeCheckpoints, 0),
                        atLeast("recompute-limit", o.recomputeLimit, 0),
                        atLeast("reduce-bucket", o.reduceBucket, 1),
                        atLeast("allgather-bucket", o.allgatherBucket, 1),
                        atLeast("persistence-threshold", o.persistenceThreshold, 0),
                        atLeast("sub-group-size", o.subGroupSize, 0)})
    if (!e.empty())
      return e;
  if (o.zero < 0 || o.zero > 3)
    return "zero must be 0, 1, 2 or 3, got " + std::to_string(o.zero);
  if (o.sequenceParallel && o.tp < 2)
    return "sequence-parallel splits the tokens over the tensor-parallel group: it needs tp >= 2";
  if (o.offloadParam != OffloadTier::None && o.zero != 3)
    return "offload-param tiers ZeRO-3's parameter shards: it needs zero=3, got zero=" +
           std::to_string(int(o.zero));
  if (o.pp == 1 && (o.partition.hasValue() || o.schedule.hasValue()))
    return std::string(o.partition.hasValue() ? "partition" : "schedule") +
           " applies to a pipeline: give pp >= 2";
  return {};
}

void buildTrainPipeline(mlir::OpPassManager &pm, const TrainPipelineOptions &o) {
  pm.addNestedPass<mlir::func::FuncOp>(createNNFusion(NNFusionOptions{o.fuse}));
  // Megatron's splits on the forward graph, before mixed precision casts
  // the parameters and autodiff derives the backward pass of f and g.
  if (o.tp > 1) {
    TensorParallelOptions tp;
    tp.tp = o.tp;
    pm.addPass(createTensorParallel(tp));
    if (o.sequenceParallel)
      pm.addPass(createSequenceParallel());
  }
  // On the forward graph, before the pipeline cut (stages then exchange
  // low-precision activations) and before autodiff (fp32 master gradients).
  if (o.precision != FloatKind::FP32) {
    MixedPrecisionOptions mp;
    mp.dtype = o.precision;
    pm.addPass(createMixedPrecision(mp));
  }
  bool pipelined = o.pp > 1;
  if (pipelined) {
    PipelineSplitOptions split;
    split.stages = o.pp;
    split.method = o.partition;
    pm.addPass(createPipelineSplit(split));
  }
  pm.addPass(createAutodiff());
  // Every use of a product is known now (its gradient, tensor parallelism's
  // collectives): hand each GEMM's bias and residual to its epilogue, before
  // recompute, so that every recompute mode clones or keeps the same ops.
  if (o.fuse == FuseKind::All || o.fuseEpilogues)
    pm.addNestedPass<mlir::func::FuncOp>(createMatmulEpilogue());
  // Likewise the head permutes around attention, whose gradients autodiff
  // permuted back the same way.
  if (o.fuse != FuseKind::None)
    pm.addNestedPass<mlir::func::FuncOp>(createAttentionLayout());
  // Activation checkpointing: on each step (or stage) with its forward and
  // backward in one block, before the micro-batches are looped or unrolled.
  if (o.recompute != RecomputeMode::None) {
    RecomputeOptions rc;
    rc.mode = o.recompute;
    rc.interval = o.recomputeInterval;
    rc.checkpoints = o.recomputeCheckpoints;
    rc.limit = o.recomputeLimit;
    pm.addPass(createRecompute(rc));
  }
  // The end of the forward phase: one gradient per parameter.
  pm.addPass(createVerifyDifferentiated());
  if (pipelined) {
    // Each stage's micro-batch once, with the order of its items: the
    // passes up to pipeline-expand see it once, not M times.
    PipelineScheduleOptions sched;
    sched.microBatches = o.microBatches;
    sched.schedule = o.schedule;
    pm.addPass(createPipelineSchedule(sched));
  } else {
    GradientAccumulationOptions ga;
    ga.steps = o.microBatches;
    ga.accumDtype = o.gradAccumDtype;
    pm.addPass(createGradientAccumulation(ga));
  }
  OptimizerOptions opt;
  opt.type = o.optimizer;
  opt.lr = o.lr;
  opt.beta1 = o.beta1;
  opt.beta2 = o.beta2;
  opt.eps = o.eps;
  opt.weightDecay = o.weightDecay;
  opt.biasCorrection = o.biasCorrection;
  opt.momentum = o.momentum;
  opt.dampening = o.dampening;
  opt.nesterov = o.nesterov;
  opt.maxCoeff = o.maxCoeff;
  opt.minCoeff = o.minCoeff;
  opt.lrDecay = o.lrDecay;
  opt.freezeStep = o.freezeStep;
  opt.varUpdateScaler = o.varUpdateScaler;
  opt.localStepScaler = o.localStepScaler;
  opt.localStepClipper = o.localStepClipper;
  opt.coeffBeta = o.coeffBeta;
  opt.factorMax = o.factorMax;
  opt.factorMin = o.factorMin;
  opt.factorThreshold = o.factorThreshold;
  opt.clip = o.clip;
  opt.schedule = o.lrSchedule;
  for (const std::string &param : o.lrScheduleParams)
    opt.scheduleParams.push_back(param);
  pm.addPass(createOptimizer(opt));
  // On one rank ZeRO has nothing to partition: the plan is a single-rank one.
  if (o.dp > 1) {
    if (o.zero == 0) {
      DataParallelOptions dp;
      dp.dp = o.dp;
      dp.commDtype = o.commDtype;
      pm.addPass(createDataParallel(dp));
    } else {
      ZeroOptions zero;
      zero.stage = o.zero;
      zero.dp = o.dp;
      zero.persistenceThreshold = o.persistenceThreshold;
      zero.commDtype = o.commDtype;
      pm.addPass(createZero(zero));
    }
    pm.addPass(createVerifyZero());
    // 1-bit Adam's phases: on data parallelism's gradient averages, before
    // they and the compressed all-reduce's collectives are bucketed.
    if (o.optimizer == OptimizerKind::OneBitAdam || o.optimizer == OptimizerKind::ZeroOneAdam ||
        o.optimizer == OptimizerKind::OneBitLamb) {
      OneBitCompressionOptions onebit;
      onebit.dp = o.dp;
      pm.addPass(createOneBitCompression(onebit));
    }
    CommFusionOptions fusion;
    fusion.reduceBucket = o.reduceBucket;
    fusion.allgatherBucket = o.allgatherBucket;
    // Per function, in one nest.
    mlir::OpPassManager &fpm = pm.nest<mlir::func::FuncOp>();
    fpm.addPass(createCommFusion(fusion));
    if (o.overlap)
      fpm.addPass(createOverlap());
  }
  // After the data-parallel reductions (the gradient norm is taken of the
  // dp-reduced gradients) and their fusion (f and g lower to tp-group
  // collectives that never join a dp bucket).
  if (o.tp > 1)
    pm.addPass(createTensorParallelLower());
  if (pipelined)
    pm.addPass(createPipelineGradNorm());
  pm.addPass(mlir::createCSEPass());
  // The optimizer updates and their (sharded) state are final: tier them.
  if (o.offloadOptimizer != OffloadTier::None || o.offloadParam != OffloadTier::None) {
    OffloadOptions off;
    off.device = o.offloadOptimizer;
    off.paramDevice = o.offloadParam;
    off.paramNvmeFile = o.offloadParamNvmeFile;
    off.persistenceThreshold = o.persistenceThreshold;
    off.subGroupSize = o.subGroupSize;
    pm.addPass(createOffload(off));
  }
  // Per function: the memory plan, then what the plan target relies on
  // (every value has its bytes in the arena).
  mlir::OpPassManager &fpm = pm.nest<mlir::func::FuncOp>();
  // The updates are final too: fuse them before their bytes are placed.
  if (o.fuse == FuseKind::All || o.fuseOptimizer)
    fpm.addPass(createFuseOptimizer());
  fpm.addPass(createMemoryPlan());
  fpm.addPass(createVerifyPlanned());
}

namespace {
FloatKind floatKind(dsrt::config::Precision p) {
  switch (p) {
  case dsrt::config::Precision::BF16: return FloatKind::BF16;
  case dsrt::config::Precision::FP16: return FloatKind::FP16;
  default: return FloatKind::FP32;
  }
}
/// A resolved config's scheduler type (the reader admits only these).
LrScheduleKind lrScheduleOf(const std::string &type) {
  for (LrScheduleKind k : {LrScheduleKind::WarmupLR, LrScheduleKind::WarmupDecayLR,
                           LrScheduleKind::WarmupCosineLR, LrScheduleKind::OneCycle,
                           LrScheduleKind::LRRangeTest})
    if (type == lrScheduleName(k))
      return k;
  return LrScheduleKind::Constant;
}
} // namespace

void setTrainPipelineOptions(TrainPipelineOptions &o, const dsrt::config::TrainConfig &cfg) {
  o.dp = cfg.worldSize;
  o.zero = cfg.zero.stage;
  o.tp = cfg.tensorParallel;
  o.sequenceParallel = cfg.sequenceParallel;
  // cfg.fuse: "all", "none" or a list of attention, epilogues, optimizer.
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(cfg.fuse).split(parts, ',');
  auto fuses = [&](llvm::StringRef what) {
    return cfg.fuse == "all" || llvm::is_contained(parts, what);
  };
  o.fuse = cfg.fuse == "all" ? FuseKind::All
           : fuses("attention") ? FuseKind::Attention
                                : FuseKind::None;
  o.fuseEpilogues = fuses("epilogues");
  o.fuseOptimizer = fuses("optimizer");
  o.pp = cfg.pipeline.stages;
  if (cfg.pipeline.stages > 1) {
    o.partition = cfg.pipeline.partitionMethod == "uniform"      ? PartitionMethod::Uniform
                  : cfg.pipeline.partitionMethod == "parameters" ? PartitionMethod::Parameters
                                                                 : PartitionMethod::Cost;
    o.schedule = cfg.pipeline.schedule == "zb-h1" ? PipelineScheduleKind::ZBH1
                                                  : PipelineScheduleKind::OneFOneB;
  }
  o.microBatches = cfg.gradAccumSteps;
  o.precision = floatKind(cfg.precision.kind);
  // Gradients accumulate and are reduced in fp32 unless grad_accum_dtype /
  // communication_data_type say otherwise (DeepSpeed's default is the
  // model's dtype; dsc's is fp32, as BF16_Optimizer accumulates them).
  o.gradAccumDtype = floatKind(
      cfg.precision.gradAccumDtypeSetting.value_or(dsrt::config::Precision::FP32));
  o.commDtype = floatKind(
      cfg.precision.communicationDataTypeSetting.value_or(dsrt::config::Precision::FP32));
  const auto &r = cfg.recompute;
  o.recompute = r.mode == "layers"      ? RecomputeMode::Layers
                : r.mode == "selective" ? RecomputeMode::Selective
                                        : RecomputeMode::None;
  o.recomputeInterval = r.interval;
  o.recomputeCheckpoints = r.numberCheckpoints;
  o.recomputeLimit = r.limit;
  const auto &opt = cfg.optimizer;
  o.optimizer = opt.type == "SGD"       ? OptimizerKind::SGD
                : opt.type == "Lamb"    ? OptimizerKind::Lamb
                : opt.type == "Lion"    ? OptimizerKind::Lion
                : opt.type == "Adagrad" ? OptimizerKind::Adagrad
                : opt.type == "OneBitAdam" ? OptimizerKind::OneBitAdam
                : opt.type == "ZeroOneAdam" ? OptimizerKind::ZeroOneAdam
                : opt.type == "OneBitLamb" ? OptimizerKind::OneBitLamb
                : opt.decoupled         ? OptimizerKind::AdamW
                                        : OptimizerKind::Adam;
  o.lr = opt.lr;
  o.beta1 = opt.beta1;
  o.beta2 = opt.beta2;
  o.eps = opt.eps;
  o.weightDecay = opt.weightDecay;
  o.biasCorrection = opt.biasCorrection;
  o.momentum = opt.momentum;
  o.dampening = opt.dampening;
  o.nesterov = opt.nesterov;
  o.maxCoeff = opt.maxCoeff;
  o.minCoeff = opt.minCoeff;
  o.lrDecay = opt.lrDecay;
  o.freezeStep = opt.freezeStep;
  o.varUpdateScaler = opt.varUpdateScaler;
  o.localStepScaler = opt.localStepScaler;
  o.localStepClipper = opt.localStepClipper;
  o.coeffBeta = opt.coeffBeta;
  o.factorMax = opt.factorMax;
  o.factorMin = opt.factorMin;
  o.factorThreshold = opt.factorThreshold;
  o.clip = cfg.gradientClipping;
  o.lrSchedule = lrScheduleOf(cfg.scheduler.type);
  o.lrScheduleParams.clear();
  for (const auto &[name, value] : cfg.scheduler.params) {
    char exact[32]; // every bit of the double (std::to_string rounds to 1e-6)
    std::snprintf(exact, sizeof exact, "%.17g", value);
    o.lrScheduleParams.push_back(name + ":" + exact);
  }
  const auto &z = cfg.zero;
  o.persistenceThreshold = z.stage3ParamPersistenceThreshold;
  o.reduceBucket = z.reduceBucketSize;
  // Stage 3 gathers parameters ahead of their use in prefetch buckets.
  o.allgatherBucket = z.stage == 3 ? std::max<int64_t>(1, z.stage3PrefetchBucketSize)
                                   : z.allgatherBucketSize;
  o.overlap = z.overlapComm();
  using Device = dsrt::config::ZeroConfig::OffloadDevice;
  auto tier = [](Device d) {
    return d == Device::Cpu ? OffloadTier::Cpu : d == Device::Nvme ? OffloadTier::Nvme
                                                                   : OffloadTier::None;
  };
  o.offloadOptimizer = tier(z.offloadOptimizer);
  o.offloadParam = tier(z.offloadParam);
  o.offloadParamNvmeFile = !z.nvmeParamPath().empty();
  o.subGroupSize = z.subGroupSize;
}

void buildTrainPipeline(mlir::OpPassManager &pm, const dsrt::config::TrainConfig &cfg) {
  TrainPipelineOptions options;
  setTrainPipelineOptions(options, cfg);
  buildTrainPipeline(pm, options);
}

void registerTrainPipeline() {
  mlir::registerPassPipeline(
      "dsc-train-pipeline",
      "The training step dsc compiles: nn-fusion through memory-plan, as the options "
      "(dsc's flags and ds_config) select",
      [](mlir::OpPassManager &pm, llvm::StringRef text,
         llvm::function_ref<llvm::LogicalResult(const llvm::Twine &)> error) {
        TrainPipelineOptions options;
        if (failed(options.parseFromString(text)))
          return llvm::failure();
        if (std::string bad = checkTrainPipelineOptions(options); !bad.empty())
          return error("dsc-train-pipeline: " + bad);
        buildTrainPipeline(pm, options);
        return llvm::success();
      },
      [](llvm::function_ref<void(const mlir::detail::PassOptions &)> handler) {
        handler(TrainPipelineOptions());
      });
}

} // namespace dsc
