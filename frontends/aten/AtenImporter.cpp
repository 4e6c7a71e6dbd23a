//===- AtenImporter.cpp - an ATen program -> func.func of nn ops ---------===//
//
// The program's user inputs become train.input arguments; its floating-point
// parameters, buffers and constants become arguments named by their PyTorch
// names (wte.weight), which finishForward marks train.param or train.buffer:
// a parameter trains when it requires grad and --freeze does not name it,
// buffers and constants never do. Integer and bool buffers (masks,
// positions) are folded in as constants, as the ONNX importer folds integer
// initializers.
//
//===----------------------------------------------------------------------===//
#include "frontends/aten/AtenImporter.h"
#include "frontends/common/BuildOps.h"
#include "frontends/common/ForwardFunction.h"
#include "frontends/common/Names.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"

#include <cstring>
#include <set>

using namespace mlir;

namespace dsc::aten {

AtenImporter::AtenImporter(MLIRContext &ctx, const Program &program, const TensorSource &tensors)
    : ctx_(ctx), program_(program), tensorSource_(tensors), b_(&ctx),
      loc_(UnknownLoc::get(&ctx)) {
  for (const Node &n : program.nodes)
    for (const auto &[name, a] : n.args) {
      if (a.kind == Arg::Tensor)
        read_.insert(a.tensor);
      read_.insert(a.tensors.begin(), a.tensors.end());
    }
  read_.insert(program.outputs.begin(), program.outputs.end());
}

llvm::Error AtenImporter::error(const Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 program_.path + ": " + message.str());
}

LogicalResult AtenImporter::fail(const Twine &message) {
  if (error_.empty()) {
    std::string where = node_->sourceLine;
    if (!node_->module.empty())
      where += (where.empty() ? "" : ", ") + std::string("module ") + node_->module;
    error_ = "node '" + node_->name + "' (" + node_->target +
             (where.empty() ? "" : "; " + where) + "): " + message.str();
  }
  return failure();
}

Type AtenImporter::elementType(int dtype) {
  switch (ScalarType(dtype)) {
  case ScalarType::Float: return b_.getF32Type();
  case ScalarType::Double: return b_.getF64Type();
  case ScalarType::Half: return b_.getF16Type();
  case ScalarType::BFloat16: return b_.getBF16Type();
  case ScalarType::Bool: return b_.getI1Type();
  case ScalarType::Byte:
  case ScalarType::Char: return b_.getIntegerType(8);
  case ScalarType::Short: return b_.getIntegerType(16);
  case ScalarType::Int: return b_.getIntegerType(32);
  case ScalarType::Long: return b_.getIntegerType(64);
  }
  return {};
}

LogicalResult AtenImporter::inferTypes(Operation *op) {
  diagnostic_.clear();
  if (succeeded(frontend::inferResultTypes(op)))
    return success();
  return fail(diagnostic_.empty() ? "cannot infer result types" : diagnostic_);
}

LogicalResult AtenImporter::verifyNew(Operation *op) {
  diagnostic_.clear();
  if (succeeded(frontend::verifyOrErase(op)))
    return success();
  return fail(diagnostic_.empty() ? "the op does not verify" : diagnostic_);
}

const Arg *AtenImporter::argument(const char *name, bool required) {
  const Arg *a = node_->arg(name);
  if (!a && required)
    (void)fail(Twine("argument '") + name + "' is missing");
  return a;
}

bool AtenImporter::isNone(const char *name) const {
  const Arg *a = node_->arg(name);
  return !a || a->kind == Arg::None;
}

Value AtenImporter::tensor(const char *name) {
  const Arg *a = argument(name, true);
  if (!a)
    return {};
  if (a->kind != Arg::Tensor) {
    (void)fail(Twine("argument '") + name + "' is not a tensor");
    return {};
  }
  auto v = value(a->tensor);
  if (!v) {
    (void)fail(llvm::toString(v.takeError()));
    return {};
  }
  return *v;
}

Value AtenImporter::optionalTensor(const char *name) {
  return isNone(name) ? Value() : tensor(name);
}

std::optional<std::vector<Value>> AtenImporter::tensors(const char *name) {
  const Arg *a = argument(name, true);
  if (!a)
    return std::nullopt;
  if (a->kind != Arg::Tensors) {
    (void)fail(Twine("argument '") + name + "' is not a list of tensors");
    return std::nullopt;
  }
  std::vector<Value> out;
  for (const std::string &t : a->tensors) {
    auto v = value(t);
    if (!v) {
      (void)fail(llvm::toString(v.takeError()));
      return std::nullopt;
    }
    out.push_back(*v);
  }
  return out;
}

