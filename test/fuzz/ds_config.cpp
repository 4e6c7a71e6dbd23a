//===- ds_config.cpp - fuzz the ds_config parser ---------------------------===//
//
// Input: ds_config JSON text. parseDsConfig must either return a config or
// throw ConfigError. A parsed config must survive its canonical form
// (parseDsConfig(toJson(c)) == c, what dsc bakes into a plan and dsrt reads
// back) and its lr schedule must be computable at any step.
//
//===----------------------------------------------------------------------===//
#include "config/DsConfig.h"
#include "config/LrSchedule.h"
#include "test/fuzz/FuzzUtil.h"

#include <cmath>

using namespace dsrt::config;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  TrainConfig cfg;
  try {
    cfg = parseDsConfig(text, "fuzz.json", 1);
  } catch (const ConfigError &e) {
    dsc::fuzz::note(e.what());
    return 0;
  } catch (const std::exception &e) {
    if (!dsc::fuzz::lenient())
      dsc::fuzz::foreignException("ds_config", e);
    return 0;
  }
  std::string canonical = toJson(cfg);
  TrainConfig again;
  try {
    again = parseDsConfig(canonical, "canonical.json", cfg.worldSize);
  } catch (const std::exception &e) {
    std::fprintf(stderr,
                 "ds_config: the canonical form of an accepted config is rejected: %s\n%s\n",
                 e.what(), canonical.c_str());
    std::abort();
  }
  if (again != cfg) {
    std::fprintf(stderr, "ds_config: the canonical form reads back differently:\n%s\n",
                 canonical.c_str());
    std::abort();
  }
  volatile double sink = 0;
  for (int64_t step : {int64_t(0), int64_t(1), int64_t(2), int64_t(1000), int64_t(1) << 40}) {
    try {
      sink = sink + learningRate(cfg, step);
      AdamBetas b = betasAt(cfg, step);
      sink = sink + b.beta1 + b.beta2;
    } catch (const ConfigError &e) {
      dsc::fuzz::note(e.what());
    }
  }
  (void)sink;
  return 0;
}
