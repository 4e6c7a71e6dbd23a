//===- LrScheduleTest.cpp - DeepSpeed lr schedule tests -------------------===//
//
// Expected values come from an independent Python model of DeepSpeed: the
// lr_schedules.py classes (deepspeedai/DeepSpeed master) transcribed with a
// one-group fake optimizer, driven as engine.py drives them: build the
// scheduler, then for each update read the optimizer's lr and betas and call
// step(). The essence, e.g. for WarmupLR:
//
//   class WarmupLR:
//       def __init__(s, opt, warmup_min_lr=0.0, warmup_max_lr=None,
//                    warmup_num_steps=1000, warmup_type='log'):
//           s.max = opt.lr if warmup_max_lr is None else warmup_max_lr
//           s.min, s.W, s.typ, s.t = warmup_min_lr, max(2, warmup_num_steps),
//                                    warmup_type, -1
//           opt.lr = s.get_lr()                  # constructor writes the lr
//       def get_lr(s):
//           if s.t < 0: return s.min
//           g = 1.0 if s.t >= s.W else ((1.0 / math.log(s.W)) *
//               math.log(s.t + 1) if s.typ == 'log' else s.t / s.W)
//           return s.min + (s.max - s.min) * g
//       def step(s): s.t += 1; opt.lr = s.get_lr()
//
//   def run(sched, opt, n):            # lr used by update k = 0..n-1
//       out = []
//       for k in range(n): out.append(opt.lr); sched.step()
//       return out
//
// WarmupDecayLR, WarmupCosineLR, OneCycle (with cycle momentum writing
// (mom, 0.99) into 'betas' when the optimizer has betas) and LRRangeTest are
// transcribed the same way; values are printed with repr().
//
//===----------------------------------------------------------------------===//
#include "config/LrSchedule.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

using namespace dsrt::config;

namespace {

struct LrAt {
  int64_t step;
  double lr;
};
struct LrBetasAt {
  int64_t step;
  double lr, beta1, beta2;
};

TrainConfig config(const std::string &optimizer, const std::string &scheduler) {
  return parseDsConfig(R"({"train_batch_size": 1, "optimizer": )" + optimizer +
                       R"(, "scheduler": )" + scheduler + "}");
}

void expectLrs(const TrainConfig &c, const std::vector<LrAt> &expected) {
  for (const LrAt &e : expected)
    EXPECT_DOUBLE_EQ(learningRate(c, e.step), e.lr) << "step " << e.step;
}

void expectLrsAndBetas(const TrainConfig &c,
                       const std::vector<LrBetasAt> &expected) {
  for (const LrBetasAt &e : expected) {
    EXPECT_DOUBLE_EQ(learningRate(c, e.step), e.lr) << "step " << e.step;
    AdamBetas b = betasAt(c, e.step);
    EXPECT_DOUBLE_EQ(b.beta1, e.beta1) << "step " << e.step;
    EXPECT_DOUBLE_EQ(b.beta2, e.beta2) << "step " << e.step;
  }
}

} // namespace

TEST(LrSchedule, NoSchedulerUsesTheOptimizerLr) {
  TrainConfig c = parseDsConfig(R"({"train_batch_size": 1,
      "optimizer": {"type": "Adam", "params": {"lr": 0.25, "betas": [0.5, 0.6]}}})");
  for (int64_t k : {0, 1, 1000})
    EXPECT_EQ(learningRate(c, k), 0.25);
  AdamBetas b = betasAt(c, 7);
  EXPECT_EQ(b.beta1, 0.5);
  EXPECT_EQ(b.beta2, 0.6);
}

TEST(LrSchedule, NegativeStepIsRejected) {
  TrainConfig c = defaultConfig();
  EXPECT_THROW(learningRate(c, -1), std::out_of_range);
  EXPECT_THROW(betasAt(c, -1), std::out_of_range);
}

