//===- ExporterMetadata.cpp - what torch.onnx's dynamo exporter records ---===//
//
// PyTorch's dynamo exporter (torch.onnx.export, the default since 2.9) runs
// torch.export and then onnxscript's optimizer, which changes what a model's
// parameters look like in the file:
//
//  * initializers with equal values are merged: every LayerNorm weight of a
//    freshly built model is ones(d), so all of them become one tensor used by
//    every LayerNorm. Trained as written, they would be one tied parameter.
//  * parameters are folded with what is constant around them: a Linear's
//    weight is stored transposed as "val_7", and wpe(arange(T)) becomes a
//    [T, d] tensor named after the embedding node.
//
// IR version 10 metadata says what happened: the graph's torch.export
// signature (which inputs are parameters and buffers), each parameter's
// original name, each folded value's sources (`folded_from`), and each
// node's torch.fx node, module path and stack trace. From it dsc
//  * unties merged parameters: a node whose fx node names another parameter
//    of the same leaf name (blocks.0.ln2.weight for blocks.0.ln1.weight) gets
//    a copy of its own under that parameter's name;
//  * trains what the signature calls a parameter, and folded tensors made
//    from parameters, and freezes buffers and constants;
//  * names a node's Python source line in its errors.
// Debian's ONNX 1.12 predates these fields, so they are read from the
// protobuf's unknown fields.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/ModelLoader.h"
#include "frontends/onnx/HostTensor.h"
#include "frontends/onnx/OnnxImporter.h"
#include "frontends/common/PythonTrace.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/unknown_field_set.h>

#include <functional>
#include <map>
#include <set>

