//===- LrSchedule.h - DeepSpeed learning-rate schedules ---------*- C++ -*-===//
//
// Closed forms of DeepSpeed's lr_schedules.py (WarmupLR, WarmupDecayLR,
// WarmupCosineLR, OneCycle, LRRangeTest) as the DeepSpeed engine drives them.
//
// Step convention. `step` k counts optimizer updates from 0 (the first
// update). DeepSpeed builds the scheduler with last_batch_iteration = -1 and
// the constructor already writes an lr into the optimizer; the engine then
// calls scheduler.step() *after* every optimizer.step() (engine.py
// _take_model_step), which increments last_batch_iteration and writes the lr
// for the next update. So:
//   * update k = 0 uses the constructor's lr;
//   * update k >= 1 uses the schedule evaluated at last_batch_iteration
//     t = k - 1.
// What the constructors write for k = 0: WarmupLR/WarmupDecayLR warmup_min_lr,
// WarmupCosineLR 0 (its get_lr() returns 0 before the first step()), OneCycle
// cycle_min_lr, LRRangeTest lr_range_test_min_lr.
// Updates DeepSpeed skips on fp16 overflow do not call scheduler.step(), so
// with loss scaling k counts applied (not attempted) updates.
//
// Formulas (W = max(2, warmup_num_steps), T = total_num_steps, t = k - 1):
//   warmup gamma(t), t < W: log: ln(t + 1) / ln(W); linear: t / W
//   WarmupLR:       min + (max - min) * (t < W ? gamma(t) : 1)
//   WarmupDecayLR:  as WarmupLR but after warmup
//                   gamma = max(0, (T - t) / max(1, T - W))
//   WarmupCosineLR: lr * ratio, warmup ratio = wmr + (1 - wmr) * gamma(t);
//                   after: p = min(1, (t - W + 1) / max(1, T - W)),
//                   ratio = max(0, cmr + (1 - cmr) * (1 + cos(pi p)) / 2)
//   LRRangeTest:    min_lr * (1 + rate * k / step_size)  (floor(k /
//                   step_size) with staircase); this also covers k = 0
//   OneCycle:       t < first + second: min + (max - min) * scale(k), a
//                   triangle rising over `first` updates and falling over
//                   `second` (quantised by the stair counts when > 0);
//                   after the cycle min_lr / (1 + decay_lr_rate *
//                   (k - first - second) / decay_step_size), or min_lr when
//                   decay_lr_rate or decay_step_size is 0.
//
// With no scheduler the lr is the optimizer's lr for every update; a
// scheduler overrides the optimizer's lr (WarmupCosineLR scales it).
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_CONFIG_LRSCHEDULE_H
#define DSRT_CONFIG_LRSCHEDULE_H

#include "config/DsConfig.h"

#include <cstdint>

namespace dsrt::config {

/// The learning rate DeepSpeed applies in optimizer update `step` (>= 0)
/// under schedule `s`, whose optimizer's lr is `lr` (dsrt's form: the
/// plan's lr schedule holds both).
double learningRate(const SchedulerConfig &s, double lr, int64_t step);

/// learningRate(cfg.scheduler, cfg.optimizer.lr, step).
double learningRate(const TrainConfig &cfg, int64_t step);

struct AdamBetas {
  double beta1, beta2;
};

/// The betas of update `step`. They are the optimizer's betas except under
/// OneCycle with cycle_momentum on an optimizer with betas (Adam, AdamW,
/// Lamb, Lion), where
/// DeepSpeed writes (momentum, 0.99) into the optimizer: beta1 cycles
/// inversely to the lr between cycle_max_mom and cycle_min_mom (cycle_min_mom
/// for update 0, as the constructor sets it), after the cycle it is
/// cycle_max_mom * (1 + decay_mom_rate * (k - first - second) /
/// decay_step_size), and beta2 is replaced by 0.99. SGD and Adagrad have no
/// betas, so DeepSpeed disables momentum cycling for them and so does this
/// function. dsrt's updates read it at step - 1, the lr's schedule index.
AdamBetas betasAt(const TrainConfig &cfg, int64_t step);

/// Whether the betas cycle: OneCycle with cycle_momentum on an optimizer
/// with betas (what a plan's LrSchedule.cycle_momentum says from format 9).
bool cyclesBetas(const TrainConfig &cfg);

/// OneCycle's betas of update `step` when they cycle (betasAt's cycling
/// branch; dsrt's form, from the plan's lr schedule).
AdamBetas cycledBetas(const SchedulerConfig &s, int64_t step);

} // namespace dsrt::config

#endif // DSRT_CONFIG_LRSCHEDULE_H
