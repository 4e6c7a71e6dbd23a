//===- FileUtil.h - shared file plumbing of dsrt_io -------------*- C++ -*-===//
//
// The error type of every dsrt_io reader and writer, a read-only memory map
// of a whole file, and the write-to-temporary-then-rename helper the writers
// use so that an existing file is never left half overwritten.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_IO_FILEUTIL_H
#define DSRT_IO_FILEUTIL_H

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace dsrt::io {

/// Every dsrt_io failure; the message starts with the file's path.
class IoError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A whole file mapped read-only. Movable, not copyable; unmaps on
/// destruction. An empty file has size() 0 and data() nullptr.
class MappedFile {
public:
  /// Throws IoError naming `path` and the system's reason.
  static MappedFile open(const std::string &path);

  MappedFile(MappedFile &&other) noexcept;
  MappedFile &operator=(MappedFile &&other) noexcept;
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  ~MappedFile();

  const uint8_t *data() const { return data_; }
  size_t size() const { return size_; }
  const std::string &path() const { return path_; }

private:
  MappedFile() = default;
  std::string path_;
  const uint8_t *data_ = nullptr;
  size_t size_ = 0;
};

struct ByteSpan {
  const void *data;
  size_t size;
};

/// Whether writeFileAtomically may replace an existing file.
enum class Existing { Replace, Refuse };

/// Writes the concatenation of `pieces` to `path` through `path`.tmp, which
/// is fsync'ed and then renamed over `path`: readers see the old file or the
/// complete new one, never a partial write. With Existing::Refuse the rename
/// never replaces a file (RENAME_NOREPLACE): an existing `path` is an
/// IoError, however late it appeared. Throws IoError (and removes the
/// temporary) on failure.
void writeFileAtomically(const std::string &path,
                         const std::vector<ByteSpan> &pieces,
                         Existing existing = Existing::Replace);

/// writeFileAtomically in pieces that arrive one after another (a file too
/// large to hold in memory): write() appends to `path`.tmp.PID, commit()
/// fsyncs it and renames it into place; destroyed uncommitted (an
/// exception), the temporary is removed and `path` is as it was.
class AtomicFile {
public:
  AtomicFile(std::string path, Existing existing = Existing::Replace);
  ~AtomicFile();
  AtomicFile(const AtomicFile &) = delete;
  AtomicFile &operator=(const AtomicFile &) = delete;
  void write(const void *data, size_t size);
  void commit();

private:
  std::string path_, tmp_;
  Existing existing_;
  int fd_ = -1;
  bool committed_ = false;
};

/// fsyncs a folder, so that the renames and creations in it are durable
/// (best effort: a folder that cannot be opened is left as it is).
void syncDir(const std::string &dir);

/// Throws IoError naming `path` unless it is a regular file (symlinks
/// followed): opening a FIFO blocks until a writer comes, and reading a
/// device may never end, so every reader of a user's file calls this first.
void requireRegularFile(const std::string &path);

/// SHA-256 (OpenSSL's, with the CPU's SHA extensions where it has them),
/// fed in pieces.
class Sha256 {
public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256 &) = delete;
  Sha256 &operator=(const Sha256 &) = delete;
  void update(const void *data, size_t size);
  /// The digest as 64 lowercase hex digits; ends the hash.
  std::string hex();

private:
  void *ctx_; // EVP_MD_CTX
};

std::string sha256Hex(const void *data, size_t size);
/// The SHA-256 of a regular file's bytes. Throws IoError.
std::string sha256File(const std::string &path);

/// A plan directory's checksums: DIR/plan.sha256 in sha256sum's format (a
/// line "<64 hex digits>  <file name>" per file), so `sha256sum -c
/// plan.sha256` in the directory checks it too.
constexpr const char *kChecksumFile = "plan.sha256";
struct FileChecksum {
  std::string name; // in the directory
  std::string sha256;
};
/// Writes DIR/plan.sha256 (through a temporary and a rename).
void writeChecksums(const std::string &dir, const std::vector<FileChecksum> &files);
/// Reads DIR/plan.sha256. Throws IoError naming it: missing, not a regular
/// file, or a line that is not "<64 hex digits>  <name>".
std::vector<FileChecksum> readChecksums(const std::string &dir);

} // namespace dsrt::io

#endif // DSRT_IO_FILEUTIL_H
