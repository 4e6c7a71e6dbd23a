//===- Metrics.cpp - per-step metrics of a training run -------------------===//
#include "runtime/io/Metrics.h"

#include "runtime/io/FileUtil.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <unistd.h>

namespace dsrt::io {
namespace {

namespace fs = std::filesystem;

constexpr const char *kMetricsFile = "metrics.csv";

/// %.9g keeps a float32 loss exact; nan keeps no sign so tools parse it.
std::string formatValue(double v, const char *format) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

/// True if `dir` holds a metrics.csv with something in it.
bool hasMetrics(const fs::path &dir) {
  std::error_code ec;
  fs::path file = dir / kMetricsFile;
  return fs::exists(file, ec) && fs::file_size(file, ec) > 0;
}

} // namespace

MetricsWriter::MetricsWriter(const std::string &runDir,
                             const std::vector<std::string> &extraColumns)
    : path_((fs::path(runDir) / kMetricsFile).string()),
      extraColumns_(extraColumns.size()) {
  if (hasMetrics(runDir))
    throw IoError(path_ + ": already has content; refusing to overwrite the "
                          "metrics of an earlier run");
  file_.reset(std::fopen(path_.c_str(), "w"));
  if (!file_)
    throw IoError(path_ + ": cannot create: " + std::strerror(errno));
  std::string header = "step,loss,lr,grad_norm,step_time_s";
  for (const std::string &c : extraColumns)
    header += "," + c;
  line(header + "\n");
}

void MetricsWriter::write(int64_t step, double loss, double lr, double gradNorm,
                          double stepTimeS, const std::vector<double> &extra) {
  if (extra.size() != extraColumns_)
    throw IoError(path_ + ": a row with " + std::to_string(extra.size()) +
                  " extra values for " + std::to_string(extraColumns_) + " extra columns");
  std::string row = std::to_string(step) + "," + formatValue(loss, "%.9g") +
                    "," + formatValue(lr, "%.9g") + "," +
                    formatValue(gradNorm, "%.9g") + "," +
                    formatValue(stepTimeS, "%.6f");
  // %.17g: integers (counts up to 2^53) print as integers, other values
  // round-trip.
  for (double v : extra)
    row += "," + formatValue(v, "%.17g");
  line(row + "\n");
}

void MetricsWriter::line(const std::string &text) {
  long before = std::ftell(file_.get());
  if (std::fputs(text.c_str(), file_.get()) < 0 || std::fflush(file_.get()) != 0) {
    int error = errno;
    // A line that did not fit is taken back whole: the file keeps only
    // complete rows (what a CSV reader expects), never half of one.
    std::clearerr(file_.get());
    if (before >= 0 && ::ftruncate(::fileno(file_.get()), before) == 0)
      std::fseek(file_.get(), before, SEEK_SET);
    throw IoError(path_ + ": cannot write: " + std::strerror(error));
  }
}

} // namespace dsrt::io
