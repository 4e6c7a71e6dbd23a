//===- VerifyDifferentiated.cpp - the step has one gradient per parameter -===//
//
// The check at the end of the forward phase (after autodiff, and recompute
// when it runs): every function that returns gradients returns exactly one
// `train.grad` per `train.param` argument, named after it and of its type,
// and each gradient names a parameter. The passes after it (accumulation,
// the optimizer, data parallelism, ZeRO) pair gradients with parameters by
// these names and types.
//
//===----------------------------------------------------------------------===//
#include "passes/DistUtils.h"
#include "passes/Passes.h"

#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"

namespace dsc {
#define GEN_PASS_DEF_VERIFYDIFFERENTIATED
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {
using train::TrainDialect;

struct VerifyDifferentiated : impl::VerifyDifferentiatedBase<VerifyDifferentiated> {
  void runOnOperation() override {
    bool ok = true;
    int64_t checked = 0;
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (!distutil::isDifferentiated(fn))
        continue;
      llvm::StringMap<BlockArgument> params;
      for (BlockArgument a : fn.getArguments())
        if (auto name = fn.getArgAttrOfType<StringAttr>(a.getArgNumber(), TrainDialect::kParam))
          params[name.getValue()] = a;
      llvm::StringSet<> seen;
      for (unsigned i = 0; i < fn.getNumResults(); ++i) {
        auto name = fn.getResultAttrOfType<StringAttr>(i, TrainDialect::kGrad);
        if (!name)
          continue;
        ++checked;
        auto it = params.find(name.getValue());
        if (it == params.end()) {
          fn.emitError("verify-differentiated: result ")
              << i << " is the gradient of '" << name.getValue()
              << "', which is not a train.param argument";
          ok = false;
        } else if (fn.getResultTypes()[i] != it->second.getType()) {
          fn.emitError("verify-differentiated: the gradient of '")
              << name.getValue() << "' has type " << fn.getResultTypes()[i]
              << ", its parameter " << it->second.getType();
          ok = false;
        }
        if (!seen.insert(name.getValue()).second) {
          fn.emitError("verify-differentiated: two gradients of '") << name.getValue() << "'";
          ok = false;
        }
      }
      for (BlockArgument a : fn.getArguments()) // in argument order
        if (auto name = fn.getArgAttrOfType<StringAttr>(a.getArgNumber(), TrainDialect::kParam))
          if (!seen.contains(name.getValue())) {
            fn.emitError("verify-differentiated: parameter '")
                << name.getValue() << "' (argument " << a.getArgNumber() << ") has no gradient";
            ok = false;
          }
    }
    numGradients = checked;
    if (!ok)
      signalPassFailure();
  }
};

} // namespace
} // namespace dsc
