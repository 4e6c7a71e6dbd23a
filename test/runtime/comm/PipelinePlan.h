//===- PipelinePlan.h - a pipeline plan of P stages, and its reference -*- C++ -*-===//
//
// The model y = x * w0 * w1 * ... * w(P-1) (elementwise, [1, F]) with the
// loss L = 1/M sum_m sum_i (y_i - t_i)^2, cut in P stages, stage s holding
// w<s>:
//
//   stage 0:   load_batch m -> x_m; h_m = x_m * w0; send h_m to stage 1
//   stage s:   recv h_m; h'_m = h_m * ws; send h'_m on
//   last:      recv h_m; load_batch m -> t_m; y = h_m * w - t_m; the loss;
//              dy = 2/M y, and backward right away (one micro-batch at a
//              time)
//   backward:  recv dh'_m; gws += h_m * dh'_m; dh_m = ws * dh'_m, sent back
//
// (all forwards, then all backwards: GPipe), then on every stage: the
// gradient averaged over the dp group (axis 0), the global norm from the
// sum of squares all-reduced over the pipeline group (axis 1), and SGD (lr
// 0.1). Every forward message has tag 0 and every backward one tag 1: M of
// each are in flight at once, so their order rests on MPI's non-overtaking
// rule. Every stage also holds the unused parameter "tied" (a tied weight).
// Instructions carry their micro-batch and phase (1 forward, 2 backward,
// 3 weight gradient).
//
// PipelineReference computes the same steps in double over all dp ranks.
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
inline float wInit(int64_t stage, int64_t i) {
  return stage == 0 ? 0.5f + 0.1f * float(i) : 1.0f - 0.05f * float(i) + 0.01f * float(stage);
}

