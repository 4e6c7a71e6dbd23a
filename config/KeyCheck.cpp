//===- KeyCheck.cpp - the key table's gate before the section readers -----===//
//
// Walks a parsed ds_config against the key table (KeyTable.h) and returns
// what the section readers should see:
//
//  * Unknown keys: at the top level, DeepSpeed ignores them (configs carry
//    "_comment", "comms_config", ...), so dsc notes that the key has no
//    effect, unless it is a likely typo of a real key, which is an error
//    with "did you mean". Inside a section it is an error (DeepSpeed's
//    pydantic sections forbid extra keys too).
//  * Int keys written as a float with an integral value (2.0, 1e3) become
//    integers, as pydantic's lax mode takes them.
//  * Inert and Refused keys (with what a section switched off holds) are
//    checked here and removed; an Inert key away from its default is a note,
//    a Refused one an error.
//  * "auto" (the Hugging Face Trainer's placeholder) is resolved from what
//    dsc knows (AutoValues) and every choice is stated; the keys it cannot
//    resolve are named together in one error (docs/ds-config.md, "auto").
//
//===----------------------------------------------------------------------===//
#include "config/KeyTable.h"
#include "config/Readers.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace dsrt::config::detail {
namespace {

std::string joinPath(const std::string &section, const std::string &key) {
  return section.empty() ? key : section + "." + key;
}

/// `value` equals DeepSpeed's default (numbers by value: 1 == 1.0; a null
/// stands for "not given", as pydantic's Optional fields take it).
bool isDefault(const json &value, const KeySpec &spec) {
  if (value.is_null())
    return true;
  if (!spec.deepSpeedDefault)
    return false;
  json d = json::parse(spec.deepSpeedDefault);
  // An optional flag: unset is off.
  if (d.is_null() && spec.type == KeyType::Bool)
    return value.is_boolean() && !value.get<bool>();
  if (value.is_number() && d.is_number())
    return value.get<double>() == d.get<double>();
  return value == d;
}

/// The text a refusal or note quotes for `path`: the key's own, or the
/// nearest enclosing section's.
std::string whyOf(const std::string &path) {
  std::string p = path;
  while (!p.empty()) {
    if (const KeySpec *s = findKey(p); s && s->why)
      return s->why;
    size_t dot = p.rfind('.');
    p = dot == std::string::npos ? std::string() : p.substr(0, dot);
  }
  return "";
}

/// The switch of a section (its "enabled" or "device" child), if it has one.
const KeySpec *switchOf(const std::string &section) {
  for (const std::string &child : childKeys(section))
    if (const KeySpec *s = findKey(joinPath(section, child)); s && s->isSwitch)
      return s;
  return nullptr;
}

/// The table's entry for `key` inside the section the table calls
/// `tableSection` (a user-chosen name matches a "*" entry), and its table
/// path.
const KeySpec *lookup(const std::string &tableSection, const std::string &key,
                      std::string &tablePath) {
  tablePath = joinPath(tableSection, key);
  if (const KeySpec *s = findKey(tablePath))
    return s;
  tablePath = joinPath(tableSection, "*");
  return findKey(tablePath);
}

std::string lastComponent(const std::string &path) {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

/// The value's JSON type fits DeepSpeed's (a bool is not a number, as in
/// DeepSpeed's validators; null is "not given").
bool typeFits(const json &v, KeyType t) {
  switch (t) {
  case KeyType::Int:
    return v.is_null() || v.is_number_integer() ||
           (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()));
  case KeyType::Float:
    return v.is_null() || v.is_number();
  case KeyType::Bool:
    return v.is_null() || v.is_boolean();
  case KeyType::Str:
    return v.is_null() || v.is_string();
  case KeyType::Dict:
    return v.is_null() || v.is_object() || v.is_boolean();
  case KeyType::List:
    return v.is_null() || v.is_array();
  case KeyType::Any:
    return true;
  }
  return true;
}

const char *typeWanted(KeyType t) {
  switch (t) {
  case KeyType::Int:
    return "an integer";
  case KeyType::Float:
    return "a number";
  case KeyType::Bool:
    return "true or false";
  case KeyType::Str:
    return "a string";
  case KeyType::Dict:
    return "an object";
  case KeyType::List:
    return "an array";
  case KeyType::Any:
    return "a value";
  }
  return "a value";
}

class Walker {
public:
  Walker(const std::string &source, const AutoValues &autos, std::vector<std::string> &notes)
      : source_(source), autos_(autos), notes_(notes) {}

