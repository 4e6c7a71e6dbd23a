//===- FlopsProfiler.cpp - DeepSpeed's flops_profiler for a plan ----------===//
#include "runtime/train/FlopsProfiler.h"

#include "runtime/kernels/cpu/Kernels.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <type_traits>
#include <vector>

namespace dsrt::train {
namespace plan = dsc::plan;

namespace {

std::string fmt(const char *f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

/// 1.23 G, 456.00 M, 12.00 K (DeepSpeed's number_to_string).
std::string num(double v) {
  if (v >= 1e12)
    return fmt("%.2f T", v / 1e12);
  if (v >= 1e9)
    return fmt("%.2f G", v / 1e9);
  if (v >= 1e6)
    return fmt("%.2f M", v / 1e6);
  if (v >= 1e3)
    return fmt("%.2f K", v / 1e3);
  return fmt("%.0f", v);
}
std::string duration(double s) {
  if (s >= 1)
    return fmt("%.2f s", s);
  if (s >= 1e-3)
    return fmt("%.2f ms", s * 1e3);
  return fmt("%.2f us", s * 1e6);
}
std::string rate(double flops, double s) { return s > 0 ? num(flops / s) + "FLOPS" : "-"; }
std::string pct(double part, double whole) {
  return whole > 0 ? fmt("%.1f%%", 100.0 * part / whole) : "-";
}

/// "/h.0/attn/c_attn/MatMul" -> {"h.0", "attn", "c_attn"}: the module path
/// of an ONNX node (PyTorch's exporter names nodes after their module),
/// without the op's own name.
std::vector<std::string> modulePath(const std::string &source) {
  std::vector<std::string> parts;
  size_t at = 0;
  while (at <= source.size()) {
    size_t next = source.find('/', at);
    if (next == std::string::npos)
      next = source.size();
    if (next > at)
      parts.push_back(source.substr(at, next - at));
    at = next + 1;
  }
  if (!parts.empty())
    parts.pop_back(); // the node itself
  return parts;
}

struct Tally {
  double flops = 0, seconds = 0;
  int64_t calls = 0;
  size_t order = 0; // first seen, for the detailed tree
};

template <typename T> void matmulRuns(int64_t n, int reps, double &best) {
  std::vector<T> a(size_t(n * n)), b(size_t(n * n)), c(size_t(n * n));
  for (size_t i = 0; i < a.size(); ++i) {
    float v = float((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    if constexpr (std::is_same_v<T, float>) {
      a[i] = v;
      b[i] = -v;
    } else {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      a[i].bits = b[i].bits = uint16_t(bits >> 16);
    }
  }
  kernels::Shape s;
  s.rank = 2;
  s.dims[0] = s.dims[1] = n;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    cpu::matmul(a.data(), s, false, b.data(), s, false, c.data(), s);
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) // the first creates oneDNN's primitive and touches the pages
      best = std::min(best, dt);
  }
}

} // namespace

Peak measurePeak(const Executor &exec) {
  Peak p;
  if (!exec.backend().onHost()) {
    p.what = std::string("not measured on ") + exec.backend().deviceName() + " yet";
    return p;
  }
  // The dtype of most of the plan's matmul flops.
  double f32 = 0, b16 = 0, f16 = 0;
  const plan::Program &prog = exec.plan().program();
  auto scan = [&](const google::protobuf::RepeatedPtrField<plan::Instr> &list) {
    for (const plan::Instr &i : list)
      if ((i.op() == "nn.matmul" || i.op() == "nn.matmul_epilogue") && i.inputs_size() > 0) {
        plan::DType t = exec.plan().buffers(i.inputs(0)).dtype();
        (t == plan::BF16 ? b16 : t == plan::F16 ? f16 : f32) += i.flops();
      }
  };
  scan(prog.prologue());
  scan(prog.micro_batch());
  scan(prog.epilogue());
  const int64_t n = 1024;
  double best = 1e30;
  std::string dtype = "fp32";
  if (b16 > f32 && b16 >= f16) {
    dtype = "bf16";
    matmulRuns<kernels::Bf16>(n, 4, best);
  } else if (f16 > f32) {
    dtype = "fp16";
    matmulRuns<kernels::Fp16>(n, 4, best);
  } else {
    matmulRuns<float>(n, 4, best);
  }
  p.flops = 2.0 * double(n) * double(n) * double(n) / best;
  p.what = dtype + " GEMM " + std::to_string(n) + "^3 on " + std::to_string(cpu::numThreads()) +
           (cpu::numThreads() == 1 ? " thread" : " threads") + ", best of 3 (" +
           cpu::gemmBackend() + ")";
  return p;
}

FlopsProfile flopsProfile(Executor &exec, const config::FlopsProfilerConfig &cfg, int64_t step,
                          const Peak &peak, int64_t samplesPerStep) {
  static const char *phaseNames[] = {"fwd", "bwd", "step"};
  std::map<std::pair<std::string, int>, Tally> byOpPhase;
  const std::vector<Executor::Event> &events = exec.recorded();
  // Per phase: flops and the instructions' time; the step's wall time.
  double flops[3] = {0, 0, 0}, seconds[3] = {0, 0, 0};
  int64_t first = events.empty() ? 0 : events.front().startUs, last = first;
  std::map<std::string, Tally> byOp;
  std::map<std::string, Tally> byModule; // "" the model; "h.0", "h.0/attn", ...
  size_t order = 0;
  Tally unattributed;
  int maxDepth = 0;
  for (const Executor::Event &e : events) {
    const Instr &i = *e.instr;
    double dt = double(e.endUs - e.startUs) * 1e-6;
    int phase = exec.phaseOf(i, e.list);
    flops[phase] += i.flops;
    seconds[phase] += dt;
    first = std::min(first, e.startUs);
    last = std::max(last, e.endUs);
    Tally &o = byOp[i.op];
    o.flops += i.flops, o.seconds += dt, ++o.calls;
    Tally &op = byOpPhase[{i.op, phase}];
    op.flops += i.flops, op.seconds += dt, ++op.calls;
    if (i.source.empty()) {
      unattributed.flops += i.flops, unattributed.seconds += dt, ++unattributed.calls;
      continue;
    }
    std::vector<std::string> path = modulePath(i.source);
    maxDepth = std::max(maxDepth, int(path.size()));
    std::string key;
    for (size_t d = 0; d <= path.size(); ++d) {
      if (d)
        key += (d > 1 ? "/" : "") + path[d - 1];
      Tally &m = byModule[key];
      if (!m.calls)
        m.order = order++;
      m.flops += i.flops, m.seconds += dt, ++m.calls;
    }
  }
  const double model = flops[0] + flops[1];
  const double iter = double(last - first) * 1e-6;
  const double instrSeconds = seconds[0] + seconds[1] + seconds[2];
  // The model's flops: a data-parallel replica's ranks (its tp ranks and
  // pipeline stages) together.
  double replica = model;
  if (exec.worldSize() > 1)
    replica = exec.communicator().blockingAllReduceScalar(model, comm::ReduceOp::Sum) / exec.dp();
  int64_t params = 0;
  for (const Tensor *t : exec.weights())
    if (t->role == plan::PARAM)
      params += t->numel;

  std::string out;
  auto line = [&](const std::string &what, const std::string &value) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%-72s %s\n", what.c_str(), value.c_str());
    out += buf;
  };
  out += "\n-------------------------- dsrt flops profiler (flops_profiler) "
         "--------------------------\n";
  out += "Profile of step " + std::to_string(step) + " on world rank " +
         std::to_string(exec.worldRank()) +
         (exec.pipelined() ? " (pipeline stage " + std::to_string(exec.stage()) + " of " +
                                 std::to_string(exec.pp()) + ")"
                           : std::string()) +
         ". Flops: dsc's cost model of each instruction (the backward's and a recomputed "
         "forward's counted, not estimated); times: measured around each instruction.\n";
  line("world size:", std::to_string(exec.worldSize()));
  line("data parallel size:", std::to_string(exec.dp()));
  line("model parallel size (tp x pipeline stages):", std::to_string(exec.tp() * exec.pp()));
  line("batch size per rank:", std::to_string(exec.microBatchSize() * exec.microBatches()) +
                                   " (micro-batch " + std::to_string(exec.microBatchSize()) +
                                   " x " + std::to_string(exec.microBatches()) + ")");
  line("params per rank:", num(double(params)));
  line("fwd flops per rank:", num(flops[0]));
  line("bwd flops per rank:",
       num(flops[1]) + (flops[0] > 0 ? fmt(" (%.2f x fwd)", flops[1] / flops[0]) : ""));
  line("fwd+bwd flops per rank:", num(model));
  line("fwd+bwd flops of model (the ranks of a data-parallel replica):", num(replica));
  line("fwd latency:", duration(seconds[0]));
  line("fwd FLOPS per rank = fwd flops / fwd latency:", rate(flops[0], seconds[0]));
  line("bwd latency:", duration(seconds[1]));
  line("bwd FLOPS per rank = bwd flops / bwd latency:", rate(flops[1], seconds[1]));
  line("fwd+bwd FLOPS per rank = fwd+bwd flops / (fwd+bwd latency):",
       rate(model, seconds[0] + seconds[1]));
  line("step latency (lr, gradient exchange after the micro-batches, clipping, updates):",
       duration(seconds[2]));
  line("iter latency (the step's wall time; its instructions took " + duration(instrSeconds) +
           "):",
       duration(iter));
  line("FLOPS per rank = fwd+bwd flops / iter latency:", rate(model, iter));
  if (peak.flops > 0) {
    line("peak FLOPS per rank (measured: " + peak.what + "):", num(peak.flops) + "FLOPS");
    line("MFU = FLOPS per rank / peak:", iter > 0 ? pct(model / iter, peak.flops) : "-");
  } else {
    line("peak FLOPS per rank:", peak.what);
  }
  line("samples/second:", iter > 0 ? fmt("%.2f", double(samplesPerStep) / iter) : "-");

