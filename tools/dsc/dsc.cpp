//===- dsc.cpp - the dsc compiler driver ---------------------------------===//
//
//   dsc model.onnx [--emit=nn] [-o out.mlir] [--explain]
//
// Imports an ONNX training graph (forward + loss) and prints what dsc made
// of it. Later phases (autodiff, optimizer, ZeRO, pipeline, plan emission)
// hang off the same driver.
//
//===----------------------------------------------------------------------===//
#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"
#include "frontends/onnx/OnnxImporter.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/ToolOutputFile.h"

#include <CLI/CLI.hpp>

#include <map>

namespace {

/// Parses NAME=DxDx... into the options' input shapes.
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

std::string typeString(mlir::Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

void explain(mlir::ModuleOp module, llvm::raw_ostream &os) {
  auto fn = *module.getOps<mlir::func::FuncOp>().begin();
  os << "model: " << module->getAttrOfType<mlir::StringAttr>("dsc.source").getValue()
     << " (opset " << module->getAttrOfType<mlir::IntegerAttr>("dsc.opset").getInt()
     << ")\n";
  int64_t params = 0, paramBytes = 0, buffers = 0, bufferBytes = 0, nParams = 0;
  os << "inputs:\n";
  for (auto arg : fn.getArguments()) {
    unsigned k = arg.getArgNumber();
    if (auto name = fn.getArgAttrOfType<mlir::StringAttr>(k, dsc::train::TrainDialect::kInput))
      os << "  " << name.getValue() << ": " << typeString(arg.getType()) << "\n";
    if (fn.getArgAttr(k, dsc::train::TrainDialect::kParam)) {
      ++nParams;
      params += dsc::nn::numElements(arg.getType());
      paramBytes += dsc::nn::byteSize(arg.getType());
    }
    if (fn.getArgAttr(k, dsc::train::TrainDialect::kBuffer)) {
      ++buffers;
      bufferBytes += dsc::nn::byteSize(arg.getType());
    }
  }
  os << llvm::format("parameters: %lld tensors, %lld elements (%.2f M), %.2f MB\n",
                     (long long)nParams, (long long)params, params / 1e6, paramBytes / 1e6);
  os << llvm::format("buffers: %lld tensors, %.2f MB (frozen, not trained)\n",
                     (long long)buffers, bufferBytes / 1e6);
  os << "loss: " << typeString(fn.getResultTypes()[0]) << "\n";
  dsc::printCostReport(module, os);
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"dsc: ahead-of-time compiler for distributed training"};
  std::string model, output = "-", emit = "nn", loss, batchSizeText;
  int64_t elide = 1024;
  std::vector<std::string> inputShapes;
  bool doExplain = false;
  app.add_option("model", model, "ONNX model (binary .onnx or textual .onnxtxt) with its loss")
      ->required();
  app.add_option("-o,--output", output, "where to write the result ('-' = stdout)");
  app.add_option("--emit", emit, "what to produce: nn = the imported IR")
      ->check(CLI::IsMember({"nn"}));
  app.add_option("--loss", loss, "graph output to train on (default: the single scalar output)");
  app.add_option("--batch-size", batchSizeText,
                 "value for a dynamic dimension 0 of every input");
  app.add_option("--input-shape", inputShapes, "static shape of an input: NAME=DxDx...");
  app.add_flag("--explain", doExplain,
               "print a summary (inputs, parameters, cost per op kind) instead of the IR");
  app.add_option("--elide-constants", elide,
                 "print constants with more elements than this elided (0: never)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    llvm::errs() << "dsc: error: " << e.what() << " (see dsc --help)\n";
    return 1;
  }
  int64_t batchSize = 0;
  if (!batchSizeText.empty() &&
      (llvm::StringRef(batchSizeText).getAsInteger(10, batchSize) || batchSize <= 0)) {
    llvm::errs() << "dsc: error: --batch-size '" << batchSizeText
                 << "' must be a positive integer\n";
    return 1;
  }

  dsc::onnx_import::ImportOptions options;
  options.lossName = loss;
  options.batchSize = batchSize;
  for (const auto &spec : inputShapes) {
    std::string error;
    if (!parseInputShape(spec, options.inputShapes, error)) {
      llvm::errs() << "dsc: error: " << error << "\n";
      return 1;
    }
  }

  mlir::MLIRContext ctx;
  auto module = dsc::onnx_import::importOnnxFile(ctx, model, options);
  if (!module) {
    llvm::errs() << "dsc: error: " << llvm::toString(module.takeError()) << "\n";
    return 1;
  }

  std::error_code ec;
  auto out = std::make_unique<llvm::ToolOutputFile>(output, ec, llvm::sys::fs::OF_None);
  if (ec) {
    llvm::errs() << "dsc: error: cannot write '" << output << "': " << ec.message() << "\n";
    return 1;
  }
  if (doExplain) {
    explain(**module, out->os());
  } else {
    mlir::OpPrintingFlags flags;
    if (elide > 0)
      flags.elideLargeElementsAttrs(elide);
    (*module)->print(out->os(), flags);
  }
  out->keep();
  return 0;
}