  [[noreturn]] void fail(const std::string &message) const {
    throw ConfigError(source_ + ": " + message);
  }

  /// Checks the object at `section` in place (`obj` is a copy the readers
  /// will see), removing what they must not.
  void walk(const std::string &section, json &obj) { walk(section, section, obj); }

  void walk(const std::string &section, const std::string &tableSection, json &obj) {
    std::vector<std::string> erase;
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      const std::string &key = it.key();
      std::string path = joinPath(section, key), tablePath;
      const KeySpec *spec = lookup(tableSection, key, tablePath);
      if (!spec) {
        unknown(section, tableSection, key);
        erase.push_back(key);
        continue;
      }
      json &value = it.value();
      // null where DeepSpeed's default is null: "not given" (pydantic's
      // Optional fields, get_scalar_param's None).
      if (value.is_null() && spec->kind == KeyKind::Implemented &&
          (!spec->deepSpeedDefault || std::string(spec->deepSpeedDefault) == "null")) {
        erase.push_back(key);
        continue;
      }
      if (value.is_string() && value.get<std::string>() == "auto" &&
          spec->type != KeyType::Str) {
        if (!resolveAuto(*spec, value))
          erase.push_back(key);
        continue;
      }
      if (spec->type == KeyType::Int && value.is_number_float()) {
        double d = value.get<double>();
        // Integral and within int64: the readers range-check it further.
        if (d == std::floor(d) && d >= -9223372036854775808.0 && d < 9223372036854775808.0)
          value = static_cast<int64_t>(d);
      }
      if (spec->kind != KeyKind::Implemented)
        checkType(*spec, path, value);
      switch (spec->kind) {
      case KeyKind::Implemented:
        if (value.is_object() && !spec->freeForm)
          walk(path, tablePath, value);
        else if (value.is_object())
          resolveAutoInside(path, value);
        break;
      case KeyKind::Inert:
        inert(*spec, path, tablePath, value);
        erase.push_back(key);
        break;
      case KeyKind::Refused:
        refused(*spec, path, tablePath, value);
        erase.push_back(key);
        break;
      }
    }
    for (const std::string &key : erase)
      obj.erase(key);
  }

  /// Reports the refused keys, then the "auto" keys left unresolved, each
  /// set at once (a user fixes them in one pass).
  void finish() const {
    if (refusals_.size() == 1)
      fail(refusals_[0]);
    if (!refusals_.empty()) {
      std::string list;
      for (const std::string &r : refusals_)
        list += "\n  " + r;
      fail(std::to_string(refusals_.size()) + " settings ask for what dsc does not have:" + list);
    }
    if (unresolved_.empty())
      return;
    std::string list;
    for (const std::string &u : unresolved_)
      list += "\n  " + u;
    fail("\"auto\" values that dsc cannot fill in (the Hugging Face Trainer fills them from its "
         "TrainingArguments; dsc has no Trainer):" +
         list + "\nwrite a value for each, or give what the message names");
  }

private:
  /// The section readers check the types of what they read; the keys the
  /// table handles are checked here.
  void checkType(const KeySpec &spec, const std::string &path, const json &value) const {
    if (!typeFits(value, spec.type))
      fail("'" + path + "' must be " + typeWanted(spec.type) + ", got " + shown(value));
  }

