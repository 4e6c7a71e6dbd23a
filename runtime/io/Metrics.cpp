//===- Metrics.cpp - per-step metrics of a training run -------------------===//
#include "runtime/io/Metrics.h"

#include "io/FileUtil.h"

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

/// Appends a line and flushes it. A line that did not fit is taken back
/// whole: the file keeps only complete rows (what a CSV reader expects),
/// never half of one.
void appendLine(std::FILE *file, const std::string &path, const std::string &text) {
  long before = std::ftell(file);
  if (std::fputs(text.c_str(), file) < 0 || std::fflush(file) != 0) {
    int error = errno;
    std::clearerr(file);
    if (before >= 0 && ::ftruncate(::fileno(file), before) == 0)
      std::fseek(file, before, SEEK_SET);
    throw IoError(path + ": cannot write: " + std::strerror(error));
  }
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
                          double stepTimeS, const std::vector<std::optional<double>> &extra) {
  if (extra.size() != extraColumns_)
    throw IoError(path_ + ": a row with " + std::to_string(extra.size()) +
                  " extra values for " + std::to_string(extraColumns_) + " extra columns");
  std::string row = std::to_string(step) + "," + formatValue(loss, "%.9g") +
                    "," + formatValue(lr, "%.9g") + "," +
                    formatValue(gradNorm, "%.9g") + "," +
                    formatValue(stepTimeS, "%.6f");
  // %.17g: integers (counts up to 2^53) print as integers, other values
  // round-trip.
  for (const std::optional<double> &v : extra)
    row += "," + (v ? formatValue(*v, "%.17g") : std::string());
  line(row + "\n");
}

void MetricsWriter::line(const std::string &text) { appendLine(file_.get(), path_, text); }

CsvMonitor::CsvMonitor(const std::string &dir, const std::vector<std::string> &tags,
                       bool append)
    : dir_(dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw IoError(dir + ": cannot create the csv_monitor folder: " + ec.message());
  for (const std::string &tag : tags) {
    File f;
    f.path = (fs::path(dir) / fileName(tag)).string();
    size_t slash = tag.rfind('/');
    std::string header = "step," + (slash == std::string::npos ? tag : tag.substr(slash + 1));
    bool has = fs::exists(f.path, ec) && fs::file_size(f.path, ec) > 0;
    if (has && !append)
      throw IoError(f.path + ": already has rows of an earlier run; dsrt never mixes two "
                             "runs' rows in one file: set csv_monitor.job_name or "
                             "output_path to a new folder (or move the old one)");
    if (has) {
      std::FILE *in = std::fopen(f.path.c_str(), "r");
      char first[512] = {0};
      bool ok = in && std::fgets(first, sizeof first, in);
      if (in)
        std::fclose(in);
      std::string line = ok ? first : "";
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r'))
        line.pop_back();
      if (line != header)
        throw IoError(f.path + ": starts with '" + line + "', not '" + header +
                      "': not the csv_monitor file this run continues");
    }
    f.file.reset(std::fopen(f.path.c_str(), has ? "a" : "w"));
    if (!f.file)
      throw IoError(f.path + ": cannot create: " + std::strerror(errno));
    // At the end, so that a row taken back truncates to it (not to 0).
    std::fseek(f.file.get(), 0, SEEK_END);
    if (!has)
      appendLine(f.file.get(), f.path, header + "\r\n");
    files_.emplace_back(tag, std::move(f));
  }
}

std::string CsvMonitor::fileName(const std::string &tag) {
  std::string name = tag;
  for (char &c : name)
    if (c == '/' || c == ' ')
      c = '_';
  return name + ".csv";
}

void CsvMonitor::write(const std::string &tag, int64_t samples, double value, bool exact) {
  for (auto &[t, f] : files_)
    if (t == tag) {
      appendLine(f.file.get(), f.path,
                 std::to_string(samples) + "," +
                     formatValue(value, exact ? "%.17g" : "%.9g") + "\r\n");
      return;
    }
  throw IoError(dir_ + ": no csv_monitor file for the event " + tag);
}

} // namespace dsrt::io
