//===- MpiCommunicatorTest.cpp - collectives over MPI, run by mpirun ------===//
//
// Run with `mpirun -np 2` and `-np 4` (ctest does both). Every rank runs
// every test in the same order; inputs are seeded by (rank, tensor), so each
// rank computes the reference of every collective locally from all ranks'
// inputs. Covers the bucketed forms (staged) and the single-tensor forms
// (direct and in place), Avg/Max/Min, several collectives pending at once,
// the counters, the staging limit, the timeout (a rank that never joins),
// and a ZeRO plan run by the executor against a float64 reference, whose
// steps make no allocation. Pipelines: split communicators, point-to-point
// messages (order on one tag, sizes, the timeout naming the peer), and a
// two-stage pipeline plan (pp 2 x dp S/2) against a float64 reference.
//
//===----------------------------------------------------------------------===//
#include "PipelinePlan.h"
#include "PlanBuilder.h"

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/kernels/cpu/Half.h"
#include "runtime/core/Executor.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <new>
#include <random>
#include <sstream>

// Counts C++ allocations, to check that the step loop makes none. (GCC
// misreads the malloc/free pairing of a replaced operator new.)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
static std::atomic<long> gAllocations{0};
void *operator new(std::size_t n) {
  ++gAllocations;
  if (void *p = std::malloc(n ? n : 1))
    return p;
  throw std::bad_alloc();
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }

namespace dsrt::test {
namespace {

using comm::Kind;
using comm::ReduceOp;
using comm::TensorArg;

/// The communicator every test shares (one per process).
comm::MpiCommunicator &world() {
  static comm::MpiCommunicator c(/*timeoutSeconds=*/30);
  return c;
}

/// Rank `r`'s input `j` of `n` elements.
std::vector<float> input(int r, int j, int64_t n) {
  std::mt19937 gen(unsigned(1000 * r + j + 1));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float &x : v)
    x = dist(gen);
  return v;
}

/// The reduction of input j over all ranks, in double.
std::vector<double> reduced(int j, int64_t n, ReduceOp op, int size) {
  std::vector<double> r(static_cast<size_t>(n));
  for (int q = 0; q < size; ++q) {
    std::vector<float> v = input(q, j, n);
    for (int64_t i = 0; i < n; ++i) {
      double x = v[static_cast<size_t>(i)];
      if (q == 0)
        r[static_cast<size_t>(i)] = x;
      else if (op == ReduceOp::Max)
        r[static_cast<size_t>(i)] = std::max(r[static_cast<size_t>(i)], x);
      else if (op == ReduceOp::Min)
        r[static_cast<size_t>(i)] = std::min(r[static_cast<size_t>(i)], x);
      else
        r[static_cast<size_t>(i)] += x;
    }
  }
  if (op == ReduceOp::Avg)
    for (double &x : r)
      x /= size;
  return r;
}

::testing::AssertionResult near(const float *got, const double *want, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-5 + 1e-5 * std::fabs(want[i])))
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << got[i] << ", want " << want[i];
  return ::testing::AssertionSuccess();
}

/// Reserves room for `pending` collectives of up to 8 tensors and `staging`
/// elements.
void reserve(int64_t staging, int pending = 4) {
  world().reserve({staging, pending, 8});
  world().resetCounters();
}

TEST(MpiAllReduce, BucketSumAvgMaxMin) {
  comm::MpiCommunicator &c = world();
  const std::vector<int64_t> sizes = {1, 17, 1000, 4099};
  int64_t total = 0;
  for (int64_t n : sizes)
    total += n;
  reserve(2 * total);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
    std::vector<std::vector<float>> in, out;
    std::vector<TensorArg> ts;
    for (size_t j = 0; j < sizes.size(); ++j) {
      in.push_back(input(c.rank(), int(j), sizes[j]));
      out.emplace_back(static_cast<size_t>(sizes[j]), -99.0f);
    }
    for (size_t j = 0; j < sizes.size(); ++j)
      ts.push_back({in[j].data(), out[j].data(), sizes[j]});
    c.wait(c.allReduce(ts, op, "bucket"));
    for (size_t j = 0; j < sizes.size(); ++j) {
      std::vector<double> want = reduced(int(j), sizes[j], op, c.size());
      EXPECT_TRUE(near(out[j].data(), want.data(), sizes[j]))
          << comm::reduceOpName(op) << " tensor " << j;
      // The inputs are left alone.
      EXPECT_EQ(in[j], input(c.rank(), int(j), sizes[j]));
    }
  }
}

TEST(MpiAllReduce, InPlaceBucketAndSingleTensor) {
  comm::MpiCommunicator &c = world();
  const std::vector<int64_t> sizes = {33, 7, 1};
  reserve(1 << 16); // all-reduce always stages (ring)
  std::vector<std::vector<float>> buf;
  std::vector<TensorArg> ts;
  for (size_t j = 0; j < sizes.size(); ++j)
    buf.push_back(input(c.rank(), int(j), sizes[j]));
  for (size_t j = 0; j < sizes.size(); ++j)
    ts.push_back({buf[j].data(), buf[j].data(), sizes[j]});
  c.wait(c.allReduce(ts, ReduceOp::Avg));
  for (size_t j = 0; j < sizes.size(); ++j) {
    std::vector<double> want = reduced(int(j), sizes[j], ReduceOp::Avg, c.size());
    EXPECT_TRUE(near(buf[j].data(), want.data(), sizes[j])) << "bucket tensor " << j;
  }
  // One tensor: no staging; in place, and out of place.
  std::vector<float> one = input(c.rank(), 5, 300), other(300);
  TensorArg inPlace{one.data(), one.data(), 300};
  c.wait(c.allReduce(&inPlace, 1, ReduceOp::Sum));
  std::vector<double> want = reduced(5, 300, ReduceOp::Sum, c.size());
  EXPECT_TRUE(near(one.data(), want.data(), 300));
  std::vector<float> src = input(c.rank(), 5, 300);
  TensorArg direct{src.data(), other.data(), 300};
  c.wait(c.allReduce(&direct, 1, ReduceOp::Avg));
  want = reduced(5, 300, ReduceOp::Avg, c.size());
  EXPECT_TRUE(near(other.data(), want.data(), 300));
}

TEST(MpiReduceScatter, BucketOfDifferentSizes) {
  comm::MpiCommunicator &c = world();
  const int S = c.size();
  const std::vector<int64_t> sizes = {int64_t(S), 7 * int64_t(S), 1000 * int64_t(S)};
  int64_t total = 0;
  for (int64_t n : sizes)
    total += n;
  reserve(2 * total);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
    std::vector<std::vector<float>> in, out;
    std::vector<TensorArg> ts;
    for (size_t j = 0; j < sizes.size(); ++j) {
      in.push_back(input(c.rank(), int(j), sizes[j]));
      out.emplace_back(static_cast<size_t>(sizes[j] / S), -99.0f);
    }
    for (size_t j = 0; j < sizes.size(); ++j)
      ts.push_back({in[j].data(), out[j].data(), sizes[j]});
    c.wait(c.reduceScatter(ts, op, "gradient bucket"));
    for (size_t j = 0; j < sizes.size(); ++j) {
      std::vector<double> want = reduced(int(j), sizes[j], op, S);
      int64_t chunk = sizes[j] / S;
      EXPECT_TRUE(near(out[j].data(), want.data() + c.rank() * chunk, chunk))
          << comm::reduceOpName(op) << " tensor " << j;
    }
  }
}

