//===- NoCuda.cpp - the device executor where dsrt is built without CUDA --===//
//
// Built instead of OpsCuda.cpp when no CUDA compiler was found (and in the
// sanitizer and fuzzing builds): Device::Cuda is refused by name, and the
// device hooks of the step are never reached.
//
//===----------------------------------------------------------------------===//
#include "runtime/core/Executor.h"

namespace dsrt {

struct DeviceState {};

namespace {
const char *kWhy = "this dsrt was built without CUDA (no nvcc was found when it was configured)";
} // namespace

bool Executor::cudaUsable(std::string *why) {
  if (why)
    *why = kWhy;
  return false;
}
std::string Executor::cudaDeviceName() { return std::string(); }
void Executor::setupDevice() {
  throw DeviceUnsupported(name_ + ": --device cuda: " + kWhy);
}
void Executor::initDevice() {}
void Executor::deviceBeginStep() {}
void Executor::deviceUpload(const std::vector<Tensor *> &) {}
void Executor::devicePull() const {}
void Executor::deviceEndStep() {}
void Executor::deviceSync() const {}
void Executor::profileDeviceList(const std::vector<Instr> &) {}
void Executor::destroyDevice() {}

} // namespace dsrt
