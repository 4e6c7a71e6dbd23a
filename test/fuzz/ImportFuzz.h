//===- ImportFuzz.h - the model importers' harnesses' verdict ---*- C++ -*-===//
//
// What the onnx, pt2 and torchscript import harnesses accept of an import:
// a module, or an error that begins with the model's path (the user sees
// which file, and the reader says what is wrong with it). A finding is the
// importer's own "PATH: internal error: ...", an error that names no file,
// or an exception escaping (unless DSC_FUZZ_LENIENT=1, FuzzUtil.h).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TEST_FUZZ_IMPORTFUZZ_H
#define DSC_TEST_FUZZ_IMPORTFUZZ_H

#include "test/fuzz/FuzzUtil.h"

#include "llvm/Support/Error.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace dsc::fuzz {

/// Runs `import()` (an importer's call on `path`, returning an
/// llvm::Expected) and aborts on a finding. Returns the error an input
/// ended with, "" for a module (or a tolerated exception).
template <typename ImportFn>
std::string judgeImport(const char *harness, const std::string &path, ImportFn &&import) {
  std::string message;
  try {
    auto module = import();
    if (module)
      return std::string();
    message = llvm::toString(module.takeError());
  } catch (const std::exception &e) {
    if (!lenient())
      foreignException(harness, e);
    return std::string();
  }
  note(message.c_str());
  // The importer's own "PATH: internal error: ..." (not the input's text
  // echoed in a parse error).
  bool internal = message.rfind(path + ": internal error:", 0) == 0;
  if (internal || (message.rfind(path, 0) != 0 && !lenient())) {
    std::fprintf(stderr, "%s: %s\n", harness, message.c_str());
    std::abort();
  }
  return message;
}

} // namespace dsc::fuzz

#endif // DSC_TEST_FUZZ_IMPORTFUZZ_H
