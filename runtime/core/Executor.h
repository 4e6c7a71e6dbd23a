//===- Executor.h - load, validate and run a dsc plan -----------*- C++ -*-===//
//
// A plan is validated completely before anything runs: format version,
// every buffer inside the arena, every instruction's op known with the right
// number and types of operands and attributes and consistent shapes. The
// arena is allocated once; the step loop calls kernels on pre-resolved
// pointers and never allocates.
//
// Data parallelism: with a Communicator of dp ranks the plan's dp must be
// dp, every `dist.*` collective is validated (group size, handles paired in
// one instruction list, shapes), its staging is reserved at initialize(),
// ZeRO shards (Buffer.shard_count > 1) load chunk `rank` of their tensor,
// and rank r runs global micro-batch ((step - 1) * micro_batches + k) * dp
// + r as its micro-batch k (data and dropout), so a run's global batch
// does not depend on dp.
//
// Pipeline parallelism (Plan.pp > 1): the executor gets the world
// communicator of tp * pp * dp ranks, tp innermost; world rank w is tp rank
// w % tp and runs stage (w / tp) % pp (the plan `stages[(w / tp) % pp]`) as
// data-parallel index (w / tp) / pp (the launcher's rank table; with tp = 1,
// stage w % pp of index w / pp). The world splits into
// the stage's data-parallel group (axis 0) and the index's pipeline group
// (axis 1); every dist instruction names its group by Instr.axis. A stage
// runs its whole unrolled schedule (the prologue) once per step; its
// `load_batch m` instructions call the loader for global micro-batch
// ((step - 1) * M + m) * dp + index into micro-batch m's INPUT buffers,
// and dist.send / dist.recv move activations and gradients between the
// stages. Only the last stage holds the loss (globalLoss() averages it
// over dp on every rank); gatherWeights() brings every stage's parameters
// to world rank 0.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_CORE_EXECUTOR_H
#define DSRT_CORE_EXECUTOR_H

#include "runtime/comm/Communicator.h"
#include "runtime/core/Backend.h"
#include "config/PlanSettings.h"
#include "runtime/core/LossScaler.h"
#include "plan/Instructions.h"
#include "plan/PlanFile.h"
#include "plan/StepRule.h"
#include "plan/Version.h"
#include "runtime/kernels/common/Contracts.h"

#include "plan.pb.h"

#include <array>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace dsrt {

struct DeviceState;


/// What a plan may ask for, checked before anything is allocated or run: a
/// number in a plan that drives a loop or an allocation is bounded here or
/// by the plan's own size (one list entry per element). Far above any real
/// plan, far below what would overflow the arithmetic that follows.
/// Elements of one buffer, and the product of any of its dimensions (so no
/// product of one buffer's dimensions overflows, nor one of two buffers').
constexpr int64_t kMaxPlanElements = int64_t(1) << 50;
/// The arena (its allocation must also fit the machine's memory).
constexpr uint64_t kMaxArenaBytes = uint64_t(1) << 50;
/// micro_batches and pipeline_micro_batches: micro-batches per step.
constexpr int64_t kMaxMicroBatches = int64_t(1) << 20;

/// A plan that is sound but that a device backend cannot run yet (several
/// ranks, an op or dtype without a CUDA kernel), or no usable device:
/// `dsrt --device auto` then runs it on the CPU.
class DeviceUnsupported : public PlanError {
public:
  using PlanError::PlanError;
};

/// A step whose gradient norm is NaN or infinite. The clipping instruction
/// throws it before any parameter or optimizer state is updated, on every
/// rank alike (the norm it sees is reduced over all ranks and stages), so
/// the weights are still those of the step before.
class NonFiniteError : public std::runtime_error {
public:
  NonFiniteError(int64_t step, double norm)
      : std::runtime_error("step " + std::to_string(step) + ": the gradient norm is " +
                           std::to_string(norm)),
        step(step), norm(norm) {}
  int64_t step;
  double norm;
};

