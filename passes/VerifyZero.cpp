//===- VerifyZero.cpp - a step is partitioned as its ZeRO stage says -----===//
//
// The check between the zero pass and the rest of the pipeline: what the
// stage promises to partition is partitioned, every collective uses the
// module's data-parallel group and is completed by a dist.wait.
//
//===----------------------------------------------------------------------===//
#include "passes/DistUtils.h"
#include "passes/Passes.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dsc {
#define GEN_PASS_DEF_VERIFYZERO
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {
using train::TrainDialect;

struct VerifyZero : impl::VerifyZeroBase<VerifyZero> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto dpAttr = module->getAttrOfType<IntegerAttr>(distutil::kDp);
    auto stageAttr = module->getAttrOfType<IntegerAttr>(distutil::kZeroStage);
    if (!dpAttr || !stageAttr) {
      module.emitError("verify-zero: the module has no dist.dp / dist.zero_stage "
                       "(run data-parallel or zero)");
      return signalPassFailure();
    }
    int64_t dp = dpAttr.getInt(), stage = stageAttr.getInt();
    bool ok = true;
    auto isChunkOf = [&](Type t, ArrayRef<int64_t> full) {
      int64_t n = 1;
      for (int64_t d : full)
        n *= d;
      auto r = dyn_cast<RankedTensorType>(t);
      return r && r.getRank() == 1 && r.getDimSize(0) == distutil::chunkSize(n, dp);
    };
    for (auto fn : module.getOps<func::FuncOp>()) {
      for (BlockArgument a : fn.getArguments()) {
        unsigned i = a.getArgNumber();
        auto shard = fn.getArgAttrOfType<DenseI64ArrayAttr>(i, distutil::kShardOf);
        auto name = [&](StringRef role) { return fn.getArgAttrOfType<StringAttr>(i, role); };
        if (shard && !isChunkOf(a.getType(), shard.asArrayRef())) {
          fn.emitError("verify-zero: argument ")
              << i << " of type " << a.getType() << " is not a chunk of "
              << dp << " of its dist.shard_of shape";
          ok = false;
        }
        if (stage >= 1 && name(TrainDialect::kOptState) && !shard) {
          fn.emitError("verify-zero: optimizer state '")
              << name(TrainDialect::kOptState).getValue() << "' is not partitioned at ZeRO stage "
              << stage;
          ok = false;
        }
      }
      fn.walk([&](Operation *op) {
        if (auto acc = dyn_cast<train::AccumulateOp>(op)) {
          if (stage < 2)
            return;
          Operation *yield = acc.getBody().front().getTerminator();
          for (auto [k, v] : llvm::enumerate(yield->getOperands())) {
            if (k == 0)
              continue; // the loss
            // communication_data_type: the reduced chunk cast back.
            if (auto cast = v.getDefiningOp<nn::CastOp>())
              v = cast.getInput();
            if (!v.getDefiningOp<dist::WaitOp>() ||
                !isa<dist::ReduceScatterOp>(v.getDefiningOp<dist::WaitOp>().getCollective())) {
              acc.emitOpError("verify-zero: gradient sum ")
                  << k << " is not reduce-scattered in the micro-batch at ZeRO stage " << stage;
              ok = false;
            }
          }
          return;
        }
        if (!distutil::isCollective(op))
          return;
        auto group = op->getAttrOfType<dist::GroupAttr>("group");
        if (!group || group.getSize() != dp) {
          op->emitOpError("verify-zero: the group must be the ") << dp << " data-parallel ranks";
          ok = false;
        }
        if (!distutil::waitOf(op)) {
          op->emitOpError("verify-zero: no dist.wait completes this collective");
          ok = false;
        }
      });
    }
    if (!ok)
      signalPassFailure();
  }
};
} // namespace
} // namespace dsc