struct PipelineStages {
  std::vector<PlanBuilder> stages;
  PipelineStages(uint32_t dp, int P) {
    for (int s = 0; s < P; ++s)
      stages.emplace_back(dp, 1, 1);
  }
  PlanBuilder &stage(int s) { return stages[size_t(s)]; }
  /// plan.pb and weights.safetensors of the pipeline into `dir`.
  void write(const std::string &dir, int64_t M) {
    std::vector<PlanBuilder *> ps;
    for (PlanBuilder &p : stages)
      ps.push_back(&p);
    PlanBuilder::writePipeline(dir, ps, M);
  }
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

/// The P stages for dp data-parallel ranks per stage and M micro-batches.
inline PipelineStages pipelinePlan(uint32_t dp, int64_t M, int64_t F, int P = 2) {
  PipelineStages st(dp, P);
  const int64_t D = dp, G = P;
  // Handles: forward sends, forward receives, backward receives, backward
  // sends, then the two all-reduces.
  const int64_t fwdSend = 0, fwdRecv = 100, bwdRecv = 200, bwdSend = 300;
  for (int s = 0; s < P; ++s) {
    PlanBuilder &p = st.stage(s);
    const bool first = s == 0, last = s == P - 1;
    const std::string wName = "w" + std::to_string(s);
    if (last)
      p.proto().set_has_loss(true);
    uint32_t w = p.buffer(wName, plan::F32, {1, F}, plan::PARAM);
    p.buffer("tied", plan::F32, {2}, plan::PARAM);
    uint32_t gw = p.f32({1, F}), tmp = p.f32({1, F}), sq = p.f32({}), sqg = p.f32({});
    std::vector<uint32_t> hin, hout, dout, din, t;
    for (int64_t m = 0; m < M; ++m) {
      hin.push_back(first ? p.buffer("x", plan::F32, {1, F}, plan::INPUT) : p.f32({1, F}));
      hout.push_back(p.f32({1, F}));
      dout.push_back(p.f32({1, F}));
      if (!first)
        din.push_back(p.f32({1, F}));
      if (last)
        t.push_back(p.buffer("t", plan::F32, {1, F}, plan::INPUT));
    }
    std::vector<float> values;
    for (int64_t i = 0; i < F; ++i)
      values.push_back(wInit(s, i));
    p.weight(wName, {1, F}, values);
    p.weight("tied", {2}, {3.0f, 4.0f});
    p.instr(Prologue, "fill", {}, {p.kLr}, {}, {0.1});
    p.instr(Prologue, "fill", {}, {gw}, {}, {0.0});
    if (last)
      p.instr(Prologue, "fill", {}, {p.kLoss}, {}, {0.0});
    uint32_t y = 0, y2 = 0, lm = 0, lm2 = 0, twoOverM = 0, invM = 0;
    if (last) {
      y = p.f32({1, F});
      y2 = p.f32({1, F});
      lm = p.f32({});
      lm2 = p.f32({});
      twoOverM = constant(p, float(2.0 / double(M)));
      invM = constant(p, float(1.0 / double(M)));
    }
    auto backward = [&](int64_t m) {
      tagged(p.instr(Prologue, "nn.mul", {hin[m], dout[m]}, {tmp}), m, 3);
      tagged(p.instr(Prologue, "accumulate", {tmp}, {gw}), m, 3);
      if (!first) {
        tagged(p.instr(Prologue, "nn.mul", {w, dout[m]}, {din[m]}), m, 2);
        tagged(p.instr(Prologue, "dist.send", {din[m]}, {}, {G, -1, 1, bwdSend + m}), m, 2, 1);
      }
    };
    for (int64_t m = 0; m < M; ++m) {
      if (!first)
        tagged(p.instr(Prologue, "dist.recv", {}, {hin[m]}, {G, -1, 0, fwdRecv + m}), m, 1, 1);
      if (first)
        tagged(p.instr(Prologue, "load_batch", {}, {hin[m]}, {m}), m, 1);
      if (last)
        tagged(p.instr(Prologue, "load_batch", {}, {t[m]}, {m}), m, 1);
      if (!first)
        tagged(p.instr(Prologue, "dist.wait", {}, {}, {fwdRecv + m}), m, 1);
      tagged(p.instr(Prologue, "nn.mul", {hin[m], w}, {hout[m]}), m, 1);
      if (!last) {
        tagged(p.instr(Prologue, "dist.send", {hout[m]}, {}, {G, +1, 0, fwdSend + m}), m, 1, 1);
        continue;
      }
      tagged(p.instr(Prologue, "nn.sub", {hout[m], t[m]}, {y2}), m, 1);
      tagged(p.instr(Prologue, "train.sum_sq", {y2}, {lm}), m, 1);
      tagged(p.instr(Prologue, "nn.mul", {lm, invM}, {lm2}), m, 1);
      tagged(p.instr(Prologue, "accumulate", {lm2}, {p.kLoss}), m, 1);
      tagged(p.instr(Prologue, "nn.mul", {y2, twoOverM}, {dout[m]}), m, 2);
      backward(m);
    }
    (void)y;
    if (!last)
      for (int64_t m = 0; m < M; ++m) {
        tagged(p.instr(Prologue, "dist.recv", {}, {dout[m]}, {G, +1, 1, bwdRecv + m}), m, 2, 1);
        tagged(p.instr(Prologue, "dist.wait", {}, {}, {bwdRecv + m}), m, 2);
        backward(m);
      }
    for (int64_t m = 0; m < M; ++m) {
      if (!last)
        tagged(p.instr(Prologue, "dist.wait", {}, {}, {fwdSend + m}), m, 1);
      if (!first)
        tagged(p.instr(Prologue, "dist.wait", {}, {}, {bwdSend + m}), m, 2);
    }
    p.instr(Prologue, "dist.all_reduce", {gw}, {gw}, {D, 1, 400});
    p.instr(Prologue, "dist.wait", {}, {}, {400});
    p.instr(Prologue, "train.sum_sq", {gw}, {sq});
    tagged(p.instr(Prologue, "dist.all_reduce", {sq}, {sqg}, {G, 0, 401}), 0, 0, 1);
    p.instr(Prologue, "dist.wait", {}, {}, {401});
    p.instr(Prologue, "train.clip_grad_norm", {gw, sqg}, {gw, p.kNorm}, {}, {0.0});
    p.instr(Prologue, "train.sgd", {w, gw, p.kLr}, {w}, {0}, {0.0, 0.0, 0.0});
  }
  return st;
}

/// The steps of pipelinePlan in double, over all dp ranks: the loss
/// (before the update, averaged over dp), the global gradient norm and the
/// weights w[s] after each step.
struct PipelineReference {
  std::vector<std::vector<double>> w;
  double loss = 0, norm = 0;

  PipelineReference(int64_t F, int P = 2) : w(size_t(P)) {
    for (int s = 0; s < P; ++s)
      for (int64_t i = 0; i < F; ++i)
        w[size_t(s)].push_back(wInit(s, i));
  }
  void step(int64_t step, int64_t M, int64_t dp) {
    const size_t P = w.size(), F = w[0].size();
    std::vector<std::vector<double>> g(P, std::vector<double>(F, 0.0));
    loss = 0;
    for (int64_t d = 0; d < dp; ++d)
      for (int64_t m = 0; m < M; ++m) {
        int64_t global = ((step - 1) * M + m) * dp + d;
        for (size_t i = 0; i < F; ++i) {
          std::vector<double> h(P + 1);
          h[0] = float(pipeX(global, int64_t(i)));
          for (size_t s = 0; s < P; ++s)
            h[s + 1] = h[s] * w[s][i];
          double y = h[P] - float(pipeT(global, int64_t(i)));
          loss += y * y / double(M) / double(dp);
          double d2 = 2.0 / double(M) * y;
          for (size_t s = P; s-- > 0;) {
            g[s][i] += h[s] * d2 / double(dp);
            d2 *= w[s][i];
          }
        }
      }
    norm = 0;
    for (size_t s = 0; s < P; ++s)
      for (size_t i = 0; i < F; ++i)
        norm += g[s][i] * g[s][i];
    norm = std::sqrt(norm);
    for (size_t s = 0; s < P; ++s)
      for (size_t i = 0; i < F; ++i)
        w[s][i] -= 0.1 * g[s][i];
  }
};

} // namespace dsrt::test

#endif // DSRT_TEST_COMM_PIPELINEPLAN_H