static Value constantFrom(OpBuilder &b, Location loc, RankedTensorType type,
                          const std::string &bytes);

llvm::Expected<Value> AtenImporter::value(const std::string &name) {
  auto it = values_.find(name);
  if (it != values_.end() && it->second)
    return it->second;
  auto pending = unfolded_.find(name);
  if (pending == unfolded_.end())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "value '" + name + "' is not produced by any earlier node");
  TensorMeta meta;
  auto bytes = tensorSource_(pending->second.first->name, meta);
  if (!bytes)
    return bytes.takeError();
  Value c = constantFrom(b_, loc_, pending->second.second, *bytes);
  unfolded_.erase(pending);
  return values_[name] = c;
}

std::optional<int64_t> AtenImporter::integer(const char *name, std::optional<int64_t> dflt) {
  const Arg *a = argument(name, !dflt);
  if (!a || a->kind == Arg::None) {
    if (!dflt && a)
      (void)fail(Twine("argument '") + name + "' is None");
    return dflt;
  }
  if (a->kind == Arg::Int && !a->exprs.empty() && a->exprs[0])
    return evaluate(*a->exprs[0]);
  if (a->kind == Arg::Int || a->kind == Arg::Bool || a->kind == Arg::ScalarType)
    return a->i;
  (void)fail(Twine("argument '") + name + "' is not an integer");
  return std::nullopt;
}

std::optional<int64_t> AtenImporter::evaluate(const IntExpr &e) {
  switch (e.op) {
  case IntExpr::Const:
    return e.value;
  case IntExpr::Size: {
    auto v = value(e.tensor);
    if (!v) {
      (void)fail(llvm::toString(v.takeError()));
      return std::nullopt;
    }
    auto shape = mlir::cast<RankedTensorType>(v->getType()).getShape();
    auto d = dim(e.value, int64_t(shape.size()));
    if (!d)
      return std::nullopt;
    return shape.empty() ? 1 : shape[*d];
  }
  default:
    break;
  }
  if (!e.lhs || !e.rhs) {
    (void)fail("a malformed size expression");
    return std::nullopt;
  }
  auto a = evaluate(*e.lhs), b = evaluate(*e.rhs);
  if (!a || !b)
    return std::nullopt;
  switch (e.op) {
  case IntExpr::Add: return *a + *b;
  case IntExpr::Sub: return *a - *b;
  case IntExpr::Mul: return *a * *b;
  case IntExpr::FloorDiv:
    if (*b == 0) {
      (void)fail("a size expression divides by 0");
      return std::nullopt;
    }
    return (*a / *b) - ((*a % *b != 0) && ((*a < 0) != (*b < 0)) ? 1 : 0);
  default:
    return std::nullopt;
  }
}

std::optional<double> AtenImporter::real(const char *name, std::optional<double> dflt) {
  const Arg *a = argument(name, !dflt);
  if (!a || a->kind == Arg::None) {
    if (!dflt && a)
      (void)fail(Twine("argument '") + name + "' is None");
    return dflt;
  }
  if (a->kind == Arg::Float)
    return a->f;
  if (a->kind == Arg::Int && !a->exprs.empty() && a->exprs[0]) {
    auto v = evaluate(*a->exprs[0]);
    return v ? std::optional<double>(double(*v)) : std::nullopt;
  }
  if (a->kind == Arg::Int || a->kind == Arg::Bool)
    return double(a->i);
  (void)fail(Twine("argument '") + name + "' is not a number");
  return std::nullopt;
}

std::optional<bool> AtenImporter::boolean(const char *name, std::optional<bool> dflt) {
  auto v = integer(name, dflt ? std::optional<int64_t>(*dflt) : std::nullopt);
  return v ? std::optional<bool>(*v != 0) : std::nullopt;
}

std::optional<std::vector<int64_t>>
AtenImporter::integers(const char *name, std::optional<std::vector<int64_t>> dflt) {
  const Arg *a = argument(name, !dflt);
  if (!a || a->kind == Arg::None)
    return dflt;
  if (a->kind == Arg::Ints) {
    std::vector<int64_t> out = a->ints;
    for (size_t k = 0; k < a->exprs.size() && k < out.size(); ++k)
      if (a->exprs[k]) {
        auto v = evaluate(*a->exprs[k]);
        if (!v)
          return std::nullopt;
        out[k] = *v;
      }
    return out;
  }
  if (a->kind == Arg::Int)
    return std::vector<int64_t>{a->i};
  (void)fail(Twine("argument '") + name + "' is not a list of integers");
  return std::nullopt;
}