/// A typed view of arena bytes.
struct Tensor {
  dsc::plan::DType dtype = dsc::plan::F32;
  kernels::Shape shape;
  void *data = nullptr;
  /// A device backend's: the same buffer in the device arena (what its
  /// kernels read and write); `data` is then its host copy.
  void *dev = nullptr;
  uint64_t offset = 0; // in the arena, or in the host tier (tier HOST)
  /// Where the bytes live: the arena, or the host tier (ZeRO-Offload's
  /// optimizer state, which tier.fetch / tier.store copy to and from arena
  /// working copies).
  dsc::plan::Tier tier = dsc::plan::ARENA;
  int64_t numel = 0;
  std::string name;
  dsc::plan::Role role = dsc::plan::ACTIVATION;
  /// A view's (a reshape's, a dist.wait result's) base buffer, whose bytes
  /// it shares (plan.proto's Buffer.view_of); null for a buffer of its own.
  const Tensor *viewOf = nullptr;
  /// ZeRO shard (shards > 1): this [chunk] buffer is chunk `rank` of the
  /// tensor of fullShape, flattened and zero-padded to shards * chunk.
  kernels::Shape fullShape;
  int64_t fullNumel = 0;
  int64_t shards = 1;
  /// Tensor parallelism (tpDim >= 0): this buffer is part `tp rank` of the
  /// tensor of fullShape, whose dimension tpDim is tpBlocks blocks, each cut
  /// into tpSize parts (plan.proto's Buffer.tp_split).
  int64_t tpDim = -1, tpBlocks = 1, tpSize = 1;
  /// With both, this [chunk] buffer is chunk `rank` of the tp part,
  /// flattened and zero-padded.
  /// The whole tensor's shape (a ZeRO shard's or a tp part's full_shape).
  const kernels::Shape &whole() const { return shards > 1 || tpDim >= 0 ? fullShape : shape; }
  /// Elements of the tp part a ZeRO chunk is cut from (the whole's without
  /// tensor parallelism); meaningful when shards > 1 or tpDim >= 0.
  int64_t partNumel() const { return tpDim >= 0 ? fullNumel / tpSize : fullNumel; }

  /// A FROZEN buffer that train.assign writes (BatchNorm's running
  /// statistics): model state the forward pass updates, so it is among the
  /// final weights (weights()), besides the parameters.
  bool assigned = false;
  /// A PARAM_COPY's parameter (the buffer it is a bf16 / fp16 cast of).
  const Tensor *copyOf = nullptr;

  float *f32() const { return static_cast<float *>(data); }
  int64_t *i64() const { return static_cast<int64_t *>(data); }
  uint8_t *u8() const { return static_cast<uint8_t *>(data); }
  /// BF16 / F16 elements (raw 16-bit patterns).
  uint16_t *u16() const { return static_cast<uint16_t *>(data); }
  size_t bytes() const;
};

/// A contiguous run of a tensor-parallel part: `count` elements at `whole`
/// in the flattened whole tensor and at `part` in the rank's buffer.
struct TpRun {
  int64_t whole = 0, part = 0, count = 0;
};
/// The runs of `t`'s part on tp rank `rank`, in buffer order (one per outer
/// index and block).
std::vector<TpRun> tpRuns(const Tensor &t, int rank);
/// The runs of the whole tensor that `t` holds on data-parallel rank
/// `dpRank` and tp rank `tpRank`, in buffer order (`part` is the offset in
/// `t`): all of a replicated tensor; a ZeRO chunk without its padding; a tp
/// part's runs; or, both, the runs of the tp part that fall in the chunk.
std::vector<TpRun> heldRuns(const Tensor &t, int dpRank, int tpRank);

struct Context;
class NvmeTier;
struct Instr;
using KernelFn = void (*)(const Instr &, Context &);