  void unknown(const std::string &section, const std::string &tableSection,
               const std::string &key) {
    std::vector<std::string> known = childKeys(tableSection);
    std::string suggestion = didYouMean(key, known);
    std::string path = joinPath(section, key);
    if (!section.empty()) {
      const KeySpec *parent = findKey(tableSection);
      // A section DeepSpeed reads as a plain dict ignores unknown keys; dsc
      // still wants to catch typos in it, and notes the rest.
      if (parent && (parent->kind != KeyKind::Implemented || parent->dictRead) &&
          suggestion.empty()) {
        notes_.push_back("'" + path + "' is not a key of DeepSpeed's '" + section +
                         "' section: it has no effect");
        return;
      }
      fail("unknown key '" + path + "'" + suggestion);
    }
    if (!suggestion.empty())
      fail("unknown key '" + path + "'" + suggestion);
    notes_.push_back("'" + path +
                     "' is not a DeepSpeed key: DeepSpeed ignores it, and so does dsc");
  }

  void inert(const KeySpec &spec, const std::string &path, const std::string &tablePath,
             const json &value) {
    if (value.is_object() && !spec.freeForm) {
      // Each key inside: a note where it leaves its default (an error for
      // one that is refused, such as DeepCompile's offload).
      walkStrict(path, tablePath, value);
      return;
    }
    if (!isDefault(value, spec))
      notes_.push_back("'" + path + "' is " + shown(value) + ": accepted, it changes nothing "
                       "in dsc: " + whyOf(tablePath));
  }

  void refused(const KeySpec &spec, const std::string &path, const std::string &tablePath,
               const json &value) {
    if (spec.type == KeyType::Dict && value.is_object()) {
      const KeySpec *sw = switchOf(tablePath);
      std::string swKey = sw ? lastComponent(sw->path) : "";
      bool off = sw && (!value.contains(swKey) || isDefault(value.at(swKey), *sw) ||
                        (value.at(swKey).is_string() && value.at(swKey) == "auto"));
      if (off || spec.freeForm) {
        if (!spec.freeForm)
          walkQuiet(path, tablePath, value);
        if (!off)
          refuse("'" + path + "' is not supported by dsc: " + whyOf(tablePath));
        return;
      }
      if (sw) {
        refuse("'" + joinPath(path, swKey) + "' is " + value.at(swKey).dump() +
               ": not supported by dsc: " + whyOf(tablePath));
        return;
      }
      // No switch: each key inside must ask for nothing.
      walkStrict(path, tablePath, value);
      return;
    }
    if (spec.type == KeyType::Dict && value.is_boolean() && !value.get<bool>())
      return; // "amp": false, DeepSpeed's boolean shorthand for off
    if (!isDefault(value, spec))
      refuse("'" + path + "' is " + shown(value) + ": not supported by dsc: " + whyOf(tablePath));
  }

