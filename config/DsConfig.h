//===- DsConfig.h - DeepSpeed ds_config.json parsing ------------*- C++ -*-===//
//
// Reads a DeepSpeed ds_config.json into a TrainConfig with every default
// filled in, following DeepSpeed's own semantics (deepspeed/runtime/config.py,
// constants.py, engine.py `_configure_basic_optimizer`, lr_schedules.py):
//
//  * Batch: train_batch_size = train_micro_batch_size_per_gpu *
//    gradient_accumulation_steps * worldSize (the data-parallel ranks, dsc's
//    --dp). Any two derive the third, as DeepSpeed does; train_batch_size
//    alone or the micro batch alone means gas 1. Where DeepSpeed floor-divides
//    and then fails its assertion, dsc says which division was not exact and
//    which train_batch_size values would be; all three given and unequal is an
//    error that states the four numbers and the keys or flag that fix it.
//    Neither train_batch_size nor the micro batch given is an error.
//  * Optimizer names "adam"/"adamw" are case-insensitive (DeepSpeed
//    lower-cases names it implements itself); "SGD" is looked up in
//    torch.optim by DeepSpeed, so it is case-sensitive here too.
//    "Adam" is FusedAdam with adam_w_mode=True by default, i.e. decoupled
//    weight decay (AdamW) unless "adam_w_mode": false; "AdamW" is always
//    decoupled. Defaults are FusedAdam's (lr 1e-3, betas (0.9, 0.999),
//    eps 1e-8, weight_decay 0, bias_correction true), except with
//    "torch_adam": true and decoupled decay, where DeepSpeed builds
//    torch.optim.AdamW whose weight_decay default is 1e-2. SGD defaults are
//    torch's (lr 1e-3 since torch 2.2, momentum 0, dampening 0, nesterov
//    false, weight_decay 0).
//  * No "optimizer" section: DeepSpeed would take the optimizer the Python
//    script passes in; dsc has no script, so it uses AdamW with the FusedAdam
//    defaults above (lr 1e-3, decoupled weight decay 0).
//  * steps_per_print defaults to none (0 here): recent DeepSpeed prints
//    nothing unless asked (older releases defaulted to 10).
//  * wall_clock_breakdown: true asks for DeepSpeed's per-phase timers; dsrt
//    honours it with its per-op timing (--profile), see
//    TrainConfig::wallClockBreakdown.
//  * Mixed precision: "bf16" (or its older name "bfloat16", not both),
//    "fp16", "data_types".grad_accum_dtype and "communication_data_type"
//    with DeepSpeed's keys and defaults (precision_config.py, config.py),
//    see PrecisionConfig. Both bf16 and fp16 enabled is an error, as in
//    DeepSpeed. "torch_autocast" with "enabled": true is an error (dsc has
//    no per-module autocast; bf16/fp16 are its mixed precision).
//  * zero_optimization: DeepSpeedZeroConfig's keys and defaults
//    (deepspeed/runtime/zero/config.py), see ZeroConfig. Sizes count
//    elements. Each key DeepSpeed accepts under two names (the field name
//    and its stage3_ alias, e.g. prefetch_bucket_size) is accepted under
//    both, but not twice. DeepSpeed's deprecated boolean form
//    ("zero_optimization": true) is stage 1, as in DeepSpeed.
//  * Scheduler parameters get the defaults of the DeepSpeed scheduler
//    classes' constructors, which is what the engine calls with
//    scheduler.params as keyword arguments. WarmupLR's warmup_max_lr defaults
//    to the optimizer's lr (recent DeepSpeed); WarmupDecayLR's to 0.001.
//
// Every key DeepSpeed reads is in the key table (KeyTable.h), which the
// parser consults first (KeyCheck.cpp): implemented, accepted because it
// asks for nothing (a note when away from its default), or refused with a
// reason; integral floats are integers where DeepSpeed takes an int; "auto"
// is resolved from AutoValues. An unknown key inside a section is an error
// with a "did you mean" suggestion; at the top level (which DeepSpeed
// ignores) a note, unless a likely typo. Stricter than DeepSpeed, on
// purpose: an unknown warmup_type is an error instead of a warning that
// falls back to "log"; fp16's scaler settings are range-checked whether or
// not fp16 is enabled (DeepSpeed checks them only under dynamic scaling),
// since dsc --precision fp16 may enable it after the config is read. JSON
// comments (// and /* */) and trailing commas are accepted, the rest of
// hjson is not (docs/ds-config.md).
//
// Hostile input: every error is a ConfigError naming the source and the key
// path, never a JSON-library exception or a crash. A text nested deeper than
// kMaxNesting is rejected before it is parsed (the JSON library recurses per
// level); a number beyond double's range (1e400) is an error naming its key;
// real numbers must lie within float32's range (dsrt trains in float32) and
// the betas and OneCycle's momenta in [0, 1); counts and sizes are
// range-checked in the type the JSON holds, against the bounds below, so
// that no loop count or product formed from them can wrap or run for ever.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_CONFIG_DSCONFIG_H
#define DSRT_CONFIG_DSCONFIG_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dsrt::config {

