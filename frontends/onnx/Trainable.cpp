//===- Trainable.cpp - which initializers may be trained ------------------===//
//
// ONNX does not say which initializers are trainable: a PyTorch parameter
// with requires_grad=False and a persistent buffer (RoPE tables, sinusoidal
// position encodings) are float initializers like any weight. The exporter
// (models/export_common.py) records the trainable ones under kTrainableKey;
// `dsc --freeze PATTERN` removes more. Without either, every float
// initializer with a gradient path to the loss is trained, and the importer
// says which, since it may be training what PyTorch keeps fixed.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/GraphImporter.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <optional>
#include <set>

namespace dsc::onnx_import {

namespace {

/// A metadata value that lists names: a flat JSON array of strings. The nesting
/// is bounded before parsing, since llvm::json recurses once per level and
/// the file may be crafted.
llvm::Expected<std::set<std::string>> parseNameList(const std::string &path, const char *key,
                                                    const std::string &text, const char *what) {
  auto bad = [&](const llvm::Twine &why) {
    return llvm::createStringError(path + ": metadata '" + key + "' " + why +
                                   "; it must be a JSON array of " + what);
  };
  int depth = 0;
  bool inString = false, escaped = false;
  for (char c : text) {
    if (inString) {
      escaped = !escaped && c == '\\';
      inString = escaped || c != '"';
      continue;
    }
    if (c == '"')
      inString = true;
    else if ((c == '[' || c == '{') && ++depth > 1)
      return bad("nests arrays or objects");
    else if (c == ']' || c == '}')
      --depth;
  }
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(text);
  if (!value)
    return bad("is not valid JSON (" + llvm::toString(value.takeError()) + ")");
  const llvm::json::Array *array = value->getAsArray();
  if (!array)
    return bad("is not an array");
  std::set<std::string> names;
  for (const llvm::json::Value &v : *array) {
    auto s = v.getAsString();
    if (!s)
      return bad("holds a value that is not a string");
    names.insert(s->str());
  }
  return names;
}

} // namespace

llvm::Expected<std::optional<std::set<std::string>>>
readNameList(const LoadedModel &m, const char *key, const char *what) {
  // ONNX's checker has rejected duplicate keys.
  for (const onnx::StringStringEntryProto &kv : m.model.metadata_props())
    if (kv.key() == key) {
      auto names = parseNameList(m.path, key, kv.value(), what);
      if (!names)
        return names.takeError();
      return std::optional<std::set<std::string>>(std::move(*names));
    }
  return std::optional<std::set<std::string>>();
}

llvm::Expected<TrainableRule> decideTrainable(const LoadedModel &model,
                                              const ImportOptions &options) {
  const onnx::GraphProto &graph = model.model.graph();
  std::vector<std::string> all;
  std::set<std::string> floats;
  for (const onnx::TensorProto &t : graph.initializer()) {
    all.push_back(t.name());
    if (isFloatDType(t.data_type()))
      floats.insert(t.name());
  }

  TrainableRule rule;
  auto listed = readNameList(model, kTrainableKey, "initializer names");
  if (!listed)
    return listed.takeError();
  if (auto &names = *listed) {
    for (const std::string &n : *names)
      if (!floats.count(n))
        return llvm::createStringError(
            model.path + ": metadata '" + kTrainableKey + "' names '" + n + "', which is not " +
            (llvm::is_contained(all, n) ? "a floating-point initializer (only those train)"
                                        : "an initializer of the model"));
    rule.listed = std::move(*names);
  }
  // PyTorch's dynamo exporter writes the torch.export signature instead.
  if (!rule.listed && model.exporterTrainable)
    rule.listed = *model.exporterTrainable;

  auto frozen = frontend::frozenBy(model.path, options.freeze, all, floats);
  if (!frozen)
    return frozen.takeError();
  rule.frozen = std::move(*frozen);
  return rule;
}

} // namespace dsc::onnx_import
