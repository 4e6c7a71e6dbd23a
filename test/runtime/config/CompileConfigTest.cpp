//===- CompileConfigTest.cpp - dsc's flags and ds_config, resolved --------===//
#include "tools/dsc/CompileConfig.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

namespace dsrt::config {
namespace {

/// A ds_config file with `json`, removed afterwards.
struct ConfigFile {
  std::string path;
  explicit ConfigFile(const std::string &json) {
    char name[] = "/tmp/dsc_compile_config_XXXXXX";
    int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    close(fd);
    path = name;
    std::ofstream(path) << json;
  }
  ~ConfigFile() { std::remove(path.c_str()); }
};

/// resolveCompileConfig's error, or "no error".
std::string errorOf(const CompileFlags &f, const ModelFacts &m = {4, 64}) {
  try {
    std::vector<std::string> notes;
    resolveCompileConfig(f, readCompileInput(f), m, notes);
  } catch (const ConfigError &e) {
    return e.what();
  }
  return "no error";
}

TEST(CompileConfig, WithoutAConfigTheModelsBatchAndDeepSpeedsDefaults) {
  CompileFlags f;
  f.dp = 2;
  CompileInput in = readCompileInput(f);
  EXPECT_FALSE(in.haveConfig);
  EXPECT_EQ(in.importBatch(f), 0); // a dynamic batch stays dynamic
  std::vector<std::string> notes;
  TrainConfig c = resolveCompileConfig(f, in, {8, 64}, notes);
  EXPECT_EQ(c.microBatchPerGpu, 8);
  EXPECT_EQ(c.gradAccumSteps, 1);
  EXPECT_EQ(c.worldSize, 2);
  EXPECT_EQ(c.trainBatchSize, 16);
  EXPECT_EQ(c.optimizer.type, defaultConfig().optimizer.type);
  // A pipeline without a config runs 2 x pp micro-batches.
  f.pp = 3;
  c = resolveCompileConfig(f, readCompileInput(f), {8, 64}, notes);
  EXPECT_EQ(c.gradAccumSteps, 6);
  EXPECT_EQ(c.trainBatchSize, 8 * 6 * 2);
}

TEST(CompileConfig, FlagsOverrideTheConfig) {
  ConfigFile cfg(R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
                     "zero_optimization": {"stage": 1}, "bf16": {"enabled": true}})");
  CompileFlags f;
  f.configPath = cfg.path;
  CompileInput in = readCompileInput(f);
  EXPECT_EQ(in.importBatch(f), 4); // a dynamic batch takes the config's micro-batch
  f.zeroStage = 3;
  f.precision = "fp32";
  f.microBatches = 5;
  std::vector<std::string> notes;
  TrainConfig c = resolveCompileConfig(f, readCompileInput(f), {4, 64}, notes);
  EXPECT_EQ(c.zero.stage, 3);
  EXPECT_EQ(c.precision.kind, Precision::FP32);
  EXPECT_EQ(c.gradAccumSteps, 5);
  EXPECT_EQ(c.trainBatchSize, 4 * 5);
  f.batchSize = 16;
  EXPECT_EQ(readCompileInput(f).importBatch(f), 16); // --batch-size wins
}

TEST(CompileConfig, AutoValuesTakeTheModels) {
  ConfigFile cfg(R"({"train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto",
                     "gradient_accumulation_steps": "auto",
                     "zero_optimization": {"stage": 2, "reduce_bucket_size": "auto"}})");
  CompileFlags f;
  f.configPath = cfg.path;
  CompileInput in = readCompileInput(f);
  EXPECT_TRUE(in.autoMicro);
  EXPECT_EQ(in.importBatch(f), 0);
  EXPECT_TRUE(in.notes.empty()); // said after the second reading
  std::vector<std::string> notes;
  TrainConfig c = resolveCompileConfig(f, in, {6, 32}, notes);
  EXPECT_EQ(c.microBatchPerGpu, 6);
  EXPECT_EQ(c.zero.reduceBucketSize, 32 * 32); // hidden^2
}

TEST(CompileConfig, CombinationsThatCannotCompileNameTheFlagOrKey) {
  ConfigFile four(R"({"train_micro_batch_size_per_gpu": 4})");
  CompileFlags f;
  f.configPath = four.path;
  EXPECT_EQ(errorOf(f, {8, 64}),
            four.path + ": train_micro_batch_size_per_gpu is 4 but the model's inputs have "
                        "batch size 8 (export the model with that batch, or with a dynamic "
                        "batch dimension)");
  CompileFlags sp;
  sp.sequenceParallel = true;
  EXPECT_NE(errorOf(sp).find("--sequence-parallel splits the tokens"), std::string::npos);
  sp.tp = 2;
  EXPECT_EQ(errorOf(sp), "no error");
  CompileFlags rc;
  rc.recompute = "auto";
  EXPECT_NE(errorOf(rc).find("--recompute auto needs --memory-budget"), std::string::npos);
  rc.memoryBudget = 1 << 20;
  EXPECT_EQ(errorOf(rc), "no error");
  CompileFlags sched;
  sched.schedule = "zb-h1";
  EXPECT_NE(errorOf(sched).find("--schedule: applies to a pipeline"), std::string::npos);
  sched.pp = 2;
  EXPECT_EQ(errorOf(sched), "no error");
  ConfigFile accum(R"({"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2},
                      "bf16": {"enabled": true}, "data_types": {"grad_accum_dtype": "bf16"}})");
  CompileFlags ga;
  ga.configPath = accum.path;
  EXPECT_NE(errorOf(ga).find(accum.path + ": data_types.grad_accum_dtype bf16 is supported with "
                                          "ZeRO stages 0-1"),
            std::string::npos);
  ga.zeroStage = 1;
  EXPECT_EQ(errorOf(ga), "no error");
}

TEST(CompileConfig, OneBitOptimizersWithOffloadAreAConfigRefusal) {
  // It used to reach the offload pass ("error: 'train.onebit_adam' op
  // offload: ...") without the config file's name.
  for (const char *opt : {"OneBitAdam", "ZeroOneAdam", "OneBitLamb"}) {
    ConfigFile cfg(std::string(R"({"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": ")") +
                   opt + R"("}, "zero_optimization": {"stage": 0, "offload_optimizer": {"device": "cpu"}}})");
    CompileFlags f;
    f.configPath = cfg.path;
    f.dp = 2;
    std::string e = errorOf(f);
    EXPECT_EQ(e.rfind(cfg.path + ": optimizer " + opt +
                          " with zero_optimization.offload_optimizer: dsc does not offload a "
                          "1-bit optimizer's state",
                      0),
              0u)
        << e;
  }
}

} // namespace
} // namespace dsrt::config