TEST(MpiReduceScatter, SingleTensorDirectAndInPlace) {
  comm::MpiCommunicator &c = world();
  const int S = c.size();
  const int64_t n = 12 * S, chunk = 12;
  reserve(1 << 16); // all-reduce and reduce-scatter always stage (rings)
  std::vector<double> want = reduced(3, n, ReduceOp::Avg, S);
  std::vector<float> in = input(c.rank(), 3, n), out(static_cast<size_t>(chunk));
  TensorArg direct{in.data(), out.data(), n};
  c.wait(c.reduceScatter(&direct, 1, ReduceOp::Avg));
  EXPECT_TRUE(near(out.data(), want.data() + c.rank() * chunk, chunk));
  // The output is this rank's chunk of the input itself.
  std::vector<float> buf = input(c.rank(), 3, n);
  TensorArg inPlace{buf.data(), buf.data() + c.rank() * chunk, n};
  c.wait(c.reduceScatter(&inPlace, 1, ReduceOp::Avg));
  EXPECT_TRUE(near(buf.data() + c.rank() * chunk, want.data() + c.rank() * chunk, chunk));
}

// ZeRO's padding: tensors of n elements, n not a multiple of the ranks,
// split into chunks of ceil(n / S) whose tail is zero; the gather drops it
// again. Alone (staged) and in a bucket with a tensor that divides.
TEST(MpiReduceScatter, PaddedChunksAndGatherBack) {
  comm::MpiCommunicator &c = world();
  const int S = c.size();
  const int64_t n = 3 * S + 1, m = 2 * S, cn = (n + S - 1) / S, cm = 2;
  reserve(2 * 4 * (cn + cm) * S);
  std::vector<double> want = reduced(11, n, ReduceOp::Sum, S);
  std::vector<double> wantM = reduced(12, m, ReduceOp::Sum, S);
  std::vector<float> in = input(c.rank(), 11, n), inM = input(c.rank(), 12, m);
  std::vector<float> out(static_cast<size_t>(cn), -1.0f), outM(static_cast<size_t>(cm), -1.0f);
  TensorArg alone{in.data(), out.data(), n};
  c.wait(c.reduceScatter(&alone, 1, ReduceOp::Sum));
  auto expectChunk = [&](const std::vector<float> &got, const std::vector<double> &full,
                         int64_t len, int64_t chunk) {
    for (int64_t i = 0; i < chunk; ++i) {
      int64_t g = c.rank() * chunk + i;
      double w = g < len ? full[static_cast<size_t>(g)] : 0.0; // padding is zero
      EXPECT_NEAR(got[static_cast<size_t>(i)], w, 1e-5) << "rank " << c.rank() << " element " << i;
    }
  };
  expectChunk(out, want, n, cn);
  std::fill(out.begin(), out.end(), -1.0f);
  TensorArg bucket[2] = {{in.data(), out.data(), n}, {inM.data(), outM.data(), m}};
  c.wait(c.reduceScatter(bucket, 2, ReduceOp::Sum));
  expectChunk(out, want, n, cn);
  expectChunk(outM, wantM, m, cm);
  // Gathering the chunks back gives the n reduced elements, no padding.
  std::vector<float> back(static_cast<size_t>(n), -1.0f);
  TensorArg gather{out.data(), back.data(), cn, n};
  c.wait(c.allGather(&gather, 1));
  EXPECT_TRUE(near(back.data(), want.data(), n));
  EXPECT_EQ(c.counters().kind[int(comm::Kind::AllGather)].elements, n);
}

TEST(MpiAllGather, BucketOfDifferentSizes) {
  comm::MpiCommunicator &c = world();
  const int S = c.size();
  const std::vector<int64_t> sizes = {1, 5, 300};
  reserve(2 * 306 * S);
  std::vector<std::vector<float>> in, out;
  std::vector<TensorArg> ts;
  for (size_t j = 0; j < sizes.size(); ++j) {
    in.push_back(input(c.rank(), int(j), sizes[j]));
    out.emplace_back(static_cast<size_t>(sizes[j] * S), -99.0f);
  }
  for (size_t j = 0; j < sizes.size(); ++j)
    ts.push_back({in[j].data(), out[j].data(), sizes[j]});
  c.wait(c.allGather(ts, "parameter bucket"));
  for (size_t j = 0; j < sizes.size(); ++j)
    for (int q = 0; q < S; ++q) {
      std::vector<float> want = input(q, int(j), sizes[j]);
      EXPECT_EQ(std::vector<float>(out[j].begin() + q * sizes[j],
                                   out[j].begin() + (q + 1) * sizes[j]),
                want)
          << "tensor " << j << " from rank " << q;
    }
}

TEST(MpiAllGather, SingleTensorDirectAndInPlace) {
  comm::MpiCommunicator &c = world();
  const int S = c.size();
  const int64_t n = 9;
  reserve(1 << 16); // all-reduce and reduce-scatter always stage (rings)
  std::vector<float> want;
  for (int q = 0; q < S; ++q) {
    std::vector<float> v = input(q, 7, n);
    want.insert(want.end(), v.begin(), v.end());
  }
  std::vector<float> in = input(c.rank(), 7, n), out(static_cast<size_t>(n * S));
  TensorArg direct{in.data(), out.data(), n};
  c.wait(c.allGather(&direct, 1));
  EXPECT_EQ(out, want);
  std::vector<float> buf(static_cast<size_t>(n * S), -1.0f);
  std::copy(in.begin(), in.end(), buf.begin() + c.rank() * n);
  TensorArg inPlace{buf.data() + c.rank() * n, buf.data(), n};
  c.wait(c.allGather(&inPlace, 1));
  EXPECT_EQ(buf, want);
}

/// 16-bit patterns of rank q's tensor j (as bf16 copies would be).
std::vector<uint16_t> halves(int q, int j, int64_t n) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = uint16_t(0x3f80 + 97 * q + 13 * j + i);
  return v;
}

TEST(MpiAllGather, SixteenBitTensorsMixedAndPadded) {
  // ZeRO-3 with mixed precision gathers bf16 copies of odd-sized chunks,
  // alone (direct) and in buckets with float tensors, padding dropped.
  comm::MpiCommunicator &c = world();
  const int S = c.size();
  reserve(1 << 16);
  const int64_t n = 7; // odd: 16-bit elements are not whole floats
  std::vector<uint16_t> in = halves(c.rank(), 0, n), out(static_cast<size_t>(n * S), 0xffff);
  TensorArg direct{reinterpret_cast<const float *>(in.data()),
                   reinterpret_cast<float *>(out.data()), n, 0, comm::Elem::BF16};
  c.wait(c.allGather(&direct, 1));
  for (int q = 0; q < S; ++q)
    EXPECT_EQ(std::vector<uint16_t>(out.begin() + q * n, out.begin() + (q + 1) * n),
              halves(q, 0, n))
        << "direct, from rank " << q;
  // A bucket: a padded 16-bit tensor (n*S - S + 1 elements kept), a float one,
  // another 16-bit one.
  std::vector<uint16_t> a = halves(c.rank(), 1, n), b = halves(c.rank(), 2, 3);
  std::vector<float> f = input(c.rank(), 3, 5);
  int64_t aKeep = n * S - S + 1;
  std::vector<uint16_t> aOut(static_cast<size_t>(aKeep), 0xffff), bOut(static_cast<size_t>(3 * S));
  std::vector<float> fOut(static_cast<size_t>(5 * S));
  c.wait(c.allGather({{reinterpret_cast<const float *>(a.data()),
                       reinterpret_cast<float *>(aOut.data()), n, aKeep, comm::Elem::BF16},
                      {f.data(), fOut.data(), 5},
                      {reinterpret_cast<const float *>(b.data()),
                       reinterpret_cast<float *>(bOut.data()), 3, 0, comm::Elem::F16}}));
  for (int q = 0; q < S; ++q) {
    std::vector<uint16_t> wantA = halves(q, 1, n);
    for (int64_t i = 0; i < n && q * n + i < aKeep; ++i)
      EXPECT_EQ(aOut[size_t(q * n + i)], wantA[size_t(i)]) << "rank " << q << " element " << i;
    EXPECT_EQ(std::vector<uint16_t>(bOut.begin() + q * 3, bOut.begin() + (q + 1) * 3),
              halves(q, 2, 3));
    EXPECT_EQ(std::vector<float>(fOut.begin() + q * 5, fOut.begin() + (q + 1) * 5),
              input(q, 3, 5));
  }
  // A reduction adds one element type.
  std::vector<uint16_t> r(4);
  std::vector<float> r32(4);
  std::vector<TensorArg> mixed = {{reinterpret_cast<const float *>(r.data()),
                                   reinterpret_cast<float *>(r.data()), 4, 0, comm::Elem::BF16},
                                  {r32.data(), r32.data(), 4}};
  EXPECT_THROW(c.allReduce(mixed, ReduceOp::Sum), comm::CommError);
}

