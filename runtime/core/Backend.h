//===- Backend.h - the device a plan's instructions run on ------*- C++ -*-===//
//
// The executor (Executor.h) loads and validates a plan into a
// device-independent program: the buffers at their arena offsets in host
// memory, and every instruction checked and bound to its CPU kernel. A
// Backend is where that program runs, in the shape of IREE's HAL (one
// device interface, one folder per driver): it binds the instructions to
// its own kernels, allocates its memory, moves state between the host copy
// and itself, and synchronizes and times its work. The executor calls it
// at fixed points and never asks which device it is:
//
//   bind      once, after validation: re-bind what runs on the device, or
//             refuse (DeviceUnsupported) with the executor left as it was
//   allocate  initialize(): the device's memory, the host arena copied in
//   upload    the inputs of each micro-batch, filled on the host
//   beginStep / endStep   around each step and evaluation batch
//   pull      before the host copy is read (weights, checkpoints)
//   hostWritten   after the host copy was written (a restore)
//   synchronize   after each instruction when --timeline times it
//   runTimed  --profile: runs a list, timing each instruction itself
//
// Backends: runtime/backends/cpu (the host arena is the device; every
// hook is empty) and runtime/backends/cuda (the device arena, CUDA kernels
// and cuBLAS; NoCuda.cpp where dsrt is built without CUDA).
// docs/architecture.md ("Backends") says how a new one is added.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_CORE_BACKEND_H
#define DSRT_CORE_BACKEND_H

#include "plan.pb.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dsrt {

struct Tensor;
struct Instr;
struct Context;

/// The devices dsrt runs plans on (dsrt --device).
enum class Device { Cpu, Cuda };

/// The parts of a loaded program a backend works on; the executor owns
/// them and they outlive the backend.
struct ProgramView {
  const std::string &name;            // "DIR/plan.pb" in errors
  const dsc::plan::Plan &plan;
  std::vector<Tensor> &tensors;       // by buffer index
  void *const &hostArena;             // allocated by initialize()
  std::vector<Instr> *lists[3];       // prologue, micro-batch, epilogue
  Context &ctx;
  Tensor *const &lossScale;           // fp16's LOSS_SCALE buffer, or null
  const bool &hasLoss;
  int worldSize;
  /// Lets pending collectives advance (between instructions).
  std::function<void()> progress;
};

/// --profile's per-op and per-instruction times, which runTimed adds to.
struct ProfileTimes {
  std::vector<std::pair<int64_t, double>> &byOp; // by Instr::opId: calls, seconds
  std::map<const Instr *, double> &byInstr;                  // seconds
  double &idle; // seconds the device waited between instructions
};

class Backend {
public:
  virtual ~Backend() = default;
  /// "cpu" or "cuda" (messages).
  virtual const char *name() const = 0;
  /// What the run's summary and profile say the kernels ran on ("the CPU",
  /// "NVIDIA H200").
  virtual std::string deviceName() const = 0;
  /// Whether the kernels work on the host arena itself (no copies).
  virtual bool onHost() const = 0;
  /// Re-binds the program's instructions to this device's kernels, or
  /// throws DeviceUnsupported naming what it cannot run; on a throw the
  /// program is as it was.
  virtual void bind(ProgramView &program) = 0;

  // The hooks below do nothing by default: what a device whose memory is
  // the host arena (the CPU) needs. A device with memory of its own
  // overrides them all.

  /// Allocates the device's memory and copies the host arena in.
  virtual void allocate() {}
  virtual void upload(const std::vector<Tensor *> &) {}
  virtual void beginStep() {}
  virtual void endStep() {}
  /// Brings the host copy up to date (a no-op when it is).
  virtual void pull() const {}
  /// The host copy of the state was written: the device takes it before
  /// the next step.
  virtual void hostWritten() {}
  virtual void synchronize() const {}
  /// Whether runTimed times the instructions (else the executor times
  /// them on the host clock).
  virtual bool timesItsKernels() const { return false; }
  virtual void runTimed(const std::vector<Instr> &, ProfileTimes &) {}
};

/// The backend of `device`: the CPU's, or the CUDA one (which may refuse
/// in bind: no device, a build without CUDA, a plan it cannot run).
std::unique_ptr<Backend> makeBackend(Device device);

/// The CPU backend (runtime/backends/cpu).
std::unique_ptr<Backend> makeCpuBackend();
/// The CUDA backend (runtime/backends/cuda); where dsrt is built without
/// CUDA, one whose bind refuses saying so.
std::unique_ptr<Backend> makeCudaBackend();
/// Whether a CUDA device is usable by this dsrt, and why not.
bool cudaUsable(std::string *why);
/// The CUDA backend's verdict on one instruction the CPU has bound (the
/// kernel-coverage check over the op table): "" when it has a kernel for
/// it, else its refusal, which names the instruction (--device auto then
/// runs the plan on the CPU). Chooses the kernel only: needs no device.
std::string cudaKernelRefusal(Instr &instr);

} // namespace dsrt

#endif // DSRT_CORE_BACKEND_H
