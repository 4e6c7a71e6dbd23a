//===- LocalFunctions.cpp - inline the model's local ONNX functions -------===//
//
// An exporter may write parts of a model as ONNX functions local to it
// (ModelProto.functions; IR version 8 on): PyTorch's dynamo exporter does
// so with optimize=False (torchlib's Rank and IsScalar helpers, the
// subgraphs of torch.cond). Each call is expanded in place (inner values
// prefixed, attribute references resolved from the call), calls inside
// function bodies too, so the rest of dsc sees one flat graph. Where the
// call came from (its Python line) carries over to what it expands to.
// (ONNX 1.12's FunctionExpandHelper crashes on a function whose opset
// imports omit its own domain, which exporters do omit.)
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/ModelLoader.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

namespace dsc::onnx_import {

namespace {

constexpr int kMaxDepth = 32; // nested calls; a recursive function stops here

using FunctionTable = std::map<std::pair<std::string, std::string>, const onnx::FunctionProto *>;

llvm::Error fail(const LoadedModel &m, const onnx::NodeProto &call, const llvm::Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 m.path + ": the call of function '" + call.op_type() +
                                     "' (domain '" + call.domain() + "'): " + why.str());
}

/// The body of `fn` for one call: formal inputs and outputs renamed to the
/// call's, inner values prefixed, attribute references resolved from the
/// call (or dropped, when neither the call nor the function gives them).
llvm::Error instantiate(const LoadedModel &m, const onnx::NodeProto &call,
                        const onnx::FunctionProto &fn, const std::string &prefix,
                        std::vector<onnx::NodeProto> &body) {
  if (call.input_size() > fn.input_size() || call.output_size() > fn.output_size())
    return fail(m, call, "it passes " + llvm::Twine(call.input_size()) + " inputs and " +
                             llvm::Twine(call.output_size()) + " outputs, the function takes " +
                             llvm::Twine(fn.input_size()) + " and " +
                             llvm::Twine(fn.output_size()));
  std::map<std::string, std::string> rename;
  for (int i = 0; i < fn.input_size(); ++i)
    rename[fn.input(i)] = i < call.input_size() ? call.input(i) : "";
  for (int i = 0; i < fn.output_size(); ++i)
    rename[fn.output(i)] = i < call.output_size() ? call.output(i) : prefix + fn.output(i);
  auto name = [&](const std::string &v) {
    if (v.empty())
      return v;
    auto it = rename.find(v);
    return it != rename.end() ? it->second : prefix + v;
  };
  std::map<std::string, const onnx::AttributeProto *> given;
  for (const auto &a : call.attribute())
    given[a.name()] = &a;
  for (const onnx::NodeProto &inner : fn.node()) {
    onnx::NodeProto n = inner;
    n.set_name(prefix + inner.name());
    for (auto &in : *n.mutable_input())
      in = name(in);
    for (auto &out : *n.mutable_output())
      out = name(out);
    auto *attrs = n.mutable_attribute();
    for (int k = attrs->size() - 1; k >= 0; --k) {
      onnx::AttributeProto &a = *attrs->Mutable(k);
      if (a.ref_attr_name().empty())
        continue;
      auto it = given.find(a.ref_attr_name());
      if (it == given.end()) {
        attrs->DeleteSubrange(k, 1); // the inner op's default applies
        continue;
      }
      std::string own = a.name();
      a = *it->second;
      a.set_name(own);
    }
    if (n.attribute_size() && std::any_of(n.attribute().begin(), n.attribute().end(),
                                          [](const auto &a) {
                                            return a.type() == onnx::AttributeProto::GRAPH ||
                                                   a.type() == onnx::AttributeProto::GRAPHS;
                                          }))
      return fail(m, call, "its body has a subgraph (If, Loop, Scan), which dsc does not "
                           "expand from functions");
    body.push_back(std::move(n));
  }
  return llvm::Error::success();
}

llvm::Error expand(LoadedModel &m, const FunctionTable &fns,
                   const std::vector<onnx::NodeProto> &nodes,
                   google::protobuf::RepeatedPtrField<onnx::NodeProto> &out, int depth,
                   int &calls) {
  for (const onnx::NodeProto &node : nodes) {
    auto it = fns.find({node.domain(), node.op_type()});
    if (it == fns.end()) {
      *out.Add() = node;
      continue;
    }
    if (depth >= kMaxDepth)
      return fail(m, node, "calls nest more than " + llvm::Twine(kMaxDepth) +
                               " deep (is the function recursive?)");
    std::string prefix = (node.name().empty() ? node.op_type() : node.name()) + "/" +
                         std::to_string(calls++) + "/";
    std::vector<onnx::NodeProto> body;
    if (auto e = instantiate(m, node, *it->second, prefix, body))
      return e;
    for (const onnx::NodeProto &inner : body)
      m.copyOrigin(node, inner);
    if (auto e = expand(m, fns, body, out, depth + 1, calls))
      return e;
  }
  return llvm::Error::success();
}

} // namespace

llvm::Error inlineLocalFunctions(LoadedModel &m) {
  if (m.model.functions_size() == 0)
    return llvm::Error::success();
  FunctionTable fns;
  for (const onnx::FunctionProto &f : m.model.functions())
    fns[{f.domain(), f.name()}] = &f;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> out;
  int calls = 0;
  std::vector<onnx::NodeProto> top(m.model.graph().node().begin(), m.model.graph().node().end());
  if (auto e = expand(m, fns, top, out, 0, calls))
    return e;
  m.model.mutable_graph()->mutable_node()->Swap(&out);
  // The functions' domains are no longer used by any node.
  std::set<std::string> used;
  for (const onnx::NodeProto &n : m.model.graph().node())
    used.insert(n.domain());
  std::set<std::string> functionDomains;
  for (const onnx::FunctionProto &f : m.model.functions())
    functionDomains.insert(f.domain());
  m.model.clear_functions();
  auto *imports = m.model.mutable_opset_import();
  for (int i = imports->size() - 1; i >= 0; --i)
    if (functionDomains.count(imports->Get(i).domain()) && !used.count(imports->Get(i).domain()))
      imports->DeleteSubrange(i, 1);
  return llvm::Error::success();
}

} // namespace dsc::onnx_import
