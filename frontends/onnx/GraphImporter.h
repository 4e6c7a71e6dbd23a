//===- GraphImporter.h - state shared by the op converters ------*- C++ -*-===//
#ifndef DSC_FRONTENDS_ONNX_GRAPHIMPORTER_H
#define DSC_FRONTENDS_ONNX_GRAPHIMPORTER_H

#include "frontends/onnx/HostTensor.h"
#include "frontends/onnx/ModelLoader.h"
#include "frontends/onnx/OnnxAttrs.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

#include <map>
#include <memory>
#include <optional>
#include <set>

namespace dsc::onnx_import {

/// Which floating-point initializers may become train.param (besides
/// needing a gradient path to the loss); see Trainable.cpp.
struct TrainableRule {
  /// The file's kTrainableKey list; none when the file has no such entry.
  std::optional<std::set<std::string>> listed;
  /// Those that --freeze patterns match.
  std::set<std::string> frozen;

  bool allows(const std::string &name) const {
    return !frozen.count(name) && (!listed || listed->count(name));
  }
};
/// Reads kTrainableKey and matches ImportOptions::freeze; errors name the
/// file and the pattern or metadata at fault.
llvm::Expected<TrainableRule> decideTrainable(const LoadedModel &model,
                                              const ImportOptions &options);

class GraphImporter;
/// Converts the current node; on failure it has called `fail`.
using ConvertFn = mlir::LogicalResult (*)(GraphImporter &);
using ConverterTable = std::map<std::string, ConvertFn>;

// One registration function per op category (Elementwise.cpp, ...).
void registerElementwiseConverters(ConverterTable &table);
void registerActivationConverters(ConverterTable &table);
void registerEinsumConverters(ConverterTable &table);
void registerComputeConverters(ConverterTable &table);
void registerLayoutConverters(ConverterTable &table);
void registerConvConverters(ConverterTable &table);
void registerNormConverters(ConverterTable &table);
void registerRecurrentConverters(ConverterTable &table);
void registerLoopConverters(ConverterTable &table);
void registerIndexConverters(ConverterTable &table);

class GraphImporter {
public:
  GraphImporter(mlir::MLIRContext &ctx, LoadedModel &model);
  llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> run(const ImportOptions &options);

  //===--- For converters: the current node --------------------------------===//
  const onnx::NodeProto &node() const { return *node_; }
  int64_t opset() const { return model_.opset; }
  bool hasInput(int k) const { return !inputName(*node_, k).empty(); }
  /// Input k as an IR value (constants are materialized); null on error.
  mlir::Value input(int k);
  /// Input k's compile-time value, or null when it is only known at run time.
  const HostTensor *constant(int k);
  /// A value of the graph by name (a subgraph's captured outer value);
  /// null, after failing the node, when no earlier node produced it.
  mlir::Value valueNamed(const std::string &name);
  /// The main graph's node that produces `name`, or null (a graph input,
  /// an initializer, or unknown).
  const onnx::NodeProto *producerOf(const std::string &name) const;
  /// Input k's compile-time value as integers; fails naming `what` otherwise.
  mlir::FailureOr<std::vector<int64_t>> constantInts(int k, llvm::StringRef what);
  mlir::RankedTensorType inputType(int k);
  void setOutput(int k, mlir::Value v);
  void setOutput(int k, HostTensor t);
  bool outputUsed(int k) const { return k < node_->output_size() && !node_->output(k).empty(); }
  mlir::LogicalResult fail(const llvm::Twine &message);
  int64_t nextRngStream() { return rngStreams_++; }

  mlir::OpBuilder &builder() { return b_; }
  mlir::Location loc() const { return loc_; }
  mlir::MLIRContext *context() { return &ctx_; }

  /// Creates an op whose result types are inferred (InferTypeOpInterface);
  /// an inference error becomes the node's error instead of a crash.
  template <typename OpTy>
  mlir::FailureOr<OpTy> create(mlir::ValueRange operands,
                               llvm::ArrayRef<mlir::NamedAttribute> attrs = {},
                               unsigned numResults = 1) {
    llvm::SmallVector<mlir::Type> placeholder(numResults, b_.getNoneType());
    auto op = OpTy::create(b_, loc_, placeholder, operands, attrs);
    if (mlir::failed(inferTypes(op.getOperation())))
      return mlir::failure();
    return op;
  }
  /// Verifies an op just created with explicit result types; on failure
  /// erases it and fails the node with the verifier's message.
  mlir::LogicalResult verifyNew(mlir::Operation *op);
  /// A scalar (rank-0) float constant of `elementType`.
  mlir::Value scalar(double v, mlir::Type elementType);
  /// A splat constant of `type` without materializing its elements.
  mlir::Value splat(mlir::RankedTensorType type, double v);
  /// Converts an ONNX data type; null (after `fail`) if unsupported.
  mlir::Type elementType(int32_t dtype);
  mlir::NamedAttribute attr(llvm::StringRef name, mlir::Attribute value) {
    return b_.getNamedAttr(name, value);
  }

private:
  struct Entry {
    mlir::Value value;
    std::shared_ptr<HostTensor> constant;
  };
  mlir::LogicalResult inferTypes(mlir::Operation *op);
  /// A constant op of `t`'s value; its attribute is built once per
  /// tensor (a 2048 x 2048 causal mask that every layer reads).
  mlir::Value materialize(const std::shared_ptr<HostTensor> &t);
  mlir::LogicalResult importNode(const onnx::NodeProto &node, int index);
  llvm::Error error(const llvm::Twine &message);
  const Entry *lookup(int k);

  mlir::MLIRContext &ctx_;
  LoadedModel &model_;
  mlir::OpBuilder b_;
  mlir::Location loc_;
  const onnx::NodeProto *node_ = nullptr;
  int nodeIndex_ = 0;
  std::map<std::string, Entry> values_;
  /// Folded results by node (op type, attributes, input tensors): a
  /// --no-weights export stores an equal buffer once, and the node every
  /// layer applies to it (Not of the causal mask) folds once.
  std::map<std::string, std::vector<std::shared_ptr<HostTensor>>> folded_;
  /// The attribute of each materialized tensor (holding the tensor, so
  /// that its address is not reused while it is a key).
  std::map<const HostTensor *, std::pair<std::shared_ptr<HostTensor>, mlir::TypedAttr>>
      materialized_;
  ConverterTable converters_;
  int64_t rngStreams_ = 0;
  std::string diagnostic_; // last MLIR diagnostic, captured for messages
  std::string error_;
};

} // namespace dsc::onnx_import

#endif // DSC_FRONTENDS_ONNX_GRAPHIMPORTER_H
