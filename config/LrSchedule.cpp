//===- LrSchedule.cpp - DeepSpeed learning-rate schedules -----------------===//
//
// Each function mirrors the get_lr() of the matching lr_schedules.py class,
// evaluated at DeepSpeed's last_batch_iteration for the requested update (see
// LrSchedule.h for the step convention). Arithmetic follows Python's: true
// division in double precision, math.floor, math.log, math.cos.
//
//===----------------------------------------------------------------------===//
#include "config/LrSchedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace dsrt::config {
namespace {

constexpr double kPi = 3.14159265358979323846;

/// WarmupLR._get_gamma during warmup (t < W), W already clamped to >= 2.
/// The log form multiplies by a precomputed 1 / ln(W) as DeepSpeed does, so
/// results match it bit for bit.
double warmupGamma(const SchedulerConfig &s, double t, double w) {
  if (s.warmupType == "linear")
    return t / w;
  double inverseLogWarmup = 1.0 / std::log(w);
  return inverseLogWarmup * std::log(t + 1);
}

double warmupSteps(const SchedulerConfig &s) {
  return std::max(2.0, s.param("warmup_num_steps"));
}

/// WarmupLR and WarmupDecayLR.get_lr() at last_batch_iteration t >= 0.
double warmupLr(const SchedulerConfig &s, double t, bool decay) {
  double minLr = s.param("warmup_min_lr"), maxLr = s.param("warmup_max_lr");
  double w = warmupSteps(s);
  double gamma = 1.0;
  if (t < w) {
    gamma = warmupGamma(s, t, w);
  } else if (decay) {
    double total = s.param("total_num_steps");
    gamma = std::max(0.0, (total - t) / std::max(1.0, total - w));
  }
  return minLr + (maxLr - minLr) * gamma;
}

/// WarmupCosineLR.get_lr_ratio() at last_batch_iteration t >= 0.
double cosineRatio(const SchedulerConfig &s, double t) {
  double w = warmupSteps(s);
  if (t < w) {
    double minRatio = s.param("warmup_min_ratio");
    return minRatio + warmupGamma(s, t, w) * (1.0 - minRatio);
  }
  double realLast = t - w + 1;
  double realTotal = std::max(1.0, s.param("total_num_steps") - w);
  double progress = std::min(1.0, realLast / realTotal);
  double cosMin = s.param("cos_min_ratio");
  double ratio = (1 + std::cos(kPi * progress)) / 2;
  return std::max(0.0, cosMin + (1.0 - cosMin) * ratio);
}

/// OneCycle shape: first and second half sizes, as floats like DeepSpeed.
struct Cycle {
  double first, second, total;
};

Cycle cycleOf(const SchedulerConfig &s) {
  double first = s.param("cycle_first_step_size");
  double second = s.param("cycle_second_step_size");
  return {first, second, first + second};
}

/// OneCycle._get_scale_factor() for batch_iteration = last_batch_iteration
/// + 1 = k: position in the triangle, 0 at the ends, 1 at the peak.
double oneCycleScale(const SchedulerConfig &s, double k) {
  Cycle c = cycleOf(s);
  double stepRatio = c.first / c.total;
  double cycle = std::floor(1 + k / c.total);
  double x = 1.0 + k / c.total - cycle;
  double scale;
  double stairs;
  if (x <= stepRatio) {
    scale = x / stepRatio;
    stairs = s.param("cycle_first_stair_count");
  } else {
    scale = (x - 1) / (stepRatio - 1);
    stairs = s.param("cycle_second_stair_count");
  }
  // Stairs hold the value flat over equal parts of each half, quantised from
  // the integer offset in the cycle (as DeepSpeed does) so that the peak is
  // not lost to rounding.
  if (stairs > 0) {
    double inCycle = std::fmod(k, c.total);
    double position = inCycle <= c.first
                          ? inCycle * stairs / c.first
                          : (c.total - inCycle) * stairs / c.second;
    scale = std::floor(position) / stairs;
  }
  return scale;
}

/// Steps since the end of the cycle for OneCycle's decay phase, or a negative
/// value while still inside the cycle (DeepSpeed: t < total_size).
double decayIterations(const SchedulerConfig &s, int64_t step) {
  Cycle c = cycleOf(s);
  double t = double(step) - 1;
  return t < c.total ? -1.0 : t - c.total + 1;
}

double oneCycleLr(const SchedulerConfig &s, int64_t step) {
  double minLr = s.param("cycle_min_lr"), maxLr = s.param("cycle_max_lr");
  if (step == 0)
    return minLr;
  double decayIt = decayIterations(s, step);
  if (decayIt < 0)
    return minLr + (maxLr - minLr) * oneCycleScale(s, double(step));
  double rate = s.param("decay_lr_rate"), every = s.param("decay_step_size");
  if (rate == 0 || every == 0)
    return minLr;
  return minLr / (1 + rate * (decayIt / every));
}

double lrRangeTestLr(const SchedulerConfig &s, int64_t step) {
  double interval = double(step) / s.param("lr_range_test_step_size");
  if (s.staircase)
    interval = std::floor(interval);
  return s.param("lr_range_test_min_lr") *
         (1 + s.param("lr_range_test_step_rate") * interval);
}

void checkStep(int64_t step) {
  if (step < 0)
    throw std::out_of_range("optimizer step must be >= 0, got " +
                            std::to_string(step));
}

} // namespace

