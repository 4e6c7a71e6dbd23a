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
//===----------------------------------------------------------------------===//
#ifndef DSRT_CORE_EXECUTOR_H
#define DSRT_CORE_EXECUTOR_H

#include "runtime/comm/Communicator.h"
#include "runtime/config/DsConfig.h"
#include "runtime/kernels/cpu/Kernels.h"

#include "plan.pb.h"

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace dsrt {

/// plan.proto format versions this runtime runs.
constexpr unsigned kPlanFormatVersion = 1;

/// A plan that cannot be run; the message names the plan and the place.
class PlanError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A typed view of arena bytes.
struct Tensor {
  dsc::plan::DType dtype = dsc::plan::F32;
  cpu::Shape shape;
  void *data = nullptr;
  uint64_t offset = 0; // in the arena
  int64_t numel = 0;
  std::string name;
  dsc::plan::Role role = dsc::plan::ACTIVATION;
  /// ZeRO shard (shards > 1): this [chunk] buffer is chunk `rank` of the
  /// tensor of fullShape, flattened and zero-padded to shards * chunk.
  cpu::Shape fullShape;
  int64_t fullNumel = 0;
  int64_t shards = 1;

  float *f32() const { return static_cast<float *>(data); }
  int64_t *i64() const { return static_cast<int64_t *>(data); }
  uint8_t *u8() const { return static_cast<uint8_t *>(data); }
  size_t bytes() const;
};

struct Context;
struct Instr;
using KernelFn = void (*)(const Instr &, Context &);

/// An instruction with its operands resolved.
struct Instr {
  KernelFn run = nullptr;
  std::string op;
  std::vector<Tensor *> in, out;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  /// Shapes/geometry the op precomputes at load time (outer/n/inner...).
  int64_t g[4] = {0, 0, 0, 0};
  std::vector<cpu::Shape> shapes; // concat
  std::vector<const float *> ptrs; // concat
  std::vector<comm::TensorArg> comm; // dist collectives: one per input
  uint64_t stagingOffset = 0, stagingBytes = 0; // planned staging (arena)
  float *staging = nullptr;
  std::string label; // "instruction 57 of the epilogue"
};

/// Run state the kernels read.
struct Context {
  const config::TrainConfig *config = nullptr;
  int64_t step = 0;         // optimizer step, from 1
  uint64_t seed = 0;        // --seed
  uint64_t rngCounter = 0;  // dropout draw: the global micro-batch index
  int64_t badIndices = 0;   // gather / loss labels out of range this step
  std::string badIndexOp;   // the first op that saw one
  comm::Communicator *comm = nullptr; // never null once loaded
  int rank = 0;                       // in the data-parallel group
  std::vector<comm::Handle> handles;  // the plan's handle -> its collective
};

/// A whole trained tensor to write (Executor::gatherWeights).
struct WholeTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float *data = nullptr;
};

class Executor {
public:
  /// Loads `dir`/plan.pb and validates it for the ranks of `comm` (null:
  /// one rank). `comm` must outlive the executor. Throws PlanError.
  explicit Executor(const std::string &dir, comm::Communicator *comm = nullptr);
  ~Executor();

  const dsc::plan::Plan &plan() const { return plan_; }
  const config::TrainConfig &config() const { return config_; }
  int64_t microBatches() const { return plan_.program().micro_batches(); }
  int64_t microBatchSize() const { return plan_.micro_batch_size(); }
  /// Data-parallel ranks (the plan's dp; 1 for dp 0) and this rank.
  int dp() const { return dp_; }
  int rank() const { return ctx_.rank; }
  /// The global micro-batch this rank runs as micro-batch k of `step`.
  int64_t globalMicroBatch(int64_t step, int64_t k) const {
    return ((step - 1) * microBatches() + k) * dp_ + ctx_.rank;
  }

  /// Allocates the arena, zeroes it, writes constants, and loads the
  /// parameters and frozen buffers from a safetensors file (names, dtypes
  /// and shapes must match). Throws PlanError / io::IoError.
  void initialize(const std::string &weightsPath, uint64_t seed);

