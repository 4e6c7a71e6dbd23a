//===- Metrics.h - per-step metrics of a training run -----------*- C++ -*-===//
//
// A run writes its per-step metrics to <run dir>/metrics.csv with the header
// `step,loss,lr,grad_norm,step_time_s` (and any extra columns, e.g. a
// data-parallel run's communication, an fp16 run's loss scale), one row per optimizer step, flushed
// as it is written so a crash or a `tail -f` sees every finished step.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_IO_METRICS_H
#define DSRT_IO_METRICS_H

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dsrt::io {

/// Appends rows to <runDir>/metrics.csv, which it creates with the header.
class MetricsWriter {
public:
  /// `extraColumns` follow the five standard ones. Throws IoError if the
  /// file cannot be created or already has content.
  explicit MetricsWriter(const std::string &runDir,
                         const std::vector<std::string> &extraColumns = {});

  /// One row; NaN and infinities are written as nan, inf, -inf. `extra`
  /// has one value per extra column (integers up to 2^53 print as such; an
  /// empty one leaves its cell empty: eval_loss on a step without an
  /// evaluation).
  /// Throws IoError when the row cannot be written (a full disk), leaving
  /// the file with its complete rows only.
  void write(int64_t step, double loss, double lr, double gradNorm,
             double stepTimeS, const std::vector<std::optional<double>> &extra = {});

  const std::string &path() const { return path_; }

private:
  struct Closer {
    void operator()(std::FILE *f) const { std::fclose(f); }
  };
  void line(const std::string &text);

  std::string path_;
  size_t extraColumns_ = 0;
  std::unique_ptr<std::FILE, Closer> file_;
};

/// DeepSpeed's csv_monitor (edaa722 deepspeed/monitor/csv_monitor.py): one
/// file per event tag in a folder, `<tag with '/' and ' ' -> '_'>.csv`,
/// whose rows are `step,<value>` under the header `step,<the tag's last
/// '/' component>` (Python's csv module: CRLF line ends). DeepSpeed's step
/// is the samples trained so far (engine.global_samples).
class CsvMonitor {
public:
  /// Creates `dir` (and its parents) and one file per tag with its header.
  /// With `append` (a resumed run), a file that exists must start with the
  /// same header and gets the new rows after its own; otherwise a file
  /// with content is an IoError: dsrt never mixes two runs' rows.
  CsvMonitor(const std::string &dir, const std::vector<std::string> &tags, bool append);

  /// DeepSpeed's write_events: the event's row in its tag's file, the
  /// value printed as metrics.csv prints it (%.9g, or %.17g with `exact`).
  /// Throws IoError when the row cannot be written (the file keeps its
  /// complete rows).
  void write(const std::string &tag, int64_t samples, double value, bool exact = false);

  /// The file name DeepSpeed gives a tag's events.
  static std::string fileName(const std::string &tag);
  const std::string &dir() const { return dir_; }

private:
  struct Closer {
    void operator()(std::FILE *f) const { std::fclose(f); }
  };
  struct File {
    std::string path;
    std::unique_ptr<std::FILE, Closer> file;
  };
  std::string dir_;
  std::vector<std::pair<std::string, File>> files_;
};

} // namespace dsrt::io

#endif // DSRT_IO_METRICS_H
