//===- FuzzUtil.h - shared plumbing of the libFuzzer harnesses --*- C++ -*-===//
//
// The readers under test take a path, so each harness writes its input into
// a scratch folder of its own (in /dev/shm where it can, else $TMPDIR;
// DSC_FUZZ_TMPDIR overrides; removed at exit). Inputs made of several parts
// (a hostfile and flags, a plan and its weights) are split here the same
// way for every harness.
//
// A harness accepts exactly the error types its parser documents; any other
// exception escaping means a check is missing (a library's own message
// reaches the user instead of one naming the file), and is reported as a
// finding unless DSC_FUZZ_LENIENT=1.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TEST_FUZZ_FUZZUTIL_H
#define DSC_TEST_FUZZ_FUZZUTIL_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

namespace dsc::fuzz {

/// This process's scratch folder, created on first use.
inline const std::string &scratchDir() {
  static const std::string dir = [] {
    // tmpfs: a file written per input on a disk-backed /tmp costs 30x more.
    const char *tmp = std::getenv("DSC_FUZZ_TMPDIR");
    if (!tmp || !*tmp)
      tmp = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/dsc-fuzz-XXXXXX";
    if (!::mkdtemp(pattern.data())) {
      std::perror("dsc-fuzz: mkdtemp");
      std::abort();
    }
    static std::string removeAtExit;
    removeAtExit = pattern;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(removeAtExit, ec);
    });
    return pattern;
  }();
  return dir;
}

/// Writes `size` bytes to scratchDir()/name (replacing it); returns the path.
inline std::string writeScratch(const std::string &name, const void *data, size_t size) {
  std::string path = scratchDir() + "/" + name;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::perror(("dsc-fuzz: " + path).c_str());
    std::abort();
  }
  const char *p = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n <= 0) {
      std::perror(("dsc-fuzz: writing " + path).c_str());
      std::abort();
    }
    p += n;
    size -= size_t(n);
  }
  ::close(fd);
  return path;
}

inline void removeScratch(const std::string &name) {
  ::unlink((scratchDir() + "/" + name).c_str());
}

/// Splits at NUL bytes into exactly `n` parts (missing ones empty; the last
/// keeps any further NULs).
inline std::vector<std::string> splitParts(const uint8_t *data, size_t size, size_t n) {
  std::vector<std::string> parts(n);
  size_t k = 0, begin = 0;
  for (size_t i = 0; i < size && k + 1 < n; ++i)
    if (data[i] == 0) {
      parts[k++].assign(reinterpret_cast<const char *>(data) + begin, i - begin);
      begin = i + 1;
    }
  if (begin <= size)
    parts[k].assign(reinterpret_cast<const char *>(data) + begin, size - begin);
  return parts;
}

inline volatile uint8_t touchSink;

/// Reads every byte of [data, data + size), so that a reader handing out a
/// range past its buffer is caught by ASan here, not later.
inline void touch(const void *data, size_t size) {
  const volatile uint8_t *p = static_cast<const volatile uint8_t *>(data);
  uint8_t sum = 0;
  for (size_t i = 0; i < size; ++i)
    sum = uint8_t(sum + p[i]);
  touchSink = sum;
}

inline bool lenient() {
  static const bool value = [] {
    const char *v = std::getenv("DSC_FUZZ_LENIENT");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return value;
}

/// DSC_FUZZ_VERBOSE=1: print the errors inputs end with (to see how far
/// the seeds get).
inline void note(const char *what) {
  static const bool verbose = std::getenv("DSC_FUZZ_VERBOSE") != nullptr;
  if (verbose)
    std::fprintf(stderr, "note: %s\n", what);
}

/// An exception the parser does not document escaped: a finding, unless
/// DSC_FUZZ_LENIENT=1.
[[noreturn]] inline void foreignException(const char *harness, const std::exception &e) {
  std::fprintf(stderr, "%s: undocumented exception escaped: %s\n", harness, e.what());
  std::abort();
}

} // namespace dsc::fuzz

#endif // DSC_TEST_FUZZ_FUZZUTIL_H
