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
  /// has one value per extra column (integers up to 2^53 print as such).
  /// Throws IoError when the row cannot be written (a full disk), leaving
  /// the file with its complete rows only.
  void write(int64_t step, double loss, double lr, double gradNorm,
             double stepTimeS, const std::vector<double> &extra = {});

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

} // namespace dsrt::io

#endif // DSRT_IO_METRICS_H
