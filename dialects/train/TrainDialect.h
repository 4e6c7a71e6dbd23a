//===- TrainDialect.h - the train dialect -----------------------*- C++ -*-===//
#ifndef DSC_DIALECTS_TRAIN_TRAINDIALECT_H
#define DSC_DIALECTS_TRAIN_TRAINDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "plan/StepRule.h"

#include "dialects/train/TrainDialect.h.inc"
#include "dialects/train/TrainInterfaces.h.inc"
#define GET_OP_CLASSES
#include "dialects/train/TrainOps.h.inc"

#endif // DSC_DIALECTS_TRAIN_TRAINDIALECT_H