std::optional<std::string> AtenImporter::string(const char *name,
                                                std::optional<std::string> dflt) {
  const Arg *a = argument(name, !dflt);
  if (!a || a->kind == Arg::None)
    return dflt;
  if (a->kind == Arg::String)
    return a->s;
  (void)fail(Twine("argument '") + name + "' is not a string");
  return std::nullopt;
}

Value AtenImporter::operand(const char *name, Value like) {
  const Arg *a = argument(name, true);
  if (!a || !like)
    return {};
  if (a->kind == Arg::Tensor)
    return tensor(name);
  auto et = mlir::cast<RankedTensorType>(like.getType()).getElementType();
  if (a->kind == Arg::Float)
    return scalar(a->f, et);
  if (a->kind == Arg::Int && !a->exprs.empty() && a->exprs[0]) {
    auto v = evaluate(*a->exprs[0]);
    return v ? scalar(double(*v), et) : Value();
  }
  if (a->kind == Arg::Int || a->kind == Arg::Bool)
    return scalar(double(a->i), et);
  (void)fail(Twine("argument '") + name + "' is not a tensor or a number");
  return {};
}

std::optional<TensorMeta> AtenImporter::resultMeta(size_t k) const {
  if (k >= node_->outputs.size())
    return std::nullopt;
  auto it = program_.values.find(node_->outputs[k]);
  if (it == program_.values.end())
    return std::nullopt;
  return it->second;
}

bool AtenImporter::resultUsed(size_t k) const {
  return k < node_->outputs.size() && !node_->outputs[k].empty() &&
         read_.count(node_->outputs[k]);
}

void AtenImporter::setOutput(size_t k, Value v) {
  if (k < node_->outputs.size() && !node_->outputs[k].empty())
    values_[node_->outputs[k]] = v;
}

Value AtenImporter::splat(RankedTensorType type, double v) {
  return frontend::splatConstant(b_, loc_, type, v);
}

Value AtenImporter::scalar(double v, Type elementType) {
  return splat(RankedTensorType::get({}, elementType), v);
}

Value AtenImporter::reshape(Value v, ArrayRef<int64_t> shape) {
  if (!v)
    return {};
  auto t = mlir::cast<RankedTensorType>(v.getType());
  if (t.getShape() == shape)
    return v;
  return made<nn::ReshapeOp>(t.clone(shape), {v});
}

Value AtenImporter::transpose(Value v, ArrayRef<int64_t> permutation) {
  bool identity = true;
  for (size_t k = 0; k < permutation.size(); ++k)
    identity &= permutation[k] == int64_t(k);
  if (!v || identity)
    return v;
  return op<nn::TransposeOp>({v}, {attr("permutation", b_.getDenseI64ArrayAttr(permutation))});
}

Value AtenImporter::slice(Value v, int64_t axis, int64_t lo, int64_t hi, int64_t step) {
  if (!v)
    return {};
  auto shape = mlir::cast<RankedTensorType>(v.getType()).getShape();
  if (lo == 0 && hi == shape[axis] && step == 1)
    return v;
  SmallVector<int64_t> start(shape.size(), 0), limit(shape), stride(shape.size(), 1);
  start[axis] = lo;
  limit[axis] = hi;
  stride[axis] = step;
  return op<nn::SliceOp>({v}, {attr("start", b_.getDenseI64ArrayAttr(start)),
                               attr("limit", b_.getDenseI64ArrayAttr(limit)),
                               attr("stride", b_.getDenseI64ArrayAttr(stride))});
}

Value AtenImporter::cast(Value v, Type elementType) {
  if (!v)
    return {};
  auto t = mlir::cast<RankedTensorType>(v.getType());
  if (t.getElementType() == elementType)
    return v;
  return made<nn::CastOp>(t.clone(elementType), {v});
}

std::optional<int64_t> AtenImporter::dim(int64_t d, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (d < -r || d >= r) {
    (void)fail("dimension " + Twine(d) + " is out of range for rank " + Twine(rank));
    return std::nullopt;
  }
  return d < 0 ? d + r : d;
}

