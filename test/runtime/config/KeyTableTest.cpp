//===- KeyTableTest.cpp - the key table against DeepSpeed's keys ----------===//
//
// test/config/deepspeed-keys.tsv lists every key DeepSpeed reads at commit
// kDeepSpeedKeysCommit (config/KeyTable.h: edaa72212, master of 2026-08-22,
// after v0.19.5), found by scripts/deepspeed_config_keys.py in its source; the
// tsv's first line names that commit. The table must hold each key, with
// DeepSpeed's type and default, and nothing DeepSpeed does not read unless it
// is marked as dsc's own; docs/ds-config-keys.md must be the page rendered
// from it.
//
//===----------------------------------------------------------------------===//
#include "config/DsConfig.h"
#include "config/KeyTable.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

using namespace dsrt::config;
using json = nlohmann::json;

namespace {

struct DsKey {
  std::string type, defaultText;
};

std::map<std::string, DsKey> deepSpeedKeys() {
  std::ifstream in(std::string(DSC_SOURCE_DIR) + "/test/config/deepspeed-keys.tsv");
  std::map<std::string, DsKey> keys;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    std::istringstream fields(line);
    std::string path, type, def;
    std::getline(fields, path, '\t');
    std::getline(fields, type, '\t');
    std::getline(fields, def);
    keys[path] = {type, def};
  }
  return keys;
}

/// DeepSpeed's default as the table states it, compared as JSON (1 == 1.0).
bool sameDefault(const char *table, const std::string &tsv) {
  if (tsv == "-")
    return true; // none stated, or computed: the table may state its own
  if (!table)
    return tsv == "null";
  json a = json::parse(table), b = json::parse(tsv, nullptr, false);
  if (b.is_discarded())
    return false;
  if (a.is_number() && b.is_number())
    return a.get<double>() == b.get<double>();
  return a == b;
}

} // namespace

// The tsv and the table name the same DeepSpeed commit: refreshing one
// without the other fails here.
TEST(KeyTable, ChecksTheKeysOfItsDeepSpeedCommit) {
  RecordProperty("deepspeed_commit", kDeepSpeedKeysCommit);
  std::ifstream in(std::string(DSC_SOURCE_DIR) + "/test/config/deepspeed-keys.tsv");
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, std::string("# DeepSpeed ") + kDeepSpeedKeysCommit +
                       " (deepspeedai/DeepSpeed), scripts/deepspeed_config_keys.py")
      << "test/config/deepspeed-keys.tsv was not listed at DeepSpeed " << kDeepSpeedKeysCommit
      << " (config/KeyTable.h): run scripts/deepspeed_config_keys.py --commit SHA over that "
         "commit, or update kDeepSpeedKeysCommit with the table";
}

TEST(KeyTable, HoldsEveryDeepSpeedKey) {
  std::map<std::string, DsKey> keys = deepSpeedKeys();
  ASSERT_GT(keys.size(), 200u) << "test/config/deepspeed-keys.tsv missing or short";
  for (const auto &[path, k] : keys) {
    const KeySpec *spec = findKey(path);
    ASSERT_NE(spec, nullptr) << "DeepSpeed " << kDeepSpeedKeysCommit << " reads '" << path
                             << "': add it to config/KeyTable.cpp";
    EXPECT_FALSE(spec->dscOnly) << path << " is DeepSpeed's, not dsc's own";
    if (k.type != "any" && spec->type != KeyType::Any) {
      EXPECT_EQ(keyTypeName(spec->type), k.type) << path;
    }
    EXPECT_TRUE(sameDefault(spec->deepSpeedDefault, k.defaultText))
        << path << ": the table says " << (spec->deepSpeedDefault ? spec->deepSpeedDefault : "-")
        << ", DeepSpeed " << k.defaultText;
  }
}