/// An instruction with its operands resolved.
struct Instr {
  KernelFn run = nullptr;
  std::string op;
  /// op's id (plan/Instructions.h: its index in kPlanInstructions), set at
  /// load: what the run-time tallies key by, instead of the name.
  int opId = -1;
  bool collective = false; // a dist.* instruction (wall_clock_breakdown)
  std::vector<Tensor *> in, out;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  /// Shapes/geometry the op precomputes at load time (outer/n/inner...).
  int64_t g[4] = {0, 0, 0, 0};
  std::vector<kernels::Shape> shapes; // concat
  std::vector<const float *> ptrs; // concat
  mutable std::vector<float> scratch; // a 16-bit reduction's float sums
  Tensor tpWhole; // nn.dropout on a tensor-parallel part: the whole tensor's split
  std::vector<comm::TensorArg> comm; // dist collectives: one per input
  uint64_t stagingOffset = 0, stagingBytes = 0; // planned staging (arena)
  float *staging = nullptr;
  std::string label; // "instruction 57 of the epilogue"
  int badSlot = -1;        // the CUDA backend's device counter of bad indices
  /// The CUDA backend: an attention softmax (or its gradient) with the
  /// scale and mask instructions next to it fused in (runtime/backends/
  /// cuda/Fusions.h). `absorbed`
  /// marks those instructions, which then do nothing; the softmax holds
  /// the operands it took over.
  struct Fused {
    bool absorbed = false;
    Tensor *x = nullptr;     // forward: the scores before the scale
    Tensor *out = nullptr;   // backward: the last fused instruction's result
    Tensor *scale = nullptr, *cond = nullptr, *fill = nullptr;
    int64_t condRows = 1;
    bool fillWhen = true;
  } fused;
  /// tier.fetch under pipeline_read: the next tier.fetch of its list,
  /// whose NVMe reads this one starts once its own are done (null: none).
  const Instr *readAhead = nullptr;
  uint32_t axis = 0;       // dist ops: 0 the dp group, 1 the pp group
  int64_t microBatch = 0;  // pipeline plans: for the timeline
  uint32_t phase = 0;
  /// Plan format 5: the optimizer steps this instruction runs on
  /// ([firstStep, lastStep], 0: no bound), as a 1-bit optimizer's two phases.
  /// `run` is then a wrapper that calls `ranged` on those steps (and, on
  /// the others, makes a dist.all_reduce the identity).
  int64_t firstStep = 0, lastStep = 0;
  /// Plan format 7: the step classes of `stepRule` (the executor's) it
  /// runs on (0: not by class), as 0/1 Adam's phases; `run` wraps `ranged`
  /// alike.
  uint32_t stepClasses = 0;
  const ZeroOneRule *stepRule = nullptr;
  KernelFn ranged = nullptr;
  bool eval = false; // Instr.eval: part of the evaluation program
  double flops = 0;   // Instr.flops (the flops profiler)
  std::string source; // Instr.source: the ONNX node
};

/// The loader of a pipeline step: fills `into` (one load_batch's INPUT
/// buffers) with global micro-batch `global`.
using LoadFn = void (*)(void *loader, int64_t global, const std::vector<Tensor *> &into);

/// Run state the kernels read.
struct Context {
  /// The plan's settings (the lr kernel reads the schedule).
  const config::PlanSettings *settings = nullptr;
  int64_t step = 0;         // training step, from 1 (data, dropout, messages)
  /// The optimizer's step, from 1: step minus the steps fp16's loss scaler
  /// skipped (what the STEP buffer holds).
  int64_t optimizerStep = 0;
  /// OneCycle with cycle_momentum: the betas DeepSpeed writes into an
  /// optimizer with betas for this step (set once per step; see stepBetas).
  bool cycledBetas = false;
  float beta1 = 0.0f, beta2 = 0.0f;
  uint64_t seed = 0;        // --seed
  uint64_t rngCounter = 0;  // dropout draw: the global micro-batch index
  int64_t badIndices = 0;   // gather / loss labels out of range this step
  /// fp16: the loss-scaled gradient norm is not finite; the optimizer
  /// kernels then leave parameters and states as they are.
  bool overflow = false;
  bool eval = false;        // an evaluation batch: dropout is the identity
  std::string badIndexOp;   // the first op that saw one
  comm::Communicator *comm = nullptr; // the dp group; never null once loaded
  int rank = 0;                       // in the data-parallel group
  /// By Instr.axis: the dp, pp and tp groups, and this rank in each.
  comm::Communicator *comms[3] = {nullptr, nullptr, nullptr};
  int ranks[3] = {0, 0, 0};
  /// The plan's handle -> its collective or message, on the communicator
  /// that started it (one namespace over both axes).
  struct Started {
    comm::Communicator *comm = nullptr;
    comm::Handle handle;
  };
  std::vector<Started> handles;
  /// The CUDA backend's state (runtime/backends/cuda/CudaBackend.cpp).
  DeviceState *gpu = nullptr;
  /// ZeRO-Infinity's NVMe tier of this rank (tier.fetch / tier.store), or
  /// null.
  NvmeTier *nvme = nullptr;
  /// pipeline_read: the read-ahead buffer, and the fetch whose NVMe bytes
  /// are being read into it (with the ticket of its last request).
  char *readAheadBuffer = nullptr;
  const Instr *readAheadFor = nullptr;
  uint64_t readAheadTicket = 0;
  /// pipeline_write: the write-behind buffer a tier.store copies its NVMe
  /// values into, and the ticket of the last write from it.
  char *writeBehindBuffer = nullptr;
  uint64_t writeBehindTicket = 0;
  /// Pipeline plans: load_batch m reads global micro-batch
  /// ((step - 1) * microBatches + m) * dp + rank through `load`.
  bool pipelined = false;
  int64_t microBatches = 1;
  int dp = 1;
  LoadFn load = nullptr;
  void *loader = nullptr;

