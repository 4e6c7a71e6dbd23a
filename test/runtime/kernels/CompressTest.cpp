//===- CompressTest.cpp - 1-bit compression against DeepSpeed's algorithm -===//
//
// The worker, server and expand kernels, run for W simulated ranks over
// several rounds (the error feedback carries over), against a float64
// transcription of DeepSpeed edaa722's compressed_allreduce
// (deepspeed/runtime/comm/nccl.py): one scale per worker over its whole
// padded tensor, a / W per sign at the server, one scale per server chunk,
// the errors x - scale sgn(x); and the bit layout (numpy packbits: first
// element in the most significant bit; 0, -0 and NaN count as +1).
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <numeric>

namespace dsrt::cpu::test {
namespace {

double sgn(double x) { return x < 0 ? -1.0 : 1.0; }

/// DeepSpeed's padding: a multiple of W * lcm(W, 8), so every server chunk
/// is whole bytes.
int64_t padded(int64_t n, int world) {
  int64_t unit = int64_t(world) * std::lcm(int64_t(world), int64_t(8));
  return (n + unit - 1) / unit * unit;
}

struct Reference {
  int world;
  int64_t np;
  std::vector<std::vector<double>> workerError, serverError;

  Reference(int world, int64_t n)
      : world(world), np(padded(n, world)), workerError(world, std::vector<double>(np, 0.0)),
        serverError(world, std::vector<double>(np / world, 0.0)) {}

  /// The all-reduced average of every worker's m, as compressed_allreduce
  /// returns it (identical on every rank).
  std::vector<double> round(const std::vector<std::vector<float>> &m) {
    const int64_t chunk = np / world;
    std::vector<double> a(world);
    std::vector<std::vector<double>> sign(world, std::vector<double>(np));
    for (int w = 0; w < world; ++w) {
      std::vector<double> x(np, 0.0);
      for (size_t i = 0; i < m[w].size(); ++i)
        x[i] = m[w][i];
      double sq = 0;
      for (int64_t i = 0; i < np; ++i) {
        x[i] += workerError[w][i];
        sq += x[i] * x[i];
      }
      a[w] = std::sqrt(sq) / std::sqrt(double(np));
      for (int64_t i = 0; i < np; ++i) {
        sign[w][i] = sgn(x[i]);
        workerError[w][i] = x[i] - a[w] * sign[w][i];
      }
    }
    std::vector<double> out(np);
    for (int r = 0; r < world; ++r) {
      std::vector<double> c(chunk);
      double sq = 0;
      for (int64_t i = 0; i < chunk; ++i) {
        double s = 0;
        for (int w = 0; w < world; ++w)
          s += sign[w][r * chunk + i] * (a[w] / world);
        c[i] = s + serverError[r][i];
        sq += c[i] * c[i];
      }
      double b = std::sqrt(sq) / std::sqrt(double(chunk));
      for (int64_t i = 0; i < chunk; ++i) {
        serverError[r][i] = c[i] - b * sgn(c[i]);
        out[r * chunk + i] = b * sgn(c[i]);
      }
    }
    out.resize(m[0].size());
    return out;
  }
};

/// The kernels, for `world` ranks simulated in turn.
struct Simulated {
  int world;
  int64_t np;
  std::vector<std::vector<float>> workerError, serverError;

  Simulated(int world, int64_t n)
      : world(world), np(padded(n, world)), workerError(world, std::vector<float>(np, 0.0f)),
        serverError(world, std::vector<float>(np / world, 0.0f)) {}

  std::vector<float> round(const std::vector<std::vector<float>> &m) {
    const int64_t chunk = np / world;
    std::vector<std::vector<uint8_t>> bits(world, std::vector<uint8_t>(np / 8));
    std::vector<float> a(world);
    for (int w = 0; w < world; ++w) {
      std::vector<float> v(np, 0.0f);
      std::copy(m[w].begin(), m[w].end(), v.begin());
      a[w] = onebitCompress(v.data(), workerError[w].data(), np, bits[w].data());
    }
    std::vector<float> out(np);
    for (int r = 0; r < world; ++r) {
      // What the all_to_all delivers to rank r: every worker's chunk r.
      std::vector<uint8_t> chunks;
      for (int w = 0; w < world; ++w)
        chunks.insert(chunks.end(), bits[w].begin() + r * chunk / 8,
                      bits[w].begin() + (r + 1) * chunk / 8);
      std::vector<uint8_t> serverBits(chunk / 8);
      float b = onebitServer(chunks.data(), a.data(), world, serverError[r].data(), chunk,
                             serverBits.data());
      onebitExpand(serverBits.data(), b, chunk, out.data() + r * chunk);
    }
    out.resize(m[0].size());
    return out;
  }
};

// Tolerance over 4 rounds: relative 1e-5, absolute 1e-7 (float32 against
// float64; the random moments keep every x and c away from 0, where a
// rounding could flip a sign).
TEST(Compress, MatchesDeepSpeedsCompressedAllReduce) {
  for (int world : {2, 3, 4})
    for (int64_t n : {5, 100, 4099}) {
      Reference ref(world, n);
      Simulated sim(world, n);
      for (int round = 0; round < 4; ++round) {
        std::vector<std::vector<float>> m(world);
        for (int w = 0; w < world; ++w)
          m[w] = uniform(n, 4000 + 10 * round + w, -1.0f, 1.0f);
        std::vector<double> want = ref.round(m);
        std::vector<float> got = sim.round(m);
        ASSERT_TRUE(near(got, want, 1e-5, 1e-7))
            << "world " << world << " n " << n << " round " << round;
        for (int w = 0; w < world; ++w)
          ASSERT_TRUE(near(sim.workerError[w], ref.workerError[w], 1e-5, 1e-6));
        for (int r = 0; r < world; ++r)
          ASSERT_TRUE(near(sim.serverError[r], ref.serverError[r], 1e-5, 1e-6));
      }
    }
}

// numpy packbits' order, DeepSpeed's sign (0, -0 and NaN are +1) and the
// scale |x| / sqrt(n) with the error it leaves.
TEST(Compress, BitOrderSignAndScale) {
  const float v[8] = {0.0f, -0.0f, std::nanf(""), -1.0f, 2.0f, -3.0f, 0.5f, -0.5f};
  std::vector<float> error(8, 0.0f);
  uint8_t bits = 0;
  // The NaN makes the scale NaN; the bits do not depend on it.
  onebitCompress(v, error.data(), 8, &bits);
  EXPECT_EQ(bits, 0b11101010);
  const float w[8] = {3.0f, -4.0f, 0, 0, 0, 0, 0, 0};
  std::fill(error.begin(), error.end(), 0.0f);
  float a = onebitCompress(w, error.data(), 8, &bits);
  EXPECT_FLOAT_EQ(a, 5.0f / std::sqrt(8.0f));
  EXPECT_EQ(bits, 0b10111111);
  EXPECT_FLOAT_EQ(error[0], 3.0f - a);
  EXPECT_FLOAT_EQ(error[1], -4.0f + a);
  EXPECT_FLOAT_EQ(error[2], -a);
  std::vector<float> out(8);
  onebitExpand(&bits, 2.0f, 8, out.data());
  EXPECT_EQ(out, (std::vector<float>{2, -2, 2, 2, 2, 2, 2, 2}));
}

} // namespace
} // namespace dsrt::cpu::test
