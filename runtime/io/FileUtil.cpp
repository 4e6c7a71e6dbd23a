//===- FileUtil.cpp - shared file plumbing of dsrt_io ---------------------===//
#include "runtime/io/FileUtil.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dsrt::io {
namespace {

std::string systemError(const std::string &path, const std::string &what) {
  return path + ": " + what + ": " + std::strerror(errno);
}

/// Closes a descriptor when it goes out of scope.
class Fd {
public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  int get() const { return fd_; }
  /// Closes now, reporting the result (close can report a failed write).
  int release() {
    int r = ::close(fd_);
    fd_ = -1;
    return r;
  }

private:
  int fd_;
};

void writeAll(int fd, const void *data, size_t size, const std::string &path) {
  const char *p = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      throw IoError(systemError(path, "cannot write"));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

std::string parentDir(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

} // namespace

MappedFile MappedFile::open(const std::string &path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0)
    throw IoError(systemError(path, "cannot open"));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    throw IoError(systemError(path, "cannot stat"));
  if (!S_ISREG(st.st_mode))
    throw IoError(path + ": not a regular file");
  MappedFile m;
  m.path_ = path;
  m.size_ = static_cast<size_t>(st.st_size);
  if (m.size_ == 0)
    return m; // mmap rejects empty mappings; there is nothing to map
  void *p = ::mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (p == MAP_FAILED)
    throw IoError(systemError(path, "cannot map"));
  m.data_ = static_cast<const uint8_t *>(p);
  return m;
}

MappedFile::MappedFile(MappedFile &&other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile &MappedFile::operator=(MappedFile &&other) noexcept {
  if (this != &other) {
    if (data_)
      ::munmap(const_cast<uint8_t *>(data_), size_);
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_)
    ::munmap(const_cast<uint8_t *>(data_), size_);
}

void writeFileAtomically(const std::string &path,
                         const std::vector<ByteSpan> &pieces, Existing existing) {
  // A name of this process's own, created exclusively: a file of that name
  // that someone else made is never truncated.
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0)
    throw IoError(systemError(path, "cannot create"));
  try {
    for (const ByteSpan &piece : pieces)
      writeAll(fd.get(), piece.data, piece.size, tmp);
    if (::fsync(fd.get()) != 0)
      throw IoError(systemError(tmp, "cannot sync"));
    if (fd.release() != 0)
      throw IoError(systemError(tmp, "cannot close"));
    if (existing == Existing::Refuse) {
      if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) != 0)
        throw IoError(errno == EEXIST
                          ? path + ": exists; not written over (the new file was not kept)"
                          : systemError(path, "cannot rename its temporary to it"));
    } else if (::rename(tmp.c_str(), path.c_str()) != 0) {
      throw IoError(systemError(path, "cannot rename its temporary to it"));
    }
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  // Make the rename itself durable; failing here loses nothing written.
  Fd dir(::open(parentDir(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0)
    ::fsync(dir.get());
}

} // namespace dsrt::io
