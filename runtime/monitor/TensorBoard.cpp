//===- TensorBoard.cpp - TensorFlow event files ---------------------------===//
#include "runtime/monitor/TensorBoard.h"

#include "io/FileUtil.h"

#include "event.pb.h"

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <unistd.h>

namespace dsrt::monitor {
namespace {
namespace fs = std::filesystem;

std::array<uint32_t, 256> crcTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c >> 1) ^ (c & 1 ? 0x82f63b78u : 0u);
    t[i] = c;
  }
  return t;
}

double now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void putLe(std::string &out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(char((v >> (8 * i)) & 0xff));
}
} // namespace

uint32_t crc32c(const void *data, size_t n) {
  static const std::array<uint32_t, 256> table = crcTable();
  const auto *p = static_cast<const uint8_t *>(data);
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i)
    c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t maskedCrc32c(const void *data, size_t n) {
  uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

EventWriter::EventWriter(const std::string &dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw io::IoError(dir + ": cannot create the tensorboard folder: " + ec.message());
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  // torch.utils.tensorboard's name: events.out.tfevents.<int(time)>.<host>
  // .<pid>.<n>; O_EXCL, so a name taken (the same second, pid and n) is
  // never opened: the next n is tried.
  const long stamp = long(now());
  for (int n = 0;; ++n) {
    path_ = (fs::path(dir) / ("events.out.tfevents." + std::to_string(stamp) + "." + host + "." +
                              std::to_string(::getpid()) + "." + std::to_string(n)))
                .string();
    int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      file_.reset(::fdopen(fd, "w"));
      if (!file_) {
        ::close(fd);
        throw io::IoError(path_ + ": cannot open: " + std::strerror(errno));
      }
      break;
    }
    if (errno != EEXIST || n > 1000)
      throw io::IoError(path_ + ": cannot create: " + std::strerror(errno));
  }
  tensorboard::Event e;
  e.set_wall_time(now());
  e.set_file_version("brain.Event:2");
  record(e.SerializeAsString());
}

EventWriter::~EventWriter() = default;

void EventWriter::scalar(const std::string &tag, int64_t step, float value) {
  tensorboard::Event e;
  e.set_wall_time(now());
  e.set_step(step);
  tensorboard::SummaryValue *v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(value);
  record(e.SerializeAsString());
}

void EventWriter::record(const std::string &data) {
  std::string rec;
  putLe(rec, data.size(), 8);
  putLe(rec, maskedCrc32c(rec.data(), 8), 4);
  rec += data;
  putLe(rec, maskedCrc32c(data.data(), data.size()), 4);
  long before = std::ftell(file_.get());
  if (std::fwrite(rec.data(), 1, rec.size(), file_.get()) != rec.size() ||
      std::fflush(file_.get()) != 0) {
    int error = errno;
    // A record that did not fit is taken back whole: a reader stops at a
    // short record, and the next one would follow garbage.
    std::clearerr(file_.get());
    if (before >= 0 && ::ftruncate(::fileno(file_.get()), before) == 0)
      std::fseek(file_.get(), before, SEEK_SET);
    throw io::IoError(path_ + ": cannot write: " + std::strerror(error));
  }
}

} // namespace dsrt::monitor