/// Every error in a ds_config; the message starts with the source name and
/// names the key path (e.g. "optimizer.params.lr").
class ConfigError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct OptimizerConfig {
  /// Canonical name: "Adam", "AdamW", "SGD", "Lamb", "Lion", "Adagrad", "OneBitAdam",
  /// "ZeroOneAdam" or "OneBitLamb".
  std::string type = "AdamW";
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8; // Adam/AdamW
  double weightDecay = 0.0;
  double momentum = 0.0, dampening = 0.0; // SGD
  bool nesterov = false;                  // SGD
  double maxCoeff = 10.0, minCoeff = 0.01; // Lamb: the trust ratio's clamp
  double lrDecay = 0.0;                    // Adagrad
  int64_t freezeStep = 100000;             // OneBitAdam: its last uncompressed call;
                                           // ZeroOneAdam: var_freeze_step
  int64_t varUpdateScaler = 16;            // ZeroOneAdam's policy (zoadam.py)
  int64_t localStepScaler = 32678;
  int64_t localStepClipper = 16;
  // OneBitLamb (lamb.py; also maxCoeff, minCoeff and freezeStep).
  double coeffBeta = 0.9, factorMax = 4.0, factorMin = 0.5, factorThreshold = 0.1;
  /// Decoupled weight decay (AdamW semantics); false means L2 added to the
  /// gradient (torch.optim.Adam semantics). Always false for SGD.
  bool decoupled = true;
  bool biasCorrection = true;
  /// "torch_adam": DeepSpeed builds torch.optim.Adam(W) instead of FusedAdam.
  /// The update is the same; only defaults and accepted keys differ.
  bool torchAdam = false;

  bool operator==(const OptimizerConfig &o) const;
  bool operator!=(const OptimizerConfig &o) const { return !(*this == o); }
};

struct SchedulerConfig {
  /// "" (no scheduler: the optimizer's lr throughout), "WarmupLR",
  /// "WarmupDecayLR", "WarmupCosineLR", "OneCycle" or "LRRangeTest".
  std::string type;
  /// Every numeric parameter of `type` under its DeepSpeed name, defaults
  /// filled in (integers stored exactly as doubles).
  std::map<std::string, double> params;
  /// Warmup schedulers: "log" or "linear".
  std::string warmupType;
  /// LRRangeTest: lr_range_test_staircase.
  bool staircase = false;
  /// OneCycle: cycle_momentum (DeepSpeed default true). It only acts on
  /// optimizers with betas (Adam, AdamW, Lamb, Lion); see betasAt() in
  /// LrSchedule.h, which dsrt's updates read every step.
  bool cycleMomentum = false;
  /// total_num_steps was "auto" (the Hugging Face Trainer's max_steps): the
  /// run's --steps gives it; until dsrt sets it, params holds a stand-in.
  bool totalStepsFromRun = false;

