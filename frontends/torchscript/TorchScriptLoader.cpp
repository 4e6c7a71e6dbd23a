//===- TorchScriptLoader.cpp - Archive::open through the shared library ---===//
//
// Loads libdsc-torchscript.so (lib/ beside the binary's bin/) on the first
// TorchScript archive, so that libtorch's start-up is paid by the runs that
// read one and no other.
//
//===----------------------------------------------------------------------===//
#include "frontends/torchscript/TorchScriptArchive.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <dlfcn.h>

namespace dsc::torchscript {

namespace {

int anchor; // this program's address, for getMainExecutable

/// The library's open(), or an error saying why it cannot be had.
llvm::Expected<OpenFn> library() {
  static OpenFn fn = nullptr;
  static std::string failure;
  if (fn)
    return fn;
  if (failure.empty()) {
    llvm::SmallString<256> dir(llvm::sys::fs::getMainExecutable(nullptr, &anchor));
    llvm::sys::path::remove_filename(dir); // .../bin
    llvm::sys::path::remove_filename(dir); // ...
    llvm::sys::path::append(dir, "lib", kLibraryName);
    void *handle = ::dlopen(dir.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *why = ::dlerror();
      failure = std::string("dsc's TorchScript frontend (") + dir.c_str() +
                ") cannot be loaded: " + (why ? why : "unknown reason");
    } else if (void *open = ::dlsym(handle, kOpenSymbol)) {
      fn = reinterpret_cast<OpenFn>(reinterpret_cast<void *(*)()>(open)());
      return fn;
    } else {
      failure = std::string(dir.c_str()) + " has no " + kOpenSymbol;
    }
  }
  return llvm::createStringError(llvm::inconvertibleErrorCode(), failure);
}

} // namespace

llvm::Expected<std::unique_ptr<Archive>>
Archive::open(const std::string &path,
              const std::map<std::string, std::vector<int64_t>> &inputShapes,
              const std::map<std::string, std::string> &inputDTypes) {
  auto fn = library();
  if (!fn)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": " + llvm::toString(fn.takeError()));
  return (*fn)(path, inputShapes, inputDTypes);
}

} // namespace dsc::torchscript
