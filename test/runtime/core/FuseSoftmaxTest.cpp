//===- FuseSoftmaxTest.cpp - which attention chains the device fuses -----===//
//
// ops::fuseSoftmaxChains on hand-built instruction lists over one host
// arena: the chains of a GPT's attention (forward and backward, in place
// as the memory plan lays them out) are fused; an intermediate that is
// read again, directly or through a view, a mask that does not broadcast
// over the leading dims only, and a list that ends before the bytes are
// overwritten are not. What the fused kernels compute is checked against
// the unfused ones on a GPU (CudaKernelsTest).
//
//===----------------------------------------------------------------------===//
#include "InstrUtil.h"
#include "runtime/backends/cuda/Fusions.h"

#include <gtest/gtest.h>

namespace dsrt::test {
namespace {
namespace plan = dsc::plan;

Instr softmaxOf(const std::string &op, std::vector<Tensor *> in, Tensor *out) {
  Instr i = makeInstr(op, std::move(in), {out});
  i.g[0] = out->numel / out->shape.dims[out->shape.rank - 1];
  i.g[1] = out->shape.dims[out->shape.rank - 1];
  i.g[2] = 1;
  return i;
}

/// One layer's attention as the memory plan lays it out: scores [2,3,8,8]
/// (384 bf16 = 768 bytes) at 0, the scale in place over them, the masked
/// scores at 1024, the probabilities at 2048; backward: dy at 0, dx over
/// the select's result at 3072 after the gradient at 4096.
struct Layer {
  Arena a;
  Tensor *scores = a.at(0, {2, 3, 8, 8}), *scaled = a.at(0, {2, 3, 8, 8}),
         *masked = a.at(1024, {2, 3, 8, 8}), *probs = a.at(2048, {2, 3, 8, 8});
  Tensor *scale = a.at(8192, {}), *fill = a.at(8256, {}), *zero = a.at(8320, {});
  Tensor *mask = a.at(8384, {1, 1, 8, 8}, plan::BOOL);
  Tensor *dy = a.at(0, {2, 3, 8, 8}), *dsoft = a.at(4096, {2, 3, 8, 8}),
         *dmasked = a.at(3072, {2, 3, 8, 8}), *dscores = a.at(3072, {2, 3, 8, 8});
  Tensor *next = a.at(16384, {2, 3, 8, 8});
  std::vector<Instr> forward() {
    std::vector<Instr> l;
    l.push_back(makeInstr("nn.mul", {scores, scale}, {scaled}));
    l.push_back(makeInstr("nn.select", {mask, fill, scaled}, {masked}));
    l.push_back(softmaxOf("nn.softmax", {masked}, probs));
    // The next GEMM writes over the scores and the masked scores.
    l.push_back(makeInstr("nn.matmul", {probs, next}, {scores}));
    l.push_back(makeInstr("nn.matmul", {probs, next}, {masked}));
    return l;
  }
  std::vector<Instr> backward() {
    std::vector<Instr> l;
    l.push_back(softmaxOf("nn.softmax_grad", {probs, dy}, dsoft));
    l.push_back(makeInstr("nn.select", {mask, zero, dsoft}, {dmasked}));
    l.push_back(makeInstr("nn.mul", {dmasked, scale}, {dscores}));
    l.push_back(makeInstr("nn.matmul", {dscores, next}, {next}));
    l.push_back(makeInstr("nn.matmul", {next, next}, {dsoft}));
    return l;
  }
};

TEST(FuseSoftmax, AttentionForwardAndBackward) {
  Layer L;
  auto f = L.forward();
  EXPECT_EQ(2, ops::fuseSoftmaxChains(f));
  EXPECT_TRUE(f[0].fused.absorbed);
  EXPECT_TRUE(f[1].fused.absorbed);
  EXPECT_FALSE(f[2].fused.absorbed);
  EXPECT_EQ(L.scores, f[2].fused.x);
  EXPECT_EQ(L.scale, f[2].fused.scale);
  EXPECT_EQ(L.mask, f[2].fused.cond);
  EXPECT_EQ(L.fill, f[2].fused.fill);
  EXPECT_TRUE(f[2].fused.fillWhen);
  EXPECT_EQ(8, f[2].fused.condRows);

  auto b = L.backward();
  EXPECT_EQ(2, ops::fuseSoftmaxChains(b));
  EXPECT_TRUE(b[1].fused.absorbed);
  EXPECT_TRUE(b[2].fused.absorbed);
  EXPECT_EQ(L.dscores, b[0].fused.out);
  EXPECT_EQ(L.scale, b[0].fused.scale);
  EXPECT_EQ(L.zero, b[0].fused.fill);
}

TEST(FuseSoftmax, MaskInTheFalseBranch) {
  Layer L;
  auto f = L.forward();
  f[1].in = {L.mask, L.scaled, L.fill};
  EXPECT_EQ(2, ops::fuseSoftmaxChains(f));
  EXPECT_FALSE(f[2].fused.fillWhen);
}

TEST(FuseSoftmax, NotWhenAnIntermediateIsReadAgain) {
  {
    Layer L; // the masked scores read after the softmax
    auto f = L.forward();
    f.insert(f.begin() + 3, makeInstr("nn.add", {L.masked, L.next}, {L.next}));
    EXPECT_EQ(0, ops::fuseSoftmaxChains(f)) << "the select stays, and the mul is not next to "
                                               "the softmax";
    EXPECT_FALSE(f[0].fused.absorbed);
    EXPECT_FALSE(f[1].fused.absorbed);
    EXPECT_EQ(nullptr, f[2].fused.x);
  }
  {
    Layer L; // read through a view of the same bytes
    auto f = L.forward();
    Tensor *view = L.a.at(1024, {6, 64});
    f.insert(f.begin() + 3, makeInstr("nn.add", {view, L.next}, {L.next}));
    EXPECT_EQ(0, ops::fuseSoftmaxChains(f));
  }
  {
    Layer L; // the gradient's intermediate read later
    auto b = L.backward();
    b.insert(b.begin() + 3, makeInstr("nn.add", {L.dsoft, L.next}, {L.next}));
    EXPECT_EQ(0, ops::fuseSoftmaxChains(b));
  }
  {
    Layer L; // a list that ends before the bytes are overwritten
    auto f = L.forward();
    f.resize(3);
    EXPECT_EQ(0, ops::fuseSoftmaxChains(f));
  }
}

TEST(FuseSoftmax, NotForAMaskOverAMiddleDim) {
  Layer L;
  auto f = L.forward();
  f[1].in[0] = L.a.at(8448, {2, 1, 8, 8}, plan::BOOL);
  EXPECT_EQ(0, ops::fuseSoftmaxChains(f));
  // A whole-shape mask is fine (one mask row per score row).
  f = L.forward();
  f[1].in[0] = L.a.at(8448, {2, 3, 8, 8}, plan::BOOL);
  EXPECT_EQ(2, ops::fuseSoftmaxChains(f));
  EXPECT_EQ(48, f[2].fused.condRows);
}

TEST(FuseSoftmax, NotWhenTheResultOverlapsTheInputPartly) {
  Layer L;
  auto f = L.forward();
  f[2].out[0] = L.a.at(512, {2, 3, 8, 8}); // half over the scores
  EXPECT_EQ(0, ops::fuseSoftmaxChains(f));
  EXPECT_EQ(nullptr, f[2].fused.x);
  // Over them exactly (in place): fused, the kernel reads each element
  // before it writes it.
  f = L.forward();
  f[2].out[0] = L.a.at(0, {2, 3, 8, 8});
  EXPECT_EQ(2, ops::fuseSoftmaxChains(f));
}

} // namespace
} // namespace dsrt::test
