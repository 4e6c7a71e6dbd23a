//===- DistOpsTest.cpp - the data-parallel ops and checks, on one rank ----===//
//
// train.sum_sq and the sharded train.clip_grad_norm against float64
// references; the load-time checks of the dist.* ops and of ZeRO shards;
// the executor's plan validation for dp (rank count, group sizes, handle
// pairing); the SelfCommunicator and its counters; and a plan with
// collectives run end to end on one rank.
//
//===----------------------------------------------------------------------===//
#include "PipelinePlan.h"
#include "FakeCommunicator.h"
#include "test/runtime/core/InstrUtil.h"
#include "PlanBuilder.h"

#include "runtime/core/Executor.h"
#include "runtime/kernels/cpu/Kernels.h"

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
  Instr i = makeInstr(op, std::move(in), std::move(out), std::move(ints), std::move(floats));
  bindInstr(i, "test " + op);
  return i;
}

/// The PlanError `f` throws, or "no error".
template <typename F> std::string err(F &&f) {
  try {
    f();
  } catch (const PlanError &e) {
    return std::string(e.what());
  }
  return std::string("no error");
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
                .find("sum of squares must be a scalar"),
            std::string::npos);
  EXPECT_NE(DSRT_ERROR_OF(PlanError, instr("train.clip_grad_norm", {&g.t, &sq.t, &sq.t},
                                           {&g.t, &norm.t}, {}, {1.0}))
                .find("expects N gradients"),
            std::string::npos);
}

TEST(OneBitOps, ACompressedAllReduceOnTwoSimulatedRanks) {
  // DeepSpeed's compressed_allreduce with its collectives simulated: the
  // instructions give what the kernels give when called on the chunks
  // directly (CompressTest checks the kernels against DeepSpeed's rule).
  const int W = 2;
  const int64_t n = 32, chunk = n / W;
  std::vector<Buf> m, err, bits, scale;
  for (auto *v : {&m, &err, &bits, &scale})
    v->reserve(W); // a Tensor points into its Buf
  for (int w = 0; w < W; ++w) {
    uint64_t base = uint64_t(w) * 4096;
    m.emplace_back(std::vector<int64_t>{n}, 20 + w, base);
    err.emplace_back(std::vector<int64_t>{n}, 30 + w, base + 512); // an earlier step's error
    bits.emplace_back(std::vector<int64_t>{n / 8}, 0, base + 1024);
    scale.emplace_back(std::vector<int64_t>{1}, 0, base + 1536);
    bits.back().t.dtype = plan::U8;
  }
  std::vector<std::vector<float>> errBefore;
  for (int w = 0; w < W; ++w) {
    errBefore.push_back(err[w].v);
    // The new error in place of the old one, as the memory plan places it.
    Instr c = instr("train.onebit_compress", {&m[w].t, &err[w].t},
                    {&bits[w].t, &scale[w].t, &err[w].t});
    Context ctx;
    c.run(c, ctx);
    std::vector<float> e = errBefore[w];
    std::vector<uint8_t> want(n / 8);
    float a = cpu::onebitCompress(m[w].v.data(), e.data(), n, want.data());
    EXPECT_EQ(scale[w].v[0], a);
    EXPECT_EQ(0, std::memcmp(bits[w].v.data(), want.data(), size_t(n / 8))) << "worker " << w;
    EXPECT_EQ(std::vector<float>(err[w].v.begin(), err[w].v.begin() + n), e);
  }
  // all_to_all and all_gather of the scales, for rank r; the server; the
  // all_gather of the servers' bits and scales; the expansion.
  Buf gotBits({n / 8}, 0, 20000), scales({W}, 0, 20480), serverBits({n / 8}, 0, 21000),
      serverScales({W}, 0, 21504), out({n}, 0, 22000);
  gotBits.t.dtype = serverBits.t.dtype = plan::U8;
  auto *gb = reinterpret_cast<uint8_t *>(gotBits.v.data());
  auto *sb = reinterpret_cast<uint8_t *>(serverBits.v.data());
  for (int r = 0; r < W; ++r) {
    for (int w = 0; w < W; ++w) {
      std::memcpy(gb + w * chunk / 8, reinterpret_cast<uint8_t *>(bits[w].v.data()) + r * chunk / 8,
                  size_t(chunk / 8));
      scales.v[size_t(w)] = scale[w].v[0];
    }
    Buf serr({chunk}, 40 + r, 23000 + 512 * uint64_t(r)), newErr({chunk}, 0, 25000),
        myBits({chunk / 8}, 0, 26000), myScale({1}, 0, 26500);
    myBits.t.dtype = plan::U8;
    // The new error apart from the old one: copied, then updated.
    Instr s = instr("train.onebit_server", {&gotBits.t, &scales.t, &serr.t},
                    {&myBits.t, &myScale.t, &newErr.t});
    Context ctx;
    s.run(s, ctx);
    std::vector<float> e(serr.v.begin(), serr.v.begin() + chunk);
    std::vector<uint8_t> want(chunk / 8);
    float b = cpu::onebitServer(gb, scales.v.data(), W, e.data(), chunk, want.data());
    EXPECT_EQ(myScale.v[0], b);
    EXPECT_EQ(std::vector<float>(newErr.v.begin(), newErr.v.begin() + chunk), e);
    EXPECT_EQ(0, std::memcmp(myBits.v.data(), want.data(), size_t(chunk / 8)));
    std::memcpy(sb + r * chunk / 8, myBits.v.data(), size_t(chunk / 8));
    serverScales.v[size_t(r)] = b;
  }
  Instr x = instr("train.onebit_expand", {&serverBits.t, &serverScales.t}, {&out.t});
  Context ctx;
  x.run(x, ctx);
  for (int r = 0; r < W; ++r)
    for (int64_t i = 0; i < chunk; ++i) {
      bool up = (sb[(r * chunk + i) / 8] >> (7 - (r * chunk + i) % 8)) & 1;
      ASSERT_EQ(out.v[size_t(r * chunk + i)], up ? serverScales.v[size_t(r)]
                                                 : -serverScales.v[size_t(r)])
          << r << " " << i;
    }
}

