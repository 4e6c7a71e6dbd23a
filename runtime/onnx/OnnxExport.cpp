//===- OnnxExport.cpp - trained weights back into an ONNX model ----------===//
#include "runtime/onnx/OnnxExport.h"

#include "onnx/onnx_pb.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <list>
#include <map>
#include <memory>

namespace dsrt::onnx_export {
namespace {

using io::IoError;
using Tensor = ::onnx::TensorProto;

[[noreturn]] void fail(const std::string &path, const std::string &message) {
  throw IoError(path + ": " + message);
}

::onnx::ModelProto readSkeleton(const std::string &path) {
  if (!std::filesystem::exists(path))
    fail(path, "missing: the plan has no model to export into (compiled by an older dsc? "
               "recompile the model)");
  io::MappedFile file = io::MappedFile::open(path);
  ::onnx::ModelProto model;
  if (file.size() > size_t(INT32_MAX) ||
      !model.ParseFromArray(file.data(), int(file.size())))
    fail(path, "not an ONNX model (truncated or corrupt)");
  return model;
}

bool hasData(const Tensor &t) {
  return !t.raw_data().empty() || t.float_data_size() || t.double_data_size() ||
         t.int32_data_size() || t.int64_data_size() || t.uint64_data_size() ||
         t.string_data_size() || t.data_location() == Tensor::EXTERNAL;
}

size_t elementBytes(int32_t type) {
  switch (type) {
  case Tensor::FLOAT: return 4;
  case Tensor::DOUBLE: return 8;
  case Tensor::FLOAT16:
  case Tensor::BFLOAT16: return 2;
  default: return 0;
  }
}

/// IEEE binary16, round to nearest even; overflow gives infinity.
uint16_t toHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  uint32_t abs = x & 0x7fffffff;
  if (abs > 0x7f800000) // NaN: keep it quiet
    return sign | 0x7e00;
  if (abs >= 0x477ff000) // rounds to >= 65520: infinity
    return sign | 0x7c00;
  if (abs < 0x38800000) { // below the smallest normal half: subnormal or 0
    // Scale so that the half subnormal unit (2^-24) is 1, then round.
    float scaled = std::fabs(f) * 16777216.0f; // exact: a power of two
    return sign | uint16_t(std::nearbyint(scaled));
  }
  uint32_t mant = abs & 0x7fffff, exp = (abs >> 23) - 127 + 15;
  uint32_t half = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1)))
    ++half; // may carry into the exponent, which is the right answer
  return sign | uint16_t(half);
}

