//===- PassEnums.h - the value sets of dsc's pass options -------*- C++ -*-===//
//
// Options whose values are a set are enums, so that a wrong value is refused
// where the pipeline is parsed (naming the option and the values it takes),
// not when the pass reaches it. Each enum has its option spelling
// (`*Name`) for IR attributes and messages, and the `llvm::cl::values`
// list Passes.td and the training pipeline's options share.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PASSES_PASSENUMS_H
#define DSC_PASSES_PASSENUMS_H

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

namespace dsc {

/// A floating-point element type a pass computes, accumulates or
/// communicates in.
enum class FloatKind { FP32, BF16, FP16 };

/// Partition methods of pipeline-split.
enum class PartitionMethod { Uniform, Parameters, Cost };

/// Pipeline schedules of pipeline-schedule.
enum class PipelineScheduleKind { OneFOneB, ZBH1 };

/// Activation checkpointing modes of recompute.
enum class RecomputeMode { None, Layers, Selective };

/// What nn-fusion fuses beyond the layout folds (transposes into GEMMs,
/// GELU's chain), which it always does: none, attention (nn.attention), or
/// all it can.
enum class FuseKind { None, Attention, All };

/// Parameter updates of optimizer.
enum class OptimizerKind { Adam, AdamW, SGD, Lamb, Lion, Adagrad, OneBitAdam, ZeroOneAdam,
                           OneBitLamb };

/// Memory tiers of offload (DeepSpeed's offload_optimizer / offload_param
/// device): none, cpu (host memory) or nvme (a file per rank).
enum class OffloadTier { None, Cpu, Nvme };

/// lr schedules of optimizer: DeepSpeed's scheduler types, and constant
/// (no scheduler: the optimizer's lr).
enum class LrScheduleKind {
  Constant, WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest
};

inline llvm::StringRef offloadTierName(OffloadTier t) {
  switch (t) {
  case OffloadTier::None: return "none";
  case OffloadTier::Cpu: return "cpu";
  case OffloadTier::Nvme: return "nvme";
  }
  return "?";
}
/// DeepSpeed's name (the train.lr_schedule op's kind).
inline llvm::StringRef lrScheduleName(LrScheduleKind k) {
  switch (k) {
  case LrScheduleKind::Constant: return "constant";
  case LrScheduleKind::WarmupLR: return "WarmupLR";
  case LrScheduleKind::WarmupDecayLR: return "WarmupDecayLR";
  case LrScheduleKind::WarmupCosineLR: return "WarmupCosineLR";
  case LrScheduleKind::OneCycle: return "OneCycle";
  case LrScheduleKind::LRRangeTest: return "LRRangeTest";
  }
  return "?";
}

inline llvm::StringRef floatKindName(FloatKind k) {
  switch (k) {
  case FloatKind::FP32: return "fp32";
  case FloatKind::BF16: return "bf16";
  case FloatKind::FP16: return "fp16";
  }
  return "?";
}
/// The MLIR element type of `k`.
inline mlir::FloatType floatKindType(mlir::MLIRContext *ctx, FloatKind k) {
  switch (k) {
  case FloatKind::BF16: return mlir::BFloat16Type::get(ctx);
  case FloatKind::FP16: return mlir::Float16Type::get(ctx);
  case FloatKind::FP32: break;
  }
  return mlir::Float32Type::get(ctx);
}
inline llvm::StringRef partitionMethodName(PartitionMethod m) {
  switch (m) {
  case PartitionMethod::Uniform: return "uniform";
  case PartitionMethod::Parameters: return "parameters";
  case PartitionMethod::Cost: return "cost";
  }
  return "?";
}
inline llvm::StringRef pipelineScheduleName(PipelineScheduleKind s) {
  return s == PipelineScheduleKind::ZBH1 ? "zb-h1" : "1f1b";
}
inline llvm::StringRef recomputeModeName(RecomputeMode m) {
  switch (m) {
  case RecomputeMode::None: return "none";
  case RecomputeMode::Layers: return "layers";
  case RecomputeMode::Selective: return "selective";
  }
  return "?";
}
inline llvm::StringRef fuseKindName(FuseKind k) {
  switch (k) {
  case FuseKind::None: return "none";
  case FuseKind::Attention: return "attention";
  case FuseKind::All: return "all";
  }
  return "?";
}
inline llvm::StringRef optimizerKindName(OptimizerKind k) {
  switch (k) {
  case OptimizerKind::Adam: return "adam";
  case OptimizerKind::AdamW: return "adamw";
  case OptimizerKind::SGD: return "sgd";
  case OptimizerKind::Lamb: return "lamb";
  case OptimizerKind::Lion: return "lion";
  case OptimizerKind::Adagrad: return "adagrad";
  case OptimizerKind::OneBitAdam: return "onebitadam";
  case OptimizerKind::ZeroOneAdam: return "zerooneadam";
  case OptimizerKind::OneBitLamb: return "onebitlamb";
  }
  return "?";
}

} // namespace dsc

