//===- DsConfigTest.cpp - ds_config.json parsing tests --------------------===//
//
// Defaults, DeepSpeed's batch and optimizer rules, every error path (each
// message pinned so the key path and suggestion stay visible to users) and
// the canonical round trip.
//
//===----------------------------------------------------------------------===//
#include "config/DsConfig.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

using namespace dsrt::config;

namespace {

TrainConfig parse(const std::string &text, int64_t worldSize = 1) {
  return parseDsConfig(text, "ds_config.json", worldSize);
}

/// The ConfigError message for `text`, or a test failure if it parses.
std::string errorOf(const std::string &text, int64_t worldSize = 1) {
  try {
    parse(text, worldSize);
  } catch (const ConfigError &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError for: " << text;
  return "";
}

/// Wraps optimizer JSON into a config with a batch size.
std::string withOptimizer(const std::string &optimizer) {
  return R"({"train_batch_size": 8, "optimizer": )" + optimizer + "}";
}
std::string withScheduler(const std::string &scheduler) {
  return R"({"train_batch_size": 8, "scheduler": )" + scheduler + "}";
}

} // namespace

//===--- defaults ---------------------------------------------------------===//

TEST(DsConfig, DefaultsWithOnlyABatchSize) {
  TrainConfig c = parse(R"({"train_batch_size": 8})");
  EXPECT_EQ(c.trainBatchSize, 8);
  EXPECT_EQ(c.microBatchPerGpu, 8);
  EXPECT_EQ(c.gradAccumSteps, 1);
  EXPECT_EQ(c.worldSize, 1);
  // DeepSpeed clips at 1.0 by default since PR #8068.
  EXPECT_EQ(c.gradientClipping, 1.0);
  EXPECT_EQ(c.stepsPerPrint, 0);
  EXPECT_TRUE(c.scheduler.type.empty());
  EXPECT_FALSE(c.wallClockBreakdown);
  EXPECT_EQ(c.zero, ZeroConfig());
  EXPECT_EQ(c.zero.stage, 0);
  // No optimizer section: AdamW with FusedAdam's defaults.
  const OptimizerConfig &o = c.optimizer;
  EXPECT_EQ(o.type, "AdamW");
  EXPECT_EQ(o.lr, 1e-3);
  EXPECT_EQ(o.beta1, 0.9);
  EXPECT_EQ(o.beta2, 0.999);
  EXPECT_EQ(o.eps, 1e-8);
  EXPECT_EQ(o.weightDecay, 0.0);
  EXPECT_TRUE(o.decoupled);
  EXPECT_TRUE(o.biasCorrection);
  EXPECT_FALSE(o.torchAdam);
}

TEST(DsConfig, DefaultConfig) {
  TrainConfig c = defaultConfig();
  EXPECT_EQ(c.trainBatchSize, 1);
  EXPECT_EQ(c.microBatchPerGpu, 1);
  EXPECT_EQ(c.gradAccumSteps, 1);
  EXPECT_EQ(c.optimizer, parse(R"({"train_batch_size": 1})").optimizer);
  EXPECT_EQ(c, parse(R"({"train_batch_size": 1})"));
}

TEST(DsConfig, CommentsAreAccepted) {
  TrainConfig c = parse("{\n  // batch\n  \"train_batch_size\": 4 /* x */\n}");
  EXPECT_EQ(c.trainBatchSize, 4);
}

TEST(DsConfig, TopLevelScalars) {
  TrainConfig c = parse(
      R"({"train_batch_size": 8, "gradient_clipping": 1, "steps_per_print": 5})");
  EXPECT_EQ(c.gradientClipping, 1.0);
  EXPECT_EQ(c.stepsPerPrint, 5);
}

//===--- batch relation ---------------------------------------------------===//

TEST(DsConfig, BatchDerivations) {
  TrainConfig c = parse(
      R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4})", 2);
  EXPECT_EQ(c.gradAccumSteps, 4);
  EXPECT_EQ(c.worldSize, 2);
  c = parse(R"({"train_batch_size": 32, "gradient_accumulation_steps": 4})", 2);
  EXPECT_EQ(c.microBatchPerGpu, 4);
  c = parse(R"({"train_micro_batch_size_per_gpu": 3,
                "gradient_accumulation_steps": 5})",
            2);
  EXPECT_EQ(c.trainBatchSize, 30);
  c = parse(R"({"train_micro_batch_size_per_gpu": 3})", 4);
  EXPECT_EQ(c.trainBatchSize, 12);
  EXPECT_EQ(c.gradAccumSteps, 1);
  c = parse(R"({"train_batch_size": 12})", 4);
  EXPECT_EQ(c.microBatchPerGpu, 3);
  EXPECT_EQ(c.gradAccumSteps, 1);
  c = parse(R"({"train_batch_size": 24, "train_micro_batch_size_per_gpu": 3,
                "gradient_accumulation_steps": 4})",
            2);
  EXPECT_EQ(c.trainBatchSize, 24);
}

/// train_batch_size = micro x gas x world for world 1, 2 and 4, whichever
/// value is derived.
TEST(DsConfig, BatchRelationAcrossWorldSizes) {
  for (int64_t world : {1, 2, 4}) {
    SCOPED_TRACE("world " + std::to_string(world));
    std::string tbs = std::to_string(4 * 2 * world);
    TrainConfig all = parse(R"({"train_batch_size": )" + tbs +
                                R"(, "train_micro_batch_size_per_gpu": 4,
                                "gradient_accumulation_steps": 2})",
                            world);
    EXPECT_EQ(all.trainBatchSize, 8 * world);
    EXPECT_EQ(all.microBatchPerGpu, 4);
    EXPECT_EQ(all.gradAccumSteps, 2);
    EXPECT_EQ(all.worldSize, world);
    // Any two give the same config.
    EXPECT_EQ(parse(R"({"train_batch_size": )" + tbs +
                        R"(, "train_micro_batch_size_per_gpu": 4})",
                    world),
              all);
    EXPECT_EQ(parse(R"({"train_batch_size": )" + tbs +
                        R"(, "gradient_accumulation_steps": 2})",
                    world),
              all);
    EXPECT_EQ(parse(R"({"train_micro_batch_size_per_gpu": 4,
                        "gradient_accumulation_steps": 2})",
                    world),
              all);
    // One alone: gas 1.
    TrainConfig tbsOnly = parse(R"({"train_batch_size": )" + tbs + "}", world);
    EXPECT_EQ(tbsOnly.microBatchPerGpu, 8);
    EXPECT_EQ(tbsOnly.gradAccumSteps, 1);
    TrainConfig microOnly =
        parse(R"({"train_micro_batch_size_per_gpu": 4})", world);
    EXPECT_EQ(microOnly.trainBatchSize, 4 * world);
    EXPECT_EQ(microOnly.gradAccumSteps, 1);
  }
}

TEST(DsConfig, BatchMismatchStatesTheNumbersAndTheFix) {
  // The message of the brief: every fix that makes it hold.
  EXPECT_EQ(
      errorOf(R"({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 4,
                  "gradient_accumulation_steps": 2})"),
      "ds_config.json: train_batch_size 16 != train_micro_batch_size_per_gpu 4 "
      "x gradient_accumulation_steps 2 x data-parallel ranks 1 (= 8): set "
      "train_batch_size to 8, or gradient_accumulation_steps to 4, or compile "
      "with --dp 2");
  EXPECT_EQ(
      errorOf(R"({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2,
                  "gradient_accumulation_steps": 2})",
              2),
      "ds_config.json: train_batch_size 16 != train_micro_batch_size_per_gpu 2 "
      "x gradient_accumulation_steps 2 x data-parallel ranks 2 (= 8): set "
      "train_batch_size to 8, or gradient_accumulation_steps to 4, or compile "
      "with --dp 4");
}

TEST(DsConfig, BatchErrors) {
  EXPECT_EQ(
      errorOf(R"({"train_batch_size": 24, "train_micro_batch_size_per_gpu": 4,
                  "gradient_accumulation_steps": 2})",
              4),
      "ds_config.json: train_batch_size 24 != train_micro_batch_size_per_gpu 4 "
      "x gradient_accumulation_steps 2 x data-parallel ranks 4 (= 32): set "
      "train_batch_size to 32, or compile with --dp 3");
  EXPECT_EQ(
      errorOf(R"({"train_batch_size": 10, "train_micro_batch_size_per_gpu": 4,
                  "gradient_accumulation_steps": 2})"),
      "ds_config.json: train_batch_size 10 != train_micro_batch_size_per_gpu 4 "
      "x gradient_accumulation_steps 2 x data-parallel ranks 1 (= 8): set "
      "train_batch_size to 8");
  // A derivation that does not divide (DeepSpeed floor-divides, then fails
  // with "10 != 3 * 3 * 1").
  EXPECT_EQ(
      errorOf(
          R"({"train_batch_size": 10, "train_micro_batch_size_per_gpu": 3})"),
      "ds_config.json: train_batch_size 10 is not a multiple of "
      "train_micro_batch_size_per_gpu 3 x data-parallel ranks 1 (= 3), so "
      "gradient_accumulation_steps cannot be derived: set train_batch_size to "
      "9 or 12");
  EXPECT_EQ(
      errorOf(
          R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 16})"),
      "ds_config.json: train_batch_size 8 is not a multiple of "
      "train_micro_batch_size_per_gpu 16 x data-parallel ranks 1 (= 16), so "
      "gradient_accumulation_steps cannot be derived: set train_batch_size to "
      "16");
  EXPECT_EQ(
      errorOf(
          R"({"train_batch_size": 12, "train_micro_batch_size_per_gpu": 2})",
          4),
      "ds_config.json: train_batch_size 12 is not a multiple of "
      "train_micro_batch_size_per_gpu 2 x data-parallel ranks 4 (= 8), so "
      "gradient_accumulation_steps cannot be derived: set train_batch_size to "
      "8 or 16");
  EXPECT_EQ(
      errorOf(R"({"train_batch_size": 10, "gradient_accumulation_steps": 4})"),
      "ds_config.json: train_batch_size 10 is not a multiple of "
      "gradient_accumulation_steps 4 x data-parallel ranks 1 (= 4), so "
      "train_micro_batch_size_per_gpu cannot be derived: set train_batch_size "
      "to 8 or 12");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 2})", 4),
            "ds_config.json: train_batch_size 2 is not a multiple of "
            "gradient_accumulation_steps 1 (the default) x data-parallel ranks "
            "4 (= 4), so train_micro_batch_size_per_gpu cannot be derived: set "
            "train_batch_size to 4");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 6})", 4),
            "ds_config.json: train_batch_size 6 is not a multiple of "
            "gradient_accumulation_steps 1 (the default) x data-parallel ranks "
            "4 (= 4), so train_micro_batch_size_per_gpu cannot be derived: set "
            "train_batch_size to 4 or 8");
  EXPECT_EQ(errorOf(R"({"train_micro_batch_size_per_gpu": 16777216,
                        "gradient_accumulation_steps": 1048576})",
                    int64_t(1) << 20),
            "ds_config.json: train_micro_batch_size_per_gpu 16777216 x "
            "gradient_accumulation_steps 1048576 x data-parallel ranks "
            "1048576 does not fit in 64 bits");
  EXPECT_EQ(errorOf(R"({})"),
            "ds_config.json: either train_batch_size or "
            "train_micro_batch_size_per_gpu needs to be provided");
  EXPECT_EQ(errorOf(R"({"gradient_accumulation_steps": 2})"),
            "ds_config.json: either train_batch_size or "
            "train_micro_batch_size_per_gpu needs to be provided");
  EXPECT_EQ(
      errorOf(R"({"train_batch_size": 8, "gradient_accumulation_steps": 0})"),
      "ds_config.json: 'gradient_accumulation_steps' must be between 1 and "
      "1048576, got 0");
  EXPECT_EQ(errorOf(R"({"train_batch_size": -8})"),
            "ds_config.json: 'train_batch_size' must be between 1 and "
            "17592186044416, got -8");
  // An integral float is an integer, as pydantic takes it (2.0, 1e3); a
  // fractional one is not.
  EXPECT_EQ(parse(R"({"train_batch_size": 8.0})").trainBatchSize, 8);
  EXPECT_EQ(parse(R"({"train_batch_size": 1e3})").trainBatchSize, 1000);
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8.5})"),
            "ds_config.json: 'train_batch_size' must be an integer, got number "
            "8.5");
  EXPECT_EQ(errorOf(R"({"train_batch_size": true})"),
            "ds_config.json: 'train_batch_size' must be an integer, got boolean "
            "true");
  EXPECT_EQ(errorOf(R"({"train_micro_batch_size_per_gpu": "4"})"),
            "ds_config.json: 'train_micro_batch_size_per_gpu' must be an "
            "integer, got string \"4\"");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 18446744073709551615})"),
            "ds_config.json: 'train_batch_size' must be between 1 and "
            "17592186044416, got 18446744073709551615");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8})", 0),
            "ds_config.json: world size must be >= 1, got 0");
}

TEST(DsConfig, TopLevelScalarErrors) {
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "gradient_clipping": -1})"),
            "ds_config.json: 'gradient_clipping' must be >= 0, got -1");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "gradient_clipping": true})"),
            "ds_config.json: 'gradient_clipping' must be a number, got "
            "boolean true");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "steps_per_print": 0})"),
            "ds_config.json: 'steps_per_print' must be between 1 and "
            "9007199254740992, got 0");
  EXPECT_EQ(errorOf(R"([1, 2])"),
            "ds_config.json: the top level must be a JSON object, got array "
            "[1,2]");
}

//===--- optimizer --------------------------------------------------------===//

TEST(DsConfig, AdamIsDecoupledUnlessAdamWModeIsFalse) {
  TrainConfig c = parse(withOptimizer(R"({"type": "Adam"})"));
  EXPECT_EQ(c.optimizer.type, "Adam");
  EXPECT_TRUE(c.optimizer.decoupled);
  c = parse(
      withOptimizer(R"({"type": "adam", "params": {"adam_w_mode": false}})"));
  EXPECT_EQ(c.optimizer.type, "Adam");
  EXPECT_FALSE(c.optimizer.decoupled);
  // "AdamW" forces decoupled decay whatever adam_w_mode says.
  c = parse(
      withOptimizer(R"({"type": "ADAMW", "params": {"adam_w_mode": false}})"));
  EXPECT_EQ(c.optimizer.type, "AdamW");
  EXPECT_TRUE(c.optimizer.decoupled);
}

TEST(DsConfig, AdamParams) {
  TrainConfig c = parse(withOptimizer(R"({"type": "AdamW", "params": {
      "lr": 3e-4, "betas": [0.8, 0.95], "eps": 1e-6, "weight_decay": 0.1,
      "bias_correction": false}})"));
  const OptimizerConfig &o = c.optimizer;
  EXPECT_EQ(o.lr, 3e-4);
  EXPECT_EQ(o.beta1, 0.8);
  EXPECT_EQ(o.beta2, 0.95);
  EXPECT_EQ(o.eps, 1e-6);
  EXPECT_EQ(o.weightDecay, 0.1);
  EXPECT_FALSE(o.biasCorrection);
}

TEST(DsConfig, TorchAdamWDefaultsWeightDecayToTorchs) {
  TrainConfig c = parse(
      withOptimizer(R"({"type": "AdamW", "params": {"torch_adam": true}})"));
  EXPECT_TRUE(c.optimizer.torchAdam);
  EXPECT_EQ(c.optimizer.weightDecay, 1e-2);
  c = parse(withOptimizer(
      R"({"type": "Adam", "params": {"torch_adam": true, "adam_w_mode": false}})"));
  EXPECT_EQ(c.optimizer.weightDecay, 0.0);
  EXPECT_FALSE(c.optimizer.decoupled);
}

TEST(DsConfig, SgdDefaultsAndParams) {
  TrainConfig c = parse(withOptimizer(R"({"type": "SGD"})"));
  const OptimizerConfig &o = c.optimizer;
  EXPECT_EQ(o.type, "SGD");
  EXPECT_EQ(o.lr, 1e-3);
  EXPECT_EQ(o.momentum, 0.0);
  EXPECT_EQ(o.dampening, 0.0);
  EXPECT_EQ(o.weightDecay, 0.0);
  EXPECT_FALSE(o.nesterov);
  EXPECT_FALSE(o.decoupled);
  c = parse(withOptimizer(R"({"type": "SGD", "params": {"lr": 0.1,
      "momentum": 0.9, "nesterov": true, "weight_decay": 5e-4}})"));
  EXPECT_EQ(c.optimizer.momentum, 0.9);
  EXPECT_TRUE(c.optimizer.nesterov);
  EXPECT_EQ(c.optimizer.weightDecay, 5e-4);
}