TEST(MpiAllToAll, SingleTensorDirectInPlaceAndBucket) {
  // The 1-bit optimizers' exchange: chunk r of every rank's tensor goes to
  // rank r, in rank order. Alone (MPI_Ialltoall on the tensors), in place,
  // and as a bucket of a float and a 16-bit tensor (packed in the staging).
  comm::MpiCommunicator &c = world();
  const int S = c.size(), me = c.rank();
  reserve(1 << 16);
  const int64_t chunk = 5, n = chunk * S;
  auto wantFrom = [&](int j, auto in) {
    // This rank's result: chunk `me` of every rank q's input, in rank order.
    decltype(in(0)) want;
    for (int q = 0; q < S; ++q) {
      auto v = in(q);
      want.insert(want.end(), v.begin() + me * chunk, v.begin() + (me + 1) * chunk);
    }
    (void)j;
    return want;
  };
  auto floats = [&](int q) { return input(q, 11, n); };
  std::vector<float> in = floats(me), out(static_cast<size_t>(n), -1.0f);
  TensorArg direct{in.data(), out.data(), n};
  c.wait(c.allToAll(&direct, 1));
  EXPECT_EQ(out, wantFrom(0, floats));
  std::vector<float> buf = floats(me);
  TensorArg inPlace{buf.data(), buf.data(), n};
  c.wait(c.allToAll(&inPlace, 1));
  EXPECT_EQ(buf, wantFrom(0, floats));
  auto sixteen = [&](int q) { return halves(q, 4, 3 * S); };
  std::vector<uint16_t> h = sixteen(me), hOut(static_cast<size_t>(3 * S), 0xffff);
  std::vector<float> out2(static_cast<size_t>(n), -1.0f);
  std::vector<TensorArg> bucket = {{in.data(), out2.data(), n},
                                   {reinterpret_cast<const float *>(h.data()),
                                    reinterpret_cast<float *>(hOut.data()), 3 * S, 0,
                                    comm::Elem::BF16}};
  c.wait(c.allToAll(bucket.data(), bucket.size()));
  EXPECT_EQ(out2, wantFrom(0, floats));
  std::vector<uint16_t> wantH;
  for (int q = 0; q < S; ++q) {
    std::vector<uint16_t> v = sixteen(q);
    wantH.insert(wantH.end(), v.begin() + me * 3, v.begin() + (me + 1) * 3);
  }
  EXPECT_EQ(hOut, wantH);
  // Counted by their inputs; a size that is not S equal chunks is an error.
  EXPECT_EQ(c.counters()[Kind::AllToAll].calls, 3);
  EXPECT_EQ(c.counters()[Kind::AllToAll].elements, n + n + n + 3 * S);
  if (S > 1) {
    std::vector<float> odd(static_cast<size_t>(S + 1));
    TensorArg bad{odd.data(), odd.data(), S + 1};
    EXPECT_THROW(c.allToAll(&bad, 1), comm::CommError);
  }
}

TEST(MpiAllToAll, RawBytesMoveAloneAndInBucketsButAreNotAdded) {
  // The 1-bit optimizers' packed signs (U8): an odd number of bytes per
  // chunk, alone and in a bucket with a float tensor (packed in bytes), and
  // gathered; a reduction refuses them.
  comm::MpiCommunicator &c = world();
  const int S = c.size(), me = c.rank();
  reserve(1 << 16);
  const int64_t chunk = 3, n = chunk * S;
  auto bytesOf = [](int q, int j, int64_t count) {
    std::vector<uint8_t> v(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i)
      v[static_cast<size_t>(i)] = uint8_t(31 * q + 7 * j + i);
    return v;
  };
  std::vector<uint8_t> in = bytesOf(me, 0, n), out(static_cast<size_t>(n), 0xff);
  auto arg = [](const std::vector<uint8_t> &a, std::vector<uint8_t> &b, int64_t count) {
    return TensorArg{reinterpret_cast<const float *>(a.data()), reinterpret_cast<float *>(b.data()),
                     count, 0, comm::Elem::U8};
  };
  TensorArg direct = arg(in, out, n);
  c.wait(c.allToAll(&direct, 1));
  std::vector<uint8_t> want;
  for (int q = 0; q < S; ++q) {
    std::vector<uint8_t> v = bytesOf(q, 0, n);
    want.insert(want.end(), v.begin() + me * chunk, v.begin() + (me + 1) * chunk);
  }
  EXPECT_EQ(out, want);
  std::vector<float> f = input(me, 12, 2 * S), fOut(static_cast<size_t>(2 * S));
  std::vector<uint8_t> out2(static_cast<size_t>(n), 0xff);
  std::vector<TensorArg> bucket = {arg(in, out2, n), {f.data(), fOut.data(), 2 * S}};
  c.wait(c.allToAll(bucket.data(), bucket.size()));
  EXPECT_EQ(out2, want);
  for (int q = 0; q < S; ++q) {
    std::vector<float> v = input(q, 12, 2 * S);
    EXPECT_EQ(std::vector<float>(fOut.begin() + 2 * q, fOut.begin() + 2 * q + 2),
              std::vector<float>(v.begin() + 2 * me, v.begin() + 2 * me + 2));
  }
  // all_gather of 5 bytes a rank: direct.
  std::vector<uint8_t> mine = bytesOf(me, 1, 5), all(static_cast<size_t>(5 * S), 0xff);
  TensorArg g = arg(mine, all, 5);
  g.outN = 0;
  c.wait(c.allGather(&g, 1));
  for (int q = 0; q < S; ++q)
    EXPECT_EQ(std::vector<uint8_t>(all.begin() + 5 * q, all.begin() + 5 * q + 5),
              bytesOf(q, 1, 5));
  std::vector<uint8_t> r(4);
  TensorArg bad = arg(r, r, 4);
  EXPECT_NE(DSRT_ERROR_OF(comm::CommError, c.allReduce(&bad, 1, ReduceOp::Sum))
                .find("holds raw bytes (U8), which a reduction cannot add"),
            std::string::npos);
}

