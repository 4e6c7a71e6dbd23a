//===- Aio.cpp - the NVMe tier's file over io_uring -----------------------===//
#include "runtime/io/Aio.h"

#include "io/FileUtil.h"

#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace dsrt::io {

struct AioFile::Ring {
  io_uring ring;
  bool live = false;
  ~Ring() {
    if (live)
      io_uring_queue_exit(&ring);
  }
};

const char *aioModeName(AioMode m) {
  switch (m) {
  case AioMode::Uring: return "io_uring, O_DIRECT";
  case AioMode::UringBuffered: return "io_uring, buffered (this file system refuses O_DIRECT)";
  case AioMode::Sync: return "pread/pwrite, O_DIRECT";
  case AioMode::SyncBuffered:
    return "pread/pwrite, buffered (this file system refuses O_DIRECT)";
  }
  return "?";
}

namespace {
std::string sysError(int err) { return std::strerror(err); }
uint64_t alignUp(uint64_t v) { return (v + AioFile::kAlign - 1) / AioFile::kAlign * AioFile::kAlign; }
} // namespace

std::unique_ptr<AioFile> AioFile::create(const std::string &dir, const std::string &name,
                                         uint64_t bytes, const AioOptions &options) {
  if (options.blockSize == 0 || options.blockSize % kAlign != 0)
    throw IoError(dir + ": aio.block_size " + std::to_string(options.blockSize) +
                  " must be a positive multiple of " + std::to_string(kAlign) + " bytes");
  if (options.blockSize > (uint64_t(1) << 30))
    throw IoError(dir + ": aio.block_size " + std::to_string(options.blockSize) +
                  " is over 1 GiB, the largest request dsrt sends");
  if (options.queueDepth < 1 || options.queueDepth > 4096)
    throw IoError(dir + ": aio.queue_depth " + std::to_string(options.queueDepth) +
                  " must be between 1 and 4096");
  if (options.engine != "auto" && options.engine != "io_uring" && options.engine != "sync")
    throw IoError(dir + ": unknown I/O engine '" + options.engine +
                  "' (auto, io_uring or sync)");
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    throw IoError(dir + ": the nvme_path folder does not exist (" + sysError(errno) +
                  "); create it, or point nvme_path at a folder on the disk to use");
  if (!S_ISDIR(st.st_mode))
    throw IoError(dir + ": nvme_path is not a folder");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw IoError(dir + ": dsrt cannot write in the nvme_path folder (" + sysError(errno) + ")");
  const uint64_t size = alignUp(std::max<uint64_t>(bytes, 1));
  struct statvfs vfs;
  if (::statvfs(dir.c_str(), &vfs) == 0) {
    uint64_t avail = uint64_t(vfs.f_bavail) * uint64_t(vfs.f_frsize);
    if (avail < size)
      throw IoError(dir + ": needs " + std::to_string(size) + " bytes for the NVMe tier, the " +
                    "file system has " + std::to_string(avail) + " free");
  }
  std::unique_ptr<AioFile> f(new AioFile());
  f->path_ = dir + "/" + name;
  f->size_ = size;
  f->options_ = options;
  f->fd_ = ::open(f->path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (f->fd_ < 0)
    throw IoError(f->path_ + ": cannot create the NVMe tier's file (" + sysError(errno) +
                  (errno == EEXIST ? "; dsrt never writes over a file it did not create" : "") +
                  ")");
  // From here on the name is ours: remove it on any failure, and once the
  // bytes are reserved.
  auto unlinkOnError = [&](const std::string &message) {
    ::unlink(f->path_.c_str());
    throw IoError(message);
  };
  bool direct = ::fcntl(f->fd_, F_SETFL, ::fcntl(f->fd_, F_GETFL) | O_DIRECT) == 0;
  int r = ::fallocate(f->fd_, 0, 0, off_t(size));
  if (r != 0 && (errno == EOPNOTSUPP || errno == ENOSYS))
    r = ::posix_fallocate(f->fd_, 0, off_t(size)) == 0 ? 0 : -1;
  if (r != 0)
    unlinkOnError(f->path_ + ": cannot reserve " + std::to_string(size) +
                  " bytes for the NVMe tier (" + sysError(errno) + ")");
  ::unlink(f->path_.c_str());

  bool uring = false;
  if (options.engine != "sync") {
    auto ring = std::make_unique<Ring>();
    int e = io_uring_queue_init(unsigned(options.queueDepth), &ring->ring, 0);
    if (e == 0) {
      ring->live = true;
      f->ring_ = std::move(ring);
      uring = true;
    } else {
      if (options.engine == "io_uring")
        throw IoError(f->path_ + ": io_uring is not available here (" + sysError(-e) +
                      "); use the sync engine");
    }
  }
  f->mode_ = uring ? (direct ? AioMode::Uring : AioMode::UringBuffered)
                   : (direct ? AioMode::Sync : AioMode::SyncBuffered);
  return f;
}

AioFile::~AioFile() {
  // The kernel may still be writing into the callers' buffers: wait for
  // every request before they go away.
  try {
    while (!inFlight_.empty()) {
      submitQueued();
      reapOne();
    }
  } catch (...) {
  }
  ring_.reset();
  if (fd_ >= 0)
    ::close(fd_);
}

AioFile::Ticket AioFile::read(void *buf, uint64_t offset, uint64_t bytes) {
  return start(buf, offset, bytes, false);
}
AioFile::Ticket AioFile::write(const void *buf, uint64_t offset, uint64_t bytes) {
  return start(const_cast<void *>(buf), offset, bytes, true);
}

AioFile::Ticket AioFile::start(void *buf, uint64_t offset, uint64_t bytes, bool write) {
  const char *what = write ? "write" : "read";
  if (reinterpret_cast<uintptr_t>(buf) % kAlign || offset % kAlign || bytes % kAlign)
    throw IoError(path_ + ": " + what + " of " + std::to_string(bytes) + " bytes at " +
                  std::to_string(offset) + " is not aligned to " + std::to_string(kAlign) +
                  " bytes (buffer, offset and length must be)");
  if (offset > size_ || bytes > size_ - offset)
    throw IoError(path_ + ": " + what + " of " + std::to_string(bytes) + " bytes at " +
                  std::to_string(offset) + " runs past the tier's " + std::to_string(size_) +
                  " bytes");
  Ticket t = next_++;
  int parts = 0;
  for (uint64_t done = 0; done < bytes; done += options_.blockSize)
    ++parts;
  pending_[t] = parts;
  for (uint64_t done = 0; done < bytes; done += options_.blockSize) {
    uint64_t n = std::min(options_.blockSize, bytes - done);
    submitChunk({t, static_cast<char *>(buf) + done, offset + done, n, write});
  }
  if (parts == 0)
    pending_.erase(t);
  submitQueued(); // the request runs while the caller computes
  return t;
}

void AioFile::submitChunk(const Chunk &c) {
  ++chunks_;
  if (!ring_) {
    runSync(c);
    done(c.ticket);
    return;
  }
  while (int(inFlight_.size()) >= options_.queueDepth) {
    submitQueued();
    reapOne();
  }
  io_uring_sqe *sqe = io_uring_get_sqe(&ring_->ring);
  while (!sqe) {
    submitQueued();
    reapOne();
    sqe = io_uring_get_sqe(&ring_->ring);
  }
  enqueue(sqe, c);
  if (options_.singleSubmit)
    submitQueued();
}

void AioFile::enqueue(void *entry, const Chunk &c) {
  auto *sqe = static_cast<io_uring_sqe *>(entry);
  uint64_t id = nextChunk_++;
  if (c.write)
    io_uring_prep_write(sqe, fd_, c.buf, unsigned(c.bytes), c.offset);
  else
    io_uring_prep_read(sqe, fd_, c.buf, unsigned(c.bytes), c.offset);
  io_uring_sqe_set_data64(sqe, id);
  inFlight_.emplace(id, c);
  ++queued_;
}

void AioFile::submitQueued() {
  if (!ring_ || queued_ == 0)
    return;
  int r = io_uring_submit(&ring_->ring);
  if (r < 0)
    throw IoError(path_ + ": submitting " + std::to_string(queued_) + " I/O requests failed (" +
                  sysError(-r) + ")");
  queued_ = 0;
}

void AioFile::reapOne() {
  io_uring_cqe *cqe = nullptr;
  int r;
  do
    r = io_uring_wait_cqe(&ring_->ring, &cqe);
  while (r == -EINTR);
  if (r < 0)
    throw IoError(path_ + ": waiting for I/O failed (" + sysError(-r) + ")");
  uint64_t id = io_uring_cqe_get_data64(cqe);
  int res = cqe->res;
  io_uring_cqe_seen(&ring_->ring, cqe);
  auto it = inFlight_.find(id);
  if (it == inFlight_.end())
    return;
  Chunk c = it->second;
  inFlight_.erase(it);
  if (res < 0 || (res == 0 && c.bytes > 0)) {
    if (error_.empty())
      error_ = describe(c, res < 0 ? -res : EIO);
    done(c.ticket);
    return;
  }
  (c.write ? bytesWritten_ : bytesRead_) += uint64_t(res);
  if (uint64_t(res) < c.bytes) { // a short transfer: the rest again
    Chunk rest{c.ticket, c.buf + res, c.offset + uint64_t(res), c.bytes - uint64_t(res), c.write};
    io_uring_sqe *sqe = io_uring_get_sqe(&ring_->ring);
    if (!sqe) {
      submitQueued();
      sqe = io_uring_get_sqe(&ring_->ring);
    }
    if (!sqe) {
      runSync(rest);
      done(c.ticket);
      return;
    }
    enqueue(sqe, rest);
    submitQueued();
    return;
  }
  done(c.ticket);
}

void AioFile::runSync(const Chunk &c) {
  uint64_t done = 0;
  while (done < c.bytes) {
    ssize_t r = c.write ? ::pwrite(fd_, c.buf + done, c.bytes - done, off_t(c.offset + done))
                        : ::pread(fd_, c.buf + done, c.bytes - done, off_t(c.offset + done));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      if (error_.empty())
        error_ = describe(c, r < 0 ? errno : EIO);
      return;
    }
    done += uint64_t(r);
  }
  (c.write ? bytesWritten_ : bytesRead_) += done;
}

