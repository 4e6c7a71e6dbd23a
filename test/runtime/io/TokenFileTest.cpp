//===- TokenFileTest.cpp - token file tests -------------------------------===//
//
// nanoGPT-style raw files, llm.c files with their 256-int32 header (GPT-2
// uint16 and Llama 3 uint32), and every error.
//
//===----------------------------------------------------------------------===//
#include "runtime/io/TokenFile.h"

#include "TestDir.h"

#include <vector>

#include <sys/stat.h>
#include <unistd.h>

using namespace dsrt::io;
using dsrt::io::test::TestDir;

namespace {

template <typename T> std::string bytesOf(const std::vector<T> &v) {
  return std::string(reinterpret_cast<const char *>(v.data()),
                     v.size() * sizeof(T));
}

/// An llm.c header: magic, version, token count, then zeros.
std::string llmcHeader(int32_t magic, int32_t version, int32_t count) {
  std::vector<int32_t> h(256, 0);
  h[0] = magic;
  h[1] = version;
  h[2] = count;
  return bytesOf(h);
}

std::string errorOf(const std::string &path,
                    std::optional<TokenWidth> width = std::nullopt) {
  return DSRT_ERROR_OF(IoError, TokenFile::open(path, width));
}

} // namespace

TEST(TokenFile, NanoGptBinIsUint16) {
  TestDir dir;
  std::vector<uint16_t> ids = {0, 1, 50256, 65535, 42, 7};
  std::string path = dir.file("train.bin");
  test::writeBytes(path, bytesOf(ids));
  TokenFile f = TokenFile::open(path);
  EXPECT_EQ(f.size(), 6);
  EXPECT_EQ(f.width(), TokenWidth::U16);
  EXPECT_FALSE(f.hasLlmcHeader());
  std::vector<int64_t> window(4, -1);
  f.copyWindow(1, 4, window.data());
  EXPECT_EQ(window, (std::vector<int64_t>{1, 50256, 65535, 42}));
  f.copyWindow(6, 0, window.data()); // an empty window at the end is fine
}

TEST(TokenFile, ExplicitUint32Width) {
  TestDir dir;
  std::vector<uint32_t> ids = {4000000000u, 128000, 3};
  std::string path = dir.file("tokens.u32");
  test::writeBytes(path, bytesOf(ids));
  TokenFile f = TokenFile::open(path, TokenWidth::U32);
  EXPECT_EQ(f.size(), 3);
  std::vector<int64_t> window(3);
  f.copyWindow(0, 3, window.data());
  EXPECT_EQ(window, (std::vector<int64_t>{4000000000LL, 128000, 3}));
  // The same bytes read as uint16 are six tokens.
  EXPECT_EQ(TokenFile::open(path, TokenWidth::U16).size(), 6);
}

TEST(TokenFile, LlmcHeadersAreDetectedAndSkipped) {
  TestDir dir;
  std::vector<uint16_t> gpt2 = {50256, 15496, 11};
  std::string gptPath = dir.file("fineweb_train_000001.bin");
  test::writeBytes(gptPath, llmcHeader(20240520, 1, 3) + bytesOf(gpt2));
  TokenFile g = TokenFile::open(gptPath);
  EXPECT_TRUE(g.hasLlmcHeader());
  EXPECT_EQ(g.width(), TokenWidth::U16);
  EXPECT_EQ(g.size(), 3);
  std::vector<int64_t> window(3);
  g.copyWindow(0, 3, window.data());
  EXPECT_EQ(window, (std::vector<int64_t>{50256, 15496, 11}));

  std::vector<uint32_t> llama = {128000, 9906, 1917, 0};
  std::string llamaPath = dir.file("llama.bin");
  test::writeBytes(llamaPath, llmcHeader(20240801, 7, 4) + bytesOf(llama));
  TokenFile l = TokenFile::open(llamaPath, TokenWidth::U32);
  EXPECT_TRUE(l.hasLlmcHeader());
  EXPECT_EQ(l.width(), TokenWidth::U32);
  EXPECT_EQ(l.size(), 4);
  l.copyWindow(1, 3, window.data());
  EXPECT_EQ(window, (std::vector<int64_t>{9906, 1917, 0}));
}

