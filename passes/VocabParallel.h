//===- VocabParallel.h - the vocabulary-parallel part of tensor-parallel -===//
#ifndef DSC_PASSES_VOCABPARALLEL_H
#define DSC_PASSES_VOCABPARALLEL_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dsc {

struct VocabParallelCounts {
  int64_t heads = 0;      // LM heads + cross-entropies split over the vocabulary
  int64_t embeddings = 0; // embedding gathers of a split table
};

/// Splits the LM heads that feed an nn.cross_entropy, and their embedding
/// tables, over the vocabulary (VocabParallel.cpp). Runs on the forward
/// graph before the tensor-parallel split propagation, which then leaves
/// them alone (`dist.tp` on the GEMM, `dist.tp_split` on the parameters).
mlir::LogicalResult vocabParallel(mlir::func::FuncOp fn, int64_t tp, VocabParallelCounts &counts);

} // namespace dsc

#endif // DSC_PASSES_VOCABPARALLEL_H