  /// A pipeline plan's global micro-batch for micro-batch m of the step.
  int64_t globalMicroBatch(int64_t m) const { return ((step - 1) * microBatches + m) * dp + rank; }
};

/// A whole trained tensor to write (Executor::gatherWeights).
struct WholeTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float *data = nullptr;
};

class Executor {
public:
  /// Loads `dir`/plan.pb and validates it for the ranks of `world` (null:
  /// one rank): dp ranks, or pp * dp for a pipeline plan, whose world is
  /// split here (collective: every rank constructs its executor). `world`
  /// must outlive the executor. The program runs on the CPU backend until
  /// setBackend. Throws PlanError.
  explicit Executor(const std::string &dir, comm::Communicator *world = nullptr);
  ~Executor();

  /// Runs the program on `backend` from now on (before initialize()): it
  /// binds the instructions to its kernels, or throws DeviceUnsupported
  /// and the executor stays as it was, on its current backend.
  void setBackend(std::unique_ptr<Backend> backend);
  /// Where the kernels run.
  const Backend &backend() const { return *backend_; }

  /// The plan this rank runs (a pipeline plan: its stage's).
  const dsc::plan::Plan &plan() const { return plan_; }
  /// Plan.step_rule (format 7: 0/1 Adam's step classes), or null.
  const ZeroOneRule *stepRule() const { return plan_.has_step_rule() ? &stepRule_ : nullptr; }
  /// The ds_config settings the run reads (the plan's, or dsrt --config's).
  const config::PlanSettings &settings() const { return settings_; }
  /// Micro-batches per step (a pipeline plan: M, pipeline_micro_batches).
  int64_t microBatches() const {
    return pp_ > 1 ? ctx_.microBatches : plan_.program().micro_batches();
  }
  int64_t microBatchSize() const { return plan_.micro_batch_size(); }
  /// Data-parallel ranks (the plan's dp; 1 for dp 0) and this rank's index
  /// among them.
  int dp() const { return dp_; }
  int rank() const { return ctx_.rank; }
  /// Pipeline stages (1: not a pipeline plan) and this rank's stage.
  int pp() const { return pp_; }
  int stage() const { return stage_; }
  bool pipelined() const { return pp_ > 1; }
  /// Tensor-parallel ranks (1: none) and this rank's place among them.
  int tp() const { return tp_; }
  int tpRank() const { return ctx_.ranks[2]; }
  /// A pipeline plan's schedule ("1f1b", "zb-h1"; for messages).
  const std::string &schedule() const { return schedule_; }
  /// This rank's stage holds the loss (always, without a pipeline).
  bool hasLoss() const { return hasLoss_; }
  /// The world: pp * dp ranks, and this rank in it.
  int worldSize() const { return world_->size(); }
  int worldRank() const { return world_->rank(); }
  /// The global micro-batch this rank runs as micro-batch k of `step`.
  int64_t globalMicroBatch(int64_t step, int64_t k) const {
    return ((step - 1) * microBatches() + k) * dp_ + ctx_.rank;
  }

  /// Allocates the arena, zeroes it, writes constants, and loads the
  /// parameters and frozen buffers from a safetensors file (names, dtypes
  /// and shapes must match). Throws PlanError / io::IoError.
  void initialize(const std::string &weightsPath, uint64_t seed);