TEST(LrSchedule, WarmupLRLogUpToTheOptimizerLr) {
  // WarmupLR(opt(lr=0.01), warmup_num_steps=10)
  expectLrs(
      config(R"({"type": "AdamW", "params": {"lr": 0.01}})",
             R"({"type": "WarmupLR", "params": {"warmup_num_steps": 10}})"),
      {
          {0, 0.0},
          {1, 0.0},
          {2, 0.0030102999566398113},
          {3, 0.004771212547196624},
          {5, 0.006989700043360187},
          {9, 0.009542425094393249},
          {10, 0.009999999999999998},
          {11, 0.01},
          {12, 0.01},
          {50, 0.01},
      });
}

TEST(LrSchedule, WarmupLRLinear) {
  // WarmupLR(min=1e-4, max=1e-3, warmup_num_steps=4, warmup_type='linear')
  expectLrs(config(R"({"type": "Adam"})",
                   R"({"type": "WarmupLR", "params": {"warmup_min_lr": 1e-4,
                      "warmup_max_lr": 1e-3, "warmup_num_steps": 4,
                      "warmup_type": "linear"}})"),
            {
                {0, 0.0001},
                {1, 0.0001},
                {2, 0.000325},
                {3, 0.00055},
                {4, 0.0007750000000000001},
                {5, 0.001},
                {6, 0.001},
                {7, 0.001},
            });
}

TEST(LrSchedule, WarmupLRClampsWarmupStepsToTwo) {
  // WarmupLR(warmup_num_steps=1, warmup_max_lr=0.5): W = max(2, 1).
  expectLrs(config(R"({"type": "Adam"})",
                   R"({"type": "WarmupLR", "params": {"warmup_num_steps": 1,
                      "warmup_max_lr": 0.5}})"),
            {{0, 0.0}, {1, 0.0}, {2, 0.5}, {3, 0.5}});
}

TEST(LrSchedule, WarmupDecayLRLinear) {
  // WarmupDecayLR(total_num_steps=20, warmup_max_lr=0.002,
  //               warmup_num_steps=5, warmup_type='linear')
  expectLrs(config(R"({"type": "Adam"})",
                   R"({"type": "WarmupDecayLR", "params": {
                      "total_num_steps": 20, "warmup_max_lr": 0.002,
                      "warmup_num_steps": 5, "warmup_type": "linear"}})"),
            {
                {0, 0.0},
                {1, 0.0},
                {2, 0.0004},
                {5, 0.0016},
                {6, 0.002},
                {7, 0.0018666666666666666},
                {10, 0.0014666666666666667},
                {20, 0.00013333333333333334},
                {21, 0.0},
                {22, 0.0},
                {30, 0.0},
            });
}

TEST(LrSchedule, WarmupDecayLRDefaultsIgnoreTheOptimizerLr) {
  // WarmupDecayLR(opt(lr=0.5), total_num_steps=3000): max lr 0.001, log.
  expectLrs(config(R"({"type": "Adam", "params": {"lr": 0.5}})",
                   R"({"type": "WarmupDecayLR", "params": {
                      "total_num_steps": 3000}})"),
            {
                {0, 0.0},
                {1, 0.0},
                {2, 0.00010034333188799373},
                {500, 0.0008996566681120063},
                {1000, 0.001},
                {1001, 0.001},
                {1002, 0.0009995000000000002},
                {2000, 0.0005005},
                {3000, 5e-07},
                {3001, 0.0},
                {4000, 0.0},
            });
}

TEST(LrSchedule, WarmupCosineLR) {
  // WarmupCosineLR(opt(lr=0.003), 20, warmup_min_ratio=0.1,
  //                warmup_num_steps=5, cos_min_ratio=0.01)
  expectLrs(config(R"({"type": "Adam", "params": {"lr": 0.003}})",
                   R"({"type": "WarmupCosineLR", "params": {
                      "total_num_steps": 20, "warmup_min_ratio": 0.1,
                      "warmup_num_steps": 5, "cos_min_ratio": 0.01}})"),
            {
                {0, 0.0},
                {1, 0.00030000000000000003},
                {2, 0.0014628267067981614},
                {3, 0.0021430367251121605},
                {5, 0.003},
                {6, 0.0029675491870897017},
                {7, 0.0028716150045992625},
                {12, 0.0016702247679524656},
                {20, 3e-05},
                {21, 3e-05},
                {22, 3e-05},
                {30, 3e-05},
            });
}

