//===- TokenFile.cpp - flat files of token ids ----------------------------===//
#include "runtime/io/TokenFile.h"

namespace dsrt::io {
namespace {

constexpr size_t kLlmcHeaderInts = 256;
constexpr size_t kLlmcHeaderBytes = kLlmcHeaderInts * 4;

/// llm.c dev/data/data_common.py HEADERS_INFO.
struct LlmcFormat {
  int32_t magic, version;
  TokenWidth width;
  const char *model;
};
constexpr LlmcFormat kLlmcFormats[] = {
    {20240520, 1, TokenWidth::U16, "gpt-2"},
    {20240801, 7, TokenWidth::U32, "llama-3"},
};

int32_t headerInt(const uint8_t *p, size_t index) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i)
    v |= uint32_t(p[4 * index + i]) << (8 * i);
  return int32_t(v);
}

size_t bytesOf(TokenWidth w) { return w == TokenWidth::U16 ? 2 : 4; }
const char *nameOf(TokenWidth w) {
  return w == TokenWidth::U16 ? "uint16" : "uint32";
}

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

TokenWidth parseTokenWidth(const std::string &text) {
  if (text == "uint16" || text == "u16")
    return TokenWidth::U16;
  if (text == "uint32" || text == "u32")
    return TokenWidth::U32;
  throw IoError("unknown token width '" + text +
                "' (expected uint16, u16, uint32 or u32)");
}

TokenFile TokenFile::open(const std::string &path,
                          std::optional<TokenWidth> width) {
  MappedFile file = MappedFile::open(path);
  const uint8_t *p = file.data();
  size_t size = file.size();

  size_t offset = 0;
  if (size >= kLlmcHeaderBytes) {
    int32_t magic = headerInt(p, 0), version = headerInt(p, 1);
    for (const LlmcFormat &f : kLlmcFormats) {
      if (magic != f.magic)
        continue;
      if (version != f.version)
        throw IoError(path + ": llm.c header with magic " +
                      std::to_string(magic) + " has version " +
                      std::to_string(version) + ", expected " +
                      std::to_string(f.version));
      if (width && *width != f.width)
        throw IoError(path + ": the llm.c header says " + nameOf(f.width) +
                      " tokens (" + f.model + "), but " + nameOf(*width) +
                      " was requested");
      int64_t count = headerInt(p, 2);
      if (count < 0 ||
          uint64_t(count) * bytesOf(f.width) != size - kLlmcHeaderBytes)
        throw IoError(path + ": the llm.c header says " +
                      std::to_string(count) + " tokens, but " +
                      std::to_string(size - kLlmcHeaderBytes) +
                      " bytes follow it");
      width = f.width;
      offset = kLlmcHeaderBytes;
    }
  }
  if (!width) {
    if (!endsWith(path, ".bin"))
      throw IoError(path + ": cannot tell the token width; name the file "
                           ".bin (uint16, as nanoGPT) or give the width "
                           "(uint16 or uint32)");
    width = TokenWidth::U16;
  }
  size_t tokenBytes = bytesOf(*width);
  size_t payload = size - offset;
  if (payload % tokenBytes != 0)
    throw IoError(path + ": size " + std::to_string(payload) +
                  " bytes is not a multiple of the " + nameOf(*width) +
                  " token size (" + std::to_string(tokenBytes) + ")");
  if (payload == 0)
    throw IoError(path + ": holds no tokens");
  return TokenFile(std::move(file), *width, offset,
                   int64_t(payload / tokenBytes));
}

void TokenFile::copyWindow(int64_t start, int64_t len, int64_t *dst) const {
  if (start < 0 || len < 0 || start > size_ || len > size_ - start)
    throw IoError(path() + ": token window [" + std::to_string(start) + ", " +
                  std::to_string(start) + " + " + std::to_string(len) +
                  ") is outside the " + std::to_string(size_) + " tokens");
  // The mapping is page-aligned and the header is 1024 bytes, so the ids are
  // naturally aligned.
  const uint8_t *base = file_.data() + offset_;
  if (width_ == TokenWidth::U16) {
    const uint16_t *ids = reinterpret_cast<const uint16_t *>(base) + start;
    for (int64_t i = 0; i < len; ++i)
      dst[i] = ids[i];
  } else {
    const uint32_t *ids = reinterpret_cast<const uint32_t *>(base) + start;
    for (int64_t i = 0; i < len; ++i)
      dst[i] = ids[i];
  }
}

} // namespace dsrt::io
