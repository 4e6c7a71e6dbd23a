//===- token_file.cpp - fuzz the token-file reader -------------------------===//
//
// Input: one mode byte, then the file. The mode picks the width the caller
// asks for (none, uint16, uint32) and the file's name (".bin", the nanoGPT
// convention, or ".tok"). TokenFile::open either throws IoError or maps a
// file whose windows copyWindow reads inside the file: the first and last
// windows are copied, and one at a position taken from the input, which must
// succeed or throw IoError.
//
//===----------------------------------------------------------------------===//
#include "runtime/io/TokenFile.h"
#include "test/fuzz/FuzzUtil.h"

#include <cstring>

using namespace dsrt::io;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  uint8_t mode = data[0];
  std::optional<TokenWidth> width;
  if (mode % 3 == 1)
    width = TokenWidth::U16;
  else if (mode % 3 == 2)
    width = TokenWidth::U32;
  const char *name = (mode / 3) % 2 ? "tokens.tok" : "tokens.bin";
  std::string path = dsc::fuzz::writeScratch(name, data + 1, size - 1);
  try {
    TokenFile file = TokenFile::open(path, width);
    constexpr int64_t kWindow = 64;
    int64_t dst[kWindow];
    int64_t n = file.size();
    if (n <= 0) {
      std::fprintf(stderr, "token_file: a file of %lld tokens was accepted\n", (long long)n);
      std::abort();
    }
    int64_t len = std::min(n, kWindow);
    file.copyWindow(0, len, dst);
    file.copyWindow(n - len, len, dst);
    // A window the caller did not check: it must be refused, not read.
    int64_t start = 0, wlen = 0;
    if (size >= 1 + 2 * sizeof(int64_t)) {
      std::memcpy(&start, data + 1, sizeof start);
      std::memcpy(&wlen, data + 1 + sizeof start, sizeof wlen);
      wlen = wlen < 0 ? wlen : wlen % (kWindow + 1);
      try {
        file.copyWindow(start, wlen, dst);
      } catch (const IoError &e) {
        dsc::fuzz::note(e.what());
      }
    }
    (void)parseTokenWidth(mode & 1 ? "uint16" : "u32");
  } catch (const IoError &e) {
    dsc::fuzz::note(e.what());
  } catch (const std::exception &e) {
    if (!dsc::fuzz::lenient())
      dsc::fuzz::foreignException("token_file", e);
  }
  return 0;
}
