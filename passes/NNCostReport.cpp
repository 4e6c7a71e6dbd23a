//===- NNCostReport.cpp - flops and bytes per op kind --------------------===//
#include "passes/Passes.h"

#include "dialects/nn/NNDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Format.h"

#include <map>

namespace dsc {
#define GEN_PASS_DEF_NNCOSTREPORT
#include "passes/Passes.h.inc"

namespace {
struct Row {
  int64_t count = 0, flops = 0, read = 0, written = 0;
  void add(const Row &o) {
    count += o.count, flops += o.flops, read += o.read, written += o.written;
  }
};

std::map<std::string, Row> costByKind(mlir::func::FuncOp fn) {
  std::map<std::string, Row> rows;
  fn.walk([&](nn::CostOpInterface op) {
    Row &r = rows[op->getName().getStringRef().str()];
    r.add({1, op.getFlops(), op.getBytesRead(), op.getBytesWritten()});
  });
  return rows;
}

void printRow(llvm::raw_ostream &os, llvm::StringRef name, const Row &r) {
  os << llvm::format("  %-18s %6lld %12.6f %12.3f %12.3f\n", name.str().c_str(),
                     (long long)r.count, r.flops / 1e9, r.read / 1e6, r.written / 1e6);
}

struct NNCostReport : impl::NNCostReportBase<NNCostReport> {
  void runOnOperation() override {
    printCostReport(getOperation(), llvm::outs());
    getOperation().walk([&](nn::CostOpInterface) { ++numCostedOps; });
    markAllAnalysesPreserved();
  }
};
} // namespace

void printCostReport(mlir::ModuleOp module, llvm::raw_ostream &os) {
  for (auto fn : module.getOps<mlir::func::FuncOp>()) {
    os << "cost of @" << fn.getName() << ":\n";
    os << llvm::format("  %-18s %6s %12s %12s %12s\n", "op", "count", "GFLOP",
                       "MB read", "MB written");
    Row total;
    for (auto &[name, row] : costByKind(fn)) {
      printRow(os, name, row);
      total.add(row);
    }
    printRow(os, "total", total);
  }
}

} // namespace dsc