TEST(OneBitOps, BindErrors) {
  Buf m({12}, 1, 0), e({12}, 2, 64), bits({2}, 0, 128), a({1}, 0, 192);
  bits.t.dtype = plan::U8;
  EXPECT_NE(err([&] { instr("train.onebit_compress", {&m.t, &e.t}, {&bits.t, &a.t, &e.t}); })
                .find("bits must hold one byte per 8 of the 12 elements"),
            std::string::npos);
  Buf m16({16}, 1, 0), e16({16}, 2, 64), partly({16}, 0, 32);
  EXPECT_NE(err([&] {
              instr("train.onebit_compress", {&m16.t, &e16.t}, {&bits.t, &a.t, &partly.t});
            }).find("the new error must be written in place of the old one or apart from the "
                    "operands"),
            std::string::npos);
  Buf s({3}, 0, 300);
  EXPECT_NE(err([&] {
              instr("train.onebit_server", {&bits.t, &s.t, &e16.t}, {&bits.t, &a.t, &e16.t});
            }).find("bits must hold 3 workers' 2 bytes"),
            std::string::npos);
  Buf out({12}, 0, 400);
  EXPECT_NE(err([&] { instr("train.onebit_expand", {&bits.t, &a.t}, {&out.t}); })
                .find("the result must hold 8 elements per byte of bits"),
            std::string::npos);
}