  /// The data-fed buffers, in plan order (a pipeline plan: those of its
  /// load_batch of micro-batch 0, in its order; empty for a stage that
  /// loads nothing). Every other micro-batch's set has the same names,
  /// dtypes and shapes.
  const std::vector<Tensor *> &inputs() const { return inputs_; }
  /// Replaces the run-time settings (dsrt --config: the schedule, the
  /// monitors and what the run prints; the caller has checked that the
  /// compiled-in groups agree).
  void setSettings(const config::PlanSettings &s) { settings_ = s; }
  /// Trained parameters of this rank's plan, in plan order (one buffer per
  /// name; a ZeRO shard is this rank's chunk).
  std::vector<const Tensor *> weights() const;
  /// The training state this rank holds, in plan order: its PARAM,
  /// OPT_STATE and FROZEN buffers (a ZeRO shard: its chunk). Checkpoints
  /// save and restore exactly these.
  std::vector<Tensor *> stateTensors();
  std::vector<const Tensor *> stateTensors() const;
  /// Optimizer state in the NVMe tier has no bytes in memory (data is
  /// null): read and write it a slice at a time (elements of float32).
  bool inNvme(const Tensor &t) const { return t.tier == dsc::plan::NVME; }
  void readState(const Tensor &t, int64_t first, int64_t count, float *dst) const;
  void writeState(const Tensor &t, int64_t first, int64_t count, const float *src);
  /// Where the NVMe tier's file goes instead of the plan's nvme_path (dsrt
  /// --nvme-path); before initialize().
  void setNvmePath(std::string dir) { nvmePath_ = std::move(dir); }
  /// The NVMe tier (null without one).
  const NvmeTier *nvmeTier() const { return nvme_.get(); }
  /// Resumes a run after `appliedSteps` optimizer updates, with fp16's loss
  /// scaler state (checkpoints; the STEP buffer, the lr schedule and Adam's
  /// bias correction follow). Across precisions, as DeepSpeed's universal
  /// checkpoints: a checkpoint of an fp16 run resumes a plan without loss
  /// scaling with its scaler state left aside, and one without a scaler
  /// state resumes an fp16 plan with the scaler starting afresh from the
  /// config; the returned note says which (empty otherwise). Throws
  /// PlanError for a scaler state the config's scaler cannot take.
  std::string restoreProgress(int64_t appliedSteps,
                              const std::optional<LossScalerState> &scaler);
  /// The seed initialize() was given (dropout masks).
  uint64_t seed() const { return ctx_.seed; }
  /// The name and whole shape of every parameter gatherWeights() returns on
  /// world rank 0, in its order (a pipeline plan: every stage's).
  std::vector<std::pair<std::string, std::vector<int64_t>>> allWeights() const;
  /// The whole trained parameters, in plan order: sharded ones all-gathered
  /// (not counted in the step's communication) without their padding,
  /// the others viewing the arena. Valid until the next call or step.
  /// Collective: every rank must call it. A ZeRO-sharded or tp-split
  /// parameter is assembled on its stage's dp index 0 and tp rank 0 only
  /// (the others send their pieces and get no entry for it). A pipeline
  /// plan's world rank 0 gets every stage's parameters (stage order, then
  /// plan order; a parameter several stages hold, from the first), sent by
  /// the other stages' roots (not counted). Throws comm::CommError.
  std::vector<WholeTensor> gatherWeights();
  /// Gives the arena's transient bytes (gradients, activations, working
  /// copies: everything after the persistent state) back to the system,
  /// once no step will run: the weights gathered at the end (a parameter
  /// in the NVMe tier is read into memory) then take their place rather
  /// than add to them. The next step would find them zero.
  void releaseTransients();

  /// One optimizer step. `loadMicroBatch(g, into)` must fill the tensors
  /// `into` (inputs() without a pipeline; a load_batch's INPUT buffers
  /// with one) with global micro-batch g (globalMicroBatch(stepIndex, k)
  /// for micro-batch k of this rank). A loader of one argument,
  /// `loadMicroBatch(g)`, fills inputs() (not for pipeline plans).
  template <typename Loader> void step(int64_t stepIndex, Loader &&loadMicroBatch) {
    using L = std::remove_reference_t<Loader>;
    constexpr bool intoForm = std::is_invocable_v<L &, int64_t, const std::vector<Tensor *> &>;
    beginStep(stepIndex);
    recording_ = stepIndex == timelineStep_ || stepIndex == recordStep_;
    if (recording_)
      timeline_.clear();
    if (pp_ > 1) {
      if constexpr (intoForm) {
        ctx_.load = [](void *l, int64_t global, const std::vector<Tensor *> &into) {
          (*static_cast<L *>(l))(global, into);
        };
        ctx_.loader = const_cast<void *>(static_cast<const void *>(&loadMicroBatch));
      } else {
        throw PlanError("a pipeline plan's step needs a loader (global, into)");
      }
      runList(prologue_, 0, 0);
      runList(epilogue_, 2, 0);
      ctx_.load = nullptr;
      ctx_.loader = nullptr;
    } else {
      runList(prologue_, 0, 0);
      for (int64_t k = 0; k < microBatches(); ++k) {
        int64_t global = globalMicroBatch(stepIndex, k);
        if constexpr (intoForm)
          loadMicroBatch(global, inputs_);
        else
          loadMicroBatch(global);
        backend_->upload(inputs_);
        ctx_.rngCounter = uint64_t(global);
        runList(micro_, 1, k);
      }
      runList(epilogue_, 2, 0);
    }
    recording_ = false;
    endStep();
  }