TEST(MpiAllReduce, SixteenBitSumsInFloatRoundedPerHop) {
  // communication_data_type bf16 / fp16: the ring adds in float and
  // rounds every partial sum to the type. Small integers are exact in
  // both, so the sums are too; avg divides the rounded sum.
  comm::MpiCommunicator &c = world();
  const int S = c.size();
  reserve(1 << 16);
  for (comm::Elem type : {comm::Elem::BF16, comm::Elem::F16}) {
    auto bits = [&](float v) {
      return type == comm::Elem::BF16 ? cpu::detail::bf16Bits(v) : cpu::detail::f16Bits(v);
    };
    auto value = [&](uint16_t h) {
      return type == comm::Elem::BF16 ? cpu::detail::bf16Value(h) : cpu::detail::f16Value(h);
    };
    const int64_t n = 11; // not a multiple of S: padded blocks
    std::vector<uint16_t> a(n), out(n), rs(static_cast<size_t>(comm::chunkOf(n, S)));
    for (int64_t i = 0; i < n; ++i)
      a[size_t(i)] = bits(float(c.rank() + 1) * float(i - 5));
    TensorArg t{reinterpret_cast<const float *>(a.data()), reinterpret_cast<float *>(out.data()),
                n, 0, type};
    c.wait(c.allReduce(&t, 1, ReduceOp::Sum));
    float ranks = float(S * (S + 1) / 2);
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(value(out[size_t(i)]), ranks * float(i - 5)) << "element " << i;
    c.wait(c.allReduce(&t, 1, ReduceOp::Max));
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(value(out[size_t(i)]), float(i - 5) * (i >= 5 ? float(S) : 1.0f));
    TensorArg scatter{reinterpret_cast<const float *>(a.data()),
                      reinterpret_cast<float *>(rs.data()), n, 0, type};
    c.wait(c.reduceScatter(&scatter, 1, ReduceOp::Avg));
    int64_t chunk = comm::chunkOf(n, S);
    for (int64_t i = 0; i < chunk && c.rank() * chunk + i < n; ++i) {
      float want = ranks * float(c.rank() * chunk + i - 5) / float(S);
      EXPECT_EQ(value(rs[size_t(i)]), value(bits(want))) << "chunk element " << i;
    }
  }
}

TEST(MpiCommunicator, SeveralPendingWithStagingAndProgress) {
  comm::MpiCommunicator &c = world();
  const int S = c.size();
  // all_reduce 10 + 20 (ring: S + 1 blocks of ceil(30 / S)), reduce_scatter
  // 2S + 4S (S + 1 blocks of 2 + 4), all_gather (3 + 1) x S: pending
  // together they need the sum of their staging.
  reserve((S + 1) * ((30 + S - 1) / S) + (S + 1) * 6 + 4 * S, 3);
  std::vector<float> a = input(c.rank(), 0, 10), b = input(c.rank(), 1, 20);
  std::vector<float> p = input(c.rank(), 2, 2 * S), q = input(c.rank(), 3, 4 * S);
  std::vector<float> u = input(c.rank(), 4, 3), v = input(c.rank(), 5, 1);
  std::vector<float> pc(2), qc(4), uo(static_cast<size_t>(3 * S)), vo(static_cast<size_t>(S));
  comm::Handle h1 = c.allReduce({{a.data(), a.data(), 10}, {b.data(), b.data(), 20}},
                                ReduceOp::Sum);
  comm::Handle h2 = c.reduceScatter({{p.data(), pc.data(), 2 * S}, {q.data(), qc.data(), 4 * S}},
                                    ReduceOp::Sum);
  comm::Handle h3 = c.allGather({{u.data(), uo.data(), 3}, {v.data(), vo.data(), 1}});
  EXPECT_EQ(c.pending(), 3);
  for (int k = 0; k < 10; ++k)
    c.progress();
  c.wait(h3);
  c.wait(h1);
  c.wait(h2);
  EXPECT_EQ(c.pending(), 0);
  std::vector<double> want = reduced(0, 10, ReduceOp::Sum, S);
  EXPECT_TRUE(near(a.data(), want.data(), 10));
  want = reduced(1, 20, ReduceOp::Sum, S);
  EXPECT_TRUE(near(b.data(), want.data(), 20));
  want = reduced(2, 2 * S, ReduceOp::Sum, S);
  EXPECT_TRUE(near(pc.data(), want.data() + 2 * c.rank(), 2));
  want = reduced(3, 4 * S, ReduceOp::Sum, S);
  EXPECT_TRUE(near(qc.data(), want.data() + 4 * c.rank(), 4));
  for (int r = 0; r < S; ++r) {
    EXPECT_EQ(std::vector<float>(uo.begin() + 3 * r, uo.begin() + 3 * r + 3), input(r, 4, 3));
    EXPECT_EQ(vo[static_cast<size_t>(r)], input(r, 5, 1)[0]);
  }
}

TEST(MpiCommunicator, CountersInZeroPaperUnits) {
  comm::MpiCommunicator &c = world();
  const int S = c.size();
  reserve(2 * 64 * S);
  std::vector<float> a(16 * S), b(8 * S), small(8), big(8 * S);
  c.wait(c.allReduce({{a.data(), a.data(), 16}, {b.data(), b.data(), 8}}, ReduceOp::Sum));
  c.wait(c.reduceScatter({{a.data(), small.data(), 8 * S}}, ReduceOp::Avg));
  c.wait(c.reduceScatter({{a.data(), small.data(), 4 * S}, {b.data(), small.data() + 4, 4 * S}},
                         ReduceOp::Sum));
  c.wait(c.allGather({{small.data(), big.data(), 8}}));
  // Neither the metrics nor gathering outside the step count.
  c.blockingAllReduceScalar(1.0);
  c.setCounting(false);
  c.wait(c.allGather({{small.data(), big.data(), 8}}));
  c.setCounting(true);
  const comm::Counters &n = c.counters();
  EXPECT_EQ(n[Kind::AllReduce].calls, 1);
  EXPECT_EQ(n[Kind::AllReduce].elements, 2 * 24);
  EXPECT_EQ(n[Kind::ReduceScatter].calls, 2);
  EXPECT_EQ(n[Kind::ReduceScatter].elements, 16 * S);
  EXPECT_EQ(n[Kind::AllGather].calls, 1);
  EXPECT_EQ(n[Kind::AllGather].elements, 8 * S);
  EXPECT_EQ(n.calls(), 4);
  EXPECT_EQ(n.elements(), 48 + 24 * S);
}

TEST(MpiCommunicator, BlockingScalar) {
  comm::MpiCommunicator &c = world();
  const int S = c.size();
  double r = c.rank();
  EXPECT_DOUBLE_EQ(c.blockingAllReduceScalar(r, ReduceOp::Sum), S * (S - 1) / 2.0);
  EXPECT_DOUBLE_EQ(c.blockingAllReduceScalar(r, ReduceOp::Avg), (S - 1) / 2.0);
  EXPECT_DOUBLE_EQ(c.blockingAllReduceScalar(r, ReduceOp::Max), S - 1);
  EXPECT_DOUBLE_EQ(c.blockingAllReduceScalar(r, ReduceOp::Min), 0);
}

/// Texts of different lengths (one empty, one with a NUL byte) come back
/// whole and in rank order on every rank (a checkpoint's index entries).
TEST(MpiCommunicator, BlockingAllGatherText) {
  comm::MpiCommunicator &c = world();
  auto textOf = [](int r) {
    return r == 1 ? std::string() : std::string(size_t(r) * 1000 + 3, char('a' + r)) +
                                        std::string(1, '\0') + "end";
  };
  std::vector<std::string> all = c.blockingAllGatherText(textOf(c.rank()));
  ASSERT_EQ(all.size(), size_t(c.size()));
  for (int r = 0; r < c.size(); ++r)
    EXPECT_EQ(all[size_t(r)], textOf(r)) << "rank " << r;
  comm::SelfCommunicator self;
  EXPECT_EQ(self.blockingAllGatherText("x"), std::vector<std::string>{"x"});
}

