//===- StateDict.cpp - the PyTorch state_dict of a plan's model -----------===//
#include "runtime/onnx/StateDict.h"

#include "io/FileUtil.h"
#include "io/JsonLimits.h"
#include "io/SafeTensors.h"

#include "onnx/onnx_pb.h"

#include <nlohmann/json.hpp>

#include <climits>
#include <cstring>
#include <filesystem>
#include <set>

namespace dsrt::onnx_export {
namespace {

using io::DType;
using io::IoError;
using Proto = ::onnx::TensorProto;
using json = nlohmann::json;

[[noreturn]] void fail(const std::string &path, const std::string &message) {
  throw IoError(path + ": " + message);
}

::onnx::ModelProto readModel(const std::string &path) {
  if (!std::filesystem::exists(path))
    fail(path, "missing: the plan has no ONNX model (it was compiled from a .pt2, or by "
               "an older dsc): recompile the model from ONNX");
  io::requireRegularFile(path);
  io::MappedFile file = io::MappedFile::open(path);
  ::onnx::ModelProto model;
  if (file.size() > size_t(INT32_MAX) || !model.ParseFromArray(file.data(), int(file.size())))
    fail(path, "not an ONNX model (truncated or corrupt)");
  return model;
}

bool hasData(const Proto &t) {
  return !t.raw_data().empty() || t.float_data_size() || t.double_data_size() ||
         t.int32_data_size() || t.int64_data_size() || t.uint64_data_size() ||
         t.string_data_size() || t.data_location() == Proto::EXTERNAL;
}

/// The io::DType of an ONNX element type; false for one dsrt does not write.
bool dtypeOf(int32_t type, DType &out) {
  switch (type) {
  case Proto::FLOAT: out = DType::F32; return true;
  case Proto::DOUBLE: out = DType::F64; return true;
  case Proto::FLOAT16: out = DType::F16; return true;
  case Proto::BFLOAT16: out = DType::BF16; return true;
  case Proto::INT64: out = DType::I64; return true;
  case Proto::INT32: out = DType::I32; return true;
  case Proto::UINT16: out = DType::U16; return true;
  case Proto::UINT32: out = DType::U32; return true;
  case Proto::UINT8: out = DType::U8; return true;
  case Proto::BOOL: out = DType::Bool; return true;
  default: return false;
  }
}

/// safetensors' name of a dtype ("F32", "BOOL").
bool dtypeFromName(const std::string &name, DType &out) {
  static const std::pair<const char *, DType> names[] = {
      {"F32", DType::F32}, {"F64", DType::F64}, {"F16", DType::F16}, {"BF16", DType::BF16},
      {"I64", DType::I64}, {"I32", DType::I32}, {"U16", DType::U16}, {"U32", DType::U32},
      {"U8", DType::U8},   {"BOOL", DType::Bool}};
  for (const auto &[n, d] : names)
    if (name == n) {
      out = d;
      return true;
    }
  return false;
}

/// Little-endian bytes of `t`'s data (raw or in the typed fields), checked
/// against its shape; an empty string with `why` set when it cannot be had.
std::string valueOf(const Proto &t, DType dtype, int64_t numel, std::string &why) {
  size_t size = io::dtypeSize(dtype), n = size_t(numel);
  if (t.data_location() == Proto::EXTERNAL) {
    why = "its data is external";
    return {};
  }
  std::string out;
  if (!t.raw_data().empty()) {
    out = t.raw_data();
  } else {
    out.resize(n * size);
    char *dst = out.data();
    auto fromInts = [&](auto const &field) {
      if (size_t(field.size()) != n)
        return false;
      for (size_t i = 0; i < n; ++i) {
        // Narrower types live in int32_data / uint64_data: their low bytes
        // are the value (little-endian).
        auto v = field.Get(int(i));
        std::memcpy(dst + i * size, &v, size);
      }
      return true;
    };
    bool ok = false;
    switch (t.data_type()) {
    case Proto::FLOAT: ok = fromInts(t.float_data()); break;
    case Proto::DOUBLE: ok = fromInts(t.double_data()); break;
    case Proto::INT64: ok = fromInts(t.int64_data()); break;
    case Proto::UINT32: ok = fromInts(t.uint64_data()); break;
    default: ok = fromInts(t.int32_data()); break;
    }
    if (!ok) {
      why = "its data does not have its " + std::to_string(numel) + " elements";
      return {};
    }
  }
  if (out.size() != n * size) {
    why = "its data has " + std::to_string(out.size()) + " bytes, its shape and type need " +
          std::to_string(n * size);
    return {};
  }
  return out;
}

std::string decodeBase64(const std::string &text, bool &ok) {
  auto digit = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  ok = text.size() % 4 == 0;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; ok && i < text.size(); i += 4) {
    int v[4], pad = 0;
    for (int j = 0; j < 4; ++j) {
      char c = text[i + j];
      bool last = i + 4 == text.size();
      if (c == '=' && last && j >= 2 && (j == 3 || text[i + 3] == '=')) {
        v[j] = 0;
        ++pad;
      } else if ((v[j] = digit(c)) < 0 || pad) {
        ok = false;
      }
    }
    if (!ok)
      break;
    uint32_t w = uint32_t(v[0]) << 18 | uint32_t(v[1]) << 12 | uint32_t(v[2]) << 6 | uint32_t(v[3]);
    out.push_back(char(w >> 16));
    if (pad < 2)
      out.push_back(char(w >> 8));
    if (pad < 1)
      out.push_back(char(w));
  }
  return out;
}

std::string describe(DType dtype, const std::vector<int64_t> &shape) {
  return std::string(io::dtypeName(dtype)) + " " + io::formatShape(shape);
}

} // namespace

