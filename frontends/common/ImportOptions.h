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
  /// Initializers never to train (dsc --freeze): a glob (`*`, `?`, `[...]`,
  /// `{a,b}`) matching the whole name, or `/regex/` matching anywhere in it.
  /// A pattern that matches no initializer is an error.
  std::vector<std::string> freeze;
  /// Where to say how the importer decided what it was not told (the
  /// trainable set of a model without kTrainableKey); null: silent.
  llvm::raw_ostream *notes = nullptr;
};

/// Parses dsc --input-shape's NAME=DxDx... into `out` (a name given once,
/// positive dimensions); false with `error` set otherwise.
bool parseInputShape(const std::string &spec,
                     std::map<std::string, std::vector<int64_t>> &out, std::string &error);

} // namespace dsc::frontend

#endif // DSC_FRONTENDS_COMMON_IMPORTOPTIONS_H
