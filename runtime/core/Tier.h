//===- Tier.h - the NVMe tier of a rank: its file and bounce buffers -*- C++ -*-===//
//
// ZeRO-Infinity's optimizer state on NVMe (Buffer.tier NVME): one file per
// rank (runtime/io/Aio: O_DIRECT through io_uring, created, reserved and
// unlinked by dsrt) and `slots` bounce buffers of the block size, through
// which any byte range of the tier is read into or written from ordinary
// memory with up to `slots` requests in flight. tier.fetch and tier.store
// copy a tile with it; checkpoints read and write the state through it a
// slice at a time, so the state is never in memory as a whole.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_CORE_TIER_H
#define DSRT_CORE_TIER_H

#include "runtime/io/Aio.h"

#include <cstdint>
#include <memory>
#include <string>

namespace dsrt {

class NvmeTier {
public:
  /// Creates the rank's file `name` under `dir` of `bytes` (errors name the
  /// folder: missing, unwritable, too little room).
  NvmeTier(const std::string &dir, const std::string &name, uint64_t bytes,
           const io::AioOptions &options);
  ~NvmeTier();
  NvmeTier(const NvmeTier &) = delete;
  NvmeTier &operator=(const NvmeTier &) = delete;

  /// Bytes [offset, offset + bytes) of the tier into `dst`, and back from
  /// `src` (any offsets: a partly covered block is read, then written whole).
  void read(uint64_t offset, uint64_t bytes, void *dst);
  void write(uint64_t offset, uint64_t bytes, const void *src);

  const io::AioFile &file() const { return *file_; }

private:
  std::unique_ptr<io::AioFile> file_;
  char *bounce_ = nullptr;
  uint64_t block_ = 0;
  int slots_ = 0;
  // The kill tests' failpoint: DSRT_FAILPOINT=nvme-write:K makes the K-th
  // write SIGKILL this process with half of its requests submitted
  // (docs/offload.md, "Crash safety").
  uint64_t killAtWrite_ = 0, writes_ = 0;
};

} // namespace dsrt

#endif // DSRT_CORE_TIER_H
