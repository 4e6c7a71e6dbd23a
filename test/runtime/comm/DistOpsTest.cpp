//===- DistOpsTest.cpp - the data-parallel ops and checks, on one rank ----===//
//
// train.sum_sq and the sharded train.clip_grad_norm against float64
// references; the load-time checks of the dist.* ops and of ZeRO shards;
// the executor's plan validation for dp (rank count, group sizes, handle
// pairing); the SelfCommunicator and its counters; and a plan with
// collectives run end to end on one rank.
//
//===----------------------------------------------------------------------===//
#include "PlanBuilder.h"

#include "runtime/core/Executor.h"

#include <cmath>
#include <random>

namespace dsrt::test {
namespace {

/// A float tensor over its own storage.
struct Buf {
  std::vector<float> v;
  Tensor t;
  Buf(std::vector<int64_t> shape, unsigned seed, uint64_t offset) {
    t.dtype = plan::F32;
    t.numel = 1;
    for (int64_t d : shape) {
      t.shape.dims[t.shape.rank++] = d;
      t.numel *= d;
    }
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    v.resize(static_cast<size_t>(t.numel));
    for (float &x : v)
      x = dist(gen);
    t.data = v.data();
    t.offset = offset;
  }
};

Instr instr(const std::string &op, std::vector<Tensor *> in, std::vector<Tensor *> out,
            std::vector<int64_t> ints = {}, std::vector<double> floats = {}) {
  Instr i;
  i.op = op;
  i.in = std::move(in);
  i.out = std::move(out);
  i.ints = std::move(ints);
  i.floats = std::move(floats);
  bindInstr(i, "test " + op);
  return i;
}

double sumSq(const std::vector<float> &v) {
  double s = 0;
  for (float x : v)
    s += double(x) * double(x);
  return s;
}

TEST(SumSq, MatchesFloat64Reference) {
  Buf a({1}, 1, 0), b({40, 25}, 2, 8), c({70001}, 3, 8000), out({}, 4, 400000);
  Instr i = instr("train.sum_sq", {&a.t, &b.t, &c.t}, {&out.t});
  Context ctx;
  i.run(i, ctx);
  double want = sumSq(a.v) + sumSq(b.v) + sumSq(c.v);
  EXPECT_NEAR(out.v[0], want, 1e-6 * want);
  // Deterministic: the same bits again.
  float first = out.v[0];
  i.run(i, ctx);
  EXPECT_EQ(out.v[0], first);
}

TEST(SumSq, Errors) {
  Buf a({3}, 1, 0), out({2}, 2, 16), scalar({}, 3, 32);
  EXPECT_NE(DSRT_ERROR_OF(PlanError, instr("train.sum_sq", {&a.t}, {&out.t}))
                .find("the result must be a scalar"),
            std::string::npos);
  EXPECT_NE(DSRT_ERROR_OF(PlanError, instr("train.sum_sq", {}, {&scalar.t}))
                .find("expects at least one input"),
            std::string::npos);
  Tensor ints = a.t;
  ints.dtype = plan::I64;
  EXPECT_NE(DSRT_ERROR_OF(PlanError, instr("train.sum_sq", {&ints}, {&scalar.t}))
                .find("must be F32"),
            std::string::npos);
}

TEST(ClipGradNorm, ShardedUsesTheGlobalSumOfSquares) {
  // This rank's shards are g1, g2; the other ranks contribute `extra` to
  // the global sum of squares.
  Buf g1({100}, 5, 0), g2({7, 3}, 6, 512), sq({}, 7, 1024), norm({}, 8, 1032);
  double extra = 37.5;
  double global = sumSq(g1.v) + sumSq(g2.v) + extra;
  sq.v[0] = float(global);
  std::vector<float> g1Before = g1.v, g2Before = g2.v;
  Instr i = instr("train.clip_grad_norm", {&g1.t, &g2.t, &sq.t}, {&g1.t, &g2.t, &norm.t}, {},
                  {1.0});
  Context ctx;
  i.run(i, ctx);
  double wantNorm = std::sqrt(double(float(global)));
  EXPECT_NEAR(norm.v[0], wantNorm, 1e-6 * wantNorm);
  double coef = 1.0 / (wantNorm + 1e-6);
  for (size_t k = 0; k < g1.v.size(); ++k)
    ASSERT_NEAR(g1.v[k], g1Before[k] * coef, 1e-6) << k;
  for (size_t k = 0; k < g2.v.size(); ++k)
    ASSERT_NEAR(g2.v[k], g2Before[k] * coef, 1e-6) << k;
}

TEST(ClipGradNorm, ShardedBelowMaxNormLeavesGradients) {
  Buf g({10}, 9, 0), sq({}, 10, 64), norm({}, 11, 72);
  sq.v[0] = 0.25f;
  std::vector<float> before = g.v;
  Instr i = instr("train.clip_grad_norm", {&g.t, &sq.t}, {&g.t, &norm.t}, {}, {1.0});
  Context ctx;
  i.run(i, ctx);
  EXPECT_FLOAT_EQ(norm.v[0], 0.5f);
  EXPECT_EQ(g.v, before);
}

TEST(ClipGradNorm, UnshardedFormStillComputesTheNorm) {
  Buf g({1000}, 12, 0), norm({}, 13, 4000);
  double want = std::sqrt(sumSq(g.v));
  std::vector<float> before = g.v;
  Instr i = instr("train.clip_grad_norm", {&g.t}, {&g.t, &norm.t}, {}, {0.0});
  Context ctx;
  i.run(i, ctx);
  EXPECT_NEAR(norm.v[0], want, 1e-6 * want);
  EXPECT_EQ(g.v, before); // max_norm 0: only the norm
}

TEST(ClipGradNorm, ShardedErrors) {
  Buf g({10}, 1, 0), sq({2}, 2, 40), norm({}, 3, 48);
  EXPECT_NE(DSRT_ERROR_OF(PlanError, instr("train.clip_grad_norm", {&g.t, &sq.t},
                                           {&g.t, &norm.t}, {}, {1.0}))
                .find("the sum of squares (last input) must be an F32 scalar"),
            std::string::npos);
  EXPECT_NE(DSRT_ERROR_OF(PlanError, instr("train.clip_grad_norm", {&g.t, &sq.t, &sq.t},
                                           {&g.t, &norm.t}, {}, {1.0}))
                .find("expects N gradients"),
            std::string::npos);
}

TEST(DistOps, BindChecksShapesAndAttributes) {
  Buf in({8}, 1, 0), chunk({4}, 2, 32), odd({3}, 3, 48), whole({16}, 4, 64);
  auto err = [](auto &&f) {
    try {
      f();
    } catch (const PlanError &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // Good forms bind.
  instr("dist.all_reduce", {&in.t, &chunk.t}, {&in.t, &chunk.t}, {2, 1, 0});
  instr("dist.reduce_scatter", {&in.t}, {&chunk.t}, {2, 0, 3});
  instr("dist.all_gather", {&in.t}, {&whole.t}, {2, 7});
  instr("dist.chunk", {&in.t}, {&chunk.t}, {2});
  instr("dist.wait", {}, {}, {7});
  EXPECT_NE(err([&] { instr("dist.all_reduce", {&in.t}, {&in.t, &chunk.t}, {2, 0, 0}); })
                .find("expects k inputs and k outputs (k >= 1), has 1 and 2"),
            std::string::npos);
  EXPECT_NE(err([&] { instr("dist.all_reduce", {&in.t}, {&chunk.t}, {2, 0, 0}); })
                .find("operand 0: input [8] and output [4] differ in size"),
            std::string::npos);
  EXPECT_NE(err([&] { instr("dist.all_reduce", {&in.t}, {&in.t}, {2, 9, 0}); })
                .find("unknown reduction 9"),
            std::string::npos);
  EXPECT_NE(err([&] { instr("dist.reduce_scatter", {&in.t}, {&odd.t}, {2, 0, 0}); })
                .find("output [3] is not a chunk of ceil(n/2) of input [8]"),
            std::string::npos);
  EXPECT_NE(err([&] { instr("dist.all_gather", {&in.t}, {&chunk.t}, {2, 0}); })
                .find("output [4] is not 2 chunks of input [8]"),
            std::string::npos);
  EXPECT_NE(err([&] { instr("dist.all_gather", {&in.t}, {&whole.t}, {2, 0, 1}); })
                .find("expects 2 integer and 0 float attributes"),
            std::string::npos);
  EXPECT_NE(err([&] { instr("dist.wait", {}, {}, {70000}); }).find("out of range"),
            std::string::npos);
  EXPECT_NE(err([&] { instr("dist.chunk", {&in.t}, {&odd.t}, {2}); })
                .find("is not a chunk of ceil(n/2)"),
            std::string::npos);
}

TEST(SelfCommunicator, CopiesAndCounts) {
  comm::SelfCommunicator self;
  std::vector<float> a = {1, 2, 3}, b = {4, 5}, outA(3), outB(2);
  std::vector<comm::TensorArg> ts = {{a.data(), outA.data(), 3}, {b.data(), outB.data(), 2}};
  self.wait(self.allReduce(ts, comm::ReduceOp::Avg, "bucket"));
  EXPECT_EQ(outA, a);
  EXPECT_EQ(outB, b);
  self.wait(self.reduceScatter(ts, comm::ReduceOp::Sum));
  self.wait(self.allGather(ts));
  const comm::Counters &c = self.counters();
  EXPECT_EQ(c[comm::Kind::AllReduce].calls, 1);
  EXPECT_EQ(c[comm::Kind::AllReduce].elements, 10);
  EXPECT_EQ(c[comm::Kind::ReduceScatter].elements, 5);
  EXPECT_EQ(c[comm::Kind::AllGather].elements, 5);
  EXPECT_EQ(c.calls(), 3);
  EXPECT_EQ(c.summary(), "all_reduce 1 call 10 elements, reduce_scatter 1 call 5 elements, "
                         "all_gather 1 call 5 elements");
  self.resetCounters();
  EXPECT_EQ(self.counters().summary(), "none");
  // Waiting twice, or for nothing, is an error.
  comm::Handle h = self.allReduce(ts, comm::ReduceOp::Sum);
  self.wait(h);
  EXPECT_NE(DSRT_ERROR_OF(comm::CommError, self.wait(h)).find("not a pending collective"),
            std::string::npos);
  EXPECT_NE(DSRT_ERROR_OF(comm::CommError, self.allReduce(nullptr, 0, comm::ReduceOp::Sum))
                .find("no tensors"),
            std::string::npos);
}

TEST(StagingPlacement, FirstFit) {
  std::vector<comm::StagingRange> live = {{0, 10}, {30, 5}};
  EXPECT_EQ(comm::firstFitOffset(live.data(), live.size(), 20), 10);
  EXPECT_EQ(comm::firstFitOffset(live.data(), live.size(), 21), 35);
  EXPECT_EQ(comm::firstFitOffset(nullptr, 0, 7), 0);
  live = {{5, 5}};
  EXPECT_EQ(comm::firstFitOffset(live.data(), live.size(), 5), 0);
  EXPECT_EQ(comm::firstFitOffset(live.data(), live.size(), 6), 10);
}

/// A communicator of `size` ranks that is never asked to communicate (plan
/// validation only).
class FakeCommunicator : public comm::Communicator {
public:
  explicit FakeCommunicator(int size) : Communicator(1), size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  const char *backend() const override { return "fake"; }
  int64_t stagingElements(comm::Kind, const comm::TensorArg *t, size_t k) const override {
    return k > 1 ? t[0].n + t[1].n : 0;
  }
  void progress() override {}
  double blockingAllReduceScalar(double v, comm::ReduceOp) override { return v; }
  std::unique_ptr<comm::Communicator> split(int, int) override {
    return std::make_unique<FakeCommunicator>(1);
  }

protected:
  void startCollective(int) override {}
  bool testCollective(int) override { return true; }
  void finishCollective(int) override {}
  void allocateStaging(int64_t elements) override { allocated = elements; }

private:
  int size_;

public:
  int64_t allocated = -1;
};

/// A plan of dp ranks with a reduce_scatter / all_gather pair in the
/// epilogue (handles 1 and 2).
PlanBuilder collectivesPlan(uint32_t dp) {
  PlanBuilder p(dp, 1, 1);
  uint32_t g = p.f32({8}), gs = p.f32({8 / std::max<uint32_t>(dp, 1)});
  p.instr(Epilogue, "dist.reduce_scatter", {g}, {gs}, {std::max<uint32_t>(dp, 1), 0, 1});
  p.instr(Epilogue, "dist.wait", {}, {}, {1});
  p.instr(Epilogue, "dist.all_gather", {gs}, {g}, {std::max<uint32_t>(dp, 1), 2});
  p.instr(Epilogue, "dist.wait", {}, {}, {2});
  return p;
}

std::string loadError(PlanBuilder &p, comm::Communicator *c = nullptr) {
  TempDir dir;
  p.write(dir.path());
  try {
    Executor exec(dir.path(), c);
  } catch (const PlanError &e) {
    std::string m = e.what();
    size_t at = m.find("plan.pb: ");
    return at == std::string::npos ? m : m.substr(at + 9);
  }
  return "no error";
}

TEST(ExecutorDp, RankCountMustMatchThePlan) {
  PlanBuilder two = collectivesPlan(2);
  EXPECT_EQ(loadError(two), "plan compiled for dp=2 but running on 1 rank: recompile with "
                            "--dp 1 (or run it with mpirun -np 2)");
  FakeCommunicator four(4);
  EXPECT_EQ(loadError(two, &four),
            "plan compiled for dp=2 but running on 4 ranks: recompile with --dp 4");
  FakeCommunicator fakeTwo(2);
  EXPECT_EQ(loadError(two, &fakeTwo), "no error");
  PlanBuilder one = collectivesPlan(0); // dp 0: one rank
  EXPECT_EQ(loadError(one), "no error");
}

TEST(ExecutorDp, GroupSizeMustBeDp) {
  PlanBuilder p(2, 1, 1);
  uint32_t g = p.f32({8});
  p.instr(Epilogue, "dist.all_reduce", {g}, {g}, {4, 0, 0});
  p.instr(Epilogue, "dist.wait", {}, {}, {0});
  FakeCommunicator two(2);
  EXPECT_EQ(loadError(p, &two),
            "epilogue instruction 0 (dist.all_reduce): group size 4 differs from the plan's dp=2");
}

TEST(ExecutorDp, HandlesPairWithinAList) {
  FakeCommunicator two(2);
  {
    PlanBuilder p(2, 1, 1);
    p.instr(Prologue, "dist.wait", {}, {}, {3});
    EXPECT_EQ(loadError(p, &two), "prologue instruction 0 (dist.wait): waits for handle 3, "
                                  "which no earlier collective of the prologue started");
  }
  {
    PlanBuilder p(2, 1, 1);
    uint32_t g = p.f32({8});
    p.instr(MicroBatch, "dist.all_reduce", {g}, {g}, {2, 1, 5});
    p.instr(Epilogue, "dist.wait", {}, {}, {5});
    EXPECT_EQ(loadError(p, &two),
              "micro_batch instruction 0 (dist.all_reduce): starts handle 5, which no later "
              "dist.wait of the micro_batch completes");
  }
  {
    PlanBuilder p(2, 1, 1);
    uint32_t g = p.f32({8});
    p.instr(Epilogue, "dist.all_reduce", {g}, {g}, {2, 1, 5});
    p.instr(Epilogue, "dist.all_reduce", {g}, {g}, {2, 1, 5});
    p.instr(Epilogue, "dist.wait", {}, {}, {5});
    EXPECT_EQ(loadError(p, &two),
              "epilogue instruction 1 (dist.all_reduce): starts handle 5, still pending from "
              "instruction 0 of the epilogue (no dist.wait in between)");
  }
  {
    // A handle may be reused once waited for.
    PlanBuilder p(2, 1, 1);
    uint32_t g = p.f32({8});
    for (int rep = 0; rep < 2; ++rep) {
      p.instr(Epilogue, "dist.all_reduce", {g}, {g}, {2, 1, 5});
      p.instr(Epilogue, "dist.wait", {}, {}, {5});
    }
    EXPECT_EQ(loadError(p, &two), "no error");
  }
}

TEST(ExecutorDp, ShardsMustMatchDp) {
  FakeCommunicator two(2);
  {
    PlanBuilder p(2, 1, 1);
    p.shard("w", plan::PARAM, {5}, 4);
    EXPECT_EQ(loadError(p, &two), "buffer 4 ('w'): sharded 4 ways, but the plan runs on dp=2 ranks");
  }
  {
    PlanBuilder p(2, 1, 1);
    uint32_t w = p.shard("w", plan::PARAM, {5}, 2);
    p.at(w).set_shape(0, 2);
    EXPECT_EQ(loadError(p, &two),
              "buffer 4 ('w'): a shard of [5] over 2 ranks must have shape [3], has [2]");
  }
  {
    PlanBuilder p(2, 1, 1);
    p.shard("x", plan::INPUT, {5}, 2);
    EXPECT_NE(loadError(p, &two).find("only parameters, frozen buffers and optimizer states"),
              std::string::npos);
  }
}

TEST(ExecutorDp, StagingIsReservedForTheLargestPendingSet) {
  // Two buckets pending at once (4 + 4 and 8 + 8 elements with the fake's
  // rule), then one of 2 + 2 after the first wait: first fit puts it at 0.
  PlanBuilder p(2, 1, 1);
  uint32_t a = p.f32({4}), b = p.f32({4}), c = p.f32({8}), d = p.f32({8}), e = p.f32({2});
  p.instr(Epilogue, "dist.all_reduce", {a, b}, {a, b}, {2, 0, 0});
  p.instr(Epilogue, "dist.all_reduce", {c, d}, {c, d}, {2, 0, 1});
  p.instr(Epilogue, "dist.wait", {}, {}, {0});
  p.instr(Epilogue, "dist.all_reduce", {e, e}, {e, e}, {2, 0, 2});
  p.instr(Epilogue, "dist.wait", {}, {}, {1});
  p.instr(Epilogue, "dist.wait", {}, {}, {2});
  TempDir dir;
  p.write(dir.path());
  FakeCommunicator two(2);
  Executor exec(dir.path(), &two);
  exec.initialize(dir.path() + "/weights.safetensors", 0);
  EXPECT_EQ(two.allocated, 24);
  EXPECT_EQ(two.reservation().maxPending, 2);
  EXPECT_EQ(two.reservation().maxTensors, 2);
}

TEST(ExecutorDp, OneRankRunsCollectivesAsCopies) {
  // dp 1: reduce_scatter and all_gather are copies, the sharded clipping
  // and sum_sq still run; the global micro-batch is the local one.
  PlanBuilder p(1, 2, 1);
  uint32_t w = p.buffer("w", plan::F32, {4}, plan::PARAM);
  uint32_t x = p.buffer("x", plan::F32, {1, 4}, plan::INPUT);
  uint32_t g = p.f32({1, 4}), gs = p.f32({4}), sq = p.f32({}), sqg = p.f32({}), full = p.f32({4});
  p.weight("w", {4}, {1, 2, 3, 4});
  p.instr(Prologue, "fill", {}, {p.kLr}, {}, {0.5});
  p.instr(Prologue, "fill", {}, {g}, {}, {0.0});
  p.instr(MicroBatch, "accumulate", {x}, {g});
  p.instr(Epilogue, "dist.reduce_scatter", {g}, {gs}, {1, 1, 0});
  p.instr(Epilogue, "dist.wait", {}, {}, {0});
  p.instr(Epilogue, "train.sum_sq", {gs}, {sq});
  p.instr(Epilogue, "dist.all_reduce", {sq}, {sqg}, {1, 0, 1});
  p.instr(Epilogue, "dist.wait", {}, {}, {1});
  p.instr(Epilogue, "train.clip_grad_norm", {gs, sqg}, {gs, p.kNorm}, {}, {0.0});
  p.instr(Epilogue, "train.sgd", {w, gs, p.kLr}, {w}, {0}, {0.0, 0.0, 0.0});
  p.instr(Epilogue, "dist.all_gather", {w}, {full}, {1, 2});
  p.instr(Epilogue, "dist.wait", {}, {}, {2});
  p.instr(Epilogue, "train.sum_sq", {full}, {p.kLoss});
  TempDir dir;
  p.write(dir.path());
  Executor exec(dir.path());
  exec.initialize(dir.path() + "/weights.safetensors", 0);
  std::vector<int64_t> seen;
  for (int64_t s = 1; s <= 2; ++s)
    exec.step(s, [&](int64_t global) {
      seen.push_back(global);
      float *in = exec.inputs()[0]->f32();
      for (int j = 0; j < 4; ++j)
        in[j] = float(global + j);
    });
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3}));
  // Step 1: g = x0 + x1 = [1,3,5,7]; step 2: [5,7,9,11]; lr 0.5.
  std::vector<float> want = {1 - 0.5f * 1 - 0.5f * 5, 2 - 0.5f * 3 - 0.5f * 7,
                             3 - 0.5f * 5 - 0.5f * 9, 4 - 0.5f * 7 - 0.5f * 11};
  std::vector<WholeTensor> weights = exec.gatherWeights();
  ASSERT_EQ(weights.size(), 1u);
  EXPECT_EQ(std::vector<float>(weights[0].data, weights[0].data + 4), want);
  EXPECT_FLOAT_EQ(exec.gradNorm(), std::sqrt(25.0f + 49 + 81 + 121));
  EXPECT_FLOAT_EQ(exec.loss(), float(sumSq(want)));
  EXPECT_EQ(exec.globalLoss(), exec.loss());
  EXPECT_EQ(exec.commCounters().summary(), "all_reduce 1 call 2 elements, reduce_scatter 1 call "
                                           "4 elements, all_gather 1 call 4 elements");
}

} // namespace
} // namespace dsrt::test