  /// Why this plan cannot evaluate ("": it can): a plan older than format
  /// 6, or the plan's own reason (Plan.eval_refused).
  std::string evalUnavailable() const;
  /// Evaluation batch `batch` (from 0): the plan's evaluation program (the
  /// instructions marked Instr.eval: forward and loss) over as many
  /// micro-batches as a step, with dropout off. `load` fills them as a
  /// step's loader does, global micro-batch (batch * micro-batches + k) *
  /// dp + rank. It writes no model state, and leaves the step counter, the
  /// loss scaler and the step's metrics as they were; loss() and
  /// globalLoss() then give the batch's loss.
  template <typename Loader> void evaluate(int64_t batch, Loader &&load) {
    using L = std::remove_reference_t<Loader>;
    beginEval(batch);
    try {
      if (pp_ > 1) {
        ctx_.load = [](void *l, int64_t global, const std::vector<Tensor *> &into) {
          (*static_cast<L *>(l))(global, into);
        };
        ctx_.loader = const_cast<void *>(static_cast<const void *>(&load));
        runEvalList(evalLists_[0]);
        runEvalList(evalLists_[2]);
        ctx_.load = nullptr;
        ctx_.loader = nullptr;
      } else {
        runEvalList(evalLists_[0]);
        for (int64_t k = 0; k < microBatches(); ++k) {
          int64_t global = globalMicroBatch(batch + 1, k);
          load(global, inputs_);
          backend_->upload(inputs_);
          ctx_.rngCounter = uint64_t(global);
          runEvalList(evalLists_[1]);
        }
        runEvalList(evalLists_[2]);
      }
    } catch (...) {
      ctx_.load = nullptr;
      ctx_.loader = nullptr;
      endEval(batch, false);
      throw;
    }
    endEval(batch, true);
  }

  /// Record the start and end of every instruction of step `step`
  /// (dsrt --timeline); writeTimeline() writes them as CSV: list
  /// (prologue, micro_batch, epilogue), micro-batch, instruction, op,
  /// start/end in microseconds of the system clock (so the ranks of one
  /// machine share a time axis), then `mb` (the micro-batch the instruction
  /// works on: a pipeline plan's Instr.micro_batch, else the micro-batch
  /// list's iteration) and `phase` (Instr.phase: 0 none, 1 forward,
  /// 2 backward, 3 weight gradient), then the memory: the arena bytes the
  /// plan has in use there (plannedBytes()), the arena, and the resident
  /// set after it. The rank column is the world rank.
  /// Storage is reserved here, not in the step.
  void recordTimeline(int64_t step);
  /// Records every instruction's start and end in step `step` too (the
  /// flops profiler's step), as recorded() returns after it.
  void recordStep(int64_t step) { recordStep_ = step; }
  /// One instruction run of a recorded step: its list (0 prologue, 1
  /// micro_batch, 2 epilogue), micro-batch and times (microseconds).
  struct Event {
    const Instr *instr;
    int list;
    int64_t micro, index, startUs, endUs;
    uint64_t rssBytes = 0; // the process's resident set after it (--timeline)
  };
  /// The arena bytes the plan has in use at each event of the recorded
  /// step: the model state, plus the union of the byte ranges of the
  /// activations live there (touched at or before it and again at or after
  /// it in the step). What the memory plan promised, to set beside the
  /// measured resident set.
  std::vector<uint64_t> plannedBytes() const;
  const std::vector<Event> &recorded() const { return timeline_; }
  /// The phase of an instruction as DeepSpeed's timers and flops profiler
  /// split a step: 0 forward (the evaluation program's instructions, or a
  /// pipeline's phase 1), 1 backward (the other micro-batch instructions, or
  /// phases 2-3), 2 step (the prologue's and epilogue's other instructions:
  /// lr, the gradient exchange after the micro-batches, clipping, updates).
  int phaseOf(const Instr &i, int list) const {
    if (pp_ > 1)
      return i.phase == 1 ? 0 : i.phase >= 2 ? 1 : 2;
    if (i.eval)
      return 0;
    return list == 1 ? 1 : 2;
  }
  /// wall_clock_breakdown: seconds per phase (forward, backward, of which
  /// collectives and their waits, step) summed since the last take.
  void enablePhaseTimes() { phaseTiming_ = true; }
  std::array<double, 4> takePhaseTimes() {
    std::array<double, 4> t = phaseSeconds_;
    phaseSeconds_ = {};
    return t;
  }
  void writeTimeline(const std::string &path) const;