  /// Calls `visit(spec, path, tablePath, value)` for each key of `obj`
  /// that the table knows; an unknown one is reported as such.
  template <typename Visit>
  void forEachKnown(const std::string &section, const std::string &tableSection,
                    const json &obj, Visit visit) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      std::string path = joinPath(section, it.key()), tablePath;
      if (const KeySpec *spec = lookup(tableSection, it.key(), tablePath))
        visit(*spec, path, tablePath, it.value());
      else
        unknown(section, tableSection, it.key());
    }
  }

  /// The keys inside a section that asks for nothing: names and types are
  /// checked (typos are errors), values are not.
  void walkQuiet(const std::string &section, const std::string &tableSection, const json &obj) {
    forEachKnown(section, tableSection, obj,
                 [&](const KeySpec &spec, const std::string &path, const std::string &tablePath,
                     const json &v) {
                   if (!(v.is_string() && v == "auto"))
                     checkType(spec, path, v);
                   if (v.is_object() && !spec.freeForm)
                     walkQuiet(path, tablePath, v);
                 });
  }

  /// A refused section without a switch, or an accepted one: every key in
  /// it must hold its default (a note for an accepted key that does not).
  void walkStrict(const std::string &section, const std::string &tableSection, const json &obj) {
    forEachKnown(section, tableSection, obj,
                 [&](const KeySpec &spec, const std::string &path, const std::string &tablePath,
                     const json &v) {
                   if (v.is_string() && v == "auto" && spec.type != KeyType::Str)
                     return;
                   checkType(spec, path, v);
                   if (spec.kind == KeyKind::Inert)
                     inert(spec, path, tablePath, v);
                   else if (v.is_object() && !spec.freeForm)
                     refused(spec, path, tablePath, v);
                   else if (!isDefault(v, spec))
                     refuse("'" + path + "' is " + shown(v) + ": not supported by dsc: " +
                            whyOf(tablePath));
                 });
  }

  /// "auto": replaces `value` with what dsc resolves, or returns false to
  /// drop the key (DeepSpeed's own rule for its pydantic sections: an "auto"
  /// value is as if the key were absent).
  /// optimizer.params and scheduler.params: the Trainer's "auto" keys there.
  void resolveAutoInside(const std::string &section, json &obj) {
    std::vector<std::string> erase;
    for (auto it = obj.begin(); it != obj.end(); ++it)
      if (it.value().is_string() && it.value() == "auto" &&
          !resolveAuto(joinPath(section, it.key()), KeyKind::Implemented, it.value()))
        erase.push_back(it.key());
    for (const std::string &key : erase)
      obj.erase(key);
  }

  bool resolveAuto(const KeySpec &spec, json &value) {
    return resolveAuto(spec.path, spec.kind, value);
  }

  bool resolveAuto(const std::string &path, KeyKind kind, json &value) {
    auto chose = [&](const json &v, const std::string &from) {
      value = v;
      notes_.push_back("'" + path + "' is \"auto\": dsc chose " + v.dump() + " (" + from + ")");
      return true;
    };
    auto missing = [&](const std::string &what) {
      unresolved_.push_back("'" + path + "': " + what);
      return false;
    };
    if (path == "pipeline.stages")
      return false; // DeepSpeed's default: the stages of the PipelineModule; dsc's: --pp
    if (path == "train_micro_batch_size_per_gpu") {
      if (!autos_.microBatch)
        return missing("the model's batch dimension is dynamic: give dsc --batch-size N");
      return chose(*autos_.microBatch, "the batch dimension of the model's inputs");
    }
    if (path == "gradient_accumulation_steps")
      return chose(autos_.gradAccumSteps.value_or(1),
                   autos_.gradAccumSteps ? "dsc --micro-batches"
                                         : "the Trainer's default; dsc --micro-batches sets it");
    if (path == "train_batch_size") {
      notes_.push_back("'train_batch_size' is \"auto\": dsc derives it as micro-batch x "
                       "gradient_accumulation_steps x data-parallel ranks");
      return false;
    }
    if (path == "gradient_clipping")
      return chose(1.0, "the Trainer's default max_grad_norm");
    if (path == "fp16.enabled" || path == "bf16.enabled" || path == "bfloat16.enabled") {
      Precision want = path == "fp16.enabled" ? Precision::FP16 : Precision::BF16;
      bool on = autos_.precision && *autos_.precision == want;
      return chose(on, autos_.precision ? "dsc --precision " +
                                              std::string(precisionName(*autos_.precision))
                                        : "no dsc --precision: fp32, the Trainer's default");
    }
    if (path == "zero_optimization.reduce_bucket_size" ||
        path == "zero_optimization.stage3_prefetch_bucket_size" ||
        path == "zero_optimization.prefetch_bucket_size" ||
        path == "zero_optimization.stage3_param_persistence_threshold" ||
        path == "zero_optimization.param_persistence_threshold") {
      if (!autos_.hiddenSize)
        return missing("the model's hidden size is not known here");
      int64_t h = *autos_.hiddenSize;
      std::string from = "hidden size " + std::to_string(h) + ": ";
      if (path == "zero_optimization.reduce_bucket_size")
        return chose(h * h, from + "hidden x hidden, as the Trainer's integration does");
      if (path.find("prefetch") != std::string::npos)
        return chose(static_cast<int64_t>(0.9 * double(h) * double(h)),
                     from + "0.9 x hidden x hidden, as the Trainer's integration does");
      return chose(10 * h, from + "10 x hidden, as the Trainer's integration does");
    }
    if (path == "optimizer.params.lr")
      return chose(5e-5, "the Trainer's default learning_rate");
    if (path == "optimizer.params.betas")
      return chose(json::array({0.9, 0.999}), "the Trainer's default adam_beta1, adam_beta2");
    if (path == "optimizer.params.eps")
      return chose(1e-8, "the Trainer's default adam_epsilon");
    if (path == "optimizer.params.weight_decay")
      return chose(0.0, "the Trainer's default weight_decay");
    if (path == "scheduler.params.warmup_min_lr")
      return chose(0, "the Trainer's choice");
    if (path == "scheduler.params.warmup_max_lr") {
      // The optimizer's lr, once it is resolved too (fillWarmupMaxLr).
      warmupMaxLrAuto = true;
      return true;
    }
    if (path == "scheduler.params.warmup_num_steps")
      return chose(0, "the Trainer's default warmup_steps");
    if (path == "scheduler.params.total_num_steps") {
      if (autos_.totalSteps)
        return chose(*autos_.totalSteps, "the run's --steps");
      if (!autos_.runLengthAtRun)
        return missing("the Trainer gives the run's length (max_steps); write the number of "
                       "steps");
      // A stand-in until dsrt knows --steps.
      totalStepsFromRun = true;
      value = 1;
      notes_.push_back("'" + path + "' is \"auto\": dsrt takes the run's length, --steps, as "
                       "the Trainer takes max_steps");
      return true;
    }
    if (kind != KeyKind::Implemented)
      return false; // DeepSpeed's rule: as if absent
    if (path.rfind("zero_optimization.", 0) == 0 || path.rfind("fp16.", 0) == 0 ||
        path.rfind("bf16.", 0) == 0) {
      // pydantic sections: DeepSpeed drops "auto" (the default applies).
      notes_.push_back("'" + path + "' is \"auto\": DeepSpeed's default applies");
      return false;
    }
    return missing("dsc has no rule to fill it in");
  }

