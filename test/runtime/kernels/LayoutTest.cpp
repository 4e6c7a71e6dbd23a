//===- LayoutTest.cpp - gather, transpose, slice, concat ------------------===//
//
// Data movement is exact, so these compare bit for bit with naive index
// arithmetic; gatherGrad (a sum) is compared against float64 and checked to
// be identical for 1 and 2 threads.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <algorithm>
#include <numeric>

namespace dsrt::cpu::test {
namespace {

TEST(Gather, NegativeAndOutOfRangeIndices) {
  struct Case {
    int64_t outer, A, inner;
  };
  const Case cases[] = {{1, 7, 1}, {3, 7, 33}, {2, 129, 5}, {1, 50, 300}};
  for (const Case &k : cases) {
    // -1 and -A wrap; A and -A-1 are out of range.
    std::vector<int64_t> idx = {0, k.A - 1, -1, -k.A, 2, k.A, -k.A - 1, 1, 2};
    for (int64_t i = 0; i < 1000; ++i)
      idx.push_back((i * 37) % (2 * k.A) - k.A);
    const int64_t nIdx = int64_t(idx.size());
    auto data = uniform(k.outer * k.A * k.inner, 1800);
    std::vector<float> out(k.outer * nIdx * k.inner, std::nanf(""));
    EXPECT_EQ(gather(data.data(), idx.data(), out.data(), k.outer, k.A, k.inner,
                     nIdx),
              2);
    for (int64_t o = 0; o < k.outer; ++o)
      for (int64_t j = 0; j < nIdx; ++j) {
        int64_t a = idx[j] < 0 ? idx[j] + k.A : idx[j];
        for (int64_t i = 0; i < k.inner; ++i) {
          const float want =
              a < 0 || a >= k.A ? 0.0f : data[(o * k.A + a) * k.inner + i];
          ASSERT_EQ(out[(o * nIdx + j) * k.inner + i], want)
              << "row " << j << " index " << idx[j];
        }
      }
  }
}

// Tolerance: relative 1e-6, absolute 1e-6 (float sums of a few rows).
TEST(Gather, GradRepeatedIndices) {
  struct Case {
    int64_t outer, A, inner, nIdx;
  };
  // The last two are large enough to be split across threads.
  const Case cases[] = {
      {1, 7, 1, 20}, {2, 7, 33, 50}, {1, 1000, 129, 4096}, {3, 300, 129, 2000}};
  for (const Case &k : cases) {
    std::vector<int64_t> idx(k.nIdx);
    for (int64_t j = 0; j < k.nIdx; ++j)
      idx[j] = (j * j) % (k.A + 2) - 1 - (j % 3 == 0 ? k.A : 0);
    idx[0] = k.A + 5; // out of range
    int64_t bad = 0;
    for (int64_t v : idx)
      bad += v < -k.A || v >= k.A;
    auto dy = uniform(k.outer * k.nIdx * k.inner, 1900);
    std::vector<double> ref(k.outer * k.A * k.inner, 0.0);
    for (int64_t o = 0; o < k.outer; ++o)
      for (int64_t j = 0; j < k.nIdx; ++j) {
        const int64_t a = idx[j] < 0 ? idx[j] + k.A : idx[j];
        if (a < 0 || a >= k.A)
          continue;
        for (int64_t i = 0; i < k.inner; ++i)
          ref[(o * k.A + a) * k.inner + i] +=
              dy[(o * k.nIdx + j) * k.inner + i];
      }
    std::vector<float> d1(ref.size(), std::nanf("")), d2(ref.size());
    {
      ThreadCount t(1);
      EXPECT_EQ(gatherGrad(dy.data(), idx.data(), d1.data(), k.outer, k.A,
                           k.inner, k.nIdx),
                bad);
    }
    {
      ThreadCount t(2);
      gatherGrad(dy.data(), idx.data(), d2.data(), k.outer, k.A, k.inner,
                 k.nIdx);
    }
    EXPECT_TRUE(near(d1, ref, 1e-6, 1e-6 * double(k.nIdx) / double(k.A)));
    EXPECT_TRUE(bitEqual(d1, d2)) << "thread count changed gatherGrad";
  }
}

// Exact.
TEST(Transpose, Permutations) {
  struct Case {
    Shape xs;
    std::vector<int64_t> perm;
  };
  const Case cases[] = {
      {shape({7, 33}), {1, 0}},
      {shape({129, 65}), {1, 0}},
      {shape({1, 7}), {1, 0}},
      {shape({2, 33, 3, 16}), {0, 2, 1, 3}},
      {shape({2, 3, 33, 16}), {0, 1, 3, 2}},
      {shape({2, 3, 33, 16}), {0, 2, 3, 1}},
      {shape({5, 7, 9}), {2, 0, 1}},
      {shape({5, 7, 9}), {1, 2, 0}},
      {shape({5, 1, 7, 1, 9}), {4, 3, 2, 1, 0}},
      {shape({5, 7, 9}), {0, 1, 2}},
      {shape({4, 64, 12, 64}), {0, 2, 1, 3}},
      {shape({3, 100, 130}), {0, 2, 1}},
  };
  unsigned seed = 2000;
  for (const Case &k : cases) {
    auto x = uniform(k.xs.numel(), seed++);
    Shape ys;
    ys.rank = k.xs.rank;
    for (int d = 0; d < ys.rank; ++d)
      ys.dims[d] = k.xs.dims[k.perm[d]];
    std::vector<float> y(x.size());
    transpose(x.data(), k.xs, k.perm.data(), y.data());
    for (int64_t i = 0; i < ys.numel(); ++i) {
      auto yi = unravel(i, ys);
      std::vector<int64_t> xi(ys.rank);
      for (int d = 0; d < ys.rank; ++d)
        xi[k.perm[d]] = yi[d];
      ASSERT_EQ(y[i], x[broadcastIndex(xi, k.xs)])
          << str(k.xs) << " elem " << i;
    }
  }
}

struct SliceCase {
  Shape xs;
  std::vector<int64_t> start, stride;
  Shape ys;
};

std::vector<SliceCase> sliceCases() {
  return {
      {shape({7, 33}), {1, 2}, {1, 1}, shape({5, 30})},
      {shape({7, 33}), {0, 0}, {2, 3}, shape({4, 11})},
      {shape({7, 33}), {6, 32}, {-1, -2}, shape({7, 16})},
      {shape({2, 3, 129}), {0, 1, 0}, {1, 1, 1}, shape({2, 2, 129})},
      {shape({4, 50, 3 * 64}), {0, 0, 64}, {1, 1, 1}, shape({4, 50, 64})},
      {shape({5}), {1}, {2}, shape({2})},
      {shape({3, 4}), {0, 0}, {1, 1}, shape({0, 4})},
  };
}

// Exact.
TEST(Slice, ForwardAndGrad) {
  unsigned seed = 2100;
  for (const SliceCase &k : sliceCases()) {
    auto x = uniform(k.xs.numel(), seed++);
    std::vector<float> y(k.ys.numel());
    slice(x.data(), k.xs, k.start.data(), k.stride.data(), y.data(), k.ys);
    auto dy = uniform(k.ys.numel(), seed++);
    std::vector<float> dx(k.xs.numel(), std::nanf(""));
    sliceGrad(dy.data(), k.ys, k.start.data(), k.stride.data(), dx.data(),
              k.xs);
    std::vector<float> wantDx(k.xs.numel(), 0.0f);
    for (int64_t i = 0; i < k.ys.numel(); ++i) {
      auto yi = unravel(i, k.ys);
      std::vector<int64_t> xi(yi.size());
      for (size_t d = 0; d < yi.size(); ++d)
        xi[d] = k.start[d] + yi[d] * k.stride[d];
      const int64_t xf = broadcastIndex(xi, k.xs);
      ASSERT_EQ(y[i], x[xf]) << str(k.xs) << " -> " << str(k.ys);
      wantDx[xf] = dy[i];
    }
    EXPECT_TRUE(bitEqual(dx, wantDx)) << "sliceGrad " << str(k.xs);
  }
}

// Exact.
TEST(Concat, Axes) {
  struct Case {
    std::vector<Shape> in;
    int axis;
  };
  const Case cases[] = {
      {{shape({2, 33}), shape({5, 33}), shape({1, 33})}, 0},
      {{shape({3, 7, 5}), shape({3, 1, 5}), shape({3, 2, 5})}, 1},
      {{shape({4, 7}), shape({4, 33}), shape({4, 1})}, 1},
      {{shape({300, 64}), shape({300, 64}), shape({300, 64})}, 1},
      {{shape({7})}, 0},
      {{shape({2, 0, 3}), shape({2, 4, 3})}, 1},
  };
  unsigned seed = 2200;
  for (const Case &k : cases) {
    std::vector<std::vector<float>> data;
    std::vector<const float *> ptrs;
    Shape os = k.in[0];
    os.dims[k.axis] = 0;
    for (const Shape &s : k.in) {
      data.push_back(uniform(s.numel(), seed++));
      os.dims[k.axis] += s.dims[k.axis];
    }
    for (auto &d : data)
      ptrs.push_back(d.data());
    std::vector<float> out(os.numel());
    concat(ptrs.data(), k.in.data(), int(k.in.size()), k.axis, out.data(), os);
    for (int64_t i = 0; i < os.numel(); ++i) {
      auto idx = unravel(i, os);
      size_t which = 0;
      while (idx[k.axis] >= k.in[which].dims[k.axis])
        idx[k.axis] -= k.in[which++].dims[k.axis];
      ASSERT_EQ(out[i], data[which][broadcastIndex(idx, k.in[which])])
          << str(os) << " elem " << i;
    }
  }
}

// int64 slice and concat (indices and labels: T5's decoder input shifted
// right is a slice and a concat of token ids): exact moves, values beyond
// float's 24-bit mantissa included.
TEST(Slice, Int64) {
  Shape xs = shape({2, 5}), ys = shape({2, 2});
  std::vector<int64_t> x{1, 2, 3, 4, (int64_t(1) << 53) + 1, 6, 7, 8, 9, -10}, y(4);
  int64_t start[2] = {0, 1}, stride[2] = {1, 3};
  slice(x.data(), xs, start, stride, y.data(), ys);
  EXPECT_EQ(y, (std::vector<int64_t>{2, (int64_t(1) << 53) + 1, 7, -10}));
}
TEST(Transpose, Int64) {
  // A one-hot router's [tokens, experts] ids as [experts, tokens]: exact
  // moves, values beyond float's mantissa included.
  Shape xs = shape({2, 3});
  std::vector<int64_t> x{0, 1, (int64_t(1) << 53) + 1, -4, 5, 6}, y(6);
  int64_t perm[2] = {1, 0};
  transpose(x.data(), xs, perm, y.data());
  EXPECT_EQ(y, (std::vector<int64_t>{0, -4, 1, 5, (int64_t(1) << 53) + 1, 6}));
}
TEST(Gather, Int64) {
  // Rows of an int64 table (a one-hot router's ids): exact moves; an index
  // outside the table is counted and its row zero-filled.
  std::vector<int64_t> table{1, 2, (int64_t(1) << 53) + 1, -4, 5, 6}, out(6, 7);
  std::vector<int64_t> idx{2, -3, 3};
  EXPECT_EQ(gather(table.data(), idx.data(), out.data(), 1, 3, 2, 3), 1);
  EXPECT_EQ(out, (std::vector<int64_t>{5, 6, 1, 2, 0, 0}));
}
TEST(Concat, Int64) {
  std::vector<int64_t> a{0, 0}, b{5, 6, 7, 8, 9, 10};
  Shape shapes[2] = {shape({2, 1}), shape({2, 3})};
  const int64_t *in[2] = {a.data(), b.data()};
  std::vector<int64_t> out(8);
  concat(in, shapes, 2, 1, out.data(), shape({2, 4}));
  EXPECT_EQ(out, (std::vector<int64_t>{0, 5, 6, 7, 0, 8, 9, 10}));
}

} // namespace
} // namespace dsrt::cpu::test
