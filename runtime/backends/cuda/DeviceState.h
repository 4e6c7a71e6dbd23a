//===- DeviceState.h - the CUDA backend's device state ----------*- C++ -*-===//
//
// What CudaBackend.cpp allocates at initialize() and the device kernels
// reach through Context::gpu: the arena, the scratch (the largest any
// instruction needs), the bad-index counters, the sum of squares and the
// cuBLAS handle. Shared with the bindings kept in their own files
// (Attention.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_BACKENDS_CUDA_DEVICESTATE_H
#define DSRT_BACKENDS_CUDA_DEVICESTATE_H

#include "runtime/core/OpsInternal.h"
#include "runtime/kernels/cuda/Kernels.h"

#include <memory>
#include <string>
#include <vector>

namespace dsrt {

struct DeviceState {
  std::unique_ptr<cuda::Blas> blas;
  void *arena = nullptr;
  uint64_t arenaBytes = 0;
  void *scratch = nullptr;
  size_t scratchBytes = 0; // the largest any instruction needs
  int64_t *bad = nullptr;  // one counter per instruction that counts
  std::vector<const Instr *> badInstrs;
  std::vector<int64_t> badHost;
  double *sumSq = nullptr;
  std::unique_ptr<cuda::Events> events; // --profile: two per instruction
  ~DeviceState() {
    blas.reset();
    for (void *p : {arena, scratch, static_cast<void *>(bad), static_cast<void *>(sumSq)})
      if (p)
        cuda::deviceFree(p);
  }
};

/// nn.attention and nn.attention_grad on the device (Attention.cpp): sets
/// i.run and returns the scratch bytes the call needs, or throws
/// DeviceUnsupported naming `where`.
size_t bindCudaAttention(Instr &i, const std::string &where);
/// nn.matmul_epilogue on the device (Epilogue.cpp), likewise.
size_t bindCudaEpilogue(Instr &i, const std::string &where);
/// train.clip_coef and train.fused_adam on the device (FusedAdam.cpp),
/// likewise.
size_t bindCudaClipCoef(Instr &i, const std::string &where);
size_t bindCudaFusedAdam(Instr &i, const std::string &where);

} // namespace dsrt

#endif // DSRT_BACKENDS_CUDA_DEVICESTATE_H
