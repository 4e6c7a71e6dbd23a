//===- DsConfigTest.cpp - ds_config.json parsing tests --------------------===//
//
// Defaults, DeepSpeed's batch and optimizer rules, every error path (each
// message pinned so the key path and suggestion stay visible to users) and
// the canonical round trip.
//
//===----------------------------------------------------------------------===//
#include "runtime/config/DsConfig.h"

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
  EXPECT_EQ(c.gradientClipping, 0.0);
  EXPECT_EQ(c.stepsPerPrint, 0);
  EXPECT_TRUE(c.scheduler.type.empty());
  EXPECT_TRUE(c.deferred.empty());
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

TEST(DsConfig, BatchErrors) {
  // Floor division leaves 10 != 3 * 3 * 1, as DeepSpeed reports it.
  EXPECT_EQ(
      errorOf(
          R"({"train_batch_size": 10, "train_micro_batch_size_per_gpu": 3})"),
      "ds_config.json: check batch related parameters: train_batch_size is "
      "not equal to micro_batch_per_gpu * gradient_acc_step * world_size: "
      "10 != 3 * 3 * 1");
  EXPECT_EQ(
      errorOf(R"({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2,
                       "gradient_accumulation_steps": 2})",
              2),
      "ds_config.json: check batch related parameters: train_batch_size "
      "is not equal to micro_batch_per_gpu * gradient_acc_step * "
      "world_size: 16 != 2 * 2 * 2");
  EXPECT_EQ(
      errorOf(
          R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 16})"),
      "ds_config.json: check batch related parameters: the derived "
      "gradient_accumulation_steps is 0 (train_batch_size 8, "
      "train_micro_batch_size_per_gpu 16, gradient_accumulation_steps 0, "
      "world size 1)");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 2})", 4),
            "ds_config.json: check batch related parameters: the derived "
            "train_micro_batch_size_per_gpu is 0 (train_batch_size 2, "
            "train_micro_batch_size_per_gpu 0, gradient_accumulation_steps "
            "1, world size 4)");
  EXPECT_EQ(errorOf(R"({})"),
            "ds_config.json: either train_batch_size or "
            "train_micro_batch_size_per_gpu needs to be provided");
  EXPECT_EQ(errorOf(R"({"gradient_accumulation_steps": 2})"),
            "ds_config.json: either train_batch_size or "
            "train_micro_batch_size_per_gpu needs to be provided");
  EXPECT_EQ(
      errorOf(R"({"train_batch_size": 8, "gradient_accumulation_steps": 0})"),
      "ds_config.json: 'gradient_accumulation_steps' must be > 0, got 0");
  EXPECT_EQ(errorOf(R"({"train_batch_size": -8})"),
            "ds_config.json: 'train_batch_size' must be > 0, got -8");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8.0})"),
            "ds_config.json: 'train_batch_size' must be an integer, got number "
            "8.0");
  EXPECT_EQ(errorOf(R"({"train_micro_batch_size_per_gpu": "4"})"),
            "ds_config.json: 'train_micro_batch_size_per_gpu' must be an "
            "integer, got string \"4\"");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 18446744073709551615})"),
            "ds_config.json: 'train_batch_size' must be an integer, got number "
            "18446744073709551615");
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
            "ds_config.json: 'steps_per_print' must be > 0, got 0");
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
            "(did you mean 'SGD'?); supported: Adam, AdamW, SGD");
  EXPECT_EQ(errorOf(withOptimizer(R"({"type": "Adamm"})")),
            "ds_config.json: unknown optimizer type 'Adamm' at "
            "'optimizer.type' (did you mean 'Adam'?); supported: Adam, AdamW, "
            "SGD");
  EXPECT_EQ(errorOf(withOptimizer(R"({"type": "RMSprop"})")),
            "ds_config.json: unknown optimizer type 'RMSprop' at "
            "'optimizer.type'; supported: Adam, AdamW, SGD");
  EXPECT_EQ(errorOf(withOptimizer(R"({"type": "Lamb"})")),
            "ds_config.json: optimizer 'Lamb' is a DeepSpeed optimizer dsc "
            "does not implement (supported: Adam, AdamW, SGD)");
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
            "SGD (it belongs to Adam/AdamW)");
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
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "colour": 1})"),
            "ds_config.json: unknown key 'colour'");
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
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "tensorboard": {}})"),
            "ds_config.json: 'tensorboard' is a DeepSpeed option dsc does not "
            "support");
}

//===--- duplicates and syntax --------------------------------------------===//