  /// params.at(name), with an error naming the scheduler if it is missing.
  double param(const std::string &name) const;

  bool operator==(const SchedulerConfig &o) const;
  bool operator!=(const SchedulerConfig &o) const { return !(*this == o); }
};

/// DeepSpeed's "zero_optimization" section (DeepSpeedZeroConfig), every
/// default filled in. Sizes and thresholds count elements, not bytes.
struct ZeroConfig {
  /// 0: plain data parallelism; 1: optimizer states partitioned across the
  /// data-parallel ranks; 2: and gradients; 3: and parameters.
  int stage = 0;
  /// Elements reduced (reduce-scatter / all-reduce) per bucket; > 0.
  int64_t reduceBucketSize = 500000000;
  /// Elements all-gathered per bucket (updated partitions); > 0.
  int64_t allgatherBucketSize = 500000000;
  /// overlap_comm as written; nullopt means DeepSpeed's default, which depends
  /// on the stage. Read it through overlapComm().
  std::optional<bool> overlapCommSetting;
  /// Stage 3 (accepted at every stage, as DeepSpeed does); >= 0.
  int64_t stage3PrefetchBucketSize = 50000000;
  int64_t stage3ParamPersistenceThreshold = 100000;
  int64_t stage3MaxLiveParameters = 1000000000;
  /// sub_group_size tiles the offloaded optimizer step. (contiguous_gradients,
  /// reduce_scatter, allgather_partitions and round_robin_gradients change
  /// nothing dsc plans: config/KeyTable.cpp says why, and a value away from
  /// DeepSpeed's default is a note.)
  int64_t subGroupSize = 1000000000; // >= 0
  /// ZeRO-Offload (offload_optimizer.device, or the older cpu_offload):
  /// the optimizer state in host memory, the update in tiles of
  /// sub_group_size (the offload pass).
  /// Nvme: ZeRO-Infinity's optimizer state in one file per rank under
  /// offloadNvmePath (offload_optimizer.nvme_path), read and written
  /// through io_uring (the aio section).
  enum class OffloadDevice { None, Cpu, Nvme };
  OffloadDevice offloadOptimizer = OffloadDevice::None;
  std::string offloadNvmePath;
  /// offload_optimizer.pipeline_read / pipeline_write with device nvme:
  /// every NVMe read of the plan starts one fetch ahead, every NVMe write
  /// returns at once from a write-behind buffer (Plan.nvme_tier).
  bool pipelineRead = false, pipelineWrite = false;
  /// ZeRO-Infinity's parameter offload (offload_param.device, or the older
  /// cpu_offload_param), stage 3 only: each rank's parameter shards (the
  /// fp32 masters) in the host or NVMe tier, fetched before each reader;
  /// offloadParamNvmePath is offload_param.nvme_path.
  OffloadDevice offloadParam = OffloadDevice::None;
  std::string offloadParamNvmePath;
  /// The NVMe tier's folder: whichever offload uses NVMe ("" if none).
  std::string nvmeTierPath() const {
    if (offloadOptimizer == OffloadDevice::Nvme)
      return offloadNvmePath;
    return offloadParam == OffloadDevice::Nvme ? offloadParamNvmePath : std::string();
  }
  /// The parameters' own NVMe folder when both offloads use NVMe on
  /// different folders (DeepSpeed's two swappers on two drives: the tier's
  /// parameter bytes are a second file per rank there), else "".
  std::string nvmeParamPath() const {
    return offloadOptimizer == OffloadDevice::Nvme && offloadParam == OffloadDevice::Nvme &&
                   offloadParamNvmePath != offloadNvmePath
               ? offloadParamNvmePath
               : std::string();
  }

  /// DeepSpeed's rule (overlap_comm_valid): true for stage 3, false for the
  /// other stages, unless overlap_comm is given.
  bool overlapComm() const { return overlapCommSetting.value_or(stage == 3); }

  /// Compares overlapComm(), not how it was spelled: an omitted overlap_comm
  /// equals the value DeepSpeed gives it.
  bool operator==(const ZeroConfig &o) const;
  bool operator!=(const ZeroConfig &o) const { return !(*this == o); }
};