namespace dsc::onnx_import {
namespace {

// metadata_props field numbers of IR version 10 (onnx.proto).
constexpr int kNodeMetadata = 9, kValueInfoMetadata = 4, kGraphMetadata = 16;

std::map<std::string, std::string> metadataOf(const google::protobuf::Message &msg, int field) {
  std::map<std::string, std::string> out;
  const auto &fields = msg.GetReflection()->GetUnknownFields(msg);
  for (int i = 0; i < fields.field_count(); ++i) {
    const auto &f = fields.field(i);
    if (f.number() != field || f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto e;
    if (e.ParseFromString(f.length_delimited()))
      out[e.key()] = e.value();
  }
  return out;
}

/// The quoted strings of a Python list's repr: "['', 'blocks.0', 'x']".
std::vector<std::string> pythonStrings(llvm::StringRef text) {
  std::vector<std::string> out;
  while (true) {
    size_t open = text.find_first_of("'\"");
    if (open == llvm::StringRef::npos)
      break;
    char q = text[open];
    size_t close = text.find(q, open + 1);
    if (close == llvm::StringRef::npos)
      break;
    out.push_back(text.substr(open + 1, close - open - 1).str());
    text = text.drop_front(close + 1);
  }
  return out;
}

/// The `%name` operands of an fx node's text
/// ("%x : [...] = call_function[target=...](args = (%a, [128], %p_w), ...)").
std::set<std::string> fxOperands(llvm::StringRef fx) {
  std::set<std::string> out;
  size_t eq = fx.find(" = ");
  if (eq != llvm::StringRef::npos)
    fx = fx.drop_front(eq + 3);
  for (size_t i = 0; i < fx.size(); ++i) {
    if (fx[i] != '%')
      continue;
    size_t j = i + 1;
    while (j < fx.size() && (llvm::isAlnum(fx[j]) || fx[j] == '_'))
      ++j;
    out.insert(fx.substr(i + 1, j - i - 1).str());
    i = j - 1;
  }
  return out;
}

/// The leaf of a dotted name: "weight" of "blocks.0.ln1.weight".
llvm::StringRef leafOf(llvm::StringRef fqn) { return fqn.rsplit('.').second.empty() ? fqn : fqn.rsplit('.').second; }

struct Signature {
  struct Input {
    std::string kind, target; // PARAMETER wte.weight
  };
  std::map<std::string, Input> inputs; // by placeholder (p_wte_weight)
  std::map<std::string, std::string> placeholderOfTarget;
};

/// "p_wte_weight: PARAMETER target='wte.weight'" lines.
Signature parseSignature(llvm::StringRef text) {
  Signature s;
  llvm::SmallVector<llvm::StringRef> lines;
  text.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    auto [name, rest] = line.trim().split(": ");
    if (rest.empty() || name.contains(' '))
      continue;
    llvm::StringRef kind = rest.take_until([](char c) { return c == ' '; });
    std::string target;
    size_t t = rest.find("target='");
    if (t != llvm::StringRef::npos) {
      llvm::StringRef tail = rest.drop_front(t + 8);
      target = tail.take_until([](char c) { return c == '\''; }).str();
    }
    s.inputs[name.str()] = {kind.str(), target};
    if (!target.empty())
      s.placeholderOfTarget[target] = name.str();
  }
  return s;
}

} // namespace

llvm::Error readExporterMetadata(LoadedModel &m) {
  onnx::GraphProto *graph = m.model.mutable_graph();

  // Where each node came from, for error messages.
  std::vector<std::map<std::string, std::string>> nodeMeta(graph->node_size());
  for (int k = 0; k < graph->node_size(); ++k) {
    const onnx::NodeProto &node = graph->node(k);
    nodeMeta[k] = metadataOf(node, kNodeMetadata);
    std::string where = frontend::userFrame(nodeMeta[k]["pkg.torch.onnx.stack_trace"]);
    auto scopes = pythonStrings(nodeMeta[k]["pkg.torch.onnx.name_scopes"]);
    std::string module = scopes.size() >= 2 ? scopes[scopes.size() - 2] : "";
    if (!module.empty())
      where += (where.empty() ? "" : ", ") + std::string("module ") + module;
    if (!where.empty() && node.output_size())
      m.origins[node.output(0)] = where;
  }

  auto graphMeta = metadataOf(*graph, kGraphMetadata);
  auto sigText = graphMeta.find("pkg.torch.export.ExportedProgram.graph_signature");
  if (sigText == graphMeta.end())
    return llvm::Error::success(); // not the dynamo exporter's file
  Signature sig = parseSignature(sigText->second);

  // Each value's metadata: the kind and placeholder of inputs, folded_from.
  std::map<std::string, std::string> placeholderOfValue, kindOfValue;
  std::map<std::string, std::vector<std::string>> foldedFrom;
  for (const auto &vi : graph->value_info()) {
    auto md = metadataOf(vi, kValueInfoMetadata);
    if (auto it = md.find("pkg.torch.onnx.original_node_name"); it != md.end())
      placeholderOfValue[vi.name()] = it->second;
    if (auto it = md.find("pkg.torch.export.graph_signature.InputSpec.kind"); it != md.end())
      kindOfValue[vi.name()] = it->second;
    if (auto it = md.find("pkg.onnxscript.optimizer.folded_from"); it != md.end())
      foldedFrom[vi.name()] = pythonStrings(it->second);
  }

  // Untie merged parameters.
  std::map<std::string, int> initializerIndex;
  for (int i = 0; i < graph->initializer_size(); ++i)
    initializerIndex[graph->initializer(i).name()] = i;
  std::set<std::string> present; // placeholders an initializer stands for
  for (const auto &[value, ph] : placeholderOfValue)
    if (initializerIndex.count(value))
      present.insert(ph);
  std::set<std::string> graphInputs;
  for (const auto &in : graph->input())
    graphInputs.insert(in.name());
  std::map<std::string, std::vector<std::string>> untied; // original -> new names
  std::set<std::string> parameters;
  for (const auto &[value, ph] : placeholderOfValue)
    if (initializerIndex.count(value) && kindOfValue[value] == "PARAMETER")
      parameters.insert(value);
  for (int k = 0; k < graph->node_size(); ++k) {
    onnx::NodeProto *node = graph->mutable_node(k);
    std::set<std::string> operands = fxOperands(nodeMeta[k]["pkg.torch.onnx.fx_node"]);
    if (operands.empty())
      continue;
    for (int i = 0; i < node->input_size(); ++i) {
      const std::string name = node->input(i);
      auto ph = placeholderOfValue.find(name);
      if (!parameters.count(name) || ph == placeholderOfValue.end() || operands.count(ph->second))
        continue;
      // The fx node does not name this parameter: find the one it names
      // in its place, of the same leaf name and with no tensor of its own.
      llvm::StringRef leaf = leafOf(sig.inputs[ph->second].target);
      std::vector<std::string> candidates;
      for (const std::string &op : operands) {
        auto s = sig.inputs.find(op);
        if (s != sig.inputs.end() && s->second.kind == "PARAMETER" && !present.count(op) &&
            leafOf(s->second.target) == leaf)
          candidates.push_back(op);
      }
      if (candidates.size() != 1)
        continue;
      std::string target = sig.inputs[candidates[0]].target;
      if (target.empty() || initializerIndex.count(target))
        continue;
      // The new tensor is made once, a copy of the merged one.
      if (!llvm::is_contained(untied[name], target)) {
        onnx::TensorProto copy = graph->initializer(initializerIndex[name]);
        copy.set_name(target);
        *graph->add_initializer() = copy;
        if (auto ext = m.external.find(name); ext != m.external.end())
          m.external[target] = ext->second;
        if (graphInputs.count(name))
          for (const auto &in : graph->input())
            if (in.name() == name) {
              onnx::ValueInfoProto vi = in;
              vi.set_name(target);
              *graph->add_input() = vi;
              break;
            }
        untied[name].push_back(target);
      }
      node->set_input(i, target);
    }
  }

  // What trains: the signature's parameters, and tensors folded from them.
  std::set<std::string> parameterTargets;
  for (const auto &[ph, in] : sig.inputs)
    if (in.kind == "PARAMETER" && !in.target.empty())
      parameterTargets.insert(in.target);
  std::map<std::string, std::set<std::string>> sourcesMemo;
  std::function<const std::set<std::string> &(const std::string &, int)> sources =
      [&](const std::string &value, int depth) -> const std::set<std::string> & {
    auto [it, fresh] = sourcesMemo.try_emplace(value);
    if (!fresh || depth > 64)
      return it->second;
    std::set<std::string> found;
    if (parameterTargets.count(value))
      found.insert(value);
    if (auto s = sig.inputs.find(value); s != sig.inputs.end() && s->second.kind == "PARAMETER")
      found.insert(s->second.target);
    if (auto ph = placeholderOfValue.find(value);
        ph != placeholderOfValue.end() && sig.inputs[ph->second].kind == "PARAMETER")
      found.insert(sig.inputs[ph->second].target);
    if (auto f = foldedFrom.find(value); f != foldedFrom.end())
      for (const std::string &from : f->second)
        for (const std::string &s : sources(from, depth + 1))
          found.insert(s);
    sourcesMemo[value] = std::move(found);
    return sourcesMemo[value];
  };
  std::set<std::string> trainable;
  std::vector<std::string> folded;
  for (const auto &t : graph->initializer()) {
    if (!isFloatDType(t.data_type()))
      continue;
    if (parameterTargets.count(t.name()) || kindOfValue[t.name()] == "PARAMETER") {
      trainable.insert(t.name());
      continue;
    }
    const auto &from = sources(t.name(), 0);
    if (from.empty() || !foldedFrom.count(t.name()))
      continue;
    trainable.insert(t.name());
    folded.push_back(t.name() + " (" + llvm::join(from, ", ") + ")");
  }
  m.exporterTrainable = std::move(trainable);

  if (!untied.empty()) {
    std::vector<std::string> parts;
    for (const auto &[name, copies] : untied)
      parts.push_back(name + " into " + compactNames(copies));
    m.exporterNotes.push_back(
        "the exporter merged parameters of equal values into one tensor; dsc trains each "
        "apart, as PyTorch does, under its PyTorch name (from the torch.export signature): " +
        llvm::join(parts, "; "));
  }
  if (!folded.empty())
    m.exporterNotes.push_back(
        "the exporter folded parameters into new tensors (transposed or gathered); dsc trains "
        "them as they are, under the exporter's names: " +
        llvm::join(folded, ", ") +
        " (torch.export.save's .pt2 keeps PyTorch's parameters as they are)");
  return llvm::Error::success();
}

} // namespace dsc::onnx_import
