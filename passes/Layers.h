//===- Layers.h - a forward graph cut into layers ----------------*- C++ -*-===//
//
// How pipeline-split and recompute find a model's layers in its forward
// ops (program order):
//  1. Ops that read only inputs and constants (masks, position ids) are
//     *replicable*: cheap to compute again wherever they are needed.
//  2. The other ops are cut into *layers* at the points where the fewest
//     activations are live (one, the residual stream, for a transformer);
//     a segment without parameters joins the next one, and a trailing one
//     (the loss) the last.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PASSES_LAYERS_H
#define DSC_PASSES_LAYERS_H

#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <limits>

namespace dsc {

struct Layer {
  unsigned first = 0, last = 0; // indices into LayerSplit::ops (inclusive)
  double weight = 0;
};

struct LayerSplit {
  llvm::SmallVector<mlir::Operation *> ops; // the non-replicable ops, in order
  llvm::DenseSet<mlir::Operation *> replicable;
  llvm::SmallVector<Layer> layers;
  /// Activations live across each cut.
  int minWidth = 0;
};

/// Cuts `forward` (ops of one block, in order). `isInput(v)`: v is a model
/// input; `usesParam(op)`: op reads a trainable parameter. Values defined
/// outside `forward` are not activations; neither are the results of ops
/// for which `isStatic(op)` holds (functions of the parameters alone, such
/// as mixed precision's copies: they count as parameters and are in
/// neither list).
template <typename IsInput, typename UsesParam, typename IsStatic>
LayerSplit findLayers(llvm::ArrayRef<mlir::Operation *> forward, IsInput isInput,
                      UsesParam usesParam, IsStatic isStatic) {
  using namespace mlir;
  LayerSplit cut;
  llvm::DenseSet<Operation *> inForward(forward.begin(), forward.end());
  llvm::DenseSet<Operation *> &replicable = cut.replicable;
  SmallVector<Operation *> &ops = cut.ops;
  for (Operation *op : forward) {
    if (isStatic(op))
      continue;
    // Of the static results, those of constants and buffers (not of a
    // parameter, which usesParam sees) leave an op replicable.
    bool rep = !usesParam(op) && llvm::all_of(op->getOperands(), [&](Value v) {
      Operation *def = v.getDefiningOp();
      return def ? replicable.contains(def) || isStatic(def) || !inForward.contains(def)
                 : isInput(v);
    });
    if (rep)
      replicable.insert(op);
    else
      ops.push_back(op);
  }
  if (ops.empty())
    return cut;
  llvm::DenseMap<Operation *, unsigned> index;
  for (auto [i, op] : llvm::enumerate(ops))
    index[op] = i;

  // Cut points: width(i) = activations defined before op i and read at or
  // after it (a difference array: O(ops + uses)).
  unsigned n = ops.size();
  SmallVector<int> delta(n + 2, 0);
  for (auto [i, op] : llvm::enumerate(ops))
    for (Value r : op->getResults()) {
      unsigned lastUse = i;
      for (Operation *user : r.getUsers())
        if (auto it = index.find(user); it != index.end())
          lastUse = std::max(lastUse, it->second);
      if (lastUse > i) {
        ++delta[i + 1];
        --delta[lastUse + 1];
      }
    }
  SmallVector<int> width(n + 1, 0);
  for (unsigned k = 1; k <= n; ++k)
    width[k] = width[k - 1] + delta[k];
  int minWidth = std::numeric_limits<int>::max();
  for (unsigned k = 1; k < n; ++k)
    minWidth = std::min(minWidth, width[k]);
  cut.minWidth = minWidth;
  // Whether op k or a later one before the next cut point reads a
  // parameter (from the end: O(n)).
  SmallVector<char> paramsFrom(n + 1, 1);
  for (unsigned k = n; k-- > 0;) {
    if (usesParam(ops[k]))
      paramsFrom[k] = 1;
    else if (k + 1 < n && width[k + 1] == minWidth)
      paramsFrom[k] = 0;
    else
      paramsFrom[k] = paramsFrom[k + 1];
  }
  SmallVector<Layer> &layers = cut.layers;
  unsigned start = 0;
  bool hasParam = false;
  // A cut point ends the layer when the layer has parameters and the ops
  // up to the next cut point use none (an activation function stays with
  // its linear layer).
  for (unsigned k = 0; k < n; ++k) {
    hasParam |= usesParam(ops[k]);
    bool isCut = k + 1 < n && width[k + 1] == minWidth && paramsFrom[k + 1];
    if ((isCut && hasParam) || k + 1 == n) {
      layers.push_back({start, k, 0});
      start = k + 1;
      hasParam = false;
    }
  }
  // A trailing segment without parameters (the loss) joins the last layer.
  if (layers.size() > 1) {
    bool any = false;
    for (unsigned k = layers.back().first; k <= layers.back().last; ++k)
      any |= usesParam(ops[k]);
    if (!any) {
      layers[layers.size() - 2].last = layers.back().last;
      layers.pop_back();
    }
  }
  return cut;
}

/// The ops of `forward` that are functions of parameters, buffers and
/// constants only, not of the micro-batch (mixed precision's parameter
/// copies, a weight's transpose): the same in every micro-batch. They are
/// not activations; `fromParam` holds the parameters and the results of
/// the fixed ops that read one, which an op reading them reads a parameter
/// through.
struct FixedOps {
  llvm::DenseSet<mlir::Operation *> ops;
  llvm::DenseSet<mlir::Value> fromParam;
};
template <typename IsInput, typename IsParam>
FixedOps findFixed(llvm::ArrayRef<mlir::Operation *> forward, IsInput isInput, IsParam isParam) {
  FixedOps fixed;
  for (mlir::Operation *op : forward) {
    // Of the ops without operands, only constants: a dist.recv (a pipeline
    // stage's activations) brings the micro-batch's data.
    bool isFixed = op->getNumOperands() == 0
                       ? op->hasTrait<mlir::OpTrait::ConstantLike>()
                       : llvm::all_of(op->getOperands(), [&](mlir::Value v) {
                           mlir::Operation *def = v.getDefiningOp();
                           return def ? fixed.ops.contains(def) : !isInput(v);
                         });
    if (!isFixed)
      continue;
    fixed.ops.insert(op);
    if (llvm::any_of(op->getOperands(),
                     [&](mlir::Value v) { return isParam(v) || fixed.fromParam.count(v); }))
      for (mlir::Value r : op->getResults())
        fixed.fromParam.insert(r);
  }
  return fixed;
}

template <typename IsInput, typename UsesParam>
LayerSplit findLayers(llvm::ArrayRef<mlir::Operation *> forward, IsInput isInput,
                      UsesParam usesParam) {
  return findLayers(forward, isInput, usesParam, [](mlir::Operation *) { return false; });
}

} // namespace dsc

#endif // DSC_PASSES_LAYERS_H
