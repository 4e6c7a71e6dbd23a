//===- LossScale.h - fp16's loss-scale argument ------------------*- C++ -*-===//
//
// An fp16 step (mixed-precision marks the module `train.precision = "fp16"`)
// takes its loss scale as an f32 scalar argument marked `train.loss_scale`,
// which the runtime writes before every step: autodiff seeds the backward
// pass with it (the gradients are those of scale x loss) and the optimizer
// pass gives it to clip_grad_norm, which divides it out and detects
// overflow. Every step function of the module (each pipeline stage) has one.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PASSES_LOSSSCALE_H
#define DSC_PASSES_LOSSSCALE_H

#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace dsc {

/// Whether the module's step scales its loss (fp16 mixed precision).
inline bool scalesLoss(mlir::ModuleOp module) {
  auto p = module->getAttrOfType<mlir::StringAttr>(train::TrainDialect::kPrecision);
  return p && p.getValue() == "fp16";
}

/// The function's `train.loss_scale` argument, appended if it has none.
inline mlir::FailureOr<mlir::Value> lossScaleArgument(mlir::func::FuncOp fn) {
  for (mlir::BlockArgument a : fn.getArguments())
    if (fn.getArgAttr(a.getArgNumber(), train::TrainDialect::kLossScale))
      return mlir::Value(a);
  mlir::Builder b(fn.getContext());
  unsigned index = fn.getNumArguments();
  if (mlir::failed(fn.insertArgument(
          index, mlir::RankedTensorType::get({}, b.getF32Type()),
          b.getDictionaryAttr(b.getNamedAttr(train::TrainDialect::kLossScale, b.getUnitAttr())),
          fn.getLoc())))
    return mlir::failure();
  return mlir::Value(fn.getArgument(index));
}

} // namespace dsc

#endif // DSC_PASSES_LOSSSCALE_H
