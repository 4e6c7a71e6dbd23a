//===- TokenFile.cpp - flat files of token ids ----------------------------===//
#include "runtime/io/TokenFile.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

TokenFile::Fd::~Fd() {
  if (fd >= 0)
    ::close(fd);
}

TokenFile TokenFile::open(const std::string &path,
                          std::optional<TokenWidth> width) {
  auto fd = std::make_shared<Fd>();
  fd->path = path;
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused
  // below as not a regular file.
  fd->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd->fd < 0)
    throw IoError(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd->fd, &st) != 0)
    throw IoError(path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw IoError(path + ": not a regular file (a FIFO, a device or a folder); give a token "
                         "file or a folder of .npy files");
  size_t size = size_t(st.st_size);

  size_t offset = 0;
  uint8_t p[kLlmcHeaderBytes];
  if (size >= kLlmcHeaderBytes) {
    ssize_t got = ::pread(fd->fd, p, kLlmcHeaderBytes, 0);
    if (got != ssize_t(kLlmcHeaderBytes))
      throw IoError(path + ": cannot read the first " + std::to_string(kLlmcHeaderBytes) +
                    " bytes");
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
  return TokenFile(std::move(fd), *width, offset, int64_t(payload / tokenBytes));
}

void TokenFile::readIds(uint64_t at, size_t bytes, uint8_t *into) const {
  uint64_t pos = offset_ + at;
  while (bytes > 0) {
    ssize_t got = ::pread(fd_->fd, into, bytes, off_t(pos));
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      throw IoError(path() + ": cannot read: " + std::strerror(errno));
    if (got == 0) {
      struct stat st;
      std::string now = ::fstat(fd_->fd, &st) == 0 ? std::to_string(st.st_size) : "?";
      throw IoError(path() + ": the file is shorter than when training started (" + now +
                    " bytes now, " +
                    std::to_string(offset_ + uint64_t(size_) * bytesOf(width_)) +
                    " then): it was truncated or rewritten during the run");
    }
    into += got;
    pos += uint64_t(got);
    bytes -= size_t(got);
  }
}

void TokenFile::copyWindow(int64_t start, int64_t len, int64_t *dst) const {
  if (start < 0 || len < 0 || start > size_ || len > size_ - start)
    throw IoError(path() + ": token window [" + std::to_string(start) + ", " +
                  std::to_string(start) + " + " + std::to_string(len) +
                  ") is outside the " + std::to_string(size_) + " tokens");
  size_t w = bytesOf(width_);
  size_t bytes = size_t(len) * w;
  if (buffer_.size() < bytes)
    buffer_.resize(bytes);
  readIds(uint64_t(start) * w, bytes, buffer_.data());
  // Little-endian ids, as every writer of these formats stores them.
  const uint8_t *b = buffer_.data();
  if (width_ == TokenWidth::U16) {
    for (int64_t i = 0; i < len; ++i)
      dst[i] = int64_t(b[2 * i]) | int64_t(b[2 * i + 1]) << 8;
  } else {
    for (int64_t i = 0; i < len; ++i)
      dst[i] = int64_t(b[4 * i]) | int64_t(b[4 * i + 1]) << 8 | int64_t(b[4 * i + 2]) << 16 |
               int64_t(b[4 * i + 3]) << 24;
  }
}

void TokenFile::checkIds(int64_t bound, const std::string &what) const {
  constexpr int64_t kChunk = int64_t(1) << 22; // tokens per read
  std::vector<int64_t> ids(size_t(std::min(kChunk, size_)));
  int64_t first = -1, firstValue = 0, bad = 0;
  for (int64_t at = 0; at < size_; at += kChunk) {
    int64_t n = std::min(kChunk, size_ - at);
    copyWindow(at, n, ids.data());
    for (int64_t i = 0; i < n; ++i)
      if (ids[size_t(i)] >= bound) {
        if (first < 0) {
          first = at + i;
          firstValue = ids[size_t(i)];
        }
        ++bad;
      }
  }
  if (bad)
    throw IoError(path() + ": token " + std::to_string(first) + " is " +
                  std::to_string(firstValue) + ", outside " + what + " of " +
                  std::to_string(bound) + " (ids 0-" + std::to_string(bound - 1) + "); " +
                  std::to_string(bad) + " of the " + std::to_string(size_) +
                  " tokens are (a corpus tokenized for another vocabulary?)");
}

} // namespace dsrt::io
