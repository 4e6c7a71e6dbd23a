//===- CpuBackend.cpp - the program on the host's cores -------------------===//
//
// The CPU backend: the executor's validating binder has already bound every
// instruction to its CPU kernel (runtime/core/Ops*.cpp, runtime/kernels/
// cpu), and the host arena is the device's memory, so it keeps Backend's
// empty hooks and --profile times the kernels on the host clock.
//
//===----------------------------------------------------------------------===//
#include "runtime/core/Backend.h"

namespace dsrt {
namespace {

class CpuBackend final : public Backend {
public:
  const char *name() const override { return "cpu"; }
  std::string deviceName() const override { return "the CPU"; }
  bool onHost() const override { return true; }
  void bind(ProgramView &) override {}
};

} // namespace

std::unique_ptr<Backend> makeCpuBackend() { return std::make_unique<CpuBackend>(); }

} // namespace dsrt