TEST(DsConfig, OptimizerTypeErrors) {
  EXPECT_EQ(errorOf(withOptimizer(R"({"type": "sgd"})")),
            "ds_config.json: unknown optimizer type 'sgd' at 'optimizer.type' "
            "(did you mean 'SGD'?); supported: Adam, AdamW, SGD, Lamb, Lion, Adagrad, OneBitAdam, "
            "ZeroOneAdam, OneBitLamb");
  // (A torch.optim name: TorchClassesDeepSpeedWouldBuildAreNamed.)
  EXPECT_EQ(errorOf(withOptimizer(R"({"type": "Adamm"})")),
            "ds_config.json: unknown optimizer type 'Adamm' at "
            "'optimizer.type' (did you mean 'Adam'?); supported: Adam, AdamW, "
            "SGD, Lamb, Lion, Adagrad, OneBitAdam, ZeroOneAdam, OneBitLamb");
  EXPECT_EQ(errorOf(withOptimizer(R"({"type": "MuAdam"})")),
            "ds_config.json: optimizer 'MuAdam' is a DeepSpeed optimizer dsc "
            "does not implement (supported: Adam, AdamW, SGD, Lamb, Lion, Adagrad, OneBitAdam, "
            "ZeroOneAdam, OneBitLamb)");
  EXPECT_EQ(errorOf(withOptimizer(R"({"params": {"lr": 1}})")),
            "ds_config.json: 'optimizer.type' is required when an optimizer "
            "section is given");
  EXPECT_EQ(errorOf(withOptimizer(R"({"type": 1})")),
            "ds_config.json: 'optimizer.type' must be a string, got number 1");
  EXPECT_EQ(errorOf(withOptimizer(R"("Adam")")),
            "ds_config.json: 'optimizer' must be an object, got string "
            "\"Adam\"");
  EXPECT_EQ(errorOf(withOptimizer(R"({"type": "Adam", "params": []})")),
            "ds_config.json: 'optimizer.params' must be an object, got array "
            "[]");
}

TEST(DsConfig, OptimizerParamErrors) {
  auto adam = [](const std::string &params) {
    return errorOf(
        withOptimizer(R"({"type": "Adam", "params": )" + params + "}"));
  };
  EXPECT_EQ(adam(R"({"lr": -1})"),
            "ds_config.json: 'optimizer.params.lr' must be >= 0, got -1");
  EXPECT_EQ(adam(R"({"lr": "1e-3"})"),
            "ds_config.json: 'optimizer.params.lr' must be a number, got "
            "string \"1e-3\"");
  EXPECT_EQ(adam(R"({"betas": 0.9})"),
            "ds_config.json: 'optimizer.params.betas' must be an array of two "
            "numbers, got number 0.9");
  EXPECT_EQ(adam(R"({"betas": [0.9, 0.99, 0.999]})"),
            "ds_config.json: 'optimizer.params.betas' must be an array of two "
            "numbers, got array [0.9,0.99,0.999]");
  EXPECT_EQ(adam(R"({"betas": [0.9, "0.99"]})"),
            "ds_config.json: 'optimizer.params.betas' must be an array of two "
            "numbers, got array [0.9,\"0.99\"]");
  EXPECT_EQ(adam(R"({"betas": [0.9, 1.0]})"),
            "ds_config.json: 'optimizer.params.betas' must lie in [0, 1), got "
            "[0.9, 1]");
  EXPECT_EQ(adam(R"({"eps": -1e-8})"),
            "ds_config.json: 'optimizer.params.eps' must be >= 0, got -1e-08");
  EXPECT_EQ(adam(R"({"weight_decay": -0.1})"),
            "ds_config.json: 'optimizer.params.weight_decay' must be >= 0, got "
            "-0.1");
  EXPECT_EQ(adam(R"({"adam_w_mode": 1})"),
            "ds_config.json: 'optimizer.params.adam_w_mode' must be true or "
            "false, got number 1");
  EXPECT_EQ(adam(R"({"torch_adam": true, "bias_correction": true})"),
            "ds_config.json: 'optimizer.params.bias_correction' cannot be used "
            "with torch_adam: true (torch.optim.Adam has no such argument)");
  EXPECT_EQ(adam(R"({"max_grad_norm": 1.0})"),
            "ds_config.json: 'optimizer.params.max_grad_norm' is not supported "
            "as an optimizer parameter, please switch to using the deepspeed "
            "parameter 'gradient_clipping' (engine.py rejects it too)");
  EXPECT_EQ(adam(R"({"momentum": 0.9})"),
            "ds_config.json: 'optimizer.params.momentum' is not a parameter of "
            "Adam (it belongs to SGD)");
  EXPECT_EQ(errorOf(withOptimizer(
                R"({"type": "SGD", "params": {"betas": [0.9, 0.9]}})")),
            "ds_config.json: 'optimizer.params.betas' is not a parameter of "
            "SGD (it belongs to Adam/AdamW, Lamb, Lion, OneBitAdam, ZeroOneAdam, OneBitLamb)");
  EXPECT_EQ(errorOf(withOptimizer(
                R"({"type": "SGD", "params": {"nesterov": true}})")),
            "ds_config.json: 'optimizer.params.nesterov' requires momentum > 0 "
            "and dampening 0 (torch.optim.SGD), got momentum 0, dampening 0");
  EXPECT_EQ(errorOf(withOptimizer(
                R"({"type": "SGD", "params": {"momentum": -0.5}})")),
            "ds_config.json: 'optimizer.params.momentum' must be >= 0, got "
            "-0.5");
}

//===--- unknown keys, at every level -------------------------------------===//

// Lamb, Lion and Adagrad: the names (any case, as config.py lower-cases
// DeepSpeed's own), the built classes' defaults (FusedLamb, FusedLion,
// torch.optim.Adagrad), their keys and what dsc refuses, with the reason.
TEST(DsConfig, OneBitFamilyWithZeroIsRefusedForTheCombination) {
  // Unsound with any ZeRO stage (DeepSpeed asserts too); without ZeRO,
  // OneBitAdam and ZeroOneAdam train (their Keys tests) and 1-bit LAMB is
  // refused as not built yet.
  std::string onebit = R"("optimizer": {"type": "OneBitAdam", "params": {"freeze_step": 10}})";
  std::string e = errorOf("{\"train_batch_size\": 4, " + onebit +
                          ", \"zero_optimization\": {\"stage\": 2}}");
  EXPECT_NE(e.find("optimizer 'OneBitAdam' with ZeRO stage 2 (zero_optimization): a 1-bit "
                   "optimizer compresses each parameter's whole momentum"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("\"1bit-Adam is not compatible with ZeRO\""), std::string::npos) << e;
  EXPECT_NE(e.find("Use zero_optimization.stage 0 with it"), std::string::npos) << e;
  e = errorOf(R"({"train_batch_size": 4, "optimizer": {"type": "zerooneadam"},
                  "zero_optimization": true})");
  EXPECT_NE(e.find("with ZeRO stage 1"), std::string::npos) << e;
  EXPECT_NE(e.find("\"0/1 Adam is not compatible with ZeRO\""), std::string::npos) << e;
  EXPECT_EQ(e.find("yet either"), std::string::npos) << e;
  e = errorOf(R"({"train_batch_size": 4, "optimizer": {"type": "onebitlamb"},
                  "zero_optimization": {"stage": 2}})");
  EXPECT_NE(e.find("\"1bit-Lamb is not compatible with ZeRO\""), std::string::npos) << e;
  EXPECT_EQ(parse("{\"train_batch_size\": 4, " + onebit +
                  ", \"zero_optimization\": {\"stage\": 0}}")
                .optimizer.type,
            "OneBitAdam");
  EXPECT_EQ(parse(R"({"train_batch_size": 4, "optimizer": {"type": "onebitlamb"}})")
                .optimizer.type,
            "OneBitLamb");
}

// OnebitLamb's keys with DeepSpeed's defaults (edaa722 onebit/lamb.py).
TEST(DsConfig, OneBitLambKeys) {
  TrainConfig c = parse(withOptimizer(R"({"type": "OneBitLamb"})"));
  const OptimizerConfig &o = c.optimizer;
  EXPECT_EQ(o.type, "OneBitLamb");
  EXPECT_EQ(o.lr, 1e-3);
  EXPECT_EQ(o.freezeStep, 100000);
  EXPECT_EQ(o.maxCoeff, 10.0);
  EXPECT_EQ(o.minCoeff, 0.01);
  EXPECT_EQ(o.coeffBeta, 0.9);
  EXPECT_EQ(o.factorMax, 4.0);
  EXPECT_EQ(o.factorMin, 0.5);
  EXPECT_EQ(o.factorThreshold, 0.1);
  EXPECT_FALSE(o.biasCorrection);
  c = parse(withOptimizer(R"({"type": "onebitlamb", "params": {"freeze_step": 7,
      "max_coeff": 0.3, "coeff_beta": 0.5, "factor_max": 3, "factor_min": 0.25,
      "factor_threshold": 0.2, "bias_correction": false, "cuda_aware": false}})"));
  EXPECT_EQ(c.optimizer.freezeStep, 7);
  EXPECT_EQ(c.optimizer.maxCoeff, 0.3);
  EXPECT_EQ(c.optimizer.coeffBeta, 0.5);
  EXPECT_EQ(c.optimizer.factorMax, 3.0);
  EXPECT_EQ(c.optimizer.factorMin, 0.25);
  EXPECT_EQ(c.optimizer.factorThreshold, 0.2);
  EXPECT_EQ(c.notes.size(), 2u);
  std::string e = errorOf(withOptimizer(R"({"type": "OneBitLamb", "params": {"factor_min": 5}})"));
  EXPECT_NE(e.find("'optimizer.params.factor_min' (5) must not exceed 'optimizer.params.factor_max' (4)"),
            std::string::npos)
      << e;
  e = errorOf(withOptimizer(R"({"type": "OneBitLamb", "params": {"coeff_beta": 1.5}})"));
  EXPECT_NE(e.find("'optimizer.params.coeff_beta' must lie in [0, 1]"), std::string::npos) << e;
  // engine.py: the LAMBs require dynamic loss scaling under fp16.
  e = errorOf(R"({"train_batch_size": 4, "optimizer": {"type": "OneBitLamb"},
                  "fp16": {"enabled": true, "loss_scale": 128}})");
  EXPECT_NE(e.find("'fp16.loss_scale' is 128: DeepSpeed's OneBitLamb optimizer requires dynamic "
                   "loss scaling"),
            std::string::npos)
      << e;
  EXPECT_EQ(parse(R"({"train_batch_size": 4, "optimizer": {"type": "Lamb"},
                      "fp16": {"enabled": true}})")
                .optimizer.type,
            "Lamb");
  e = errorOf(withOptimizer(R"({"type": "OneBitLamb", "params": {"var_freeze_step": 5}})"));
  EXPECT_NE(e.find("is not a parameter of OneBitLamb (it belongs to ZeroOneAdam)"),
            std::string::npos)
      << e;
}

// ZeroOneAdam's keys with DeepSpeed's defaults (edaa722 onebit/zoadam.py);
// the stored-and-unread ones are said; a clipper of 0 (DeepSpeed would
// divide by it) and amsgrad are refused.
TEST(DsConfig, ZeroOneAdamKeys) {
  TrainConfig c = parse(withOptimizer(R"({"type": "ZeroOneAdam"})"));
  const OptimizerConfig &o = c.optimizer;
  EXPECT_EQ(o.type, "ZeroOneAdam");
  EXPECT_EQ(o.lr, 1e-3);
  EXPECT_EQ(o.eps, 1e-8);
  EXPECT_EQ(o.freezeStep, 100000);
  EXPECT_EQ(o.varUpdateScaler, 16);
  EXPECT_EQ(o.localStepScaler, 32678);
  EXPECT_EQ(o.localStepClipper, 16);
  EXPECT_TRUE(o.decoupled);
  EXPECT_FALSE(o.biasCorrection);
  c = parse(withOptimizer(R"({"type": "zerooneadam", "params": {"var_freeze_step": 8,
      "var_update_scaler": 2, "local_step_scaler": 3, "local_step_clipper": 4,
      "bias_correction": true}})"));
  EXPECT_EQ(c.optimizer.freezeStep, 8);
  EXPECT_EQ(c.optimizer.varUpdateScaler, 2);
  EXPECT_EQ(c.optimizer.localStepScaler, 3);
  EXPECT_EQ(c.optimizer.localStepClipper, 4);
  bool said = false;
  for (const std::string &n : c.notes)
    said |= n.find("'optimizer.params.bias_correction' changes nothing: ZeroOneAdam stores it") !=
            std::string::npos;
  EXPECT_TRUE(said);
  std::string e = errorOf(withOptimizer(R"({"type": "ZeroOneAdam", "params": {"local_step_clipper": 0}})"));
  EXPECT_NE(e.find("local_step_clipper"), std::string::npos) << e;
  e = errorOf(withOptimizer(R"({"type": "ZeroOneAdam", "params": {"freeze_step": 8}})"));
  EXPECT_NE(e.find("'optimizer.params.freeze_step' is not a parameter of ZeroOneAdam (it belongs to OneBitAdam, OneBitLamb)"),
            std::string::npos)
      << e;
  e = errorOf(withOptimizer(R"({"type": "ZeroOneAdam", "params": {"amsgrad": true}})"));
  EXPECT_NE(e.find("0/1 Adam does not support the AMSGrad variant"), std::string::npos) << e;
}

// OneBitAdam's keys with DeepSpeed's defaults (edaa722 onebit/adam.py); the
// keys it stores and never reads are said in a note, not ignored silently;
// what dsc has no counterpart for is refused with the reason.
TEST(DsConfig, OneBitAdamKeys) {
  TrainConfig c = parse(withOptimizer(R"({"type": "onebitadam"})"));
  const OptimizerConfig &o = c.optimizer;
  EXPECT_EQ(o.type, "OneBitAdam");
  EXPECT_EQ(o.lr, 1e-3);
  EXPECT_EQ(o.freezeStep, 100000);
  EXPECT_EQ(o.beta1, 0.9);
  EXPECT_EQ(o.beta2, 0.999);
  EXPECT_EQ(o.eps, 1e-8);
  EXPECT_EQ(o.weightDecay, 0.0);
  EXPECT_FALSE(o.biasCorrection);
  EXPECT_TRUE(c.notes.empty());
  // DeepSpeed's 1-bit Adam tutorial's keys.
  c = parse(withOptimizer(R"({"type": "OneBitAdam", "params": {"lr": 4e-4, "freeze_step": 23000,
      "cuda_aware": false, "comm_backend_name": "nccl", "bias_correction": false,
      "weight_decay": 0.01}})"));
  EXPECT_EQ(c.optimizer.freezeStep, 23000);
  EXPECT_EQ(c.optimizer.weightDecay, 0.01);
  ASSERT_EQ(c.notes.size(), 3u);
  EXPECT_NE(c.notes[0].find("'optimizer.params.bias_correction' changes nothing"),
            std::string::npos)
      << c.notes[0];
  EXPECT_NE(c.notes[1].find("'optimizer.params.cuda_aware' = false chooses nothing"),
            std::string::npos)
      << c.notes[1];
  EXPECT_NE(c.notes[2].find("'optimizer.params.comm_backend_name' = 'nccl' chooses nothing"),
            std::string::npos)
      << c.notes[2];
  EXPECT_EQ(errorOf(withOptimizer(
                R"({"type": "OneBitAdam", "params": {"comm_backend_name": "hccl"}})")),
            "ds_config.json: 'optimizer.params.comm_backend_name' is 'hccl'; DeepSpeed's 1-bit "
            "backends are nccl, mpi and compressed (hccl is Ascend's, which dsc does not run "
            "on)");
  EXPECT_NE(errorOf(withOptimizer(R"({"type": "OneBitAdam", "params": {"amsgrad": true}})"))
                .find("1-bit Adam does not support the AMSGrad variant"),
            std::string::npos);
  EXPECT_NE(errorOf(withOptimizer(R"({"type": "OneBitAdam", "params": {"freeze_step": -1}})"))
                .find("freeze_step"),
            std::string::npos);
  EXPECT_NE(errorOf(withOptimizer(R"({"type": "OneBitAdam", "params": {"max_grad_norm": 1}})"))
                .find("gradient_clipping"),
            std::string::npos);
  // The filled-in config (the plan's) reads back the same, without the
  // optimizer's notes.
  TrainConfig back = parse(toJson(c));
  EXPECT_EQ(back.optimizer, c.optimizer);
  for (const std::string &note : back.notes)
    EXPECT_EQ(note.find("optimizer"), std::string::npos) << note;
}

