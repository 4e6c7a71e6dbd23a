//===- Tier.cpp - the NVMe tier of a rank ----------------------------------===//
#include "runtime/core/Tier.h"

#include "io/FileUtil.h"

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

NvmeTier::NvmeTier(const std::vector<FileSpec> &files, const io::AioOptions &options)
    : block_(options.blockSize), slots_(std::max(1, options.queueDepth)) {
  uint64_t begin = 0;
  for (const FileSpec &f : files) {
    if (!f.bytes)
      continue;
    if (begin % kAlign)
      throw io::IoError(f.dir + ": the NVMe tier's file begins at byte " +
                        std::to_string(begin) + ", not a multiple of " + std::to_string(kAlign));
    files_.push_back({begin, io::AioFile::create(f.dir, f.name, f.bytes, options)});
    begin += f.bytes;
  }
  if (const char *f = std::getenv("DSRT_FAILPOINT");
      f && std::strncmp(f, "nvme-write:", 11) == 0)
    killAtWrite_ = std::strtoull(f + 11, nullptr, 10);
  bounce_ = static_cast<char *>(std::aligned_alloc(kAlign, block_ * uint64_t(slots_)));
  if (!bounce_)
    throw io::IoError("cannot allocate the NVMe tier's " + std::to_string(slots_) +
                      " buffers of " + std::to_string(block_) + " bytes");
}

io::AioFile &NvmeTier::locate(uint64_t &offset, uint64_t bytes) const {
  for (const Part &p : files_)
    if (offset >= p.begin && offset - p.begin < p.file->size()) {
      if (bytes > p.file->size() - (offset - p.begin))
        break;
      offset -= p.begin;
      return *p.file;
    }
  // The executor checks every buffer against the files when it loads.
  throw io::IoError("NVMe tier bytes [" + std::to_string(offset) + ", " +
                    std::to_string(offset + bytes) + ") do not lie in one of its files");
}

NvmeTier::~NvmeTier() {
  if (io_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    io_.join(); // after the requests queued before
  }
  files_.clear(); // waits for every request into the buffers
  std::free(bounce_);
}

void NvmeTier::startIoThread() {
  if (!io_.joinable())
    io_ = std::thread([this] { serve(); });
}

void NvmeTier::serve() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty())
        return; // stopped, nothing left
      job = queue_.front();
    }
    std::exception_ptr failed;
    if (!error_) { // after an error, the rest is not run (wait rethrows it)
      try {
        if (job.write)
          writeNow(job.offset, job.bytes, job.mem);
        else
          readNow(job.offset, job.bytes, job.mem);
      } catch (...) {
        failed = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.pop_front();
      if (failed && !error_)
        error_ = failed;
      done_ = job.ticket;
    }
    cv_.notify_all();
  }
}

NvmeTier::Ticket NvmeTier::start(bool write, uint64_t offset, uint64_t bytes, void *mem) {
  if (!io_.joinable()) {
    write ? writeNow(offset, bytes, mem) : readNow(offset, bytes, mem);
    return 0;
  }
  Ticket t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    t = ++issued_;
    queue_.push_back({write, offset, bytes, mem, t});
  }
  cv_.notify_all();
  return t;
}

NvmeTier::Ticket NvmeTier::startRead(uint64_t offset, uint64_t bytes, void *dst) {
  return start(false, offset, bytes, dst);
}

NvmeTier::Ticket NvmeTier::startWrite(uint64_t offset, uint64_t bytes, const void *src) {
  return start(true, offset, bytes, const_cast<void *>(src));
}

void NvmeTier::wait(Ticket t) {
  if (!io_.joinable())
    return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_ >= t; });
  if (error_)
    std::rethrow_exception(error_);
}

void NvmeTier::read(uint64_t offset, uint64_t bytes, void *dst) {
  wait(startRead(offset, bytes, dst));
}

void NvmeTier::write(uint64_t offset, uint64_t bytes, const void *src) {
  wait(startWrite(offset, bytes, src));
}

void NvmeTier::readNow(uint64_t offset, uint64_t bytes, void *dst) {
  if (!bytes)
    return;
  io::AioFile &file = locate(offset, bytes);
  const uint64_t begin = down(offset), end = std::min(up(offset + bytes), file.size());
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
    file.wait(p.ticket);
    uint64_t lo = std::max(p.at, offset), hi = std::min(p.at + block_, offset + bytes);
    std::memcpy(static_cast<char *>(dst) + (lo - offset), p.slot + (lo - p.at), hi - lo);
  };
  for (uint64_t at = begin; at < end; at += block_) {
    if (int(inFlight.size()) == slots_)
      finish();
    char *slot = bounce_ + uint64_t(next) * block_;
    next = (next + 1) % slots_;
    inFlight.push_back({file.read(slot, at, std::min(block_, end - at)), slot, at});
  }
  while (!inFlight.empty())
    finish();
}

void NvmeTier::writeNow(uint64_t offset, uint64_t bytes, const void *src) {
  if (!bytes)
    return;
  io::AioFile &file = locate(offset, bytes);
  const uint64_t begin = down(offset), end = std::min(up(offset + bytes), file.size());
  std::deque<io::AioFile::Ticket> inFlight;
  int next = 0;
  const bool kill = killAtWrite_ && ++writes_ == killAtWrite_;
  for (uint64_t at = begin; at < end; at += block_) {
    if (int(inFlight.size()) == slots_) {
      file.wait(inFlight.front());
      inFlight.pop_front();
    }
    char *slot = bounce_ + uint64_t(next) * block_;
    next = (next + 1) % slots_;
    const uint64_t n = std::min(block_, end - at);
    const uint64_t lo = std::max(at, offset), hi = std::min(at + n, offset + bytes);
    if (lo > at || hi < at + n) // a block only partly ours: the rest as it is
      file.wait(file.read(slot, at, n));
    std::memcpy(slot + (lo - at), static_cast<const char *>(src) + (lo - offset), hi - lo);
    inFlight.push_back(file.write(slot, at, n));
    if (kill && (at + n - begin) * 2 >= end - begin)
      ::raise(SIGKILL); // the failpoint: half submitted, requests in flight
  }
  // A later read of these bytes must see them.
  while (!inFlight.empty()) {
    file.wait(inFlight.front());
    inFlight.pop_front();
  }
}

} // namespace dsrt
