//===- Tier.cpp - the NVMe tier of a rank ----------------------------------===//
#include "runtime/core/Tier.h"

#include "runtime/io/FileUtil.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>

namespace dsrt {

namespace {
constexpr uint64_t kAlign = io::AioFile::kAlign;
uint64_t down(uint64_t v) { return v / kAlign * kAlign; }
uint64_t up(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }
} // namespace

NvmeTier::NvmeTier(const std::string &dir, const std::string &name, uint64_t bytes,
                   const io::AioOptions &options)
    : file_(io::AioFile::create(dir, name, bytes, options)), block_(options.blockSize),
      slots_(std::max(1, options.queueDepth)) {
  if (const char *f = std::getenv("DSRT_FAILPOINT");
      f && std::strncmp(f, "nvme-write:", 11) == 0)
    killAtWrite_ = std::strtoull(f + 11, nullptr, 10);
  bounce_ = static_cast<char *>(std::aligned_alloc(kAlign, block_ * uint64_t(slots_)));
  if (!bounce_)
    throw io::IoError(dir + ": cannot allocate the NVMe tier's " + std::to_string(slots_) +
                      " buffers of " + std::to_string(block_) + " bytes");
}

NvmeTier::~NvmeTier() {
  file_.reset(); // waits for every request into the buffers
  std::free(bounce_);
}

void NvmeTier::read(uint64_t offset, uint64_t bytes, void *dst) {
  if (!bytes)
    return;
  const uint64_t begin = down(offset), end = std::min(up(offset + bytes), file_->size());
  struct Pending {
    io::AioFile::Ticket ticket;
    char *slot;
    uint64_t at; // the chunk's first byte in the tier
  };
  std::deque<Pending> inFlight;
  int next = 0;
  auto finish = [&] {
    Pending p = inFlight.front();
    inFlight.pop_front();
    file_->wait(p.ticket);
    uint64_t lo = std::max(p.at, offset), hi = std::min(p.at + block_, offset + bytes);
    std::memcpy(static_cast<char *>(dst) + (lo - offset), p.slot + (lo - p.at), hi - lo);
  };
  for (uint64_t at = begin; at < end; at += block_) {
    if (int(inFlight.size()) == slots_)
      finish();
    char *slot = bounce_ + uint64_t(next) * block_;
    next = (next + 1) % slots_;
    inFlight.push_back({file_->read(slot, at, std::min(block_, end - at)), slot, at});
  }
  while (!inFlight.empty())
    finish();
}

void NvmeTier::write(uint64_t offset, uint64_t bytes, const void *src) {
  if (!bytes)
    return;
  const uint64_t begin = down(offset), end = std::min(up(offset + bytes), file_->size());
  std::deque<io::AioFile::Ticket> inFlight;
  int next = 0;
  const bool kill = killAtWrite_ && ++writes_ == killAtWrite_;
  for (uint64_t at = begin; at < end; at += block_) {
    if (int(inFlight.size()) == slots_) {
      file_->wait(inFlight.front());
      inFlight.pop_front();
    }
    char *slot = bounce_ + uint64_t(next) * block_;
    next = (next + 1) % slots_;
    const uint64_t n = std::min(block_, end - at);
    const uint64_t lo = std::max(at, offset), hi = std::min(at + n, offset + bytes);
    if (lo > at || hi < at + n) // a block only partly ours: the rest as it is
      file_->wait(file_->read(slot, at, n));
    std::memcpy(slot + (lo - at), static_cast<const char *>(src) + (lo - offset), hi - lo);
    inFlight.push_back(file_->write(slot, at, n));
    if (kill && (at + n - begin) * 2 >= end - begin)
      ::raise(SIGKILL); // the failpoint: half submitted, requests in flight
  }
  // A later read of these bytes must see them.
  while (!inFlight.empty()) {
    file_->wait(inFlight.front());
    inFlight.pop_front();
  }
}

} // namespace dsrt