TEST(LrSchedule, WarmupCosineLRShorterThanItsWarmup) {
  // WarmupCosineLR(opt(lr=0.003), 3, warmup_num_steps=5,
  //                warmup_type='linear'): no decay window, floor after warmup.
  expectLrs(config(R"({"type": "Adam", "params": {"lr": 0.003}})",
                   R"({"type": "WarmupCosineLR", "params": {
                      "total_num_steps": 3, "warmup_num_steps": 5,
                      "warmup_type": "linear"}})"),
            {
                {0, 0.0},
                {1, 0.0},
                {2, 0.0006000000000000001},
                {5, 0.0024000000000000002},
                {6, 3.0000000000000004e-07},
                {7, 3.0000000000000004e-07},
                {9, 3.0000000000000004e-07},
            });
}

TEST(LrSchedule, OneCycleWithDecayAndMomentum) {
  // OneCycle(opt(betas), 1e-4, 1e-3, decay_lr_rate=0.5,
  //          cycle_first_step_size=4, cycle_second_step_size=6,
  //          decay_step_size=2, decay_mom_rate=0.1)
  expectLrsAndBetas(
      config(R"({"type": "AdamW"})",
             R"({"type": "OneCycle", "params": {"cycle_min_lr": 1e-4,
                "cycle_max_lr": 1e-3, "decay_lr_rate": 0.5,
                "cycle_first_step_size": 4, "cycle_second_step_size": 6,
                "decay_step_size": 2, "decay_mom_rate": 0.1}})"),
      {
          {0, 0.0001, 0.8, 0.99},
          {1, 0.0003250000000000002, 0.875, 0.99},
          {2, 0.0005499999999999999, 0.8500000000000001, 0.99},
          {3, 0.0007750000000000001, 0.8250000000000001, 0.99},
          {4, 0.0009999999999999998, 0.8, 0.99},
          {5, 0.0008500000000000001, 0.8166666666666667, 0.99},
          {6, 0.0006999999999999999, 0.8333333333333334, 0.99},
          {7, 0.0005500000000000001, 0.85, 0.99},
          {8, 0.0003999999999999999, 0.8666666666666667, 0.99},
          {9, 0.00025000000000000017, 0.8833333333333333, 0.99},
          {10, 0.0001, 0.9, 0.99},
          {11, 8e-05, 0.9450000000000001, 0.99},
          {12, 6.666666666666667e-05, 0.9900000000000001, 0.99},
          {13, 5.714285714285715e-05, 1.035, 0.99},
          {14, 5e-05, 1.08, 0.99},
          {15, 4.4444444444444447e-05, 1.125, 0.99},
          {16, 4e-05, 1.1700000000000002, 0.99},
      });
}

TEST(LrSchedule, OneCycleStairs) {
  // OneCycle(opt(betas), 0.01, 0.1, cycle_first_step_size=6,
  //          cycle_second_step_size=4, cycle_first_stair_count=3,
  //          cycle_second_stair_count=2)
  expectLrsAndBetas(
      config(R"({"type": "Adam"})",
             R"({"type": "OneCycle", "params": {"cycle_min_lr": 0.01,
                "cycle_max_lr": 0.1, "cycle_first_step_size": 6,
                "cycle_second_step_size": 4, "cycle_first_stair_count": 3,
                "cycle_second_stair_count": 2}})"),
      {
          {0, 0.01, 0.8, 0.99},
          {1, 0.01, 0.9, 0.99},
          {2, 0.04, 0.8666666666666667, 0.99},
          {3, 0.04, 0.8666666666666667, 0.99},
          {4, 0.07, 0.8333333333333334, 0.99},
          {5, 0.07, 0.8333333333333334, 0.99},
          {6, 0.1, 0.8, 0.99},
          {7, 0.05500000000000001, 0.8500000000000001, 0.99},
          {8, 0.05500000000000001, 0.8500000000000001, 0.99},
          {9, 0.01, 0.9, 0.99},
          {10, 0.01, 0.9, 0.99},
          {11, 0.01, 0.9, 0.99},
          {12, 0.01, 0.9, 0.99},
      });
}