TEST(DsConfig, LambLionAdagrad) {
  TrainConfig c = parse(withOptimizer(R"({"type": "LAMB"})"));
  const OptimizerConfig &l = c.optimizer;
  EXPECT_EQ(l.type, "Lamb");
  EXPECT_EQ(l.lr, 1e-3);
  EXPECT_EQ(l.beta1, 0.9);
  EXPECT_EQ(l.beta2, 0.999);
  EXPECT_EQ(l.eps, 1e-8);
  EXPECT_EQ(l.weightDecay, 0.0);
  EXPECT_TRUE(l.biasCorrection);
  EXPECT_EQ(l.maxCoeff, 10.0);
  EXPECT_EQ(l.minCoeff, 0.01);
  c = parse(withOptimizer(R"({"type": "lamb", "params": {"lr": 0.01, "max_coeff": 4,
      "min_coeff": 0.5, "bias_correction": false, "weight_decay": 0.1,
      "eps_inside_sqrt": false, "amsgrad": false}})"));
  EXPECT_EQ(c.optimizer.maxCoeff, 4.0);
  EXPECT_EQ(c.optimizer.minCoeff, 0.5);
  EXPECT_FALSE(c.optimizer.biasCorrection);
  EXPECT_EQ(c.optimizer.weightDecay, 0.1);

  c = parse(withOptimizer(R"({"type": "Lion", "params": {"betas": [0.95, 0.98]}})"));
  EXPECT_EQ(c.optimizer.type, "Lion");
  EXPECT_EQ(c.optimizer.lr, 1e-3);
  EXPECT_EQ(c.optimizer.beta1, 0.95);
  EXPECT_EQ(c.optimizer.beta2, 0.98);
  // FusedLion's default betas are (0.9, 0.999), not the paper's 0.99.
  EXPECT_EQ(parse(withOptimizer(R"({"type": "lion"})")).optimizer.beta2, 0.999);

  c = parse(withOptimizer(R"({"type": "adagrad", "params": {"lr_decay": 0.5}})"));
  EXPECT_EQ(c.optimizer.type, "Adagrad");
  EXPECT_EQ(c.optimizer.lr, 1e-2);
  EXPECT_EQ(c.optimizer.eps, 1e-10);
  EXPECT_EQ(c.optimizer.lrDecay, 0.5);
  // The baked config reads back the same.
  EXPECT_EQ(parse(toJson(c)).optimizer, c.optimizer);
  TrainConfig lamb = parse(withOptimizer(R"({"type": "Lamb", "params": {"max_coeff": 3}})"));
  EXPECT_EQ(parse(toJson(lamb)).optimizer, lamb.optimizer);

  EXPECT_EQ(errorOf(withOptimizer(R"({"type": "Lamb", "params": {"eps_inside_sqrt": true}})")),
            "ds_config.json: 'optimizer.params.eps_inside_sqrt': true is FusedLamb's other eps "
            "mode (sqrt(v + eps)); dsc implements the default, eps added after the square "
            "root. Remove the key or set it to false");
  EXPECT_EQ(errorOf(withOptimizer(R"({"type": "Lamb", "params": {"amsgrad": true}})")),
            "ds_config.json: 'optimizer.params.amsgrad': FusedLamb does not support the "
            "AMSGrad variant (DeepSpeed raises the same error); remove the key");
  EXPECT_EQ(errorOf(withOptimizer(
                R"({"type": "Lamb", "params": {"min_coeff": 2, "max_coeff": 1}})")),
            "ds_config.json: 'optimizer.params.min_coeff' (2) must not exceed "
            "'optimizer.params.max_coeff' (1): they clamp LAMB's trust ratio");
  EXPECT_EQ(errorOf(withOptimizer(R"({"type": "Lion", "params": {"eps": 1e-8}})")),
            "ds_config.json: 'optimizer.params.eps' is not a parameter of Lion (it belongs "
            "to Adam/AdamW, Lamb, Adagrad, OneBitAdam, ZeroOneAdam, OneBitLamb)");
  EXPECT_EQ(errorOf(withOptimizer(R"({"type": "Lion", "params": {"betta": [0.9, 0.9]}})")),
            "ds_config.json: unknown key 'optimizer.params.betta' (did you mean 'betas'?)");
  EXPECT_EQ(errorOf(withOptimizer(
                R"({"type": "Adagrad", "params": {"initial_accumulator_value": 0.1}})")),
            "ds_config.json: 'optimizer.params.initial_accumulator_value' is 0.1: dsc starts "
            "every optimizer state at zero (torch's default, and what DeepSpeed's CPU "
            "Adagrad always does); remove the key or set it to 0");
  EXPECT_EQ(errorOf(withOptimizer(R"({"type": "Adagrad", "params": {"lr_decay": -1}})")),
            "ds_config.json: 'optimizer.params.lr_decay' must be >= 0, got -1");
}

TEST(DsConfig, UnknownKeysSuggestTheClosest) {
  EXPECT_EQ(errorOf(R"({"train_batch_sise": 8})"),
            "ds_config.json: unknown key 'train_batch_sise' (did you mean "
            "'train_batch_size'?)");
  EXPECT_EQ(
      errorOf(R"({"train_batch_size": 8, "gradient_acumulation_step": 1})"),
      "ds_config.json: unknown key 'gradient_acumulation_step' (did you "
      "mean 'gradient_accumulation_steps'?)");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "zero_optimisation": {}})"),
            "ds_config.json: unknown key 'zero_optimisation' (did you mean "
            "'zero_optimization'?)");
  // A top-level key DeepSpeed does not read, and that is no likely typo,
  // is a note (DeepSpeed ignores it; real configs carry "_comment").
  TrainConfig foreign = parse(R"({"train_batch_size": 8, "colour": 1})");
  ASSERT_EQ(foreign.notes.size(), 1u);
  EXPECT_EQ(foreign.notes[0],
            "'colour' is not a DeepSpeed key: DeepSpeed ignores it, and so does dsc");
  // Inside a section dsc reads it is an error, as in DeepSpeed's pydantic
  // sections.
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "fp16": {"colour": 1}})"),
            "ds_config.json: unknown key 'fp16.colour'");
  EXPECT_EQ(errorOf(withOptimizer(R"({"type": "Adam", "param": {}})")),
            "ds_config.json: unknown key 'optimizer.param' (did you mean "
            "'params'?)");
  EXPECT_EQ(
      errorOf(withOptimizer(R"({"type": "Adam", "params": {"betas1": 0.9}})")),
      "ds_config.json: unknown key 'optimizer.params.betas1' (did you mean "
      "'betas'?)");
  EXPECT_EQ(
      errorOf(withOptimizer(R"({"type": "Adam", "params": {"rl": 0.1}})")),
      "ds_config.json: unknown key 'optimizer.params.rl' (did you mean "
      "'lr'?)");
  EXPECT_EQ(errorOf(withScheduler(R"({"typ": "WarmupLR"})")),
            "ds_config.json: unknown key 'scheduler.typ' (did you mean "
            "'type'?)");
  EXPECT_EQ(errorOf(withScheduler(
                R"({"type": "WarmupLR", "params": {"warmup_num_step": 5}})")),
            "ds_config.json: unknown key 'scheduler.params.warmup_num_step' "
            "(did you mean 'warmup_num_steps'?)");
}

TEST(DsConfig, UnsupportedDeepSpeedKeysSaySo) {
  // Switched off, or empty: asks for nothing.
  EXPECT_NO_THROW(parse(R"({"train_batch_size": 8, "wandb": {}})"));
  EXPECT_NO_THROW(parse(R"({"train_batch_size": 8, "wandb": {"enabled": false,
      "project": "p"}})"));
  std::string on = errorOf(R"({"train_batch_size": 8, "wandb": {"enabled": true}})");
  EXPECT_EQ(on.rfind("ds_config.json: 'wandb.enabled' is true: not supported by dsc: "
                     "DeepSpeed's wandb monitor sends the metrics to a service over the network",
                     0),
            0u)
      << on;
}

TEST(DsConfig, MonitorsReadDeepSpeedsKeys) {
  TrainConfig c = parse(R"({"train_batch_size": 8, "csv_monitor": {"enabled": true},
      "tensorboard": {"enabled": true, "output_path": "logs/", "job_name": "j"}})");
  EXPECT_TRUE(c.csvMonitor.enabled);
  EXPECT_EQ(c.csvMonitor.outputPath, "");
  EXPECT_EQ(c.csvMonitor.jobName, "DeepSpeedJobName");
  EXPECT_TRUE(c.tensorboard.enabled);
  EXPECT_EQ(c.tensorboard.outputPath, "logs/");
  EXPECT_EQ(c.tensorboard.jobName, "j");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "tensorboard": {"enabled": true,
      "job_name": "/abs"}})"),
            "ds_config.json: 'tensorboard.job_name' is '/abs': it names the folder for the "
            "monitor's files inside output_path; give a relative name that stays inside it, "
            "such as \"DeepSpeedJobName\"");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "csv_monitor": {"job_name": "a/../.."}})"),
            "ds_config.json: 'csv_monitor.job_name' is 'a/../..': it names the folder for the "
            "monitor's files inside output_path; give a relative name that stays inside it, "
            "such as \"DeepSpeedJobName\"");
}

//===--- duplicates and syntax --------------------------------------------===//

TEST(DsConfig, DuplicateKeysNameTheirPath) {
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "train_batch_size": 16})"),
            "ds_config.json: duplicate key 'train_batch_size'");
  EXPECT_EQ(errorOf(withOptimizer(
                R"({"type": "Adam", "params": {"lr": 1, "eps": 1, "lr": 2}})")),
            "ds_config.json: duplicate key 'optimizer.params.lr'");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8,
      "activation_checkpointing": {"stages": [{"a": 1}, {"b": 1, "b": 2}]}})"),
            "ds_config.json: duplicate key 'activation_checkpointing.stages[1].b'");
  // The same key in sibling objects is fine.
  EXPECT_NO_THROW(parse(R"({"train_batch_size": 8,
      "optimizer": {"type": "Adam"}, "scheduler": {"type": "WarmupLR"}})"));
}

TEST(DsConfig, PipelineSection) {
  TrainConfig c = parse(R"({"train_batch_size": 8, "pipeline": {"stages": 4,
      "partition_method": "parameters", "schedule": "zb-h1", "seed_layers": false,
      "activation_checkpoint_interval": 0}})");
  EXPECT_EQ(c.pipeline.stages, 4);
  EXPECT_EQ(c.pipeline.partitionMethod, "parameters");
  EXPECT_EQ(c.pipeline.schedule, "zb-h1");
  // DeepSpeed's "auto" leaves the stage count to the command line.
  EXPECT_EQ(parse(R"({"train_batch_size": 8, "pipeline": {"stages": "auto"}})").pipeline.stages,
            1);
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "pipeline": {"stage": 2}})"),
            "ds_config.json: unknown key 'pipeline.stage' (did you mean 'stages'?)");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "pipeline": {"schedule": "1F1B"}})"),
            "ds_config.json: 'pipeline.schedule' is '1F1B' (did you mean '1f1b'?); "
            "supported: 1f1b, zb-h1");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "pipeline": {"stages": 0}})"),
            "ds_config.json: 'pipeline.stages' must be between 1 and 1024, got 0");
  // activation_checkpoint_interval k > 0 turns on layer recompute, every
  // k-th layer input kept.
  TrainConfig every2 = parse(R"({"train_batch_size": 8,
      "pipeline": {"activation_checkpoint_interval": 2}})");
  EXPECT_EQ(every2.recompute.mode, "layers");
  EXPECT_EQ(every2.recompute.interval, 2);
  EXPECT_EQ(parse(R"({"train_batch_size": 8,
      "pipeline": {"activation_checkpoint_interval": 0}})")
                .recompute.mode,
            "none");
}

TEST(DsConfig, SyntaxErrorsGiveLineAndColumn) {
  // A comma before the closing bracket is hjson's, which DeepSpeed reads.
  EXPECT_EQ(parse("{\n  \"train_batch_size\": 8,\n}").trainBatchSize, 8);
  EXPECT_EQ(errorOf("{\n  \"train_batch_size\": 8,,\n}"),
            "ds_config.json:3:1: JSON syntax error: syntax error while parsing "
            "object key - unexpected '}'; expected string literal");
  EXPECT_EQ(
      errorOf("{\"train_batch_size\": 8"),
      "ds_config.json:1:23: JSON syntax error: syntax error while parsing "
      "object - unexpected end of input; expected '}'");
  EXPECT_EQ(errorOf(""),
            "ds_config.json:1:1: JSON syntax error: syntax error while parsing "
            "value - unexpected end of input; expected '[', '{', or a literal");
}

//===--- hostile input ----------------------------------------------------===//

/// 100,000 levels crashed dsc and dsrt (a stack overflow inside the JSON
/// library): the nesting is bounded before parsing, valid JSON or not.
TEST(DsConfig, DeepNestingIsRefusedBeforeParsing) {
  const size_t levels = 100'000;
  const std::string prefix = R"({"train_batch_size": 8, "fp16": )";
  // The first '[' (column prefix.size() + 1) opens level 2, the 64th level 65.
  const std::string expected = "ds_config.json:1:" +
                               std::to_string(prefix.size() + 64) +
                               ": JSON nested deeper than 64 arrays and "
                               "objects (the limit for a ds_config, whose own "
                               "keys nest 4 deep)";
  EXPECT_EQ(errorOf(prefix + std::string(levels, '[') +
                    std::string(levels, ']') + "}"),
            expected);
  EXPECT_EQ(errorOf(prefix + std::string(levels, '[')), expected);
  std::string objects;
  for (size_t i = 0; i < levels; ++i)
    objects += "{\"a\":";
  // The 65th '{' of the second line is at column 5 x 64 + 1.
  EXPECT_EQ(errorOf("\n" + objects)
                .rfind("ds_config.json:2:321: JSON nested deeper than 64", 0),
            0u);

  // 64 levels pass the bound (and are then read as usual), 65 do not.
  auto nested = [](size_t depth) {
    return R"({"train_batch_size": 8, "activation_checkpointing": {"x": )" +
           std::string(depth - 2, '[') + std::string(depth - 2, ']') + "}}";
  };
  EXPECT_EQ(errorOf(nested(64)), "ds_config.json: unknown key 'activation_checkpointing.x'");
  EXPECT_NE(errorOf(nested(65)).find("JSON nested deeper than 64"),
            std::string::npos);

  // Brackets in strings (escaped quotes included) and comments do not nest;
  // a quote inside a comment does not open a string.
  const std::string brackets(levels, '[');
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "fp16": {"x": "\")" + brackets + "\"}}"),
            "ds_config.json: unknown key 'fp16.x'");
  EXPECT_EQ(parse("{\"train_batch_size\": 8 // " + brackets + "\n /* " +
                  brackets + " */}")
                .trainBatchSize,
            8);
  EXPECT_NE(errorOf("{\"train_batch_size\": 8, /* \" */ \"x\": " + brackets)
                .find("JSON nested deeper than 64"),
            std::string::npos);
}

TEST(DsConfig, DeepNestingInAFileNamesThePath) {
  std::string path = ::testing::TempDir() + "dsconfig_deep.json";
  {
    std::ofstream out(path);
    out << "{\n\"fp16\": " << std::string(100'000, '[');
  }
  try {
    loadDsConfig(path);
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError &e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ":2:72: JSON nested deeper "
                                                 "than 64 arrays and objects",
                                          0),
              0u)
        << e.what();
  }
  std::remove(path.c_str());
}

/// "lr": 1e400 was a raw JSON-library exception naming neither the file nor
/// the key.
TEST(DsConfig, NumbersBeyondDoubleNameTheirKey) {
  EXPECT_EQ(errorOf(withOptimizer(R"({"type": "Adam", "params": {"lr": 1e400}})")),
            "ds_config.json: 'optimizer.params.lr': 1e400 is out of range (a "
            "number must fit in a double)");
  EXPECT_EQ(errorOf(withOptimizer(
                R"({"type": "Adam", "params": {"betas": [0.9, -1e999]}})")),
            "ds_config.json: 'optimizer.params.betas[1]': -1e999 is out of "
            "range (a number must fit in a double)");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "zero_optimization": {
                "stage": 1, "reduce_bucket_size": 5E+999}})"),
            "ds_config.json: 'zero_optimization.reduce_bucket_size': 5E+999 is "
            "out of range (a number must fit in a double)");
  EXPECT_EQ(errorOf("1e400"),
            "ds_config.json: 1e400 is out of range (a number must fit in a "
            "double)");
}

/// dsrt trains in float32: a larger value would silently become infinite.
TEST(DsConfig, RealNumbersMustFitFloat32) {
  EXPECT_EQ(errorOf(withOptimizer(R"({"type": "Adam", "params": {"lr": 1e300}})")),
            "ds_config.json: 'optimizer.params.lr' must lie within float32's "
            "range (+-3.4028234663852886e+38: dsrt trains in float32), got "
            "1e+300");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "gradient_clipping": 1e39})"),
            "ds_config.json: 'gradient_clipping' must lie within float32's "
            "range (+-3.4028234663852886e+38: dsrt trains in float32), got "
            "1e+39");
  EXPECT_EQ(errorOf(withScheduler(
                R"({"type": "WarmupLR", "params": {"warmup_max_lr": 4e38}})")),
            "ds_config.json: 'scheduler.params.warmup_max_lr' must lie within "
            "float32's range (+-3.4028234663852886e+38: dsrt trains in "
            "float32), got 4e+38");
  EXPECT_EQ(parse(withOptimizer(R"({"type": "SGD", "params": {"lr": 3e38}})"))
                .optimizer.lr,
            3e38);
}

