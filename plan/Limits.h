//===- Limits.h - what a plan may ask for -----------------------*- C++ -*-===//
//
// Bounds shared by dsc (its flags) and dsrt (plan validation, its flags and
// launcher); the ds_config's own (micro-batches, stages) are in DsConfig.h:
// far above any real run, far below what would overflow the arithmetic
// that follows (global micro-batch = ((step - 1) * M + m) * dp + rank).
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_PLAN_LIMITS_H
#define DSRT_PLAN_LIMITS_H

#include <cstdint>

namespace dsrt::limits {

/// dp, pp and the world of pp x dp ranks.
constexpr int64_t kMaxRanks = int64_t(1) << 16;
/// Optimizer steps of one dsrt run.
constexpr int64_t kMaxSteps = int64_t(1) << 40;
/// Local ranks per core that dsrt's launcher starts on one machine.
constexpr int kMaxRanksPerCore = 8;

} // namespace dsrt::limits

#endif // DSRT_PLAN_LIMITS_H
