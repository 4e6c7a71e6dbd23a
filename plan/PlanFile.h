//===- PlanFile.h - reading plan.pb, checked --------------------*- C++ -*-===//
//
// The one reader of a plan directory's plan.pb, for the executor and the
// launcher: a regular file of at most kMaxPlanFileBytes, a format version
// this dsrt runs (Version.h), bytes that match plan.sha256, and no field
// this dsrt's plan.proto does not define. And the one rule for the ranks a
// plan runs on (planShape).
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_PLAN_PLANFILE_H
#define DSRT_PLAN_PLANFILE_H

#include "plan.pb.h"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace dsrt {

/// A plan directory that cannot be run; the message names the file.
class PlanError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// plan.pb's size (its constants included; weights travel apart).
constexpr uint64_t kMaxPlanFileBytes = uint64_t(1) << 30;
/// dp, pp, tp and the world of pp x dp x tp ranks.
constexpr int64_t kMaxPlanRanks = int64_t(1) << 16;

struct PlanFile {
  dsc::plan::Plan plan;
  std::string weightsSha256; // what plan.sha256 says of weights.safetensors
};

/// What to do about a file of plan directory `dir` that differs from its
/// checksum, or a checksum list that cannot be used.
std::string planChecksumHint(const std::string &dir);

/// Reads and checks DIR/plan.pb (see above). Throws PlanError.
PlanFile readPlanFile(const std::string &dir);

/// The ranks a plan runs on: dp data-parallel indices (a pipeline's from
/// its first stage when the top level has none), pp stages, tp
/// tensor-parallel ranks, each at least 1, and pp x dp x tp at most
/// kMaxPlanRanks (else PlanError naming `where`). World rank w is tp rank
/// w % tp of stage (w / tp) % pp of dp index (w / tp) / pp.
struct PlanShape {
  uint32_t dp = 1, pp = 1, tp = 1;
  uint32_t ranks() const { return dp * pp * tp; }
};
PlanShape planShape(const dsc::plan::Plan &top, const std::string &where);

} // namespace dsrt

#endif // DSRT_PLAN_PLANFILE_H