TEST(DistOps, BindChecksShapesAndAttributes) {
  Buf in({8}, 1, 0), chunk({4}, 2, 32), odd({3}, 3, 48), whole({16}, 4, 64);
  // Good forms bind.
  instr("dist.all_reduce", {&in.t, &chunk.t}, {&in.t, &chunk.t}, {2, 1, 0});
  instr("dist.reduce_scatter", {&in.t}, {&chunk.t}, {2, 0, 3});
  instr("dist.all_gather", {&in.t}, {&whole.t}, {2, 7});
  instr("dist.all_to_all", {&in.t}, {&in.t}, {2, 5});
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
  EXPECT_NE(err([&] { instr("dist.all_to_all", {&in.t}, {&whole.t}, {2, 0}); })
                .find("output [16] and input [8] are not the same 2 equal chunks"),
            std::string::npos);
  EXPECT_NE(err([&] { instr("dist.all_to_all", {&odd.t}, {&odd.t}, {2, 0}); })
                .find("are not the same 2 equal chunks"),
            std::string::npos);
  // Raw bytes (U8: packed signs) move, but are not added.
  Buf bytes({8}, 5, 96), bytesOut({8}, 6, 128), bytesWhole({16}, 7, 160);
  bytes.t.dtype = bytesOut.t.dtype = bytesWhole.t.dtype = plan::U8;
  instr("dist.all_to_all", {&bytes.t}, {&bytesOut.t}, {2, 4});
  instr("dist.all_gather", {&bytes.t}, {&bytesWhole.t}, {2, 4});
  EXPECT_NE(err([&] { instr("dist.all_reduce", {&bytes.t}, {&bytes.t}, {2, 0, 0}); })
                .find("operand must be F32, BF16 or F16, is U8"),
            std::string::npos);
  EXPECT_NE(err([&] { instr("dist.all_to_all", {&bytes.t}, {&in.t}, {2, 0}); })
                .find("output"),
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
  std::fill(outA.begin(), outA.end(), 0.0f);
  self.wait(self.allToAll(ts.data(), ts.size()));
  EXPECT_EQ(outA, a) << "one rank's all_to_all keeps its only chunk";
  const comm::Counters &c = self.counters();
  EXPECT_EQ(c[comm::Kind::AllReduce].calls, 1);
  EXPECT_EQ(c[comm::Kind::AllReduce].elements, 10);
  EXPECT_EQ(c[comm::Kind::ReduceScatter].elements, 5);
  EXPECT_EQ(c[comm::Kind::AllGather].elements, 5);
  EXPECT_EQ(c[comm::Kind::AllToAll].elements, 5);
  EXPECT_EQ(c.calls(), 4);
  EXPECT_EQ(c.summary(), "all_reduce 1 call 10 elements, reduce_scatter 1 call 5 elements, "
                         "all_gather 1 call 5 elements, all_to_all 1 call 5 elements");
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

TEST(StagingPlacement, AllToAllStagesOnlyABucket) {
  // The plan-format contract (plan/Staging.h): a lone all_to_all
  // moves from input to output; a bucket packs the blocks it sends and the
  // blocks it receives: here 8 floats and 6 bf16, twice.
  std::vector<int64_t> n = {8, 6}, width = {4, 2};
  auto bytes = [&](size_t k) {
    return staging::collectiveStagingBytes(
        staging::Collective::AllToAll, 2, k, [&](size_t j) { return n[j]; },
        [&](size_t j) { return n[j]; }, [&](size_t j) { return width[j]; });
  };
  EXPECT_EQ(bytes(1), 0);
  EXPECT_EQ(bytes(2), 2 * (8 * 4 + 6 * 2));
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

/// The PlanError of loading the plan in `dir` (after "plan.pb: "; a
/// pipeline stage's from its "(stage N)"), or "no error".
std::string loadErrorIn(const std::string &dir, comm::Communicator *c) {
  try {
    Executor exec(dir, c);
  } catch (const PlanError &e) {
    std::string m = e.what();
    size_t at = m.find("plan.pb");
    if (at == std::string::npos)
      return m;
    m = m.substr(at + 7);
    return m.rfind(": ", 0) == 0 ? m.substr(2) : m.substr(m.rfind(" ", 0) == 0 ? 1 : 0);
  }
  return "no error";
}

std::string loadError(PlanBuilder &p, comm::Communicator *c = nullptr) {
  TempDir dir;
  p.write(dir.path());
  return loadErrorIn(dir.path(), c);
}

/// The error of loading the two-stage pipeline `st` as world rank `rank`
/// of pp x dp ranks.
std::string pipelineError(PipelineStages &st, int rank, int dp = 1, int64_t M = 2) {
  TempDir dir;
  st.write(dir.path(), M);
  FakeCommunicator world(2 * dp, rank, {dp, 2});
  return loadErrorIn(dir.path(), &world);
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

//===----------------------------------------------------------------------===//
// Pipeline plans: load-time checks (the runs are in MpiCommunicatorTest)
//===----------------------------------------------------------------------===//

TEST(ExecutorPipeline, BothStagesLoad) {
  for (int rank : {0, 1}) {
    PipelineStages st = pipelinePlan(1, 2, 3);
    EXPECT_EQ(pipelineError(st, rank), "no error") << "rank " << rank;
  }
  // Rank 1 runs stage 1: its inputs are micro-batch 0's targets.
  PipelineStages st = pipelinePlan(1, 3, 3);
  TempDir dir;
  st.write(dir.path(), 3);
  FakeCommunicator world(2, 1, {1, 2});
  Executor exec(dir.path(), &world);
  EXPECT_TRUE(exec.pipelined());
  EXPECT_EQ(exec.pp(), 2);
  EXPECT_EQ(exec.stage(), 1);
  EXPECT_EQ(exec.dp(), 1);
  EXPECT_TRUE(exec.hasLoss());
  EXPECT_EQ(exec.microBatches(), 3);
  ASSERT_EQ(exec.inputs().size(), 1u);
  EXPECT_EQ(exec.inputs()[0]->name, "t");
  EXPECT_EQ(exec.group(1).size(), 2);
  EXPECT_EQ(exec.group(1).rank(), 1);
  // Every stage's parameters, a tied one once, in stage order.
  std::vector<std::string> names;
  for (auto &[name, shape] : exec.allWeights())
    names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"w0", "tied", "w1"}));
}

TEST(ExecutorPipeline, WorldMustBePpTimesDp) {
  PipelineStages st = pipelinePlan(1, 2, 3);
  TempDir dir;
  st.write(dir.path(), 2);
  EXPECT_EQ(loadErrorIn(dir.path(), nullptr),
            "plan compiled for pp=2 x dp=1 = 2 ranks but running on 1 rank: run it with mpirun "
            "-np 2 (or recompile for 1 rank)");
  FakeCommunicator three(3);
  EXPECT_EQ(loadErrorIn(dir.path(), &three),
            "plan compiled for pp=2 x dp=1 = 2 ranks but running on 3 ranks: run it with mpirun "
            "-np 2 (or recompile for 3 ranks)");
  PipelineStages two = pipelinePlan(2, 2, 3);
  TempDir dir2;
  two.write(dir2.path(), 2);
  FakeCommunicator four(4, 3, {2, 2});
  EXPECT_EQ(loadErrorIn(dir2.path(), &four), "no error");
}

TEST(ExecutorPipeline, PeerOutsideThePipeline) {
  // Stage 1 sends to the next stage, which does not exist.
  PipelineStages bad = pipelinePlan(1, 2, 3);
  uint32_t h = bad.stage(1).f32({1, 3});
  tagged(bad.stage(1).instr(Prologue, "dist.send", {h}, {}, {2, +1, 0, 7}), 0, 1, 1);
  bad.stage(1).instr(Prologue, "dist.wait", {}, {}, {7});
  int n = bad.stage(1).proto().program().prologue_size();
  EXPECT_EQ(pipelineError(bad, 1),
            "(stage 1): prologue instruction " + std::to_string(n - 2) +
                " (dist.send): peer +1 is stage 2, outside the pipeline's 2 stages (this is "
                "stage 1)");
  // Stage 0 is fine; the group size must be pp on axis 1.
  EXPECT_EQ(pipelineError(bad, 0), "no error");
  PipelineStages size = pipelinePlan(1, 2, 3);
  tagged(size.stage(0).instr(Prologue, "dist.recv", {}, {size.stage(0).f32({2})}, {3, +1, 5, 9}), 0, 1, 1);
  n = size.stage(0).proto().program().prologue_size();
  EXPECT_EQ(pipelineError(size, 0), "(stage 0): prologue instruction " + std::to_string(n - 1) +
                                        " (dist.recv): group size 3 differs from the plan's pp=2");
  // A message on the dp group must stay inside it too.
  PipelineStages dpPeer = pipelinePlan(2, 2, 3);
  tagged(dpPeer.stage(0).instr(Prologue, "dist.send", {dpPeer.stage(0).f32({2})}, {}, {2, -1, 0, 9}), 0, 1, 0);
  dpPeer.stage(0).instr(Prologue, "dist.wait", {}, {}, {9});
  n = dpPeer.stage(0).proto().program().prologue_size();
  EXPECT_EQ(pipelineError(dpPeer, 0, 2),
            "(stage 0): prologue instruction " + std::to_string(n - 2) +
                " (dist.send): peer -1 is dp rank -1, outside the dp group of 2");
  EXPECT_EQ(pipelineError(dpPeer, 2, 2), "no error"); // dp index 1 of stage 0
}

TEST(ExecutorPipeline, LoadBatchChecks) {
  {
    PipelineStages st = pipelinePlan(1, 2, 3);
    TempDir dir;
    st.write(dir.path(), 1); // M = 1 < 2 loaded
    FakeCommunicator world(2, 0, {1, 2});
    EXPECT_EQ(loadErrorIn(dir.path(), &world),
              "(stage 0): instruction 5 of the prologue (load_batch): micro-batch 1 of a step of 1 "
              "(pipeline_micro_batches)");
  }
  {
    // An INPUT no load_batch fills.
    PipelineStages st = pipelinePlan(1, 2, 3);
    uint32_t extra = st.stage(0).buffer("x", plan::F32, {1, 3}, plan::INPUT);
    EXPECT_EQ(pipelineError(st, 0), "(stage 0): buffer " + std::to_string(extra) +
                                        " ('x') is an INPUT that no load_batch fills");
  }
  {
    // Micro-batch 1's inputs differ from micro-batch 0's.
    PipelineStages st = pipelinePlan(1, 2, 3);
    uint32_t other = st.stage(0).buffer("y", plan::F32, {1, 3}, plan::INPUT);
    st.stage(0).instr(Prologue, "load_batch", {}, {other}, {1});
    EXPECT_EQ(pipelineError(st, 0),
              "(stage 0): instruction " + std::to_string(st.stage(0).proto().program().prologue_size() - 1) +
                  " of the prologue (load_batch): loads micro-batch 1 into y F32 [1,3]; "
                  "micro-batch 0 into x F32 [1,3]");
  }
  {
    // Only load_batch writes an INPUT; load_batch only writes INPUTs.
    PipelineStages st = pipelinePlan(1, 2, 3);
    uint32_t x = 4 + 6; // the first input, after w0, tied and 4 activations
    ASSERT_EQ(st.stage(0).at(x).name(), "x");
    st.stage(0).instr(Prologue, "fill", {}, {x}, {}, {1.0});
    EXPECT_EQ(pipelineError(st, 0),
              "(stage 0): prologue instruction " +
                  std::to_string(st.stage(0).proto().program().prologue_size() - 1) +
                  " (fill): writes the read-only buffer " + std::to_string(x));
    PipelineStages act = pipelinePlan(1, 2, 3);
    act.stage(0).instr(Prologue, "load_batch", {}, {act.stage(0).f32({1, 3})}, {0});
    EXPECT_NE(pipelineError(act, 0).find("(load_batch): writes buffer '', which is a ACTIVATION, "
                                         "not an INPUT"),
              std::string::npos);
  }
  {
    // load_batch belongs to pipeline plans.
    PlanBuilder p(1, 1, 1);
    uint32_t x = p.buffer("x", plan::F32, {1, 2}, plan::INPUT);
    p.instr(Prologue, "load_batch", {}, {x}, {0});
    EXPECT_EQ(loadError(p), "prologue instruction 0 (load_batch): load_batch outside a pipeline "
                            "plan (pp=1: the inputs are loaded before each micro_batch "
                            "iteration)");
  }
}

TEST(ExecutorPipeline, StagePlanChecks) {
  {
    PipelineStages st = pipelinePlan(1, 2, 3);
    st.stage(0).proto().set_has_loss(true);
    EXPECT_EQ(pipelineError(st, 0), "2 stages hold the loss (has_loss); a pipeline has one, its "
                                    "last stage");
  }
  {
    PipelineStages st = pipelinePlan(1, 2, 3);
    st.stage(1).proto().set_dp(2);
    EXPECT_EQ(pipelineError(st, 0), "stage 1 is compiled for dp=2, the pipeline for dp=1");
  }
  {
    PipelineStages st = pipelinePlan(1, 2, 3);
    st.stage(1).instr(MicroBatch, "fill", {}, {st.stage(1).f32({})}, {}, {0.0});
    EXPECT_EQ(pipelineError(st, 1), "(stage 1): a pipeline stage runs its whole schedule in the "
                                    "prologue; its micro_batch list has 1 instructions");
  }
  {
    PipelineStages st = pipelinePlan(1, 2, 3);
    st.stage(1).weight("w0", {1, 4}, {1, 2, 3, 4});
    st.stage(1).buffer("w0", plan::F32, {1, 4}, plan::PARAM);
    EXPECT_EQ(pipelineError(st, 0),
              "parameter 'w0' has shape [1, 4] in stage 1 but [1, 3] in stage 0");
  }
  // The message ops' own checks.
  PipelineStages st = pipelinePlan(1, 2, 3);
  st.stage(0).instr(Prologue, "dist.send", {st.stage(0).f32({2})}, {}, {2, 0, 0, 9});
  EXPECT_NE(pipelineError(st, 0).find("(dist.send): peer 0 must be a non-zero offset inside the "
                                      "group of 2"),
            std::string::npos);
  PipelineStages tag = pipelinePlan(1, 2, 3);
  tag.stage(0).instr(Prologue, "dist.recv", {}, {tag.stage(0).f32({2})}, {2, 1, 40000, 9});
  EXPECT_NE(pipelineError(tag, 0).find("(dist.recv): tag 40000 out of range [0, 32767]"),
            std::string::npos);
}

} // namespace
} // namespace dsrt::test
