//===- VerifyPlanned.cpp - every value of a planned step has its bytes ---===//
//
// The check after memory-plan, which emit-plan relies on: a function with
// `train.arena_bytes` has a `train.offset` on every argument and `train.offsets`
// (one per result) on every op with results, and each tensor's bytes, and
// each collective's `train.staging` range, lie inside the arena; offloaded
// state (`train.tier`) inside the host tier (`train.host_tier_bytes`).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"

namespace dsc {
#define GEN_PASS_DEF_VERIFYPLANNED
#include "passes/Passes.h.inc"

using namespace mlir;

namespace {

/// Bytes of a tensor value (booleans: one byte per element); -1 for
/// another type.
int64_t bytesOf(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  if (!r || !r.hasStaticShape())
    return -1;
  return r.getNumElements() * int64_t((r.getElementTypeBitWidth() + 7) / 8);
}

struct VerifyPlanned : impl::VerifyPlannedBase<VerifyPlanned> {
  void runOnOperation() override {
    bool ok = true;
    int64_t checked = 0;
    func::FuncOp fn = getOperation();
    {
      auto arenaAttr = fn->getAttrOfType<IntegerAttr>(train::TrainDialect::kArenaBytes);
      if (!arenaAttr)
        return; // not a planned step
      int64_t arena = arenaAttr.getInt();
      auto inside = [&](int64_t offset, int64_t bytes) {
        return offset >= 0 && bytes >= 0 && offset <= arena && bytes <= arena - offset;
      };
      for (BlockArgument a : fn.getArguments()) {
        auto off = fn.getArgAttrOfType<IntegerAttr>(a.getArgNumber(), train::TrainDialect::kOffset);
        ++checked;
        if (!off) {
          fn.emitError("verify-planned: argument ") << a.getArgNumber() << " has no train.offset";
          ok = false;
        } else if (fn.getArgAttr(a.getArgNumber(), train::TrainDialect::kTier)) {
          // Offloaded state: its bytes lie in the host tier, not the arena.
          bool nvme = fn.getArgAttrOfType<StringAttr>(a.getArgNumber(), train::TrainDialect::kTier).getValue() ==
                      "nvme";
          auto tier = fn->getAttrOfType<IntegerAttr>(nvme ? train::TrainDialect::kNvmeTierBytes
                                                          : train::TrainDialect::kHostTierBytes);
          int64_t t = tier ? tier.getInt() : 0, o = off.getInt(), n = bytesOf(a.getType());
          if (o < 0 || n < 0 || o > t || n > t - o) {
            fn.emitError("verify-planned: argument ")
                << a.getArgNumber() << " at tier offset " << o << " does not fit the "
                << (nvme ? "NVMe" : "host") << " tier of " << t << " bytes";
            ok = false;
          }
        } else if (!inside(off.getInt(), bytesOf(a.getType()))) {
          fn.emitError("verify-planned: argument ")
              << a.getArgNumber() << " at offset " << off.getInt() << " does not fit the arena of "
              << arena << " bytes";
          ok = false;
        }
      }
      fn.walk([&](Operation *op) {
        if (op->getNumResults() == 0 || op == fn.getOperation())
          return;
        auto offsets = op->getAttrOfType<DenseI64ArrayAttr>(train::TrainDialect::kOffsets);
        if (!offsets || offsets.size() != int64_t(op->getNumResults())) {
          op->emitOpError("verify-planned: has no train.offsets for its ")
              << op->getNumResults() << " results";
          ok = false;
          return;
        }
        for (auto [i, r] : llvm::enumerate(op->getResults())) {
          int64_t bytes = bytesOf(r.getType());
          if (bytes < 0)
            continue; // not a buffer (a handle)
          ++checked;
          if (!inside(offsets[i], bytes)) {
            op->emitOpError("verify-planned: result ")
                << i << " at offset " << offsets[i] << " (" << bytes
                << " bytes) does not fit the arena of " << arena << " bytes";
            ok = false;
          }
        }
        if (auto staging = op->getAttrOfType<DenseI64ArrayAttr>(train::TrainDialect::kStaging))
          if (staging.size() != 2 || !inside(staging[0], staging[1])) {
            op->emitOpError("verify-planned: the staging range does not fit the arena of ")
                << arena << " bytes";
            ok = false;
          }
      });
    }
    numValues = checked;
    if (!ok)
      signalPassFailure();
  }
};

} // namespace
} // namespace dsc
