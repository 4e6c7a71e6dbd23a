//===- ReduceTest.cpp - axis reductions and sumSquares --------------------===//
//
// Every axis subset of a few shapes (with size-1 dims, so dims merge and
// drop), whole-tensor reductions big enough to be chunked, and results that
// must be bit-identical for 1 and 2 threads.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <limits>

namespace dsrt::cpu::test {
namespace {

std::vector<double> refReduce(Reduce op, const std::vector<float> &x,
                              const Shape &xs, uint32_t mask) {
  Shape ys;
  for (int d = 0; d < xs.rank; ++d)
    ys.dims[ys.rank++] = (mask >> d) & 1 ? 1 : xs.dims[d];
  std::vector<double> y(
      ys.numel(),
      op == Reduce::Max ? -std::numeric_limits<double>::infinity() : 0.0);
  for (int64_t i = 0; i < xs.numel(); ++i) {
    const int64_t o = broadcastIndex(unravel(i, xs), ys);
    y[o] = op == Reduce::Max ? std::max(y[o], double(x[i])) : y[o] + x[i];
  }
  if (op == Reduce::Mean)
    for (double &v : y)
      v /= double(xs.numel() / ys.numel());
  return y;
}

/// Tolerance: float sums of `count` values in [-1, 1]: absolute
/// 1e-6 * count, relative 1e-5; max is exact.
void check(const Shape &xs, uint32_t mask, unsigned seed) {
  auto x = uniform(xs.numel(), seed);
  int64_t count = 1;
  for (int d = 0; d < xs.rank; ++d)
    if ((mask >> d) & 1)
      count *= xs.dims[d];
  for (Reduce op : {Reduce::Sum, Reduce::Mean, Reduce::Max}) {
    auto ref = refReduce(op, x, xs, mask);
    std::vector<float> y(ref.size());
    reduce(op, x.data(), xs, mask, y.data());
    const double atol = op == Reduce::Max   ? 0
                        : op == Reduce::Sum ? 1e-6 * count
                                            : 1e-6;
    EXPECT_TRUE(near(y, ref, op == Reduce::Max ? 0 : 1e-5, atol))
        << "op " << int(op) << " shape " << str(xs) << " mask " << mask;
  }
}

TEST(Reduce, AllAxisSubsets) {
  const Shape shapes[] = {shape({7, 33, 5}), shape({1, 7, 1, 33}),
                          shape({4, 3, 5, 7}), shape({129}),
                          shape({2, 1, 3, 1, 5})};
  unsigned seed = 700;
  for (const Shape &s : shapes)
    for (uint32_t mask = 0; mask < (1u << s.rank); ++mask)
      check(s, mask, seed++);
}

TEST(Reduce, LargeThreadedShapes) {
  check(shape({4096, 33}), 1, 1);    // column sums (bias gradient)
  check(shape({33, 4096}), 2, 2);    // row sums
  check(shape({100003}), 1, 3);      // whole tensor, chunked
  check(shape({3, 50000, 2}), 5, 4); // outer and inner reduced
  check(shape({8, 300, 129}), 2, 5); // middle axis, kept inner
  check(shape({2, 3000, 7}), 3, 6);  // leading axes, few columns
}

TEST(Reduce, DeterministicAcrossThreadCounts) {
  const Shape shapes[] = {shape({4096, 65}), shape({100003}),
                          shape({3, 50000, 2})};
  const uint32_t masks[] = {1, 1, 2};
  for (int c = 0; c < 3; ++c) {
    auto x = uniform(shapes[c].numel(), 800 + c);
    std::vector<float> y1(shapes[c].numel()), y2(shapes[c].numel());
    {
      ThreadCount t(1);
      reduce(Reduce::Sum, x.data(), shapes[c], masks[c], y1.data());
    }
    {
      ThreadCount t(2);
      reduce(Reduce::Sum, x.data(), shapes[c], masks[c], y2.data());
    }
    EXPECT_TRUE(bitEqual(y1, y2)) << str(shapes[c]);
  }
}

// A matrix's column sums (a bias gradient) are added in the documented
// order (Half.h): blocks of kColumnSumRows rows from a float zero, then
// the blocks' partials in order; bitwise, for 1 and 3 threads (more row
// blocks than threads, and fewer, when the columns are shared out), over
// merged leading axes.
TEST(Reduce, ColumnSumsInRowBlocks) {
  const int64_t R = kColumnSumRows;
  for (int64_t rows : {int64_t(1), R - 1, R, R + 1, 4 * R + 37})
    for (int64_t cols : {2, 17, 300}) {
      auto x = uniform(rows * cols, unsigned(rows * 7 + cols), -3.0f, 5.0f);
      std::vector<float> want(static_cast<size_t>(cols));
      for (int64_t c = 0; c < cols; ++c) {
        float total = 0.0f;
        for (int64_t r0 = 0; r0 < rows; r0 += R) {
          float part = 0.0f;
          for (int64_t r = r0; r < std::min(rows, r0 + R); ++r)
            part += x[size_t(r * cols + c)];
          total = r0 == 0 ? part : total + part;
        }
        want[size_t(c)] = total;
      }
      for (int threads : {1, 3}) {
        ThreadCount t(threads);
        std::vector<float> y(static_cast<size_t>(cols)), z(static_cast<size_t>(cols));
        reduce(Reduce::Sum, x.data(), shape({rows, cols}), 1, y.data());
        EXPECT_TRUE(bitEqual(y, want)) << rows << " x " << cols << ", " << threads << " threads";
        if (rows % 2 == 0) {
          reduce(Reduce::Sum, x.data(), shape({2, rows / 2, cols}), 3, z.data());
          EXPECT_TRUE(bitEqual(z, want)) << "2 x " << rows / 2 << " x " << cols;
        }
      }
    }
}

// Tolerance: relative 1e-12 (double accumulation).
TEST(Reduce, SumSquares) {
  for (int64_t n : {1, 7, 129, 100003, 1000003}) {
    auto x = uniform(n, 900 + unsigned(n));
    double ref = 0;
    for (float v : x)
      ref += double(v) * double(v);
    double s1, s2;
    {
      ThreadCount t(1);
      s1 = sumSquares(x.data(), n);
    }
    {
      ThreadCount t(2);
      s2 = sumSquares(x.data(), n);
    }
    EXPECT_NEAR(s1, ref, 1e-12 * ref) << n;
    EXPECT_EQ(s1, s2) << "thread count changed the result, n " << n;
  }
}

} // namespace
} // namespace dsrt::cpu::test
