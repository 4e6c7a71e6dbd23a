//===- DsConfig.cpp - DeepSpeed ds_config.json parsing --------------------===//
//
// Strict reader for ds_config.json. Each section is read against a table of
// the keys it may hold, so an unknown key anywhere we interpret is reported
// with its full path and the nearest known key, and values are type- and
// range-checked where they are read. See DsConfig.h for the DeepSpeed rules.
//
//===----------------------------------------------------------------------===//
#include "runtime/config/DsConfig.h"

#include "runtime/io/JsonLimits.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <vector>

namespace dsrt::config {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

//===--- key suggestions --------------------------------------------------===//

std::string lower(const std::string &s) {
  std::string r = s;
  for (char &c : r)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

/// Optimal-string-alignment distance (Levenshtein plus adjacent swaps), so a
/// transposed pair like "lr" -> "rl" counts as one edit.
size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<std::vector<size_t>> d(a.size() + 1,
                                     std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] =
          std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

/// " (did you mean 'x'?)" for the closest candidate, ignoring case, within a
/// budget that grows with the key's length; "" when nothing is close.
std::string didYouMean(const std::string &key,
                       const std::vector<std::string> &candidates) {
  size_t budget = key.size() <= 3 ? 1 : key.size() <= 12 ? 2 : 3;
  std::string lk = lower(key), best;
  size_t bestDist = budget + 1;
  for (const std::string &c : candidates) {
    // Lengths further apart than the budget cannot be within it; skipping
    // them also keeps a crafted multi-megabyte key from costing a table of
    // its length x the candidate's.
    if (key.size() > c.size() + budget || c.size() > key.size() + budget)
      continue;
    size_t dist = editDistance(lk, lower(c));
    if (dist < bestDist) {
      bestDist = dist;
      best = c;
    }
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

std::string join(const std::vector<std::string> &items) {
  std::string r;
  for (const std::string &s : items)
    r += (r.empty() ? "" : ", ") + s;
  return r;
}

//===--- parsing with duplicate detection ---------------------------------===//

/// One open JSON container while parsing, to name the path of a duplicate.
struct Frame {
  bool isArray = false;
  std::vector<std::string> keys; // keys seen so far (objects)
  int64_t index = -1;            // current element (arrays)
};

std::string framePath(const std::vector<Frame> &frames, size_t upTo) {
  std::string path;
  for (size_t i = 0; i < upTo; ++i) {
    const Frame &f = frames[i];
    if (f.isArray)
      path += "[" + std::to_string(f.index) + "]";
    else if (!f.keys.empty())
      path += (path.empty() ? "" : ".") + f.keys.back();
  }
  return path;
}

/// The path of the value the parser is reading when it fails: the innermost
/// array has not counted that element yet.
std::string pendingPath(const std::vector<Frame> &frames) {
  if (frames.empty())
    return "";
  const Frame &top = frames.back();
  std::string path = framePath(frames, frames.size() - 1);
  if (top.isArray)
    return path + "[" + std::to_string(top.index + 1) + "]";
  if (top.keys.empty())
    return path;
  return path + (path.empty() ? "" : ".") + top.keys.back();
}

/// "LINE:COLUMN" of a byte offset (both 1-based), as editors count them.
std::string lineColumn(const std::string &text, size_t byte) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

/// nlohmann keeps the last of duplicate keys silently; DeepSpeed rejects them
/// (dict_raise_error_on_duplicate_keys), so a parser callback tracks the open
/// containers and throws on the second occurrence of a key.
json parseStrict(const std::string &text, const std::string &source) {
  // nlohmann recurses per level when it dumps, destroys or reports on a
  // value: bound the nesting before it sees the text.
  if (std::optional<io::JsonPosition> at =
          io::findExcessNesting(text, kMaxNesting, /*comments=*/true))
    throw ConfigError(source + ":" + std::to_string(at->line) + ":" +
                      std::to_string(at->column) +
                      ": JSON nested deeper than " +
                      std::to_string(kMaxNesting) +
                      " arrays and objects (the limit for a ds_config, whose "
                      "own keys nest 4 deep)");
  std::vector<Frame> frames;
  auto noteElement = [&frames] {
    if (!frames.empty() && frames.back().isArray)
      ++frames.back().index;
  };
  json::parser_callback_t callback = [&](int, json::parse_event_t event,
                                         json &parsed) {
    switch (event) {
    case json::parse_event_t::object_start:
    case json::parse_event_t::array_start:
      noteElement();
      frames.emplace_back();
      frames.back().isArray = event == json::parse_event_t::array_start;
      break;
    case json::parse_event_t::object_end:
    case json::parse_event_t::array_end:
      frames.pop_back();
      break;
    case json::parse_event_t::key: {
      std::string key = parsed.get<std::string>();
      Frame &top = frames.back();
      if (std::find(top.keys.begin(), top.keys.end(), key) != top.keys.end()) {
        std::string parent = framePath(frames, frames.size() - 1);
        throw ConfigError(source + ": duplicate key '" +
                          (parent.empty() ? key : parent + "." + key) + "'");
      }
      top.keys.push_back(key);
      break;
    }
    case json::parse_event_t::value:
      noteElement();
      break;
    }
    return true;
  };
  try {
    return json::parse(text, callback, /*allow_exceptions=*/true,
                       /*ignore_comments=*/true);
  } catch (const json::parse_error &e) {
    // e.byte is 1-based: the byte nlohmann stopped at.
    std::string position = lineColumn(text, e.byte == 0 ? 0 : e.byte - 1);
    // Keep nlohmann's description, without its own position prefix.
    std::string what = e.what();
    size_t at = what.find("column ");
    size_t colon = at == std::string::npos ? at : what.find(": ", at);
    std::string detail =
        colon == std::string::npos ? what : what.substr(colon + 2);
    throw ConfigError(source + ":" + position + ": JSON syntax error: " +
                      detail);
  } catch (const json::out_of_range &e) {
    // A number beyond double's range (1e400): nlohmann names only the
    // token, so the open containers give its key path.
    std::string what = e.what();
    size_t open = what.find('\''), close = what.rfind('\'');
    std::string token = open < close ? what.substr(open + 1, close - open - 1)
                                     : std::string("a number");
    std::string path = pendingPath(frames);
    throw ConfigError(source + ": " + (path.empty() ? "" : "'" + path + "': ") +
                      token + " is out of range (a number must fit in a "
                              "double)");
  } catch (const json::exception &e) {
    throw ConfigError(source + ": JSON error: " + e.what());
  }
}

//===--- typed access -----------------------------------------------------===//

std::string shown(const json &v) {
  std::string text = v.dump();
  if (text.size() > 40)
    text = text.substr(0, 37) + "...";
  return std::string(v.type_name()) + " " + text;
}

/// Shortest text that reads back as `v` ("0.1", not "0.10000000000000001").
std::string formatNumber(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

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
  /// 2^64 - 1 or 1e30 is out of range rather than wrapped or clamped. With
  /// `integralFloats`, a float with an integral value is taken too
  /// (DeepSpeed's sizes are often written 5e8).
  std::optional<int64_t> count(const std::string &key, int64_t lo, int64_t hi,
                               bool integralFloats = false) const {
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

//===--- mixed precision --------------------------------------------------===//

/// DeepSpeed's spellings of the three dtypes (config.py DtypeEnum, which
/// data_types.grad_accum_dtype goes through; case-sensitive there).
std::optional<Precision> dtypeFromDeepSpeedName(const std::string &name) {
  static const std::vector<std::pair<std::string, Precision>> names = {
      {"fp32", Precision::FP32},           {"float32", Precision::FP32},
      {"float", Precision::FP32},          {"torch.float32", Precision::FP32},
      {"bf16", Precision::BF16},           {"bfloat16", Precision::BF16},
      {"torch.bfloat16", Precision::BF16}, {"fp16", Precision::FP16},
      {"float16", Precision::FP16},        {"half", Precision::FP16},
      {"torch.float16", Precision::FP16},
  };
  for (const auto &[spelling, dtype] : names)
    if (name == spelling)
      return dtype;
  return std::nullopt;
}

const std::vector<std::string> kDtypeNames = {"fp32", "bf16", "fp16"};

/// A dtype-valued key whose DeepSpeed default is None: absent or null
/// leaves `field` unset. `caseInsensitive`: communication_data_type is
/// lower-cased by DeepSpeed and takes only the three short names.
void readDtype(const Section &section, const std::string &key,
               bool caseInsensitive, std::optional<Precision> &field) {
  if (!section.has(key) || section.raw(key).is_null())
    return;
  std::string name = *section.string(key);
  std::optional<Precision> dtype;
  if (caseInsensitive) {
    for (Precision p : {Precision::FP32, Precision::BF16, Precision::FP16})
      if (lower(name) == precisionName(p))
        dtype = p;
  } else {
    dtype = dtypeFromDeepSpeedName(name);
  }
  if (!dtype)
    section.fail("'" + section.path(key) + "' is \"" + name + "\"" +
                 didYouMean(name, kDtypeNames) +
                 "; supported: " + join(kDtypeNames));
  field = dtype;
}

/// A DeepSpeed boolean dsc does not honour: its default (false) is
/// accepted, true is an error giving `reason`.
void refuseTrue(const Section &section, const std::string &key,
                const std::string &reason) {
  if (section.boolean(key).value_or(false))
    section.fail("'" + section.path(key) + "' is not supported by dsc: " +
                 reason + "; remove it or set false");
}

/// "fp16" (DeepSpeedFP16Config). Every value is range-checked whether or
/// not fp16 is enabled: dsc --precision fp16 may enable it later.
void readFp16(const Section &top, Fp16Config &f, bool &enabled,
              std::vector<std::string> &notes) {
  Section fp16 = top.object("fp16");
  fp16.checkKeys({"enabled", "auto_cast", "loss_scale", "initial_scale_power",
                  "loss_scale_window", "hysteresis", "consecutive_hysteresis",
                  "min_loss_scale", "fp16_master_weights_and_grads"});
  enabled = fp16.boolean("enabled").value_or(false);
  f.autoCast = fp16.boolean("auto_cast").value_or(f.autoCast);
  if (fp16.has("auto_cast"))
    notes.push_back("'" + fp16.path("auto_cast") +
                    "' changes nothing in dsc: dsrt feeds the model's float inputs in "
                    "fp32 and the mixed-precision pass casts them where an fp16 op reads "
                    "them, with auto_cast true or false");
  f.lossScale = fp16.number("loss_scale").value_or(f.lossScale);
  fp16.atLeast("loss_scale", f.lossScale, 0);
  f.initialScalePower =
      fp16.count("initial_scale_power", kMinScalePower, kMaxScalePower)
          .value_or(f.initialScalePower);
  f.lossScaleWindow =
      fp16.count("loss_scale_window", 1, kMaxSteps).value_or(f.lossScaleWindow);
  f.hysteresis = fp16.count("hysteresis", 1, kMaxSteps).value_or(f.hysteresis);
  f.consecutiveHysteresis =
      fp16.boolean("consecutive_hysteresis").value_or(f.consecutiveHysteresis);
  f.minLossScale = fp16.count("min_loss_scale", 1, kMaxMinLossScale)
                       .value_or(f.minLossScale);
  refuseTrue(fp16, "fp16_master_weights_and_grads",
             "dsc keeps the master weights and gradients in fp32 (DeepSpeed "
             "keeps them in fp16 only with ZeRO-Offload and DeepSpeedCPUAdam)");
}

/// "bf16" or its older name "bfloat16" (DeepSpeedBF16Config).
void readBf16(const Section &top, const std::string &name, Bf16Config &b,
              bool &enabled, std::vector<std::string> &notes) {
  Section bf16 = top.object(name);
  bf16.checkKeys({"enabled", "immediate_grad_update", "check_grad_overflow",
                  "bf16_master_weights_and_grads", "bf16_optimizer_states"});
  enabled = bf16.boolean("enabled").value_or(false);
  b.immediateGradUpdate =
      bf16.boolean("immediate_grad_update").value_or(b.immediateGradUpdate);
  b.checkGradOverflow =
      bf16.boolean("check_grad_overflow").value_or(b.checkGradOverflow);
  if (bf16.has("immediate_grad_update"))
    notes.push_back("'" + bf16.path("immediate_grad_update") +
                    "' changes nothing in dsc: every micro-batch's gradients are added to "
                    "the fp32 accumulators as the step's plan orders them (the memory plan "
                    "decides when the bf16 gradients are freed)");
  if (bf16.has("check_grad_overflow"))
    notes.push_back("'" + bf16.path("check_grad_overflow") +
                    "' changes nothing in dsc: a bf16 run always checks the gradient norm "
                    "and stops at the first non-finite one, keeping the last finite weights "
                    "(bf16 has no loss scale to lower, so an overflow means divergence; "
                    "DeepSpeed >= 0.19.3 skips the step instead)");
  refuseTrue(bf16, "bf16_master_weights_and_grads",
             "dsc keeps the master weights and gradients in fp32");
  refuseTrue(bf16, "bf16_optimizer_states",
             "dsc keeps the optimizer states in fp32");
}

/// "data_types": grad_accum_dtype. param_dtype and buffer_dtype (FSDP's
/// MixedPrecisionPolicy) are accepted only as their default, null.
void readDataTypes(const Section &top, PrecisionConfig &p) {
  Section types = top.object("data_types");
  types.checkKeys({"grad_accum_dtype", "param_dtype", "buffer_dtype"});
  readDtype(types, "grad_accum_dtype", /*caseInsensitive=*/false,
            p.gradAccumDtypeSetting);
  for (const char *key : {"param_dtype", "buffer_dtype"})
    if (types.has(key) && !types.raw(key).is_null())
      types.fail("'" + types.path(key) +
                 "' is not supported by dsc: parameters compute in the "
                 "precision bf16/fp16 enables and buffers keep the model's "
                 "dtype; remove it or set null");
}

/// DeepSpeed's torch_autocast wraps the forward in torch.autocast; dsc has
/// no such per-module mode (bf16/fp16 are its mixed precision), so a section
/// that enables it is an error; one that asks for nothing is accepted.
void readTorchAutocast(const Section &top) {
  Section section = top.object("torch_autocast");
  section.checkKeys({"enabled", "dtype", "lower_precision_safe_modules"});
  if (section.boolean("enabled").value_or(false))
    section.fail("'" + section.path("enabled") +
                 "' is true, but dsc has no torch.autocast mode; use \"bf16\": "
                 "{\"enabled\": true} (or fp16) for mixed precision, and "
                 "remove the section or set \"enabled\": false");
}

void readPrecision(const Section &top, PrecisionConfig &p, std::vector<std::string> &notes) {
  if (top.has("bf16") && top.has("bfloat16"))
    top.fail("'bf16' and 'bfloat16' are the same section (DeepSpeed's older "
             "name): give only one");
  bool fp16 = false, bf16 = false;
  if (top.has("fp16"))
    readFp16(top, p.fp16, fp16, notes);
  std::string bf16Name = top.has("bfloat16") ? "bfloat16" : "bf16";
  if (top.has(bf16Name))
    readBf16(top, bf16Name, p.bf16, bf16, notes);
  // config.py: "bfloat16 and fp16 modes cannot be simultaneously enabled".
  if (fp16 && bf16)
    top.fail("'" + bf16Name + ".enabled' and 'fp16.enabled' are both true: "
             "bf16 and fp16 mixed precision cannot both be enabled; set one "
             "to false");
  p.kind = fp16 ? Precision::FP16 : bf16 ? Precision::BF16 : Precision::FP32;
  if (top.has("data_types"))
    readDataTypes(top, p);
  readDtype(top, "communication_data_type", /*caseInsensitive=*/true,
            p.communicationDataTypeSetting);
  if (top.has("torch_autocast"))
    readTorchAutocast(top);
}

/// "activation_checkpointing" (see RecomputeConfig). DeepSpeed's keys are
/// read with their meaning where dsc has one and a note where it has none;
/// a DeepSpeed key set to a value that asks for something dsc cannot do is
/// a note too, never silently dropped.
void readActivationCheckpointing(const Section &top, TrainConfig &cfg) {
  Section ac = top.object("activation_checkpointing");
  ac.checkKeys({"recompute", "memory_budget", "interval", "number_checkpoints",
                "partition_activations",
                "cpu_checkpointing", "contiguous_memory_optimization",
                "synchronize_checkpoint_boundary", "profile"});
  RecomputeConfig &r = cfg.recompute;
  const std::vector<std::string> modes = {"none", "layers", "selective", "auto"};
  if (std::optional<std::string> m = ac.string("recompute")) {
    if (std::find(modes.begin(), modes.end(), *m) == modes.end())
      ac.fail("'" + ac.path("recompute") + "' is '" + *m + "'" + didYouMean(*m, modes) +
              "; supported: " + join(modes));
    r.mode = *m;
  } else if (ac.firstKey()) {
    r.mode = "layers";
    cfg.notes.push_back("'activation_checkpointing' without dsc's 'recompute' key: dsc "
                        "recomputes every layer (it sees the graph, not the blocks wrapped in "
                        "deepspeed.checkpointing.checkpoint); set 'recompute' to layers, "
                        "selective or none to choose");
  }
  if (ac.has("memory_budget")) {
    const auto &v = ac.raw("memory_budget");
    std::optional<uint64_t> bytes;
    if (v.is_number_unsigned())
      bytes = v.get<uint64_t>();
    else if (v.is_string())
      bytes = parseByteSize(v.get<std::string>());
    if (!bytes || *bytes == 0)
      ac.fail("'" + ac.path("memory_budget") + "' must be a positive byte count: a number, or "
              "a string such as \"6GiB\" (K, M, G, T: powers of 1000; KiB, MiB, GiB, TiB: of "
              "1024)");
    r.memoryBudget = *bytes;
  }
  if (r.mode == "auto" && !r.memoryBudget)
    ac.fail("'" + ac.path("recompute") + "' is 'auto' but there is no '" +
            ac.path("memory_budget") + "': auto chooses what to recompute to fit it");
  if (std::optional<int64_t> k = ac.count("interval", 1, std::numeric_limits<int64_t>::max()))
    r.interval = *k;
  if (std::optional<int64_t> n =
          ac.count("number_checkpoints", 1, std::numeric_limits<int64_t>::max()))
    r.numberCheckpoints = *n;
  if (ac.has("interval") && ac.has("number_checkpoints"))
    ac.fail("'" + ac.path("interval") + "' and '" + ac.path("number_checkpoints") +
            "' both choose which layer inputs are kept: give only one");
  auto note = [&](const char *key, const std::string &why) {
    if (ac.boolean(key).value_or(false))
      cfg.notes.push_back("'" + ac.path(key) + "' has no effect in dsc: " + why);
  };
  note("partition_activations",
       "it partitions checkpoints over the tensor-parallel group, and dsc has no tensor "
       "parallelism yet");
  note("cpu_checkpointing",
       "dsrt runs on the CPU, where the checkpoints already are");
  note("contiguous_memory_optimization",
       "dsc's memory plan places every checkpoint in the one arena at a planned offset");
  note("synchronize_checkpoint_boundary",
       "it synchronizes CUDA streams at checkpoint boundaries, and dsrt runs on the CPU");
  note("profile", "use dsrt --profile (or wall_clock_breakdown) for per-op timing");
}

/// "checkpoint": DeepSpeed's keys, where they apply to dsrt's checkpoints
/// (docs/checkpoints.md); what dsrt always does anyway is a note.
void readCheckpoint(const Section &top, TrainConfig &cfg) {
  Section c = top.object("checkpoint");
  c.checkKeys({"tag_validation", "load_universal", "use_node_local_storage", "parallel_write"});
  if (std::optional<std::string> v = c.string("tag_validation")) {
    // DeepSpeed compares it upper-cased.
    std::string upper = *v;
    std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
    const std::vector<std::string> modes = {"Ignore", "Warn", "Fail"};
    if (upper != "IGNORE" && upper != "WARN" && upper != "FAIL")
      c.fail("'" + c.path("tag_validation") + "' is '" + *v + "'" + didYouMean(*v, modes) +
             "; DeepSpeed's values: " + join(modes));
    if (upper != "IGNORE")
      cfg.notes.push_back("'" + c.path("tag_validation") +
                          "' checks that every rank saves under the same tag; dsrt's ranks "
                          "all name the tag after the step, so it always holds");
  }
  if (!c.boolean("load_universal").value_or(true))
    cfg.notes.push_back("'" + c.path("load_universal") +
                        "' is false, but every dsc checkpoint is universal: dsrt --resume "
                        "loads it into any dp, pp, ZeRO stage and precision");
  if (c.boolean("use_node_local_storage").value_or(false))
    c.fail("'" + c.path("use_node_local_storage") +
           "' is true: dsrt builds a checkpoint's index from every rank's file in the one "
           "--save-dir, which must be a folder all ranks share (node-local folders are not "
           "supported)");
  if (c.has("parallel_write")) {
    Section pw = c.object("parallel_write");
    pw.checkKeys({"pipeline_stage"});
    if (!pw.boolean("pipeline_stage").value_or(false))
      cfg.notes.push_back("'" + pw.path("pipeline_stage") +
                          "' is false, but dsrt always writes in parallel: every rank its own "
                          "file, pipeline stages included");
  }
}

/// "tensor_parallel": DeepSpeed's autotp_size is dsc's --tp. The other keys
/// configure AutoTP's module replacement, which dsc has no use for.
void readTensorParallel(const Section &top, TrainConfig &cfg) {
  Section t = top.object("tensor_parallel");
  t.checkKeys({"autotp_size"}, [&](const std::string &key) -> std::string {
    static const std::vector<std::string> autoTp = {
        "tp", "tp_size", "tp_grain_size", "partition_config", "injection_policy_tuple",
        "keep_module_on_host", "replace_with_kernel_inject", "tp_overlap_comm"};
    if (std::find(autoTp.begin(), autoTp.end(), key) == autoTp.end())
      return "";
    return "'" + t.path(key) + "' configures DeepSpeed's AutoTP (which modules to replace and "
           "how); dsc finds the GEMM pairs in the graph itself: give only 'autotp_size' "
           "(or dsc --tp)";
  });
  if (std::optional<int64_t> n = t.count("autotp_size", 1, std::numeric_limits<int32_t>::max()))
    cfg.tensorParallel = *n;
}

//===--- top level --------------------------------------------------------===//

const std::vector<std::string> kTopLevelKeys = {
    "train_batch_size",
    "train_micro_batch_size_per_gpu",
    "gradient_accumulation_steps",
    "optimizer",
    "scheduler",
    "gradient_clipping",
    "steps_per_print",
    "wall_clock_breakdown",
    "zero_optimization",
    "pipeline",
    "fp16",
    "bf16",
    "bfloat16",
    "data_types",
    "communication_data_type",
    // Read only to reject what they ask for (below).
    "torch_autocast",
    "activation_checkpointing",
    "checkpoint",
    "tensor_parallel",
};

/// Real DeepSpeed options dsc does not implement: rejected with a message
/// that says so instead of a spelling suggestion.
const std::vector<std::string> kUnsupportedDeepSpeedKeys = {
    "amp",
    "autotuning",
    "comms_logger",
    "compression_training",
    "csv_monitor",
    "curriculum_learning",
    "data_efficiency",
    "dataloader_drop_last",
    "elasticity",
    "flops_profiler",
    "gradient_predivide_factor",
    "memory_breakdown",
    "prescale_gradients",
    "sparse_attention",
    "sparse_gradients",
    "tensorboard",
    "wandb",
    "zero_allow_untested_optimizer",
    "zero_force_ds_cpu_optimizer",
};

/// a * b, or nullopt when it overflows int64_t.
std::optional<int64_t> times(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

/// "9 or 12": the multiples of `unit` around `value` (only positive ones).
std::string nearMultiples(int64_t value, int64_t unit) {
  int64_t below = value / unit * unit, above;
  if (__builtin_add_overflow(below, unit, &above))
    return std::to_string(below);
  if (below > 0)
    return std::to_string(below) + " or " + std::to_string(above);
  return std::to_string(above);
}

void readBatch(const Section &top, int64_t worldSize, TrainConfig &cfg) {
  std::optional<int64_t> train =
      top.count("train_batch_size", 1, kMaxTrainBatch);
  std::optional<int64_t> micro =
      top.count("train_micro_batch_size_per_gpu", 1, kMaxMicroBatch);
  std::optional<int64_t> gas =
      top.count("gradient_accumulation_steps", 1, kMaxGradAccumSteps);
  if (!train && !micro)
    top.fail("either train_batch_size or train_micro_batch_size_per_gpu "
             "needs to be provided");

  const std::string ranks =
      "data-parallel ranks " + std::to_string(worldSize);
  auto tooLarge = [&](const std::string &product) {
    top.fail(product + " does not fit in 64 bits");
  };

  // DeepSpeedConfig._set_batch_related_parameters derives the missing value
  // by floor division and lets _batch_assertion catch the remainder; here a
  // division that is not exact is the error, stated as such.
  // A derived value is bounded like a given one: it is as much a loop count.
  auto derive = [&](const char *derived, int64_t max, const char *divisorKey,
                    int64_t divisor, const char *note) {
    std::string unitText = std::string(divisorKey) + " " +
                           std::to_string(divisor) + note + " x " + ranks;
    std::optional<int64_t> unit = times(divisor, worldSize);
    if (!unit)
      tooLarge(unitText);
    if (*train % *unit != 0)
      top.fail("train_batch_size " + std::to_string(*train) +
               " is not a multiple of " + unitText + " (= " +
               std::to_string(*unit) + "), so " + derived +
               " cannot be derived: set train_batch_size to " +
               nearMultiples(*train, *unit));
    int64_t value = *train / *unit;
    if (value > max)
      top.fail("train_batch_size " + std::to_string(*train) + " / (" +
               unitText + ") gives " + derived + " " + std::to_string(value) +
               ", but it must be between 1 and " + std::to_string(max) +
               ": lower train_batch_size or raise " + divisorKey);
    return value;
  };

  if (train && micro && !gas) {
    gas = derive("gradient_accumulation_steps", kMaxGradAccumSteps,
                 "train_micro_batch_size_per_gpu", *micro, "");
  } else if (train && !micro) {
    bool defaulted = !gas;
    if (defaulted)
      gas = 1;
    micro = derive("train_micro_batch_size_per_gpu", kMaxMicroBatch,
                   "gradient_accumulation_steps", *gas,
                   defaulted ? " (the default)" : "");
  }

  std::string productText =
      "train_micro_batch_size_per_gpu " + std::to_string(*micro) +
      " x gradient_accumulation_steps " + std::to_string(gas.value_or(1)) +
      " x " + ranks;
  std::optional<int64_t> perRank = times(*micro, gas.value_or(1));
  std::optional<int64_t> product =
      perRank ? times(*perRank, worldSize) : std::nullopt;
  if (!product)
    tooLarge(productText);
  if (*product > kMaxTrainBatch)
    top.fail(productText + " (= " + std::to_string(*product) +
             ") is more than " + std::to_string(kMaxTrainBatch) +
             ", the largest train_batch_size");
  if (!train) {
    if (!gas)
      gas = 1;
    train = *product;
  } else if (*train != *product) {
    // All three given: name every number and each single change that fits.
    std::string fix = "set train_batch_size to " + std::to_string(*product);
    if (std::optional<int64_t> unit = times(*micro, worldSize);
        unit && *train % *unit == 0)
      fix += ", or gradient_accumulation_steps to " +
             std::to_string(*train / *unit);
    if (*train % *perRank == 0)
      fix += ", or compile with --dp " + std::to_string(*train / *perRank);
    top.fail("train_batch_size " + std::to_string(*train) + " != " +
             productText + " (= " + std::to_string(*product) + "): " + fix);
  }
  cfg.trainBatchSize = *train;
  cfg.microBatchPerGpu = *micro;
  cfg.gradAccumSteps = *gas;
}

//===--- zero_optimization ------------------------------------------------===//

/// The keys ZeroConfig holds, as canonical JSON writes them.
const std::vector<std::string> kZeroKeys = {
    "stage",
    "overlap_comm",
    "contiguous_gradients",
    "reduce_scatter",
    "reduce_bucket_size",
    "allgather_bucket_size",
    "allgather_partitions",
    "round_robin_gradients",
    "sub_group_size",
    "stage3_prefetch_bucket_size",
    "stage3_param_persistence_threshold",
    "stage3_max_live_parameters",
};

/// DeepSpeedConfigModel allows population by field name as well as by
/// alias: these field names read the same setting as their stage3_ alias.
const std::vector<std::pair<std::string, std::string>> kZeroSynonyms = {
    {"prefetch_bucket_size", "stage3_prefetch_bucket_size"},
    {"param_persistence_threshold", "stage3_param_persistence_threshold"},
    {"max_live_parameters", "stage3_max_live_parameters"},
};

/// DeepSpeedZeroConfig's other keys (current and deprecated). dsc implements
/// none of them; each is rejected by name rather than ignored, so a config
/// never silently means less to dsc than it does to DeepSpeed.
const std::vector<std::string> kUnsupportedZeroKeys = {
    "allgather_sequential",
    "cpu_offload",
    "cpu_offload_param",
    "cpu_offload_params",
    "cpu_offload_use_pin_memory",
    "elastic_checkpoint",
    "enable_sanity_checks",
    "gather_16bit_weights_on_model_save",
    "ignore_unused_parameters",
    "leaf_module",
    "legacy_stage1",
    "load_from_fp32_weights",
    "log_trace_cache_warnings",
    "max_reuse_distance",
    "memory_efficient_linear",
    "mics_hierarchical_params_gather",
    "mics_shard_size",
    "model_persistence_threshold",
    "module_granularity_threshold",
    "offload_optimizer",
    "offload_param",
    "override_module_apply",
    "partition_stream_chunk_size",
    "pipeline_loading_checkpoint",
    "save_muon_momentum_buffer_in_memory",
    "stage3_allgather_sequential",
    "stage3_gather_16bit_weights_on_model_save",
    "stage3_gather_fp16_weights_on_model_save",
    "stage3_max_reuse_distance",
    "stage3_model_persistence_threshold",
    "stage3_module_granularity_threshold",
    "stage3_partition_stream_chunk_size",
    "stage3_use_all_reduce_for_fetch_params",
    "use_all_reduce_for_fetch_params",
    "use_multi_rank_bucket_allreduce",
    "zenflow",
    "zero_hpz_partition_size",
    "zero_quantized_gradients",
    "zero_quantized_nontrainable_weights",
    "zero_quantized_weights",
    "zeropp_loco_param",
};

//===--- pipeline ----------------------------------------------------------===//

void readPipeline(const Section &top, PipelineConfig &p) {
  Section pipe = top.object("pipeline");
  const std::vector<std::string> known = {
      "stages", "partition_method", "schedule", "activation_checkpoint_interval",
      "seed_layers", "pipe_partitioned", "grad_partitioned", "partition"};
  pipe.checkKeys(known, [&](const std::string &key) -> std::string {
    return "unknown key '" + pipe.path(key) + "'" + didYouMean(key, known);
  });
  p = PipelineConfig();
  if (pipe.has("stages") && !(pipe.raw("stages").is_string() &&
                              pipe.raw("stages").get<std::string>() == "auto")) {
    p.stages = *pipe.count("stages", 1, kMaxPipelineStages);
  }
  auto choice = [&](const std::string &key, std::string &field,
                    const std::vector<std::string> &options) {
    std::optional<std::string> v = pipe.string(key);
    if (!v)
      return;
    if (std::find(options.begin(), options.end(), *v) == options.end())
      pipe.fail("'" + pipe.path(key) + "' is '" + *v + "'" + didYouMean(*v, options) +
                "; supported: " + join(options));
    field = *v;
  };
  choice("partition_method", p.partitionMethod, {"uniform", "parameters", "cost"});
  choice("schedule", p.schedule, {"1f1b", "zb-h1"});
  // DeepSpeed's "partition" is the same choice as dsc's partition_method;
  // its default "best" leaves dsc's default (cost).
  std::string partition;
  choice("partition", partition, {"best", "uniform", "parameters"});
  if (!partition.empty() && partition != "best") {
    if (pipe.has("partition_method") && p.partitionMethod != partition)
      pipe.fail("'" + pipe.path("partition") + "' is '" + partition + "' but '" +
                pipe.path("partition_method") + "' is '" + p.partitionMethod +
                "': they are the same setting, give only one");
    p.partitionMethod = partition;
  }
  p.activationCheckpointInterval =
      pipe.count("activation_checkpoint_interval", 0, std::numeric_limits<int64_t>::max())
          .value_or(0);
  if (pipe.boolean("seed_layers").value_or(false))
    pipe.fail("'" + pipe.path("seed_layers") +
              "' is not supported: dsc takes the initial weights from the ONNX "
              "model instead of initializing layers; remove it or set false");
  // Activations and gradients between stages are partitioned over the
  // tensor-parallel group; without tensor parallelism (DeepSpeed's
  // is_model_parallel false) either value computes the same.
  pipe.boolean("pipe_partitioned");
  pipe.boolean("grad_partitioned");
}

void readZero(const Section &top, ZeroConfig &z) {
  const json &raw = top.raw("zero_optimization");
  if (raw.is_boolean())
    top.fail("'zero_optimization' must be an object, got " + shown(raw) +
             " (DeepSpeed's deprecated boolean form; write "
             "{\"stage\": " + (raw.get<bool>() ? "1" : "0") + "})");
  Section zero = top.object("zero_optimization");

  std::vector<std::string> known = kZeroKeys;
  for (const auto &[synonym, key] : kZeroSynonyms)
    known.push_back(synonym);
  std::vector<std::string> all = known;
  all.insert(all.end(), kUnsupportedZeroKeys.begin(),
             kUnsupportedZeroKeys.end());
  zero.checkKeys(known, [&](const std::string &key) -> std::string {
    if (std::find(kUnsupportedZeroKeys.begin(), kUnsupportedZeroKeys.end(),
                  key) != kUnsupportedZeroKeys.end())
      return "'" + zero.path(key) + "' is not supported yet by dsc";
    return "unknown key '" + zero.path(key) + "'" + didYouMean(key, all);
  });

  z = ZeroConfig();
  if (std::optional<int64_t> stage = zero.count("stage", 0, 3))
    z.stage = static_cast<int>(*stage);
  z.overlapCommSetting = zero.boolean("overlap_comm");
  z.contiguousGradients =
      zero.boolean("contiguous_gradients").value_or(z.contiguousGradients);
  z.reduceScatter = zero.boolean("reduce_scatter").value_or(z.reduceScatter);
  z.allgatherPartitions =
      zero.boolean("allgather_partitions").value_or(z.allgatherPartitions);
  z.roundRobinGradients =
      zero.boolean("round_robin_gradients").value_or(z.roundRobinGradients);

  auto size = [&](const std::string &key, int64_t &field, bool strictly) {
    std::string name = key;
    for (const auto &[synonym, canonical] : kZeroSynonyms) {
      if (canonical != key || !zero.has(synonym))
        continue;
      if (zero.has(key))
        zero.fail("'" + zero.path(synonym) + "' and '" + zero.path(key) +
                  "' are the same setting (DeepSpeed accepts either name): "
                  "give only one");
      name = synonym;
    }
    if (std::optional<int64_t> v = zero.count(name, strictly ? 1 : 0,
                                              kMaxElements,
                                              /*integralFloats=*/true))
      field = *v;
  };
  size("reduce_bucket_size", z.reduceBucketSize, true);
  size("allgather_bucket_size", z.allgatherBucketSize, true);
  size("sub_group_size", z.subGroupSize, false);
  size("stage3_prefetch_bucket_size", z.stage3PrefetchBucketSize, false);
  size("stage3_param_persistence_threshold",
       z.stage3ParamPersistenceThreshold, false);
  size("stage3_max_live_parameters", z.stage3MaxLiveParameters, false);
}

//===--- optimizer --------------------------------------------------------===//

const std::vector<std::string> kAdamParams = {
    "lr",          "betas",           "eps",       "weight_decay",
    "adam_w_mode", "bias_correction", "torch_adam"};
const std::vector<std::string> kSgdParams = {"lr", "momentum", "dampening",
                                             "weight_decay", "nesterov"};
const std::vector<std::string> kOptimizerTypes = {"Adam", "AdamW", "SGD"};
/// DeepSpeed's own optimizers (config.py DEEPSPEED_OPTIMIZERS) beyond Adam(W).
const std::vector<std::string> kOtherDeepSpeedOptimizers = {
    "adagrad", "lamb",    "onebitadam", "zerooneadam", "onebitlamb",
    "muadam",  "muadamw", "musgd",      "lion",        "muon"};

std::string resolveOptimizerType(const Section &opt, const std::string &name) {
  // config.py lower-cases names in DEEPSPEED_OPTIMIZERS; anything else goes
  // to getattr(torch.optim, name), which is case-sensitive.
  std::string l = lower(name);
  if (l == "adam")
    return "Adam";
  if (l == "adamw")
    return "AdamW";
  if (name == "SGD")
    return "SGD";
  if (std::find(kOtherDeepSpeedOptimizers.begin(),
                kOtherDeepSpeedOptimizers.end(),
                l) != kOtherDeepSpeedOptimizers.end())
    opt.fail("optimizer '" + name +
             "' is a DeepSpeed optimizer dsc does not implement (supported: " +
             join(kOptimizerTypes) + ")");
  opt.fail("unknown optimizer type '" + name + "' at '" + opt.path("type") +
           "'" + didYouMean(name, kOptimizerTypes) +
           "; supported: " + join(kOptimizerTypes));
}

void readOptimizer(const Section &top, OptimizerConfig &o) {
  Section opt = top.object("optimizer");
  opt.checkKeys({"type", "params"});
  std::optional<std::string> name = opt.string("type");
  if (!name)
    opt.fail("'optimizer.type' is required when an optimizer section is "
             "given");
  o = OptimizerConfig();
  o.type = resolveOptimizerType(opt, *name);

  Section params = opt.optionalObject("params");
  bool sgd = o.type == "SGD";
  const std::vector<std::string> &known = sgd ? kSgdParams : kAdamParams;
  const std::vector<std::string> &other = sgd ? kAdamParams : kSgdParams;
  params.checkKeys(known, [&](const std::string &key) -> std::string {
    if (key == "max_grad_norm")
      return "'" + params.path(key) +
             "' is not supported as an optimizer parameter, please switch to "
             "using the deepspeed parameter 'gradient_clipping' (engine.py "
             "rejects it too)";
    if (std::find(other.begin(), other.end(), key) != other.end())
      return "'" + params.path(key) + "' is not a parameter of " + o.type +
             " (it belongs to " + (sgd ? "Adam/AdamW" : "SGD") + ")" +
             didYouMean(key, known);
    return "";
  });

  o.lr = params.number("lr").value_or(1e-3);
  params.atLeast("lr", o.lr, 0);
  if (sgd) {
    o.decoupled = false;
    o.momentum = params.number("momentum").value_or(0.0);
    o.dampening = params.number("dampening").value_or(0.0);
    o.nesterov = params.boolean("nesterov").value_or(false);
    params.atLeast("momentum", o.momentum, 0);
    // torch.optim.SGD's own check.
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
      params.fail("'optimizer.params.nesterov' requires momentum > 0 and "
                  "dampening 0 (torch.optim.SGD), got momentum " +
                  formatNumber(o.momentum) + ", dampening " +
                  formatNumber(o.dampening));
  } else {
    // engine.py _configure_basic_optimizer: "AdamW" forces decoupled decay;
    // "Adam" follows adam_w_mode, default True.
    o.torchAdam = params.boolean("torch_adam").value_or(false);
    o.decoupled =
        o.type == "AdamW" || params.boolean("adam_w_mode").value_or(true);
    if (o.torchAdam && params.has("bias_correction"))
      params.fail("'optimizer.params.bias_correction' cannot be used with "
                  "torch_adam: true (torch.optim.Adam has no such argument)");
    o.biasCorrection = params.boolean("bias_correction").value_or(true);
    // torch.optim.AdamW defaults weight_decay to 1e-2; FusedAdam and
    // torch.optim.Adam to 0.
    if (o.torchAdam && o.decoupled)
      o.weightDecay = 1e-2;
    o.eps = params.number("eps").value_or(1e-8);
    params.atLeast("eps", o.eps, 0);
    if (params.has("betas")) {
      const json &b = params.raw("betas");
      if (!b.is_array() || b.size() != 2 || !b[0].is_number() ||
          !b[1].is_number())
        params.fail("'optimizer.params.betas' must be an array of two "
                    "numbers, got " +
                    shown(b));
      o.beta1 = b[0].get<double>();
      o.beta2 = b[1].get<double>();
      for (double beta : {o.beta1, o.beta2})
        if (!(beta >= 0 && beta < 1))
          params.fail("'optimizer.params.betas' must lie in [0, 1), got [" +
                      formatNumber(o.beta1) + ", " + formatNumber(o.beta2) +
                      "]");
    }
  }
  o.weightDecay = params.number("weight_decay").value_or(o.weightDecay);
  params.atLeast("weight_decay", o.weightDecay, 0);
}

//===--- scheduler --------------------------------------------------------===//

enum class Kind { Number, Count, Flag, WarmupType };

/// One scheduler parameter: its constructor default (lr_schedules.py), or
/// where the default comes from when it depends on another value.
struct ParamSpec {
  const char *name;
  Kind kind;
  double defaultValue;
  bool required = false;
  const char *defaultFrom = nullptr; // another param, or "optimizer.lr"
  bool strictlyPositive = false;     // > 0 rather than the usual >= 0
  bool anySign = false;              // no lower bound at all
  bool momentum = false;             // a beta: < 1 as well
};

struct ScheduleSpec {
  const char *type;
  std::vector<ParamSpec> params;
};

ParamSpec warmupType() { return {"warmup_type", Kind::WarmupType, 0}; }
ParamSpec warmupSteps() {
  ParamSpec p{"warmup_num_steps", Kind::Count, 1000};
  p.strictlyPositive = true;
  return p;
}
ParamSpec totalSteps() {
  ParamSpec p{"total_num_steps", Kind::Count, 0};
  p.required = true;
  return p;
}

const std::vector<ScheduleSpec> &scheduleSpecs() {
  static const std::vector<ScheduleSpec> specs = [] {
    ParamSpec rtStep{"lr_range_test_step_size", Kind::Count, 2000};
    rtStep.strictlyPositive = true;
    // Not anySign, unlike DeepSpeed: a negative rate drives the lr below 0.
    ParamSpec rtRate{"lr_range_test_step_rate", Kind::Number, 1.0};

    ParamSpec minLr{"cycle_min_lr", Kind::Number, 0};
    minLr.required = true;
    ParamSpec maxLr{"cycle_max_lr", Kind::Number, 0};
    maxLr.required = true;
    ParamSpec first{"cycle_first_step_size", Kind::Count, 2000};
    first.strictlyPositive = true;
    ParamSpec second{"cycle_second_step_size", Kind::Count, 0};
    second.defaultFrom = "cycle_first_step_size";
    second.strictlyPositive = true;
    ParamSpec secondStairs{"cycle_second_stair_count", Kind::Count, 0};
    secondStairs.defaultFrom = "cycle_first_stair_count";
    ParamSpec minMom{"cycle_min_mom", Kind::Number, 0.8};
    minMom.momentum = true;
    ParamSpec maxMom{"cycle_max_mom", Kind::Number, 0.9};
    maxMom.momentum = true;
    ParamSpec decayMom{"decay_mom_rate", Kind::Number, 0};
    decayMom.anySign = true;
    // Not anySign, unlike DeepSpeed: lr = min_lr / (1 + rate * t) divides by
    // zero, then turns negative, for a negative rate.
    ParamSpec decayLr{"decay_lr_rate", Kind::Number, 0};

    ParamSpec warmupMax{"warmup_max_lr", Kind::Number, 0};
    warmupMax.defaultFrom = "optimizer.lr";

    return std::vector<ScheduleSpec>{
        {"LRRangeTest",
         {{"lr_range_test_min_lr", Kind::Number, 1e-3},
          rtStep,
          rtRate,
          {"lr_range_test_staircase", Kind::Flag, 0}}},
        {"OneCycle",
         {minLr,
          maxLr,
          decayLr,
          first,
          second,
          {"cycle_first_stair_count", Kind::Count, 0},
          secondStairs,
          {"decay_step_size", Kind::Count, 0},
          {"cycle_momentum", Kind::Flag, 1},
          minMom,
          maxMom,
          decayMom}},
        {"WarmupLR",
         {{"warmup_min_lr", Kind::Number, 0},
          warmupMax,
          warmupSteps(),
          warmupType()}},
        {"WarmupDecayLR",
         {totalSteps(),
          {"warmup_min_lr", Kind::Number, 0},
          {"warmup_max_lr", Kind::Number, 0.001},
          warmupSteps(),
          warmupType()}},
        {"WarmupCosineLR",
         {totalSteps(),
          {"warmup_min_ratio", Kind::Number, 0},
          warmupSteps(),
          {"cos_min_ratio", Kind::Number, 1e-4},
          warmupType()}},
    };
  }();
  return specs;
}

/// The SchedulerConfig field behind a Kind::Flag parameter.
bool &flagField(SchedulerConfig &s, const std::string &name) {
  return name == "cycle_momentum" ? s.cycleMomentum : s.staircase;
}
bool flagField(const SchedulerConfig &s, const std::string &name) {
  return name == "cycle_momentum" ? s.cycleMomentum : s.staircase;
}

const ScheduleSpec *findSchedule(const std::string &type) {
  for (const ScheduleSpec &s : scheduleSpecs())
    if (type == s.type)
      return &s;
  return nullptr;
}

std::vector<std::string> paramNames(const ScheduleSpec &spec) {
  std::vector<std::string> names;
  for (const ParamSpec &p : spec.params)
    names.push_back(p.name);
  return names;
}

void readScheduler(const Section &top, const OptimizerConfig &opt,
                   SchedulerConfig &s) {
  Section sched = top.object("scheduler");
  sched.checkKeys({"type", "params"});
  std::optional<std::string> type = sched.string("type");
  if (!type)
    sched.fail("'scheduler.type' is required when a scheduler section is "
               "given");
  // engine.py _scheduler_from_config: getattr(lr_schedules, name), so the
  // name is case-sensitive.
  const ScheduleSpec *spec = findSchedule(*type);
  if (!spec) {
    std::vector<std::string> types;
    for (const ScheduleSpec &sp : scheduleSpecs())
      types.push_back(sp.type);
    sched.fail("unknown scheduler type '" + *type + "' at 'scheduler.type'" +
               didYouMean(*type, types) + "; supported: " + join(types));
  }
  s = SchedulerConfig();
  s.type = spec->type;

  Section params = sched.optionalObject("params");
  std::vector<std::string> known = paramNames(*spec);
  params.checkKeys(known, [&](const std::string &key) -> std::string {
    if (key == "last_batch_iteration")
      return "'" + params.path(key) +
             "' is not supported: dsc schedules always start at step 0";
    std::vector<std::string> owners;
    for (const ScheduleSpec &other : scheduleSpecs()) {
      std::vector<std::string> names = paramNames(other);
      if (std::find(names.begin(), names.end(), key) != names.end())
        owners.push_back(other.type);
    }
    if (owners.empty())
      return "";
    return "'" + params.path(key) + "' is not a parameter of " + s.type +
           " (it belongs to " + join(owners) + ")" + didYouMean(key, known);
  });

  // Plain defaults first, so dependent defaults can read them.
  for (const ParamSpec &p : spec->params) {
    switch (p.kind) {
    case Kind::Flag: {
      bool v = params.boolean(p.name).value_or(p.defaultValue != 0);
      flagField(s, p.name) = v;
      continue;
    }
    case Kind::WarmupType: {
      std::string v = params.string(p.name).value_or("log");
      if (v != "log" && v != "linear")
        params.fail("'" + params.path(p.name) + "' must be \"log\" or " +
                    "\"linear\", got \"" + v + "\"" +
                    didYouMean(v, {"log", "linear"}));
      s.warmupType = v;
      continue;
    }
    case Kind::Number:
    case Kind::Count: {
      std::optional<double> v;
      if (p.kind == Kind::Count) {
        // Step counts are kept as doubles: bounded so they stay exact.
        if (std::optional<int64_t> i =
                params.count(p.name, p.strictlyPositive ? 1 : 0, kMaxSteps))
          v = double(*i);
      } else {
        v = params.number(p.name);
      }
      if (!v && p.required)
        params.fail("'" + params.path(p.name) + "' is required by " + s.type);
      if (v) {
        if (p.kind == Kind::Number && !p.anySign)
          params.atLeast(p.name, *v, 0);
        if (p.momentum && !(*v < 1))
          params.fail("'" + params.path(p.name) +
                      "' must lie in [0, 1) (it becomes Adam's beta1), got " +
                      formatNumber(*v));
        s.params[p.name] = *v;
      } else if (!p.defaultFrom) {
        s.params[p.name] = p.defaultValue;
      }
      continue;
    }
    }
  }
  for (const ParamSpec &p : spec->params) {
    if (!p.defaultFrom || s.params.count(p.name))
      continue;
    s.params[p.name] = p.defaultFrom == std::string("optimizer.lr")
                           ? opt.lr
                           : s.params.at(p.defaultFrom);
  }
}

} // namespace

//===--- public API -------------------------------------------------------===//

bool OptimizerConfig::operator==(const OptimizerConfig &o) const {
  return type == o.type && lr == o.lr && beta1 == o.beta1 && beta2 == o.beta2 &&
         eps == o.eps && weightDecay == o.weightDecay &&
         momentum == o.momentum && dampening == o.dampening &&
         nesterov == o.nesterov && decoupled == o.decoupled &&
         biasCorrection == o.biasCorrection && torchAdam == o.torchAdam;
}

double SchedulerConfig::param(const std::string &name) const {
  auto it = params.find(name);
  if (it == params.end())
    throw ConfigError("scheduler " + type + " has no parameter '" + name + "'");
  return it->second;
}

bool SchedulerConfig::operator==(const SchedulerConfig &o) const {
  return type == o.type && params == o.params && warmupType == o.warmupType &&
         staircase == o.staircase && cycleMomentum == o.cycleMomentum;
}

bool ZeroConfig::operator==(const ZeroConfig &o) const {
  return stage == o.stage && reduceBucketSize == o.reduceBucketSize &&
         allgatherBucketSize == o.allgatherBucketSize &&
         overlapComm() == o.overlapComm() &&
         contiguousGradients == o.contiguousGradients &&
         reduceScatter == o.reduceScatter &&
         stage3PrefetchBucketSize == o.stage3PrefetchBucketSize &&
         stage3ParamPersistenceThreshold == o.stage3ParamPersistenceThreshold &&
         stage3MaxLiveParameters == o.stage3MaxLiveParameters &&
         allgatherPartitions == o.allgatherPartitions &&
         roundRobinGradients == o.roundRobinGradients &&
         subGroupSize == o.subGroupSize;
}

bool Fp16Config::operator==(const Fp16Config &o) const {
  return autoCast == o.autoCast && lossScale == o.lossScale &&
         initialScalePower == o.initialScalePower &&
         lossScaleWindow == o.lossScaleWindow && hysteresis == o.hysteresis &&
         consecutiveHysteresis == o.consecutiveHysteresis &&
         minLossScale == o.minLossScale;
}

bool PrecisionConfig::operator==(const PrecisionConfig &o) const {
  return kind == o.kind && fp16 == o.fp16 && bf16 == o.bf16 &&
         gradAccumDtype() == o.gradAccumDtype() &&
         communicationDataType() == o.communicationDataType();
}

bool TrainConfig::operator==(const TrainConfig &o) const {
  return trainBatchSize == o.trainBatchSize &&
         microBatchPerGpu == o.microBatchPerGpu &&
         gradAccumSteps == o.gradAccumSteps && worldSize == o.worldSize &&
         gradientClipping == o.gradientClipping &&
         stepsPerPrint == o.stepsPerPrint && optimizer == o.optimizer &&
         scheduler == o.scheduler && zero == o.zero && pipeline == o.pipeline &&
         precision == o.precision && wallClockBreakdown == o.wallClockBreakdown &&
         recompute == o.recompute;
}

std::optional<uint64_t> parseByteSize(const std::string &text) {
  size_t i = 0;
  uint64_t n = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (n > (std::numeric_limits<uint64_t>::max() - 9) / 10)
      return std::nullopt;
    n = n * 10 + uint64_t(text[i++] - '0');
  }
  if (i == 0)
    return std::nullopt;
  std::string unit = text.substr(i);
  static const std::pair<const char *, uint64_t> units[] = {
      {"", 1},
      {"K", 1000ull},
      {"M", 1000000ull},
      {"G", 1000000000ull},
      {"T", 1000000000000ull},
      {"KiB", 1ull << 10},
      {"MiB", 1ull << 20},
      {"GiB", 1ull << 30},
      {"TiB", 1ull << 40}};
  for (auto [name, factor] : units)
    if (unit == name) {
      if (n > std::numeric_limits<uint64_t>::max() / factor)
        return std::nullopt;
      return n * factor;
    }
  return std::nullopt;
}

const char *precisionName(Precision p) {
  switch (p) {
  case Precision::FP32:
    return "fp32";
  case Precision::BF16:
    return "bf16";
  case Precision::FP16:
    return "fp16";
  }
  return "fp32";
}

Precision precisionFromFlag(const std::string &value) {
  // Lightning's Trainer(precision=...) names (fabric precision.py
  // _PRECISION_INPUT_STR): "-mixed" keeps fp32 weights, as dsc does.
  static const std::vector<std::pair<std::string, Precision>> names = {
      {"fp32", Precision::FP32},       {"bf16", Precision::BF16},
      {"fp16", Precision::FP16},       {"32-true", Precision::FP32},
      {"bf16-mixed", Precision::BF16}, {"16-mixed", Precision::FP16},
  };
  for (const auto &[name, p] : names)
    if (value == name)
      return p;
  std::string accepted = "fp32, bf16, fp16 (or Lightning's 32-true, "
                         "bf16-mixed, 16-mixed)";
  if (value == "bf16-true" || value == "16-true" || value == "64-true")
    throw ConfigError("'" + value + "' is not supported: Lightning's -true " +
                      "modes keep the weights in that type, dsc keeps fp32 " +
                      "master weights; accepted: " + accepted);
  std::vector<std::string> all;
  for (const auto &[name, p] : names)
    all.push_back(name);
  throw ConfigError("'" + value + "' is not a precision" +
                    didYouMean(value, all) + "; accepted: " + accepted);
}

TrainConfig defaultConfig() { return TrainConfig(); }

TrainConfig parseDsConfig(const std::string &jsonText,
                          const std::string &sourceName, int64_t worldSize) {
  if (worldSize < 1)
    throw ConfigError(sourceName + ": world size must be >= 1, got " +
                      std::to_string(worldSize));
  json root = parseStrict(jsonText, sourceName);
  if (!root.is_object())
    throw ConfigError(sourceName + ": the top level must be a JSON object, " +
                      "got " + shown(root));
  Section top(sourceName, root, "");
  top.checkKeys(kTopLevelKeys, [&](const std::string &key) -> std::string {
    if (std::find(kUnsupportedDeepSpeedKeys.begin(),
                  kUnsupportedDeepSpeedKeys.end(),
                  key) != kUnsupportedDeepSpeedKeys.end())
      return "'" + key + "' is a DeepSpeed option dsc does not support";
    return "";
  });

  TrainConfig cfg;
  cfg.worldSize = worldSize;
  readBatch(top, worldSize, cfg);
  cfg.gradientClipping = top.number("gradient_clipping").value_or(0.0);
  top.atLeast("gradient_clipping", cfg.gradientClipping, 0);
  cfg.stepsPerPrint = top.count("steps_per_print", 1, kMaxSteps).value_or(0);
  if (top.has("optimizer"))
    readOptimizer(top, cfg.optimizer);
  if (top.has("scheduler"))
    readScheduler(top, cfg.optimizer, cfg.scheduler);
  if (top.has("zero_optimization"))
    readZero(top, cfg.zero);
  if (top.has("pipeline"))
    readPipeline(top, cfg.pipeline);
  cfg.wallClockBreakdown =
      top.boolean("wall_clock_breakdown").value_or(false);
  readPrecision(top, cfg.precision, cfg.notes);
  if (top.has("activation_checkpointing"))
    readActivationCheckpointing(top, cfg);
  if (top.has("checkpoint"))
    readCheckpoint(top, cfg);
  if (top.has("tensor_parallel"))
    readTensorParallel(top, cfg);
  // pipeline.activation_checkpoint_interval (DeepSpeed's PipelineModule:
  // checkpoint every k layers, 0 off).
  if (cfg.pipeline.activationCheckpointInterval > 0) {
    bool section = top.has("activation_checkpointing");
    if (section && top.object("activation_checkpointing").has("interval") &&
        cfg.recompute.interval != cfg.pipeline.activationCheckpointInterval)
      top.fail("'pipeline.activation_checkpoint_interval' and "
               "'activation_checkpointing.interval' differ: they are the same setting, give "
               "only one");
    if (cfg.recompute.mode == "none" && section &&
        top.object("activation_checkpointing").has("recompute"))
      top.fail("'pipeline.activation_checkpoint_interval' asks for checkpoints but "
               "'activation_checkpointing.recompute' is 'none'");
    if (cfg.recompute.mode == "none")
      cfg.recompute.mode = "layers";
    cfg.recompute.interval = cfg.pipeline.activationCheckpointInterval;
  }
  return cfg;
}

TrainConfig loadDsConfig(const std::string &path, int64_t worldSize) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(path + ": is a directory, not a DeepSpeed config");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ConfigError(path + ": cannot open the DeepSpeed config");
  // Read through a bound rather than by size: --config <(...) is a pipe, and
  // /dev/zero would otherwise be read until memory runs out.
  std::string text;
  char chunk[65536];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxConfigBytes)
      throw ConfigError(path + ": larger than " +
                        std::to_string(kMaxConfigBytes >> 20) +
                        " MiB, not a DeepSpeed config");
  }
  if (in.bad())
    throw ConfigError(path + ": cannot read the DeepSpeed config");
  return parseDsConfig(text, path, worldSize);
}

std::string toJson(const TrainConfig &cfg) {
  ordered_json root;
  root["train_batch_size"] = cfg.trainBatchSize;
  root["train_micro_batch_size_per_gpu"] = cfg.microBatchPerGpu;
  root["gradient_accumulation_steps"] = cfg.gradAccumSteps;
  root["gradient_clipping"] = cfg.gradientClipping;
  if (cfg.stepsPerPrint > 0)
    root["steps_per_print"] = cfg.stepsPerPrint;
  root["wall_clock_breakdown"] = cfg.wallClockBreakdown;

  const OptimizerConfig &o = cfg.optimizer;
  ordered_json op;
  op["lr"] = o.lr;
  if (o.type == "SGD") {
    op["momentum"] = o.momentum;
    op["dampening"] = o.dampening;
    op["weight_decay"] = o.weightDecay;
    op["nesterov"] = o.nesterov;
  } else {
    op["betas"] = {o.beta1, o.beta2};
    op["eps"] = o.eps;
    op["weight_decay"] = o.weightDecay;
    op["adam_w_mode"] = o.decoupled;
    op["torch_adam"] = o.torchAdam;
    if (!o.torchAdam)
      op["bias_correction"] = o.biasCorrection;
  }
  root["optimizer"] = {{"type", o.type}, {"params", op}};

  const SchedulerConfig &s = cfg.scheduler;
  if (const ScheduleSpec *spec = findSchedule(s.type)) {
    ordered_json sp = ordered_json::object();
    for (const ParamSpec &p : spec->params) {
      switch (p.kind) {
      case Kind::Flag:
        sp[p.name] = flagField(s, p.name);
        break;
      case Kind::WarmupType:
        sp[p.name] = s.warmupType;
        break;
      case Kind::Count:
        sp[p.name] = static_cast<int64_t>(s.param(p.name));
        break;
      case Kind::Number:
        sp[p.name] = s.param(p.name);
        break;
      }
    }
    root["scheduler"] = {{"type", s.type}, {"params", sp}};
  }
  const ZeroConfig &z = cfg.zero;
  ordered_json zj;
  zj["stage"] = z.stage;
  zj["overlap_comm"] = z.overlapComm();
  zj["contiguous_gradients"] = z.contiguousGradients;
  zj["reduce_scatter"] = z.reduceScatter;
  zj["reduce_bucket_size"] = z.reduceBucketSize;
  zj["allgather_bucket_size"] = z.allgatherBucketSize;
  zj["allgather_partitions"] = z.allgatherPartitions;
  zj["round_robin_gradients"] = z.roundRobinGradients;
  zj["sub_group_size"] = z.subGroupSize;
  zj["stage3_prefetch_bucket_size"] = z.stage3PrefetchBucketSize;
  zj["stage3_param_persistence_threshold"] = z.stage3ParamPersistenceThreshold;
  zj["stage3_max_live_parameters"] = z.stage3MaxLiveParameters;
  root["zero_optimization"] = zj;
  if (cfg.pipeline.stages > 1) {
    ordered_json pj;
    pj["stages"] = cfg.pipeline.stages;
    pj["partition_method"] = cfg.pipeline.partitionMethod;
    pj["schedule"] = cfg.pipeline.schedule;
    root["pipeline"] = pj;
  }
  if (cfg.recompute.mode != "none" || cfg.recompute.memoryBudget) {
    ordered_json aj;
    aj["recompute"] = cfg.recompute.mode;
    if (cfg.recompute.memoryBudget)
      aj["memory_budget"] = cfg.recompute.memoryBudget;
    if (cfg.recompute.numberCheckpoints > 0)
      aj["number_checkpoints"] = cfg.recompute.numberCheckpoints;
    else
      aj["interval"] = cfg.recompute.interval;
    root["activation_checkpointing"] = aj;
  }
  const PrecisionConfig &p = cfg.precision;
  ordered_json fp16;
  fp16["enabled"] = p.kind == Precision::FP16;
  fp16["auto_cast"] = p.fp16.autoCast;
  fp16["loss_scale"] = p.fp16.lossScale;
  fp16["initial_scale_power"] = p.fp16.initialScalePower;
  fp16["loss_scale_window"] = p.fp16.lossScaleWindow;
  fp16["hysteresis"] = p.fp16.hysteresis;
  fp16["consecutive_hysteresis"] = p.fp16.consecutiveHysteresis;
  fp16["min_loss_scale"] = p.fp16.minLossScale;
  root["fp16"] = fp16;
  ordered_json bf16;
  bf16["enabled"] = p.kind == Precision::BF16;
  bf16["immediate_grad_update"] = p.bf16.immediateGradUpdate;
  bf16["check_grad_overflow"] = p.bf16.checkGradOverflow;
  root["bf16"] = bf16;
  root["data_types"] = {
      {"grad_accum_dtype", precisionName(p.gradAccumDtype())}};
  root["communication_data_type"] = precisionName(p.communicationDataType());
  return root.dump(2);
}

} // namespace dsrt::config
