//===- TokenFile.h - flat files of token ids --------------------*- C++ -*-===//
//
// A training corpus stored as a flat array of token ids, read with pread
// (not memory-mapped: a file truncated while training would end a mapped
// reader with SIGBUS; a short read is an error naming the file):
//  * nanoGPT's train.bin / val.bin: raw uint16 ids, no header;
//  * llm.c's .bin files: a header of 256 little-endian int32 (magic, version,
//    token count, zeros) then the ids; magic 20240520 version 1 means uint16
//    ids (GPT-2), magic 20240801 version 7 uint32 ids (Llama 3). The header
//    is detected, checked against the file size and skipped.
// Without an llm.c header the width comes from the caller, or is uint16 for
// a ".bin" file (nanoGPT's convention). A raw GPT-2 file cannot be mistaken
// for an llm.c one: its first two ids would have to be 55224 and 308, and
// 55224 is outside GPT-2's 50257-token vocabulary.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_IO_TOKENFILE_H
#define DSRT_IO_TOKENFILE_H

#include "io/FileUtil.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dsrt::io {

enum class TokenWidth { U16, U32 };

/// Parses a width as a command-line flag spells it: "uint16"/"u16" or
/// "uint32"/"u32". Throws IoError.
TokenWidth parseTokenWidth(const std::string &text);

class TokenFile {
public:
  /// Opens `path` (a regular file). `width`, when given, must agree with an
  /// llm.c header. Throws IoError naming the file (not a regular file,
  /// unknown width, size not a multiple of the token size, header and size
  /// disagreeing, no tokens).
  static TokenFile open(const std::string &path,
                        std::optional<TokenWidth> width = std::nullopt);

  /// Number of tokens.
  int64_t size() const { return size_; }
  TokenWidth width() const { return width_; }
  bool hasLlmcHeader() const { return offset_ != 0; }
  const std::string &path() const { return fd_->path; }

  /// Copies tokens [start, start + len) into dst as int64. Throws IoError if
  /// the window is not inside the file, or if the file has become shorter
  /// since it was opened. Allocates only when a window is longer than every
  /// earlier one.
  void copyWindow(int64_t start, int64_t len, int64_t *dst) const;

  /// One pass over every id: throws IoError naming the first id >= `bound`
  /// (its position and value) and how many there are, so that a corpus
  /// tokenized for another vocabulary fails before the first step.
  void checkIds(int64_t bound, const std::string &what) const;

private:
  struct Fd {
    int fd = -1;
    std::string path;
    ~Fd();
  };
  TokenFile(std::shared_ptr<Fd> fd, TokenWidth width, size_t offset, int64_t size)
      : fd_(std::move(fd)), width_(width), offset_(offset), size_(size) {}
  /// Reads `bytes` at byte `at` of the ids; throws IoError on a short read.
  void readIds(uint64_t at, size_t bytes, uint8_t *into) const;
  std::shared_ptr<Fd> fd_;
  TokenWidth width_;
  size_t offset_; // bytes of header before the first token
  int64_t size_;
  mutable std::vector<uint8_t> buffer_; // copyWindow's staging
};

} // namespace dsrt::io

#endif // DSRT_IO_TOKENFILE_H