void AioFile::done(Ticket t) {
  auto it = pending_.find(t);
  if (it != pending_.end() && --it->second == 0)
    it->second = 0; // complete; wait() erases it
}

std::string AioFile::describe(const Chunk &c, int err) const {
  return path_ + ": " + (c.write ? "writing " : "reading ") + std::to_string(c.bytes) +
         " bytes at offset " + std::to_string(c.offset) + " of the NVMe tier failed (" +
         sysError(err) + ")";
}

void AioFile::wait(Ticket t) {
  auto it = pending_.find(t);
  if (it == pending_.end())
    throw IoError(path_ + ": no I/O request " + std::to_string(t) + " to wait for");
  while (it->second > 0) {
    submitQueued();
    reapOne();
    it = pending_.find(t);
  }
  pending_.erase(it);
  throwPending();
}

void AioFile::drain() {
  while (!inFlight_.empty()) {
    submitQueued();
    reapOne();
  }
  for (auto it = pending_.begin(); it != pending_.end();)
    it = it->second == 0 ? pending_.erase(it) : std::next(it);
  throwPending();
}

void AioFile::throwPending() {
  if (error_.empty())
    return;
  // Nothing may still write into a buffer the caller frees on the error.
  while (!inFlight_.empty()) {
    submitQueued();
    reapOne();
  }
  std::string e = error_;
  error_.clear();
  throw IoError(e);
}

} // namespace dsrt::io
