//===- PipelineItems.h - a pipeline stage's schedule, item by item -*- C++ -*-===//
//
// A format-13 pipeline stage holds each phase's instructions once
// (Program.pipeline) and the items that run them. dsrt, the simulator and
// the manifest read the step as one list of instructions in run order: the
// form a version-12 plan held. unrollPipeline writes it into the stage's
// prologue, in memory, so that nothing downstream changes.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_PLAN_PIPELINEITEMS_H
#define DSRT_PLAN_PIPELINEITEMS_H

#include "plan.pb.h"

#include <string>

namespace dsrt {

/// Unrolls `stage`'s Program.pipeline into its prologue: the prologue, each
/// item's instructions (slotted buffers replaced by the item's slot's
/// copies, which are appended to the buffers; micro_batch and phase set;
/// load_batch reading the item's micro-batch; each body send's dist.wait
/// moved to before the next send on its channel, or after the last item),
/// then the epilogue. The schedule is then cleared. Returns what is wrong
/// with a malformed schedule ("" when nothing is); a stage without a
/// schedule is left as it is.
std::string unrollPipeline(dsc::plan::Plan &stage);

} // namespace dsrt

#endif