  /// Time every instruction by op kind (dsrt --profile); printProfile()
  /// writes the table. On the CPU each instruction's wall time; on the
  /// GPU its kernels' time between two CUDA events around it, read once
  /// per list (nothing synchronizes between instructions), and the time
  /// the GPU waited between instructions. The GPU's first step (cuBLAS's
  /// and the modules' set-up) is left out when more steps follow.
  void enableProfile() { profile_ = true; }
  void printProfile(std::FILE *out) const;

  /// This rank's loss (0 on a pipeline stage without it). On a device
  /// backend, this and the two below are the host copies, fetched at the
  /// end of each step.
  float loss() const { return hasLoss_ ? *tensors_[plan_.loss_buffer()].f32() : 0.0f; }
  /// The last step's (an evaluation's activations may since have taken
  /// the buffers' bytes: the values as they were before it).
  float gradNorm() const {
    return afterEval_ ? stepGradNorm_ : *tensors_[plan_.grad_norm_buffer()].f32();
  }
  float lr() const { return afterEval_ ? stepLr_ : *tensors_[plan_.lr_buffer()].f32(); }
  /// fp16 plans: the loss scaler (null otherwise). The last step ran with
  /// lossScale(); stepSkipped() says whether it overflowed and was skipped.
  const LossScaler *lossScaler() const { return scaler_ ? &*scaler_ : nullptr; }
  /// The scale the next step multiplies its loss by (1 without fp16).
  double lossScale() const { return scaler_ ? scaler_->scale() : 1.0; }
  bool stepSkipped() const { return lastSkipped_; }
  /// The scale the last step's loss was multiplied by (1 without fp16).
  double stepLossScale() const { return stepScale_; }
  /// Optimizer updates applied so far (steps minus skipped steps).
  int64_t appliedSteps() const { return appliedSteps_; }
  /// The step's loss averaged over the data-parallel ranks (a pipeline
  /// plan: of its last stage), the same on every rank (collective: every
  /// rank must call it; not counted). loss() itself is this rank's.
  double globalLoss();
  /// The collectives and messages of the last step, of both groups (see
  /// comm::Counters).
  const comm::Counters &commCounters() const { return counters_; }
  /// The world communicator (all ranks).
  comm::Communicator &communicator() { return *world_; }
  /// comms_logger: every group's collectives and messages into `log`
  /// (nullptr: stop).
  void setOpLog(comm::OpLog *log, const comm::OpLogOptions &options) {
    for (comm::Communicator *c : ctx_.comms)
      if (c)
        c->setOpLog(log, options);
  }
  /// The communicator of a dist instruction's axis (0 dp, 1 pp).
  comm::Communicator &group(int axis) { return *ctx_.comms[axis]; }

private:
  /// Checks plan.pb's bytes against DIR/plan.sha256 and keeps the weights'
  /// checksum for initialize().
  void setupPipeline(dsc::plan::Plan &top, const std::string &path);
  void validatePipeline();
  void validateBuffers();
  /// Each PARAM_COPY's parameter: the PARAM named like it without its
  /// suffix, in the arena, of its shape (validateBuffers).
  void resolveCopies(const std::string &path);
  /// Casts every PARAM_COPY from its parameter when copiesStale_ (before a
  /// step or an evaluation: what the fused updates keep up to date from
  /// then on).
  void refreshCopies();
  /// Copies the parameters and frozen buffers from a safetensors file
  /// (initialize()), checking the plan's own against plan.sha256.
  void loadWeights(const std::string &path);
  /// Makes `instr` run only on its optimizer steps (plan formats 5 and 7:
  /// Instr.first_step..last_step or Instr.step_classes).
  void rangeInstr(Instr &instr, const dsc::plan::Instr &p, const std::string &name);
  /// Plan.step_rule (format 7), read once.
  ZeroOneRule stepRule_;
  std::vector<Instr> resolve(const google::protobuf::RepeatedPtrField<dsc::plan::Instr> &list,
                             const char *where);
  /// Pairs every collective with one later dist.wait of `list` and replays
  /// them to size the communicator's staging (reservation_).
  void validateCollectives(const std::vector<Instr> &list, const char *where);
  void validateEval();
  void runList(const std::vector<Instr> &list, int which);
  void addPhaseTime(const Instr &i, int list, double seconds);
  void runEvalList(const std::vector<const Instr *> &list) {
    for (const Instr *i : list) {
      i->run(*i, ctx_);
      progressComms();
    }
  }
  void beginEval(int64_t batch);
  void endEval(int64_t batch, bool completed);
  void beginStep(int64_t stepIndex);
  void runList(const std::vector<Instr> &list, int which, int64_t micro);
  void endStep();
  void progressComms() {
    for (comm::Communicator *c : ctx_.comms)
      if (c && c->pending())
        c->progress();
  }