public:
  bool warmupMaxLrAuto = false;
  bool totalStepsFromRun = false;

  /// scheduler.params.warmup_max_lr "auto": the optimizer's lr, as the
  /// Trainer fills it (FusedAdam's default 1e-3 without one).
  void fillWarmupMaxLr(json &root) {
    double lr = 1e-3;
    if (root.contains("optimizer") && root["optimizer"].is_object() &&
        root["optimizer"].contains("params") && root["optimizer"]["params"].is_object() &&
        root["optimizer"]["params"].contains("lr") &&
        root["optimizer"]["params"]["lr"].is_number())
      lr = root["optimizer"]["params"]["lr"].get<double>();
    root["scheduler"]["params"]["warmup_max_lr"] = lr;
    notes_.push_back("'scheduler.params.warmup_max_lr' is \"auto\": dsc chose " +
                     formatNumber(lr) + " (the optimizer's lr, as the Trainer does)");
  }

private:
  const std::string &source_;
  const AutoValues &autos_;
  std::vector<std::string> &notes_;
  std::vector<std::string> unresolved_;
  std::vector<std::string> refusals_;

  void refuse(const std::string &message) { refusals_.push_back(message); }
};

} // namespace

json checkAgainstKeyTable(const json &root, const std::string &source, const AutoValues &autos,
                          std::vector<std::string> &notes, bool &totalStepsFromRun) {
  json copy = root;
  Walker walker(source, autos, notes);
  walker.walk("", copy);
  walker.finish();
  // No batch size at all: DeepSpeed would stop ("either train_batch_size or
  // train_micro_batch_size_per_gpu needs to be provided"); a script gives
  // it through its DataLoader, and dsc's model states it.
  if (!copy.contains("train_batch_size") && !copy.contains("train_micro_batch_size_per_gpu") &&
      autos.microBatch) {
    copy["train_micro_batch_size_per_gpu"] = *autos.microBatch;
    notes.push_back("no train_batch_size or train_micro_batch_size_per_gpu: dsc takes the "
                    "micro-batch " + std::to_string(*autos.microBatch) +
                    " from the batch dimension of the model's inputs (or --batch-size)");
  }
  if (walker.warmupMaxLrAuto)
    walker.fillWarmupMaxLr(copy);
  totalStepsFromRun = walker.totalStepsFromRun;
  return copy;
}

} // namespace dsrt::config::detail