TEST(DsConfig, DuplicateKeysNameTheirPath) {
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8, "train_batch_size": 16})"),
            "ds_config.json: duplicate key 'train_batch_size'");
  EXPECT_EQ(errorOf(withOptimizer(
                R"({"type": "Adam", "params": {"lr": 1, "eps": 1, "lr": 2}})")),
            "ds_config.json: duplicate key 'optimizer.params.lr'");
  EXPECT_EQ(errorOf(R"({"train_batch_size": 8,
      "pipeline": {"stages": [{"a": 1}, {"b": 1, "b": 2}]}})"),
            "ds_config.json: duplicate key 'pipeline.stages[1].b'");
  // The same key in sibling objects is fine.
  EXPECT_NO_THROW(parse(R"({"train_batch_size": 8,
      "pipeline": {"x": {"a": 1}, "y": {"a": 2}}})"));
}

TEST(DsConfig, SyntaxErrorsGiveLineAndColumn) {
  EXPECT_EQ(errorOf("{\n  \"train_batch_size\": 8,\n}"),
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

//===--- deferred sections ------------------------------------------------===//

TEST(DsConfig, DeferredSectionsAreKeptVerbatim) {
  TrainConfig c = parse(R"({"train_batch_size": 8,
      "zero_optimization": {"stage": 2, "overlap_comm": true},
      "bf16": {"enabled": true}, "wall_clock_breakdown": false})");
  ASSERT_EQ(c.deferred.size(), 3u);
  EXPECT_EQ(c.deferred.at("zero_optimization"),
            R"({"overlap_comm":true,"stage":2})");
  EXPECT_EQ(c.deferred.at("bf16"), R"({"enabled":true})");
  EXPECT_EQ(c.deferred.at("wall_clock_breakdown"), "false");
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

TEST(DsConfig, SchedulerErrors) {
  EXPECT_EQ(errorOf(withScheduler(R"({"type": "warmuplr"})")),
            "ds_config.json: unknown scheduler type 'warmuplr' at "
            "'scheduler.type' (did you mean 'WarmupLR'?); supported: "
            "LRRangeTest, OneCycle, WarmupLR, WarmupDecayLR, WarmupCosineLR");
  EXPECT_EQ(errorOf(withScheduler(R"({"type": "StepLR"})")),
            "ds_config.json: unknown scheduler type 'StepLR' at "
            "'scheduler.type'; supported: LRRangeTest, OneCycle, WarmupLR, "
            "WarmupDecayLR, WarmupCosineLR");
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
  EXPECT_EQ(
      errorOf(withScheduler(
          R"({"type": "WarmupLR", "params": {"last_batch_iteration": 3}})")),
      "ds_config.json: 'scheduler.params.last_batch_iteration' is not "
      "supported: dsc schedules always start at step 0");
  EXPECT_EQ(errorOf(withScheduler(
                R"({"type": "WarmupLR", "params": {"warmup_type": "liner"}})")),
            "ds_config.json: 'scheduler.params.warmup_type' must be \"log\" or "
            "\"linear\", got \"liner\" (did you mean 'linear'?)");
  EXPECT_EQ(errorOf(withScheduler(
                R"({"type": "WarmupLR", "params": {"warmup_type": "exp"}})")),
            "ds_config.json: 'scheduler.params.warmup_type' must be \"log\" or "
            "\"linear\", got \"exp\"");
  EXPECT_EQ(errorOf(withScheduler(
                R"({"type": "WarmupLR", "params": {"warmup_num_steps": 0}})")),
            "ds_config.json: 'scheduler.params.warmup_num_steps' must be > 0, "
            "got 0");
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
            "> 0, got 0");
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
          "zero_optimization": {"stage": 3}, "fp16": {"enabled": true}})",
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
  };
  for (const char *text : configs) {
    TrainConfig c = parse(text, 2);
    std::string canonical = toJson(c);
    TrainConfig back = parseDsConfig(canonical, "canonical", c.worldSize);
    EXPECT_EQ(back, c) << canonical;
    EXPECT_EQ(toJson(back), canonical);
  }
}

TEST(DsConfig, CanonicalJsonSpellsOutDefaults) {
  std::string canonical = toJson(parse(R"({"train_batch_size": 8})"));
  EXPECT_EQ(canonical, R"({
  "train_batch_size": 8,
  "train_micro_batch_size_per_gpu": 8,
  "gradient_accumulation_steps": 1,
  "gradient_clipping": 0.0,
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
  }
})");
}

//===--- files ------------------------------------------------------------===//

TEST(DsConfig, LoadFromFileNamesThePath) {
  std::string path = ::testing::TempDir() + "dsconfig_test.json";
  {
    std::ofstream out(path);
    out << "{\"train_batch_size\": 4, \"foo\": 1}";
  }
  try {
    loadDsConfig(path);
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError &e) {
    EXPECT_EQ(std::string(e.what()), path + ": unknown key 'foo'");
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