const StateDictEntry *StateDictLayout::find(const std::string &key) const {
  auto it = byKey.find(key);
  return it == byKey.end() ? nullptr : &entries[it->second];
}

StateDictLayout readStateDict(const std::string &skeletonPath) {
  ::onnx::ModelProto model = readModel(skeletonPath);
  // Every initializer as an entry of its own name (the layout without a
  // record, and what a recorded entry refers to).
  std::map<std::string, StateDictEntry> inits;
  std::map<std::string, std::vector<int64_t>> trained;
  std::vector<std::string> order;
  for (const Proto &t : model.graph().initializer()) {
    StateDictEntry e;
    e.key = e.initializer = t.name();
    e.shape.assign(t.dims().begin(), t.dims().end());
    int64_t numel = io::numElements(e.shape, skeletonPath + ": initializer '" + t.name() + "'");
    if (!dtypeOf(t.data_type(), e.dtype))
      e.unreadable = "it has ONNX type " + Proto::DataType_Name(Proto::DataType(t.data_type())) +
                     ", which dsrt does not write";
    else if (numel > 0 && !hasData(t))
      e.trained = true;
    else
      e.bytes = valueOf(t, e.dtype, numel, e.unreadable);
    if (inits.count(t.name()))
      fail(skeletonPath, "initializer '" + t.name() + "' appears twice");
    if (e.trained)
      trained[t.name()] = e.shape;
    order.push_back(t.name());
    inits.emplace(t.name(), std::move(e));
  }

  StateDictLayout layout;
  layout.trained = std::move(trained);
  const std::string *record = nullptr;
  for (const auto &kv : model.metadata_props())
    if (kv.key() == kStateDictKey)
      record = &kv.value();
  auto add = [&](StateDictEntry e) {
    if (!layout.byKey.emplace(e.key, layout.entries.size()).second)
      fail(skeletonPath, std::string("metadata '") + kStateDictKey + "': key '" + e.key +
                             "' appears twice");
    layout.entries.push_back(std::move(e));
  };
  if (!record) {
    for (const std::string &name : order)
      add(std::move(inits.at(name)));
    return layout;
  }

  layout.recorded = true;
  std::string where = skeletonPath + ": metadata '" + kStateDictKey + "'";
  if (io::findExcessNesting(*record, 3, /*comments=*/false))
    fail(where, "nests deeper than [[key, null, dtype, [shape], data]]");
  json items;
  try {
    items = json::parse(*record);
  } catch (const json::exception &e) {
    fail(where, std::string("is not valid JSON: ") + e.what());
  }
  if (!items.is_array())
    fail(where, "is not an array");
  for (const json &item : items) {
    bool pair = item.is_array() && item.size() == 2 && item[0].is_string() && item[1].is_string();
    bool inline_ = item.is_array() && item.size() == 5 && item[0].is_string() &&
                   item[1].is_null() && item[2].is_string() && item[3].is_array() &&
                   item[4].is_string();
    if (!pair && !inline_)
      fail(where, "item " + item.dump().substr(0, 200) +
                      " is neither [key, initializer] nor [key, null, dtype, shape, data]");
    std::string key = item[0].get<std::string>();
    if (pair) {
      std::string name = item[1].get<std::string>();
      auto it = inits.find(name);
      if (it == inits.end())
        fail(where, "key '" + key + "' names initializer '" + name +
                        "', which the model does not have");
      StateDictEntry e = it->second;
      e.key = key;
      add(std::move(e));
      continue;
    }
    StateDictEntry e;
    e.key = key;
    std::string at = where + ": key '" + key + "'";
    if (!dtypeFromName(item[2].get<std::string>(), e.dtype))
      fail(at, "dtype '" + item[2].get<std::string>() + "' is not one dsrt writes");
    for (const json &d : item[3]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        fail(at, "shape " + item[3].dump() + " is not a list of sizes");
      e.shape.push_back(d.get<int64_t>());
    }
    int64_t numel = io::numElements(e.shape, at);
    bool ok = false;
    e.bytes = decodeBase64(item[4].get<std::string>(), ok);
    if (!ok || e.bytes.size() != size_t(numel) * io::dtypeSize(e.dtype))
      fail(at, "data is not the base64 of " + std::to_string(numel) + " " +
                   io::dtypeName(e.dtype) + " elements");
    add(std::move(e));
  }
  return layout;
}