TEST(MpiCommunicator, StagingBeyondTheReservationIsAnError) {
  comm::MpiCommunicator &c = world();
  reserve(10, 1);
  std::vector<float> a(8), b(8);
  // A bucket of 2 x 8 on S ranks needs S + 1 ring blocks of ceil(16 / S).
  const int S = c.size();
  const int64_t need = (S + 1) * ((16 + S - 1) / S);
  std::vector<TensorArg> both = {{a.data(), a.data(), 8}, {b.data(), b.data(), 8}};
  std::vector<TensorArg> second = {{b.data(), b.data(), 8}};
  std::string m = DSRT_ERROR_OF(
      comm::CommError, c.allReduce(both, ReduceOp::Sum, "instruction 3 of the epilogue"));
  EXPECT_NE(m.find("rank " + std::to_string(c.rank()) +
                   ": all_reduce (instruction 3 of the epilogue): needs " +
                   std::to_string(need) + " staging elements"),
            std::string::npos)
      << m;
  EXPECT_EQ(c.pending(), 0);
  // The reservation's pending limit (a tensor of 2 elements fits in 10).
  comm::Handle h = c.allReduce({{a.data(), a.data(), 2}}, ReduceOp::Sum);
  EXPECT_NE(DSRT_ERROR_OF(comm::CommError, c.allReduce(second, ReduceOp::Sum))
                .find("more than 1 collectives pending"),
            std::string::npos);
  c.wait(h);
}

TEST(MpiCommunicator, TimeoutNamesRankOperationAndInstruction) {
  // Rank 0 starts an all_reduce the others do not join (yet): its wait
  // throws after the timeout. Then the others join, so the collective
  // completes and nothing is left pending.
  comm::MpiCommunicator &c = world();
  comm::MpiCommunicator late(/*timeoutSeconds=*/1.0);
  late.reserve({1 << 10, 4, 8}); // the all-reduce ring's blocks
  std::vector<float> a(8, 1.0f);
  if (c.rank() == 0) {
    comm::Handle h = late.allReduce({{a.data(), a.data(), 8}}, ReduceOp::Sum,
                                    "instruction 57 of the epilogue");
    auto t0 = std::chrono::steady_clock::now();
    std::string m = DSRT_ERROR_OF(comm::CommError, late.wait(h));
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(m.substr(0, m.find(" did not")),
              "rank 0: all_reduce of 8 elements (instruction 57 of the epilogue)");
    EXPECT_NE(m.find("did not complete in 1"), std::string::npos) << m;
    EXPECT_NE(m.find("a rank died or the ranks issue different collectives"), std::string::npos);
    // The others never timed out, so none answers rank 0's question of who
    // is there: all are named as not having arrived (after a 2 s window).
    std::string others;
    for (int r = 1; r < c.size(); ++r)
      others += (r > 1 ? ", " : "") + std::to_string(r);
    EXPECT_NE(m.find(std::string(c.size() > 2 ? "; ranks " : "; rank ") + others +
                     " did not arrive (no answer within 2 s: stalled, frozen or dead)"),
              std::string::npos)
        << m;
    EXPECT_GE(waited, 3.0);
    EXPECT_LT(waited, 5.0);
    c.barrier();
    late.setTimeoutSeconds(30);
    late.wait(h);
  } else {
    c.barrier();
    late.setTimeoutSeconds(30);
    late.wait(late.allReduce({{a.data(), a.data(), 8}}, ReduceOp::Sum));
  }
  EXPECT_EQ(a[0], float(c.size()));
  EXPECT_EQ(late.pending(), 0);
}

/// A ZeRO-2-like plan on dp ranks: parameter w (full shape [F], sharded)
/// with a sharded momentum; the micro-batch all-gathers w (loss = sum of
/// squares of the whole w) while it accumulates the input x into the
/// gradient g; the epilogue reduce_scatters g (avg), clips with the global
/// sum of squares and updates this rank's shard with SGD + momentum.
PlanBuilder zeroPlan(uint32_t dp, int64_t F, int64_t micro) {
  const int64_t chunk = (F + dp - 1) / dp, P = chunk * dp;
  PlanBuilder p(dp, micro, 1);
  uint32_t w = p.shard("w", plan::PARAM, {F}, dp);
  uint32_t m = p.shard("w.momentum", plan::OPT_STATE, {F}, dp);
  uint32_t x = p.buffer("x", plan::F32, {1, P}, plan::INPUT);
  uint32_t g = p.f32({1, P}), gs = p.f32({chunk}), full = p.f32({P});
  uint32_t sq = p.f32({}), sqg = p.f32({});
  std::vector<float> w0;
  for (int64_t i = 0; i < F; ++i)
    w0.push_back(0.5f - 0.25f * float(i % 7));
  p.weight("w", {F}, w0);
  p.instr(Prologue, "fill", {}, {p.kLr}, {}, {0.1});
  p.instr(Prologue, "fill", {}, {g}, {}, {0.0});
  p.instr(MicroBatch, "dist.all_gather", {w}, {full}, {dp, 0});
  p.instr(MicroBatch, "accumulate", {x}, {g});
  p.instr(MicroBatch, "dist.wait", {}, {}, {0});
  p.instr(MicroBatch, "train.sum_sq", {full}, {p.kLoss});
  p.instr(Epilogue, "dist.reduce_scatter", {g}, {gs}, {dp, 1, 1});
  p.instr(Epilogue, "dist.wait", {}, {}, {1});
  p.instr(Epilogue, "train.sum_sq", {gs}, {sq});
  p.instr(Epilogue, "dist.all_reduce", {sq}, {sqg}, {dp, 0, 2});
  p.instr(Epilogue, "dist.wait", {}, {}, {2});
  p.instr(Epilogue, "train.clip_grad_norm", {gs, sqg}, {gs, p.kNorm}, {}, {1.0});
  p.instr(Epilogue, "train.sgd", {w, gs, p.kLr, m}, {w, m}, {0}, {0.9, 0.0, 0.0});
  return p;
}

/// Global micro-batch `global`'s input: zero on the padding.
float xValue(int64_t global, int64_t i, int64_t F) {
  return i < F ? float(std::sin(0.37 * double(global) + 0.11 * double(i))) : 0.0f;
}