  char buf[512];
  out += "\n----------------------------- Aggregated profile per rank "
         "-----------------------------\n";
  out += "By op kind (fwd + bwd + step):\n";
  std::snprintf(buf, sizeof buf, "  %-26s %8s %12s %8s %12s %8s %16s\n", "op", "calls", "flops",
                "%flops", "time", "%time", "FLOPS");
  out += buf;
  std::vector<std::pair<std::string, Tally>> ops(byOp.begin(), byOp.end());
  std::stable_sort(ops.begin(), ops.end(),
                   [](auto &a, auto &b) { return a.second.seconds > b.second.seconds; });
  double allFlops = 0;
  for (auto &[op, t] : ops)
    allFlops += t.flops;
  for (auto &[op, t] : ops) {
    std::snprintf(buf, sizeof buf, "  %-26s %8lld %12s %8s %12s %8s %16s\n", op.c_str(),
                  (long long)t.calls, num(t.flops).c_str(), pct(t.flops, allFlops).c_str(),
                  duration(t.seconds).c_str(), pct(t.seconds, instrSeconds).c_str(),
                  t.flops > 0 ? rate(t.flops, t.seconds).c_str() : "");
    out += buf;
  }

  // Modules: the ONNX node paths cut at each depth (depth 0: the model).
  const int depthLimit = cfg.moduleDepth < 0 ? maxDepth : int(cfg.moduleDepth);
  const size_t top = size_t(cfg.topModules);
  out += "Top " + std::to_string(top) +
         " modules in flops and in time (fwd + bwd) at each depth (modules: the ONNX nodes' "
         "paths):\n";
  for (int d = 0; d <= depthLimit; ++d) {
    std::vector<std::pair<std::string, Tally>> at;
    for (auto &[key, t] : byModule) {
      int depth = key.empty() ? 0 : 1 + int(std::count(key.begin(), key.end(), '/'));
      if (depth == d)
        at.push_back({key.empty() ? "model" : key, t});
    }
    if (at.empty())
      break;
    auto list = [&](auto better, auto value) {
      std::stable_sort(at.begin(), at.end(), better);
      std::string s = "{";
      for (size_t k = 0; k < std::min(top, at.size()); ++k)
        s += (k ? ", '" : "'") + at[k].first + "': '" + value(at[k].second) + "'";
      return s + "}";
    };
    out += "depth " + std::to_string(d) + ":\n";
    out += "    flops - " +
           list([](auto &a, auto &b) { return a.second.flops > b.second.flops; },
                [](const Tally &t) { return num(t.flops); }) +
           "\n";
    out += "    time  - " +
           list([](auto &a, auto &b) { return a.second.seconds > b.second.seconds; },
                [](const Tally &t) { return duration(t.seconds); }) +
           "\n";
  }
  out += "Not from an ONNX node (optimizer updates, gradient sums, collectives and their "
         "waits): " + std::to_string(unattributed.calls) + " instruction runs, " +
         num(unattributed.flops) + " flops, " + duration(unattributed.seconds) + " (" +
         pct(unattributed.seconds, instrSeconds) + " of the instructions' time)\n";

