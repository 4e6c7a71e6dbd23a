//===- Hardware.h - what a machine achieves, for the cost model -*- C++ -*-===//
//
// A hardware file (hardware/*.json) says what one rank's device achieves
// and what its links carry, in the units people quote them in: TFLOP/s per
// GEMM dtype, GB/s of memory, nccl-tests' bus bandwidth of each link. The
// cost model (CostModel.h) turns every instruction of a plan into seconds
// with it. Its keys, with their units in their names:
//
//   name, source                  what it describes and where the figures come from
//   devices_per_node              ranks per node (0: every rank on one node)
//   cores                         a CPU node: the cores its ranks share; then
//                                 every rate is one core's (dsrt gives a rank
//                                 cores / local ranks threads)
//   thread_efficiency             {gemm, memory, elementwise}: a CPU rank on
//                                 T > 1 threads reaches T x this x one core's
//                                 rate (each 1 when absent)
//   peak_tflops.{f32,bf16,f16}    the data sheet's peak, for MFU
//   gemm.{f32,bf16,f16}           {tflops, latency_us}: a GEMM of F flops takes
//                                 latency + F / tflops (Hockney's r_inf, n_1/2)
//   memory                        {gbps, latency_us}: every other instruction
//                                 takes latency + bytes / gbps (or its flops
//                                 at vector_tflops, whichever is longer)
//   cache                         {bytes, gbps, latency_us}, optional: an
//                                 instruction moving at most `bytes` runs at
//                                 the cache's rate instead (a CPU's L3)
//   vector_tflops                 elementwise arithmetic
//   elementwise_ns                {INSTRUCTION: ns}, optional: what one element
//                                 of these instructions' output costs when
//                                 their arithmetic, not their bytes, sets
//                                 their time (GELU's erf, dropout's random
//                                 bits), measured; names are plan instructions
//   instruction_us                the runtime's own cost per instruction
//   intra_node, inter_node        {bus_gbps, latency_us}: nccl-tests' bus
//                                 bandwidth; inter_node's is one device's NIC.
//                                 Optional objects all_reduce, all_gather,
//                                 send ({bus_gbps, latency_us}) replace the
//                                 link's own for that collective (MPI on a
//                                 CPU adds while it moves); reduce_scatter
//                                 takes all_reduce's, all_to_all all_gather's;
//                                 inter_node's `aggregate` (default true):
//                                 false when the node's devices do not send
//                                 side by side (a host-staged scale-out)
//   host_gbps, nvme_gbps          offload tiers (tier.fetch / tier.store)
//   comm_overlaps_compute         collectives run beside the kernels (a GPU's
//                                 NCCL stream) or on the same cores (MPI on a
//                                 CPU: the copies are the cores' work)
//
// Every key is checked: an unknown one is an error with the nearest known
// key, a missing one an error naming it, a negative or zero rate an error.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TARGET_SIM_HARDWARE_H
#define DSC_TARGET_SIM_HARDWARE_H

#include <map>
#include <stdexcept>
#include <string>

namespace dsc::sim {

/// A resource that takes `latency` seconds plus its work at `rate` per
/// second.
struct Rate {
  double rate = 0;    // flop/s or bytes/s
  double latency = 0; // s
  double seconds(double work) const { return latency + work / rate; }
};

struct Link {
  double busBandwidth = 0; // bytes/s, as nccl-tests' busbw
  double latency = 0;      // s per algorithm step
  /// inter_node only: a node's devices move a collective's traffic out of
  /// the node side by side, each through its own NIC (NCCL's rings and
  /// trees), so the node carries devices-per-node times busBandwidth.
  /// False: a ring crosses nodes at busBandwidth alone (a scale-out staged
  /// through host memory, such as HCCL over a host NIC without
  /// Gaudi-direct).
  bool aggregate = true;
  /// Per collective ("all_reduce", "all_gather", "send"), when measured apart.
  std::map<std::string, std::pair<double, double>> byCollective;
  /// The bandwidth and latency of an instruction ("dist.reduce_scatter").
  std::pair<double, double> of(const std::string &op) const;
};

struct Hardware {
  std::string name, source, path;
  int devicesPerNode = 0;
  int cores = 0;
  /// By class: "gemm", "memory", "elementwise" (1 when absent).
  std::map<std::string, double> threadEfficiency;
  double efficiency(const std::string &cls) const {
    auto it = threadEfficiency.find(cls);
    return it == threadEfficiency.end() ? 1.0 : it->second;
  }
  std::map<std::string, double> peakFlops; // "f32", "bf16", "f16"
  std::map<std::string, Rate> gemm;
  Rate memory;
  Rate cache;               // rate 0: none
  double cacheBytes = 0;
  double vectorFlops = 0;
  std::map<std::string, double> elementSeconds; // by instruction name
  double instructionSeconds = 0;
  Link intraNode, interNode;
  double hostBandwidth = 0, nvmeBandwidth = 0;
  bool commOverlapsCompute = true;

  bool isCpu() const { return cores > 0; }
  /// The GEMM rate of a dtype ("f32", "bf16", "f16"); f16 falls back to
  /// bf16's and the other way round.
  const Rate &gemmRate(const std::string &dtype) const;
  double peak(const std::string &dtype) const;
};

class HardwareError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Reads a hardware file. Throws HardwareError naming the file and the key.
Hardware readHardware(const std::string &path);
/// `nameOrPath` itself when it is a file; otherwise hardware/NAME.json of
/// dsc's source tree, when that exists (else `nameOrPath`, whose reading
/// then fails naming it).
std::string resolveHardware(const std::string &nameOrPath);
/// The names of the source tree's hardware files ("gaudi2, h100-sxm").
std::string shippedHardware();
/// The same from its text (`source` names it in errors).
Hardware parseHardware(const std::string &text, const std::string &source);

} // namespace dsc::sim

#endif // DSC_TARGET_SIM_HARDWARE_H
