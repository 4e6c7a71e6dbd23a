//===- Simulator.h - a plan's step time on a described machine --*- C++ -*-===//
//
// dsc --simulate: the cost model (each instruction's seconds on a Hardware)
// run over the plan's instruction streams, one stream per pipeline stage
// (the data- and tensor-parallel ranks of a stage run the same stream at
// the same time, so one stands for all). The streams run as dsrt runs
// them: instructions in list order; a collective starts where it is
// issued and completes at its dist.wait; a pipeline message arrives once
// both ends have posted it; a collective over the stages waits for all of
// them. What it leaves out is in docs/planning-at-scale.md ("The
// simulator").
//
// Link of a collective: the ranks of its group (dsrt's world order: tp
// innermost, then stages, then data-parallel indices) on one node use
// intra_node; spread over nodes, the ring's bandwidth is the lesser of
// intra_node's and k NICs' (k: the group's ranks per node, each with its
// NIC), at inter_node's latency. Times follow nccl-tests' bus-bandwidth
// convention with NCCL's ring factors (all-reduce 2 (n-1)/n of the bytes,
// all-gather and reduce-scatter (n-1)/n of the whole tensor); an
// all-reduce over several nodes takes the lesser of the ring's latency
// 2 (n-1) alpha and the tree's 2 (log2 nodes + k - 1) alpha.
//
// A CPU node (Hardware::cores) is shared: a rank has T = cores / local
// ranks threads (dsrt's launcher), and while b ranks compute, each runs
// at min(T, cores / b) cores, so four ranks on two cores take turns.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TARGET_SIM_SIMULATOR_H
#define DSC_TARGET_SIM_SIMULATOR_H

#include "target/sim/Hardware.h"

#include "plan.pb.h"

#include "llvm/Support/raw_ostream.h"

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace dsc::sim {

struct StageTimes {
  double finish = 0;    // when the stage's step ends
  double compute = 0;   // running kernels (at the node's shared speed)
  double comm = 0;      // collectives on the cores (no overlap) or waited for
  double pipeline = 0;  // waiting for a neighbour stage's message
  double flops = 0;     // the step's flops on one rank of the stage
  double modelFlops = 0; // the same without recomputation
};

/// One instruction of a stage's step as simulated (dsrt --timeline's
/// columns: the program list, its micro-batch repetition and index).
struct TimelineEvent {
  std::string list;
  int64_t micro = 0;
  int index = 0;
  std::string op;
  double start = 0, end = 0; // seconds from the step's start
  int64_t microBatch = 0;    // Instr.micro_batch and .phase (pipelines)
  int phase = 0;
};

struct Report {
  int dp = 1, tp = 1, pp = 1, ranks = 1, nodes = 1, threads = 0;
  double stepSeconds = 0;
  int64_t samplesPerStep = 0;
  double mfu = 0, hfu = 0;  // of the precision's peak, all ranks
  std::string peakDtype;
  std::vector<StageTimes> stages;
  /// Seconds by instruction kind on stage 0's rank, at full speed.
  std::map<std::string, double> byKind;
  /// Bytes each rank of stage 0 sends and receives per step, by group.
  std::map<std::string, double> commBytes;
  /// With SimulateOptions::timeline: each stage's instructions.
  std::vector<std::vector<TimelineEvent>> timeline;
};

class SimulationError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct SimulateOptions {
  /// The optimizer step simulated (a 1-bit optimizer's phases and
  /// first_step/last_step ranges are decided by it): past every warm-up.
  int64_t step = 1000000;
  /// Record every instruction's start and end (Report::timeline).
  bool timeline = false;
};

/// Writes `r.timeline` as dsrt --timeline's files, DIR/timeline.rank-R.csv
/// for the first rank R of each stage (tools/timeline/render_timeline.py
/// draws them). Throws std::runtime_error.
void writeTimeline(const Report &r, const std::string &dir);

Report simulate(const plan::Plan &plan, const Hardware &hw, const SimulateOptions &options = {});

void printReport(const Report &r, const Hardware &hw, llvm::raw_ostream &os);

/// "1.234 s", "12.345 ms", "12.3 us".
std::string durationText(double seconds);

} // namespace dsc::sim

#endif // DSC_TARGET_SIM_SIMULATOR_H