TEST(MpiExecutor, ZeroPlanMatchesFloat64Reference) {
  comm::MpiCommunicator &c = world();
  const int S = c.size();
  const int64_t F = 11, micro = 2, steps = 3;
  const int64_t chunk = (F + S - 1) / S, P = chunk * S;
  TempDir local;
  // Every rank writes its own copy of the same plan (no shared file system
  // is assumed).
  PlanBuilder p = zeroPlan(uint32_t(S), F, micro);
  p.write(local.path());
  Executor exec(local.path(), &c);
  exec.initialize(local.path() + "/weights.safetensors", 0);
  EXPECT_EQ(exec.dp(), S);
  EXPECT_EQ(exec.rank(), c.rank());

  // The reference over all ranks, in double.
  std::vector<double> w(static_cast<size_t>(P), 0.0), mom(static_cast<size_t>(P), 0.0);
  for (int64_t i = 0; i < F; ++i)
    w[static_cast<size_t>(i)] = 0.5f - 0.25f * float(i % 7);
  std::vector<int64_t> seen;
  for (int64_t s = 1; s <= steps; ++s) {
    exec.step(s, [&](int64_t global) {
      seen.push_back(global);
      float *in = exec.inputs()[0]->f32();
      for (int64_t i = 0; i < P; ++i)
        in[i] = xValue(global, i, F);
    });
    std::vector<double> g(static_cast<size_t>(P), 0.0);
    for (int64_t k = 0; k < micro; ++k)
      for (int r = 0; r < S; ++r)
        for (int64_t i = 0; i < P; ++i)
          g[static_cast<size_t>(i)] += xValue(((s - 1) * micro + k) * S + r, i, F) / S;
    double norm = 0;
    for (double v : g)
      norm += v * v;
    norm = std::sqrt(norm);
    double coef = norm > 1.0 ? 1.0 / (norm + 1e-6) : 1.0;
    double lossWant = 0;
    for (double v : w)
      lossWant += v * v; // the loss sees the weights before the update
    for (int64_t i = 0; i < P; ++i) {
      mom[static_cast<size_t>(i)] = s == 1 ? g[static_cast<size_t>(i)] * coef : 0.9 * mom[static_cast<size_t>(i)] + g[static_cast<size_t>(i)] * coef;
      w[static_cast<size_t>(i)] -= 0.1 * mom[static_cast<size_t>(i)];
    }
    EXPECT_NEAR(exec.gradNorm(), norm, 1e-5 * norm) << "step " << s;
    EXPECT_NEAR(exec.globalLoss(), lossWant, 1e-5 * lossWant) << "step " << s;
    const comm::Counters &n = exec.commCounters();
    EXPECT_EQ(n.summary(), "all_reduce 1 call 2 elements, reduce_scatter 1 call " +
                               std::to_string(P) + " elements, all_gather " +
                               std::to_string(micro) + " calls " + std::to_string(micro * P) +
                               " elements");
  }
  // Rank r ran global micro-batches ((s-1) * micro + k) * S + r.
  std::vector<int64_t> want;
  for (int64_t s = 1; s <= steps; ++s)
    for (int64_t k = 0; k < micro; ++k)
      want.push_back(((s - 1) * micro + k) * S + c.rank());
  EXPECT_EQ(seen, want);
  // This rank's shard, then the gathered whole without the padding.
  const Tensor *shard = exec.weights()[0];
  for (int64_t i = 0; i < chunk; ++i)
    EXPECT_NEAR(shard->f32()[i], w[static_cast<size_t>(c.rank() * chunk + i)], 1e-5) << i;
  // Rank 0 assembles the sharded weight; the others only send their chunk.
  std::vector<WholeTensor> whole = exec.gatherWeights();
  if (c.rank() != 0) {
    EXPECT_TRUE(whole.empty());
    EXPECT_EQ(exec.commCounters()[Kind::AllGather].calls, micro);
    return;
  }
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].name, "w");
  EXPECT_EQ(whole[0].shape, std::vector<int64_t>{F});
  for (int64_t i = 0; i < F; ++i)
    EXPECT_NEAR(whole[0].data[i], w[static_cast<size_t>(i)], 1e-5) << i;
  // Gathering the weights does not change the last step's counters.
  EXPECT_EQ(exec.commCounters()[Kind::AllGather].calls, micro);
}

TEST(MpiExecutor, StepsDoNotAllocate) {
  comm::MpiCommunicator &c = world();
  TempDir local;
  PlanBuilder p = zeroPlan(uint32_t(c.size()), 11, 2);
  p.write(local.path());
  Executor exec(local.path(), &c);
  exec.initialize(local.path() + "/weights.safetensors", 0);
  float *in = exec.inputs()[0]->f32();
  int64_t n = exec.inputs()[0]->numel;
  auto load = [&](int64_t global) {
    for (int64_t i = 0; i < n; ++i)
      in[i] = xValue(global, i, 11);
  };
  exec.step(1, load);
  long before = gAllocations.load();
  for (int64_t s = 2; s <= 4; ++s)
    exec.step(s, load);
  long during = gAllocations.load() - before;
  EXPECT_EQ(during, 0);
  // The counter works: gathering the weights (outside the steps) allocates
  // (rank 0 assembles them; the others only send).
  before = gAllocations.load();
  EXPECT_EQ(exec.gatherWeights().size(), c.rank() == 0 ? 1u : 0u);
  if (c.rank() == 0) {
    EXPECT_GT(gAllocations.load() - before, 0);
  }
}

//===----------------------------------------------------------------------===//
// Split communicators and point-to-point messages
//===----------------------------------------------------------------------===//

TEST(MpiSplit, GroupsOrderedByKeyNameWorldRanks) {
  comm::MpiCommunicator &c = world();
  const int S = c.size(), r = c.rank();
  // Like a pipeline of 2 stages: the pp group of consecutive ranks (color
  // r / 2, ordered by r % 2) and the dp group of every other rank.
  std::unique_ptr<comm::Communicator> pp = c.split(r / 2, r % 2);
  std::unique_ptr<comm::Communicator> dp = c.split(r % 2, -(r / 2)); // reversed order
  EXPECT_EQ(pp->size(), 2);
  EXPECT_EQ(pp->rank(), r % 2);
  EXPECT_EQ(pp->worldRankOf(0), r - r % 2);
  EXPECT_EQ(pp->worldRankOf(1), r - r % 2 + 1);
  EXPECT_EQ(dp->size(), S / 2);
  EXPECT_EQ(dp->rank(), S / 2 - 1 - r / 2);
  EXPECT_EQ(dp->worldRankOf(dp->rank()), r);
  EXPECT_STREQ(dp->backend(), "mpi");
  // Collectives run inside each group: the sum of the group's world ranks.
  dp->reserve({1 << 10, 2, 2});
  pp->reserve({1 << 10, 2, 2});
  std::vector<float> a = {float(r)}, b = {float(r)};
  comm::Handle ha = dp->allReduce({{a.data(), a.data(), 1}}, ReduceOp::Sum);
  comm::Handle hb = pp->allReduce({{b.data(), b.data(), 1}}, ReduceOp::Sum);
  pp->wait(hb);
  dp->wait(ha);
  float dpSum = 0;
  for (int q = r % 2; q < S; q += 2)
    dpSum += float(q);
  EXPECT_EQ(a[0], dpSum);
  EXPECT_EQ(b[0], float(2 * (r - r % 2) + 1));
  EXPECT_DOUBLE_EQ(pp->blockingAllReduceScalar(1.0, ReduceOp::Sum), 2.0);
  // Splitting one rank alone.
  std::unique_ptr<comm::Communicator> self = c.split(r, 0);
  EXPECT_EQ(self->size(), 1);
  EXPECT_EQ(self->worldRankOf(0), r);
}

TEST(MpiP2p, ManyMessagesOnOneTagArriveInOrder) {
  comm::MpiCommunicator &c = world();
  const int S = c.size(), r = c.rank();
  std::unique_ptr<comm::Communicator> pp = c.split(r / 2, r % 2);
  // Stage 0 sends K messages of float32 with tag 0 and K of int64 with tag
  // 1, interleaved, all in flight; stage 1 receives them, tag 1 first,
  // waiting in reverse order.
  const int K = 6;
  pp->reserve({0, 2 * K, 1});
  pp->resetCounters();
  std::vector<std::vector<float>> f(K, std::vector<float>(5));
  std::vector<std::vector<int64_t>> n(K, std::vector<int64_t>(3));
  std::vector<comm::Handle> hs;
  if (pp->rank() == 0) {
    for (int k = 0; k < K; ++k) {
      for (size_t i = 0; i < 5; ++i)
        f[k][i] = float(100 * r + 10 * k) + float(i);
      for (size_t i = 0; i < 3; ++i)
        n[k][i] = int64_t(1) << 40 | int64_t(k * 3 + int(i));
      hs.push_back(pp->send(f[k].data(), 5 * sizeof(float), 1, 0, "forward"));
      hs.push_back(pp->send(n[k].data(), 3 * sizeof(int64_t), 1, 1, "indices"));
    }
    EXPECT_EQ(pp->pending(), 2 * K);
    for (comm::Handle h : hs)
      pp->wait(h);
    EXPECT_EQ(pp->counters().p2p.calls, 2 * K);
    EXPECT_EQ(pp->counters().p2p.elements, K * (5 + 6));
    EXPECT_EQ(pp->counters().calls(), 0); // not collectives
    EXPECT_EQ(pp->counters().summary(),
              "p2p " + std::to_string(2 * K) + " calls " + std::to_string(K * 11) + " elements");
  } else {
    for (int k = 0; k < K; ++k)
      hs.push_back(pp->recv(n[k].data(), 3 * sizeof(int64_t), 0, 1, "indices"));
    for (int k = 0; k < K; ++k)
      hs.push_back(pp->recv(f[k].data(), 5 * sizeof(float), 0, 0, "forward"));
    for (int k = 0; k < 4; ++k)
      pp->progress();
    for (auto h = hs.rbegin(); h != hs.rend(); ++h)
      pp->wait(*h);
    int from = r - 1;
    for (int k = 0; k < K; ++k) {
      for (size_t i = 0; i < 5; ++i)
        EXPECT_EQ(f[k][i], float(100 * from + 10 * k) + float(i)) << "message " << k;
      for (size_t i = 0; i < 3; ++i)
        EXPECT_EQ(n[k][i], int64_t(1) << 40 | int64_t(k * 3 + int(i))) << "message " << k;
    }
    EXPECT_EQ(pp->counters().p2p.calls, 0); // receives are not counted
  }
  EXPECT_EQ(pp->pending(), 0);
  (void)S;
}

