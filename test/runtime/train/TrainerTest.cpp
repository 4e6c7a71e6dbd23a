//===- TrainerTest.cpp - dsrt's training loop, without dsrt ---------------===//
//
// A hand-built plan (SGD on one parameter, loss = |w|^2 after the update)
// run through train::Trainer with a scripted data source: the metrics rows,
// the weights written at the end, the afterStep hook, and the stop on a
// non-finite gradient norm with the weights of the last finite step.
//
//===----------------------------------------------------------------------===//
#include "runtime/train/Trainer.h"

#include "io/SafeTensors.h"

#include "test/runtime/comm/PlanBuilder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

namespace dsrt::test {
namespace {

/// x = [1, 1, 1, 1] for every micro-batch, NaN from `nanFrom` on.
class Scripted : public io::DataSource {
public:
  explicit Scripted(int64_t nanFrom = -1) : nanFrom_(nanFrom) {}
  void load(int64_t k, const std::vector<void *> &into) override {
    float v = nanFrom_ >= 0 && k >= nanFrom_ ? NAN : 1.0f;
    for (int j = 0; j < 4; ++j)
      static_cast<float *>(into[0])[j] = v;
  }
  int64_t itemsPerMicroBatch() const override { return 1; }
  const char *itemName() const override { return "samples"; }

private:
  int64_t nanFrom_;
};

/// w -= 0.5 * x each step; the loss is the sum of squares of the new w.
void writeSgdPlan(const std::string &dir) {
  PlanBuilder p(1, 1, 1);
  uint32_t w = p.buffer("w", plan::F32, {1, 4}, plan::PARAM);
  uint32_t x = p.buffer("x", plan::F32, {1, 4}, plan::INPUT);
  uint32_t g = p.f32({1, 4});
  p.weight("w", {1, 4}, {1, 2, 3, 4});
  p.instr(Prologue, "fill", {}, {p.kLr}, {}, {0.5});
  p.instr(Prologue, "fill", {}, {g}, {}, {0.0});
  p.instr(MicroBatch, "accumulate", {x}, {g});
  p.instr(Epilogue, "train.clip_grad_norm", {g}, {g, p.kNorm}, {}, {0.0});
  p.instr(Epilogue, "train.sgd", {w, g, p.kLr}, {w}, {0}, {0.0, 0.0, 0.0});
  p.instr(Epilogue, "train.sum_sq", {w}, {p.kLoss});
  p.write(dir);
}

/// The loss column of RUN/metrics.csv.
std::vector<double> lossesIn(const std::string &runDir) {
  std::ifstream in(runDir + "/metrics.csv");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line.rfind("step,loss,", 0), 0u) << line;
  std::vector<double> losses;
  while (std::getline(in, line)) {
    std::stringstream row(line);
    std::string step, loss;
    std::getline(row, step, ',');
    std::getline(row, loss, ',');
    losses.push_back(std::stod(loss));
  }
  return losses;
}

struct SgdRun {
  TempDir dir;
  std::unique_ptr<Executor> exec;
  train::TrainOptions options;
  explicit SgdRun(int64_t steps) {
    writeSgdPlan(dir.path());
    exec = std::make_unique<Executor>(dir.path());
    exec->initialize(dir.path() + "/weights.safetensors", 0);
    options.planDir = dir.path();
    options.steps = steps;
    options.outDir = dir.path() + "/run";
  }
};

TEST(Trainer, RunsTheStepsAndWritesMetricsAndWeights) {
  SgdRun r(3);
  Scripted data;
  train::Trainer trainer(*r.exec, data, r.options);
  std::vector<train::StepRecord> seen;
  trainer.afterStep = [&](const train::StepRecord &s) { seen.push_back(s); };
  EXPECT_EQ(trainer.run(), 0);
  // w: [1 2 3 4] -> [.5 1.5 2.5 3.5] -> [0 1 2 3] -> [-.5 .5 1.5 2.5].
  EXPECT_EQ(lossesIn(trainer.runDir()), (std::vector<double>{21, 14, 9}));
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[2].step, 3);
  EXPECT_EQ(seen[2].loss, 9);
  EXPECT_EQ(seen[2].lr, 0.5);
  EXPECT_EQ(seen[2].gradNorm, 2); // |[1 1 1 1]|
  const train::Outcome &o = trainer.outcome();
  EXPECT_EQ(o.stoppedAt, 0);
  EXPECT_EQ(o.weightsPath, trainer.runDir() + "/weights.safetensors");
  io::SafeTensorsFile f = io::SafeTensorsFile::open(o.weightsPath);
  EXPECT_EQ(f.metadata().at("step"), "3");
  const float *w = static_cast<const float *>(f.at("w").data);
  EXPECT_EQ(std::vector<float>(w, w + 4), (std::vector<float>{-0.5f, 0.5f, 1.5f, 2.5f}));
}

TEST(Trainer, ANonFiniteGradientNormStopsWithTheLastFiniteWeights) {
  SgdRun r(5);
  Scripted data(/*nanFrom=*/1); // global micro-batch 1: step 2
  train::Trainer trainer(*r.exec, data, r.options);
  int steps = 0;
  trainer.afterStep = [&](const train::StepRecord &) { ++steps; };
  EXPECT_EQ(trainer.run(), 1);
  const train::Outcome &o = trainer.outcome();
  EXPECT_EQ(o.stoppedAt, 2);
  EXPECT_EQ(o.lastGood, 1);
  EXPECT_NE(o.stopReason.find("the gradient norm is nan"), std::string::npos) << o.stopReason;
  EXPECT_EQ(steps, 2); // nothing after the stop
  io::SafeTensorsFile f = io::SafeTensorsFile::open(o.weightsPath);
  EXPECT_EQ(f.metadata().at("step"), "1");
  const float *w = static_cast<const float *>(f.at("w").data);
  EXPECT_EQ(std::vector<float>(w, w + 4), (std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f}));
}

TEST(Trainer, AResumedRunStartsAtItsFirstStep) {
  SgdRun r(4);
  r.options.firstStep = 3;
  Scripted data;
  train::Trainer trainer(*r.exec, data, r.options);
  std::vector<int64_t> steps;
  trainer.afterStep = [&](const train::StepRecord &s) { steps.push_back(s.step); };
  EXPECT_EQ(trainer.run(), 0);
  EXPECT_EQ(steps, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(lossesIn(trainer.runDir()).size(), 2u);
}

} // namespace
} // namespace dsrt::test
