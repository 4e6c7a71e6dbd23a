//===- OnnxExport.cpp - trained weights back into an ONNX model ----------===//
#include "runtime/onnx/OnnxExport.h"

#include "runtime/half/HalfBits.h"

#include "onnx/onnx_pb.h"

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
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
    fail(path, "missing: the plan has no ONNX model to export into (it was compiled "
               "from a .pt2, or by an older dsc): recompile the model from ONNX");
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

/// The little-endian bytes of `n` floats in ONNX type `type`, at `dst`.
void encode(const float *src, size_t n, int32_t type, char *dst) {
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
      // dsrt's one rounding (runtime/half/HalfBits.h): bf16 flushes
      // float denormals to zero, as the kernels that trained them.
      uint16_t h = type == Tensor::FLOAT16 ? half::f16Bits(src[i]) : half::bf16Bits(src[i]);
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
  std::vector<WeightSource> sources;
  for (const io::TensorRef &w : weights) {
    if (w.dtype != io::DType::F32)
      fail(outPath, "weight '" + w.name + "' is " + io::dtypeName(w.dtype) + ", not float32");
    const float *data = static_cast<const float *>(w.data);
    sources.push_back({w.name, w.shape, [data](int64_t start, int64_t count, float *dst) {
                         std::memcpy(dst, data + start, size_t(count) * 4);
                       }});
  }
  exportOnnx(skeletonPath, sources, outPath, inlineLimit);
}

namespace {

/// Protobuf's output straight into an AtomicFile (no serialized copy).
/// Write never throws: protobuf's adaptor flushes from its destructor,
/// and an exception there (a full disk) would end the process. The first
/// failure is kept, Write returns false from then on, and rethrow() raises
/// it once protobuf has returned.
class AtomicFileStream : public google::protobuf::io::CopyingOutputStream {
public:
  explicit AtomicFileStream(io::AtomicFile &file) : file_(file) {}
  bool Write(const void *buffer, int size) override {
    if (error_)
      return false;
    try {
      file_.write(buffer, size_t(size));
      return true;
    } catch (...) {
      error_ = std::current_exception();
      return false;
    }
  }
  void rethrow() const {
    if (error_)
      std::rethrow_exception(error_);
  }

private:
  io::AtomicFile &file_;
  std::exception_ptr error_;
};

/// Reads `w` slice by slice and passes each slice, encoded in ONNX type
/// `type`, to `sink(bytes, size)`.
template <typename Sink>
void streamEncoded(const WeightSource &w, int64_t numel, int32_t type, std::vector<float> &buf,
                   std::string &bytes, Sink sink) {
  constexpr int64_t kSlice = int64_t(1) << 20; // 4 MiB of float32
  for (int64_t at = 0; at < numel; at += kSlice) {
    int64_t n = std::min(kSlice, numel - at);
    buf.resize(size_t(n));
    w.read(at, n, buf.data());
    bytes.resize(size_t(n) * elementBytes(type));
    encode(buf.data(), size_t(n), type, bytes.data());
    sink(bytes.data(), bytes.size());
  }
}

} // namespace

void exportOnnx(const std::string &skeletonPath, const std::vector<WeightSource> &weights,
                const std::string &outPath, uint64_t inlineLimit) {
  ::onnx::ModelProto model = readSkeleton(skeletonPath);
  std::vector<std::string> names;
  for (const WeightSource &w : weights)
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
  std::vector<int64_t> numels;
  for (const WeightSource &w : weights) {
    const Tensor &t = *targets.at(w.name);
    if (!std::equal(t.dims().begin(), t.dims().end(), w.shape.begin(), w.shape.end()))
      fail(skeletonPath, "initializer '" + w.name + "' has shape " + shapeOf(t) +
                             " but the trained weight has " + io::formatShape(w.shape));
    numels.push_back(io::numElements(w.shape, w.name));
    total += uint64_t(numels.back()) * elementBytes(t.data_type());
  }

  std::vector<float> buf;
  std::string bytes;
  if (total <= inlineLimit) {
    for (size_t i = 0; i < weights.size(); ++i) {
      Tensor &t = *targets.at(weights[i].name);
      std::string &raw = *t.mutable_raw_data();
      raw.clear();
      raw.reserve(size_t(numels[i]) * elementBytes(t.data_type()));
      streamEncoded(weights[i], numels[i], t.data_type(), buf, bytes,
                    [&](const char *data, size_t size) { raw.append(data, size); });
    }
    io::AtomicFile file(outPath, io::Existing::Refuse);
    AtomicFileStream stream(file);
    {
      google::protobuf::io::CopyingOutputStreamAdaptor adaptor(&stream);
      bool ok = model.SerializeToZeroCopyStream(&adaptor) && adaptor.Flush();
      stream.rethrow(); // the write's own error (a full disk), if any
      if (!ok)
        fail(outPath, "cannot serialize the model");
    }
    stream.rethrow();
    file.commit(); // not reached on an error: the temporary file goes
    return;
  }

  // External data: one file beside the model, tensors 64-byte aligned,
  // streamed slice by slice.
  std::string dataPath = outPath + ".data";
  std::string location = std::filesystem::path(dataPath).filename().string();
  static const char zeros[64] = {};
  io::AtomicFile data(dataPath, io::Existing::Refuse);
  uint64_t offset = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    uint64_t pad = (64 - offset % 64) % 64;
    if (pad)
      data.write(zeros, pad);
    offset += pad;
    Tensor &t = *targets.at(weights[i].name);
    uint64_t length = uint64_t(numels[i]) * elementBytes(t.data_type());
    streamEncoded(weights[i], numels[i], t.data_type(), buf, bytes,
                  [&](const char *p, size_t size) { data.write(p, size); });
    t.set_data_location(Tensor::EXTERNAL);
    auto entry = [&](const char *key, const std::string &value) {
      auto *kv = t.add_external_data();
      kv->set_key(key);
      kv->set_value(value);
    };
    entry("location", location);
    entry("offset", std::to_string(offset));
    entry("length", std::to_string(length));
    offset += length;
  }
  std::string serialized;
  if (!model.SerializeToString(&serialized))
    fail(outPath, "cannot serialize the model");
  // Neither file replaces one that exists (dsrt checks both at start-up);
  // a model that cannot be written leaves no orphaned data file.
  data.commit();
  try {
    io::writeFileAtomically(outPath, {{serialized.data(), serialized.size()}},
                            io::Existing::Refuse);
  } catch (...) {
    ::unlink(dataPath.c_str());
    throw;
  }
}

} // namespace dsrt::onnx_export
