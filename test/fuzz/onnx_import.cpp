//===- onnx_import.cpp - fuzz the ONNX importer ----------------------------===//
//
// Input: a model file, binary (.onnx protobuf) or ONNX's textual syntax
// (the loader takes a file starting with '<' or '#' as text, as dsc does).
// importOnnxFile must return a verified module or an error naming the
// file; an "internal error" (the importer built IR that does not verify) is
// a finding, and so is an error that does not start with the file's name.
// A fresh single-threaded MLIRContext per input keeps inputs
// independent (a shared one would grow with every uniqued type).
//
// The model is written alone into a scratch folder: external data can only
// name the model file itself, or nothing.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/OnnxImporter.h"
#include "test/fuzz/ImportFuzz.h"

#include "mlir/IR/MLIRContext.h"

#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = dsc::fuzz::writeScratch("model.onnx", data, size);
  // As a user would: a model with a dynamic batch is imported again with
  // --batch-size 2.
  for (int64_t batch : {int64_t(0), int64_t(2)}) {
    mlir::MLIRContext ctx(mlir::MLIRContext::Threading::DISABLED);
    ctx.printOpOnDiagnostic(false);
    dsc::onnx_import::ImportOptions options;
    options.batchSize = batch;
    std::string message = dsc::fuzz::judgeImport("onnx_import", path, [&] {
      return dsc::onnx_import::importOnnxFile(ctx, path, options);
    });
    if (message.find("is dynamic") == std::string::npos)
      return 0;
  }
  return 0;
}
