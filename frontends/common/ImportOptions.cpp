//===- ImportOptions.cpp - what every frontend is told --------------------===//

#include "frontends/common/ImportOptions.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace dsc::frontend {

bool parseInputShape(const std::string &spec, ImportOptions &options, std::string &error) {
  auto eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
    error = "--input-shape '" + spec + "': expected NAME=DxDx...[:DTYPE] (e.g. input_ids=8x128 "
            "or mask=8x128:int64)";
    return false;
  }
  std::string name = spec.substr(0, eq);
  if (options.inputShapes.count(name)) {
    error = "--input-shape gives '" + name + "' twice";
    return false;
  }
  llvm::StringRef rest = llvm::StringRef(spec).substr(eq + 1);
  auto [dimsText, dtype] = rest.split(':');
  if (rest.contains(':')) {
    bool known = false;
    std::string names;
    for (const char *d : kInputDTypes) {
      known |= dtype == d;
      names += std::string(names.empty() ? "" : ", ") + d;
    }
    if (!known) {
      error = "--input-shape '" + spec + "': dtype '" + dtype.str() + "' is not one of " + names;
      return false;
    }
  }
  std::vector<int64_t> dims;
  llvm::SmallVector<llvm::StringRef> parts;
  dimsText.split(parts, 'x');
  for (llvm::StringRef p : parts) {
    int64_t d;
    if (p.getAsInteger(10, d) || d <= 0) {
      error = "--input-shape '" + spec + "': dimension '" + p.str() +
              "' is not a positive integer";
      return false;
    }
    dims.push_back(d);
  }
  options.inputShapes[name] = dims;
  if (rest.contains(':'))
    options.inputDTypes[name] = dtype.str();
  return true;
}

} // namespace dsc::frontend