double learningRate(const SchedulerConfig &s, double lr, int64_t step) {
  checkStep(step);
  double t = double(step) - 1; // DeepSpeed's last_batch_iteration
  if (s.type.empty())
    return lr;
  if (s.type == "WarmupLR" || s.type == "WarmupDecayLR")
    return step == 0 ? s.param("warmup_min_lr")
                     : warmupLr(s, t, s.type == "WarmupDecayLR");
  if (s.type == "WarmupCosineLR")
    return step == 0 ? 0.0 : lr * cosineRatio(s, t);
  if (s.type == "OneCycle")
    return oneCycleLr(s, step);
  if (s.type == "LRRangeTest")
    return lrRangeTestLr(s, step);
  throw ConfigError("unknown scheduler type '" + s.type + "'");
}

double learningRate(const TrainConfig &cfg, int64_t step) {
  return learningRate(cfg.scheduler, cfg.optimizer.lr, step);
}

bool cyclesBetas(const TrainConfig &cfg) {
  // Only optimizers with betas: DeepSpeed turns cycle_momentum off for the
  // others ('betas' not in optimizer.defaults).
  const std::string &o = cfg.optimizer.type;
  return cfg.scheduler.type == "OneCycle" && cfg.scheduler.cycleMomentum && o != "SGD" &&
         o != "Adagrad";
}

AdamBetas cycledBetas(const SchedulerConfig &s, int64_t step) {
  checkStep(step);
  // OneCycle._initialize_momentum / get_mom(): beta2 is pinned to 0.99.
  double minMom = s.param("cycle_min_mom"), maxMom = s.param("cycle_max_mom");
  if (step == 0)
    return {minMom, 0.99};
  double decayIt = decayIterations(s, step);
  if (decayIt < 0)
    return {maxMom - (maxMom - minMom) * oneCycleScale(s, double(step)), 0.99};
  double rate = s.param("decay_mom_rate"), every = s.param("decay_step_size");
  if (rate == 0 || every == 0)
    return {maxMom, 0.99};
  return {maxMom * (1 + rate * (decayIt / every)), 0.99};
}

AdamBetas betasAt(const TrainConfig &cfg, int64_t step) {
  checkStep(step);
  if (!cyclesBetas(cfg))
    return {cfg.optimizer.beta1, cfg.optimizer.beta2};
  return cycledBetas(cfg.scheduler, step);
}

} // namespace dsrt::config
