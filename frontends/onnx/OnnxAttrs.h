//===- OnnxAttrs.h - typed access to ONNX node attributes -------*- C++ -*-===//
#ifndef DSC_FRONTENDS_ONNX_ONNXATTRS_H
#define DSC_FRONTENDS_ONNX_ONNXATTRS_H

#include "onnx/onnx_pb.h"

#include <charconv>
#include <cstdlib>
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

/// ONNX stores float attributes in single precision; widen them through
/// their shortest decimal form so 1e-5 stays 1e-5 (not 9.99999974e-06) in
/// the double-precision attributes of the IR.
inline double widen(float f) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof(buf), f);
  return std::strtod(std::string(buf, res.ptr).c_str(), nullptr);
}

inline double attrFloat(const onnx::NodeProto &node, const std::string &name,
                        double dflt) {
  const auto *a = findAttr(node, name);
  return a ? widen(a->f()) : dflt;
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