/// Scheduler values that DeepSpeed takes but that turn the lr negative or
/// infinite, or Adam's beta1 >= 1.
TEST(DsConfig, SchedulerValuesThatBreakTheLrAreRejected) {
  auto oneCycle = [](const std::string &extra) {
    return errorOf(withScheduler(
        R"({"type": "OneCycle", "params": {"cycle_min_lr": 0.01,
            "cycle_max_lr": 0.1, )" +
        extra + "}}"));
  };
  EXPECT_EQ(oneCycle(R"("decay_lr_rate": -0.5)"),
            "ds_config.json: 'scheduler.params.decay_lr_rate' must be >= 0, "
            "got -0.5");
  EXPECT_EQ(oneCycle(R"("cycle_max_mom": 1.5)"),
            "ds_config.json: 'scheduler.params.cycle_max_mom' must lie in [0, "
            "1) (it becomes Adam's beta1), got 1.5");
  EXPECT_EQ(oneCycle(R"("cycle_min_mom": -0.1)"),
            "ds_config.json: 'scheduler.params.cycle_min_mom' must be >= 0, "
            "got -0.1");
  EXPECT_EQ(errorOf(withScheduler(R"({"type": "LRRangeTest", "params": {
                "lr_range_test_step_rate": -1}})")),
            "ds_config.json: 'scheduler.params.lr_range_test_step_rate' must "
            "be >= 0, got -1");
  // Step counts are kept as doubles: 2^63 - 1 could not be written back.
  EXPECT_EQ(errorOf(withScheduler(R"({"type": "WarmupDecayLR", "params": {
                "total_num_steps": 9223372036854775807}})")),
            "ds_config.json: 'scheduler.params.total_num_steps' must be "
            "between 0 and 9007199254740992, got 9223372036854775807");
  TrainConfig c = parse(withScheduler(R"({"type": "WarmupDecayLR", "params": {
      "total_num_steps": 9007199254740992}})"));
  EXPECT_EQ(parseDsConfig(toJson(c), "canonical"), c);
}

/// Loop counts and sizes are range-checked in the type the JSON holds: 2^62
/// micro-batches ran for ever, 2^64 - 1 used to wrap.
TEST(DsConfig, BatchCountsAreBounded) {
  EXPECT_EQ(errorOf(R"({"train_batch_size": 4611686018427387904})"),
            "ds_config.json: 'train_batch_size' must be between 1 and "
            "17592186044416, got 4611686018427387904");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 99999999999999999999})"),
            "ds_config.json: 'train_batch_size' must be between 1 and "
            "17592186044416, got 1e+20");
  EXPECT_EQ(errorOf(R"({"train_micro_batch_size_per_gpu": 1,
                        "gradient_accumulation_steps": 4611686018427387904})"),
            "ds_config.json: 'gradient_accumulation_steps' must be between 1 "
            "and 1048576, got 4611686018427387904");
  EXPECT_EQ(errorOf(R"({"train_micro_batch_size_per_gpu": 16777217})"),
            "ds_config.json: 'train_micro_batch_size_per_gpu' must be between "
            "1 and 16777216, got 16777217");
  // A derived value is bounded like a given one.
  EXPECT_EQ(errorOf(R"({"train_batch_size": 2097152,
                        "train_micro_batch_size_per_gpu": 1})"),
            "ds_config.json: train_batch_size 2097152 / "
            "(train_micro_batch_size_per_gpu 1 x data-parallel ranks 1) gives "
            "gradient_accumulation_steps 2097152, but it must be between 1 and "
            "1048576: lower train_batch_size or raise "
            "train_micro_batch_size_per_gpu");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 33554432})"),
            "ds_config.json: train_batch_size 33554432 / "
            "(gradient_accumulation_steps 1 (the default) x data-parallel "
            "ranks 1) gives train_micro_batch_size_per_gpu 33554432, but it "
            "must be between 1 and 16777216: lower train_batch_size or raise "
            "gradient_accumulation_steps");
  // The product, with the ranks.
  EXPECT_EQ(errorOf(R"({"train_micro_batch_size_per_gpu": 16777216,
                        "gradient_accumulation_steps": 1048576})",
                    2),
            "ds_config.json: train_micro_batch_size_per_gpu 16777216 x "
            "gradient_accumulation_steps 1048576 x data-parallel ranks 2 (= "
            "35184372088832) is more than 17592186044416, the largest "
            "train_batch_size");
  // The bounds themselves are accepted.
  TrainConfig c = parse(R"({"train_micro_batch_size_per_gpu": 16777216,
                            "gradient_accumulation_steps": 1048576})");
  EXPECT_EQ(c.trainBatchSize, kMaxTrainBatch);
  EXPECT_EQ(parse(R"({"train_batch_size": 17592186044416,
                      "gradient_accumulation_steps": 1048576})")
                .microBatchPerGpu,
            kMaxMicroBatch);

  EXPECT_EQ(errorOf(R"({"train_batch_size": 8,
                        "steps_per_print": 18446744073709551615})"),
            "ds_config.json: 'steps_per_print' must be between 1 and "
            "9007199254740992, got 18446744073709551615");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8,
                        "pipeline": {"stages": 4611686018427387904}})"),
            "ds_config.json: 'pipeline.stages' must be between 1 and 1024, got "
            "4611686018427387904");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8,
                        "zero_optimization": {"reduce_bucket_size": 1e16}})"),
            "ds_config.json: 'zero_optimization.reduce_bucket_size' must be "
            "between 0 and 9007199254740992, got 10000000000000000");
}

/// A megabyte-long unknown key is reported without a suggestion, quickly:
/// lengths that cannot be within the edit budget are not compared.
TEST(DsConfig, LongUnknownKeyIsCheap) {
  std::string key(1 << 20, 'k');
  std::string error =
      errorOf(R"({"train_batch_size": 8, "fp16": {")" + key + R"(": 1}})");
  EXPECT_EQ(error, "ds_config.json: unknown key 'fp16." + key + "'");
}

TEST(DsConfig, LoadRefusesDirectoriesAndEndlessFiles) {
  std::string dir = ::testing::TempDir();
  try {
    loadDsConfig(dir);
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError &e) {
    EXPECT_EQ(std::string(e.what()),
              dir + ": is a directory, not a DeepSpeed config");
  }
  // /dev/zero used to be read until memory ran out.
  try {
    loadDsConfig("/dev/zero");
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError &e) {
    EXPECT_EQ(std::string(e.what()),
              "/dev/zero: larger than 16 MiB, not a DeepSpeed config");
  }
}

//===--- mixed precision --------------------------------------------------===//

/// DeepSpeed's defaults: DeepSpeedFP16Config / DeepSpeedBF16Config
/// (precision_config.py), data_types.grad_accum_dtype and
/// communication_data_type None (constants.py), resolved as engine.py does.
TEST(DsConfig, MixedPrecisionDefaultsAreDeepSpeeds) {
  const PrecisionConfig p = parse(R"({"train_batch_size": 8})").precision;
  EXPECT_EQ(p, PrecisionConfig());
  EXPECT_EQ(p.kind, Precision::FP32);
  EXPECT_FALSE(p.fp16.autoCast);
  EXPECT_EQ(p.fp16.lossScale, 0.0);
  EXPECT_TRUE(p.fp16.dynamicLossScale());
  EXPECT_EQ(p.fp16.initialScalePower, 16);
  EXPECT_EQ(p.fp16.lossScaleWindow, 1000);
  EXPECT_EQ(p.fp16.hysteresis, 2);
  EXPECT_FALSE(p.fp16.consecutiveHysteresis);
  EXPECT_EQ(p.fp16.minLossScale, 1);
  EXPECT_FALSE(p.bf16.immediateGradUpdate);
  EXPECT_TRUE(p.bf16.checkGradOverflow);
  EXPECT_FALSE(p.gradAccumDtypeSetting);
  EXPECT_FALSE(p.communicationDataTypeSetting);
  EXPECT_EQ(p.gradAccumDtype(), Precision::FP32);
  EXPECT_EQ(p.communicationDataType(), Precision::FP32);
  // Empty sections, and sections that enable nothing, mean the same.
  EXPECT_EQ(parse(R"({"train_batch_size": 8, "fp16": {}, "bf16": {},
                      "data_types": {}})")
                .precision,
            p);
  EXPECT_EQ(parse(R"({"train_batch_size": 8, "bfloat16": {"enabled": false}})")
                .precision,
            p);
}

TEST(DsConfig, Bf16IsRead) {
  for (const char *name : {"bf16", "bfloat16"}) {
    const PrecisionConfig p =
        parse(std::string(R"({"train_batch_size": 8, ")") + name +
              R"(": {"enabled": true}})")
            .precision;
    EXPECT_EQ(p.kind, Precision::BF16) << name;
    // Gradients accumulate and are reduced in fp32 by default (dsc's
    // choice; DeepSpeed's is the model's dtype).
    EXPECT_EQ(p.gradAccumDtype(), Precision::FP32);
    EXPECT_EQ(p.communicationDataType(), Precision::FP32);
    EXPECT_EQ(p.bf16, Bf16Config());
  }
  const PrecisionConfig p = parse(R"({"train_batch_size": 8, "bf16": {
      "enabled": true, "immediate_grad_update": true,
      "check_grad_overflow": false, "bf16_master_weights_and_grads": false,
      "bf16_optimizer_states": false}})")
                                .precision;
  EXPECT_TRUE(p.bf16.immediateGradUpdate);
  EXPECT_FALSE(p.bf16.checkGradOverflow);
  // Settings are read with the section disabled too.
  EXPECT_FALSE(parse(R"({"train_batch_size": 8, "bf16": {
                          "check_grad_overflow": false}})")
                   .precision.bf16.checkGradOverflow);
}

TEST(DsConfig, Fp16IsRead) {
  const PrecisionConfig p = parse(R"({"train_batch_size": 8, "fp16": {
      "enabled": true, "auto_cast": true, "loss_scale": 0,
      "initial_scale_power": 32, "loss_scale_window": 500, "hysteresis": 1,
      "consecutive_hysteresis": true, "min_loss_scale": 4,
      "fp16_master_weights_and_grads": false}})")
                                .precision;
  EXPECT_EQ(p.kind, Precision::FP16);
  EXPECT_TRUE(p.fp16.autoCast);
  EXPECT_TRUE(p.fp16.dynamicLossScale());
  EXPECT_EQ(p.fp16.initialScalePower, 32);
  EXPECT_EQ(p.fp16.lossScaleWindow, 500);
  EXPECT_EQ(p.fp16.hysteresis, 1);
  EXPECT_TRUE(p.fp16.consecutiveHysteresis);
  EXPECT_EQ(p.fp16.minLossScale, 4);
  EXPECT_EQ(p.gradAccumDtype(), Precision::FP32);
  EXPECT_EQ(p.communicationDataType(), Precision::FP32);
  // A static scale, and the extremes of the ranges.
  const Fp16Config f = parse(R"({"train_batch_size": 8, "fp16": {
      "enabled": true, "loss_scale": 128.5, "initial_scale_power": -126,
      "min_loss_scale": 9007199254740992}})")
                           .precision.fp16;
  EXPECT_EQ(f.lossScale, 128.5);
  EXPECT_FALSE(f.dynamicLossScale());
  EXPECT_EQ(f.initialScalePower, -126);
  EXPECT_EQ(f.minLossScale, int64_t(1) << 53);
  EXPECT_EQ(parse(R"({"train_batch_size": 8, "fp16": {"initial_scale_power": 127}})")
                .precision.fp16.initialScalePower,
            127);
}

TEST(DsConfig, Bf16AndFp16BothEnabledIsAnError) {
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "fp16": {"enabled": true},
                        "bf16": {"enabled": true}})"),
            "ds_config.json: 'bf16.enabled' and 'fp16.enabled' are both true: "
            "bf16 and fp16 mixed precision cannot both be enabled; set one to "
            "false");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "bfloat16": {"enabled": true},
                        "fp16": {"enabled": true}})"),
            "ds_config.json: 'bfloat16.enabled' and 'fp16.enabled' are both "
            "true: bf16 and fp16 mixed precision cannot both be enabled; set "
            "one to false");
  EXPECT_EQ(parse(R"({"train_batch_size": 8, "fp16": {"enabled": true},
                      "bf16": {"enabled": false}})")
                .precision.kind,
            Precision::FP16);
  EXPECT_EQ(parse(R"({"train_batch_size": 8, "fp16": {"enabled": false},
                      "bf16": {"enabled": true}})")
                .precision.kind,
            Precision::BF16);
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "bf16": {"enabled": false},
                        "bfloat16": {"enabled": false}})"),
            "ds_config.json: 'bf16' and 'bfloat16' are the same section "
            "(DeepSpeed's older name): give only one");
}

TEST(DsConfig, Fp16ValuesAreRangeChecked) {
  auto fp16 = [](const std::string &body) {
    return errorOf(R"({"train_batch_size": 8, "fp16": {)" + body + "}}");
  };
  EXPECT_EQ(fp16(R"("loss_scale": -1)"),
            "ds_config.json: 'fp16.loss_scale' must be >= 0, got -1");
  EXPECT_EQ(fp16(R"("loss_scale": true)"),
            "ds_config.json: 'fp16.loss_scale' must be a number, got boolean "
            "true");
  EXPECT_EQ(fp16(R"("loss_scale": 1e39)"),
            "ds_config.json: 'fp16.loss_scale' must lie within float32's range "
            "(+-3.4028234663852886e+38: dsrt trains in float32), got 1e+39");
  EXPECT_EQ(fp16(R"("initial_scale_power": 128)"),
            "ds_config.json: 'fp16.initial_scale_power' must be between -126 "
            "and 127, got 128");
  EXPECT_EQ(fp16(R"("initial_scale_power": -127)"),
            "ds_config.json: 'fp16.initial_scale_power' must be between -126 "
            "and 127, got -127");
  EXPECT_EQ(fp16(R"("initial_scale_power": 16.5)"),
            "ds_config.json: 'fp16.initial_scale_power' must be an integer, "
            "got number 16.5");
  // Checked with fp16 disabled too: --precision fp16 may enable it.
  EXPECT_EQ(fp16(R"("enabled": false, "loss_scale_window": 0)"),
            "ds_config.json: 'fp16.loss_scale_window' must be between 1 and "
            "9007199254740992, got 0");
  // Hysteresis 0 would never lower the scale (DynamicLossScaler decrements
  // it below 1).
  EXPECT_EQ(fp16(R"("hysteresis": 0)"),
            "ds_config.json: 'fp16.hysteresis' must be between 1 and "
            "9007199254740992, got 0");
  EXPECT_EQ(fp16(R"("min_loss_scale": 0)"),
            "ds_config.json: 'fp16.min_loss_scale' must be between 1 and "
            "9007199254740992, got 0");
  EXPECT_EQ(fp16(R"("min_loss_scale": 0.5)"),
            "ds_config.json: 'fp16.min_loss_scale' must be an integer, got "
            "number 0.5");
  EXPECT_EQ(fp16(R"("min_loss_scale": 9007199254740993)"),
            "ds_config.json: 'fp16.min_loss_scale' must be between 1 and "
            "9007199254740992, got 9007199254740993");
  EXPECT_EQ(fp16(R"("enabled": "true")"),
            "ds_config.json: 'fp16.enabled' must be true or false, got string "
            "\"true\"");
  EXPECT_EQ(fp16(R"("consecutive_hysteresis": 1)"),
            "ds_config.json: 'fp16.consecutive_hysteresis' must be true or "
            "false, got number 1");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "fp16": true})"),
            "ds_config.json: 'fp16' must be an object, got boolean true");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "bf16": {"immediate_grad_update": "no"}})"),
            "ds_config.json: 'bf16.immediate_grad_update' must be true or "
            "false, got string \"no\"");
}

