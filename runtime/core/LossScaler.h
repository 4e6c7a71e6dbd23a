//===- LossScaler.h - DeepSpeed's fp16 loss scaling -------------*- C++ -*-===//
//
// The loss is multiplied by scale() before the backward pass; after it, the
// caller reduces "some gradient is inf or NaN" with MAX over every rank of
// the data-parallel and pipeline groups and passes it to update(), which
// says whether the step is applied. A skipped step changes neither the
// weights, the optimizer states and step counter, nor the lr schedule.
//
// Dynamic mode (fp16.loss_scale 0) is DeepSpeed's DynamicLossScaler
// .update_scale, bit for bit: deepspeed/runtime/fp16/loss_scaler.py at
// deepspeedai/DeepSpeed edaa7221267243c7be7fb49c5d5f5c4fb97b4641 (0.19.6),
// the scaler ZeRO stages 1-3 use. Static mode (loss_scale > 0) is its
// LossScaler: the scale never changes, an overflow still skips the step.
// docs/architecture.md "Loss scaling (fp16)" states the rules;
// test/runtime/core/loss_scaler_reference.py replays DeepSpeed's code.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_CORE_LOSSSCALER_H
#define DSRT_CORE_LOSSSCALER_H

#include "config/DsConfig.h"

#include <cstdint>
#include <stdexcept>

namespace dsrt {

/// The ds_config "fp16" keys that drive loss scaling (config::Fp16Config:
/// DeepSpeed's names and defaults, declared once for the config reader and
/// the scaler), and one setting of DeepSpeed's engine.
struct LossScalerConfig : config::Fp16Config {
  /// Not a ds_config key: DeepSpeed's engine leaves it at true, so an
  /// overflow at the minimum scale is an error instead of a skipped step.
  bool raiseErrorAtMinScale = true;
};

/// Everything a checkpoint needs to resume the scaler exactly (DeepSpeed
/// pickles cur_scale, cur_iter, last_overflow_iter and cur_hysteresis with
/// the scaler, and the engine's skipped_steps).
struct LossScalerState {
  double scale = 1;
  /// update() calls so far (DeepSpeed's cur_iter, 0-based iterations).
  int64_t iteration = 0;
  /// The iteration of the last overflow, -1 before any.
  int64_t lastOverflowIteration = -1;
  /// Overflows left before the scale halves (DeepSpeed's cur_hysteresis).
  int64_t hysteresis = 0;
  /// Steps skipped so far (DeepSpeed's engine.skipped_steps).
  int64_t skippedSteps = 0;
};

/// An overflow while the dynamic scale is already at min_loss_scale (and
/// raiseErrorAtMinScale). DeepSpeed raises "Current loss scale already at
/// minimum - cannot decrease scale anymore. Exiting run."; this says the same
/// and names the step (iteration + 1, the executor's numbering) and the
/// scale. The scaler's state is left as before the call.
class LossScaleError : public std::runtime_error {
public:
  LossScaleError(int64_t step, double scale);
  int64_t step;
  double scale;
};

class LossScaler {
public:
  /// Throws std::invalid_argument, naming the ds_config key, for a config
  /// DeepSpeed would reject or that could never lower the scale.
  explicit LossScaler(const LossScalerConfig &config = {});

  bool dynamic() const { return config_.lossScale == 0; }
  /// The factor the loss is multiplied by before the backward pass.
  double scale() const { return state_.scale; }
  /// Records this step's overflow flag (already reduced over all ranks) and
  /// moves the scale; returns whether the step's update is applied (false:
  /// skip the optimizer update and the lr-scheduler step). Throws
  /// LossScaleError where DeepSpeed raises.
  bool update(bool overflow);

  int64_t iteration() const { return state_.iteration; }
  int64_t lastOverflowIteration() const { return state_.lastOverflowIteration; }
  int64_t hysteresis() const { return state_.hysteresis; }
  int64_t skippedSteps() const { return state_.skippedSteps; }

  const LossScalerConfig &config() const { return config_; }
  LossScalerState state() const { return state_; }
  /// Resumes from state(); throws std::invalid_argument for a state this
  /// config could not have produced (a non-positive or non-finite scale, a
  /// static scale other than the config's, counters out of range).
  void restore(const LossScalerState &state);

private:
  LossScalerConfig config_;
  LossScalerState state_;
};

} // namespace dsrt

#endif // DSRT_CORE_LOSSSCALER_H
