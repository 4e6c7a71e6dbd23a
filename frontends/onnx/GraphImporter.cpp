//===- GraphImporter.cpp - ONNX graph -> func.func of nn ops -------------===//
//
// Graph inputs become `train.input` arguments and floating-point
// initializers become arguments too; after import, those with a
// differentiable path to the loss that the model (or --freeze) lets train
// are `train.param`, the rest (masks and other frozen state) `train.buffer`.
// Integer and bool initializers and Constant nodes are compile-time values:
// nodes whose inputs are all compile-time values are folded on the host, so
// shape subgraphs vanish.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/GraphImporter.h"
#include "frontends/common/BuildOps.h"
#include "frontends/common/ForwardFunction.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/train/TrainDialect.h"

#include "onnx/defs/schema.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace dsc::onnx_import {

// Ops evaluated only on compile-time inputs (they have no nn counterpart).
static const char *const kFoldOnly[] = {"Range", "Floor", "Ceil"};

static ConverterTable makeConverters() {
  ConverterTable t;
  registerElementwiseConverters(t);
  registerActivationConverters(t);
  registerEinsumConverters(t);
  registerComputeConverters(t);
  registerLayoutConverters(t);
  registerConvConverters(t);
  registerNormConverters(t);
  registerRecurrentConverters(t);
  registerLoopConverters(t);
  registerIndexConverters(t);
  return t;
}

const std::vector<std::string> &supportedOps() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v;
    for (auto &[name, _] : makeConverters())
      v.push_back(name);
    v.insert(v.end(), std::begin(kFoldOnly), std::end(kFoldOnly));
    for (const auto &[op, opset] : opsBridgedFromNewerOpsets())
      v.push_back(op);
    std::sort(v.begin(), v.end());
    return v;
  }();
  return ops;
}

const std::vector<OpRange> &supportedOpRanges() {
  static const std::vector<OpRange> ranges = [] {
    std::vector<OpRange> v;
    for (const std::string &op : supportedOps()) {
      OpRange r{op};
      if (auto it = opsBridgedFromNewerOpsets().find(op); it != opsBridgedFromNewerOpsets().end())
        r.first = it->second;
      else
        // The first opset of ONNX 1.12's registry (13-17) that defines it.
        while (r.first < 17 && !onnx::OpSchemaRegistry::Schema(op, int(r.first), ""))
          ++r.first;
      v.push_back(r);
    }
    return v;
  }();
  return ranges;
}

GraphImporter::GraphImporter(MLIRContext &ctx, LoadedModel &model)
    : ctx_(ctx), model_(model), b_(&ctx), loc_(UnknownLoc::get(&ctx)),
      converters_(makeConverters()) {}

llvm::Error GraphImporter::error(const Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 model_.path + ": " + message.str());
}

LogicalResult GraphImporter::fail(const Twine &message) {
  if (error_.empty()) {
    std::string name = node_->name().empty()
                           ? "#" + std::to_string(nodeIndex_)
                           : "'" + node_->name() + "'";
    std::string origin = model_.originOf(*node_);
    error_ = "node " + name + " (" + node_->op_type() + ", opset " +
             std::to_string(model_.sourceOpset) + (origin.empty() ? "" : "; " + origin) +
             "): " + message.str();
  }
  return failure();
}

Type GraphImporter::elementType(int32_t dtype) {
  switch (dtype) {
  case onnx::TensorProto::FLOAT: return b_.getF32Type();
  case onnx::TensorProto::DOUBLE: return b_.getF64Type();
  case onnx::TensorProto::FLOAT16: return b_.getF16Type();
  case onnx::TensorProto::BFLOAT16: return b_.getBF16Type();
  case onnx::TensorProto::BOOL: return b_.getI1Type();
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8: return b_.getIntegerType(8);
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::UINT16: return b_.getIntegerType(16);
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::UINT32: return b_.getIntegerType(32);
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::UINT64: return b_.getIntegerType(64);
  default:
    (void)fail("element type " + dtypeName(dtype) + " is not supported");
    return {};
  }
}

LogicalResult GraphImporter::inferTypes(Operation *op) {
  diagnostic_.clear();
  if (succeeded(frontend::inferResultTypes(op)))
    return success();
  return fail(diagnostic_.empty() ? "cannot infer result types" : diagnostic_);
}

LogicalResult GraphImporter::verifyNew(Operation *op) {
  diagnostic_.clear();
  if (succeeded(frontend::verifyOrErase(op)))
    return success();
  return fail(diagnostic_.empty() ? "the op does not verify" : diagnostic_);
}

