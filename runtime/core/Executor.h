//===- Executor.h - load, validate and run a dsc plan -----------*- C++ -*-===//
//
// A plan is validated completely before anything runs: format version,
// every buffer inside the arena, every instruction's op known with the right
// number and types of operands and attributes and consistent shapes. The
// arena is allocated once; the step loop calls kernels on pre-resolved
// pointers and never allocates.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_CORE_EXECUTOR_H
#define DSRT_CORE_EXECUTOR_H

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
};

/// Run state the kernels read.
struct Context {
  const config::TrainConfig *config = nullptr;
  int64_t step = 0;         // optimizer step, from 1
  uint64_t seed = 0;        // --seed
  uint64_t rngCounter = 0;  // dropout draw: (step - 1) * micro_batches + micro
  int64_t badIndices = 0;   // gather / loss labels out of range this step
  std::string badIndexOp;   // the first op that saw one
};

class Executor {
public:
  /// Loads `dir`/plan.pb and validates it. Throws PlanError.
  explicit Executor(const std::string &dir);
  ~Executor();

  const dsc::plan::Plan &plan() const { return plan_; }
  const config::TrainConfig &config() const { return config_; }
  int64_t microBatches() const { return plan_.program().micro_batches(); }
  int64_t microBatchSize() const { return plan_.micro_batch_size(); }

  /// Allocates the arena, zeroes it, writes constants, and loads the
  /// parameters and frozen buffers from a safetensors file (names, dtypes
  /// and shapes must match). Throws PlanError / io::IoError.
  void initialize(const std::string &weightsPath, uint64_t seed);

  /// The data-fed buffers, in plan order.
  const std::vector<Tensor *> &inputs() const { return inputs_; }
  /// Replaces the baked config (dsrt --config: the schedule and
  /// steps_per_print may change at run time).
  void setConfig(const config::TrainConfig &cfg) { config_ = cfg; }
  /// Trained parameters, in plan order (one buffer per name).
  std::vector<const Tensor *> weights() const;

  /// One optimizer step. `loadMicroBatch(k)` must fill inputs() for
  /// micro-batch k of this step.
  template <typename Loader> void step(int64_t stepIndex, Loader &&loadMicroBatch) {
    beginStep(stepIndex);
    runList(prologue_);
    for (int64_t k = 0; k < microBatches(); ++k) {
      loadMicroBatch(k);
      ctx_.rngCounter = uint64_t(stepIndex - 1) * uint64_t(microBatches()) + uint64_t(k);
      runList(micro_);
    }
    runList(epilogue_);
    endStep();
  }

  /// Time every instruction by op kind (dsrt --profile); printProfile()
  /// writes the table.
  void enableProfile() { profile_ = true; }
  void printProfile(std::FILE *out) const;

  float loss() const { return *tensors_[plan_.loss_buffer()].f32(); }
  float gradNorm() const { return *tensors_[plan_.grad_norm_buffer()].f32(); }
  float lr() const { return *tensors_[plan_.lr_buffer()].f32(); }

private:
  void validateBuffers();
  std::vector<Instr> resolve(const google::protobuf::RepeatedPtrField<dsc::plan::Instr> &list,
                             const char *where);
  void runList(const std::vector<Instr> &list);
  void beginStep(int64_t stepIndex);
  void endStep();

  std::string dir_;
  dsc::plan::Plan plan_;
  config::TrainConfig config_;
  std::vector<Tensor> tensors_;
  std::vector<Tensor *> inputs_;
  std::vector<Instr> prologue_, micro_, epilogue_;
  void *arena_ = nullptr;
  bool profile_ = false;
  std::map<std::string, std::pair<int64_t, double>> opTime_; // calls, seconds
  Context ctx_;
};

/// Validates one instruction (arity, dtypes, shapes, attributes) and binds
/// its kernel; `where` names it in errors. Defined in Ops.cpp.
void bindInstr(Instr &instr, const std::string &where);

/// Names of every op the runtime executes.
std::vector<std::string> knownOps();

} // namespace dsrt

#endif // DSRT_CORE_EXECUTOR_H
