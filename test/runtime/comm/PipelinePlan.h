//===- PipelinePlan.h - a two-stage pipeline plan, and its reference -*- C++ -*-===//
//
// The model y = x * w0 * w1 (elementwise, [1, F]) with the loss
// L = 1/M sum_m sum_i (y_i - t_i)^2, cut in two stages:
//
//   stage 0: load_batch m -> x_m; h_m = x_m * w0; send h_m to stage 1;
//            then per m: recv dh_m, gw0 += x_m * dh_m
//   stage 1: recv h_m; load_batch m -> t_m; y = h_m * w1 - t_m; the loss;
//            dy = 2/M y; dh_m = w1 * dy, sent back; gw1 += h_m * dy
//
// then on both: the gradient averaged over the dp group (axis 0), the
// global norm from the sum of squares all-reduced over the pipeline group
// (axis 1), and SGD (lr 0.1). Every forward message has tag 0 and every
// backward one tag 1: M of each are in flight at once, so their order
// rests on MPI's non-overtaking rule. Both stages also hold the unused
// parameter "tied" (a tied weight). Instructions carry their micro-batch
// and phase (1 forward, 2 backward, 3 weight gradient).
//
// pipelineReference() computes the same steps in double over all dp ranks.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_TEST_COMM_PIPELINEPLAN_H
#define DSRT_TEST_COMM_PIPELINEPLAN_H

#include "PlanBuilder.h"

#include <cmath>
#include <cstring>

