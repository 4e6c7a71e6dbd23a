//===- TorchScriptArchive.h - torch.jit.save archives -----------*- C++ -*-===//
//
// A TorchScript archive (torch.jit.trace or torch.jit.script of a module
// whose forward returns the loss, saved in training mode) read with
// Debian's libtorch 1.13 into the aten::Program the one ATen op table
// lowers, so that a module gives one IR whether it came as TorchScript or
// as a torch.export program. The reader:
//  * registers the schemas of the newer ATen ops the table lowers
//    (scaled_dot_product_attention, PyTorch 2.0), so that 1.13 loads
//    archives PyTorch 2.x saved; dsc reads the graph and never runs it;
//  * inlines forward's calls, resolves prim::GetAttr chains (tensors become
//    parameters and buffers named as named_parameters() / named_buffers()
//    name them, shared storage once; bool, int and float attributes become
//    constants), propagates constants and removes dead code (the library's
//    guards), and makes in-place ops functional where alias analysis
//    proves it safe (a write through a view is refused, naming the node);
//  * names every call's arguments by its schema, as torch.export does.
// The archive keeps no input shapes: --input-shape gives them, and an
// input's dtype comes from its use (an embedding's indices and a loss's
// targets are int64, others float32) unless --input-shape NAME=...:DTYPE
// says it. The shapes of everything else come
// from the nn dialect's type inference in the importer.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_FRONTENDS_TORCHSCRIPT_TORCHSCRIPTARCHIVE_H
#define DSC_FRONTENDS_TORCHSCRIPT_TORCHSCRIPTARCHIVE_H

#include "frontends/aten/AtenProgram.h"

#include "llvm/Support/Error.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dsc::torchscript {

/// A loaded archive. libtorch lives in a shared library of its own
/// (libdsc-torchscript.so, beside the binaries in lib/), which open()
/// loads on first use: libtorch's start-up registers thousands of
/// operators, half a second that a dsc run on an ONNX or .pt2 file must not
/// pay.
class Archive {
public:
  virtual ~Archive() = default;
  /// Loads `path` and builds its program; `inputShapes` and `inputDTypes`
  /// are dsc's --input-shape NAME=DxD...[:DTYPE] (every user input needs a
  /// shape; a dtype where its use does not tell).
  static llvm::Expected<std::unique_ptr<Archive>>
  open(const std::string &path, const std::map<std::string, std::vector<int64_t>> &inputShapes,
       const std::map<std::string, std::string> &inputDTypes = {});

  const aten::Program &program() const { return program_; }

  /// A parameter's or buffer's type and raw little-endian bytes.
  virtual llvm::Expected<std::string> readTensor(const std::string &name,
                                                 aten::TensorMeta &meta) const = 0;
  /// The same, converted to float32.
  virtual llvm::Error readFloat(const std::string &name, std::vector<int64_t> &shape,
                                std::vector<float> &values) const = 0;

protected:
  Archive() = default;
  aten::Program program_;
};

/// What the shared library exports, by the C name kOpenSymbol: open()'s
/// implementation.
using OpenFn = llvm::Expected<std::unique_ptr<Archive>> (*)(
    const std::string &path, const std::map<std::string, std::vector<int64_t>> &inputShapes,
    const std::map<std::string, std::string> &inputDTypes);
inline constexpr const char *kOpenSymbol = "dsc_torchscript_open";
inline constexpr const char *kLibraryName = "libdsc-torchscript.so";

} // namespace dsc::torchscript

#endif // DSC_FRONTENDS_TORCHSCRIPT_TORCHSCRIPTARCHIVE_H
