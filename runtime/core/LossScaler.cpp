//===- LossScaler.cpp - DeepSpeed's fp16 loss scaling ---------------------===//
//
// update() follows DynamicLossScaler.update_scale statement by statement
// (deepspeed/runtime/fp16/loss_scaler.py at DeepSpeed
// edaa7221267243c7be7fb49c5d5f5c4fb97b4641); Python's floats are doubles and
// every value here (powers of two, an integer min_loss_scale, their halves
// and doubles) is exact in one, so the sequences agree bit for bit.
//
//===----------------------------------------------------------------------===//
#include "runtime/core/LossScaler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace dsrt {
namespace {

/// DeepSpeed's scale_factor, fixed at 2.0 (no ds_config key sets it).
constexpr double kScaleFactor = 2.0;

std::string formatScale(double scale) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", scale);
  return buf;
}

void require(bool ok, const std::string &message) {
  if (!ok)
    throw std::invalid_argument("fp16 loss scaling: " + message);
}

} // namespace

LossScaleError::LossScaleError(int64_t step, double scale)
    : std::runtime_error("step " + std::to_string(step) +
                         ": the gradients overflowed and the loss scale " + formatScale(scale) +
                         " is already at minimum (fp16.min_loss_scale) - cannot decrease "
                         "scale anymore"),
      step(step), scale(scale) {}

LossScaler::LossScaler(const LossScalerConfig &config) : config_(config) {
  require(std::isfinite(config.lossScale) && config.lossScale >= 0,
          "fp16.loss_scale must be a finite number >= 0 (0 enables dynamic loss scaling), not " +
              formatScale(config.lossScale));
  state_.hysteresis = config.hysteresis;
  if (!dynamic()) {
    state_.scale = config.lossScale;
    return;
  }
  // 2^power must be a normal double, as Python's 2**power is a float in
  // that range (DeepSpeed fails later, in update_scale, outside it).
  require(config.initialScalePower >= -1022 && config.initialScalePower <= 1023,
          "fp16.initial_scale_power must be in [-1022, 1023], not " +
              std::to_string(config.initialScalePower));
  // DeepSpeed rejects these two when scaling is dynamic (precision_config.py).
  require(config.lossScaleWindow > 0, "fp16.loss_scale_window must be > 0 when dynamic "
                                      "loss scaling is enabled (loss_scale=0), not " +
                                          std::to_string(config.lossScaleWindow));
  require(config.minLossScale > 0,
          "fp16.min_loss_scale must be > 0 when dynamic loss scaling is enabled "
          "(loss_scale=0), not " +
              formatScale(double(config.minLossScale)));
  // DeepSpeed accepts hysteresis <= 0 but then never lowers the scale (it
  // halves only when the hysteresis is exactly 1): every step would be
  // skipped forever.
  require(config.hysteresis >= 1,
          "fp16.hysteresis must be >= 1 (1: halve the scale at the first overflow), not " +
              std::to_string(config.hysteresis));
  state_.scale = std::ldexp(1.0, int(config.initialScalePower));
}

bool LossScaler::update(bool overflow) {
  LossScalerState &s = state_;
  if (dynamic()) {
    if (overflow) {
      if (config_.hysteresis == 1 || s.hysteresis == 1) {
        double floor = double(config_.minLossScale);
        if (s.scale == floor && config_.raiseErrorAtMinScale)
          throw LossScaleError(s.iteration + 1, s.scale);
        s.scale = std::max(s.scale / kScaleFactor, floor);
      } else {
        // Not reset when the scale halves: without consecutive_hysteresis
        // only a completed window refills it.
        --s.hysteresis;
      }
      s.lastOverflowIteration = s.iteration;
    } else {
      if (config_.consecutiveHysteresis)
        s.hysteresis = config_.hysteresis;
      // Counted from the last overflow (-1 before any: the first growth
      // comes after window + 1 clean steps, later ones after window).
      int64_t stableInterval = (s.iteration - s.lastOverflowIteration) - 1;
      if (stableInterval > 0 && stableInterval % config_.lossScaleWindow == 0) {
        if (!config_.consecutiveHysteresis)
          s.hysteresis = config_.hysteresis;
        s.scale *= kScaleFactor;
      }
    }
  }
  ++s.iteration;
  if (overflow)
    ++s.skippedSteps;
  return !overflow;
}

void LossScaler::restore(const LossScalerState &state) {
  require(std::isfinite(state.scale) && state.scale > 0,
          "a checkpoint's loss scale must be finite and > 0, not " + formatScale(state.scale));
  require(dynamic() || state.scale == config_.lossScale,
          "a checkpoint's loss scale " + formatScale(state.scale) +
              " is not the static fp16.loss_scale " + formatScale(config_.lossScale));
  require(state.iteration >= 0 && state.lastOverflowIteration >= -1 &&
              state.lastOverflowIteration < state.iteration && state.skippedSteps >= 0 &&
              state.skippedSteps <= state.iteration,
          "a checkpoint's loss scaler counters are inconsistent (iteration " +
              std::to_string(state.iteration) + ", last overflow " +
              std::to_string(state.lastOverflowIteration) + ", skipped " +
              std::to_string(state.skippedSteps) + ")");
  require(dynamic() ? state.hysteresis >= 1 && state.hysteresis <= config_.hysteresis
                    : state.hysteresis == config_.hysteresis,
          "a checkpoint's remaining hysteresis " + std::to_string(state.hysteresis) +
              " is not in [1, fp16.hysteresis = " + std::to_string(config_.hysteresis) + "]");
  state_ = state;
}

} // namespace dsrt
