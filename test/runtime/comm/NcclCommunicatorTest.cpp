//===- NcclCommunicatorTest.cpp - the NCCL communicator on one GPU --------===//
//
// One rank (no mpirun needed): bucketed all_reduce (sum, avg, in place),
// reduce_scatter and all_gather on device buffers against the CPU result
// (SelfCommunicator on the same host data), the counters, and the scalar
// all_reduce. Every test skips, saying why, when there is no CUDA device.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/NcclCommunicator.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <memory>
#include <random>

namespace dsrt::comm {
namespace {

#define SKIP_WITHOUT_GPU()                                                     \
  if (cudaDeviceCount() == 0)                                                  \
  GTEST_SKIP() << "no CUDA device"

NcclCommunicator &nccl() {
  static std::unique_ptr<NcclCommunicator> c = std::make_unique<NcclCommunicator>(60.0);
  return *c;
}

std::vector<float> host(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float &x : v)
    x = dist(gen);
  return v;
}

/// A device copy of `v` (and room for `extra` more elements), freed at scope
/// exit.
struct DeviceBuffer {
  float *p = nullptr;
  int64_t n = 0;
  explicit DeviceBuffer(const std::vector<float> &v, int64_t size = -1) {
    n = size < 0 ? int64_t(v.size()) : size;
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void **>(&p), static_cast<size_t>(n) * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(p); }
  std::vector<float> read() const {
    std::vector<float> v(static_cast<size_t>(n));
    EXPECT_EQ(cudaMemcpy(v.data(), p, v.size() * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return v;
  }
};

/// Runs the same collective on the GPU and with SelfCommunicator on the
/// host, and compares the outputs.
void compare(Kind kind, ReduceOp op, bool inPlace) {
  NcclCommunicator &c = nccl();
  ASSERT_EQ(c.size(), 1);
  const std::vector<int64_t> sizes = {1, 1000, 4097};
  std::vector<std::vector<float>> in, hostOut;
  std::vector<std::unique_ptr<DeviceBuffer>> din, dout;
  std::vector<TensorArg> dev, cpu;
  for (size_t j = 0; j < sizes.size(); ++j) {
    in.push_back(host(sizes[j], unsigned(j + 1)));
    hostOut.emplace_back(static_cast<size_t>(sizes[j]));
    din.push_back(std::make_unique<DeviceBuffer>(in[j]));
    dout.push_back(std::make_unique<DeviceBuffer>(std::vector<float>(static_cast<size_t>(sizes[j]))));
  }
  for (size_t j = 0; j < sizes.size(); ++j) {
    float *out = inPlace ? din[j]->p : dout[j]->p;
    dev.push_back({din[j]->p, out, sizes[j]});
    cpu.push_back({in[j].data(), hostOut[j].data(), sizes[j]});
  }
  SelfCommunicator self;
  Handle h, hs;
  switch (kind) {
  case Kind::AllReduce:
    h = c.allReduce(dev, op);
    hs = self.allReduce(cpu, op);
    break;
  case Kind::ReduceScatter:
    h = c.reduceScatter(dev, op);
    hs = self.reduceScatter(cpu, op);
    break;
  case Kind::AllGather:
    h = c.allGather(dev);
    hs = self.allGather(cpu);
    break;
  case Kind::AllToAll:
    h = c.allToAll(dev.data(), dev.size());
    hs = self.allToAll(cpu.data(), cpu.size());
    break;
  }
  c.wait(h);
  self.wait(hs);
  for (size_t j = 0; j < sizes.size(); ++j) {
    std::vector<float> got = (inPlace ? *din[j] : *dout[j]).read();
    EXPECT_EQ(got, hostOut[j]) << kindName(kind) << " " << reduceOpName(op) << " tensor " << j;
  }
  EXPECT_EQ(c.counters()[kind].calls, self.counters()[kind].calls);
  EXPECT_EQ(c.counters()[kind].elements, self.counters()[kind].elements);
}

TEST(Nccl, AllReduceBucketSum) {
  SKIP_WITHOUT_GPU();
  compare(Kind::AllReduce, ReduceOp::Sum, false);
}

TEST(Nccl, AllReduceBucketAvgInPlace) {
  SKIP_WITHOUT_GPU();
  compare(Kind::AllReduce, ReduceOp::Avg, true);
}

TEST(Nccl, ReduceScatterBucket) {
  SKIP_WITHOUT_GPU();
  compare(Kind::ReduceScatter, ReduceOp::Sum, false);
}

TEST(Nccl, AllGatherBucket) {
  SKIP_WITHOUT_GPU();
  compare(Kind::AllGather, ReduceOp::Sum, false);
}

TEST(Nccl, AllToAllBucket) {
  SKIP_WITHOUT_GPU();
  compare(Kind::AllToAll, ReduceOp::Sum, false);
}

TEST(Nccl, BlockingScalarAndCounters) {
  SKIP_WITHOUT_GPU();
  NcclCommunicator &c = nccl();
  c.resetCounters();
  EXPECT_DOUBLE_EQ(c.blockingAllReduceScalar(2.5, ReduceOp::Avg), 2.5);
  EXPECT_DOUBLE_EQ(c.blockingAllReduceScalar(-1.0, ReduceOp::Sum), -1.0);
  EXPECT_EQ(c.counters().calls(), 0);
  EXPECT_STREQ(c.backend(), "nccl");
}

} // namespace
} // namespace dsrt::comm

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int failed = RUN_ALL_TESTS();
  dsrt::comm::finalizeMpi();
  return failed;
}
