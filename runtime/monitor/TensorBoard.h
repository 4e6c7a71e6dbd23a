//===- TensorBoard.h - DeepSpeed's tensorboard monitor ----------*- C++ -*-===//
//
// DeepSpeed's tensorboard monitor (edaa722 deepspeed/monitor/tensorboard.py)
// hands its events to torch.utils.tensorboard's SummaryWriter, which writes
// TensorFlow event files: <log_dir>/events.out.tfevents.<time>.<host>.<pid>
// .<n>, a sequence of TFRecords
//
//   uint64 length (little endian), uint32 masked_crc32c(length bytes),
//   byte data[length], uint32 masked_crc32c(data)
//
// each holding a serialized tensorflow.Event: first one with file_version
// "brain.Event:2", then one per scalar with wall_time, step and a Summary of
// one value (tag, simple_value). masked_crc32c(x) = ((c >> 15) | (c << 17))
// + 0xa282ead8 over CRC-32C (Castagnoli), as TFRecord specifies.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_MONITOR_TENSORBOARD_H
#define DSRT_MONITOR_TENSORBOARD_H

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace dsrt::monitor {

/// CRC-32C (Castagnoli, reflected polynomial 0x82f63b78) of `n` bytes.
uint32_t crc32c(const void *data, size_t n);
/// TFRecord's masked CRC: ((c >> 15) | (c << 17)) + 0xa282ead8.
uint32_t maskedCrc32c(const void *data, size_t n);

class EventWriter {
public:
  /// Creates `dir` (and its parents) and a new event file in it, named as
  /// torch's SummaryWriter names them, with the file_version event. Never
  /// opens an existing file: throws io::IoError if it cannot make a new one.
  explicit EventWriter(const std::string &dir);
  ~EventWriter();

  /// One scalar event (DeepSpeed's write_events: add_scalar(tag, value,
  /// step)), flushed. Throws io::IoError when it cannot be written; the
  /// file keeps its complete records.
  void scalar(const std::string &tag, int64_t step, float value);

  const std::string &path() const { return path_; }

private:
  void record(const std::string &data);
  struct Closer {
    void operator()(std::FILE *f) const { std::fclose(f); }
  };
  std::string path_;
  std::unique_ptr<std::FILE, Closer> file_;
};

} // namespace dsrt::monitor

#endif // DSRT_MONITOR_TENSORBOARD_H