/// A constant of `meta`'s type from the little-endian `bytes`.
static Value constantFrom(OpBuilder &b, Location loc, RankedTensorType type,
                          const std::string &bytes) {
  Type et = type.getElementType();
  DenseElementsAttr attr;
  if (et.isInteger(1)) {
    SmallVector<bool> v;
    for (char c : bytes)
      v.push_back(c != 0);
    attr = DenseElementsAttr::get(type, ArrayRef<bool>(v));
  } else {
    unsigned width = et.getIntOrFloatBitWidth();
    SmallVector<APInt> v;
    for (size_t i = 0; i + width / 8 <= bytes.size(); i += width / 8) {
      uint64_t x = 0;
      std::memcpy(&x, bytes.data() + i, width / 8);
      v.push_back(APInt(width, x, /*isSigned=*/false, /*implicitTrunc=*/true));
    }
    if (isa<FloatType>(et)) {
      SmallVector<APFloat> f;
      for (const APInt &x : v)
        f.push_back(APFloat(mlir::cast<FloatType>(et).getFloatSemantics(), x));
      attr = DenseElementsAttr::get(type, f);
    } else {
      attr = DenseElementsAttr::get(type, v);
    }
  }
  return arith::ConstantOp::create(b, loc, attr);
}

llvm::Expected<OwningOpRef<ModuleOp>> AtenImporter::run(const frontend::ImportOptions &options) {
  ScopedDiagnosticHandler capture(&ctx_, [&](Diagnostic &d) {
    diagnostic_ = d.str();
    return success();
  });
  auto typeOfValue = [&](const std::string &name) -> llvm::Expected<RankedTensorType> {
    auto it = program_.values.find(name);
    if (it == program_.values.end())
      return error("value '" + name + "' has no tensor type in the program");
    Type et = elementType(it->second.dtype);
    if (!et)
      return error("value '" + name + "' has element type " +
                   scalarTypeName(it->second.dtype) + ", which dsc does not support");
    return RankedTensorType::get(it->second.sizes, et);
  };

  // Options that shape the inputs: the program's shapes are fixed.
  std::set<std::string> userInputs;
  for (const Input &in : program_.inputs)
    if (in.role == Input::UserInput)
      userInputs.insert(in.name);
  for (const auto &[name, shape] : options.inputShapes) {
    if (!userInputs.count(name))
      return error("--input-shape names '" + name + "', which is not an input of the program; "
                   "its inputs are " + llvm::join(userInputs, ", "));
    auto t = typeOfValue(name);
    if (!t)
      return t.takeError();
    if (t->getShape() != ArrayRef<int64_t>(shape))
      return error("--input-shape " + name + " differs from the shape the program was "
                   "exported with (" + nn::formatShape(t->getShape()) +
                   "); export it again with inputs of the shape to train on");
  }
  if (options.batchSize > 0)
    for (const std::string &name : userInputs) {
      auto t = typeOfValue(name);
      if (!t)
        return t.takeError();
      if (t->getRank() == 0 || t->getDimSize(0) != options.batchSize)
        return error("--batch-size " + Twine(options.batchSize) + " differs from input '" +
                     name + "' " + nn::formatShape(t->getShape()) +
                     " of the exported program; export it again with that batch size");
    }

  // Arguments: user inputs, then the float model tensors.
  SmallVector<Type> argTypes;
  SmallVector<std::pair<std::string, StringRef>> argRoles; // name, role
  SmallVector<std::string> argValues;                      // the placeholder each stands for
  std::vector<std::string> all, trainableNames;
  std::set<std::string> floats;
  std::vector<std::pair<const Input *, RankedTensorType>> folded;
  // User inputs first, as the ONNX importer orders them.
  for (bool user : {true, false})
    for (const Input &in : program_.inputs) {
      if ((in.role == Input::UserInput) != user)
        continue;
      auto t = typeOfValue(in.placeholder);
      if (!t)
        return t.takeError();
      if (user) {
        argTypes.push_back(*t);
        argRoles.push_back({in.name, train::TrainDialect::kInput});
        argValues.push_back(in.placeholder);
        continue;
      }
      all.push_back(in.name);
      if (!isa<FloatType>(t->getElementType())) {
        folded.push_back({&in, *t});
        continue;
      }
      floats.insert(in.name);
      if (in.role == Input::Parameter && in.requiresGrad)
        trainableNames.push_back(in.name);
      argTypes.push_back(*t);
      argRoles.push_back({in.name, frontend::kInitializerAttr});
      argValues.push_back(in.placeholder);
    }
  auto frozen = frontend::frozenBy(program_.path, options.freeze, all, floats);
  if (!frozen)
    return frozen.takeError();
  std::set<std::string> trainable(trainableNames.begin(), trainableNames.end());

  OwningOpRef<ModuleOp> owned = ModuleOp::create(b_, UnknownLoc::get(&ctx_));
  ModuleOp module = *owned;
  module->setAttr("dsc.source", b_.getStringAttr(program_.path));
  if (!program_.producer.empty())
    module->setAttr("dsc.producer", b_.getStringAttr(program_.producer));
  b_.setInsertionPointToEnd(module.getBody());
  auto fn = func::FuncOp::create(b_, UnknownLoc::get(&ctx_), "forward",
                                 b_.getFunctionType(argTypes, {}));
  Block *entry = fn.addEntryBlock();
  for (auto [k, role] : llvm::enumerate(argRoles)) {
    fn.setArgAttr(k, role.second, b_.getStringAttr(role.first));
    values_[argValues[k]] = entry->getArgument(k);
  }
  b_.setInsertionPointToEnd(entry);
  for (auto &[in, type] : folded)
    unfolded_[in->placeholder] = {in, type};

  for (const Node &n : program_.nodes) {
    node_ = &n;
    loc_ = NameLoc::get(b_.getStringAttr(n.name.empty() ? n.target : n.name));
    auto it = opTable().find(n.target);
    if (it == opTable().end()) {
      (void)fail("ATen operator '" + n.target + "' is not supported (docs/aten-ops.md lists the " +
                 Twine(opTable().size()) + " that are)");
      return error(error_);
    }
    if (failed(it->second(*this)))
      return error(error_.empty() ? "node '" + n.name + "': lowering failed" : error_);
  }

  // The loss: the named output, or the single scalar float output.
  auto outputValue = [&](const std::string &name) -> Value {
    auto v = value(name);
    if (!v) {
      llvm::consumeError(v.takeError());
      return Value();
    }
    return *v;
  };
  auto isScalarFloat = [](Value v) {
    auto t = v ? dyn_cast<RankedTensorType>(v.getType()) : nullptr;
    return t && t.getRank() == 0 && isa<FloatType>(t.getElementType());
  };
  if (program_.outputs.empty())
    return error("the program has no outputs; export a forward that returns the loss");
  std::string lossName = options.lossName;
  if (lossName.empty()) {
    std::vector<std::string> scalars;
    for (const auto &o : program_.outputs)
      if (isScalarFloat(outputValue(o)))
        scalars.push_back(o);
    if (scalars.size() != 1)
      return error((scalars.empty() ? "no output is a scalar float loss"
                                    : "several outputs are scalar losses (" +
                                          llvm::join(scalars, ", ") + ")") +
                   Twine("; outputs: ") + llvm::join(program_.outputs, ", ") +
                   "; choose the loss with --loss NAME");
    lossName = scalars.front();
  } else if (!llvm::is_contained(program_.outputs, lossName)) {
    return error("--loss '" + lossName + "' is not an output of the program; outputs: " +
                 llvm::join(program_.outputs, ", "));
  }
  Value loss = outputValue(lossName);
  if (!isScalarFloat(loss))
    return error("the loss '" + lossName + "' must be a scalar float; reduce it to a scalar "
                 "(e.g. reduction='mean') in forward before export");

  std::vector<std::string> trained;
  if (std::string why = frontend::finishForward(
          fn, loss, loc_,
          [&](StringRef name) {
            return trainable.count(name.str()) && !frozen->count(name.str());
          },
          trained);
      !why.empty())
    return error(why);
  diagnostic_.clear();
  if (failed(verify(module)))
    return error("internal error: the imported IR does not verify: " + diagnostic_);
  return owned;
}

llvm::Expected<OwningOpRef<ModuleOp>> importProgram(MLIRContext &ctx, const Program &program,
                                                    const TensorSource &tensors,
                                                    const frontend::ImportOptions &options) {
  ctx.loadDialect<nn::NNDialect, train::TrainDialect, func::FuncDialect, arith::ArithDialect>();
  AtenImporter importer(ctx, program, tensors);
  return importer.run(options);
}

} // namespace dsc::aten
