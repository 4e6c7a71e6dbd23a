//===- ForwardFunction.cpp - ending an imported forward+loss function ----===//
#include "frontends/common/ForwardFunction.h"

#include <map>

#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace dsc::frontend {

std::string finishForward(func::FuncOp fn, Value loss, Location loc,
                          llvm::function_ref<bool(llvm::StringRef)> trainable,
                          std::vector<std::string> &trained) {
  OpBuilder b(fn.getContext());
  Block *entry = &fn.getBody().front();
  b.setInsertionPointToEnd(entry);
  func::ReturnOp::create(b, loc, loss);
  fn.setType(b.getFunctionType(entry->getArgumentTypes(), loss.getType()));
  fn.setResultAttr(0, train::TrainDialect::kLoss, b.getUnitAttr());

  // Drop what the loss does not depend on (other outputs, unused masks).
  IRRewriter rewriter(fn.getContext());
  (void)runRegionDCE(rewriter, fn.getBody());
  llvm::BitVector unused(entry->getNumArguments());
  for (BlockArgument arg : entry->getArguments())
    if (arg.use_empty() && fn.getArgAttr(arg.getArgNumber(), train::TrainDialect::kInput) == nullptr)
      unused.set(arg.getArgNumber());
  if (failed(fn.eraseArguments(unused)))
    return "internal error: cannot drop unused model tensors";

  // Arguments from which the loss is reachable through operands that the
  // ops' gradient rules call differentiable are trainable parameters,
  // unless `trainable` says no.
  llvm::DenseSet<Value> needsGrad{loss};
  for (Operation &op : llvm::reverse(entry->getOperations())) {
    if (llvm::none_of(op.getResults(), [&](Value r) { return needsGrad.contains(r); }))
      continue;
    auto grad = dyn_cast<nn::GradientOpInterface>(&op);
    if (!grad)
      continue;
    for (auto [i, operand] : llvm::enumerate(op.getOperands()))
      if (grad.isDifferentiableOperand(i) && nn::isFloatTensor(operand.getType()))
        needsGrad.insert(operand);
  }
  // State the forward pass writes (BatchNorm's running statistics) is a
  // model buffer, never trained.
  llvm::DenseSet<Value> assigned;
  fn.walk([&](train::AssignOp op) { assigned.insert(op.getBuffer()); });
  for (BlockArgument arg : entry->getArguments()) {
    auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kInitializerAttr);
    if (!name)
      continue;
    fn.removeArgAttr(arg.getArgNumber(), kInitializerAttr);
    bool param = needsGrad.contains(arg) && trainable(name.getValue());
    if (param && assigned.contains(arg))
      return "initializer '" + name.str() +
             "' is updated in forward (a BatchNormalization's running statistic in training "
             "mode) and also has a gradient path to the loss; dsc trains parameters and "
             "updates running statistics, not both (freeze it with --freeze '" +
             name.str() + "', or use another tensor)";
    if (param)
      trained.push_back(name.str());
    fn.setArgAttr(arg.getArgNumber(),
                  param ? train::TrainDialect::kParam : train::TrainDialect::kBuffer, name);
  }
  return "";
}

int64_t forwardBatch(mlir::ModuleOp module) {
  auto fn = *module.getOps<mlir::func::FuncOp>().begin();
  for (auto arg : fn.getArguments())
    if (fn.getArgAttr(arg.getArgNumber(), train::TrainDialect::kInput)) {
      auto t = mlir::cast<mlir::RankedTensorType>(arg.getType());
      if (t.getRank() > 0)
        return t.getShape()[0];
    }
  return 0;
}

std::optional<int64_t> forwardHiddenSize(mlir::ModuleOp module) {
  auto fn = *module.getOps<mlir::func::FuncOp>().begin();
  std::map<int64_t, int64_t> vectors, dims;
  for (auto arg : fn.getArguments()) {
    if (!fn.getArgAttr(arg.getArgNumber(), train::TrainDialect::kParam))
      continue;
    auto t = mlir::cast<mlir::RankedTensorType>(arg.getType());
    if (t.getRank() == 1)
      ++vectors[t.getShape()[0]];
    for (int64_t d : t.getShape())
      ++dims[d];
  }
  const std::map<int64_t, int64_t> &counts = vectors.empty() ? dims : vectors;
  std::optional<int64_t> best;
  int64_t bestCount = 0;
  for (auto [size, count] : counts)
    if (count >= bestCount) {
      best = size;
      bestCount = count;
    }
  return best;
}

} // namespace dsc::frontend