Value GraphImporter::materialize(const std::shared_ptr<HostTensor> &held) {
  if (auto it = materialized_.find(held.get()); it != materialized_.end())
    return arith::ConstantOp::create(b_, loc_, it->second.second);
  const HostTensor &t = *held;
  Type et = elementType(t.dtype);
  if (!et)
    return {};
  auto type = RankedTensorType::get(t.shape, et);
  DenseElementsAttr attr;
  bool isSplat = t.size() > 0;
  for (int64_t k = 1; k < t.size() && isSplat; ++k)
    isSplat = t.asDouble(k) == t.asDouble(0);
  if (isSplat)
    return splat(type, t.asDouble(0));
  if (auto ft = dyn_cast<FloatType>(et)) {
    SmallVector<APFloat> values;
    values.reserve(t.size());
    for (double v : t.f) {
      APFloat x(v);
      bool lost;
      x.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      values.push_back(x);
    }
    attr = DenseElementsAttr::get(type, values);
  } else {
    unsigned width = et.getIntOrFloatBitWidth();
    SmallVector<APInt> values;
    values.reserve(t.size());
    for (int64_t v : t.i)
      values.push_back(APInt(width, (uint64_t)v, /*isSigned=*/true, /*implicitTrunc=*/true));
    attr = DenseElementsAttr::get(type, values);
  }
  materialized_[held.get()] = {held, attr};
  return arith::ConstantOp::create(b_, loc_, attr);
}

Value GraphImporter::splat(RankedTensorType type, double v) {
  return frontend::splatConstant(b_, loc_, type, v);
}

Value GraphImporter::scalar(double v, Type elementType) {
  return splat(RankedTensorType::get({}, elementType), v);
}

const GraphImporter::Entry *GraphImporter::lookup(int k) {
  const std::string &name = inputName(*node_, k);
  auto it = values_.find(name);
  if (it == values_.end()) {
    (void)fail("input '" + name + "' is not produced by any earlier node");
    return nullptr;
  }
  return &it->second;
}

Value GraphImporter::input(int k) {
  if (!hasInput(k))
    return {};
  auto it = values_.find(inputName(*node_, k));
  if (it == values_.end()) {
    (void)lookup(k);
    return {};
  }
  Entry &e = it->second;
  if (!e.value && e.constant) {
    // Constants are materialized once, at their first use.
    e.value = materialize(e.constant);
  }
  return e.value;
}

Value GraphImporter::valueNamed(const std::string &name) {
  auto it = values_.find(name);
  if (it == values_.end()) {
    (void)fail("value '" + name + "' is not produced by any earlier node");
    return {};
  }
  Entry &e = it->second;
  if (!e.value && e.constant)
    e.value = materialize(e.constant);
  return e.value;
}

const onnx::NodeProto *GraphImporter::producerOf(const std::string &name) const {
  for (const auto &n : model_.model.graph().node())
    for (const auto &o : n.output())
      if (o == name)
        return &n;
  return nullptr;
}

const HostTensor *GraphImporter::constant(int k) {
  if (!hasInput(k))
    return nullptr;
  auto it = values_.find(inputName(*node_, k));
  return it == values_.end() ? nullptr : it->second.constant.get();
}

FailureOr<std::vector<int64_t>> GraphImporter::constantInts(int k, StringRef what) {
  const HostTensor *t = constant(k);
  if (!t) {
    (void)fail(what + " (input " + Twine(k) + ", '" + inputName(*node_, k) +
               "') must be a compile-time constant");
    return failure();
  }
  return t->ints();
}

RankedTensorType GraphImporter::inputType(int k) {
  if (const HostTensor *t = constant(k)) {
    Type et = elementType(t->dtype);
    return et ? RankedTensorType::get(t->shape, et) : RankedTensorType();
  }
  Value v = input(k);
  return v ? cast<RankedTensorType>(v.getType()) : RankedTensorType();
}

void GraphImporter::setOutput(int k, Value v) {
  if (outputUsed(k))
    values_[node_->output(k)] = Entry{v, nullptr};
}

void GraphImporter::setOutput(int k, HostTensor t) {
  if (outputUsed(k))
    values_[node_->output(k)] = Entry{{}, std::make_shared<HostTensor>(std::move(t))};
}

