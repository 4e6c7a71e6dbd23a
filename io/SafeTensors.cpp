//===- SafeTensors.cpp - safetensors files --------------------------------===//
#include "io/SafeTensors.h"

#include "io/JsonLimits.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>

namespace dsrt::io {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

/// The reference implementation refuses headers above 100 MB.
constexpr uint64_t kMaxHeaderSize = 100'000'000;
/// A valid header nests 3 deep (header, tensor, shape); nlohmann recurses per
/// level, so a crafted header is stopped long before the stack is at risk.
constexpr size_t kMaxHeaderNesting = 64;
const char *const kMetadataKey = "__metadata__";

struct DTypeName {
  const char *name;
  DType dtype;
};
constexpr DTypeName kDTypeNames[] = {
    {"F32", DType::F32},   {"F64", DType::F64}, {"F16", DType::F16},
    {"BF16", DType::BF16}, {"I64", DType::I64}, {"I32", DType::I32},
    {"U16", DType::U16},   {"U32", DType::U32}, {"U8", DType::U8},
    {"BOOL", DType::Bool},
};

const char *nameOf(DType dtype) {
  for (const DTypeName &d : kDTypeNames)
    if (d.dtype == dtype)
      return d.name;
  return "?";
}

/// Parses the header, rejecting a repeated key (nlohmann would keep the last
/// one, silently dropping a tensor).
json parseHeader(const std::string &path, const std::string &text) {
  if (std::optional<JsonPosition> at =
          findExcessNesting(text, kMaxHeaderNesting, /*comments=*/false))
    throw IoError(path + ": header nests arrays and objects deeper than " +
                  std::to_string(kMaxHeaderNesting) + " levels at byte " +
                  std::to_string(at->byte) +
                  " of the header (a valid one nests 3)");
  std::vector<std::string> topKeys;
  json::parser_callback_t callback = [&](int d, json::parse_event_t event,
                                         json &parsed) {
    if (event == json::parse_event_t::key && d == 1) {
      std::string key = parsed.get<std::string>();
      if (std::find(topKeys.begin(), topKeys.end(), key) != topKeys.end())
        throw IoError(path + ": tensor '" + key + "' appears twice");
      topKeys.push_back(key);
    }
    return true;
  };
  try {
    return json::parse(text, callback);
  } catch (const json::exception &e) {
    // parse_error, and out_of_range for a number beyond double's range.
    throw IoError(path + ": header is not valid JSON: " + e.what());
  }
}

uint64_t offsetValue(const std::string &where, const json &v) {
  if (!v.is_number_unsigned())
    throw IoError(where + ": data_offsets must be non-negative integers");
  return v.get<uint64_t>();
}

} // namespace

std::map<std::string, std::string> weightsMetadata(int64_t step) {
  return {{"format", "pt"}, {"producer", "dsrt"}, {"step", std::to_string(step)}};
}

void streamSafeTensors(const std::string &path, const std::vector<TensorRef> &tensors,
                       const std::map<std::string, std::string> &metadata,
                       const std::function<void(AtomicFile &)> &writeData) {
  std::string header = safeTensorsHeader(path, tensors, metadata);
  AtomicFile file(path, Existing::Refuse);
  file.write(header.data(), header.size());
  writeData(file);
  file.commit();
}