TEST(KeyTable, InventsNoKey) {
  std::map<std::string, DsKey> keys = deepSpeedKeys();
  for (const KeySpec &spec : keyTable()) {
    if (spec.dscOnly)
      continue;
    EXPECT_TRUE(keys.count(spec.path))
        << spec.path << " is in the table but DeepSpeed " << kDeepSpeedKeysCommit
        << " does not read it (mark dsc's own keys)";
  }
}

TEST(KeyTable, EverySectionIsListedBeforeItsKeys) {
  for (const KeySpec &spec : keyTable()) {
    std::string p = spec.path;
    size_t dot = p.rfind('.');
    if (dot == std::string::npos)
      continue;
    const KeySpec *parent = findKey(p.substr(0, dot));
    ASSERT_NE(parent, nullptr) << p << ": its section is not in the table";
    EXPECT_EQ(parent->type, KeyType::Dict) << p;
  }
}

TEST(KeyTable, RefusedKeysSayWhy) {
  for (const KeySpec &spec : keyTable()) {
    if (spec.kind == KeyKind::Implemented)
      continue;
    std::string p = spec.path;
    bool found = spec.why != nullptr;
    for (size_t dot; !found && (dot = p.rfind('.')) != std::string::npos;) {
      p = p.substr(0, dot);
      found = findKey(p)->why != nullptr;
    }
    EXPECT_TRUE(found) << spec.path << " is " << keyKindName(spec.kind) << " without a reason";
  }
}

// Every implemented key at DeepSpeed's default is read (the section readers
// and the table agree on what is implemented).
TEST(KeyTable, ImplementedKeysAtTheirDefaultParse) {
  for (const KeySpec &spec : keyTable()) {
    if (spec.kind != KeyKind::Implemented || !spec.deepSpeedDefault ||
        spec.type == KeyType::Dict)
      continue;
    std::string p = spec.path;
    json root = {{p == "train_batch_size" ? "train_micro_batch_size_per_gpu" : "train_batch_size", 1}};
    json *at = &root;
    size_t start = 0;
    for (size_t dot; (dot = p.find('.', start)) != std::string::npos; start = dot + 1)
      at = &(*at)[p.substr(start, dot - start)];
    (*at)[p.substr(start)] = json::parse(spec.deepSpeedDefault);
    // Sections that need a companion key to be read at all.
    if (root.contains("optimizer"))
      root["optimizer"]["type"] = "AdamW";
    if (root.contains("scheduler"))
      root["scheduler"]["type"] = "WarmupLR";
    if (root.contains("bf16") && p.rfind("bfloat16", 0) == 0)
      root.erase("bf16");
    EXPECT_NO_THROW(parseDsConfig(root.dump())) << p << " = " << spec.deepSpeedDefault;
    // DeepSpeed's default means what leaving the key out means.
    json without = root;
    json *in = &without;
    start = 0;
    for (size_t dot; (dot = p.find('.', start)) != std::string::npos; start = dot + 1)
      in = &(*in)[p.substr(start, dot - start)];
    in->erase(p.substr(start));
    // (Not the batch keys, which derive each other, nor dsc's interval,
    // which asks for layer recompute.)
    if (p != "train_batch_size" && p != "train_micro_batch_size_per_gpu" &&
        p != "gradient_accumulation_steps" && p != "activation_checkpointing.interval") {
      EXPECT_EQ(parseDsConfig(root.dump()), parseDsConfig(without.dump()))
          << p << " = " << spec.deepSpeedDefault << " is not dsc's default";
    }
  }
}

TEST(KeyTable, DocsPageIsTheRenderedTable) {
  std::ifstream in(std::string(DSC_SOURCE_DIR) + "/docs/ds-config-keys.md");
  std::stringstream page;
  page << in.rdbuf();
  EXPECT_EQ(page.str(), renderKeyTableMarkdown())
      << "docs/ds-config-keys.md is stale: regenerate it with "
         "build/bin/dsc --list-config-keys > docs/ds-config-keys.md";
}
