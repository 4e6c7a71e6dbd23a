//===- FileUtil.cpp - shared file plumbing of dsrt_io ---------------------===//
#include "io/FileUtil.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

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
  // O_NONBLOCK: opening a FIFO would wait for a writer; fstat refuses it.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
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

AtomicFile::AtomicFile(std::string path, Existing existing)
    : path_(std::move(path)), existing_(existing) {
  // A name of this process's own, created exclusively: a file of that name
  // that someone else made is never truncated.
  tmp_ = path_ + ".tmp." + std::to_string(::getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw IoError(systemError(path_, "cannot create"));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0)
    ::close(fd_);
  if (!committed_)
    ::unlink(tmp_.c_str());
}

// Errors name the file being written, not its temporary name.
void AtomicFile::write(const void *data, size_t size) { writeAll(fd_, data, size, path_); }

void AtomicFile::commit() {
  if (::fsync(fd_) != 0)
    throw IoError(systemError(tmp_, "cannot sync"));
  int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0)
    throw IoError(systemError(tmp_, "cannot close"));
  if (existing_ == Existing::Refuse) {
    if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE) != 0)
      throw IoError(errno == EEXIST
                        ? path_ + ": exists; not written over (the new file was not kept)"
                        : systemError(path_, "cannot rename its temporary to it"));
  } else if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    throw IoError(systemError(path_, "cannot rename its temporary to it"));
  }
  committed_ = true;
  // Make the rename itself durable; failing here loses nothing written.
  syncDir(parentDir(path_));
}

void writeFileAtomically(const std::string &path,
                         const std::vector<ByteSpan> &pieces, Existing existing) {
  AtomicFile file(path, existing);
  for (const ByteSpan &piece : pieces)
    file.write(piece.data, piece.size);
  file.commit();
}

void syncDir(const std::string &dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() >= 0)
    ::fsync(fd.get());
}

void requireRegularFile(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    throw IoError(systemError(path, "cannot open"));
  if (S_ISREG(st.st_mode))
    return;
  const char *kind = S_ISFIFO(st.st_mode)  ? "a FIFO"
                     : S_ISDIR(st.st_mode) ? "a directory"
                     : S_ISCHR(st.st_mode) ? "a character device"
                     : S_ISBLK(st.st_mode) ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a file";
  throw IoError(path + ": not a regular file (" + kind + ")");
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_DigestInit_ex(static_cast<EVP_MD_CTX *>(ctx_), EVP_sha256(), nullptr) != 1)
    throw IoError("SHA-256: OpenSSL cannot start a digest");
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX *>(ctx_)); }

void Sha256::update(const void *data, size_t size) {
  if (size && EVP_DigestUpdate(static_cast<EVP_MD_CTX *>(ctx_), data, size) != 1)
    throw IoError("SHA-256: OpenSSL cannot update a digest");
}

std::string Sha256::hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned length = 0;
  if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX *>(ctx_), digest, &length) != 1)
    throw IoError("SHA-256: OpenSSL cannot finish a digest");
  static const char digits[] = "0123456789abcdef";
  std::string r;
  for (unsigned k = 0; k < length; ++k) {
    r += digits[digest[k] >> 4];
    r += digits[digest[k] & 15];
  }
  return r;
}

std::string sha256Hex(const void *data, size_t size) {
  Sha256 h;
  h.update(data, size);
  return h.hex();
}

std::string sha256File(const std::string &path) {
  requireRegularFile(path);
  MappedFile file = MappedFile::open(path);
  // In slices, dropping each one's pages behind it: hashing a weights file
  // must not hold all of it in memory.
  constexpr size_t kSlice = size_t(8) << 20;
  Sha256 h;
  for (size_t at = 0; at < file.size(); at += kSlice) {
    size_t n = std::min(kSlice, file.size() - at);
    h.update(file.data() + at, n);
    ::madvise(const_cast<uint8_t *>(file.data()) + at, n, MADV_DONTNEED);
  }
  return h.hex();
}

void writeChecksums(const std::string &dir, const std::vector<FileChecksum> &files) {
  std::string text;
  for (const FileChecksum &f : files)
    text += f.sha256 + "  " + f.name + "\n";
  writeFileAtomically(dir + "/" + kChecksumFile, {{text.data(), text.size()}});
}

std::vector<FileChecksum> readChecksums(const std::string &dir) {
  std::string path = dir + "/" + kChecksumFile;
  requireRegularFile(path);
  MappedFile file = MappedFile::open(path);
  // A line per file of a plan: a few hundred bytes.
  constexpr size_t kMaxBytes = 64 << 10;
  if (file.size() > kMaxBytes)
    throw IoError(path + ": " + std::to_string(file.size()) + " bytes, more than the " +
                  std::to_string(kMaxBytes) + " a checksum list may have");
  std::string text(reinterpret_cast<const char *>(file.data()), file.size());
  std::vector<FileChecksum> r;
  size_t line = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos)
      end = text.size();
    std::string l = text.substr(at, end - at);
    at = end + 1;
    ++line;
    if (l.empty())
      continue;
    // sha256sum writes "<hex>  <name>" (text mode) or "<hex> *<name>".
    bool ok = l.size() > 66 && l[64] == ' ' && (l[65] == ' ' || l[65] == '*');
    for (size_t k = 0; ok && k < 64; ++k)
      ok = std::isxdigit(static_cast<unsigned char>(l[k]));
    if (!ok)
      throw IoError(path + ": line " + std::to_string(line) +
                    " is not '<64 hex digits>  <file name>'");
    FileChecksum f{l.substr(66), l.substr(0, 64)};
    for (char &c : f.sha256)
      c = char(std::tolower(static_cast<unsigned char>(c)));
    r.push_back(std::move(f));
  }
  return r;
}

} // namespace dsrt::io