/// DeepSpeed's "aio" section (swap_tensor/aio_config.py): how the NVMe
/// tier's requests reach the disk (runtime/io/Aio).
struct AioConfig {
  int64_t blockSize = 1048576;  // bytes per request, a multiple of 4096
  int64_t queueDepth = 8;       // requests in flight
  bool singleSubmit = false;    // one submission per request
  bool operator==(const AioConfig &o) const {
    return blockSize == o.blockSize && queueDepth == o.queueDepth &&
           singleSubmit == o.singleSubmit;
  }
};

/// A floating-point format of training, under DeepSpeed's names.
enum class Precision { FP32, BF16, FP16 };

/// "fp32", "bf16" or "fp16".
const char *precisionName(Precision p);

/// DeepSpeed's "fp16" section (DeepSpeedFP16Config in precision_config.py;
/// the scaler is DynamicLossScaler in fp16/loss_scaler.py), defaults filled
/// in. Read whether or not fp16 is enabled.
struct Fp16Config {
  /// auto_cast: the model's floating-point inputs are cast to fp16.
  bool autoCast = false;
  /// loss_scale: 0 = dynamic loss scaling, > 0 = this static scale.
  double lossScale = 0.0;
  /// Dynamic scaling starts at 2^initialScalePower; in [kMinScalePower,
  /// kMaxScalePower].
  int64_t initialScalePower = 16;
  /// loss_scale_window: overflow-free steps before the scale doubles; in
  /// [1, kMaxSteps].
  int64_t lossScaleWindow = 1000;
  /// hysteresis (the scaler's delayed_shift): overflows tolerated before
  /// the scale halves; in [1, kMaxSteps] (0 would never lower the scale).
  int64_t hysteresis = 2;
  /// consecutive_hysteresis: refill the hysteresis after every step without
  /// an overflow, not only when the scale grows.
  bool consecutiveHysteresis = false;
  /// min_loss_scale: the floor of dynamic scaling (an integer in DeepSpeed);
  /// an overflow at this scale is an error. In [1, kMaxMinLossScale].
  int64_t minLossScale = 1;

  bool dynamicLossScale() const { return lossScale == 0.0; }
  bool operator==(const Fp16Config &o) const;
  bool operator!=(const Fp16Config &o) const { return !(*this == o); }
};

/// DeepSpeed's "bf16" section (DeepSpeedBF16Config), defaults filled in.
struct Bf16Config {
  /// immediate_grad_update: fold each gradient into the fp32 accumulator as
  /// soon as backward produces it, rather than after the backward pass
  /// (BF16_Optimizer; some DeepSpeed releases before PR #6976 defaulted it
  /// to true).
  bool immediateGradUpdate = false;
  /// check_grad_overflow: skip the step when a gradient is inf/NaN
  /// (true since DeepSpeed PR #8035, v0.19.3, matching fp16; false before).
  bool checkGradOverflow = true;

  bool operator==(const Bf16Config &o) const {
    return immediateGradUpdate == o.immediateGradUpdate &&
           checkGradOverflow == o.checkGradOverflow;
  }
  bool operator!=(const Bf16Config &o) const { return !(*this == o); }
};

/// Mixed precision: which of "bf16"/"fp16" is enabled (dsc --precision
/// overrides it), both sections' settings, data_types.grad_accum_dtype and
/// communication_data_type. Master weights and optimizer states are fp32:
/// DeepSpeed's bf16_master_weights_and_grads, bf16_optimizer_states and
/// fp16_master_weights_and_grads are errors when true.
struct PrecisionConfig {
  /// FP32 unless bf16.enabled or fp16.enabled (never both).
  Precision kind = Precision::FP32;
  Fp16Config fp16;
  Bf16Config bf16;
  /// data_types.grad_accum_dtype as written; nullopt (DeepSpeed's None)
  /// means DeepSpeed's default. Read it through gradAccumDtype().
  std::optional<Precision> gradAccumDtypeSetting;
  /// communication_data_type as written; nullopt means DeepSpeed's default.
  /// Read it through communicationDataType().
  std::optional<Precision> communicationDataTypeSetting;

