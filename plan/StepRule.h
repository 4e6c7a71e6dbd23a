//===- StepRule.h - 0/1 Adam's step classes, from the step alone -*- C++ -*-===//
//
// DeepSpeed's ZeroOneAdam (edaa722 runtime/fp16/onebit/zoadam.py, step at
// lines 127-319) changes what each optimizer call does by counters it
// keeps per parameter: a variance step every `var_interval` calls (the
// interval doubling after `var_update_scaler` of them), a compressed-
// gradient step otherwise, and after `var_freeze_step` local steps with a
// momentum synchronisation every `local_step_interval` (doubling after
// `local_step_scaler` local steps, up to `local_step_clipper`). The
// counters move the same way on every call and every rank, so the class of
// a call is a pure function of its count: dsc plans every class's
// instructions and dsrt runs those of the current step's class (plan
// format 7: Plan.step_rule, Instr.step_classes). dsc's manifest, its
// train.zero_one_adam verifier and dsrt's kernel all read this one
// definition.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_PLAN_STEPRULE_H
#define DSRT_PLAN_STEPRULE_H

#include <algorithm>
#include <cstdint>
#include <string>

namespace dsrt {

/// What a call of 0/1 Adam does (bit flags: a sync step is also a local
/// step, so an instruction of the local steps runs on it too).
enum StepClass : uint32_t {
  kStepInit = 1,           ///< DeepSpeed's first call: allocates, changes nothing
  kStepVariance = 2,       ///< averaged gradient; m and v as Adam's
  kStepCompressedGrad = 4, ///< local gradient through the 1-bit all-reduce into m
  kStepLocal = 8,          ///< after the freeze: a local step on the local gradient
  kStepSync = 16,          ///< a local step that then synchronises the momenta
};
constexpr uint32_t kAllStepClasses = 31;

/// ZeroOneAdam's policy parameters (its constructor's), and `stepOffset`:
/// 1 where DeepSpeed's fp16 wrapper made the first call at construction.
struct ZeroOneRule {
  int64_t varFreezeStep = 100000;
  int64_t varUpdateScaler = 16;
  int64_t localStepScaler = 32678;
  int64_t localStepClipper = 16;
  int64_t stepOffset = 0;

  /// DeepSpeed's last unfrozen call: the freeze happens at the end of the
  /// first call after the initialising one whose count exceeds
  /// var_freeze_step.
  int64_t lastUnfrozenCall() const { return std::max<int64_t>(varFreezeStep + 1, 2); }

  /// The class of optimizer step `step` (the STEP buffer's value, from 1).
  uint32_t classOf(int64_t step) const {
    const int64_t t = step + stepOffset; // DeepSpeed's call count
    if (t <= 1)
      return kStepInit;
    const int64_t unfrozen = lastUnfrozenCall();
    if (t <= unfrozen) {
      // var_interval is 1 for calls 2 .. var_update_scaler + 1, then each
      // doubling lasts var_update_scaler multiples of the new interval
      // after the last variance call (0: it never doubles).
      if (varUpdateScaler <= 0)
        return kStepVariance;
      int64_t interval = 1, end = 1;
      for (;;) {
        const int64_t first = (end / interval + 1) * interval;
        const int64_t last = first + (varUpdateScaler - 1) * interval;
        if (t <= last || interval > (int64_t(1) << 40))
          return t % interval == 0 ? kStepVariance : kStepCompressedGrad;
        end = last;
        interval *= 2;
      }
    }
    // Frozen: local_step_interval doubles after every local_step_scaler
    // frozen calls (0: never), capped at local_step_clipper.
    const int64_t k = t - unfrozen - 1; // frozen calls before this one
    int64_t interval = 1;
    if (localStepScaler > 0)
      for (int64_t d = k / localStepScaler; d > 0 && interval < localStepClipper; --d)
        interval = std::min(localStepClipper, interval * 2);
    return t % interval == 0 ? (kStepLocal | kStepSync) : kStepLocal;
  }

  /// The first frozen optimizer step (the STEP value), where DeepSpeed
  /// zeroes the error buffers once.
  int64_t firstFrozenStep() const { return lastUnfrozenCall() + 1 - stepOffset; }
};

/// The rule a plan's StepRule message (plan.proto) holds; a template so
/// that this header needs no generated code.
template <typename Message> ZeroOneRule zeroOneRuleOf(const Message &r) {
  return ZeroOneRule{r.var_freeze_step(), r.var_update_scaler(), r.local_step_scaler(),
                     r.local_step_clipper(), r.step_offset()};
}

/// "variance", "compressed gradient", ... for one class bit.
inline const char *stepClassName(uint32_t bit) {
  switch (bit) {
  case kStepInit: return "initialising";
  case kStepVariance: return "variance";
  case kStepCompressedGrad: return "compressed-gradient";
  case kStepLocal: return "local";
  case kStepSync: return "sync";
  default: return "?";
  }
}

} // namespace dsrt

#endif // DSRT_PLAN_STEPRULE_H