TEST(MpiP2p, RingOfNeighboursOnTheWorld) {
  comm::MpiCommunicator &c = world();
  const int S = c.size(), r = c.rank();
  c.reserve({0, 4, 1});
  std::vector<double> out = {double(r), -double(r)}, in(2, 0.0);
  comm::Handle hr = c.recv(in.data(), sizeof(double) * 2, (r + S - 1) % S, 7);
  comm::Handle hs = c.send(out.data(), sizeof(double) * 2, (r + 1) % S, 7);
  c.wait(hs);
  c.wait(hr);
  EXPECT_EQ(in[0], double((r + S - 1) % S));
  EXPECT_EQ(in[1], -double((r + S - 1) % S));
  // Misuse.
  EXPECT_EQ(DSRT_ERROR_OF(comm::CommError, c.send(out.data(), 8, S, 0, "instruction 3")),
            "rank " + std::to_string(r) + ": send to peer " + std::to_string(S) +
                " (instruction 3): the peer is not a rank of this group of " + std::to_string(S));
  EXPECT_NE(DSRT_ERROR_OF(comm::CommError, c.recv(in.data(), 8, 0, 40000))
                .find("tag 40000 outside [0, 32767]"),
            std::string::npos);
  comm::SelfCommunicator one;
  EXPECT_EQ(DSRT_ERROR_OF(comm::CommError, one.send(out.data(), 8, 0, 0)),
            "rank 0: the self communicator has no point-to-point messages (one rank)");
  EXPECT_EQ(one.pending(), 0);
}

TEST(MpiP2p, ReceivedSizeMustMatch) {
  comm::MpiCommunicator &c = world();
  const int r = c.rank();
  std::unique_ptr<comm::Communicator> pp = c.split(r / 2, r % 2);
  pp->reserve({0, 2, 1});
  std::vector<float> buf(8, 1.0f);
  const std::string partner = std::to_string(r % 2 ? r - 1 : r + 1);
  if (pp->rank() == 0) {
    pp->wait(pp->send(buf.data(), 4 * sizeof(float), 1, 2, "short"));
    pp->wait(pp->send(buf.data(), 8 * sizeof(float), 1, 2, "long"));
  } else {
    comm::Handle h = pp->recv(buf.data(), 6 * sizeof(float), 0, 2, "instruction 4 of the prologue");
    EXPECT_EQ(DSRT_ERROR_OF(comm::CommError, pp->wait(h)),
              "rank " + std::to_string(r) + ": recv of 24 bytes from rank " + partner +
                  " (tag 2, instruction 4 of the prologue): received 16 bytes: the sender's "
                  "message has another size (the stages' plans disagree)");
    h = pp->recv(buf.data(), 6 * sizeof(float), 0, 2, "instruction 5 of the prologue");
    EXPECT_NE(DSRT_ERROR_OF(comm::CommError, pp->wait(h)).find("received a longer message"),
              std::string::npos);
  }
  EXPECT_EQ(pp->pending(), 0);
}

TEST(MpiP2p, RecvTimeoutNamesThePeerAndTag) {
  // Stage 1 of each pair waits for a message stage 0 sends only after a
  // barrier: its wait times out, naming both world ranks, the tag and the
  // instruction; then the message comes and the same wait completes.
  comm::MpiCommunicator &c = world();
  const int r = c.rank();
  std::unique_ptr<comm::Communicator> pp = c.split(r / 2, r % 2);
  pp->setTimeoutSeconds(1.0);
  pp->reserve({0, 2, 1});
  std::vector<float> buf(8, float(r));
  if (pp->rank() == 1) {
    comm::Handle h = pp->recv(buf.data(), 32, 0, 9, "instruction 12 of the prologue");
    std::string m = DSRT_ERROR_OF(comm::CommError, pp->wait(h));
    EXPECT_EQ(m.substr(0, m.find(" did not")),
              "rank " + std::to_string(r) + ": recv of 32 bytes from rank " +
                  std::to_string(r - 1) + " (tag 9, instruction 12 of the prologue)");
    EXPECT_NE(m.find("did not complete in 1"), std::string::npos) << m;
    EXPECT_NE(m.find("a rank died or the ranks' sends and receives do not match"),
              std::string::npos)
        << m;
    c.barrier();
    pp->setTimeoutSeconds(30);
    pp->wait(h);
    EXPECT_EQ(buf[7], float(r - 1));
  } else {
    c.barrier();
    pp->wait(pp->send(buf.data(), 32, 1, 9));
  }
  EXPECT_EQ(pp->pending(), 0);
}

//===----------------------------------------------------------------------===//
// A two-stage pipeline plan
//===----------------------------------------------------------------------===//