  /// The dtype gradients accumulate in across micro-batches: fp32 unless
  /// grad_accum_dtype is given. dsc's choice, as BF16_Optimizer's; DeepSpeed
  /// (engine.py get_data_types, since PR #7515) defaults to the model's
  /// dtype (docs/architecture.md, mixed precision).
  Precision gradAccumDtype() const {
    return gradAccumDtypeSetting.value_or(Precision::FP32);
  }
  /// The dtype gradients are reduced in: fp32 unless
  /// communication_data_type is given (dsc's choice, the dtype it
  /// accumulates in; DeepSpeed defaults to the model's dtype).
  Precision communicationDataType() const {
    return communicationDataTypeSetting.value_or(Precision::FP32);
  }

  /// Compares gradAccumDtype() and communicationDataType(), not how they
  /// were spelled: an omitted key equals the value DeepSpeed gives it.
  bool operator==(const PrecisionConfig &o) const;
  bool operator!=(const PrecisionConfig &o) const { return !(*this == o); }
};

// Bounds of what a ds_config may ask for. Each is far beyond any real run
// and keeps the products dsc and dsrt form from these values (samples per
// step, bytes per bucket, steps x samples) far from int64 overflow.

/// Samples per rank in one micro-batch (train_micro_batch_size_per_gpu).
inline constexpr int64_t kMaxMicroBatch = int64_t(1) << 24;
/// Micro-batches per step (gradient_accumulation_steps): a loop per step,
/// unrolled by a pipeline schedule.
inline constexpr int64_t kMaxGradAccumSteps = int64_t(1) << 20;
/// Samples per step over all ranks (train_batch_size).
inline constexpr int64_t kMaxTrainBatch = kMaxMicroBatch * kMaxGradAccumSteps;
/// pipeline.stages: one rank per stage.
inline constexpr int64_t kMaxPipelineStages = 1024;
/// ZeRO bucket sizes and thresholds, in elements (DeepSpeed's examples go up
/// to 1e12); their size in bytes still fits in int64.
inline constexpr int64_t kMaxElements = int64_t(1) << 53;
/// Step counts (steps_per_print, scheduler steps): SchedulerConfig keeps them
/// as doubles, exact up to 2^53.
inline constexpr int64_t kMaxSteps = int64_t(1) << 53;
/// fp16.initial_scale_power: 2^power is a normal float32.
inline constexpr int64_t kMinScalePower = -126;
inline constexpr int64_t kMaxScalePower = 127;
/// fp16.min_loss_scale, an integer: exact as a double.
inline constexpr int64_t kMaxMinLossScale = int64_t(1) << 53;
/// Arrays and objects nested in a ds_config text; DeepSpeed's own keys nest 4
/// deep (optimizer.params.betas[0] counts the top level).
inline constexpr size_t kMaxNesting = 64;
/// A ds_config file's size: DeepSpeed's are a few KiB.
inline constexpr size_t kMaxConfigBytes = size_t(16) << 20;

/// The "pipeline" section. DeepSpeed's keys (stages, partition,
/// seed_layers, activation_checkpoint_interval, pipe_partitioned,
/// grad_partitioned) plus dsc's partition_method and schedule. The number
/// of micro-batches is gradient_accumulation_steps, as in DeepSpeed.
/// DeepSpeed's "partition" ("uniform", "parameters", or "best": dsc's cost)
/// sets partitionMethod too; seed_layers: true (per-layer seeded
/// initialization) is an error, since dsc takes the weights from the model;
/// pipe_partitioned and grad_partitioned only matter under tensor
/// parallelism, which dsc does not have, so either value is accepted.
struct PipelineConfig {
  int64_t stages = 1;                    // 1: no pipeline
  std::string partitionMethod = "cost";  // uniform | parameters | cost
  std::string schedule = "1f1b";         // 1f1b | zb-h1
  /// activation_checkpoint_interval (0: off); folded into
  /// TrainConfig::recompute, which is what compares.
  int64_t activationCheckpointInterval = 0;
  bool operator==(const PipelineConfig &o) const {
    return stages == o.stages && partitionMethod == o.partitionMethod && schedule == o.schedule;
  }
};