TEST(DsConfig, MixedPrecisionUnknownKeysSuggestTheClosest) {
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "fp16": {"enabeld": true}})"),
            "ds_config.json: unknown key 'fp16.enabeld' (did you mean "
            "'enabled'?)");
  EXPECT_EQ(
      errorOf(R"({"train_batch_size": 8, "fp16": {"loss_scale_windw": 10}})"),
      "ds_config.json: unknown key 'fp16.loss_scale_windw' (did you mean "
      "'loss_scale_window'?)");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8,
                        "bf16": {"immediate_grad_updates": true}})"),
            "ds_config.json: unknown key 'bf16.immediate_grad_updates' (did you "
            "mean 'immediate_grad_update'?)");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8,
                        "bfloat16": {"check_grad_overflw": true}})"),
            "ds_config.json: unknown key 'bfloat16.check_grad_overflw' (did "
            "you mean 'check_grad_overflow'?)");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8,
                        "data_types": {"grad_acum_dtype": "fp32"}})"),
            "ds_config.json: unknown key 'data_types.grad_acum_dtype' (did you "
            "mean 'grad_accum_dtype'?)");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "communication_data_typ": "fp32"})"),
            "ds_config.json: unknown key 'communication_data_typ' (did you "
            "mean 'communication_data_type'?)");
  // fp16's keys are not bf16's.
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "bf16": {"loss_scale": 0}})"),
            "ds_config.json: unknown key 'bf16.loss_scale'");
}

/// DeepSpeed options that keep master weights, gradients or optimizer
/// states in 16 bits: dsc keeps them in fp32, so only false is accepted.
TEST(DsConfig, SixteenBitMasterWeightsAreRefused) {
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "fp16": {"enabled": true,
                        "fp16_master_weights_and_grads": true}})"),
            "ds_config.json: 'fp16.fp16_master_weights_and_grads' is not "
            "supported by dsc: dsc keeps the master weights and gradients in "
            "fp32 (DeepSpeed keeps them in fp16 only with ZeRO-Offload and "
            "DeepSpeedCPUAdam); remove it or set false");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "bf16": {
                        "bf16_master_weights_and_grads": true}})"),
            "ds_config.json: 'bf16.bf16_master_weights_and_grads' is not "
            "supported by dsc: dsc keeps the master weights and gradients in "
            "fp32; remove it or set false");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "bfloat16": {
                        "bf16_optimizer_states": true}})"),
            "ds_config.json: 'bfloat16.bf16_optimizer_states' is not supported "
            "by dsc: dsc keeps the optimizer states in fp32; remove it or set "
            "false");
}

TEST(DsConfig, GradAccumDtype) {
  auto dtype = [](const std::string &value, const char *kind = "") {
    std::string enable = *kind ? std::string(R"(, ")") + kind +
                                     R"(": {"enabled": true})"
                               : "";
    return parse(R"({"train_batch_size": 8, "data_types": {"grad_accum_dtype": )" +
                 value + "}" + enable + "}")
        .precision;
  };
  EXPECT_EQ(dtype(R"("fp32")", "bf16").gradAccumDtype(), Precision::FP32);
  EXPECT_EQ(dtype(R"("bf16")").gradAccumDtype(), Precision::BF16);
  EXPECT_EQ(dtype(R"("fp16")", "fp16").gradAccumDtype(), Precision::FP16);
  EXPECT_EQ(dtype(R"("fp32")", "bf16").gradAccumDtypeSetting, Precision::FP32);
  // DeepSpeed resolves it through DtypeEnum, which takes these spellings.
  for (const char *name : {"float32", "float", "torch.float32"})
    EXPECT_EQ(dtype("\"" + std::string(name) + "\"", "bf16").gradAccumDtype(),
              Precision::FP32)
        << name;
  for (const char *name : {"bfloat16", "torch.bfloat16"})
    EXPECT_EQ(dtype("\"" + std::string(name) + "\"").gradAccumDtype(),
              Precision::BF16)
        << name;
  for (const char *name : {"float16", "half", "torch.float16"})
    EXPECT_EQ(dtype("\"" + std::string(name) + "\"").gradAccumDtype(),
              Precision::FP16)
        << name;
  // null is DeepSpeed's default (None): dsc's fp32.
  EXPECT_FALSE(dtype("null", "bf16").gradAccumDtypeSetting);
  EXPECT_EQ(dtype("null", "bf16").gradAccumDtype(), Precision::FP32);

  auto dtypeError = [](const std::string &types) {
    return errorOf(R"({"train_batch_size": 8, "data_types": )" + types + "}");
  };
  EXPECT_EQ(dtypeError(R"({"grad_accum_dtype": "bf17"})"),
            "ds_config.json: 'data_types.grad_accum_dtype' is \"bf17\" (did "
            "you mean 'bf16'?); supported: fp32, bf16, fp16");
  EXPECT_EQ(dtypeError(R"({"grad_accum_dtype": "int8"})"),
            "ds_config.json: 'data_types.grad_accum_dtype' is \"int8\"; "
            "supported: fp32, bf16, fp16");
  // DtypeEnum is case-sensitive.
  EXPECT_EQ(dtypeError(R"({"grad_accum_dtype": "FP32"})"),
            "ds_config.json: 'data_types.grad_accum_dtype' is \"FP32\" (did "
            "you mean 'fp32'?); supported: fp32, bf16, fp16");
  EXPECT_EQ(dtypeError(R"({"grad_accum_dtype": 32})"),
            "ds_config.json: 'data_types.grad_accum_dtype' must be a string, "
            "got number 32");
  EXPECT_EQ(dtypeError("[]"),
            "ds_config.json: 'data_types' must be an object, got array []");
  // FSDP-style param_dtype / buffer_dtype: only their default, null.
  EXPECT_EQ(dtypeError(R"({"param_dtype": "bf16"})"),
            "ds_config.json: 'data_types.param_dtype' is not supported by dsc: "
            "parameters compute in the precision bf16/fp16 enables and buffers "
            "keep the model's dtype; remove it or set null");
  EXPECT_EQ(dtypeError(R"({"buffer_dtype": "fp32"})"),
            "ds_config.json: 'data_types.buffer_dtype' is not supported by "
            "dsc: parameters compute in the precision bf16/fp16 enables and "
            "buffers keep the model's dtype; remove it or set null");
  EXPECT_NO_THROW(parse(R"({"train_batch_size": 8, "data_types": {
      "param_dtype": null, "buffer_dtype": null}})"));
}

TEST(DsConfig, CommunicationDataType) {
  auto comm = [](const std::string &value) {
    return parse(R"({"train_batch_size": 8, "bf16": {"enabled": true},
                     "communication_data_type": )" +
                 value + "}")
        .precision;
  };
  EXPECT_EQ(comm(R"("fp32")").communicationDataType(), Precision::FP32);
  EXPECT_EQ(comm(R"("fp16")").communicationDataType(), Precision::FP16);
  EXPECT_EQ(comm(R"("bf16")").communicationDataType(), Precision::BF16);
  // DeepSpeed lower-cases it.
  EXPECT_EQ(comm(R"("FP32")").communicationDataType(), Precision::FP32);
  EXPECT_EQ(comm(R"("Bf16")").communicationDataTypeSetting, Precision::BF16);
  EXPECT_FALSE(comm("null").communicationDataTypeSetting);
  EXPECT_EQ(comm("null").communicationDataType(), Precision::FP32);
  // Only the three short names (get_communication_data_type).
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "communication_data_type": "float16"})"),
            "ds_config.json: 'communication_data_type' is \"float16\"; "
            "supported: fp32, bf16, fp16");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "communication_data_type": "fp61"})"),
            "ds_config.json: 'communication_data_type' is \"fp61\" (did you "
            "mean 'fp16'?); supported: fp32, bf16, fp16");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "communication_data_type": 16})"),
            "ds_config.json: 'communication_data_type' must be a string, got "
            "number 16");
}

/// A dtype left to the default equals the one it resolves to (fp32, dsc's
/// choice), so a plan's canonical config (which writes it out) matches a
/// run-time config that omits it; a different dtype does not.
TEST(DsConfig, PrecisionComparesResolvedDtypes) {
  TrainConfig omitted = parse(R"({"train_batch_size": 8, "bf16": {"enabled": true}})");
  EXPECT_EQ(omitted, parse(R"({"train_batch_size": 8, "bf16": {"enabled": true},
      "data_types": {"grad_accum_dtype": "fp32"}, "communication_data_type": "fp32"})"));
  EXPECT_NE(omitted, parse(R"({"train_batch_size": 8, "bf16": {"enabled": true},
      "data_types": {"grad_accum_dtype": "bf16"}})"));
  EXPECT_NE(omitted, parse(R"({"train_batch_size": 8, "bf16": {"enabled": true},
      "communication_data_type": "bf16"})"));
  EXPECT_NE(omitted, parse(R"({"train_batch_size": 8})"));
  EXPECT_NE(omitted, parse(R"({"train_batch_size": 8, "bf16": {"enabled": true,
      "check_grad_overflow": false}})"));
  EXPECT_NE(parse(R"({"train_batch_size": 8, "fp16": {"hysteresis": 1}})"),
            parse(R"({"train_batch_size": 8})"));
}

TEST(DsConfig, TorchAutocastIsRefused) {
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8,
                        "torch_autocast": {"enabled": true, "dtype": "bfloat16"}})"),
            "ds_config.json: 'torch_autocast.enabled' is true, but dsc has no "
            "torch.autocast mode; use \"bf16\": {\"enabled\": true} (or fp16) "
            "for mixed precision, and remove the section or set \"enabled\": "
            "false");
  EXPECT_NO_THROW(parse(R"({"train_batch_size": 8, "torch_autocast": {"enabled": false}})"));
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "torch_autocast": {"dtyp": "fp16"}})"),
            "ds_config.json: unknown key 'torch_autocast.dtyp' (did you mean "
            "'dtype'?)");
}

/// dsc --precision: dsc's names and Lightning's (fabric precision.py).
TEST(DsConfig, PrecisionFlag) {
  EXPECT_EQ(precisionFromFlag("fp32"), Precision::FP32);
  EXPECT_EQ(precisionFromFlag("bf16"), Precision::BF16);
  EXPECT_EQ(precisionFromFlag("fp16"), Precision::FP16);
  EXPECT_EQ(precisionFromFlag("32-true"), Precision::FP32);
  EXPECT_EQ(precisionFromFlag("bf16-mixed"), Precision::BF16);
  EXPECT_EQ(precisionFromFlag("16-mixed"), Precision::FP16);
  for (Precision p : {Precision::FP32, Precision::BF16, Precision::FP16})
    EXPECT_EQ(precisionFromFlag(precisionName(p)), p);
  auto flagError = [](const std::string &value) -> std::string {
    try {
      precisionFromFlag(value);
    } catch (const ConfigError &e) {
      return e.what();
    }
    ADD_FAILURE() << "expected a ConfigError for --precision " << value;
    return "";
  };
  EXPECT_EQ(flagError("bf16-true"),
            "'bf16-true' is not supported: Lightning's -true modes keep the "
            "weights in that type, dsc keeps fp32 master weights; accepted: "
            "fp32, bf16, fp16 (or Lightning's 32-true, bf16-mixed, 16-mixed)");
  EXPECT_EQ(flagError("16-true").rfind("'16-true' is not supported", 0), 0u);
  EXPECT_EQ(flagError("64-true").rfind("'64-true' is not supported", 0), 0u);
  EXPECT_EQ(flagError("bf61"),
            "'bf61' is not a precision (did you mean 'bf16'?); accepted: fp32, "
            "bf16, fp16 (or Lightning's 32-true, bf16-mixed, 16-mixed)");
  EXPECT_EQ(flagError("BF16"),
            "'BF16' is not a precision (did you mean 'bf16'?); accepted: fp32, "
            "bf16, fp16 (or Lightning's 32-true, bf16-mixed, 16-mixed)");
  EXPECT_EQ(flagError(""),
            "'' is not a precision; accepted: fp32, bf16, fp16 (or "
            "Lightning's 32-true, bf16-mixed, 16-mixed)");
}

TEST(DsConfig, TensorParallelSection) {
  EXPECT_EQ(parse(R"({"train_batch_size": 8, "tensor_parallel": {"autotp_size": 4}})")
                .tensorParallel,
            4);
  EXPECT_EQ(parse(R"({"train_batch_size": 8})").tensorParallel, 1);
  EXPECT_NE(errorOf(R"({"train_batch_size": 8, "tensor_parallel": {"tp": {"tp_grain_size": 64}}})")
                .find("'tensor_parallel.tp.tp_grain_size' is number 64: not supported by dsc: "
                      "the keys besides autotp_size configure DeepSpeed's AutoTP"),
            std::string::npos);
  // DeepSpeed's default 0 is no tensor parallelism; AutoTP's keys at their
  // defaults ask for nothing.
  EXPECT_EQ(parse(R"({"train_batch_size": 8, "tensor_parallel": {"autotp_size": 0,
      "tp": {"tp_size": 1}, "keep_module_on_host": false}})")
                .tensorParallel,
            1);
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "tensor_parallel": {"autotp_sise": 2}})"),
            "ds_config.json: unknown key 'tensor_parallel.autotp_sise' (did you mean "
            "'autotp_size'?)");
}

TEST(DsConfig, CheckpointSection) {
  // DeepSpeed's defaults ask for what dsrt does anyway: no note.
  TrainConfig quiet = parse(R"({"train_batch_size": 8, "checkpoint": {
                "tag_validation": "Ignore", "load_universal": true,
                "use_node_local_storage": false, "parallel_write": {"pipeline_stage": true}}})");
  EXPECT_TRUE(quiet.notes.empty());
  // What dsrt always does regardless is said, never silently dropped.
  TrainConfig noted = parse(R"({"train_batch_size": 8, "checkpoint": {
                "tag_validation": "fail", "load_universal": false,
                "parallel_write": {"pipeline_stage": false}}})");
  ASSERT_EQ(noted.notes.size(), 3u);
  EXPECT_NE(noted.notes[0].find("'checkpoint.tag_validation' checks that every rank"),
            std::string::npos);
  EXPECT_NE(noted.notes[1].find("every dsc checkpoint is universal"), std::string::npos);
  EXPECT_NE(noted.notes[2].find("'checkpoint.parallel_write.pipeline_stage' is false"),
            std::string::npos);
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "checkpoint": {"tag_validation": "Wran"}})"),
            "ds_config.json: 'checkpoint.tag_validation' is 'Wran' (did you mean 'Warn'?); "
            "DeepSpeed's values: Ignore, Warn, Fail");
  EXPECT_TRUE(parse(R"({"train_batch_size": 8, "checkpoint": {"use_node_local_storage": true}})")
                  .checkpointNodeLocal);
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "checkpoint": {"tag_validaton": "Warn"}})"),
            "ds_config.json: unknown key 'checkpoint.tag_validaton' (did you mean "
            "'tag_validation'?)");
}

TEST(DsConfig, ActivationCheckpointing) {
  // DeepSpeed's keys without dsc's "recompute": layers, with a note for
  // each key that has no effect in dsc.
  TrainConfig ds = parse(R"({"train_batch_size": 8, "activation_checkpointing": {
                "partition_activations": true, "number_checkpoints": 4}})");
  EXPECT_EQ(ds.recompute.mode, "layers");
  EXPECT_EQ(ds.recompute.numberCheckpoints, 4);
  ASSERT_EQ(ds.notes.size(), 2u);
  EXPECT_NE(ds.notes[1].find("'activation_checkpointing.partition_activations' has no effect"),
            std::string::npos);
  EXPECT_EQ(parse(R"({"train_batch_size": 8, "activation_checkpointing": {
                "recompute": "selective"}})")
                .recompute.mode,
            "selective");
  // An empty section asks for nothing.
  EXPECT_EQ(parse(R"({"train_batch_size": 8, "activation_checkpointing": {}})").recompute.mode,
            "none");
  // The partition note is about what dsc does under tp (it said dsc had
  // no tensor parallelism).
  EXPECT_NE(ds.notes[1].find("dsc keeps the layer inputs it checkpoints whole on every "
                             "tensor-parallel rank"),
            std::string::npos);
  // Lightning writes DeepSpeed's keys at their defaults: no recompute.
  EXPECT_EQ(parse(R"({"train_batch_size": 8, "activation_checkpointing": {
                "partition_activations": false, "cpu_checkpointing": false,
                "contiguous_memory_optimization": false,
                "synchronize_checkpoint_boundary": false}})")
                .recompute.mode,
            "none");
  // Which inputs to keep, with recompute none, was accepted and ignored.
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "activation_checkpointing": {
                "recompute": "none", "number_checkpoints": 2}})"),
            "ds_config.json: 'activation_checkpointing.number_checkpoints' chooses which layer "
            "inputs recompute keeps, but 'activation_checkpointing.recompute' is 'none': set it "
            "to layers (or selective), or remove 'number_checkpoints'");
  EXPECT_NE(errorOf(R"({"train_batch_size": 8, "activation_checkpointing": {
                "recompute": "none", "interval": 2}})")
                .find("'activation_checkpointing.interval' chooses which layer inputs"),
            std::string::npos);
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "activation_checkpointing": {
                "recompute": "all"}})"),
            "ds_config.json: 'activation_checkpointing.recompute' is 'all'; supported: none, "
            "layers, selective, auto");
  TrainConfig autoCfg = parse(R"({"train_batch_size": 8, "activation_checkpointing": {
                "recompute": "auto", "memory_budget": "6GiB"}})");
  EXPECT_EQ(autoCfg.recompute.memoryBudget, uint64_t(6) << 30);
  EXPECT_EQ(parseByteSize("512M"), std::optional<uint64_t>(512000000));
  EXPECT_EQ(parseByteSize("3KiB"), std::optional<uint64_t>(3072));
  EXPECT_EQ(parseByteSize("99999999999999999999"), std::nullopt);
  EXPECT_EQ(parseByteSize("20000000TiB"), std::nullopt);
  EXPECT_EQ(parseByteSize("1.5G"), std::nullopt);
  EXPECT_EQ(
      errorOf(R"({"train_batch_size": 8, "activation_checkpointing": true})"),
      "ds_config.json: 'activation_checkpointing' must be an object, got "
      "boolean true");
  // The canonical config carries the mode (dsrt compares it).
  TrainConfig back = parse(toJson(ds));
  EXPECT_TRUE(back.recompute == ds.recompute);
}

