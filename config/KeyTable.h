//===- KeyTable.h - every key DeepSpeed's config reads, and what dsc does ===//
//
// One table of every ds_config key DeepSpeed reads (DeepSpeed
// kDeepSpeedKeysCommit, listed by scripts/deepspeed_config_keys.py in
// test/config/deepspeed-keys.tsv; KeyTableTest keeps the two in step), plus
// dsc's own keys. Each key is one of:
//
//  * Implemented: a section reader (DsConfig*.cpp) reads it.
//  * Inert: accepted whatever its value, because no value asks for anything
//    dsc would do differently (a permission such as
//    zero_allow_untested_optimizer, a print setting, a key that only matters
//    to a feature that is off). A value other than DeepSpeed's default gets
//    a one-line note saying why it changes nothing.
//  * Refused: a feature dsc does not have. Its default value, or a section
//    switched off ("enabled": false, "device": "none"), asks for nothing and
//    is accepted; any other value is an error that names the key, says what
//    DeepSpeed would do with it and what dsc offers instead.
//
// The parser consults the table before the section readers run
// (KeyCheck.cpp); docs/ds-config-keys.md is rendered from it (dsc
// --list-config-keys).
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_CONFIG_KEYTABLE_H
#define DSRT_CONFIG_KEYTABLE_H

#include <string>
#include <string_view>
#include <vector>

namespace dsrt::config {

/// The DeepSpeed commit whose keys the table holds: the one
/// test/config/deepspeed-keys.tsv was listed at (its first line names it;
/// KeyTableTest checks that the two agree). edaa7221267243c7be7fb49c5d5f5c4fb97b4641
/// is deepspeedai/DeepSpeed master of 2026-08-22, after release v0.19.5.
inline constexpr const char *kDeepSpeedKeysCommit = "edaa72212";

enum class KeyKind { Implemented, Inert, Refused };

/// The type DeepSpeed reads a key as (pydantic's field type, or what the
/// dict-reading code does with it). Int keys take a float with an integral
/// value (2.0, 5e8), as pydantic does.
enum class KeyType { Int, Float, Bool, Str, Dict, List, Any };

struct KeySpec {
  /// Dotted path from the top level: "zero_optimization.offload_param.device".
  const char *path;
  KeyKind kind;
  KeyType type;
  /// DeepSpeed's default as JSON text, or nullptr where it has none (a
  /// required key, a computed default).
  const char *deepSpeedDefault;
  /// Inert: why a non-default value changes nothing. Refused: what DeepSpeed
  /// does with it and what dsc offers instead. nullptr: the enclosing
  /// section's text applies.
  const char *why = nullptr;
  /// A section whose keys are free-form (optimizer.params: keyword arguments
  /// of the optimizer's class), read by its reader or not checked key by key.
  bool freeForm = false;
  /// Not a DeepSpeed key: dsc's own (pipeline.schedule,
  /// activation_checkpointing.recompute, ...).
  bool dscOnly = false;
  /// A section's switch: the section asks for nothing while this key holds
  /// its default (the "enabled" of most sections, offload's "device").
  bool isSwitch = false;
  /// A section DeepSpeed reads as a plain dict (dict.get), not a pydantic
  /// model: a key it does not know is a note, not an error, also when the
  /// section is implemented ("aio").
  bool dictRead = false;
};

/// Every entry, sections before their keys.
const std::vector<KeySpec> &keyTable();

/// The entry for a dotted path, or nullptr.
const KeySpec *findKey(std::string_view path);

/// The direct children of a section ("" for the top level), by their last
/// path component.
std::vector<std::string> childKeys(std::string_view section);

const char *keyKindName(KeyKind k);
const char *keyTypeName(KeyType t);

/// The table as a Markdown page (docs/ds-config-keys.md).
std::string renderKeyTableMarkdown();

} // namespace dsrt::config

#endif // DSRT_CONFIG_KEYTABLE_H