/// Activation checkpointing (dsc's recompute pass). DeepSpeed's
/// "activation_checkpointing" section configures the checkpoints of the
/// blocks a user wraps by hand; dsc sees the graph and checkpoints by
/// itself: its own key "recompute" (none | layers | selective) chooses the
/// mode, and a section that sets DeepSpeed's keys without it means
/// "layers". "interval" (dsc) or pipeline.activation_checkpoint_interval
/// keeps every k-th layer input; number_checkpoints keeps that many, evenly
/// spread (the compiler turns it into an interval once it knows the
/// layers).
struct RecomputeConfig {
  std::string mode = "none"; // none | layers | selective | auto
  int64_t interval = 1;
  int64_t numberCheckpoints = 0; // 0: from interval
  /// memory_budget (dsc): the planned peak per rank must fit it; "auto"
  /// chooses what to recompute so that it does. 0: none.
  uint64_t memoryBudget = 0;
  /// layers: recompute only the first `limit` layers (0: all). Not a
  /// config key: --recompute auto chooses it.
  int64_t limit = 0;
  bool operator==(const RecomputeConfig &o) const {
    return mode == o.mode && interval == o.interval &&
           numberCheckpoints == o.numberCheckpoints && memoryBudget == o.memoryBudget;
  }
};

/// A byte count as written in a flag or a config: digits, then optionally
/// K, M, G, T or KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), e.g.
/// "6GiB", "512M", "1000000". Nullopt for anything else or an overflow.
std::optional<uint64_t> parseByteSize(const std::string &text);

/// DeepSpeed's csv_monitor and tensorboard sections (edaa722
/// deepspeed/monitor/config.py): rank 0 writes the engine's events in
/// <output_path>/<job_name>/ (docs/monitors.md). dsrt's default for an empty
/// output_path is the run folder (DeepSpeed's is the working directory).
struct MonitorConfig {
  bool enabled = false;
  std::string outputPath;
  std::string jobName = "DeepSpeedJobName";
  bool operator==(const MonitorConfig &o) const {
    return enabled == o.enabled && outputPath == o.outputPath && jobName == o.jobName;
  }
};

/// Whether a monitor's job_name names a folder inside its output_path
/// (relative, not empty, no ".." component leaving it): DeepSpeed joins the
/// two, and the files must not land elsewhere.
bool jobNameStaysInside(const std::string &jobName);

/// DeepSpeed's comms_logger (edaa722 deepspeed/comm/config.py,
/// utils/comms_logging.py): times each collective and message; dsrt prints
/// DeepSpeed's summary at the end of the run and writes it to comms.csv.
struct CommsLoggerConfig {
  bool enabled = false;
  bool verbose = false;
  bool profAll = true;
  std::vector<std::string> profOps; // DeepSpeed's op names
  bool debug = false;
  bool operator==(const CommsLoggerConfig &o) const {
    return enabled == o.enabled && verbose == o.verbose && profAll == o.profAll &&
           profOps == o.profOps && debug == o.debug;
  }
};

/// DeepSpeed's flops_profiler (edaa722 deepspeed/profiling/config.py,
/// flops_profiler/profiler.py): at step profile_step dsrt reports the
/// step's flops (dsc's cost model, per instruction), the time of every
/// instruction, achieved FLOP/s and MFU against a measured peak, by op kind
/// and by module (docs/monitors.md).
struct FlopsProfilerConfig {
  bool enabled = false;
  int64_t profileStep = 1;
  int64_t moduleDepth = -1; // -1: every depth
  int64_t topModules = 1;
  bool detailed = true;
  std::string outputFile; // "": stdout
  bool operator==(const FlopsProfilerConfig &o) const {
    return enabled == o.enabled && profileStep == o.profileStep &&
           moduleDepth == o.moduleDepth && topModules == o.topModules &&
           detailed == o.detailed && outputFile == o.outputFile;
  }
};