/// bfloat16: the top half of the float, rounded to nearest even.
uint16_t toBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000)
    return uint16_t((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

/// The little-endian bytes of `w` in ONNX type `type`.
void encode(const io::TensorRef &w, int32_t type, std::string &out) {
  const float *src = static_cast<const float *>(w.data);
  size_t n = size_t(w.numel());
  out.resize(n * elementBytes(type));
  char *dst = out.data();
  switch (type) {
  case Tensor::FLOAT:
    std::memcpy(dst, src, n * 4);
    break;
  case Tensor::DOUBLE:
    for (size_t i = 0; i < n; ++i) {
      double d = src[i];
      std::memcpy(dst + 8 * i, &d, 8);
    }
    break;
  case Tensor::FLOAT16:
  case Tensor::BFLOAT16:
    for (size_t i = 0; i < n; ++i) {
      uint16_t h = type == Tensor::FLOAT16 ? toHalf(src[i]) : toBf16(src[i]);
      std::memcpy(dst + 2 * i, &h, 2);
    }
    break;
  }
}

std::string shapeOf(const Tensor &t) {
  return io::formatShape(std::vector<int64_t>(t.dims().begin(), t.dims().end()));
}

/// The initializers to fill, by name; checks each is a floating-point
/// tensor without data.
std::map<std::string, Tensor *> emptyInitializers(::onnx::ModelProto &model,
                                                  const std::vector<std::string> &names,
                                                  const std::string &path) {
  std::map<std::string, Tensor *> byName;
  for (Tensor &t : *model.mutable_graph()->mutable_initializer())
    byName[t.name()] = &t;
  std::map<std::string, Tensor *> result;
  for (const std::string &name : names) {
    auto it = byName.find(name);
    if (it == byName.end())
      fail(path, "the plan's weight '" + name + "' is not an initializer of the model");
    Tensor &t = *it->second;
    if (hasData(t))
      fail(path, "initializer '" + name + "' already has data; the plan and its model.onnx "
                 "disagree (recompile the model)");
    if (!elementBytes(t.data_type()))
      fail(path, "initializer '" + name + "' has ONNX type " +
                     Tensor::DataType_Name(Tensor::DataType(t.data_type())) +
                     "; dsrt writes FLOAT, DOUBLE, FLOAT16 and BFLOAT16 weights");
    result[name] = &t;
  }
  return result;
}

} // namespace

void checkSkeleton(const std::string &skeletonPath, const std::vector<std::string> &names) {
  ::onnx::ModelProto model = readSkeleton(skeletonPath);
  emptyInitializers(model, names, skeletonPath);
}

void exportOnnx(const std::string &skeletonPath, const std::vector<io::TensorRef> &weights,
                const std::string &outPath, uint64_t inlineLimit) {
  ::onnx::ModelProto model = readSkeleton(skeletonPath);
  std::vector<std::string> names;
  for (const io::TensorRef &w : weights)
    names.push_back(w.name);
  std::map<std::string, Tensor *> targets = emptyInitializers(model, names, skeletonPath);
  for (const Tensor &t : model.graph().initializer()) {
    int64_t n = 1;
    for (int64_t d : t.dims())
      n *= d;
    if (n > 0 && !hasData(t) && !targets.count(t.name()))
      fail(skeletonPath, "initializer '" + t.name() +
                             "' has no data and the run has no weight of that name");
  }

  uint64_t total = model.ByteSizeLong();
  for (const io::TensorRef &w : weights) {
    const Tensor &t = *targets.at(w.name);
    if (w.dtype != io::DType::F32)
      fail(outPath, "weight '" + w.name + "' is " + io::dtypeName(w.dtype) + ", not float32");
    if (!std::equal(t.dims().begin(), t.dims().end(), w.shape.begin(), w.shape.end()))
      fail(skeletonPath, "initializer '" + w.name + "' has shape " + shapeOf(t) +
                             " but the trained weight has " + io::formatShape(w.shape));
    total += uint64_t(w.numel()) * elementBytes(t.data_type());
  }

  if (total <= inlineLimit) {
    for (const io::TensorRef &w : weights)
      encode(w, targets.at(w.name)->data_type(), *targets.at(w.name)->mutable_raw_data());
    std::string bytes;
    if (!model.SerializeToString(&bytes))
      fail(outPath, "cannot serialize the model");
    io::writeFileAtomically(outPath, {{bytes.data(), bytes.size()}}, io::Existing::Refuse);
    return;
  }

  // External data: one file beside the model, tensors 64-byte aligned.
  std::string dataPath = outPath + ".data";
  std::string location = std::filesystem::path(dataPath).filename().string();
  static const char zeros[64] = {};
  std::vector<io::ByteSpan> pieces;
  // float32 weights are written from the arena as they are; others are
  // converted into `converted` (a list: growing it moves no string).
  std::list<std::string> converted;
  uint64_t offset = 0;
  for (const io::TensorRef &w : weights) {
    uint64_t pad = (64 - offset % 64) % 64;
    if (pad)
      pieces.push_back({zeros, pad});
    offset += pad;
    Tensor &t = *targets.at(w.name);
    io::ByteSpan span{w.data, w.nbytes()};
    if (t.data_type() != Tensor::FLOAT) {
      encode(w, t.data_type(), converted.emplace_back());
      span = {converted.back().data(), converted.back().size()};
    }
    t.set_data_location(Tensor::EXTERNAL);
    auto entry = [&](const char *key, const std::string &value) {
      auto *kv = t.add_external_data();
      kv->set_key(key);
      kv->set_value(value);
    };
    entry("location", location);
    entry("offset", std::to_string(offset));
    entry("length", std::to_string(span.size));
    pieces.push_back(span);
    offset += span.size;
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    fail(outPath, "cannot serialize the model");
  // Neither file replaces one that exists (dsrt checks both at start-up);
  // a model that cannot be written leaves no orphaned data file.
  io::writeFileAtomically(dataPath, pieces, io::Existing::Refuse);
  try {
    io::writeFileAtomically(outPath, {{bytes.data(), bytes.size()}}, io::Existing::Refuse);
  } catch (...) {
    ::unlink(dataPath.c_str());
    throw;
  }
}

} // namespace dsrt::onnx_export
