//===- NoCuda.cpp - the CUDA backend where dsrt is built without CUDA -----===//
//
// Built instead of CudaBackend.cpp when no CUDA compiler was found (and in
// the sanitizer and fuzzing builds): --device cuda is refused by name.
//
//===----------------------------------------------------------------------===//
#include "runtime/core/Backend.h"
#include "runtime/core/Executor.h"

namespace dsrt {

struct DeviceState {};

namespace {

const char *kWhy = "this dsrt was built without CUDA (no nvcc was found when it was configured)";

class NoCudaBackend final : public Backend {
public:
  const char *name() const override { return "cuda"; }
  std::string deviceName() const override { return std::string(); }
  bool onHost() const override { return false; }
  // Refuses every program, so no other hook is reached.
  void bind(ProgramView &program) override {
    throw DeviceUnsupported(program.name + ": --device cuda: " + kWhy);
  }
};

} // namespace

std::unique_ptr<Backend> makeCudaBackend() { return std::make_unique<NoCudaBackend>(); }

bool cudaUsable(std::string *why) {
  if (why)
    *why = kWhy;
  return false;
}

std::string cudaKernelRefusal(Instr &) { return kWhy; }

} // namespace dsrt
