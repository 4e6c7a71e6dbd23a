//===- OpsetBridge.cpp - opsets 18-22 rewritten to their opset-17 forms ---===//
//
// Debian's ONNX (1.12) knows opsets up to 17: its checker and shape
// inference have no schema for what PyTorch's dynamo exporter writes (opset
// 18-20). Between 17 and 22 few operators changed meaning; most only gained
// element types. So a model of a newer opset is rewritten here, node by
// node, to the opset-17 form of the same computation, and everything after
// (checker, shape inference, the converters) sees opset 17:
//
//   Reduce* (18)     axes move from an input back to an attribute (they
//                    must be constants, as dsc's reductions require anyway);
//   Split (18)       num_outputs: Slices of ceil(d / n), the last smaller;
//   Gelu (20)        the erf or tanh formula, which nn-fusion turns back
//                    into one nn.gelu (what the legacy exporter writes);
//   Cast (19)        saturate only concerns float8, which dsc refuses;
//   Pad, Resize, AveragePool, Scatter*: their new attributes and inputs at
//                    their old defaults are dropped; otherwise refused.
//
// An operator that exists only in a newer opset is refused here, naming it,
// rather than by the checker's "no schema" message.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/ModelLoader.h"
#include "frontends/onnx/OnnxAttrs.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <map>
#include <set>