LogicalResult GraphImporter::importNode(const onnx::NodeProto &node, int index) {
  node_ = &node;
  nodeIndex_ = index;
  loc_ = NameLoc::get(b_.getStringAttr(node.name().empty()
                                           ? node.op_type() + "#" + std::to_string(index)
                                           : node.name()));
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return fail("ops of domain '" + node.domain() + "' are not supported; " +
                "dsc imports the default ONNX domain (ai.onnx)");

  // Fold when every input is a compile-time value.
  std::vector<const HostTensor *> constants;
  bool allConstant = node.input_size() > 0;
  for (int k = 0; k < node.input_size(); ++k) {
    if (!hasInput(k)) {
      constants.push_back(nullptr);
      continue;
    }
    if (!lookup(k))
      return failure();
    constants.push_back(constant(k));
    allConstant &= constants.back() != nullptr;
  }
  if (allConstant) {
    // Trailing optional inputs that are absent do not block folding.
    while (!constants.empty() && !constants.back())
      constants.pop_back();
    // The same node of the same tensors folds to the same tensors.
    std::string key = node.op_type();
    for (const onnx::AttributeProto &a : node.attribute())
      key += '\0' + a.SerializeAsString();
    for (const HostTensor *c : constants)
      key += '\0' + std::to_string(reinterpret_cast<uintptr_t>(c));
    if (auto hit = folded_.find(key); hit != folded_.end()) {
      for (size_t k = 0; k < hit->second.size(); ++k)
        if (outputUsed(k))
          values_[node.output(k)] = Entry{{}, hit->second[k]};
      return success();
    }
    std::string foldError;
    if (auto outs = foldNode(node, constants, foldError)) {
      if (!foldError.empty())
        return fail(foldError);
      std::vector<std::shared_ptr<HostTensor>> held;
      for (HostTensor &t : *outs)
        held.push_back(std::make_shared<HostTensor>(std::move(t)));
      for (size_t k = 0; k < held.size(); ++k)
        if (outputUsed(k))
          values_[node.output(k)] = Entry{{}, held[k]};
      folded_[key] = std::move(held);
      return success();
    }
  }

  auto it = converters_.find(node.op_type());
  if (it == converters_.end()) {
    if (llvm::is_contained(kFoldOnly, node.op_type()))
      return fail("dsc evaluates " + node.op_type() +
                  " only at compile time, and its inputs are not constants");
    return fail("op '" + node.op_type() + "' is not supported; supported ops: " +
                llvm::join(supportedOps(), ", "));
  }
  return it->second(*this);
}