// The value lists of the options (macros: llvm::cl::values is a variadic
// template whose result is only passed along, and Passes.td pastes these
// into its generated option declarations).
#define DSC_FLOAT_KIND_VALUES                                                                      \
  ::llvm::cl::values(clEnumValN(::dsc::FloatKind::FP32, "fp32", "IEEE float32"),                   \
                     clEnumValN(::dsc::FloatKind::BF16, "bf16", "bfloat16"),                       \
                     clEnumValN(::dsc::FloatKind::FP16, "fp16", "IEEE half"))
#define DSC_LOW_FLOAT_KIND_VALUES                                                                  \
  ::llvm::cl::values(clEnumValN(::dsc::FloatKind::BF16, "bf16", "bfloat16"),                       \
                     clEnumValN(::dsc::FloatKind::FP16, "fp16", "IEEE half"))
#define DSC_PARTITION_METHOD_VALUES                                                                \
  ::llvm::cl::values(                                                                              \
      clEnumValN(::dsc::PartitionMethod::Uniform, "uniform", "equal layer counts"),                \
      clEnumValN(::dsc::PartitionMethod::Parameters, "parameters", "balanced parameters"),         \
      clEnumValN(::dsc::PartitionMethod::Cost, "cost", "balanced flops"))
#define DSC_PIPELINE_SCHEDULE_VALUES                                                               \
  ::llvm::cl::values(                                                                              \
      clEnumValN(::dsc::PipelineScheduleKind::OneFOneB, "1f1b", "PipeDream-Flush"),                \
      clEnumValN(::dsc::PipelineScheduleKind::ZBH1, "zb-h1", "zero-bubble H1"))
#define DSC_RECOMPUTE_MODE_VALUES                                                                  \
  ::llvm::cl::values(                                                                              \
      clEnumValN(::dsc::RecomputeMode::None, "none", "keep every activation"),                     \
      clEnumValN(::dsc::RecomputeMode::Layers, "layers", "keep each layer's input"),               \
      clEnumValN(::dsc::RecomputeMode::Selective, "selective",                                     \
                 "keep the layer inputs and GEMM outputs"))
#define DSC_FUSE_KIND_VALUES                                                                       \
  ::llvm::cl::values(                                                                              \
      clEnumValN(::dsc::FuseKind::None, "none", "only the layout folds and GELU"),                  \
      clEnumValN(::dsc::FuseKind::Attention, "attention", "scaled dot-product attention too"),     \
      clEnumValN(::dsc::FuseKind::All, "all", "everything nn-fusion can fuse"))
#define DSC_OPTIMIZER_KIND_VALUES                                                                  \
  ::llvm::cl::values(clEnumValN(::dsc::OptimizerKind::Adam, "adam", "Adam (L2 weight decay)"),     \
                     clEnumValN(::dsc::OptimizerKind::AdamW, "adamw", "AdamW (decoupled)"),        \
                     clEnumValN(::dsc::OptimizerKind::SGD, "sgd", "SGD with momentum"),            \
                     clEnumValN(::dsc::OptimizerKind::Lamb, "lamb", "LAMB (FusedLamb)"),           \
                     clEnumValN(::dsc::OptimizerKind::Lion, "lion", "Lion (FusedLion)"),           \
                     clEnumValN(::dsc::OptimizerKind::Adagrad, "adagrad", "Adagrad (torch.optim)"), \
                     clEnumValN(::dsc::OptimizerKind::OneBitAdam, "onebitadam",                    \
                                "DeepSpeed's OnebitAdam (1-bit compressed momentum)"),     \
                     clEnumValN(::dsc::OptimizerKind::ZeroOneAdam, "zerooneadam",                  \
                                "DeepSpeed's ZeroOneAdam (0/1 Adam: local steps, 1-bit syncs)"), \
                     clEnumValN(::dsc::OptimizerKind::OneBitLamb, "onebitlamb",                    \
                                "DeepSpeed's OnebitLamb (1-bit compressed LAMB)"))

#define DSC_OFFLOAD_TIER_VALUES                                                                    \
  ::llvm::cl::values(clEnumValN(::dsc::OffloadTier::None, "none", "not offloaded"),                \
                     clEnumValN(::dsc::OffloadTier::Cpu, "cpu", "host memory"),                    \
                     clEnumValN(::dsc::OffloadTier::Nvme, "nvme", "a file per rank"))
#define DSC_LR_SCHEDULE_VALUES                                                                     \
  ::llvm::cl::values(                                                                              \
      clEnumValN(::dsc::LrScheduleKind::Constant, "constant", "the optimizer's lr"),              \
      clEnumValN(::dsc::LrScheduleKind::WarmupLR, "WarmupLR", "DeepSpeed's WarmupLR"),            \
      clEnumValN(::dsc::LrScheduleKind::WarmupDecayLR, "WarmupDecayLR",                           \
                 "DeepSpeed's WarmupDecayLR"),                                                     \
      clEnumValN(::dsc::LrScheduleKind::WarmupCosineLR, "WarmupCosineLR",                         \
                 "DeepSpeed's WarmupCosineLR"),                                                    \
      clEnumValN(::dsc::LrScheduleKind::OneCycle, "OneCycle", "DeepSpeed's OneCycle"),            \
      clEnumValN(::dsc::LrScheduleKind::LRRangeTest, "LRRangeTest", "DeepSpeed's LRRangeTest"))

#endif // DSC_PASSES_PASSENUMS_H
