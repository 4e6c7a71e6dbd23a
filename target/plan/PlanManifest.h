//===- PlanManifest.h - manifest.txt: a plan explained before the run -----===//
#ifndef DSC_TARGET_PLAN_PLANMANIFEST_H
#define DSC_TARGET_PLAN_PLANMANIFEST_H

#include "config/DsConfig.h"
#include "plan.pb.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace dsc {

/// "1.35 MiB" (bytes, KiB, MiB or GiB).
std::string humanBytes(int64_t bytes);
/// Elements of a plan shape.
int64_t numel(const google::protobuf::RepeatedField<int64_t> &shape);
/// The manifest of one (stage's) plan compiled with `cfg`.
void writeManifest(const plan::Plan &p, const dsrt::config::TrainConfig &cfg,
                   llvm::raw_ostream &os);

} // namespace dsc

#endif // DSC_TARGET_PLAN_PLANMANIFEST_H
