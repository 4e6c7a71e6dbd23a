//===- ImportOptions.h - what every frontend is told ------------*- C++ -*-===//
#ifndef DSC_FRONTENDS_COMMON_IMPORTOPTIONS_H
#define DSC_FRONTENDS_COMMON_IMPORTOPTIONS_H

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dsc::frontend {

struct ImportOptions {
  /// Graph output to train on; empty: the single scalar output.
  std::string lossName;
  /// Value for a dynamic dimension 0 of every graph input (0: none).
  int64_t batchSize = 0;
  /// Full static shapes for named graph inputs.
  std::map<std::string, std::vector<int64_t>> inputShapes;
  /// Element types for named inputs ("int64", "float32", ...): only a
  /// TorchScript archive, which keeps none, takes them; other model files
  /// declare theirs.
  std::map<std::string, std::string> inputDTypes;
  /// Initializers never to train (dsc --freeze): a glob (`*`, `?`, `[...]`,
  /// `{a,b}`) matching the whole name, or `/regex/` matching anywhere in it.
  /// A pattern that matches no initializer is an error.
  std::vector<std::string> freeze;
  /// Where to say how the importer decided what it was not told (the
  /// trainable set of a model without kTrainableKey); null: silent.
  llvm::raw_ostream *notes = nullptr;
};

/// The element types --input-shape's :DTYPE may name.
inline constexpr const char *kInputDTypes[] = {"float32", "float16", "bfloat16", "int64",
                                               "int32", "bool"};

/// Parses dsc --input-shape's NAME=DxDx...[:DTYPE] into the options' shapes
/// and dtypes (a name given once, positive dimensions, a DTYPE of
/// kInputDTypes); false with `error` set otherwise.
bool parseInputShape(const std::string &spec, ImportOptions &options, std::string &error);

} // namespace dsc::frontend

#endif // DSC_FRONTENDS_COMMON_IMPORTOPTIONS_H
