//===- HostTensor.h - compile-time tensor values for folding ----*- C++ -*-===//
//
// Values known while importing (Constant nodes, integer initializers, Shape
// of a static tensor) are evaluated on the host so that shape subgraphs
// (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) fold away and every
// IR value has a static shape.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_FRONTENDS_ONNX_HOSTTENSOR_H
#define DSC_FRONTENDS_ONNX_HOSTTENSOR_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace onnx {
class TensorProto;
class NodeProto;
} // namespace onnx

namespace dsc::onnx_import {

/// Product of dims, or nullopt on a negative dimension or int64 overflow.
std::optional<int64_t> checkedNumElements(const std::vector<int64_t> &shape);
/// Why checkedNumElements failed: "shape [..] has a negative dimension -3"
/// or "shape [..] overflows a 64-bit element count".
std::string describeBadShape(const std::vector<int64_t> &shape);

struct HostTensor {
  int32_t dtype = 0; // onnx::TensorProto::DataType
  std::vector<int64_t> shape;
  // Exactly one is used: `f` for floating-point dtypes, `i` otherwise
  // (integers and bool). Doubles hold every f32/f16/bf16 value exactly.
  std::vector<double> f;
  std::vector<int64_t> i;

  bool isFloat() const;
  int64_t size() const { return isFloat() ? (int64_t)f.size() : (int64_t)i.size(); }
  double asDouble(int64_t k) const { return isFloat() ? f[k] : (double)i[k]; }
  int64_t asInt(int64_t k) const { return isFloat() ? (int64_t)f[k] : i[k]; }
  /// The values as int64 (shapes, axes, indices).
  std::vector<int64_t> ints() const;

  static HostTensor ofInts(std::vector<int64_t> values, std::vector<int64_t> shape,
                           int32_t dtype);
};

/// Whether `dtype` is a floating-point ONNX data type.
bool isFloatDType(int32_t dtype);
/// Bytes per element of an ONNX data type (0 if unsupported).
int64_t dtypeBytes(int32_t dtype);
/// Printable name of an ONNX data type ("float", "int64", ...).
std::string dtypeName(int32_t dtype);

/// Decodes a TensorProto whose data is inline (raw_data or typed fields) or
/// in `externalBytes` (already read and bounds-checked by the loader).
/// Returns an error message on failure.
std::optional<std::string> decodeTensor(const onnx::TensorProto &proto,
                                        const std::string *externalBytes,
                                        HostTensor &out);

/// Evaluates `node` on constant inputs. Returns std::nullopt when the op is
/// not one the folder evaluates (the importer then emits IR), an error
/// message in `error` when the inputs are invalid.
std::optional<std::vector<HostTensor>>
foldNode(const onnx::NodeProto &node, const std::vector<const HostTensor *> &inputs,
         std::string &error);

} // namespace dsc::onnx_import

#endif // DSC_FRONTENDS_ONNX_HOSTTENSOR_H