  /// The data-fed buffers, in plan order.
  const std::vector<Tensor *> &inputs() const { return inputs_; }
  /// Replaces the baked config (dsrt --config: the schedule and
  /// steps_per_print may change at run time).
  void setConfig(const config::TrainConfig &cfg) { config_ = cfg; }
  /// Trained parameters, in plan order (one buffer per name; a ZeRO
  /// shard is this rank's chunk).
  std::vector<const Tensor *> weights() const;
  /// The whole trained parameters, in plan order: sharded ones all-gathered
  /// (not counted in the step's communication) without their padding,
  /// the others viewing the arena. Valid until the next call or step.
  /// Collective: every rank must call it. Throws comm::CommError.
  std::vector<WholeTensor> gatherWeights();

  /// One optimizer step. `loadMicroBatch(g)` must fill inputs() with
  /// global micro-batch g (globalMicroBatch(stepIndex, k) for micro-batch
  /// k of this rank).
  template <typename Loader> void step(int64_t stepIndex, Loader &&loadMicroBatch) {
    beginStep(stepIndex);
    recording_ = stepIndex == timelineStep_;
    runList(prologue_, 0, 0);
    for (int64_t k = 0; k < microBatches(); ++k) {
      int64_t global = globalMicroBatch(stepIndex, k);
      loadMicroBatch(global);
      ctx_.rngCounter = uint64_t(global);
      runList(micro_, 1, k);
    }
    runList(epilogue_, 2, 0);
    recording_ = false;
    endStep();
  }

  /// Record the start and end of every instruction of step `step`
  /// (dsrt --timeline); writeTimeline() writes them as CSV: list
  /// (prologue, micro_batch, epilogue), micro-batch, instruction, op, and
  /// start/end in microseconds of the system clock, so the ranks of one
  /// machine share a time axis. Storage is reserved here, not in the step.
  void recordTimeline(int64_t step);
  void writeTimeline(const std::string &path) const;

  /// Time every instruction by op kind (dsrt --profile); printProfile()
  /// writes the table.
  void enableProfile() { profile_ = true; }
  void printProfile(std::FILE *out) const;

  float loss() const { return *tensors_[plan_.loss_buffer()].f32(); }
  float gradNorm() const { return *tensors_[plan_.grad_norm_buffer()].f32(); }
  float lr() const { return *tensors_[plan_.lr_buffer()].f32(); }
  /// The step's loss averaged over the ranks (collective: every rank must
  /// call it; not counted). loss() itself is this rank's.
  double globalLoss();
  /// The collectives of the last step (see comm::Counters).
  const comm::Counters &commCounters() const { return comm_->counters(); }
  comm::Communicator &communicator() { return *comm_; }

private:
  void validateBuffers();
  std::vector<Instr> resolve(const google::protobuf::RepeatedPtrField<dsc::plan::Instr> &list,
                             const char *where);
  /// Pairs every collective with one later dist.wait of `list` and replays
  /// them to size the communicator's staging (reservation_).
  void validateCollectives(const std::vector<Instr> &list, const char *where);
  void runList(const std::vector<Instr> &list);
  void beginStep(int64_t stepIndex);
  void runList(const std::vector<Instr> &list, int which, int64_t micro);
  void endStep();

  std::string dir_;
  dsc::plan::Plan plan_;
  config::TrainConfig config_;
  std::vector<Tensor> tensors_;
  std::vector<Tensor *> inputs_;
  std::vector<Instr> prologue_, micro_, epilogue_;
  void *arena_ = nullptr;
  bool profile_ = false;
  int dp_ = 1;
  std::unique_ptr<comm::Communicator> ownComm_; // one rank, when none is given
  comm::Communicator *comm_ = nullptr;
  comm::Reservation reservation_;
  int64_t maxHandle_ = -1;
  std::vector<std::vector<float>> gathered_; // gatherWeights' storage
  std::map<std::string, std::pair<int64_t, double>> opTime_; // calls, seconds
  struct Event {
    const Instr *instr;
    int list;
    int64_t micro, index, startUs, endUs;
  };
  std::vector<Event> timeline_;
  int64_t timelineStep_ = -1;
  bool recording_ = false;
  Context ctx_;
};

/// Validates one instruction (arity, dtypes, shapes, attributes) and binds
/// its kernel; `where` names it in errors. Defined in Ops.cpp.
void bindInstr(Instr &instr, const std::string &where);

/// Names of every op the runtime executes.
std::vector<std::string> knownOps();

} // namespace dsrt

#endif // DSRT_CORE_EXECUTOR_H