/// DeepSpeed's "elasticity" section (deepspeed/elasticity, versions 0.1
/// and 0.2): from max_train_batch_size and micro_batch_sizes it chooses one
/// global batch and the data-parallel sizes that keep it, then sets
/// train_batch_size, the micro-batch and gradient_accumulation_steps for the
/// size the plan is compiled for. dsc also compiles a plan for each smaller
/// valid size (PLAN/elastic/dpN), which dsrt --max-restarts continues on
/// when a host is lost.
struct ElasticConfig {
  bool enabled = false;
  int64_t maxTrainBatch = 2000;
  std::vector<int64_t> microBatchSizes = {2, 4, 6};
  int64_t minGpus = 1, maxGpus = 10000, minTime = 0;
  double version = 0.2;
  bool preferLargerBatch = true;
  bool ignoreNonElasticBatchInfo = false;
  int64_t modelParallelSize = 1, gpusPerNode = 1;
  /// Derived: the data-parallel sizes DeepSpeed accepts with this batch,
  /// ascending.
  std::vector<int64_t> validSizes;
  bool operator==(const ElasticConfig &o) const {
    return enabled == o.enabled && maxTrainBatch == o.maxTrainBatch &&
           microBatchSizes == o.microBatchSizes && minGpus == o.minGpus &&
           maxGpus == o.maxGpus && minTime == o.minTime && version == o.version &&
           preferLargerBatch == o.preferLargerBatch &&
           ignoreNonElasticBatchInfo == o.ignoreNonElasticBatchInfo &&
           modelParallelSize == o.modelParallelSize && gpusPerNode == o.gpusPerNode;
  }
};

/// DeepSpeed's elastic batch for `worldSize` data-parallel ranks: the global
/// batch, the micro-batch, the valid sizes. Throws ConfigError (naming
/// `source`) where DeepSpeed raises.
struct ElasticBatch {
  int64_t trainBatch = 0, microBatch = 0;
  std::vector<int64_t> validSizes;
};
ElasticBatch computeElasticBatch(const ElasticConfig &e, int64_t worldSize,
                                 const std::string &source);

struct TrainConfig {
  int64_t trainBatchSize = 1;
  int64_t microBatchPerGpu = 1;
  int64_t gradAccumSteps = 1;
  ElasticConfig elastic;
  /// Data-parallel world size the batch relation was checked against. Not a
  /// ds_config key; it is the argument given to parseDsConfig().
  int64_t worldSize = 1;
  /// Tensor-parallel ranks per data-parallel index (tensor_parallel.
  /// autotp_size, dsc --tp); 1: none.
  int64_t tensorParallel = 1;
  /// Sequence parallelism over the tensor-parallel group (dsc
  /// --sequence-parallel; Megatron's --sequence-parallel, no ds_config key).
  bool sequenceParallel = false;
  /// What nn-fusion fuses beyond its layout folds (dsc --fuse: "none",
  /// "attention" or "all", the default; no ds_config key).
  std::string fuse = "all";
  /// The global gradient norm's bound; 0 = off. DeepSpeed's default is 1.0
  /// since PR #8068 (June 2026; 0, off, before).
  double gradientClipping = 1.0;
  int64_t stepsPerPrint = 0;     // 0 = never
  /// wall_clock_breakdown: DeepSpeed's per-phase timers; dsrt reports its
  /// per-op and per-phase timing (as with --profile) when it is set.
  bool wallClockBreakdown = false;
  /// checkpoint.use_node_local_storage: each host saves its ranks' pieces
  /// into --save-dir on its own disk (docs/multi-host.md).
  bool checkpointNodeLocal = false;
  OptimizerConfig optimizer;
  SchedulerConfig scheduler;
  ZeroConfig zero;
  AioConfig aio;
  PipelineConfig pipeline;
  PrecisionConfig precision;
  RecomputeConfig recompute;
  /// Run-time only: dsrt --config may change them.
  MonitorConfig csvMonitor;
  MonitorConfig tensorboard;
  CommsLoggerConfig commsLogger;
  FlopsProfilerConfig flopsProfiler;
  /// Keys the config sets that change nothing in dsc, each with why (dsc
  /// prints them as notes at compile time instead of ignoring them
  /// silently). Not part of operator==.
  std::vector<std::string> notes;

