//===- PlanManifest.h - manifest.txt: a plan explained before the run -----===//
#ifndef DSC_PASSES_PLANMANIFEST_H
#define DSC_PASSES_PLANMANIFEST_H

#include "plan.pb.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace dsc {

/// "1.35 MiB" (bytes, KiB, MiB or GiB).
std::string humanBytes(int64_t bytes);
/// Elements of a plan shape.
int64_t numel(const google::protobuf::RepeatedField<int64_t> &shape);
/// The manifest of one (stage's) plan.
void writeManifest(const plan::Plan &p, llvm::raw_ostream &os);

} // namespace dsc

#endif // DSC_PASSES_PLANMANIFEST_H
