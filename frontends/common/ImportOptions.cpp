//===- ImportOptions.cpp - what every frontend is told --------------------===//

#include "frontends/common/ImportOptions.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace dsc::frontend {

bool parseInputShape(const std::string &spec,
                     std::map<std::string, std::vector<int64_t>> &out,
                     std::string &error) {
  auto eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
    error = "--input-shape '" + spec + "': expected NAME=DxDx... (e.g. input_ids=8x128)";
    return false;
  }
  std::string name = spec.substr(0, eq);
  if (out.count(name)) {
    error = "--input-shape gives '" + name + "' twice";
    return false;
  }
  std::vector<int64_t> dims;
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(spec).substr(eq + 1).split(parts, 'x');
  for (llvm::StringRef p : parts) {
    int64_t d;
    if (p.getAsInteger(10, d) || d <= 0) {
      error = "--input-shape '" + spec + "': dimension '" + p.str() +
              "' is not a positive integer";
      return false;
    }
    dims.push_back(d);
  }
  out[name] = dims;
  return true;
}

} // namespace dsc::frontend