namespace dsrt::test {

inline double pipeX(int64_t global, int64_t i) { return std::sin(0.37 * double(global) + 0.11 * double(i)); }
inline double pipeT(int64_t global, int64_t i) { return std::cos(0.23 * double(global) + 0.5 * double(i)); }
inline float w0Init(int64_t i) { return 0.5f + 0.1f * float(i); }
inline float w1Init(int64_t i) { return 1.0f - 0.05f * float(i); }

struct PipelineStages {
  PlanBuilder s0, s1;
  PipelineStages(uint32_t dp) : s0(dp, 1, 1), s1(dp, 1, 1) {}
};

inline uint32_t constant(PlanBuilder &p, float value) {
  uint32_t c = p.buffer("", plan::F32, {}, plan::CONSTANT);
  std::string bytes(sizeof value, '\0');
  std::memcpy(bytes.data(), &value, sizeof value);
  p.at(c).set_data(bytes);
  return c;
}

inline plan::Instr &tagged(plan::Instr &i, int64_t mb, uint32_t phase, uint32_t axis = 0) {
  i.set_micro_batch(mb);
  i.set_phase(phase);
  i.set_axis(axis);
  return i;
}

/// The two stages for dp data-parallel ranks per stage and M micro-batches.
inline PipelineStages pipelinePlan(uint32_t dp, int64_t M, int64_t F) {
  PipelineStages st(dp);
  const int64_t D = dp;
  const int64_t sendBase = 0, recvBase = 100; // handles
  {
    PlanBuilder &p = st.s0;
    uint32_t w0 = p.buffer("w0", plan::F32, {1, F}, plan::PARAM);
    p.buffer("tied", plan::F32, {2}, plan::PARAM);
    uint32_t gw = p.f32({1, F}), tmp = p.f32({1, F}), sq = p.f32({}), sqg = p.f32({});
    std::vector<uint32_t> x, h, dh;
    for (int64_t m = 0; m < M; ++m) {
      x.push_back(p.buffer("x", plan::F32, {1, F}, plan::INPUT));
      h.push_back(p.f32({1, F}));
      dh.push_back(p.f32({1, F}));
    }
    std::vector<float> w;
    for (int64_t i = 0; i < F; ++i)
      w.push_back(w0Init(i));
    p.weight("w0", {1, F}, w);
    p.weight("tied", {2}, {3.0f, 4.0f});
    p.instr(Prologue, "fill", {}, {p.kLr}, {}, {0.1});
    p.instr(Prologue, "fill", {}, {gw}, {}, {0.0});
    for (int64_t m = 0; m < M; ++m) {
      tagged(p.instr(Prologue, "load_batch", {}, {x[m]}, {m}), m, 1);
      tagged(p.instr(Prologue, "nn.mul", {x[m], w0}, {h[m]}), m, 1);
      tagged(p.instr(Prologue, "dist.send", {h[m]}, {}, {2, +1, 0, sendBase + m}), m, 1, 1);
    }
    for (int64_t m = 0; m < M; ++m) {
      tagged(p.instr(Prologue, "dist.recv", {}, {dh[m]}, {2, +1, 1, recvBase + m}), m, 2, 1);
      tagged(p.instr(Prologue, "dist.wait", {}, {}, {recvBase + m}), m, 2);
      tagged(p.instr(Prologue, "nn.mul", {x[m], dh[m]}, {tmp}), m, 3);
      tagged(p.instr(Prologue, "accumulate", {tmp}, {gw}), m, 3);
    }
    for (int64_t m = 0; m < M; ++m)
      tagged(p.instr(Prologue, "dist.wait", {}, {}, {sendBase + m}), m, 1);
    p.instr(Prologue, "dist.all_reduce", {gw}, {gw}, {D, 1, 200});
    p.instr(Prologue, "dist.wait", {}, {}, {200});
    p.instr(Prologue, "train.sum_sq", {gw}, {sq});
    tagged(p.instr(Prologue, "dist.all_reduce", {sq}, {sqg}, {2, 0, 201}), 0, 0, 1);
    p.instr(Prologue, "dist.wait", {}, {}, {201});
    p.instr(Prologue, "train.clip_grad_norm", {gw, sqg}, {gw, p.kNorm}, {}, {0.0});
    p.instr(Prologue, "train.sgd", {w0, gw, p.kLr}, {w0}, {0}, {0.0, 0.0, 0.0});
  }
  {
    PlanBuilder &p = st.s1;
    p.proto().set_has_loss(true);
    uint32_t w1 = p.buffer("w1", plan::F32, {1, F}, plan::PARAM);
    p.buffer("tied", plan::F32, {2}, plan::PARAM);
    uint32_t gw = p.f32({1, F}), tmp = p.f32({1, F}), sq = p.f32({}), sqg = p.f32({});
    uint32_t y = p.f32({1, F}), y2 = p.f32({1, F}), dy = p.f32({1, F});
    uint32_t lm = p.f32({}), lm2 = p.f32({});
    uint32_t twoOverM = constant(p, float(2.0 / double(M))), invM = constant(p, float(1.0 / double(M)));
    std::vector<uint32_t> t, h, dh;
    for (int64_t m = 0; m < M; ++m) {
      t.push_back(p.buffer("t", plan::F32, {1, F}, plan::INPUT));
      h.push_back(p.f32({1, F}));
      dh.push_back(p.f32({1, F}));
    }
    std::vector<float> w;
    for (int64_t i = 0; i < F; ++i)
      w.push_back(w1Init(i));
    p.weight("w1", {1, F}, w);
    p.weight("tied", {2}, {3.0f, 4.0f});
    p.instr(Prologue, "fill", {}, {p.kLr}, {}, {0.1});
    p.instr(Prologue, "fill", {}, {gw}, {}, {0.0});
    p.instr(Prologue, "fill", {}, {p.kLoss}, {}, {0.0});
    for (int64_t m = 0; m < M; ++m) {
      tagged(p.instr(Prologue, "dist.recv", {}, {h[m]}, {2, -1, 0, recvBase + m}), m, 1, 1);
      tagged(p.instr(Prologue, "load_batch", {}, {t[m]}, {m}), m, 1);
      tagged(p.instr(Prologue, "dist.wait", {}, {}, {recvBase + m}), m, 1);
      tagged(p.instr(Prologue, "nn.mul", {h[m], w1}, {y}), m, 1);
      tagged(p.instr(Prologue, "nn.sub", {y, t[m]}, {y2}), m, 1);
      tagged(p.instr(Prologue, "train.sum_sq", {y2}, {lm}), m, 1);
      tagged(p.instr(Prologue, "nn.mul", {lm, invM}, {lm2}), m, 1);
      tagged(p.instr(Prologue, "accumulate", {lm2}, {p.kLoss}), m, 1);
      tagged(p.instr(Prologue, "nn.mul", {y2, twoOverM}, {dy}), m, 2);
      tagged(p.instr(Prologue, "nn.mul", {w1, dy}, {dh[m]}), m, 2);
      tagged(p.instr(Prologue, "dist.send", {dh[m]}, {}, {2, -1, 1, sendBase + m}), m, 2, 1);
      tagged(p.instr(Prologue, "nn.mul", {h[m], dy}, {tmp}), m, 3);
      tagged(p.instr(Prologue, "accumulate", {tmp}, {gw}), m, 3);
    }
    for (int64_t m = 0; m < M; ++m)
      tagged(p.instr(Prologue, "dist.wait", {}, {}, {sendBase + m}), m, 2);
    p.instr(Prologue, "dist.all_reduce", {gw}, {gw}, {D, 1, 200});
    p.instr(Prologue, "dist.wait", {}, {}, {200});
    p.instr(Prologue, "train.sum_sq", {gw}, {sq});
    tagged(p.instr(Prologue, "dist.all_reduce", {sq}, {sqg}, {2, 0, 201}), 0, 0, 1);
    p.instr(Prologue, "dist.wait", {}, {}, {201});
    p.instr(Prologue, "train.clip_grad_norm", {gw, sqg}, {gw, p.kNorm}, {}, {0.0});
    p.instr(Prologue, "train.sgd", {w1, gw, p.kLr}, {w1}, {0}, {0.0, 0.0, 0.0});
  }
  return st;
}

/// The steps of pipelinePlan in double, over all dp ranks: the loss
/// (before the update, averaged over dp), the global gradient norm and the
/// weights after each step.
struct PipelineReference {
  std::vector<double> w0, w1;
  double loss = 0, norm = 0;

  PipelineReference(int64_t F) {
    for (int64_t i = 0; i < F; ++i) {
      w0.push_back(w0Init(i));
      w1.push_back(w1Init(i));
    }
  }
  void step(int64_t s, int64_t M, int64_t dp) {
    size_t F = w0.size();
    std::vector<double> g0(F, 0.0), g1(F, 0.0);
    loss = 0;
    for (int64_t d = 0; d < dp; ++d)
      for (int64_t m = 0; m < M; ++m) {
        int64_t g = ((s - 1) * M + m) * dp + d;
        for (size_t i = 0; i < F; ++i) {
          double x = float(pipeX(g, int64_t(i))), t = float(pipeT(g, int64_t(i)));
          double h = x * w0[i], y = h * w1[i] - t;
          loss += y * y / double(M) / double(dp);
          double dy = 2.0 / double(M) * y;
          g1[i] += h * dy / double(dp);
          g0[i] += x * w1[i] * dy / double(dp);
        }
      }
    norm = 0;
    for (size_t i = 0; i < F; ++i)
      norm += g0[i] * g0[i] + g1[i] * g1[i];
    norm = std::sqrt(norm);
    for (size_t i = 0; i < F; ++i) {
      w0[i] -= 0.1 * g0[i];
      w1[i] -= 0.1 * g1[i];
    }
  }
};

} // namespace dsrt::test

#endif // DSRT_TEST_COMM_PIPELINEPLAN_H