  bool operator==(const TrainConfig &o) const;
  bool operator!=(const TrainConfig &o) const { return !(*this == o); }
};

/// What dsc knows that fills in a ds_config's "auto" values (the Hugging
/// Face Trainer's placeholders): each is resolved from these or named in one
/// error listing every "auto" key left (KeyCheck.cpp, docs/ds-config.md).
struct AutoValues {
  /// train_micro_batch_size_per_gpu: the model's batch (or --batch-size).
  std::optional<int64_t> microBatch;
  /// gradient_accumulation_steps: --micro-batches (else the Trainer's 1).
  std::optional<int64_t> gradAccumSteps;
  /// bf16.enabled / fp16.enabled: --precision (else fp32).
  std::optional<Precision> precision;
  /// ZeRO bucket sizes (hidden^2, 0.9 hidden^2, 10 hidden): the model's
  /// hidden size.
  std::optional<int64_t> hiddenSize;
  /// scheduler.params.total_num_steps: the run's length (dsrt --steps).
  std::optional<int64_t> totalSteps;
  /// Without totalSteps: leave total_num_steps to the run
  /// (SchedulerConfig::totalStepsFromRun) instead of refusing it. dsc sets
  /// it; dsrt fills the value in from --steps.
  bool runLengthAtRun = false;
};

/// What dsc uses when it is given no ds_config at all: batch 1 (micro 1,
/// gas 1, world 1), AdamW with FusedAdam defaults, no scheduler, clipping at
/// 1.0 (DeepSpeed's default),
/// ZeRO stage 0 with DeepSpeed's defaults.
TrainConfig defaultConfig();

/// Parses ds_config JSON text. `sourceName` starts every error message;
/// `worldSize` is the data-parallel size the batch relation uses.
/// Throws ConfigError.
TrainConfig parseDsConfig(const std::string &jsonText,
                          const std::string &sourceName = "ds_config.json",
                          int64_t worldSize = 1, const AutoValues &autos = {});

/// The paths of the keys dsc fills in from what it knows: those whose value
/// is "auto", and train_micro_batch_size_per_gpu when the config gives no
/// batch size at all (a cheap look before the model is imported: dsc then
/// knows what it must resolve). Throws ConfigError on a text that is not a
/// ds_config.
std::vector<std::string> autoKeys(const std::string &jsonText,
                                  const std::string &sourceName = "ds_config.json");

/// Reads the file at `path` (a bound on its size, a named error when it
/// cannot be read).
std::string readDsConfigText(const std::string &path);

/// Reads and parses the file at `path` (named by its path in errors); a
/// file larger than kMaxConfigBytes is refused.
TrainConfig loadDsConfig(const std::string &path, int64_t worldSize = 1,
                         const AutoValues &autos = {});

/// dsc --precision's value: "fp32", "bf16", "fp16", or PyTorch Lightning's
/// names of the same modes: "32-true", "bf16-mixed", "16-mixed". Throws
/// ConfigError saying what is accepted (and why Lightning's "bf16-true",
/// "16-true" and "64-true" are not) otherwise.
Precision precisionFromFlag(const std::string &value);

/// Canonical form: a ds_config with every default written out (pretty
/// printed, doubles exact), so it can be baked into a plan and read back:
/// parseDsConfig(toJson(c), name, c.worldSize) == c.
std::string toJson(const TrainConfig &cfg);

} // namespace dsrt::config

#endif // DSRT_CONFIG_DSCONFIG_H
