// The headers nearly every compiler source parses: MLIR's IR, the func and
// arith dialects, and dsc's own three dialects. cmake/Precompiled.cmake
// precompiles them once per library (DSC_PRECOMPILED_HEADERS), which takes a
// third off each source's compile on the 2-core CI machine (docs/fuzzing.md,
// "CI"). Sources still include what they use; this header only adds.
#pragma once

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Pass/Pass.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include "dialects/dist/DistDialect.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>
