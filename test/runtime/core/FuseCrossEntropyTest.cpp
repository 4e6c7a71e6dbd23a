//===- FuseCrossEntropyTest.cpp - which loss casts the device fuses -------===//
//
// ops::fuseCrossEntropyCasts on hand-built instruction lists laid out as
// dsc lays out a bf16 GPT's head (the float gradient over the bf16
// logits' bytes, the bf16 gradient over the float logits'): the two casts
// are absorbed; a second reader of the float logits, the bf16 logits
// overwritten before the gradient reads them, a gradient cast that is not
// next to it, a float gradient read again, a bf16 gradient over the
// logits, and bytes the fusion leaves unwritten that a list reads first
// are not. What the fused kernels compute is checked against the unfused
// ones on a GPU (CudaKernelsTest).
//
//===----------------------------------------------------------------------===//
#include "InstrUtil.h"
#include "runtime/backends/cuda/Fusions.h"

#include <gtest/gtest.h>

namespace dsrt::test {
namespace {
namespace plan = dsc::plan;

int fuse(std::vector<Instr> &list) { return ops::fuseCrossEntropyCasts({&list}); }

Instr lossOp(const std::string &op, std::vector<Tensor *> in, Tensor *out, const Tensor *logits) {
  Instr i = makeInstr(op, std::move(in), {out}, {2, 1, -100});
  i.g[0] = logits->shape.dims[0];
  i.g[1] = logits->shape.dims[1];
  i.g[2] = 1;
  return i;
}

/// The head of a bf16 GPT: logits [16, 40] bf16 (1280 bytes) at 0, their
/// float copy (2560 bytes) at 4096, the float gradient over the bf16
/// logits at 0, the bf16 gradient over the float logits at 4096; labels,
/// the loss and its seed gradient apart.
struct Head {
  Arena a;
  Tensor *x = a.at(0, {16, 40}), *l = a.at(4096, {16, 40}, plan::F32);
  Tensor *labels = a.at(16384, {16}, plan::I64), *loss = a.at(16640, {}, plan::F32);
  Tensor *seed = a.at(16704, {}, plan::F32), *g = a.at(0, {16, 40}, plan::F32);
  Tensor *d = a.at(4096, {16, 40}), *w = a.at(20480, {40, 8}), *dh = a.at(24576, {16, 8});
  Tensor *h = a.at(28672, {16, 8});
  std::vector<Instr> list(Tensor *gradOut = nullptr) {
    std::vector<Instr> v;
    v.push_back(makeInstr("nn.matmul", {h, w}, {x})); // the head
    v.push_back(makeInstr("nn.cast", {x}, {l}));
    v.push_back(lossOp("nn.cross_entropy", {l, labels}, loss, l));
    v.push_back(lossOp("nn.cross_entropy_grad", {l, labels, seed}, g, l));
    v.push_back(makeInstr("nn.cast", {g}, {gradOut ? gradOut : d}));
    v.push_back(makeInstr("nn.matmul", {gradOut ? gradOut : d, w}, {dh}));
    // Later instructions write over both float buffers.
    v.push_back(makeInstr("nn.matmul", {dh, w}, {a.at(0, {16, 40}, plan::F32)}));
    v.push_back(makeInstr("nn.matmul", {dh, w}, {a.at(4096, {16, 40}, plan::F32)}));
    return v;
  }
};

TEST(FuseCrossEntropy, TheHeadOfABf16Gpt) {
  Head H;
  auto v = H.list();
  EXPECT_EQ(2, fuse(v));
  EXPECT_TRUE(v[1].fused.absorbed);
  EXPECT_TRUE(v[4].fused.absorbed);
  EXPECT_FALSE(v[0].fused.absorbed || v[2].fused.absorbed || v[3].fused.absorbed ||
               v[5].fused.absorbed);
  EXPECT_EQ(H.x, v[2].fused.x);
  EXPECT_EQ(H.x, v[3].fused.x);
  EXPECT_EQ(H.d, v[3].fused.out);
  // Once fused, a second pass finds nothing more.
  EXPECT_EQ(0, fuse(v));
}

TEST(FuseCrossEntropy, NotWhenTheFloatLogitsHaveAnotherReader) {
  Head H;
  auto v = H.list();
  // A softmax of the logits (an output head's probabilities), through a view.
  Tensor *view = H.a.at(4096, {640}, plan::F32);
  v.insert(v.begin() + 3, makeInstr("nn.exp", {view}, {H.a.at(32768, {640}, plan::F32)}));
  EXPECT_EQ(0, fuse(v));
}

TEST(FuseCrossEntropy, NotWhenTheBf16LogitsAreOverwrittenFirst) {
  Head H;
  auto v = H.list();
  v.insert(v.begin() + 3, makeInstr("nn.neg", {H.w}, {H.a.at(512, {8})}));
  EXPECT_EQ(0, fuse(v));
}

TEST(FuseCrossEntropy, NotWhenTheGradientCastIsNotNext) {
  Head H;
  auto v = H.list();
  v.insert(v.begin() + 4, makeInstr("nn.neg", {H.w}, {H.a.at(32768, {40, 8})}));
  EXPECT_EQ(0, fuse(v));
}

TEST(FuseCrossEntropy, NotWhenTheFloatGradientIsReadAgain) {
  Head H;
  auto v = H.list();
  v.insert(v.begin() + 5, makeInstr("nn.neg", {H.g}, {H.a.at(32768, {16, 40}, plan::F32)}));
  EXPECT_EQ(0, fuse(v));
}

TEST(FuseCrossEntropy, NotWhenTheBf16GradientOverlapsTheLogits) {
  Head H;
  auto v = H.list(H.a.at(640, {16, 40}));
  EXPECT_EQ(0, fuse(v));
}

TEST(FuseCrossEntropy, WhereTheListEndsOnlyWhenNoListReadsTheBytesFirst) {
  Head H;
  Tensor *apart = H.a.at(40960, {16, 40});
  auto v = H.list(apart);
  EXPECT_EQ(2, fuse(v)) << "the last matmul writes over them";
  // Nothing writes over the float logits before the list ends: the next
  // run of the list writes them (the cast) before reading them.
  v = H.list(apart);
  v.pop_back();
  EXPECT_EQ(2, fuse(v));
  // An epilogue that reads them first (through a view) sees the cast's
  // values unfused: not fused.
  v = H.list(apart);
  v.pop_back();
  std::vector<Instr> epilogue;
  epilogue.push_back(makeInstr("nn.neg", {H.a.at(4096, {640}, plan::F32)},
                               {H.a.at(65536, {640}, plan::F32)}));
  EXPECT_EQ(0, ops::fuseCrossEntropyCasts({&v, &epilogue}));
  // Likewise the float gradient's bytes, left unwritten by the fusion.
  v = H.list(apart);
  std::vector<Instr> reader;
  reader.push_back(makeInstr("nn.neg", {H.a.at(0, {16, 40}, plan::F32)},
                             {H.a.at(65536, {16, 40}, plan::F32)}));
  v.erase(v.begin() + 6); // the matmul that wrote over the float gradient
  EXPECT_EQ(0, ops::fuseCrossEntropyCasts({&v, &reader}));
  std::vector<Instr> writer;
  writer.push_back(makeInstr("nn.neg", {H.w}, {H.a.at(0, {16, 40}, plan::F32)}));
  EXPECT_EQ(2, ops::fuseCrossEntropyCasts({&v, &writer}));
}

} // namespace
} // namespace dsrt::test