llvm::Expected<OwningOpRef<ModuleOp>> GraphImporter::run(const ImportOptions &options) {
  const onnx::GraphProto &graph = model_.model.graph();
  auto rule = decideTrainable(model_, options);
  if (!rule)
    return rule.takeError();
  if (options.notes)
    for (const std::string &note : model_.exporterNotes)
      *options.notes << "dsc: note: " << model_.path << ": " << note << "\n";
  ScopedDiagnosticHandler capture(&ctx_, [&](Diagnostic &d) {
    diagnostic_ = d.str();
    return success();
  });

  // Static input types (made static by the loader).
  std::set<std::string> initializerNames;
  for (const auto &t : graph.initializer())
    initializerNames.insert(t.name());
  SmallVector<Type> argTypes;
  SmallVector<std::pair<std::string, StringRef>> argRoles; // name, role attr
  for (const auto &in : graph.input()) {
    if (initializerNames.count(in.name()))
      continue;
    const auto &tt = in.type().tensor_type();
    if (dtypeBytes(tt.elem_type()) == 0)
      return error("input '" + in.name() + "': element type " +
                   dtypeName(tt.elem_type()) + " is not supported");
    Type et = elementType(tt.elem_type());
    SmallVector<int64_t> dims;
    for (const auto &d : tt.shape().dim())
      dims.push_back(d.dim_value());
    argTypes.push_back(RankedTensorType::get(dims, et));
    argRoles.push_back({in.name(), train::TrainDialect::kInput});
  }

  // Integer/bool initializers are compile-time values; float ones are arguments.
  for (const auto &t : graph.initializer()) {
    std::vector<int64_t> dims(t.dims().begin(), t.dims().end()); // checked by the loader
    if (dtypeBytes(t.data_type()) == 0)
      return error("initializer '" + t.name() + "': element type " +
                   dtypeName(t.data_type()) + " is not supported");
    if (isFloatDType(t.data_type())) {
      Type et = elementType(t.data_type());
      argTypes.push_back(RankedTensorType::get(SmallVector<int64_t>(dims.begin(), dims.end()), et));
      argRoles.push_back({t.name(), frontend::kInitializerAttr});
      continue;
    }
    auto host = std::make_shared<HostTensor>();
    std::string bytes;
    const std::string *external = nullptr;
    if (auto ext = model_.external.find(t.name()); ext != model_.external.end()) {
      auto read = readExternal(ext->second);
      if (!read)
        return read.takeError();
      bytes = std::move(*read);
      external = &bytes;
    }
    if (auto e = decodeTensor(t, external, *host))
      return error("initializer '" + t.name() + "': " + *e);
    values_[t.name()] = Entry{{}, host};
  }

  // Owned from here on: every error return below frees it.
  OwningOpRef<ModuleOp> owned = ModuleOp::create(b_, UnknownLoc::get(&ctx_));
  ModuleOp module = *owned;
  module->setAttr("dsc.source", b_.getStringAttr(model_.path));
  module->setAttr("dsc.opset", b_.getI64IntegerAttr(model_.sourceOpset));
  if (!model_.weightless.empty())
    module->setAttr("dsc.no_weights", b_.getUnitAttr());
  b_.setInsertionPointToEnd(module.getBody());
  auto fn = func::FuncOp::create(b_, UnknownLoc::get(&ctx_), "forward",
                                 b_.getFunctionType(argTypes, {}));
  Block *entry = fn.addEntryBlock();
  for (auto [k, role] : llvm::enumerate(argRoles)) {
    fn.setArgAttr(k, role.second, b_.getStringAttr(role.first));
    values_[role.first] = Entry{entry->getArgument(k), nullptr};
  }
  b_.setInsertionPointToEnd(entry);

  for (int k = 0; k < graph.node_size(); ++k)
    if (failed(importNode(graph.node(k), k)))
      return error(error_);

  // The loss: the named output, or the single scalar float output.
  auto isScalarFloat = [](Value v) {
    auto t = v ? dyn_cast<RankedTensorType>(v.getType()) : nullptr;
    return t && t.getRank() == 0 && isa<FloatType>(t.getElementType());
  };
  auto outputValue = [&](const std::string &name) -> Value {
    auto it = values_.find(name);
    if (it == values_.end())
      return {};
    if (!it->second.value && it->second.constant)
      it->second.value = materialize(it->second.constant);
    return it->second.value;
  };
  std::vector<std::string> outputs;
  for (const auto &o : graph.output())
    outputs.push_back(o.name());
  if (outputs.empty())
    return error("the graph has no outputs; export the model with its loss as an output");
  std::string lossName = options.lossName;
  if (lossName.empty()) {
    std::vector<std::string> scalars;
    for (const auto &o : outputs)
      if (isScalarFloat(outputValue(o)))
        scalars.push_back(o);
    if (scalars.size() != 1)
      return error((scalars.empty() ? "no graph output is a scalar float loss"
                                    : "several outputs are scalar losses (" +
                                          llvm::join(scalars, ", ") + ")") +
                   Twine("; outputs: ") + llvm::join(outputs, ", ") +
                   "; choose the loss with --loss NAME");
    lossName = scalars.front();
  } else if (!llvm::is_contained(outputs, lossName)) {
    return error("--loss '" + lossName + "' is not a graph output; outputs: " +
                 llvm::join(outputs, ", "));
  }
  Value loss = outputValue(lossName);
  if (!isScalarFloat(loss)) {
    std::string type;
    llvm::raw_string_ostream os(type);
    if (loss)
      os << loss.getType();
    return error("the loss '" + lossName + "' must be a scalar float, but it is " +
                 (loss ? type : std::string("not computed")) +
                 "; reduce it to a scalar (e.g. reduction='mean') before export");
  }
  std::vector<std::string> trained;
  if (std::string why = frontend::finishForward(
          fn, loss, loc_, [&](StringRef name) { return rule->allows(name.str()); }, trained);
      !why.empty())
    return error(why);
  // Without the exporter's list or --freeze this is a guess: say it.
  if (options.notes && !rule->listed && options.freeze.empty() && !trained.empty())
    *options.notes << "dsc: note: " << model_.path << " does not say which initializers are "
                   << "trainable (no '" << kTrainableKey << "' metadata, no --freeze); "
                   << "training the " << trained.size()
                   << " float initializer(s) with a gradient path to the loss: "
                   << compactNames(trained) << "\n";

  diagnostic_.clear();
  if (failed(verify(module)))
    return error("internal error: the imported IR does not verify: " + diagnostic_);
  return owned;
}

llvm::Expected<OwningOpRef<ModuleOp>>
importOnnxFile(MLIRContext &ctx, const std::string &path, const ImportOptions &options) {
  ctx.loadDialect<nn::NNDialect, train::TrainDialect, func::FuncDialect,
                  arith::ArithDialect>();
  auto model = loadModel(path, options);
  if (!model)
    return model.takeError();
  GraphImporter importer(ctx, **model);
  return importer.run(options);
}

} // namespace dsc::onnx_import