TEST(LrSchedule, OneCycleWithoutDecayStepSizeHoldsTheMinimum) {
  // OneCycle(opt(betas), 0.01, 0.1, cycle_first_step_size=3,
  //          decay_lr_rate=0.2): decay_step_size 0 disables decay.
  expectLrsAndBetas(
      config(R"({"type": "Adam"})",
             R"({"type": "OneCycle", "params": {"cycle_min_lr": 0.01,
                "cycle_max_lr": 0.1, "cycle_first_step_size": 3,
                "decay_lr_rate": 0.2}})"),
      {
          {0, 0.01, 0.8, 0.99},
          {3, 0.1, 0.8, 0.99},
          {6, 0.01, 0.9, 0.99},
          {7, 0.01, 0.9, 0.99},
          {8, 0.01, 0.9, 0.99},
          {20, 0.01, 0.9, 0.99},
      });
}

TEST(LrSchedule, OneCycleLeavesSgdAndDisabledMomentumAlone) {
  // OneCycle(opt(no betas), 0.01, 0.1, cycle_first_step_size=2)
  std::vector<LrBetasAt> expected = {
      {0, 0.01, 0.9, 0.999}, {1, 0.05500000000000001, 0.9, 0.999},
      {2, 0.1, 0.9, 0.999},  {3, 0.05500000000000001, 0.9, 0.999},
      {4, 0.01, 0.9, 0.999}, {5, 0.01, 0.9, 0.999},
  };
  const char *schedule = R"({"type": "OneCycle", "params": {
      "cycle_min_lr": 0.01, "cycle_max_lr": 0.1, "cycle_first_step_size": 2}})";
  expectLrsAndBetas(config(R"({"type": "SGD"})", schedule), expected);
  const char *noMomentum = R"({"type": "OneCycle", "params": {
      "cycle_min_lr": 0.01, "cycle_max_lr": 0.1, "cycle_first_step_size": 2,
      "cycle_momentum": false}})";
  expectLrsAndBetas(config(R"({"type": "Adam"})", noMomentum), expected);
}

TEST(LrSchedule, LRRangeTest) {
  // LRRangeTest(min=1e-4, step_size=3, step_rate=2.0)
  expectLrs(config(R"({"type": "Adam"})",
                   R"({"type": "LRRangeTest", "params": {
                      "lr_range_test_min_lr": 1e-4, "lr_range_test_step_size": 3,
                      "lr_range_test_step_rate": 2.0}})"),
            {
                {0, 0.0001},
                {1, 0.00016666666666666666},
                {2, 0.0002333333333333333},
                {3, 0.00030000000000000003},
                {4, 0.00036666666666666667},
                {9, 0.0007},
            });
  // Same with lr_range_test_staircase=True.
  expectLrs(config(R"({"type": "Adam"})",
                   R"({"type": "LRRangeTest", "params": {
                      "lr_range_test_min_lr": 1e-4, "lr_range_test_step_size": 3,
                      "lr_range_test_step_rate": 2.0,
                      "lr_range_test_staircase": true}})"),
            {
                {0, 0.0001},
                {1, 0.0001},
                {2, 0.0001},
                {3, 0.00030000000000000003},
                {4, 0.00030000000000000003},
                {5, 0.00030000000000000003},
                {6, 0.0005},
                {9, 0.0007},
            });
}
