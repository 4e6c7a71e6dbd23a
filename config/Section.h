//===- Section.h - reading one ds_config object, key by key (internal) ----===//
//
// Shared by the section readers (DsConfig*.cpp): a JSON object with its
// path that reads values by key with type and range checks, and rejects
// unknown keys with the nearest known one.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_CONFIG_SECTION_H
#define DSRT_CONFIG_SECTION_H

#include "config/DsConfig.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace dsrt::config::detail {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

std::string lower(const std::string &s);
/// " (did you mean 'K'?)" for the known key nearest `key`, or "".
std::string didYouMean(const std::string &key, const std::vector<std::string> &known);
std::string join(const std::vector<std::string> &items);
/// JSON as dsc reads every file it is given: comments allowed, a duplicate
/// key, a syntax error or an out-of-range number a ConfigError naming
/// `source`, its line and column or its key path.
json parseStrict(const std::string &text, const std::string &source);
/// A value as an error shows it: its type and (shortened) JSON.
std::string shown(const json &v);
/// Shortest text that reads back as `v` ("0.1", not "0.10000000000000001").
std::string formatNumber(double v);

/// One JSON object of the config with its path, reading values by key.
class Section {
public:
  Section(std::string source, const json &obj, std::string path)
      : source_(std::move(source)), obj_(obj), path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string &message) const {
    throw ConfigError(source_ + ": " + message);
  }

  std::string path(const std::string &key) const {
    return path_.empty() ? key : path_ + "." + key;
  }

  bool has(const std::string &key) const { return obj_.contains(key); }

  std::optional<std::string> firstKey() const {
    if (obj_.empty())
      return std::nullopt;
    return obj_.begin().key();
  }

  /// Rejects keys not in `known`. `explain` may turn a key into a more
  /// specific message (e.g. one that belongs to another optimizer).
  template <typename Explain>
  void checkKeys(const std::vector<std::string> &known, Explain explain) const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it) {
      if (std::find(known.begin(), known.end(), it.key()) != known.end())
        continue;
      std::string special = explain(it.key());
      if (!special.empty())
        fail(special);
      fail("unknown key '" + path(it.key()) + "'" +
           didYouMean(it.key(), known));
    }
  }
  void checkKeys(const std::vector<std::string> &known) const {
    checkKeys(known, [](const std::string &) { return std::string(); });
  }

  Section object(const std::string &key) const {
    const json &v = obj_.at(key);
    if (!v.is_object())
      fail("'" + path(key) + "' must be an object, got " + shown(v));
    return Section(source_, v, path(key));
  }

  /// object(key), or an empty section when the key is absent.
  Section optionalObject(const std::string &key) const {
    static const json empty = json::object();
    return has(key) ? object(key) : Section(source_, empty, path(key));
  }

  /// A real number. dsrt trains in float32, so a value beyond float32's
  /// range would silently become infinite there.
  std::optional<double> number(const std::string &key) const {
    if (!has(key))
      return std::nullopt;
    const json &v = obj_.at(key);
    if (!v.is_number())
      fail("'" + path(key) + "' must be a number, got " + shown(v));
    double d = v.get<double>();
    if (!(std::fabs(d) <= FLT_MAX))
      fail("'" + path(key) + "' must lie within float32's range (+-" +
           formatNumber(FLT_MAX) + ": dsrt trains in float32), got " +
           formatNumber(d));
    return d;
  }

  /// An integer in [lo, hi], checked in the type the JSON holds, so that
  /// 2^64 - 1 or 1e30 is out of range rather than wrapped or clamped. A
  /// float with an integral value is taken too, as pydantic's lax mode
  /// takes it for DeepSpeed's int fields (2.0, 1e3, 5e8); `integralFloats`
  /// false refuses it.
  std::optional<int64_t> count(const std::string &key, int64_t lo, int64_t hi,
                               bool integralFloats = true) const {
    if (!has(key))
      return std::nullopt;
    const json &v = obj_.at(key);
    auto outOfRange = [&](const std::string &got) {
      fail("'" + path(key) + "' must be between " + std::to_string(lo) +
           " and " + std::to_string(hi) + ", got " + got);
    };
    auto notInteger = [&] {
      fail("'" + path(key) + "' must be an integer, got " + shown(v));
    };
    int64_t value = 0;
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        outOfRange(std::to_string(u));
      value = static_cast<int64_t>(u);
    } else if (v.is_number_integer()) {
      value = v.get<int64_t>();
    } else if (v.is_number_float()) {
      double d = v.get<double>();
      if (d != std::floor(d))
        notInteger();
      // [-2^63, 2^63): exactly the doubles that convert to int64_t. An
      // integral value outside the range is reported as such even where
      // floats are not taken: 99999999999999999999 parses as a float.
      if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
        outOfRange(formatNumber(d));
      value = static_cast<int64_t>(d);
      if (value >= lo && value <= hi && !integralFloats)
        notInteger();
    } else {
      notInteger();
    }
    if (value < lo || value > hi)
      outOfRange(std::to_string(value));
    return value;
  }

  std::optional<bool> boolean(const std::string &key) const {
    if (!has(key))
      return std::nullopt;
    const json &v = obj_.at(key);
    if (!v.is_boolean())
      fail("'" + path(key) + "' must be true or false, got " + shown(v));
    return v.get<bool>();
  }

  std::optional<std::string> string(const std::string &key) const {
    if (!has(key))
      return std::nullopt;
    const json &v = obj_.at(key);
    if (!v.is_string())
      fail("'" + path(key) + "' must be a string, got " + shown(v));
    return v.get<std::string>();
  }

  const json &raw(const std::string &key) const { return obj_.at(key); }

  /// Range checks of real numbers, named after the key.
  void atLeast(const std::string &key, double v, double lo) const {
    if (!(v >= lo))
      fail("'" + path(key) + "' must be >= " + formatNumber(lo) + ", got " +
           formatNumber(v));
  }

private:
  std::string source_;
  const json &obj_;
  std::string path_;
};

} // namespace dsrt::config::detail

#endif // DSRT_CONFIG_SECTION_H
