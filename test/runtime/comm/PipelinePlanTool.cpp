//===- PipelinePlanTool.cpp - writes a pipeline plan and its data ---------===//
//
//   dsrt_pipeline_plan DIR P DP M [F]
//
// DIR/plan (plan.pb, weights.safetensors) is PipelinePlan.h's model cut in P
// stages of DP data-parallel ranks each, M micro-batches per step and F
// features; DIR/data holds x.npy and t.npy (64 samples of F features) for
// `dsrt DIR/plan --data DIR/data`. For dsrt-pipeline.sh, which runs dsrt
// and its launcher on it without the compiler.
//
//===----------------------------------------------------------------------===//
#include "PipelinePlan.h"

#include "runtime/io/Npy.h"

#include <cstdio>
#include <filesystem>

namespace {
int run(int argc, char **argv) {
  using namespace dsrt::test;
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s DIR P DP M [F]\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  int P = std::atoi(argv[2]), dp = std::atoi(argv[3]);
  int64_t M = std::atoll(argv[4]), F = argc > 5 ? std::atoll(argv[5]) : 6;
  std::filesystem::create_directories(dir + "/plan");
  std::filesystem::create_directories(dir + "/data");
  PipelineStages st = pipelinePlan(uint32_t(dp), M, F, P);
  st.write(dir + "/plan", M);
  const int64_t N = 64;
  std::vector<float> x, t;
  for (int64_t k = 0; k < N; ++k)
    for (int64_t i = 0; i < F; ++i) {
      x.push_back(float(pipeX(k, i)));
      t.push_back(float(pipeT(k, i)));
    }
  dsrt::io::writeNpy(dir + "/data/x.npy", dsrt::io::DType::F32, {N, F}, x.data());
  dsrt::io::writeNpy(dir + "/data/t.npy", dsrt::io::DType::F32, {N, F}, t.data());
  return 0;
}
} // namespace

int main(int argc, char **argv) { return run(argc, argv); }