/// The canonical config carries the tensor-parallel size, so dsrt --config
/// can compare it with the plan's.
TEST(DsConfig, CanonicalJsonCarriesTheTensorParallelSize) {
  TrainConfig tp = parse(R"({"train_batch_size": 8, "tensor_parallel": {"autotp_size": 2}})");
  EXPECT_NE(toJson(tp).find(R"("autotp_size": 2)"), std::string::npos);
  EXPECT_EQ(parse(toJson(tp)), tp);
  EXPECT_NE(tp, parse(R"({"train_batch_size": 8})"));
}

TEST(DsConfig, WallClockBreakdownIsRead) {
  TrainConfig c =
      parse(R"({"train_batch_size": 8, "wall_clock_breakdown": true})");
  EXPECT_TRUE(c.wallClockBreakdown);
  EXPECT_NE(toJson(c).find(R"("wall_clock_breakdown": true)"),
            std::string::npos);
  EXPECT_EQ(parseDsConfig(toJson(c), "canonical"), c);
  EXPECT_FALSE(
      parse(R"({"train_batch_size": 8, "wall_clock_breakdown": false})")
          .wallClockBreakdown);
  EXPECT_NE(c, parse(R"({"train_batch_size": 8})"));
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "wall_clock_breakdown": 1})"),
            "ds_config.json: 'wall_clock_breakdown' must be true or false, got "
            "number 1");
}

TEST(DsConfig, FlopsProfilerIsRead) {
  // DeepSpeed's defaults (deepspeed/profiling/config.py).
  TrainConfig d = parse(R"({"train_batch_size": 8, "flops_profiler": {"enabled": true}})");
  EXPECT_TRUE(d.flopsProfiler.enabled);
  EXPECT_EQ(d.flopsProfiler.profileStep, 1);
  EXPECT_EQ(d.flopsProfiler.moduleDepth, -1);
  EXPECT_EQ(d.flopsProfiler.topModules, 1);
  EXPECT_TRUE(d.flopsProfiler.detailed);
  EXPECT_EQ(d.flopsProfiler.outputFile, "");
  TrainConfig c = parse(R"({"train_batch_size": 8, "flops_profiler": {"enabled": true,
      "profile_step": 5, "module_depth": 2, "top_modules": 3, "detailed": false,
      "output_file": "prof.txt", "recompute_fwd_factor": 0.0}})");
  EXPECT_EQ(c.flopsProfiler.profileStep, 5);
  EXPECT_EQ(c.flopsProfiler.moduleDepth, 2);
  EXPECT_EQ(c.flopsProfiler.topModules, 3);
  EXPECT_FALSE(c.flopsProfiler.detailed);
  EXPECT_EQ(c.flopsProfiler.outputFile, "prof.txt");
  EXPECT_EQ(parseDsConfig(toJson(c), "canonical"), c);
  EXPECT_EQ(parseDsConfig(toJson(d), "canonical"), d);
  EXPECT_NE(c, d);
  EXPECT_NE(errorOf(R"({"train_batch_size": 8, "flops_profiler": {"enabled": true,
      "recompute_fwd_factor": 0.5}})")
                .find("'flops_profiler.recompute_fwd_factor' is 0.500000: dsrt counts"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"train_batch_size": 8, "flops_profiler": {"enabled": true,
      "profile_step": 0}})")
                .find("'flops_profiler.profile_step' must be between 1 and"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"train_batch_size": 8, "flops_profiler": {"enabled": true,
      "output_file": ""}})")
                .find("'flops_profiler.output_file' is empty"),
            std::string::npos);
}

/// pipeline.partition and seed_layers were read and dropped.
TEST(DsConfig, PipelinePartitionAndSeedLayersAreNotIgnored) {
  auto pipeline = [](const std::string &section) {
    return R"({"train_batch_size": 8, "pipeline": )" + section + "}";
  };
  EXPECT_EQ(parse(pipeline(R"({"partition": "uniform"})")).pipeline.partitionMethod,
            "uniform");
  EXPECT_EQ(parse(pipeline(R"({"partition": "parameters",
      "partition_method": "parameters"})")).pipeline.partitionMethod,
            "parameters");
  EXPECT_EQ(parse(pipeline(R"({"partition": "best", "partition_method": "uniform"})"))
                .pipeline.partitionMethod,
            "uniform");
  EXPECT_EQ(parse(pipeline(R"({"partition": "best"})")).pipeline.partitionMethod,
            "cost");
  EXPECT_EQ(errorOf(pipeline(R"({"partition": "uniform", "partition_method": "cost"})")),
            "ds_config.json: 'pipeline.partition' is 'uniform' but "
            "'pipeline.partition_method' is 'cost': they are the same setting, "
            "give only one");
  EXPECT_EQ(errorOf(pipeline(R"({"seed_layers": true})")),
            "ds_config.json: 'pipeline.seed_layers' is not supported: dsc takes "
            "the initial weights from the ONNX model instead of initializing "
            "layers; remove it or set false");
  EXPECT_NO_THROW(parse(pipeline(R"({"seed_layers": false,
      "pipe_partitioned": true, "grad_partitioned": false})")));
}

//===--- zero_optimization ------------------------------------------------===//

namespace {
std::string withZero(const std::string &zero) {
  return R"({"train_batch_size": 8, "zero_optimization": )" + zero + "}";
}
ZeroConfig zeroOf(const std::string &zero) {
  return parse(withZero(zero)).zero;
}
} // namespace

TEST(DsConfig, ZeroDefaultsAreDeepSpeeds) {
  for (const char *text : {"", R"("zero_optimization": {}, )"}) {
    SCOPED_TRACE(text);
    ZeroConfig z =
        parse(std::string("{") + text + R"("train_batch_size": 8})").zero;
    EXPECT_EQ(z.stage, 0);
    EXPECT_EQ(z.reduceBucketSize, 500000000);
    EXPECT_EQ(z.allgatherBucketSize, 500000000);
    EXPECT_FALSE(z.overlapCommSetting.has_value());
    EXPECT_FALSE(z.overlapComm());
    EXPECT_EQ(z.stage3PrefetchBucketSize, 50000000);
    EXPECT_EQ(z.stage3ParamPersistenceThreshold, 100000);
    EXPECT_EQ(z.stage3MaxLiveParameters, 1000000000);
    EXPECT_EQ(z.subGroupSize, 1000000000);
    EXPECT_EQ(z, ZeroConfig());
  }
  EXPECT_EQ(defaultConfig().zero, ZeroConfig());
}

TEST(DsConfig, ZeroValuesAreRead) {
  ZeroConfig z = zeroOf(R"({"stage": 2, "reduce_bucket_size": 1000,
      "allgather_bucket_size": 2000, "overlap_comm": true,
      "contiguous_gradients": false, "reduce_scatter": false,
      "stage3_prefetch_bucket_size": 3000,
      "stage3_param_persistence_threshold": 0,
      "stage3_max_live_parameters": 5000, "allgather_partitions": false,
      "round_robin_gradients": true, "sub_group_size": 6000})");
  EXPECT_EQ(z.stage, 2);
  EXPECT_EQ(z.reduceBucketSize, 1000);
  EXPECT_EQ(z.allgatherBucketSize, 2000);
  EXPECT_EQ(z.overlapCommSetting, std::optional<bool>(true));
  EXPECT_TRUE(z.overlapComm());
  EXPECT_EQ(z.stage3PrefetchBucketSize, 3000);
  EXPECT_EQ(z.stage3ParamPersistenceThreshold, 0);
  EXPECT_EQ(z.stage3MaxLiveParameters, 5000);
  EXPECT_EQ(z.subGroupSize, 6000);
  for (int stage : {0, 1, 2, 3})
    EXPECT_EQ(zeroOf(R"({"stage": )" + std::to_string(stage) + "}").stage,
              stage);
}

TEST(DsConfig, ZeroOverlapCommDefaultsByStage) {
  // DeepSpeed's overlap_comm_valid: stage 3 overlaps unless told otherwise,
  // the other stages do not.
  for (int stage : {0, 1, 2, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    std::string s = std::to_string(stage);
    ZeroConfig z = zeroOf(R"({"stage": )" + s + "}");
    EXPECT_FALSE(z.overlapCommSetting.has_value());
    EXPECT_EQ(z.overlapComm(), stage == 3);
    EXPECT_TRUE(zeroOf(R"({"stage": )" + s + R"(, "overlap_comm": true})")
                    .overlapComm());
    EXPECT_FALSE(zeroOf(R"({"stage": )" + s + R"(, "overlap_comm": false})")
                     .overlapComm());
  }
  // Equality is by effect: the default and the same value written out agree.
  EXPECT_EQ(zeroOf(R"({"stage": 3})"),
            zeroOf(R"({"stage": 3, "overlap_comm": true})"));
  EXPECT_NE(zeroOf(R"({"stage": 3})"),
            zeroOf(R"({"stage": 3, "overlap_comm": false})"));
  EXPECT_EQ(zeroOf(R"({"stage": 2})"),
            zeroOf(R"({"stage": 2, "overlap_comm": false})"));
  ZeroConfig z;
  z.stage = 3;
  EXPECT_TRUE(z.overlapComm());
  z.overlapCommSetting = false;
  EXPECT_FALSE(z.overlapComm());
}

TEST(DsConfig, ZeroSizesMayBeIntegralFloats) {
  ZeroConfig z = zeroOf(R"({"reduce_bucket_size": 5e8,
      "allgather_bucket_size": 2e8, "stage3_prefetch_bucket_size": 5.0e7,
      "stage3_param_persistence_threshold": 1e4,
      "stage3_max_live_parameters": 1e9, "sub_group_size": 1e12})");
  EXPECT_EQ(z.reduceBucketSize, 500000000);
  EXPECT_EQ(z.allgatherBucketSize, 200000000);
  EXPECT_EQ(z.stage3PrefetchBucketSize, 50000000);
  EXPECT_EQ(z.stage3ParamPersistenceThreshold, 10000);
  EXPECT_EQ(z.stage3MaxLiveParameters, 1000000000);
  EXPECT_EQ(z.subGroupSize, 1000000000000);
  EXPECT_EQ(zeroOf(R"({"stage3_param_persistence_threshold": 0.0})")
                .stage3ParamPersistenceThreshold,
            0);
  // DeepSpeed's "no limit" spelling, and the bound itself (2^53).
  EXPECT_EQ(zeroOf(R"({"stage3_max_live_parameters": 1e12})")
                .stage3MaxLiveParameters,
            1000000000000);
  EXPECT_EQ(zeroOf(R"({"reduce_bucket_size": 9.007199254740992e15})")
                .reduceBucketSize,
            kMaxElements);
}

TEST(DsConfig, ZeroFieldNamesAreSynonymsOfTheirStage3Aliases) {
  // DeepSpeed populates by field name as well as by alias.
  ZeroConfig z = zeroOf(R"({"prefetch_bucket_size": 7,
      "param_persistence_threshold": 8, "max_live_parameters": 9e3})");
  EXPECT_EQ(z.stage3PrefetchBucketSize, 7);
  EXPECT_EQ(z.stage3ParamPersistenceThreshold, 8);
  EXPECT_EQ(z.stage3MaxLiveParameters, 9000);
  EXPECT_EQ(errorOf(withZero(R"({"prefetch_bucket_size": 7,
                "stage3_prefetch_bucket_size": 7})")),
            "ds_config.json: 'zero_optimization.prefetch_bucket_size' and "
            "'zero_optimization.stage3_prefetch_bucket_size' are the same "
            "setting (DeepSpeed accepts either name): give only one");
  EXPECT_EQ(errorOf(withZero(R"({"max_live_parameters": -1})")),
            "ds_config.json: 'zero_optimization.max_live_parameters' must be "
            "between 0 and 9007199254740992, got -1");
}

TEST(DsConfig, ZeroErrors) {
  auto zero = [](const std::string &text) { return errorOf(withZero(text)); };
  // Stage.
  EXPECT_EQ(zero(R"({"stage": 4})"),
            "ds_config.json: 'zero_optimization.stage' must be between 0 and 3, "
            "got 4");
  EXPECT_EQ(zero(R"({"stage": -1})"),
            "ds_config.json: 'zero_optimization.stage' must be between 0 and 3, "
            "got -1");
  EXPECT_EQ(zero(R"({"stage": "3"})"),
            "ds_config.json: 'zero_optimization.stage' must be an integer, got "
            "string \"3\"");
  EXPECT_EQ(zero(R"({"stage": 2.5})"),
            "ds_config.json: 'zero_optimization.stage' must be an integer, got "
            "number 2.5");
  // Sizes: integral, in range.
  EXPECT_EQ(zero(R"({"reduce_bucket_size": 1.5})"),
            "ds_config.json: 'zero_optimization.reduce_bucket_size' must be an "
            "integer, got number 1.5");
  EXPECT_EQ(zero(R"({"allgather_bucket_size": 5.5e-1})"),
            "ds_config.json: 'zero_optimization.allgather_bucket_size' must be "
            "an integer, got number 0.55");
  EXPECT_EQ(zero(R"({"reduce_bucket_size": "5e8"})"),
            "ds_config.json: 'zero_optimization.reduce_bucket_size' must be an "
            "integer, got string \"5e8\"");
  EXPECT_EQ(zero(R"({"reduce_bucket_size": 1e19})"),
            "ds_config.json: 'zero_optimization.reduce_bucket_size' must be "
            "between 0 and 9007199254740992, got 1e+19");
  EXPECT_EQ(zero(R"({"stage3_max_live_parameters": 18446744073709551615})"),
            "ds_config.json: 'zero_optimization.stage3_max_live_parameters' "
            "must be between 0 and 9007199254740992, got 18446744073709551615");
  // 0 elements: DeepSpeed's buckets then hold one tensor each, as 1 does.
  TrainConfig zeroBucket = parse(withZero(R"({"reduce_bucket_size": 0})"));
  EXPECT_EQ(zeroBucket.zero.reduceBucketSize, 1);
  ASSERT_EQ(zeroBucket.notes.size(), 1u);
  EXPECT_NE(zeroBucket.notes[0].find("each tensor is reduced on its own"), std::string::npos);
  EXPECT_EQ(zero(R"({"allgather_bucket_size": -5e8})"),
            "ds_config.json: 'zero_optimization.allgather_bucket_size' must be "
            "between 0 and 9007199254740992, got -500000000");
  EXPECT_EQ(zero(R"({"stage3_prefetch_bucket_size": -1})"),
            "ds_config.json: 'zero_optimization.stage3_prefetch_bucket_size' "
            "must be between 0 and 9007199254740992, got -1");
  EXPECT_EQ(zero(R"({"stage3_param_persistence_threshold": -1e5})"),
            "ds_config.json: "
            "'zero_optimization.stage3_param_persistence_threshold' must be "
            "between 0 and 9007199254740992, got -100000");
  EXPECT_EQ(zero(R"({"stage3_max_live_parameters": -2})"),
            "ds_config.json: 'zero_optimization.stage3_max_live_parameters' "
            "must be between 0 and 9007199254740992, got -2");
  EXPECT_EQ(zero(R"({"sub_group_size": -3})"),
            "ds_config.json: 'zero_optimization.sub_group_size' must be between "
            "0 and 9007199254740992, got -3");
  // Flags.
  EXPECT_EQ(zero(R"({"overlap_comm": 1})"),
            "ds_config.json: 'zero_optimization.overlap_comm' must be true or "
            "false, got number 1");
  // A null size reads "got null" (it read "got null null").
  EXPECT_EQ(zero(R"({"sub_group_size": null})"),
            "ds_config.json: 'zero_optimization.sub_group_size' must be an integer, got null");
  // The section itself.
  EXPECT_EQ(zero("[]"),
            "ds_config.json: 'zero_optimization' must be an object, got array "
            "[]");
  EXPECT_EQ(zero("2"),
            "ds_config.json: 'zero_optimization' must be an object, got number "
            "2");
  // DeepSpeed's deprecated boolean form (the getting-started tutorial's):
  // true is stage 1, with allgather_size as the all-gather bucket.
  TrainConfig on = parse(R"({"train_batch_size": 8, "zero_optimization": true,
      "allgather_size": 2e8})");
  EXPECT_EQ(on.zero.stage, 1);
  EXPECT_EQ(on.zero.allgatherBucketSize, 200000000);
  ASSERT_EQ(on.notes.size(), 1u);
  EXPECT_EQ(on.notes[0], "'zero_optimization': true is DeepSpeed's deprecated form of "
                         "{\"stage\": 1}, read as such");
  EXPECT_EQ(parse(R"({"train_batch_size": 8, "zero_optimization": false})").zero.stage, 0);
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "zero_optimization": {
                "stage": 1, "stage": 2}})"),
            "ds_config.json: duplicate key 'zero_optimization.stage'");
}

