//===- BackendTest.cpp - the executor behind the backend interface --------===//
//
// The executor calls its backend at fixed points (runtime/core/Backend.h)
// and never asks which device it is: a recording backend sees each hook in
// order; a backend that refuses the program in bind leaves the executor on
// the CPU, training exactly as before; the backend is chosen before
// initialize(); and without a usable CUDA device the CUDA backend refuses
// by name.
//
//===----------------------------------------------------------------------===//
#include "runtime/core/Executor.h"

#include "test/runtime/comm/PlanBuilder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dsrt::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

/// w -= 0.125 * w every step (one micro-batch of one input x, unread).
void writePlan(const std::string &dir) {
  PlanBuilder p(1, 2, 1);
  uint32_t w = p.buffer("w", plan::F32, {4}, plan::PARAM);
  p.buffer("x", plan::F32, {1}, plan::INPUT);
  uint32_t d = p.f32({4});
  p.weight("w", {4}, {1, 2, 3, 4});
  p.instr(Prologue, "fill", {}, {p.kLr}, {}, {0.125});
  p.instr(Epilogue, "nn.mul", {w, p.kLr}, {d});
  p.instr(Epilogue, "nn.sub", {w, d}, {w});
  p.write(dir);
}

/// Records the hooks the executor calls; its bind may refuse after
/// re-binding half the program, as a real backend may find a kernel
/// missing late.
class Recording final : public Backend {
public:
  Recording(std::vector<std::string> &calls, bool refuse) : calls_(calls), refuse_(refuse) {}
  const char *name() const override { return "recording"; }
  std::string deviceName() const override { return "a recorder"; }
  bool onHost() const override { return true; }
  void bind(ProgramView &p) override {
    calls_.push_back("bind");
    if (refuse_)
      throw DeviceUnsupported(p.name + ": no kernel here");
  }
  void allocate() override { calls_.push_back("allocate"); }
  void upload(const std::vector<Tensor *> &ts) override {
    calls_.push_back("upload " + std::to_string(ts.size()));
  }
  void beginStep() override { calls_.push_back("beginStep"); }
  void endStep() override { calls_.push_back("endStep"); }
  void pull() const override { calls_.push_back("pull"); }
  void hostWritten() override { calls_.push_back("hostWritten"); }
  void synchronize() const override {}
  bool timesItsKernels() const override { return false; }
  void runTimed(const std::vector<Instr> &, ProfileTimes &) override {}

private:
  std::vector<std::string> &calls_;
  bool refuse_;
};

std::vector<float> weightsAfter(Executor &exec, const std::string &dir, int steps) {
  exec.initialize(dir + "/weights.safetensors", 0);
  for (int s = 1; s <= steps; ++s)
    exec.step(s, [](int64_t, const std::vector<Tensor *> &) {});
  const float *w = exec.stateTensors()[0]->f32();
  return {w, w + 4};
}

TEST(Backend, TheExecutorCallsEachHookInOrder) {
  TempDir dir;
  writePlan(dir.path());
  Executor exec(dir.path());
  std::vector<std::string> calls;
  exec.setBackend(std::make_unique<Recording>(calls, false));
  EXPECT_EQ(exec.backend().name(), std::string("recording"));
  weightsAfter(exec, dir.path(), 1);
  EXPECT_THAT(calls, ElementsAre("bind", "allocate", "beginStep", "upload 1", "upload 1",
                                 "endStep", "pull", "hostWritten"));
}

TEST(Backend, ARefusalLeavesTheProgramOnTheCpu) {
  TempDir dir;
  writePlan(dir.path());
  std::vector<float> plain;
  {
    Executor exec(dir.path());
    plain = weightsAfter(exec, dir.path(), 3);
  }
  Executor exec(dir.path());
  std::vector<std::string> calls;
  try {
    exec.setBackend(std::make_unique<Recording>(calls, true));
    ADD_FAILURE() << "the backend's refusal was not passed on";
  } catch (const DeviceUnsupported &e) {
    EXPECT_THAT(e.what(), HasSubstr("no kernel here"));
  }
  EXPECT_EQ(exec.backend().name(), std::string("cpu"));
  EXPECT_EQ(weightsAfter(exec, dir.path(), 3), plain);
}

TEST(Backend, IsChosenBeforeInitialize) {
  TempDir dir;
  writePlan(dir.path());
  Executor exec(dir.path());
  exec.initialize(dir.path() + "/weights.safetensors", 0);
  std::vector<std::string> calls;
  EXPECT_THROW(exec.setBackend(std::make_unique<Recording>(calls, false)), PlanError);
  EXPECT_TRUE(calls.empty());
}

TEST(Backend, CudaWithoutADeviceRefusesByName) {
  std::string why;
  if (cudaUsable(&why))
    GTEST_SKIP() << "a CUDA device is present";
  TempDir dir;
  writePlan(dir.path());
  Executor exec(dir.path());
  try {
    exec.setBackend(makeBackend(Device::Cuda));
    ADD_FAILURE() << "no refusal";
  } catch (const DeviceUnsupported &e) {
    EXPECT_THAT(e.what(), HasSubstr("plan.pb: --device cuda: "));
  }
  EXPECT_EQ(exec.backend().name(), std::string("cpu"));
}

} // namespace
} // namespace dsrt::test
