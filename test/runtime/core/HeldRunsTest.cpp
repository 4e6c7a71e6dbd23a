//===- HeldRunsTest.cpp - which elements of a whole tensor a rank holds --===//
//
// heldRuns() maps a buffer to the runs of the whole logical tensor it
// holds: checkpoints write and read those runs, the weight loader copies
// them. Over every (dp rank, tp rank) of a grid, the runs must tile the
// whole tensor exactly once per dp-replica set, land inside the buffer, and
// agree with the layout the kernels compute on (a tp part is its blocks'
// parts in order; a ZeRO chunk is a contiguous slice of the flattened part).
//
//===----------------------------------------------------------------------===//
#include "runtime/core/Executor.h"

#include <gtest/gtest.h>

#include <vector>

namespace dsrt::test {
namespace {

struct Case {
  std::vector<int64_t> whole;
  int dim, blocks, tp, dp;
};

Tensor makeTensor(const Case &c) {
  Tensor t;
  t.fullShape.rank = int(c.whole.size());
  t.fullNumel = 1;
  for (size_t i = 0; i < c.whole.size(); ++i) {
    t.fullShape.dims[i] = c.whole[i];
    t.fullNumel *= c.whole[i];
  }
  int64_t part = t.fullNumel;
  if (c.tp > 1) {
    t.tpDim = c.dim;
    t.tpBlocks = c.blocks;
    t.tpSize = c.tp;
    part /= c.tp;
  }
  t.shards = c.dp;
  t.numel = c.dp > 1 ? (part + c.dp - 1) / c.dp : part;
  return t;
}

// The element of the whole tensor at `part` position p of tp rank r: the
// reference layout, written out with indices.
int64_t wholeIndexOfPart(const Case &c, int r, int64_t p) {
  int64_t inner = 1, n = c.whole[size_t(c.dim)];
  for (size_t i = size_t(c.dim) + 1; i < c.whole.size(); ++i)
    inner *= c.whole[i];
  int64_t local = n / c.tp, block = n / c.blocks, partOfBlock = block / c.tp;
  int64_t o = p / (local * inner), rest = p % (local * inner);
  int64_t j = rest / inner, e = rest % inner; // j: index along the local dim
  int64_t k = j / partOfBlock, q = j % partOfBlock;
  return (o * n + k * block + r * partOfBlock + q) * inner + e;
}

TEST(HeldRuns, TileTheWholeTensorOnceAcrossTheGrid) {
  const Case cases[] = {
      {{12, 8}, 0, 1, 2, 1},  {{12, 8}, 0, 3, 2, 1},  {{8, 12}, 1, 3, 2, 1},
      {{12, 8}, 0, 3, 2, 2},  {{8, 12}, 1, 3, 2, 3},  {{6, 10, 4}, 1, 1, 2, 4},
      {{7, 5}, 0, 1, 1, 3},   {{7}, 0, 1, 1, 1},      {{24}, 0, 3, 4, 5},
      {{4, 6, 6}, 2, 3, 2, 7}};
  for (const Case &c : cases) {
    Tensor t = makeTensor(c);
    std::vector<int> seen(size_t(t.fullNumel), 0);
    int64_t partNumel = c.tp > 1 ? t.fullNumel / c.tp : t.fullNumel;
    for (int d = 0; d < c.dp; ++d)
      for (int r = 0; r < c.tp; ++r) {
        int64_t last = -1;
        for (const TpRun &run : heldRuns(t, d, r)) {
          ASSERT_GT(run.count, 0);
          ASSERT_GE(run.part, 0);
          ASSERT_LE(run.part + run.count, t.numel);
          EXPECT_GT(run.part, last) << "runs in buffer order";
          last = run.part;
          for (int64_t x = 0; x < run.count; ++x) {
            // Buffer position -> position in the tp part -> whole index.
            int64_t p = (c.dp > 1 ? int64_t(d) * t.numel : 0) + run.part + x;
            ASSERT_LT(p, partNumel);
            int64_t w = c.tp > 1 ? wholeIndexOfPart(c, r, p) : p;
            ASSERT_EQ(run.whole + x, w);
            ++seen[size_t(w)];
          }
        }
      }
    for (int64_t i = 0; i < t.fullNumel; ++i)
      ASSERT_EQ(seen[size_t(i)], 1) << "element " << i;
  }
}

TEST(HeldRuns, ReplicatedTensorIsOneRun) {
  Tensor t;
  t.numel = 10;
  auto runs = heldRuns(t, 3, 1);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].whole, 0);
  EXPECT_EQ(runs[0].part, 0);
  EXPECT_EQ(runs[0].count, 10);
}

} // namespace
} // namespace dsrt::test
