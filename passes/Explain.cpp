//===- Explain.cpp - dsc --explain's summary of a module ------------------===//

#include "passes/Explain.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"
#include "frontends/common/Names.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Format.h"

#include <string>
#include <vector>

namespace dsc {

static std::string typeString(mlir::Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

void explainModule(mlir::ModuleOp module, llvm::raw_ostream &os) {
  auto fn = *module.getOps<mlir::func::FuncOp>().begin();
  os << "model: " << module->getAttrOfType<mlir::StringAttr>("dsc.source").getValue();
  if (auto opset = module->getAttrOfType<mlir::IntegerAttr>("dsc.opset"))
    os << " (ONNX opset " << opset.getInt() << ")";
  else if (auto producer = module->getAttrOfType<mlir::StringAttr>("dsc.producer"))
    os << " (" << producer.getValue() << ")";
  os << "\n";
  int64_t params = 0, paramBytes = 0, buffers = 0, bufferBytes = 0, nParams = 0;
  std::vector<std::string> frozen, running;
  // Buffers the forward pass updates (BatchNorm's running statistics).
  llvm::DenseSet<mlir::Value> assigned;
  fn.walk([&](train::AssignOp op) { assigned.insert(op.getBuffer()); });
  os << "inputs:\n";
  for (auto arg : fn.getArguments()) {
    unsigned k = arg.getArgNumber();
    if (auto name = fn.getArgAttrOfType<mlir::StringAttr>(k, train::TrainDialect::kInput))
      os << "  " << name.getValue() << ": " << typeString(arg.getType()) << "\n";
    if (fn.getArgAttr(k, train::TrainDialect::kParam)) {
      ++nParams;
      params += nn::numElements(arg.getType());
      paramBytes += nn::byteSize(arg.getType());
    }
    if (auto name = fn.getArgAttrOfType<mlir::StringAttr>(k, train::TrainDialect::kBuffer)) {
      (assigned.contains(arg) ? running : frozen).push_back(name.str());
      ++buffers;
      bufferBytes += nn::byteSize(arg.getType());
    }
  }
  os << llvm::format("parameters: %lld tensors, %lld elements (%.2f M), %.2f MB\n",
                     (long long)nParams, (long long)params, params / 1e6, paramBytes / 1e6);
  os << llvm::format("buffers: %lld tensors, %.2f MB (%s)\n", (long long)buffers,
                     bufferBytes / 1e6, running.empty() ? "frozen, not trained" : "not trained");
  if (!frozen.empty())
    os << "  frozen: " << frontend::compactNames(frozen) << "\n";
  if (!running.empty())
    os << "  updated in forward (running statistics, checkpointed): "
       << frontend::compactNames(running) << "\n";
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (fn.getResultAttr(i, train::TrainDialect::kLoss))
      os << "loss: " << typeString(fn.getResultTypes()[i]) << "\n";
  printCostReport(module, os);
}

} // namespace dsc
