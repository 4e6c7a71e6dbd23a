//===- Tier.h - the NVMe tier of a rank: its file and bounce buffers -*- C++ -*-===//
//
// ZeRO-Infinity's optimizer state on NVMe (Buffer.tier NVME): one file per
// rank (runtime/io/Aio: O_DIRECT through io_uring, created, reserved and
// unlinked by dsrt), or two when the parameters have a drive of their own
// (Plan.nvme_tier.param_path: the files lie end to end in the tier's
// offsets, and no request spans two), and `slots` bounce buffers of the
// block size, through
// which any byte range of the tier is read into or written from ordinary
// memory with up to `slots` requests in flight. tier.fetch and tier.store
// copy a tile with it; checkpoints read and write the state through it a
// slice at a time, so the state is never in memory as a whole.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_CORE_TIER_H
#define DSRT_CORE_TIER_H

#include "runtime/io/Aio.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dsrt {

class NvmeTier {
public:
  /// One of the tier's files: the rank's file `name` under `dir` of `bytes`
  /// (a multiple of io::AioFile::kAlign, but for the last).
  struct FileSpec {
    std::string dir, name;
    uint64_t bytes;
  };
  /// Creates the files, end to end in the tier's offsets (those of no
  /// bytes are skipped; errors name the folder: missing, unwritable, too
  /// little room).
  NvmeTier(const std::vector<FileSpec> &files, const io::AioOptions &options);
  ~NvmeTier();
  NvmeTier(const NvmeTier &) = delete;
  NvmeTier &operator=(const NvmeTier &) = delete;

  /// Bytes [offset, offset + bytes) of the tier into `dst`, and back from
  /// `src` (any offsets: a partly covered block is read, then written whole).
  /// They return once the bytes are in `dst` / on the disk.
  void read(uint64_t offset, uint64_t bytes, void *dst);
  void write(uint64_t offset, uint64_t bytes, const void *src);

  /// The same, started: with the I/O thread (startIoThread), a request
  /// runs there, after every request started before it, and `wait` blocks
  /// until it is done (rethrowing its error); without it, it runs at once.
  /// `dst` / `src` must stay valid until then.
  using Ticket = uint64_t;
  Ticket startRead(uint64_t offset, uint64_t bytes, void *dst);
  Ticket startWrite(uint64_t offset, uint64_t bytes, const void *src);
  void wait(Ticket t);
  /// Requests run on a thread of their own from now on (pipeline_read /
  /// pipeline_write: they overlap the kernels).
  void startIoThread();

  /// The files in tier order, each with its first byte in the tier.
  struct Part {
    uint64_t begin;
    std::unique_ptr<io::AioFile> file;
  };
  const std::vector<Part> &files() const { return files_; }

private:
  /// The file that holds [offset, offset + bytes) (one must), and the
  /// offset in it.
  io::AioFile &locate(uint64_t &offset, uint64_t bytes) const;
  Ticket start(bool write, uint64_t offset, uint64_t bytes, void *mem);
  void readNow(uint64_t offset, uint64_t bytes, void *dst);
  void writeNow(uint64_t offset, uint64_t bytes, const void *src);
  struct Job {
    bool write;
    uint64_t offset, bytes;
    void *mem;
    Ticket ticket;
  };
  void serve();

  std::vector<Part> files_;
  char *bounce_ = nullptr;
  uint64_t block_ = 0;
  int slots_ = 0;
  // The kill tests' failpoint: DSRT_FAILPOINT=nvme-write:K makes the K-th
  // write SIGKILL this process with half of its requests submitted
  // (docs/offload.md, "Crash safety").
  uint64_t killAtWrite_ = 0, writes_ = 0;
  // The I/O thread and its queue (FIFO): done_ is the last ticket served.
  std::thread io_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  Ticket issued_ = 0, done_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

} // namespace dsrt

#endif // DSRT_CORE_TIER_H