InitCheck checkInitWeights(const std::string &path, const std::string &planDir) {
  std::string where = "--init " + path;
  io::SafeTensorsFile init = [&] {
    try {
      io::requireRegularFile(path);
      return io::SafeTensorsFile::open(path);
    } catch (const IoError &e) {
      throw IoError("--init " + std::string(e.what()));
    }
  }();
  io::SafeTensorsFile planFile = io::SafeTensorsFile::open(planDir + "/weights.safetensors");
  std::string skeleton = planDir + "/model.onnx";
  StateDictLayout layout;
  if (std::filesystem::exists(skeleton))
    layout = readStateDict(skeleton);
  // The plan's weights: those in its weights.safetensors, and those of a
  // plan without weights (a --no-weights export), which its model holds as
  // initializers without data.
  struct Weight {
    io::DType dtype;
    std::vector<int64_t> shape;
  };
  std::map<std::string, Weight> plan;
  std::vector<std::string> order;
  for (const io::TensorRef &w : planFile.tensors()) {
    plan[w.name] = {w.dtype, w.shape};
    order.push_back(w.name);
  }
  for (const auto &[name, shape] : layout.trained)
    if (plan.emplace(name, Weight{io::DType::F32, shape}).second)
      order.push_back(name);
  InitCheck check;

  // The plan's weights: all there, float32, of the plan's shapes.
  std::vector<std::string> missing;
  for (const std::string &name : order) {
    const Weight &w = plan.at(name);
    const io::TensorRef *t = init.find(name);
    if (!t) {
      missing.push_back(name);
      continue;
    }
    if (t->dtype != w.dtype || t->shape != w.shape)
      fail(where, "tensor '" + name + "' is " + describe(t->dtype, t->shape) +
                      ", the plan needs " + describe(w.dtype, w.shape));
    ++check.weights;
  }
  if (!missing.empty()) {
    const Weight &w = plan.at(missing.front());
    fail(where, "no tensor '" + missing.front() + "' (" + describe(w.dtype, w.shape) +
                    "), a weight of the plan" +
                    (missing.size() > 1 ? " (" + std::to_string(missing.size()) + " of its " +
                                              std::to_string(order.size()) +
                                              " weights are missing)"
                                        : std::string()));
  }

  // Everything else: a key of the model's state_dict that loading it would
  // not change.
  for (const io::TensorRef &t : init.tensors()) {
    if (plan.count(t.name))
      continue;
    const StateDictEntry *e = layout.find(t.name);
    if (!e)
      fail(where, "tensor '" + t.name + "' is not in the model: neither a weight of the plan "
                  "nor a key of the model's state_dict" +
                      (layout.recorded ? std::string()
                                       : " (the model records no " + std::string(kStateDictKey) +
                                             ": export it with models/export_common.py to "
                                             "name its tied weights)") +
                      "; a state dict of another model?");
    // A weight of the plan under another of its names (tied: one tensor in
    // PyTorch, one weight in the plan), which the file has as well.
    if (const io::TensorRef *w = plan.count(e->initializer) ? init.find(e->initializer) : nullptr;
        w) {
      if (t.dtype != w->dtype || t.shape != w->shape ||
          std::memcmp(t.data, w->data, w->nbytes()) != 0)
        fail(where, "tensor '" + t.name + "' (" + describe(t.dtype, t.shape) +
                        ") differs from '" + w->name + "' (" + describe(w->dtype, w->shape) +
                        "): the model ties them (one tensor in PyTorch), the plan trains one "
                        "weight; give them equal values");
      ++check.tied;
      continue;
    }
    if (e->trained || !e->unreadable.empty())
      fail(where, "tensor '" + t.name + "': the model's value of it cannot be read from " +
                      skeleton + (e->unreadable.empty() ? "" : " (" + e->unreadable + ")"));
    // A buffer the plan compiled in (or the traced graph never read): a
    // value other than the model's would silently not take effect.
    if (t.dtype != e->dtype || t.shape != e->shape || t.nbytes() != e->bytes.size())
      fail(where, "tensor '" + t.name + "' is " + describe(t.dtype, t.shape) +
                      ", the model's buffer is " + describe(e->dtype, e->shape));
    if (std::memcmp(t.data, e->bytes.data(), e->bytes.size()) != 0)
      fail(where, "tensor '" + t.name + "' differs from the model's value: the plan holds "
                  "that value as a constant (compiled in, not loaded); to train with another, "
                  "export the model with it and recompile");
    ++check.buffers;
  }
  return check;
}

} // namespace dsrt::onnx_export
