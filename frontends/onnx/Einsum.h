//===- Einsum.h - ONNX Einsum equations -------------------------*- C++ -*-===//
//
// The parse of an Einsum equation against its operands' shapes, shared by
// the importer's lowering (EinsumOps.cpp) and the compile-time evaluation
// of an Einsum of constants (HostTensor.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_FRONTENDS_ONNX_EINSUM_H
#define DSC_FRONTENDS_ONNX_EINSUM_H

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dsc::onnx_import {

/// A label is a letter's code, or 1000 + k for the k-th ellipsis dimension
/// counted from the right.
using Labels = std::vector<int>;

struct EinsumSpec {
  std::vector<Labels> operands; // each operand's label per dimension
  Labels output;                // the result's, in order
  std::map<int, int64_t> size;  // each label's size
};

/// Parses `equation` (spaces ignored; "..." for leading dimensions, aligned
/// from the right; without "->", NumPy's implicit output: the ellipsis,
/// then the labels that occur once, in alphabetical order) for operands of
/// `shapes`. On a malformed equation, a diagonal (a label repeated within
/// an operand) or sizes that differ for one label, returns nullopt with
/// `why` naming the equation and the place.
std::optional<EinsumSpec> parseEinsum(const std::string &equation,
                                      const std::vector<std::vector<int64_t>> &shapes,
                                      std::string &why);

/// The label as the equation writes it ("i", or "...0").
std::string einsumLabelText(int label);

} // namespace dsc::onnx_import

#endif // DSC_FRONTENDS_ONNX_EINSUM_H
