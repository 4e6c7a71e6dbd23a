//===- AtenImporter.h - an ATen program -> nn dialect -----------*- C++ -*-===//
//
// One table, keyed by the ATen overload ("aten.linear.default"), lowers
// each call of an aten::Program to nn ops. The .pt2 reader and the
// TorchScript reader feed it the same calls, so that a module gives
// one IR whichever file it came in.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_FRONTENDS_ATEN_ATENIMPORTER_H
#define DSC_FRONTENDS_ATEN_ATENIMPORTER_H

#include "frontends/aten/AtenProgram.h"
#include "frontends/common/ImportOptions.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dsc::aten {

/// The bytes and type of a buffer or constant that is not floating point
/// (a bool mask, integer positions): the importer folds them in as
/// constants. Served by the reader.
using TensorSource = std::function<llvm::Expected<std::string>(const std::string &name,
                                                              TensorMeta &meta)>;

class AtenImporter;
/// Lowers the current node; on failure it has called `fail`.
using Converter = mlir::LogicalResult (*)(AtenImporter &);

/// The ATen overloads dsc lowers, by name, each with its converter.
const std::map<std::string, Converter> &opTable();

/// Imports `program` as a module with `func.func @forward` returning the
/// loss, as the ONNX importer does. Parameters train unless they do not
/// require grad or --freeze names them; buffers and constants are frozen.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importProgram(mlir::MLIRContext &ctx, const Program &program, const TensorSource &tensors,
              const frontend::ImportOptions &options);

class AtenImporter {
public:
  AtenImporter(mlir::MLIRContext &ctx, const Program &program, const TensorSource &tensors);
  llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> run(const frontend::ImportOptions &options);

  //===--- For converters: the current node ---------------------------------===//
  const Node &node() const { return *node_; }
  /// A tensor argument; null (after failing) when absent or not a tensor.
  mlir::Value tensor(const char *name);
  /// A tensor argument that may be None: null without failing then.
  mlir::Value optionalTensor(const char *name);
  /// The tensor arguments of a list (aten.cat's tensors).
  std::optional<std::vector<mlir::Value>> tensors(const char *name);
  /// Scalars with their schema defaults when the argument is absent.
  std::optional<int64_t> integer(const char *name, std::optional<int64_t> dflt = std::nullopt);
  std::optional<double> real(const char *name, std::optional<double> dflt = std::nullopt);
  std::optional<bool> boolean(const char *name, std::optional<bool> dflt = std::nullopt);
  std::optional<std::vector<int64_t>> integers(const char *name,
                                               std::optional<std::vector<int64_t>> dflt =
                                                   std::nullopt);
  std::optional<std::string> string(const char *name, std::optional<std::string> dflt = std::nullopt);
  /// A scalar argument (int or float), or a tensor: `other` of add.Tensor
  /// may be either. Scalars become rank-0 constants of `like`'s type.
  mlir::Value operand(const char *name, mlir::Value like);
  bool isNone(const char *name) const;
  /// The declared type of the node's result k.
  std::optional<TensorMeta> resultMeta(size_t k) const;

  void setOutput(size_t k, mlir::Value v);
  /// Whether a later node or the program's outputs read the node's result k.
  bool resultUsed(size_t k) const;
  mlir::LogicalResult fail(const llvm::Twine &message);
  int64_t nextRngStream() { return rngStreams_++; }

  mlir::OpBuilder &builder() { return b_; }
  mlir::Location loc() const { return loc_; }
  mlir::MLIRContext *context() { return &ctx_; }
  mlir::Type elementType(int dtype);

  /// An op whose result types are inferred, verified now (a crafted
  /// program's bad operand is the node's error); null after failing it.
  template <typename OpTy>
  mlir::Value op(mlir::ValueRange operands, llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    for (mlir::Value v : operands)
      if (!v)
        return {};
    mlir::Type none = b_.getNoneType();
    auto created = OpTy::create(b_, loc_, mlir::TypeRange{none}, operands, attrs);
    if (mlir::failed(inferTypes(created.getOperation())))
      return {};
    return checked(created.getOperation());
  }
  /// The first result of `op` if it verifies; otherwise erases it, fails the
  /// node with the verifier's message and returns null.
  mlir::Value checked(mlir::Operation *op) {
    return mlir::succeeded(verifyNew(op)) ? op->getResult(0) : mlir::Value();
  }
  /// An op with an explicit result type, verified now.
  template <typename OpTy>
  mlir::Value made(mlir::Type result, mlir::ValueRange operands,
                   llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    for (mlir::Value v : operands)
      if (!v)
        return {};
    auto created = OpTy::create(b_, loc_, mlir::TypeRange{result}, operands, attrs);
    if (mlir::failed(verifyNew(created.getOperation())))
      return {};
    return created->getResult(0);
  }
  template <typename OpTy> mlir::Value unary(mlir::Value x) {
    return x ? checked(OpTy::create(b_, loc_, x.getType(), x).getOperation()) : mlir::Value();
  }
  mlir::Value scalar(double v, mlir::Type elementType);
  mlir::Value splat(mlir::RankedTensorType type, double v);
  mlir::Value reshape(mlir::Value v, llvm::ArrayRef<int64_t> shape);
  mlir::Value transpose(mlir::Value v, llvm::ArrayRef<int64_t> permutation);
  mlir::Value slice(mlir::Value v, int64_t axis, int64_t lo, int64_t hi, int64_t step = 1);
  mlir::Value cast(mlir::Value v, mlir::Type elementType);
  mlir::NamedAttribute attr(llvm::StringRef name, mlir::Attribute value) {
    return b_.getNamedAttr(name, value);
  }
  /// A dimension argument in [-rank, rank) as an index in [0, rank).
  std::optional<int64_t> dim(int64_t d, int64_t rank);

private:
  mlir::LogicalResult inferTypes(mlir::Operation *op);
  mlir::LogicalResult verifyNew(mlir::Operation *op);
  const Arg *argument(const char *name, bool required);
  llvm::Error error(const llvm::Twine &message);

  mlir::MLIRContext &ctx_;
  const Program &program_;
  const TensorSource &tensorSource_;
  mlir::OpBuilder b_;
  mlir::Location loc_;
  const Node *node_ = nullptr;
  std::map<std::string, mlir::Value> values_;
  /// Integer and bool model tensors, folded into a constant where first
  /// read (value(): wherever the file put them, one IR).
  std::map<std::string, std::pair<const Input *, mlir::RankedTensorType>> unfolded_;
  /// An IntExpr's value over the shapes of the values built so far.
  std::optional<int64_t> evaluate(const IntExpr &e);
  /// The value of `name`: produced, an argument, or a constant folded now.
  llvm::Expected<mlir::Value> value(const std::string &name);
  std::set<std::string> read_; // every value some node or output reads
  int64_t rngStreams_ = 0;
  std::string diagnostic_, error_;
};

} // namespace dsc::aten

#endif // DSC_FRONTENDS_ATEN_ATENIMPORTER_H
