//===- Aio.h - the NVMe tier's file: O_DIRECT reads and writes in flight -*- C++ -*-===//
//
// One file per rank under ZeRO-Infinity's nvme_path, which dsrt creates,
// reserves and removes itself: requests of block-aligned extents go to the
// disk with O_DIRECT through io_uring, up to `queueDepth` chunks of at most
// `blockSize` bytes in flight, and complete while the caller computes;
// `wait` blocks for one request. DeepSpeed's `aio` section names the knobs
// (block_size, queue_depth, single_submit, overlap_events).
//
// Why io_uring (liburing) rather than libaio: one ring serves reads and
// writes with one system call per batch, completions are read from shared
// memory, and submission never blocks on file metadata (libaio's io_submit
// may, and is only asynchronous with O_DIRECT at all). Where the kernel or a
// seccomp profile refuses io_uring (EPERM, ENOSYS), and where the file
// system refuses O_DIRECT (EINVAL: tmpfs, some overlay file systems), the
// file still works, synchronously or buffered, and says so (mode()).
//
// The file is created with O_EXCL (never an existing file), its bytes are
// reserved with fallocate before the first step (so that a disk filling
// up later cannot fail a write), and its name is unlinked at once: a run
// killed by SIGKILL leaves nothing behind. Checkpoints copy the tier's
// bytes out; nothing refers to the file by path.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_IO_AIO_H
#define DSRT_IO_AIO_H

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

namespace dsrt::io {

struct AioOptions {
  /// The largest request sent to the disk; longer extents are split.
  uint64_t blockSize = 1 << 20;
  /// Requests in flight at most.
  int queueDepth = 8;
  /// One submission per request instead of one per batch.
  bool singleSubmit = false;
  /// "io_uring" (the default), "sync" (pread/pwrite in the caller's
  /// thread) or "auto": io_uring where the kernel allows it.
  std::string engine = "auto";
};

/// How an AioFile reaches its disk.
enum class AioMode {
  Uring,       // io_uring, O_DIRECT
  UringBuffered, // io_uring through the page cache (no O_DIRECT here)
  Sync,        // pread/pwrite, O_DIRECT
  SyncBuffered // pread/pwrite through the page cache
};
const char *aioModeName(AioMode m);

class AioFile {
public:
  /// The alignment of buffers, offsets and lengths (O_DIRECT's; 4096 covers
  /// every logical block size in use).
  static constexpr uint64_t kAlign = 4096;

  /// Creates `dir`/`name` (O_EXCL), reserves `bytes` (rounded up to
  /// kAlign) and unlinks the name. Errors name the path and say what to
  /// change: a missing or unwritable folder, too little room (the free and
  /// the needed bytes), a file of that name already there.
  static std::unique_ptr<AioFile> create(const std::string &dir, const std::string &name,
                                         uint64_t bytes, const AioOptions &options = {});
  ~AioFile();
  AioFile(const AioFile &) = delete;
  AioFile &operator=(const AioFile &) = delete;

  using Ticket = uint64_t;
  /// Starts reading [offset, offset + bytes) of the file into `buf`, or
  /// writing `buf` there; `buf`, `offset` and `bytes` multiples of kAlign
  /// (an error otherwise), the extent inside the file. The buffer must stay
  /// untouched until wait(ticket).
  Ticket read(void *buf, uint64_t offset, uint64_t bytes);
  Ticket write(const void *buf, uint64_t offset, uint64_t bytes);
  /// Blocks until the request is done; throws IoError naming the file, the
  /// extent and the system's error if any part of it failed.
  void wait(Ticket t);
  /// Waits for every request.
  void drain();

  uint64_t size() const { return size_; }
  const std::string &path() const { return path_; }
  AioMode mode() const { return mode_; }
  /// Requests split into chunks, and bytes moved, since creation.
  uint64_t chunksSubmitted() const { return chunks_; }
  uint64_t bytesRead() const { return bytesRead_; }
  uint64_t bytesWritten() const { return bytesWritten_; }

private:
  struct Ring;
  struct Chunk {
    Ticket ticket;
    char *buf;
    uint64_t offset, bytes;
    bool write;
  };
  AioFile() = default;
  Ticket start(void *buf, uint64_t offset, uint64_t bytes, bool write);
  void submitChunk(const Chunk &c);
  /// Prepares `c` in the ring's submission entry (an io_uring_sqe).
  void enqueue(void *entry, const Chunk &c);
  void submitQueued();
  void reapOne();
  void runSync(const Chunk &c);
  void done(Ticket t);
  void throwPending();
  std::string describe(const Chunk &c, int err) const;

  int fd_ = -1;
  std::string path_;
  uint64_t size_ = 0;
  AioOptions options_;
  AioMode mode_ = AioMode::Sync;
  std::unique_ptr<Ring> ring_;
  Ticket next_ = 1;
  uint64_t nextChunk_ = 1;
  std::unordered_map<uint64_t, Chunk> inFlight_;  // by the chunk's id
  std::unordered_map<Ticket, int> pending_;       // chunks not done per request
  uint64_t chunks_ = 0, bytesRead_ = 0, bytesWritten_ = 0;
  int queued_ = 0; // prepared, not yet submitted
  std::string error_; // the first asynchronous failure, thrown at wait
};

} // namespace dsrt::io

#endif // DSRT_IO_AIO_H
