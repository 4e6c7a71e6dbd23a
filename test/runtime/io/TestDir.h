//===- TestDir.h - scratch directories for dsrt_io tests --------*- C++ -*-===//
//
// Each test writes into its own fresh directory, removed afterwards, plus
// helpers to write raw bytes and run an optional Python cross-check.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_TEST_IO_TESTDIR_H
#define DSRT_TEST_IO_TESTDIR_H

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

namespace dsrt::io::test {

class TestDir {
public:
  TestDir() {
    std::string pattern = ::testing::TempDir() + "dsrt_io_XXXXXX";
    if (!::mkdtemp(pattern.data()))
      ADD_FAILURE() << "cannot create a temporary directory";
    path_ = pattern;
  }
  ~TestDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TestDir(const TestDir &) = delete;
  TestDir &operator=(const TestDir &) = delete;

  const std::string &path() const { return path_; }
  std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

inline void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

inline std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// True when /usr/bin/python3 can import numpy (the cross-checks need it).
inline bool haveNumpy() {
  static const bool have =
      std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
  return have;
}

/// Runs `script` with /usr/bin/python3 (cwd = `dir`); returns its exit status
/// and appends its output to `output`.
inline int runPython(const std::string &dir, const std::string &script,
                     std::string &output) {
  std::string scriptPath = dir + "/check.py";
  writeBytes(scriptPath, script);
  std::string command = "cd '" + dir + "' && /usr/bin/python3 check.py 2>&1";
  FILE *pipe = ::popen(command.c_str(), "r");
  if (!pipe)
    return -1;
  char buf[256];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe))
    output.append(buf, n);
  return ::pclose(pipe);
}

/// The message of the exception `expr` throws as `Type`, or a failure.
#define DSRT_ERROR_OF(Type, expr)                                              \
  [&]() -> std::string {                                                       \
    try {                                                                      \
      expr;                                                                    \
    } catch (const Type &e) {                                                  \
      return e.what();                                                         \
    }                                                                          \
    ADD_FAILURE() << "expected " #Type " from " #expr;                         \
    return "";                                                                 \
  }()

} // namespace dsrt::io::test

#endif // DSRT_TEST_IO_TESTDIR_H
