//===- Fusions.h - the CUDA backend's bind-time fusions ----------*- C++ -*-===//
//
// Two fusions the CUDA backend applies to the validated program before it
// binds the kernels (CudaBackend.cpp): each gives the unfused bits. They
// only mark instructions, so they build and are tested without CUDA.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_BACKENDS_CUDA_FUSIONS_H
#define DSRT_BACKENDS_CUDA_FUSIONS_H

#include "runtime/core/OpsInternal.h"

namespace dsrt::ops {

/// Marks the attention softmax chains of `list` that one
/// kernel computes (FuseSoftmax.cpp): the scale and mask instructions get
/// `fused.absorbed`, the softmax or its gradient the operands it takes
/// over. Returns the number of instructions absorbed.
int fuseSoftmaxChains(std::vector<Instr> &list);

/// Marks the casts around a cross-entropy on 16-bit logits
/// that its kernels take over (FuseCrossEntropy.cpp): cast(bf16 -> f32)
/// read only by nn.cross_entropy and nn.cross_entropy_grad, and the
/// cast(f32 -> bf16) of the gradient right after it. The two read the
/// bf16 logits (`fused.x`) and the gradient is written rounded to bf16
/// (`fused.out`), the same bits. Returns the number of casts absorbed.
/// `lists`: every list of the step (prologue, micro-batch, epilogue).
int fuseCrossEntropyCasts(const std::vector<std::vector<Instr> *> &lists);

} // namespace dsrt::ops

#endif // DSRT_BACKENDS_CUDA_FUSIONS_H
