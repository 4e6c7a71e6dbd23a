//===- Backend.cpp - choosing a plan's backend ----------------------------===//

#include "runtime/core/Backend.h"

namespace dsrt {

std::unique_ptr<Backend> makeBackend(Device device) {
  return device == Device::Cuda ? makeCudaBackend() : makeCpuBackend();
}

} // namespace dsrt