std::string safeTensorsHeader(const std::string &path, const std::vector<TensorRef> &tensors,
                              const std::map<std::string, std::string> &metadata) {
  ordered_json header = ordered_json::object();
  if (!metadata.empty())
    header[kMetadataKey] = metadata;
  uint64_t offset = 0;
  for (const TensorRef &t : tensors) {
    std::string where = path + ": tensor '" + t.name + "'";
    if (t.name == kMetadataKey)
      throw IoError(where + ": the name is reserved for metadata");
    if (header.contains(t.name))
      throw IoError(where + " is given twice");
    size_t nbytes = size_t(numElements(t.shape, where)) * dtypeSize(t.dtype);
    header[t.name] = {{"dtype", nameOf(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text = header.dump();
  // Pad with spaces so the data starts 8-aligned, as the reference writer.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = char(uint8_t(uint64_t(text.size()) >> (8 * i)));
  return out + text;
}

void writeSafeTensors(const std::string &path,
                      const std::vector<TensorRef> &tensors,
                      const std::map<std::string, std::string> &metadata) {
  std::string header = safeTensorsHeader(path, tensors, metadata);
  std::vector<ByteSpan> pieces{{header.data(), header.size()}};
  for (const TensorRef &t : tensors) {
    if (t.nbytes() > 0 && !t.data)
      throw IoError(path + ": tensor '" + t.name + "' has no data");
    pieces.push_back({t.data, t.nbytes()});
  }
  writeFileAtomically(path, pieces);
}

SafeTensorsFile SafeTensorsFile::open(const std::string &path) {
  SafeTensorsFile f(MappedFile::open(path));
  const uint8_t *p = f.file_.data();
  size_t size = f.file_.size();
  if (size < 8)
    throw IoError(path + ": too short for a safetensors file (" +
                  std::to_string(size) + " bytes)");
  uint64_t headerSize = 0;
  for (int i = 0; i < 8; ++i)
    headerSize |= uint64_t(p[i]) << (8 * i);
  if (headerSize > kMaxHeaderSize)
    throw IoError(path + ": header length " + std::to_string(headerSize) +
                  " exceeds the 100 MB limit (not a safetensors file?)");
  if (headerSize > size - 8)
    throw IoError(path + ": truncated: the header needs " +
                  std::to_string(headerSize) + " bytes, the file has " +
                  std::to_string(size - 8) + " after the length");
  std::string text(reinterpret_cast<const char *>(p + 8), headerSize);
  json header = parseHeader(path, text);
  if (!header.is_object())
    throw IoError(path + ": header must be a JSON object");
  const uint8_t *data = p + 8 + headerSize;
  uint64_t dataSize = size - 8 - headerSize;

  struct Range {
    uint64_t begin, end;
    size_t tensor;
  };
  std::vector<Range> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const json &v = it.value();
    if (it.key() == kMetadataKey) {
      if (!v.is_object())
        throw IoError(path + ": __metadata__ must be an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          throw IoError(path + ": __metadata__ value of '" + m.key() +
                        "' must be a string");
        f.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    std::string where = path + ": tensor '" + it.key() + "'";
    if (!v.is_object() || v.size() != 3 || !v.contains("dtype") ||
        !v.contains("shape") || !v.contains("data_offsets"))
      throw IoError(where + " must be an object with exactly dtype, shape "
                            "and data_offsets");
    const json &dt = v["dtype"];
    const DTypeName *found = nullptr;
    for (const DTypeName &d : kDTypeNames)
      if (dt.is_string() && dt.get<std::string>() == d.name)
        found = &d;
    if (!found)
      throw IoError(where + ": unsupported dtype " + dt.dump() +
                    " (supported: F32 F64 F16 BF16 I64 I32 U16 U32 U8 BOOL)");
    const json &shapeJson = v["shape"];
    if (!shapeJson.is_array())
      throw IoError(where + ": shape must be an array");
    std::vector<int64_t> shape;
    for (const json &d : shapeJson) {
      if (!d.is_number_unsigned() ||
          d.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
        throw IoError(where + ": shape must hold non-negative integers");
      shape.push_back(d.get<int64_t>());
    }
    const json &offsets = v["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2)
      throw IoError(where + ": data_offsets must be [begin, end]");
    uint64_t begin = offsetValue(where, offsets[0]);
    uint64_t end = offsetValue(where, offsets[1]);
    if (end < begin)
      throw IoError(where + ": data_offsets end " + std::to_string(end) +
                    " is before begin " + std::to_string(begin));
    if (end > dataSize)
      throw IoError(where + ": data_offsets end " + std::to_string(end) +
                    " is past the end of the data (" +
                    std::to_string(dataSize) + " bytes)");
    int64_t numel = numElements(shape, where);
    uint64_t expected = uint64_t(numel) * dtypeSize(found->dtype);
    if (uint64_t(numel) > dataSize || expected != end - begin)
      throw IoError(where + ": shape " + formatShape(shape) + " of " +
                    found->name + " needs " + std::to_string(uint64_t(numel)) +
                    " x " + std::to_string(dtypeSize(found->dtype)) +
                    " bytes but data_offsets span " +
                    std::to_string(end - begin));
    ranges.push_back({begin, end, f.tensors_.size()});
    f.tensors_.push_back(
        TensorRef{it.key(), found->dtype, std::move(shape), data + begin});
  }

  // The tensors must tile the data: sorted by offset, each starts where the
  // previous one ended, and the last ends at the end of the file.
  std::sort(ranges.begin(), ranges.end(), [](const Range &a, const Range &b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t next = 0;
  const TensorRef *previous = nullptr;
  for (const Range &r : ranges) {
    const TensorRef &t = f.tensors_[r.tensor];
    if (r.begin < next)
      throw IoError(path + ": tensors '" + previous->name + "' and '" + t.name +
                    "' overlap");
    if (r.begin > next)
      throw IoError(path + ": " + std::to_string(r.begin - next) +
                    " unused bytes before tensor '" + t.name + "'");
    next = r.end;
    previous = &t;
  }
  if (next != dataSize)
    throw IoError(path + ": " + std::to_string(dataSize - next) +
                  " unused bytes after the last tensor");
  std::vector<TensorRef> ordered;
  for (const Range &r : ranges)
    ordered.push_back(std::move(f.tensors_[r.tensor]));
  f.tensors_ = std::move(ordered);
  return f;
}

const TensorRef *SafeTensorsFile::find(const std::string &name) const {
  for (const TensorRef &t : tensors_)
    if (t.name == name)
      return &t;
  return nullptr;
}

const TensorRef &SafeTensorsFile::at(const std::string &name) const {
  if (const TensorRef *t = find(name))
    return *t;
  throw IoError(path() + ": no tensor named '" + name + "'");
}

} // namespace dsrt::io