// The ZeRO keys that change nothing dsc plans are accepted with a note
// that says why when they leave DeepSpeed's default, and silently at it:
// nothing is accepted and then ignored.
TEST(DsConfig, ZeroKeysThatChangeNothingAreNotes) {
  auto notesOf = [](const std::string &zero) {
    std::string all;
    for (const std::string &n : parseDsConfig(withZero(zero)).notes)
      all += n + "\n";
    return all;
  };
  const std::string away = notesOf(R"({"stage": 2, "contiguous_gradients": false,
      "reduce_scatter": false, "allgather_partitions": false, "round_robin_gradients": true})");
  for (const char *note :
       {"'zero_optimization.contiguous_gradients' is boolean false: accepted, it changes "
        "nothing in dsc: DeepSpeed copies gradients into one contiguous buffer",
        "'zero_optimization.reduce_scatter' is boolean false: accepted, it changes nothing in "
        "dsc: false makes DeepSpeed all-reduce each gradient bucket",
        "'zero_optimization.allgather_partitions' is boolean false: accepted, it changes "
        "nothing in dsc: false makes DeepSpeed broadcast",
        "'zero_optimization.round_robin_gradients' is boolean true: accepted, it changes "
        "nothing in dsc: DeepSpeed's order of copying"})
    EXPECT_NE(away.find(note), std::string::npos) << note << "\nin:\n" << away;
  EXPECT_EQ(notesOf(R"({"stage": 2, "contiguous_gradients": true, "reduce_scatter": true,
      "allgather_partitions": true, "round_robin_gradients": false})"),
            "");
}

TEST(DsConfig, ZeroUnknownKeysSuggestTheClosest) {
  auto zero = [](const std::string &text) { return errorOf(withZero(text)); };
  EXPECT_EQ(zero(R"({"reduce_bucket_sise": 5e8})"),
            "ds_config.json: unknown key "
            "'zero_optimization.reduce_bucket_sise' (did you mean "
            "'reduce_bucket_size'?)");
  EXPECT_EQ(zero(R"({"stag": 2})"),
            "ds_config.json: unknown key 'zero_optimization.stag' (did you "
            "mean 'stage'?)");
  EXPECT_EQ(zero(R"({"overlap_com": true})"),
            "ds_config.json: unknown key 'zero_optimization.overlap_com' (did "
            "you mean 'overlap_comm'?)");
  EXPECT_EQ(zero(R"({"Contiguous_Gradients": true})"),
            "ds_config.json: unknown key "
            "'zero_optimization.Contiguous_Gradients' (did you mean "
            "'contiguous_gradients'?)");
  EXPECT_EQ(zero(R"({"stage3_prefetch_bucket_sizes": 1})"),
            "ds_config.json: unknown key "
            "'zero_optimization.stage3_prefetch_bucket_sizes' (did you mean "
            "'stage3_prefetch_bucket_size'?)");
  EXPECT_EQ(zero(R"({"prefetch_bucket_sise": 1})"),
            "ds_config.json: unknown key "
            "'zero_optimization.prefetch_bucket_sise' (did you mean "
            "'prefetch_bucket_size'?)");
  // The suggestion considers every key DeepSpeed knows, unsupported ones too.
  EXPECT_EQ(zero(R"({"offload_optimiser": {}})"),
            "ds_config.json: unknown key 'zero_optimization.offload_optimiser' "
            "(did you mean 'offload_optimizer'?)");
  EXPECT_EQ(zero(R"({"stage3_max_reuse_distanse": 1})"),
            "ds_config.json: unknown key "
            "'zero_optimization.stage3_max_reuse_distanse' (did you mean "
            "'stage3_max_reuse_distance'?)");
  EXPECT_EQ(zero(R"({"colour": 1})"),
            "ds_config.json: unknown key 'zero_optimization.colour'");
}

TEST(DsConfig, ZeroKeysDscDoesNotImplementSaySo) {
  // At DeepSpeed's default (or switched off) they ask for nothing.
  TrainConfig quiet = parse(withZero(R"({"stage": 2, "offload_optimizer": {"device": "none",
      "pin_memory": true}, "offload_param": null,
      "stage3_gather_16bit_weights_on_model_save": false, "zero_quantized_weights": false,
      "mics_shard_size": -1, "zero_hpz_partition_size": 1, "load_from_fp32_weights": true})"));
  EXPECT_TRUE(quiet.notes.empty());
  EXPECT_EQ(quiet.zero.offloadOptimizer, ZeroConfig::OffloadDevice::None);
  TrainConfig off = parse(withZero(R"({"cpu_offload": false})"));
  EXPECT_TRUE(off.notes.empty());
  EXPECT_EQ(off.zero.offloadOptimizer, ZeroConfig::OffloadDevice::None);
  // ZeRO-Offload to host memory, under both of DeepSpeed's names.
  EXPECT_EQ(parse(withZero(R"({"stage": 1, "offload_optimizer": {"device": "cpu"}})"))
                .zero.offloadOptimizer,
            ZeroConfig::OffloadDevice::Cpu);
  TrainConfig old = parse(withZero(R"({"cpu_offload": true})"));
  EXPECT_EQ(old.zero.offloadOptimizer, ZeroConfig::OffloadDevice::Cpu);
  ASSERT_EQ(old.notes.size(), 1u);
  EXPECT_NE(old.notes[0].find("DeepSpeed's older form of offload_optimizer"), std::string::npos);
  // Both names at once: DeepSpeed asserts, dsc says which to drop.
  EXPECT_NE(errorOf(withZero(R"({"cpu_offload": false, "offload_optimizer": {"device": "none"}})"))
                .find("give only one"),
            std::string::npos);
  // NVMe: in a folder it names; never host memory instead.
  EXPECT_NE(errorOf(withZero(R"({"offload_optimizer": {"device": "nvme"}})"))
                .find("give 'zero_optimization.offload_optimizer.nvme_path'"),
            std::string::npos);
  TrainConfig nvme =
      parse(withZero(R"({"offload_optimizer": {"device": "nvme", "nvme_path": "/nvme"}})"));
  EXPECT_EQ(nvme.zero.offloadOptimizer, ZeroConfig::OffloadDevice::Nvme);
  EXPECT_EQ(nvme.zero.offloadNvmePath, "/nvme");
  // The canonical config reads back the same (the baked config of a plan).
  EXPECT_EQ(parse(toJson(nvme)).zero, nvme.zero);
  // Refused features name the key, what DeepSpeed does and what dsc offers.
  std::string ratio =
      errorOf(withZero(R"({"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 0.5}})"));
  EXPECT_NE(ratio.find("'zero_optimization.offload_optimizer.ratio'"), std::string::npos) << ratio;
  EXPECT_NE(ratio.find("partial offload"), std::string::npos) << ratio;
  // ZeRO-Infinity's parameter offload, under both names (the stage is
  // checked where --zero has had its say: CompileConfig).
  TrainConfig params = parse(withZero(R"({"stage": 3, "offload_param": {"device": "nvme",
      "nvme_path": "/nvme", "buffer_count": 5, "max_in_cpu": 1e9}})"));
  EXPECT_EQ(params.zero.offloadParam, ZeroConfig::OffloadDevice::Nvme);
  EXPECT_EQ(params.zero.offloadParamNvmePath, "/nvme");
  EXPECT_EQ(params.zero.nvmeTierPath(), "/nvme");
  EXPECT_EQ(parse(toJson(params)).zero, params.zero);
  TrainConfig oldParam = parse(withZero(R"({"stage": 3, "cpu_offload_param": true})"));
  EXPECT_EQ(oldParam.zero.offloadParam, ZeroConfig::OffloadDevice::Cpu);
  EXPECT_NE(errorOf(withZero(R"({"cpu_offload_param": true, "offload_param": {"device": "cpu"}})"))
                .find("give only one"),
            std::string::npos);
  EXPECT_NE(errorOf(withZero(R"({"offload_param": {"device": "nvme"}})"))
                .find("give 'zero_optimization.offload_param.nvme_path'"),
            std::string::npos);
  EXPECT_EQ(params.zero.nvmeParamPath(), ""); // no optimizer offload: one tier file
  // Two drives (DeepSpeed's two swappers): the parameters' own folder.
  TrainConfig two = parse(withZero(R"({"stage": 3,
      "offload_optimizer": {"device": "nvme", "nvme_path": "/a"},
      "offload_param": {"device": "nvme", "nvme_path": "/b"}})"));
  EXPECT_EQ(two.zero.nvmeTierPath(), "/a");
  EXPECT_EQ(two.zero.nvmeParamPath(), "/b");
  EXPECT_EQ(parse(toJson(two)).zero, two.zero);
  TrainConfig one = parse(withZero(R"({"stage": 3,
      "offload_optimizer": {"device": "nvme", "nvme_path": "/a"},
      "offload_param": {"device": "nvme", "nvme_path": "/a"}})"));
  EXPECT_EQ(one.zero.nvmeParamPath(), "");
  EXPECT_NE(errorOf(withZero(R"({"zero_quantized_gradients": true})")).find("ZeRO++"),
            std::string::npos);
  EXPECT_NE(errorOf(withZero(R"({"mics_shard_size": 8})")).find("MiCS"), std::string::npos);
  // Accepted whatever the value, with a note where it is not the default.
  TrainConfig gather = parse(withZero(R"({"stage": 3,
      "stage3_gather_16bit_weights_on_model_save": true})"));
  ASSERT_EQ(gather.notes.size(), 1u);
  EXPECT_NE(gather.notes[0].find("dsrt export writes the whole weights"), std::string::npos);
  // DeepSpeed's older alias is read as the same key.
  EXPECT_EQ(parse(withZero(R"({"stage3_gather_fp16_weights_on_model_save": true})")).notes.size(),
            1u);
  // Types are DeepSpeed's.
  EXPECT_EQ(errorOf(withZero(R"({"stage3_max_reuse_distance": false})")),
            "ds_config.json: 'zero_optimization.stage3_max_reuse_distance' must be an integer, "
            "got boolean false");
  // A typo is still one.
  EXPECT_EQ(errorOf(withZero(R"({"offload_optimiser": {}})")),
            "ds_config.json: unknown key 'zero_optimization.offload_optimiser' (did you mean "
            "'offload_optimizer'?)");
}

//===--- scheduler --------------------------------------------------------===//

TEST(DsConfig, WarmupLRDefaultsToTheOptimizerLr) {
  TrainConfig c = parse(R"({"train_batch_size": 8,
      "optimizer": {"type": "AdamW", "params": {"lr": 0.02}},
      "scheduler": {"type": "WarmupLR"}})");
  const SchedulerConfig &s = c.scheduler;
  EXPECT_EQ(s.type, "WarmupLR");
  EXPECT_EQ(s.param("warmup_min_lr"), 0.0);
  EXPECT_EQ(s.param("warmup_max_lr"), 0.02);
  EXPECT_EQ(s.param("warmup_num_steps"), 1000.0);
  EXPECT_EQ(s.warmupType, "log");
  EXPECT_EQ(s.params.size(), 3u);
}

TEST(DsConfig, SchedulerDefaults) {
  TrainConfig c = parse(withScheduler(
      R"({"type": "WarmupDecayLR", "params": {"total_num_steps": 100}})"));
  EXPECT_EQ(c.scheduler.param("warmup_max_lr"), 0.001);
  EXPECT_EQ(c.scheduler.param("total_num_steps"), 100.0);
  c = parse(withScheduler(
      R"({"type": "WarmupCosineLR", "params": {"total_num_steps": 100,
          "warmup_type": "linear"}})"));
  EXPECT_EQ(c.scheduler.param("warmup_min_ratio"), 0.0);
  EXPECT_EQ(c.scheduler.param("cos_min_ratio"), 1e-4);
  EXPECT_EQ(c.scheduler.param("warmup_num_steps"), 1000.0);
  EXPECT_EQ(c.scheduler.warmupType, "linear");
  c = parse(withScheduler(R"({"type": "LRRangeTest"})"));
  EXPECT_EQ(c.scheduler.param("lr_range_test_min_lr"), 1e-3);
  EXPECT_EQ(c.scheduler.param("lr_range_test_step_size"), 2000.0);
  EXPECT_EQ(c.scheduler.param("lr_range_test_step_rate"), 1.0);
  EXPECT_FALSE(c.scheduler.staircase);
  c = parse(withScheduler(R"({"type": "OneCycle", "params": {
      "cycle_min_lr": 0.01, "cycle_max_lr": 0.1, "cycle_first_step_size": 7,
      "cycle_first_stair_count": 2}})"));
  const SchedulerConfig &s = c.scheduler;
  EXPECT_EQ(s.param("cycle_second_step_size"), 7.0);
  EXPECT_EQ(s.param("cycle_second_stair_count"), 2.0);
  EXPECT_EQ(s.param("decay_step_size"), 0.0);
  EXPECT_EQ(s.param("decay_lr_rate"), 0.0);
  EXPECT_EQ(s.param("cycle_min_mom"), 0.8);
  EXPECT_EQ(s.param("cycle_max_mom"), 0.9);
  EXPECT_EQ(s.param("decay_mom_rate"), 0.0);
  EXPECT_TRUE(s.cycleMomentum);
  EXPECT_THROW(s.param("warmup_num_steps"), ConfigError);
}

TEST(DsConfig, TorchClassesDeepSpeedWouldBuildAreNamed) {
  EXPECT_EQ(errorOf(withOptimizer(R"({"type": "RMSprop"})")),
            "ds_config.json: optimizer 'RMSprop' is torch.optim.RMSprop, which DeepSpeed would "
            "build; dsc does not implement it (supported: Adam, AdamW, SGD, Lamb, Lion, Adagrad, OneBitAdam, ZeroOneAdam, OneBitLamb)");
  EXPECT_EQ(errorOf(withScheduler(R"({"type": "StepLR"})")),
            "ds_config.json: scheduler 'StepLR' is torch.optim.lr_scheduler.StepLR, which "
            "DeepSpeed would build; dsc implements DeepSpeed's own schedules (LRRangeTest, "
            "OneCycle, WarmupLR, WarmupDecayLR, WarmupCosineLR)");
}

