//===- RunSetupTest.cpp - dsrt's run policy, without dsrt -----------------===//
//
// The checks a run makes before its first step (runtime/train/RunSetup.h)
// on a hand-built plan: the run and save folders, the run's length, the
// save folder's tags, the run-time ds_config against the settings compiled
// into the plan, the NVMe tier's folder and the ONNX export's file.
//
//===----------------------------------------------------------------------===//
#include "runtime/train/RunSetup.h"

#include "test/runtime/comm/PlanBuilder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

namespace dsrt::test {
namespace {

using ::testing::HasSubstr;

/// The config the small plan is compiled with.
const char *kCompiled = R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3)";

/// A one-parameter plan of this dsc's format, micro-batch 2 x 3
/// micro-batches, compiled with kCompiled's settings.
std::unique_ptr<Executor> smallExecutor(const std::string &dir) {
  PlanBuilder p(1, 3, 2);
  p.buffer("w", plan::F32, {1}, plan::PARAM);
  p.weight("w", {1}, {1});
  currentFormat(p.proto());
  config::writePlanSettings(config::planSettingsOf(config::parseDsConfig(kCompiled + std::string("}"))),
                            p.proto());
  p.write(dir);
  return std::make_unique<Executor>(dir);
}

std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const std::exception &e) {
    return e.what();
  }
  return "no error";
}

std::string writeFile(const std::string &path, const std::string &text) {
  std::ofstream(path) << text;
  return path;
}

TEST(RunSetup, RunAndSaveFoldersSideBySide) {
  EXPECT_EQ(errorOf([] { train::checkRunFolders("a/ckpt", "b"); }), "no error");
  EXPECT_EQ(errorOf([] { train::checkRunFolders("", "b"); }), "no error");
  EXPECT_THAT(errorOf([] { train::checkRunFolders("run/ckpt", "run"); }),
              HasSubstr("the save folder is inside the run folder; a run folder holds one "
                        "run's results and a save folder only checkpoints: put them side by "
                        "side (for example --save-dir run-ckpt)"));
  EXPECT_THAT(errorOf([] { train::checkRunFolders("run", "run"); }),
              HasSubstr("the same folder"));
}

TEST(RunSetup, RunLengthNumbersEveryMicroBatch) {
  TempDir dir;
  auto exec = smallExecutor(dir.path());
  EXPECT_EQ(errorOf([&] { train::checkRunLength(*exec, 1000); }), "no error");
  EXPECT_THAT(errorOf([&] { train::checkRunLength(*exec, int64_t(1) << 61); }),
              HasSubstr("x 3 micro-batches x dp 1 exceeds the 2^62 micro-batches a run can "
                        "number"));
}

TEST(RunSetup, RunTimeConfigReplacesOnlyRunTimeSettings) {
  TempDir dir, files;
  auto exec = smallExecutor(dir.path());
  std::vector<std::string> notes;
  auto note = [&](const std::string &n) { notes.push_back(n); };
  // No --config: the plan's settings.
  EXPECT_EQ(train::applyRunSettings(*exec, "", 10, note).stepsPerPrint, 0);
  // Run-time settings change; the compiled-in ones are the plan's.
  std::string runtime = writeFile(files.path() + "/runtime.json", kCompiled + std::string(R"(,
    "steps_per_print": 4, "csv_monitor": {"enabled": true},
    "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": "auto",
                                                      "warmup_num_steps": 2}}})"));
  config::PlanSettings s = train::applyRunSettings(*exec, runtime, 10, note);
  EXPECT_EQ(s.stepsPerPrint, 4);
  EXPECT_TRUE(exec->settings().csvMonitor.enabled);
  EXPECT_EQ(exec->settings().scheduler.type, "WarmupDecayLR");
  EXPECT_EQ(exec->settings().scheduler.param("total_num_steps"), 10.0);
  // A run-time config's "auto" is resolved as it is read (no note; a
  // plan's own schedule left to the run gets one).
  EXPECT_TRUE(notes.empty());
  // A compiled-in setting that differs is named, and nothing changes.
  std::string lr = writeFile(files.path() + "/lr.json", kCompiled + std::string(R"(,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.5}}})"));
  EXPECT_EQ(errorOf([&] { train::applyRunSettings(*exec, lr, 10, note); }),
            lr + ": the optimizer settings differ from the plan's (they are compiled in: "
                 "recompile with dsc --config " + lr + ")");
  EXPECT_EQ(exec->settings().stepsPerPrint, 4);
}

TEST(RunSetup, SaveDirRefusesAnEarlierRunsTag) {
  TempDir save, dir;
  auto exec = smallExecutor(dir.path());
  train::TrainOptions run;
  run.saveDir = save.path();
  run.steps = 4;
  run.saveInterval = 2;
  // A folder an earlier run saved into (its marker) with that run's tag.
  writeFile(save.path() + "/" + checkpoint::kMarker, "");
  std::filesystem::create_directories(save.path() + "/step-00000004");
  EXPECT_THAT(errorOf([&] { train::lockSaveDir(run, *exec); }), HasSubstr("step-00000004 exists (an earlier run's checkpoint of that step)"));
  run.steps = 3; // saves at 2 and 3
  EXPECT_EQ(errorOf([&] { train::lockSaveDir(run, *exec); }), "no error");
}

TEST(RunSetup, NvmePathNeedsAnNvmeTier) {
  TempDir dir;
  auto exec = smallExecutor(dir.path());
  EXPECT_THAT(errorOf([&] { train::setNvmePath(*exec, "/tmp"); }),
              HasSubstr("--nvme-path /tmp: the plan has no NVMe tier"));
}

TEST(RunSetup, ExportOnnxNeverWritesOverAFile) {
  TempDir dir, files;
  auto exec = smallExecutor(dir.path());
  std::string missing = files.path() + "/none/model.onnx";
  // The plan's skeleton is checked first: this plan has none.
  EXPECT_THAT(errorOf([&] { train::checkExportOnnx(*exec, dir.path() + "/model.onnx", missing); }),
              HasSubstr("model.onnx"));
}

} // namespace
} // namespace dsrt::test
