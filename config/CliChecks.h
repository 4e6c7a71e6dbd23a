//===- CliChecks.h - range checks of command-line numbers -------*- C++ -*-===//
//
// CLI11 validators that read a flag's text in the type it will be stored
// in, before CLI11 converts it: CLI11 2.1 saturates an integer that
// overflows (--steps 99999999999999999999 became INT64_MAX), lets an int64
// flag take "1e3" or a uint64 one "-1", and CLI::PositiveNumber prints a
// 309-digit range for "--dp 0". Each check says what the flag needs in
// words ("must be an integer >= 1", "... between 1 and 65536").
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_CONFIG_CLICHECKS_H
#define DSRT_CONFIG_CLICHECKS_H

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace dsrt::cli {

/// An integer in [lo, hi], parsed as T (int64_t or uint64_t) from the whole
/// text, decimal.
template <typename T>
CLI::Validator integer(T lo, T hi = std::numeric_limits<T>::max()) {
  std::string need = hi == std::numeric_limits<T>::max()
                         ? "an integer >= " + std::to_string(lo)
                         : "an integer between " + std::to_string(lo) + " and " +
                               std::to_string(hi);
  return CLI::Validator(
      [lo, hi, need](std::string &text) -> std::string {
        T value{};
        const char *end = text.data() + text.size();
        auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (ec == std::errc::result_out_of_range)
          return "'" + text + "' is out of range: must be " + need;
        if (ec != std::errc() || ptr != end || text.empty())
          return "'" + text + "' is not an integer: must be " + need;
        if (value < lo || value > hi)
          return text + " is out of range: must be " + need;
        return {};
      },
      need);
}

/// A finite number in (0, hi]: seconds and the like.
inline CLI::Validator positiveSeconds(double hi) {
  std::string need = "a number of seconds in (0, " + std::to_string(int64_t(hi)) + "]";
  return CLI::Validator(
      [hi, need](std::string &text) -> std::string {
        std::size_t used = 0;
        double value = 0;
        try {
          value = std::stod(text, &used);
        } catch (const std::out_of_range &) {
          return text + " is out of range: must be " + need;
        } catch (const std::exception &) {
          return "'" + text + "' is not a number: must be " + need;
        }
        if (used != text.size())
          return "'" + text + "' is not a number: must be " + need;
        if (!(value > 0 && value <= hi) || !std::isfinite(value))
          return text + " is out of range: must be " + need;
        return {};
      },
      need);
}

/// A path or name that must not be empty: `--resume ""` restarted from step
/// 1 and `--save-dir ""` saved nothing, each without a word.
inline CLI::Validator nonEmpty() {
  return CLI::Validator(
      [](std::string &text) -> std::string {
        return text.empty() ? "an empty value names nothing: give one, or leave the option out"
                            : std::string();
      },
      "NONEMPTY");
}

} // namespace dsrt::cli

#endif // DSRT_CONFIG_CLICHECKS_H