  if (cfg.detailed) {
    out += "\n------------------------------ Detailed profile per rank "
           "------------------------------\n";
    out += "Each module (to depth " + std::to_string(depthLimit) +
           "): flops, share of the step's flops, time, share of the instructions' time, "
           "FLOPS\n";
    // A module after its parent, siblings in the order the step first ran
    // them: sort by the first-seen orders of the path's prefixes.
    auto rank = [&](const std::string &key) {
      std::vector<size_t> r;
      for (size_t at = 0; !key.empty(); ++at) {
        at = key.find('/', at);
        r.push_back(byModule.at(key.substr(0, at)).order);
        if (at == std::string::npos)
          break;
      }
      return r;
    };
    std::vector<std::pair<std::vector<size_t>, std::string>> tree;
    for (auto &[key, t] : byModule)
      tree.push_back({rank(key), key});
    std::sort(tree.begin(), tree.end());
    for (auto &[r, key] : tree) {
      const Tally &t = byModule.at(key);
      int depth = key.empty() ? 0 : 1 + int(std::count(key.begin(), key.end(), '/'));
      if (depth > depthLimit)
        continue;
      std::string name = std::string(size_t(2 * depth), ' ') +
                         (key.empty() ? "model" : key.substr(key.rfind('/') + 1));
      std::snprintf(buf, sizeof buf, "  %-40s %12s %8s %12s %8s %16s\n", name.c_str(),
                    num(t.flops).c_str(), pct(t.flops, allFlops).c_str(),
                    duration(t.seconds).c_str(), pct(t.seconds, instrSeconds).c_str(),
                    t.flops > 0 ? rate(t.flops, t.seconds).c_str() : "");
      out += buf;
    }
  }
  out += "------------------------------------------------------------------------------\n";

  auto g17 = [](double v) { return fmt("%.17g", v); };
  std::string csv = "kind,name,phase,calls,flops,seconds\n";
  int64_t phaseCalls[3] = {0, 0, 0};
  for (auto &[key, t] : byOpPhase) {
    phaseCalls[key.second] += t.calls;
    csv += "op," + key.first + "," + phaseNames[key.second] + "," + std::to_string(t.calls) +
           "," + g17(t.flops) + "," + g17(t.seconds) + "\n";
  }
  for (auto &[key, t] : byModule)
    csv += "module," + (key.empty() ? std::string("model") : key) + ",all," +
           std::to_string(t.calls) + "," + g17(t.flops) + "," + g17(t.seconds) + "\n";
  for (int ph = 0; ph < 3; ++ph)
    csv += std::string("phase,") + phaseNames[ph] + "," + phaseNames[ph] + "," +
           std::to_string(phaseCalls[ph]) + "," + g17(flops[ph]) + "," + g17(seconds[ph]) + "\n";
  csv += "peak,peak,all,0," + g17(peak.flops) + ",0\n";
  csv += "iter,iter,all,0,0," + g17(iter) + "\n";
  return {out, csv};
}

} // namespace dsrt::train
