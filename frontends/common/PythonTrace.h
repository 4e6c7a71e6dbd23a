//===- PythonTrace.h - where in the user's Python a node came from -*- C++ -*-===//
//
// PyTorch's exporters record, per node, the Python stack that made it and
// the module it ran in. dsc's errors name the user's own line: the
// innermost frame outside torch and site-packages.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_FRONTENDS_COMMON_PYTHONTRACE_H
#define DSC_FRONTENDS_COMMON_PYTHONTRACE_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Path.h"

#include <string>

namespace dsc::frontend {

/// "FILE:LINE" of the innermost frame of the user's own code in a Python
/// stack trace ("File \"x.py\", line 26, in forward" lines); "" if none.
inline std::string userFrame(llvm::StringRef trace) {
  std::string found;
  llvm::SmallVector<llvm::StringRef> lines;
  trace.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    line = line.trim();
    if (!line.starts_with("File \""))
      continue;
    size_t end = line.find('"', 6);
    if (end == llvm::StringRef::npos)
      continue;
    llvm::StringRef file = line.slice(6, end);
    if (file.contains("site-packages") || file.contains("/torch/"))
      continue;
    size_t at = line.find("line ", end);
    if (at == llvm::StringRef::npos)
      continue;
    llvm::StringRef number = line.drop_front(at + 5).take_while(llvm::isDigit);
    found = llvm::sys::path::filename(file).str() + ":" + number.str();
  }
  return found;
}

/// The innermost module path of torch.export's nn_module_stack
/// ("L__self__,,__main__.GPT;L__self__blocks.0.qkv,blocks.0.qkv,torch.nn.Linear"
/// gives "blocks.0.qkv"); "" for the top module.
inline std::string innermostModule(llvm::StringRef stack) {
  llvm::StringRef last = stack.rsplit(';').second.empty() ? stack : stack.rsplit(';').second;
  llvm::SmallVector<llvm::StringRef> fields;
  last.split(fields, ',');
  return fields.size() >= 2 ? fields[1].str() : "";
}

} // namespace dsc::frontend

#endif // DSC_FRONTENDS_COMMON_PYTHONTRACE_H