TEST(DsConfig, SchedulerErrors) {
  EXPECT_EQ(errorOf(withScheduler(R"({"type": "warmuplr"})")),
            "ds_config.json: unknown scheduler type 'warmuplr' at "
            "'scheduler.type' (did you mean 'WarmupLR'?); supported: "
            "LRRangeTest, OneCycle, WarmupLR, WarmupDecayLR, WarmupCosineLR");
  EXPECT_EQ(errorOf(withScheduler(R"({"params": {}})")),
            "ds_config.json: 'scheduler.type' is required when a scheduler "
            "section is given");
  EXPECT_EQ(errorOf(withScheduler(R"({"type": "WarmupDecayLR"})")),
            "ds_config.json: 'scheduler.params.total_num_steps' is required by "
            "WarmupDecayLR");
  EXPECT_EQ(errorOf(withScheduler(R"({"type": "OneCycle", "params": {
                "cycle_max_lr": 0.1}})")),
            "ds_config.json: 'scheduler.params.cycle_min_lr' is required by "
            "OneCycle");
  EXPECT_EQ(errorOf(withScheduler(
                R"({"type": "WarmupLR", "params": {"total_num_steps": 10}})")),
            "ds_config.json: 'scheduler.params.total_num_steps' is not a "
            "parameter of WarmupLR (it belongs to WarmupDecayLR, "
            "WarmupCosineLR)");
  // -1, DeepSpeed's default (a fresh schedule), asks for nothing.
  EXPECT_NO_THROW(parse(withScheduler(
      R"({"type": "WarmupLR", "params": {"last_batch_iteration": -1}})")));
  EXPECT_EQ(
      errorOf(withScheduler(
          R"({"type": "WarmupLR", "params": {"last_batch_iteration": 3}})")),
      "ds_config.json: 'scheduler.params.last_batch_iteration' is 3: not supported by dsc: "
      "DeepSpeed starts the schedule after that step; dsc schedules start at step 0, and "
      "dsrt --resume restores a checkpoint's step and schedule; remove it or give -1");
  EXPECT_EQ(errorOf(withScheduler(
                R"({"type": "WarmupLR", "params": {"warmup_type": "liner"}})")),
            "ds_config.json: 'scheduler.params.warmup_type' must be \"log\" or "
            "\"linear\", got \"liner\" (did you mean 'linear'?)");
  EXPECT_EQ(errorOf(withScheduler(
                R"({"type": "WarmupLR", "params": {"warmup_type": "exp"}})")),
            "ds_config.json: 'scheduler.params.warmup_type' must be \"log\" or "
            "\"linear\", got \"exp\"");
  // DeepSpeed warms up over max(2, n) steps, n = 0 included.
  EXPECT_EQ(parse(withScheduler(R"({"type": "WarmupLR", "params": {"warmup_num_steps": 0}})"))
                .scheduler.param("warmup_num_steps"),
            0);
  EXPECT_EQ(errorOf(withScheduler(
                R"({"type": "WarmupLR", "params": {"warmup_num_steps": -1}})")),
            "ds_config.json: 'scheduler.params.warmup_num_steps' must be "
            "between 0 and 9007199254740992, got -1");
  EXPECT_EQ(
      errorOf(withScheduler(
          R"({"type": "WarmupLR", "params": {"warmup_num_steps": 10.5}})")),
      "ds_config.json: 'scheduler.params.warmup_num_steps' must be an "
      "integer, got number 10.5");
  EXPECT_EQ(errorOf(withScheduler(
                R"({"type": "WarmupLR", "params": {"warmup_min_lr": -1}})")),
            "ds_config.json: 'scheduler.params.warmup_min_lr' must be >= 0, "
            "got -1");
  EXPECT_EQ(errorOf(withScheduler(
                R"({"type": "WarmupLR", "params": {"warmup_max_lr": [0.1]}})")),
            "ds_config.json: 'scheduler.params.warmup_max_lr' must be a "
            "number, got array [0.1]");
  EXPECT_EQ(errorOf(withScheduler(R"({"type": "LRRangeTest", "params": {
                "lr_range_test_staircase": "yes"}})")),
            "ds_config.json: 'scheduler.params.lr_range_test_staircase' must "
            "be true or false, got string \"yes\"");
  EXPECT_EQ(errorOf(withScheduler(R"({"type": "OneCycle", "params": {
                "cycle_min_lr": 0.01, "cycle_max_lr": 0.1,
                "cycle_second_step_size": 0}})")),
            "ds_config.json: 'scheduler.params.cycle_second_step_size' must be "
            "between 1 and 9007199254740992, got 0");
}

//===--- canonical form ---------------------------------------------------===//

TEST(DsConfig, CanonicalJsonRoundTrips) {
  const char *configs[] = {
      R"({"train_batch_size": 8})",
      R"({"train_batch_size": 16, "gradient_accumulation_steps": 2,
          "gradient_clipping": 1.0, "steps_per_print": 100,
          "optimizer": {"type": "Adam", "params": {"lr": 0.1, "betas": [0.5, 0.6],
            "eps": 1e-7, "weight_decay": 0.3, "adam_w_mode": false,
            "bias_correction": false}},
          "scheduler": {"type": "WarmupLR", "params": {"warmup_type": "linear"}},
          "zero_optimization": {"stage": 3}, "fp16": {"enabled": false},
          "wall_clock_breakdown": true})",
      R"({"train_batch_size": 8, "optimizer": {"type": "AdamW",
          "params": {"torch_adam": true}},
          "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 10,
            "cos_min_ratio": 0.1}}})",
      R"({"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "SGD",
          "params": {"lr": 0.3, "momentum": 0.9, "dampening": 0.1}},
          "scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 0.1,
            "cycle_max_lr": 1.0, "cycle_momentum": false,
            "decay_step_size": 3}}})",
      R"({"train_batch_size": 8, "scheduler": {"type": "LRRangeTest",
          "params": {"lr_range_test_staircase": true}}})",
      R"({"train_batch_size": 8, "scheduler": {"type": "WarmupDecayLR",
          "params": {"total_num_steps": 50, "warmup_max_lr": 0.1}}})",
      R"({"train_batch_size": 8, "zero_optimization": {"stage": 1,
          "overlap_comm": true, "reduce_bucket_size": 5e7}})",
      R"({"train_batch_size": 8, "bf16": {"enabled": true,
          "immediate_grad_update": true, "check_grad_overflow": false}})",
      R"({"train_batch_size": 8, "bfloat16": {"enabled": true},
          "data_types": {"grad_accum_dtype": "fp32"},
          "communication_data_type": "FP32"})",
      R"({"train_batch_size": 8, "fp16": {"enabled": true, "auto_cast": true,
          "loss_scale": 0, "initial_scale_power": 32, "loss_scale_window": 7,
          "hysteresis": 1, "consecutive_hysteresis": true,
          "min_loss_scale": 3}})",
      R"({"train_batch_size": 8, "fp16": {"enabled": true, "loss_scale": 0.25,
          "initial_scale_power": -3}, "data_types": {"grad_accum_dtype": "half"},
          "communication_data_type": "bf16"})",
      R"({"train_batch_size": 8, "fp16": {"hysteresis": 5},
          "bf16": {"check_grad_overflow": false},
          "data_types": {"grad_accum_dtype": null}})",
      R"({"train_batch_size": 8, "zero_optimization": {"stage": 3,
          "overlap_comm": false, "contiguous_gradients": false,
          "reduce_scatter": false, "allgather_bucket_size": 1e3,
          "prefetch_bucket_size": 12, "stage3_param_persistence_threshold": 0,
          "stage3_max_live_parameters": 1e6, "allgather_partitions": false,
          "round_robin_gradients": true, "sub_group_size": 0}})",
  };
  for (const char *text : configs) {
    for (int64_t world : {1, 2, 4}) {
      TrainConfig c = parse(text, world);
      std::string canonical = toJson(c);
      TrainConfig back = parseDsConfig(canonical, "canonical", c.worldSize);
      EXPECT_EQ(back, c) << canonical;
      EXPECT_EQ(toJson(back), canonical);
    }
  }
}

TEST(DsConfig, AnAioSectionWithoutAnNvmeTierIsANote) {
  // It was accepted silently: the aio section tunes the NVMe tier alone.
  auto notesOf = [](const std::string &json) {
    std::string all;
    for (const std::string &n : parseDsConfig(json).notes)
      all += n + "\n";
    return all;
  };
  EXPECT_NE(notesOf(R"({"train_batch_size": 1, "aio": {"queue_depth": 16}})")
                .find("'aio' sets how the NVMe tier's requests reach the disk, and this config "
                      "offloads nothing to NVMe"),
            std::string::npos);
  EXPECT_EQ(notesOf(R"({"train_batch_size": 1, "aio": {"queue_depth": 16},
      "zero_optimization": {"stage": 1, "offload_optimizer": {"device": "nvme",
                                                               "nvme_path": "/tmp"}}})")
                .find("'aio'"),
            std::string::npos);
}

TEST(DsConfig, CanonicalJsonSpellsOutDefaults) {
  std::string canonical = toJson(parse(R"({"train_batch_size": 8})"));
  EXPECT_EQ(canonical, R"({
  "train_batch_size": 8,
  "train_micro_batch_size_per_gpu": 8,
  "gradient_accumulation_steps": 1,
  "gradient_clipping": 1.0,
  "wall_clock_breakdown": false,
  "optimizer": {
    "type": "AdamW",
    "params": {
      "lr": 0.001,
      "betas": [
        0.9,
        0.999
      ],
      "eps": 1e-08,
      "weight_decay": 0.0,
      "adam_w_mode": true,
      "torch_adam": false,
      "bias_correction": true
    }
  },
  "zero_optimization": {
    "stage": 0,
    "overlap_comm": false,
    "reduce_bucket_size": 500000000,
    "allgather_bucket_size": 500000000,
    "sub_group_size": 1000000000,
    "stage3_prefetch_bucket_size": 50000000,
    "stage3_param_persistence_threshold": 100000,
    "stage3_max_live_parameters": 1000000000
  },
  "fp16": {
    "enabled": false,
    "loss_scale": 0.0,
    "initial_scale_power": 16,
    "loss_scale_window": 1000,
    "hysteresis": 2,
    "consecutive_hysteresis": false,
    "min_loss_scale": 1
  },
  "bf16": {
    "enabled": false
  },
  "data_types": {
    "grad_accum_dtype": "fp32"
  },
  "communication_data_type": "fp32"
})");
  // The keys that change nothing in dsc (auto_cast, immediate_grad_update,
  // check_grad_overflow) are written only away from their defaults, so the
  // text draws no note for a key its user never set; set, they read back.
  TrainConfig set = parse(R"({"train_batch_size": 8, "fp16": {"auto_cast": true},
      "bf16": {"immediate_grad_update": true, "check_grad_overflow": false}})");
  EXPECT_EQ(parse(toJson(set)), set);
  EXPECT_NE(toJson(set).find("\"auto_cast\": true"), std::string::npos);
  // bf16 writes the dtypes dsc uses: fp32 accumulation and reduction
  // unless the config says otherwise (what --print-config shows).
  std::string bf16 = toJson(
      parse(R"({"train_batch_size": 8, "bfloat16": {"enabled": true}})"));
  EXPECT_NE(bf16.find(R"("bf16": {
    "enabled": true
  })"),
            std::string::npos)
      << bf16;
  EXPECT_NE(bf16.find(R"("data_types": {
    "grad_accum_dtype": "fp32"
  },
  "communication_data_type": "fp32")"),
            std::string::npos)
      << bf16;
  // Stage 3 writes the overlap_comm DeepSpeed gives it.
  std::string stage3 = toJson(parse(
      R"({"train_batch_size": 8, "zero_optimization": {"stage": 3}})"));
  EXPECT_NE(stage3.find(R"("stage": 3,
    "overlap_comm": true,)"),
            std::string::npos)
      << stage3;
}

//===--- files ------------------------------------------------------------===//

TEST(DsConfig, LoadFromFileNamesThePath) {
  std::string path = ::testing::TempDir() + "dsconfig_test.json";
  {
    std::ofstream out(path);
    out << "{\"train_batch_size\": 4, \"fp16\": {\"foo\": 1}}";
  }
  try {
    loadDsConfig(path);
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError &e) {
    EXPECT_EQ(std::string(e.what()), path + ": unknown key 'fp16.foo'");
  }
  {
    std::ofstream out(path);
    out << "{\"train_batch_size\": 4}";
  }
  EXPECT_EQ(loadDsConfig(path, 2).microBatchPerGpu, 2);
  std::remove(path.c_str());
  try {
    loadDsConfig(path);
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError &e) {
    EXPECT_EQ(std::string(e.what()),
              path + ": cannot open the DeepSpeed config");
  }
}

//===--- elasticity --------------------------------------------------------===//
// DeepSpeed's own cases (tests/unit/elasticity/test_elastic.py at edaa72212)
// and dsc's use of the result.

namespace {

ElasticConfig deepSpeed10k() {
  ElasticConfig e;
  e.enabled = true;
  e.maxTrainBatch = 10000;
  e.microBatchSizes = {8, 12, 16, 17};
  e.minGpus = 32;
  e.maxGpus = 1500;
  e.version = 0.1;
  return e;
}

std::string elasticError(const ElasticConfig &e, int64_t world) {
  try {
    computeElasticBatch(e, world, "elasticity");
  } catch (const ConfigError &err) {
    return err.what();
  }
  ADD_FAILURE() << "expected a ConfigError for world size " << world;
  return "";
}

const char *kElastic24 = R"({"elasticity": {"enabled": true, "max_train_batch_size": 24,
    "micro_batch_sizes": [2], "max_gpus": 4, "version": 0.1}})";

} // namespace

TEST(Elasticity, DeepSpeedsTenThousandBatch) {
  ElasticBatch b = computeElasticBatch(deepSpeed10k(), 64, "elasticity");
  EXPECT_EQ(b.trainBatch, 9792);
  EXPECT_EQ(b.validSizes.size(), 23u);
  EXPECT_EQ(b.microBatch, 17); // test_valid_world_size
  for (int64_t g : b.validSizes)
    EXPECT_EQ(b.trainBatch % g, 0) << g;
  // test_invalid_world_size
  EXPECT_NE(elasticError(deepSpeed10k(), 128).find("data-parallel size 128 is not valid"),
            std::string::npos);
}

TEST(Elasticity, VersionTwoWithoutModelParallelism) {
  // One GPU per node and no model parallelism: 0.2's node-level search is
  // 0.1's.
  ElasticConfig e = deepSpeed10k();
  e.version = 0.2;
  ElasticBatch b = computeElasticBatch(e, 64, "elasticity");
  EXPECT_EQ(b.trainBatch, 9792);
  EXPECT_EQ(b.validSizes.size(), 23u);
}

TEST(Elasticity, ProperMicroBatch) {
  ElasticConfig e = deepSpeed10k();
  e.maxTrainBatch = 32;
  e.microBatchSizes = {1, 2, 3, 7};
  e.minGpus = 1;
  // test_proper_mbsz: the least common multiple, 42, is over the cap and no
  // candidate (DeepSpeed #8237); 24 it is, and 3 the largest micro-batch
  // dividing its 6 per rank at world size 4. 7 is not valid.
  ElasticBatch b = computeElasticBatch(e, 4, "elasticity");
  EXPECT_EQ(b.trainBatch, 24);
  EXPECT_EQ(b.microBatch, 3);
  EXPECT_NE(elasticError(e, 7).find("not valid"), std::string::npos);
}

TEST(Elasticity, ModelParallelByVersion) {
  ElasticConfig e = deepSpeed10k();
  e.modelParallelSize = 4;
  e.gpusPerNode = 8;
  EXPECT_NE(elasticError(e, 64).find("version 0.1 does not support model parallelism"),
            std::string::npos);
  e.version = 0.2;
  e.modelParallelSize = 16;
  EXPECT_NE(elasticError(e, 16).find("must be divisible by model_parallel_size 16"),
            std::string::npos);
}

TEST(Elasticity, SetsTheBatchForEachSize) {
  TrainConfig four = parse(kElastic24, 4);
  EXPECT_TRUE(four.elastic.enabled);
  EXPECT_EQ(four.trainBatchSize, 24);
  EXPECT_EQ(four.microBatchPerGpu, 2);
  EXPECT_EQ(four.gradAccumSteps, 3);
  EXPECT_EQ(four.elastic.validSizes, (std::vector<int64_t>{1, 2, 3, 4}));
  TrainConfig three = parse(kElastic24, 3);
  EXPECT_EQ(three.trainBatchSize, 24);
  EXPECT_EQ(three.gradAccumSteps, 4);
  EXPECT_NE(errorOf(kElastic24, 5).find("data-parallel size 5 is not valid with the current "
                                        "list of valid GPU counts [1, 2, 3, 4]"),
            std::string::npos);
  // --print-config's form reads back the same.
  EXPECT_EQ(parseDsConfig(toJson(four), "canonical", 4), four);
}

TEST(Elasticity, BatchKeysBesideIt) {
  std::string both = R"({"train_batch_size": 2, "elasticity": {"enabled": true,
      "max_train_batch_size": 4, "micro_batch_sizes": [1, 2, 3, 4], "max_gpus": 4,
      "version": 0.1)";
  EXPECT_NE(errorOf(both + "}}", 2).find("'train_batch_size' is set, but elasticity is enabled "
                                         "and decides the batch"),
            std::string::npos);
  TrainConfig c = parse(both + R"(, "ignore_non_elastic_batch_info": true}})", 2);
  EXPECT_EQ(c.trainBatchSize, 4);
  ASSERT_FALSE(c.notes.empty());
  EXPECT_NE(c.notes.back().find("'train_batch_size' is overridden by elasticity"),
            std::string::npos);
}

TEST(Elasticity, InvalidValues) {
  const std::string head = R"({"elasticity": {"enabled": true, )";
  EXPECT_NE(errorOf(head + R"("micro_batch_sizes": [2]}})").find("max_train_batch_size' is missing"),
            std::string::npos);
  for (const char *mbs : {"[1, 4, -1, 2, -10]", "5", "[2, 0.5, 4]", "[\"a\"]", "[]"})
    EXPECT_NE(errorOf(head + R"("max_train_batch_size": 8, "micro_batch_sizes": )" + mbs + "}}")
                  .find("micro_batch_sizes"),
              std::string::npos)
        << mbs;
  EXPECT_NE(errorOf(head + R"("max_train_batch_size": 8, "micro_batch_sizes": [2], "version": 0.3}})")
                .find("versions 0.1 and 0.2"),
            std::string::npos);
  EXPECT_NE(errorOf(head + R"("max_train_batch_size": 8, "micro_batch_sizes": [2], "min_gpus": 4, "max_gpus": 2}})")
                .find("is more than 'max_gpus'"),
            std::string::npos);
}
