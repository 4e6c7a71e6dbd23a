//===- OnnxAttrs.h - typed access to ONNX node attributes -------*- C++ -*-===//
#ifndef DSC_FRONTENDS_ONNX_ONNXATTRS_H
#define DSC_FRONTENDS_ONNX_ONNXATTRS_H

#include "onnx/onnx_pb.h"

#include <optional>
#include <string>
#include <vector>

namespace dsc::onnx_import {

inline const onnx::AttributeProto *findAttr(const onnx::NodeProto &node,
                                            const std::string &name) {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

inline int64_t attrInt(const onnx::NodeProto &node, const std::string &name,
                       int64_t dflt) {
  const auto *a = findAttr(node, name);
  return a ? a->i() : dflt;
}

inline float attrFloat(const onnx::NodeProto &node, const std::string &name,
                       float dflt) {
  const auto *a = findAttr(node, name);
  return a ? a->f() : dflt;
}

inline std::string attrString(const onnx::NodeProto &node,
                              const std::string &name, std::string dflt) {
  const auto *a = findAttr(node, name);
  return a ? a->s() : dflt;
}

inline std::optional<std::vector<int64_t>> attrInts(const onnx::NodeProto &node,
                                                    const std::string &name) {
  const auto *a = findAttr(node, name);
  if (!a)
    return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

/// Input `k` of the node, or "" when absent (optional inputs may be "").
inline const std::string &inputName(const onnx::NodeProto &node, int k) {
  static const std::string empty;
  return k < node.input_size() ? node.input(k) : empty;
}

} // namespace dsc::onnx_import

#endif // DSC_FRONTENDS_ONNX_ONNXATTRS_H
