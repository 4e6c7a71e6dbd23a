//===- FlopsProfiler.h - DeepSpeed's flops_profiler for a plan ---*- C++ -*-===//
//
// The report of one profiled step (flops_profiler.profile_step): the flops
// of each instruction (dsc's cost model, Instr.flops, per run) against its
// measured time (the executor's recorded step), split as DeepSpeed splits a
// step into forward, backward and step, by op kind and by module (the ONNX
// node path each instruction comes from, Instr.source, cut at a depth), with
// the achieved FLOP/s and the MFU against a GEMM peak measured on this rank.
//
// Unlike DeepSpeed's profiler, which times the forward module by module and
// takes the backward to cost 2 x the forward (+ recompute_fwd_factor), the
// backward's and the recomputed forward's flops are the plan's own
// instructions, counted and timed like the forward's.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_TRAIN_FLOPSPROFILER_H
#define DSRT_TRAIN_FLOPSPROFILER_H

#include "config/DsConfig.h"
#include "runtime/core/Executor.h"

#include <string>

namespace dsrt::train {

/// A GEMM's achieved FLOP/s on this rank's kernel threads: the best of a few
/// runs of an n x n x n product in the dtype most of the plan's matmul
/// flops use (the peak the MFU is stated against), and what was run.
struct Peak {
  double flops = 0; // FLOP/s; 0: not measured
  std::string what;
};
Peak measurePeak(const Executor &exec);

/// The report of the step `exec` recorded (Executor::recordStep), every
/// rank taking part (the model's flops are summed over a data-parallel
/// replica's ranks). `samplesPerStep`: the global batch.
/// The report as DeepSpeed prints it, and the same figures unrounded as
/// CSV (flops_profile.csv: kind,name,phase,calls,flops,seconds; kind op per
/// op kind and phase, module per module path, phase per phase).
struct FlopsProfile {
  std::string report;
  std::string csv;
};
FlopsProfile flopsProfile(Executor &exec, const config::FlopsProfilerConfig &cfg, int64_t step,
                          const Peak &peak, int64_t samplesPerStep);

} // namespace dsrt::train

#endif // DSRT_TRAIN_FLOPSPROFILER_H