  std::string dir_;
  std::string name_; // "DIR/plan.pb", "DIR/plan.pb (stage 1)" in errors
  std::string weightsSha256_; // DIR/weights.safetensors', from plan.sha256
  dsc::plan::Plan plan_;
  config::PlanSettings settings_;
  std::vector<Tensor> tensors_;
  std::vector<Tensor *> inputs_;
  std::vector<Instr> prologue_, micro_, epilogue_;
  std::vector<const Instr *> evalLists_[3]; // the Instr.eval ones of each list
  int64_t savedStep_ = 0;                    // the step counter during an evaluation
  bool afterEval_ = false;                   // an evaluation ran since the last step
  /// The parameters were loaded or restored since the working copies
  /// (PARAM_COPY) were last cast from them: refreshCopies before a step.
  bool copiesStale_ = true;
  float stepGradNorm_ = 0, stepLr_ = 0;      // the last step's, kept from before it
  void *arena_ = nullptr;
  void *hostTier_ = nullptr; // Plan.host_tier_bytes (ZeRO-Offload's state)
  struct FreeDeleter {
    void operator()(char *p) const { std::free(p); }
  };
  std::unique_ptr<char, FreeDeleter> pipelineBuffers_; // read-ahead, write-behind
  /// pipeline_read: links each tier.fetch to the next one of its list it
  /// may start reading; returns the most NVMe bytes a fetch reads.
  uint64_t linkReadAhead();
  /// The offloaded update's tiles, when `excess` bytes are missing: the
  /// sub_group_size that would fit, or why none does.
  std::string tileAdvice(uint64_t excess) const;
  std::unique_ptr<NvmeTier> nvme_; // Plan.nvme_tier (ZeRO-Infinity's state)
  std::string nvmePath_;
  bool profile_ = false;
  int dp_ = 1;
  int pp_ = 1, stage_ = 0;
  std::string schedule_;
  bool hasLoss_ = true;
  std::unique_ptr<comm::Communicator> ownWorld_; // one rank, when none is given
  std::unique_ptr<comm::Communicator> ownDp_, ownPp_, ownTp_; // split off the world
  int tp_ = 1;
  comm::Communicator *world_ = nullptr;
  comm::Communicator *comm_ = nullptr; // the dp group
  comm::Reservation reservation_[3];   // by axis
  int64_t maxHandle_ = -1;
  comm::Counters counters_; // the last step's, both groups
  /// Pipeline plans: every stage's parameters (name, whole shape), for
  /// gatherWeights() and allWeights().
  struct StageParam {
    std::string name;
    std::vector<int64_t> shape;
    int stage = 0;
  };
  std::vector<StageParam> stageParams_;
  std::vector<std::vector<float>> gathered_; // gatherWeights' storage
  /// By Instr::opId: calls, seconds.
  std::vector<std::pair<int64_t, double>> opTime_ =
      std::vector<std::pair<int64_t, double>>(kPlanInstructions.size());
  std::map<const Instr *, double> instrTime_;                 // seconds
  double deviceIdle_ = 0;      // --profile on the GPU: seconds between instructions
  int64_t stepsBegun_ = 0;     // beginStep calls
  bool profileSkippedFirst_ = false;
  std::vector<Event> timeline_;
  int64_t timelineStep_ = -1;
  int64_t recordStep_ = -1;
  bool phaseTiming_ = false;
  std::array<double, 4> phaseSeconds_ = {};
  bool recording_ = false;
  Tensor *lossScale_ = nullptr;       // the LOSS_SCALE buffer (fp16 plans)
  std::optional<LossScaler> scaler_;  // with it
  int64_t appliedSteps_ = 0;
  bool lastSkipped_ = false;
  double stepScale_ = 1.0;
  Context ctx_;
  /// What the backend works on, and the backend (declared last: it goes
  /// first, while the program it points into is still there).
  std::unique_ptr<ProgramView> program_;
  std::unique_ptr<Backend> backend_;
};

/// Validates one instruction (arity, dtypes, shapes, attributes) and binds
/// its kernel; `where` names it in errors. Defined in Ops.cpp.
void bindInstr(Instr &instr, const std::string &where);

/// Names of every op the runtime executes.
std::vector<std::string> knownOps();

} // namespace dsrt

#endif // DSRT_CORE_EXECUTOR_H