namespace dsc::onnx_import {
namespace {

/// What each newer opset added that has no opset-17 form.
const std::map<std::string, int> &opsOnlyInNewerOpsets() {
  static const std::map<std::string, int> ops = {
      {"BitwiseAnd", 18},  {"BitwiseNot", 18},     {"BitwiseOr", 18},   {"BitwiseXor", 18},
      {"CenterCropPad", 18}, {"Col2Im", 18},       {"GroupNormalization", 18},
      {"Mish", 18},        {"OptionalGetElement", 18}, {"OptionalHasElement", 18},
      {"DeformConv", 19},  {"AffineGrid", 20},     {"DFT", 20},         {"Gelu", 20},           {"GridSample", 20},  {"ImageDecoder", 20},
      {"RegexFullMatch", 20}, {"StringConcat", 20}, {"StringSplit", 20},
      {"Attention", 23},   {"RMSNormalization", 23}, {"RotaryEmbedding", 23},
      {"TensorScatter", 24}, {"Swish", 24}};
  return ops;
}

const std::set<std::string> kReductionsWithAxesInput = {
    "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
    "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};

class Bridge {
public:
  explicit Bridge(LoadedModel &m) : m_(m) {
    for (const auto &t : m.model.graph().initializer())
      initializers_[t.name()] = &t;
  }

  llvm::Error run() {
    auto *graph = m_.model.mutable_graph();
    google::protobuf::RepeatedPtrField<onnx::NodeProto> out;
    for (int k = 0; k < graph->node_size(); ++k) {
      if (graph->node(k).op_type() == "Constant")
        for (const auto &a : graph->node(k).attribute())
          if (a.name() == "value" && a.type() == onnx::AttributeProto::TENSOR &&
              graph->node(k).output_size())
            constants_[graph->node(k).output(0)] = &a.t();
      onnx::NodeProto node = graph->node(k);
      if (!node.domain().empty() && node.domain() != "ai.onnx") {
        *out.Add() = std::move(node);
        continue;
      }
      for (auto &a : *node.mutable_attribute())
        if (a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS)
          return fail(node, k, "subgraphs (If, Loop, Scan) are imported only from opsets 13-17");
      if (auto e = bridgeNode(node, k, out))
        return e;
    }
    graph->mutable_node()->Swap(&out);
    for (auto &op : *m_.model.mutable_opset_import())
      if (op.domain().empty() || op.domain() == "ai.onnx")
        op.set_version(17);
    // IR 9 and 10 added float8 and 4-bit types, which dsc refuses by type;
    // the checker of ONNX 1.12 reads IR 8.
    if (m_.model.ir_version() > 8)
      m_.model.set_ir_version(8);
    m_.opset = 17;
    return llvm::Error::success();
  }

private:
  llvm::Error fail(const onnx::NodeProto &node, int k, const llvm::Twine &why) {
    std::string name = node.name().empty() ? "#" + std::to_string(k) : "'" + node.name() + "'";
    std::string origin = m_.originOf(node);
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   m_.path + ": node " + name + " (" + node.op_type() +
                                       ", opset " + std::to_string(m_.sourceOpset) +
                                       (origin.empty() ? "" : "; " + origin) + "): " + why.str());
  }

  /// Integer values of a constant input (an initializer or a Constant
  /// node's tensor), or nullopt.
  std::optional<std::vector<int64_t>> constantInts(const std::string &name) {
    const onnx::TensorProto *t = nullptr;
    if (auto it = initializers_.find(name); it != initializers_.end())
      t = it->second;
    else if (auto c = constants_.find(name); c != constants_.end())
      t = c->second;
    if (!t || (t->data_type() != onnx::TensorProto::INT64 &&
               t->data_type() != onnx::TensorProto::INT32))
      return std::nullopt;
    std::vector<int64_t> v;
    if (t->has_raw_data()) {
      const std::string &raw = t->raw_data();
      size_t width = t->data_type() == onnx::TensorProto::INT64 ? 8 : 4;
      if (raw.size() % width)
        return std::nullopt;
      for (size_t i = 0; i < raw.size(); i += width) {
        int64_t x = 0;
        if (width == 8)
          std::memcpy(&x, raw.data() + i, 8);
        else {
          int32_t y;
          std::memcpy(&y, raw.data() + i, 4);
          x = y;
        }
        v.push_back(x);
      }
    } else if (t->data_type() == onnx::TensorProto::INT64) {
      v.assign(t->int64_data().begin(), t->int64_data().end());
    } else {
      v.assign(t->int32_data().begin(), t->int32_data().end());
    }
    return v;
  }

  std::string fresh(const std::string &base) {
    std::string name;
    do
      name = base + "__dsc" + std::to_string(counter_++);
    while (initializers_.count(name));
    return name;
  }

  /// A one-element Constant node (float or int64); returns its output name.
  std::string constantNode(google::protobuf::RepeatedPtrField<onnx::NodeProto> &out,
                           const std::string &base, int32_t dtype, double v) {
    onnx::NodeProto *c = out.Add();
    c->set_op_type("Constant");
    std::string name = fresh(base);
    c->set_name(name);
    c->add_output(name);
    onnx::AttributeProto *a = c->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    onnx::TensorProto *t = a->mutable_t();
    t->set_data_type(dtype);
    if (dtype == onnx::TensorProto::INT64) {
      t->add_dims(1);
      t->add_int64_data(int64_t(v));
    } else {
      t->add_float_data(float(v));
    }
    return name;
  }
  std::string floatConstant(double v, google::protobuf::RepeatedPtrField<onnx::NodeProto> &out,
                            const std::string &base) {
    return constantNode(out, base, onnx::TensorProto::FLOAT, v);
  }
  std::string intConstant(int64_t v, google::protobuf::RepeatedPtrField<onnx::NodeProto> &out,
                          const std::string &base) {
    return constantNode(out, base, onnx::TensorProto::INT64, double(v));
  }

  onnx::NodeProto *emit(google::protobuf::RepeatedPtrField<onnx::NodeProto> &out,
                        const onnx::NodeProto &from, const char *op,
                        std::initializer_list<std::string> inputs, const std::string &output) {
    onnx::NodeProto *n = out.Add();
    n->set_op_type(op);
    n->set_name(from.name().empty() ? output : from.name() + "/" + op);
    for (const auto &i : inputs)
      n->add_input(i);
    n->add_output(output);
    m_.copyOrigin(from, *n);
    return n;
  }

  /// Drops attribute `name` if it holds `dflt` (an int); false otherwise.
  static bool dropIntAttr(onnx::NodeProto &node, const char *name, int64_t dflt) {
    auto *attrs = node.mutable_attribute();
    for (int i = 0; i < attrs->size(); ++i)
      if (attrs->Get(i).name() == name) {
        if (attrs->Get(i).i() != dflt)
          return false;
        attrs->DeleteSubrange(i, 1);
        return true;
      }
    return true;
  }
  static void eraseAttr(onnx::NodeProto &node, const char *name) {
    auto *attrs = node.mutable_attribute();
    for (int i = 0; i < attrs->size(); ++i)
      if (attrs->Get(i).name() == name) {
        attrs->DeleteSubrange(i, 1);
        return;
      }
  }

  llvm::Error bridgeNode(onnx::NodeProto &node, int k,
                         google::protobuf::RepeatedPtrField<onnx::NodeProto> &out) {
    const std::string &op = node.op_type();
    if (kReductionsWithAxesInput.count(op) && m_.sourceOpset >= 18) {
      // The axes input (18) back to the attribute (13-17).
      bool noop = attrInt(node, "noop_with_empty_axes", 0) != 0;
      eraseAttr(node, "noop_with_empty_axes");
      std::vector<int64_t> axes;
      if (node.input_size() >= 2 && !node.input(1).empty()) {
        auto c = constantInts(node.input(1));
        if (!c)
          return fail(node, k, "the axes (input 1, '" + node.input(1) +
                                   "') must be a constant integer tensor");
        axes = *c;
        node.mutable_input()->DeleteSubrange(1, node.input_size() - 1);
      }
      if (axes.empty() && noop) {
        node.set_op_type("Identity");
        node.clear_attribute();
      } else if (!axes.empty()) {
        onnx::AttributeProto *a = node.add_attribute();
        a->set_name("axes");
        a->set_type(onnx::AttributeProto::INTS);
        for (int64_t x : axes)
          a->add_ints(x);
      }
    } else if (op == "Split" && findAttr(node, "num_outputs")) {
      return splitIntoChunks(node, k, out);
    } else if (op == "Gelu") {
      return gelu(node, k, out);
    } else if (op == "Cast" || op == "CastLike") {
      eraseAttr(node, "saturate");
    } else if (op == "AveragePool" || op == "MaxPool" || op == "LpPool") {
      if (auto d = attrInts(node, "dilations"); d && op == "AveragePool") {
        for (int64_t x : *d)
          if (x != 1)
            return fail(node, k, "dilations other than 1 are not supported");
        eraseAttr(node, "dilations");
      }
    } else if (op == "Pad") {
      if (node.input_size() >= 4 && !node.input(3).empty())
        return fail(node, k, "the axes input (opset 18) is not supported; pad every axis");
      if (attrString(node, "mode", "constant") == "wrap")
        return fail(node, k, "mode 'wrap' (opset 19) is not supported");
    } else if (op == "Resize") {
      if (!dropIntAttr(node, "antialias", 0))
        return fail(node, k, "antialias (opset 18) is not supported");
      if (findAttr(node, "axes"))
        return fail(node, k, "the axes attribute (opset 18) is not supported");
      if (attrString(node, "keep_aspect_ratio_policy", "stretch") != "stretch")
        return fail(node, k, "keep_aspect_ratio_policy other than 'stretch' is not supported");
      eraseAttr(node, "keep_aspect_ratio_policy");
    } else if (op == "ScatterElements" || op == "ScatterND") {
      std::string r = attrString(node, "reduction", "none");
      if (r == "max" || r == "min")
        return fail(node, k, "reduction '" + r + "' (opset 18) is not supported");
    } else if (auto it = opsOnlyInNewerOpsets().find(op);
               it != opsOnlyInNewerOpsets().end()) {
      return fail(node, k, "op '" + op + "' (new in opset " + llvm::Twine(it->second) +
                               ") is not supported");
    }
    *out.Add() = std::move(node);
    return llvm::Error::success();
  }

  /// Split with num_outputs (18): chunks of ceil(d / n), the last smaller,
  /// as Slices whose bounds come from the input's shape (opset 17's Split
  /// takes equal parts only). The importer folds the bounds, since shapes
  /// are static.
  llvm::Error splitIntoChunks(onnx::NodeProto &node, int k,
                              google::protobuf::RepeatedPtrField<onnx::NodeProto> &out) {
    int64_t n = attrInt(node, "num_outputs", 0), axis = attrInt(node, "axis", 0);
    if (n != node.output_size() || n < 1)
      return fail(node, k, "num_outputs " + llvm::Twine(n) + " differs from its " +
                               llvm::Twine(node.output_size()) + " outputs");
    if (node.input_size() != 1)
      return fail(node, k, "both num_outputs and split sizes are given");
    const std::string &x = node.input(0);
    std::string base = node.name().empty() ? node.output(0) : node.name();
    std::string d = fresh(base), plus = fresh(base), chunk = fresh(base);
    onnx::NodeProto *shape = emit(out, node, "Shape", {x}, d);
    auto bound = [&](const char *name, int64_t v) {
      onnx::AttributeProto *a = shape->add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(v);
    };
    bound("start", axis);
    if (axis != -1)
      bound("end", axis + 1);
    emit(out, node, "Add", {d, intConstant(n - 1, out, base)}, plus);
    emit(out, node, "Div", {plus, intConstant(n, out, base)}, chunk);
    std::string axes = intConstant(axis, out, base);
    for (int64_t i = 0; i < n; ++i) {
      std::string lo = fresh(base), hi = fresh(base);
      emit(out, node, "Mul", {chunk, intConstant(i, out, base)}, lo);
      emit(out, node, "Mul", {chunk, intConstant(i + 1, out, base)}, hi);
      if (!node.output(i).empty())
        emit(out, node, "Slice", {x, lo, hi, axes}, node.output(i));
    }
    return llvm::Error::success();
  }

  /// Gelu (20) as the legacy exporter writes it:
  ///   none: x * (1 + erf(x / sqrt2)) * 0.5
  ///   tanh: x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) * 0.5
  llvm::Error gelu(onnx::NodeProto &node, int k,
                   google::protobuf::RepeatedPtrField<onnx::NodeProto> &out) {
    if (node.input_size() != 1 || node.output_size() != 1)
      return fail(node, k, "Gelu takes one input and gives one output");
    std::string approx = attrString(node, "approximate", "none");
    if (approx != "none" && approx != "tanh")
      return fail(node, k, "approximate '" + approx + "' is not 'none' or 'tanh'");
    const std::string &x = node.input(0), &y = node.output(0);
    std::string base = node.output(0);
    std::string one = floatConstant(1.0, out, base), half = floatConstant(0.5, out, base);
    std::string inner = fresh(base), cdf = fresh(base), onePlus = fresh(base), xs = fresh(base);
    if (approx == "none") {
      std::string sqrt2 = floatConstant(std::sqrt(2.0), out, base), scaled = fresh(base);
      emit(out, node, "Div", {x, sqrt2}, scaled);
      emit(out, node, "Erf", {scaled}, cdf);
    } else {
      std::string c = floatConstant(0.044715, out, base),
                  s = floatConstant(std::sqrt(2.0 / M_PI), out, base);
      std::string x2 = fresh(base), x3 = fresh(base), cx3 = fresh(base), sum = fresh(base);
      emit(out, node, "Mul", {x, x}, x2);
      emit(out, node, "Mul", {x2, x}, x3);
      emit(out, node, "Mul", {c, x3}, cx3);
      emit(out, node, "Add", {x, cx3}, sum);
      emit(out, node, "Mul", {s, sum}, inner);
      emit(out, node, "Tanh", {inner}, cdf);
    }
    emit(out, node, "Add", {one, cdf}, onePlus);
    emit(out, node, "Mul", {x, onePlus}, xs);
    emit(out, node, "Mul", {xs, half}, y);
    return llvm::Error::success();
  }

  LoadedModel &m_;
  std::map<std::string, const onnx::TensorProto *> initializers_;
  std::map<std::string, const onnx::TensorProto *> constants_;
  int counter_ = 0;
};

} // namespace

const std::map<std::string, int64_t> &opsBridgedFromNewerOpsets() {
  static const std::map<std::string, int64_t> ops = {{"Gelu", 20}};
  return ops;
}

llvm::Error bridgeToOpset17(LoadedModel &m) {
  if (m.opset <= 17)
    return llvm::Error::success();
  return Bridge(m).run();
}

} // namespace dsc::onnx_import