/// Runs pipelinePlan(dp, M, F, P) on the world (P x dp ranks) for a few
/// steps against PipelineReference.
void runPipeline(int P, int dp) {
  comm::MpiCommunicator &c = world();
  const int r = c.rank();
  ASSERT_EQ(c.size(), P * dp);
  const int stage = r % P, index = r / P;
  const bool first = stage == 0, last = stage == P - 1;
  const int64_t M = 3, F = 5, steps = 3;
  TempDir local;
  PipelineStages st = pipelinePlan(uint32_t(dp), M, F, P);
  st.write(local.path(), M);
  Executor exec(local.path(), &c);
  exec.initialize(local.path() + "/weights.safetensors", 0);
  ASSERT_TRUE(exec.pipelined());
  EXPECT_EQ(exec.pp(), P);
  EXPECT_EQ(exec.stage(), stage);
  EXPECT_EQ(exec.rank(), index);
  EXPECT_EQ(exec.dp(), dp);
  EXPECT_EQ(exec.worldRank(), r);
  EXPECT_EQ(exec.worldSize(), P * dp);
  EXPECT_EQ(exec.microBatches(), M);
  EXPECT_EQ(exec.group(0).size(), dp);
  EXPECT_EQ(exec.group(1).size(), P);
  EXPECT_EQ(exec.hasLoss(), last);
  // Micro-batch 0's inputs: x on the first stage, t on the last.
  std::vector<std::string> inputs;
  for (const Tensor *t : exec.inputs())
    inputs.push_back(t->name);
  std::vector<std::string> wantInputs;
  if (first)
    wantInputs.push_back("x");
  if (last)
    wantInputs.push_back("t");
  EXPECT_EQ(inputs, wantInputs);

  PipelineReference ref(F, P);
  std::vector<int64_t> seen;
  std::vector<const Tensor *> into;
  auto load = [&](int64_t global, const std::vector<Tensor *> &ts) {
    seen.push_back(global);
    into.push_back(ts[0]);
    for (int64_t i = 0; i < F; ++i)
      ts[0]->f32()[i] = float(ts[0]->name == "x" ? pipeX(global, i) : pipeT(global, i));
  };
  for (int64_t s = 1; s <= steps; ++s) {
    if (s == steps)
      exec.recordTimeline(s);
    exec.step(s, load);
    ref.step(s, M, dp);
    EXPECT_NEAR(exec.globalLoss(), ref.loss, 1e-5 * ref.loss) << "step " << s;
    EXPECT_NEAR(exec.gradNorm(), ref.norm, 1e-5 * ref.norm) << "step " << s;
    EXPECT_EQ(exec.loss() != 0.0f, last);
    EXPECT_FLOAT_EQ(exec.lr(), 0.1f);
    // M messages each way; the dp average and the pp norm all-reduce.
    int sends = (first ? 0 : 1) + (last ? 0 : 1);
    EXPECT_EQ(exec.commCounters().summary(),
              "all_reduce 2 calls " + std::to_string(2 * F + 2) + " elements, p2p " +
                  std::to_string(sends * M) + " calls " + std::to_string(sends * M * F) +
                  " elements");
  }
  // Each load_batch m read global micro-batch ((s - 1) M + m) dp + index
  // into micro-batch m's own buffers.
  std::vector<int64_t> want;
  for (int64_t s = 1; s <= steps; ++s)
    for (int64_t m = 0; m < M; ++m)
      if (first || last)
        want.insert(want.end(), first && last ? 2 : 1, ((s - 1) * M + m) * dp + index);
  EXPECT_EQ(seen, want);
  if (first || last) {
    EXPECT_EQ(into[0], exec.inputs()[0]);
    EXPECT_NE(into[1], into[0]);
    EXPECT_EQ(into[M], into[0]);
  }

  // This stage's weight on every rank; every weight on rank 0.
  const Tensor *w = exec.weights()[0];
  EXPECT_EQ(w->name, "w" + std::to_string(stage));
  for (int64_t i = 0; i < F; ++i)
    EXPECT_NEAR(w->f32()[i], ref.w[size_t(stage)][size_t(i)], 1e-5) << i;
  std::vector<WholeTensor> whole = exec.gatherWeights();
  if (r == 0) {
    ASSERT_EQ(whole.size(), size_t(P + 1));
    EXPECT_EQ(whole[0].name, "w0");
    EXPECT_EQ(whole[1].name, "tied");
    EXPECT_EQ(std::vector<float>(whole[1].data, whole[1].data + 2), (std::vector<float>{3, 4}));
    for (int s = 1; s < P; ++s) {
      const WholeTensor &t = whole[size_t(s + 1)];
      EXPECT_EQ(t.name, "w" + std::to_string(s));
      EXPECT_EQ(t.shape, (std::vector<int64_t>{1, F}));
      for (int64_t i = 0; i < F; ++i)
        EXPECT_NEAR(t.data[i], ref.w[size_t(s)][size_t(i)], 1e-5) << t.name << " " << i;
    }
    for (int64_t i = 0; i < F; ++i)
      EXPECT_NEAR(whole[0].data[i], ref.w[0][size_t(i)], 1e-5) << i;
  } else {
    ASSERT_EQ(whole.size(), 2u);
    EXPECT_EQ(whole[0].name, "w" + std::to_string(stage));
  }
  // Gathering is not counted in the step's communication.
  EXPECT_EQ(exec.commCounters().p2p.calls, ((first ? 0 : 1) + (last ? 0 : 1)) * M);

  // The timeline has the micro-batch and phase of every instruction.
  std::string path = local.path() + "/timeline.csv";
  exec.writeTimeline(path);
  std::ifstream in(path);
  std::string header, line;
  std::getline(in, header);
  EXPECT_EQ(header, "rank,list,micro,index,op,start_us,end_us,mb,phase,planned_bytes,"
                    "arena_bytes,rss_bytes");
  int forward = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string col; std::getline(ss, col, ',');)
      cols.push_back(col);
    ASSERT_EQ(cols.size(), 12u) << line;
    // The plan's bytes in use on this stage never exceed its arena.
    EXPECT_LE(std::stoull(cols[9]), std::stoull(cols[10])) << line;
    EXPECT_EQ(cols[0], std::to_string(r));
    if (cols[4] == "nn.mul" && cols[8] == "1") {
      EXPECT_EQ(cols[7], std::to_string(last ? forward / 2 : forward)) << line; // 2 on the last
      ++forward;
    }
  }
  EXPECT_EQ(forward, last ? 2 * M : M);
}

TEST(MpiPipeline, TwoStagesMatchFloat64Reference) { runPipeline(2, world().size() / 2); }

TEST(MpiPipeline, OneStagePerRankMatchesFloat64Reference) { runPipeline(world().size(), 1); }

TEST(MpiPipeline, StepsDoNotAllocate) {
  comm::MpiCommunicator &c = world();
  const int S = c.size();
  TempDir local;
  PipelineStages st = pipelinePlan(uint32_t(S / 2), 2, 7);
  st.write(local.path(), 2);
  Executor exec(local.path(), &c);
  exec.initialize(local.path() + "/weights.safetensors", 0);
  auto load = [&](int64_t global, const std::vector<Tensor *> &ts) {
    for (int64_t i = 0; i < ts[0]->numel; ++i)
      ts[0]->f32()[i] = float(pipeX(global, i));
  };
  exec.step(1, load);
  long before = gAllocations.load();
  for (int64_t s = 2; s <= 4; ++s)
    exec.step(s, load);
  EXPECT_EQ(gAllocations.load() - before, 0);
}

TEST(MpiPipeline, LoadTimeErrors) {
  comm::MpiCommunicator &c = world();
  const int S = c.size(), r = c.rank();
  {
    // pp 2 x dp S is twice the world: every rank says so, before splitting.
    TempDir local;
    PipelineStages st = pipelinePlan(uint32_t(S), 2, 3);
    st.write(local.path(), 2);
    std::string m = DSRT_ERROR_OF(PlanError, Executor(local.path(), &c));
    EXPECT_NE(m.find("plan.pb: plan compiled for pp=2 x dp=" + std::to_string(S) + " = " +
                     std::to_string(2 * S) + " ranks but running on " + std::to_string(S) +
                     " ranks: run it with mpirun -np " + std::to_string(2 * S)),
              std::string::npos)
        << m;
  }
  {
    // Stage 1 sends to a stage 2: its ranks fail after the split, stage 0's
    // load.
    TempDir local;
    PipelineStages st = pipelinePlan(uint32_t(S / 2), 2, 3);
    uint32_t h = st.stage(1).f32({1, 3});
    st.stage(1).instr(Prologue, "dist.send", {h}, {}, {2, +1, 0, 7}).set_axis(1);
    st.stage(1).instr(Prologue, "dist.wait", {}, {}, {7});
    st.write(local.path(), 2);
    if (r % 2 == 1) {
      std::string m = DSRT_ERROR_OF(PlanError, Executor(local.path(), &c));
      EXPECT_NE(m.find("plan.pb (stage 1): prologue instruction " +
                       std::to_string(st.stage(1).proto().program().prologue_size() - 2) +
                       " (dist.send): peer +1 is stage 2, outside the pipeline's 2 stages (this "
                       "is stage 1)"),
                std::string::npos)
          << m;
    } else {
      Executor exec(local.path(), &c);
      EXPECT_EQ(exec.stage(), 0);
    }
  }
  c.barrier();
}

} // namespace
} // namespace dsrt::test

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  dsrt::comm::initMpi();
  int failed = RUN_ALL_TESTS();
  // Every rank exits with the worst result, so mpirun reports any failure.
  failed = int(dsrt::test::world().blockingAllReduceScalar(failed, dsrt::comm::ReduceOp::Max));
  dsrt::comm::finalizeMpi();
  return failed;
}