TEST(TokenFile, Errors) {
  TestDir dir;
  std::string path = dir.file("bad.bin");
  test::writeBytes(path, llmcHeader(20240520, 1, 3) + std::string(6, '\0'));
  EXPECT_EQ(errorOf(path, TokenWidth::U32),
            path + ": the llm.c header says uint16 tokens (gpt-2), but uint32 "
                   "was requested");
  test::writeBytes(path, llmcHeader(20240520, 1, 4) + std::string(6, '\0'));
  EXPECT_EQ(errorOf(path),
            path + ": the llm.c header says 4 tokens, but 6 bytes follow it");
  test::writeBytes(path, llmcHeader(20240520, 3, 3) + std::string(6, '\0'));
  EXPECT_EQ(errorOf(path), path + ": llm.c header with magic 20240520 has "
                                  "version 3, expected 1");
  test::writeBytes(path, std::string(7, '\0'));
  EXPECT_EQ(errorOf(path), path + ": size 7 bytes is not a multiple of the "
                                  "uint16 token size (2)");
  EXPECT_EQ(errorOf(path, TokenWidth::U32),
            path + ": size 7 bytes is not a multiple of the uint32 token size "
                   "(4)");
  test::writeBytes(path, "");
  EXPECT_EQ(errorOf(path), path + ": holds no tokens");

  std::string noExt = dir.file("tokens.dat");
  test::writeBytes(noExt, std::string(8, '\0'));
  EXPECT_EQ(errorOf(noExt),
            noExt + ": cannot tell the token width; name the file .bin "
                    "(uint16, as nanoGPT) or give the width (uint16 or "
                    "uint32)");
  std::string missing = dir.file("missing.bin");
  EXPECT_EQ(errorOf(missing),
            missing + ": cannot open: No such file or directory");
  EXPECT_EQ(errorOf(dir.path()), dir.path() + ": not a regular file (a FIFO, a device or a folder); "
                                               "give a token file or a folder of .npy files");
}

TEST(TokenFile, WindowOutsideTheFile) {
  TestDir dir;
  std::string path = dir.file("w.bin");
  test::writeBytes(path, std::string(10, '\0'));
  TokenFile f = TokenFile::open(path);
  std::vector<int64_t> dst(8);
  EXPECT_EQ(DSRT_ERROR_OF(IoError, f.copyWindow(3, 3, dst.data())),
            path + ": token window [3, 3 + 3) is outside the 5 tokens");
  EXPECT_EQ(DSRT_ERROR_OF(IoError, f.copyWindow(-1, 2, dst.data())),
            path + ": token window [-1, -1 + 2) is outside the 5 tokens");
  EXPECT_EQ(DSRT_ERROR_OF(IoError, f.copyWindow(0, -1, dst.data())),
            path + ": token window [0, 0 + -1) is outside the 5 tokens");
}

TEST(TokenFile, ParseTokenWidth) {
  EXPECT_EQ(parseTokenWidth("uint16"), TokenWidth::U16);
  EXPECT_EQ(parseTokenWidth("u16"), TokenWidth::U16);
  EXPECT_EQ(parseTokenWidth("uint32"), TokenWidth::U32);
  EXPECT_EQ(parseTokenWidth("u32"), TokenWidth::U32);
  EXPECT_EQ(DSRT_ERROR_OF(IoError, parseTokenWidth("int64")),
            "unknown token width 'int64' (expected uint16, u16, uint32 or "
            "u32)");
}

/// A token file truncated while training: a mapped reader died of SIGBUS
/// without a word; now the read fails with the file named.
TEST(TokenFile, TruncatedWhileOpenIsAnErrorNotASignal) {
  TestDir dir;
  std::string path = dir.file("train.bin");
  std::vector<uint16_t> ids(8192);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = uint16_t(i % 50);
  test::writeBytes(path, bytesOf(ids));
  TokenFile f = TokenFile::open(path);
  std::vector<int64_t> window(16);
  f.copyWindow(8000, 16, window.data());
  EXPECT_EQ(window[0], 8000 % 50);
  ASSERT_EQ(::truncate(path.c_str(), 100), 0);
  EXPECT_EQ(DSRT_ERROR_OF(IoError, f.copyWindow(8000, 16, window.data())),
            path + ": the file is shorter than when training started (100 bytes now, 16384 "
                   "then): it was truncated or rewritten during the run");
}

TEST(TokenFile, CheckIdsNamesTheFirstOutOfTheVocabulary) {
  TestDir dir;
  std::string path = dir.file("train.bin");
  test::writeBytes(path, bytesOf(std::vector<uint16_t>{1, 2, 9, 3, 12, 0}));
  TokenFile f = TokenFile::open(path);
  f.checkIds(13, "the vocabulary");
  EXPECT_EQ(DSRT_ERROR_OF(IoError, f.checkIds(8, "the model's vocabulary")),
            path + ": token 2 is 9, outside the model's vocabulary of 8 (ids 0-7); 2 of the 6 "
                   "tokens are (a corpus tokenized for another vocabulary?)");
}

TEST(TokenFile, AFifoIsRefusedWithoutWaitingForAWriter) {
  TestDir dir;
  std::string path = dir.file("fifo.bin");
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  EXPECT_EQ(errorOf(path), path + ": not a regular file (a FIFO, a device or a folder); give a "
                                  "token file or a folder of .npy files");
}
