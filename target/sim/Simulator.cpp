//===- Simulator.cpp - the cost model over a plan's instruction streams ---===//
#include "target/sim/Simulator.h"

#include "plan/ElementBytes.h"
#include "plan/StepRule.h"

#include "llvm/Support/Format.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <fstream>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

namespace dsc::sim {

namespace {

enum Axis { kDpAxis = 0, kPpAxis = 1, kTpAxis = 2 };

const char *axisName(uint32_t axis) {
  return axis == kPpAxis ? "pp" : axis == kTpAxis ? "tp" : "dp";
}

enum class Kind { Compute, Collective, Send, Recv, Wait };

Kind kindOf(const std::string &op) {
  if (op == "dist.all_reduce" || op == "dist.all_gather" || op == "dist.reduce_scatter" ||
      op == "dist.all_to_all")
    return Kind::Collective;
  if (op == "dist.send")
    return Kind::Send;
  if (op == "dist.recv")
    return Kind::Recv;
  if (op == "dist.wait")
    return Kind::Wait;
  return Kind::Compute;
}

/// Instructions whose flops run at the GEMM rate: the fused attention's
/// are its GEMMs but for the softmax's few per score element, an
/// epilogue's its product's (computeWork leaves out its adds).
bool isGemm(const std::string &op) {
  return op == "nn.matmul" || op == "nn.matmul_epilogue" || op == "nn.conv" || op == "nn.conv_input_grad" ||
         op == "nn.conv_weight_grad" || op == "nn.attention" || op == "nn.attention_grad";
}

std::string dtypeName(plan::DType d) {
  return d == plan::BF16 ? "bf16" : d == plan::F16 ? "f16" : "f32";
}

double bufferBytes(const plan::Plan &p, uint32_t index) {
  if (index >= uint32_t(p.buffers_size()))
    return 0;
  const plan::Buffer &b = p.buffers(int(index));
  double n = 1;
  for (int64_t d : b.shape())
    n *= double(d);
  return n * double(dsrt::plan_util::elementBytes(b.dtype()));
}

double sumBytes(const plan::Plan &p, const google::protobuf::RepeatedField<uint32_t> &ids) {
  double s = 0;
  for (uint32_t i : ids)
    s += bufferBytes(p, i);
  return s;
}

/// The placement of the world: dsrt's rank order (plan.proto, Plan.tp).
struct Layout {
  int dp = 1, tp = 1, pp = 1, ranks = 1, perNode = 1, nodes = 1, threads = 1;
  Layout(const Hardware &hw, int dp_, int tp_, int pp_)
      : dp(std::max(dp_, 1)), tp(std::max(tp_, 1)), pp(std::max(pp_, 1)) {
    ranks = dp * tp * pp;
    perNode = hw.devicesPerNode == 0 ? ranks : std::min(hw.devicesPerNode, ranks);
    nodes = (ranks + perNode - 1) / perNode;
    threads = hw.isCpu() ? std::max(1, hw.cores / perNode) : 1;
  }
};

/// What limits an instruction, for a CPU node's sharing: its seconds are
/// one core's, alone on the node, and a rank runs them faster with more
/// cores at the class's thread efficiency. Fixed: a link or a device's
/// own time, which the cores do not change.
enum class Class { Gemm, Memory, Elementwise, Fixed };

struct Work {
  double seconds = 0;
  Class cls = Class::Fixed;
};

/// How many one-core-alone seconds a rank of `L` gets through per second
/// of work `cls` while `busy` ranks of its node (itself included) work:
/// min(T, cores / busy) cores, each at the efficiency of that many cores
/// busy on the node (1 on one core, the file's thread_efficiency on all,
/// linear between). 1 on a device.
double speedOf(const Hardware &hw, const Layout &L, Class cls, double busy) {
  if (!hw.isCpu() || cls == Class::Fixed)
    return 1.0;
  const double cores = double(hw.cores), T = double(L.threads);
  busy = std::max(1.0, busy);
  const double mine = std::min(T, cores / busy), used = std::min(cores, busy * T);
  const double eff = hw.efficiency(cls == Class::Gemm     ? "gemm"
                                   : cls == Class::Memory ? "memory"
                                                          : "elementwise");
  const double e = cores > 1 ? 1.0 + (eff - 1.0) * (used - 1.0) / (cores - 1.0) : 1.0;
  return mine * e;
}

struct Hop {
  int nodes = 1, perNode = 1;
};

/// Where the group of stage `stage`'s first rank on `axis` lies; a
/// message's group is that rank and the first rank of stage `peer`.
Hop hopOf(const Layout &L, uint32_t axis, int64_t groupSize, int stage, int peer = -1) {
  std::map<int, int> perNode;
  const int base = stage * L.tp;
  if (peer >= 0) {
    ++perNode[base / L.perNode];
    ++perNode[peer * L.tp / L.perNode];
  }
  for (int64_t i = 0; peer < 0 && i < groupSize; ++i) {
    int64_t w = axis == kTpAxis   ? base + i
                : axis == kPpAxis ? i * L.tp
                                  : base + i * L.tp * L.pp;
    ++perNode[int(w / L.perNode)];
  }
  Hop h;
  h.nodes = int(perNode.size());
  for (auto &[node, k] : perNode)
    h.perNode = std::max(h.perNode, k);
  return h;
}

/// Bus bandwidth and latency of `op` over the hop.
std::pair<double, double> linkOf(const Hardware &hw, const Hop &h, const std::string &op) {
  auto intra = hw.intraNode.of(op);
  if (h.nodes <= 1)
    return intra;
  auto inter = hw.interNode.of(op);
  const double across = hw.interNode.aggregate ? double(h.perNode) * inter.first : inter.first;
  return {std::min(intra.first, across), inter.second};
}

double collectiveSeconds(const Hardware &hw, const std::string &op, int64_t n, double bytes,
                         const Hop &h) {
  if (n <= 1 && op != "dist.send" && op != "dist.recv")
    return 0;
  const auto [B, a] = linkOf(hw, h, op);
  const double f = double(n - 1) / double(n);
  if (op == "dist.all_reduce") {
    double ring = 2.0 * double(n - 1) * a + 2.0 * f * bytes / B;
    if (h.nodes > 1) {
      double tree = 2.0 * (std::log2(double(h.nodes)) + double(h.perNode - 1)) * a +
                    2.0 * f * bytes / B;
      ring = std::min(ring, tree);
    }
    return ring;
  }
  if (op == "dist.send" || op == "dist.recv")
    return a + bytes / B;
  return double(n - 1) * a + f * bytes / B;
}

/// The bytes a collective moves in nccl-tests' convention: the whole
/// tensor (an all-gather's output, the others' input).
double collectiveBytes(const plan::Instr &in, const plan::Plan &p) {
  if (in.op() == "dist.all_gather" || in.op() == "dist.recv")
    return sumBytes(p, in.outputs());
  return sumBytes(p, in.inputs());
}

/// The instruction's time on one core alone (a device: its time) and what
/// limits it: the longest of its arithmetic and its bytes.
Work computeWork(const plan::Instr &in, const plan::Plan &p, const Hardware &hw) {
  const std::string &op = in.op();
  double bytes = sumBytes(p, in.inputs()) + sumBytes(p, in.outputs());
  const Rate &mem = hw.cache.rate > 0 && bytes <= hw.cacheBytes ? hw.cache : hw.memory;
  Work w{mem.latency + bytes / mem.rate, Class::Memory};
  auto atLeast = [&](double seconds, Class cls) {
    if (seconds > w.seconds)
      w = {seconds, cls};
  };
  if (isGemm(op)) {
    plan::DType d = in.inputs_size() ? p.buffers(int(in.inputs(0))).dtype() : plan::F32;
    const Rate &r = hw.gemmRate(dtypeName(d));
    // An epilogue's bias and addend are added in the GEMM's registers: its
    // flops beyond the product cost no time of their own.
    double flops = in.flops();
    if (op == "nn.matmul_epilogue" && in.ints_size() == 4 && in.outputs_size())
      flops -= double(in.ints(2) + in.ints(3)) * bufferBytes(p, in.outputs(0)) /
               double(dsrt::plan_util::elementBytes(p.buffers(int(in.outputs(0))).dtype()));
    atLeast(r.latency + flops / r.rate, Class::Gemm);
  } else if (op == "tier.fetch" || op == "tier.store") {
    // The tile's homes in the host or NVMe tier (a fetch's inputs, a
    // store's outputs) are what crosses the link.
    bool nvme = false;
    double moved = 0;
    for (const auto *ids : {&in.inputs(), &in.outputs()})
      for (uint32_t i : *ids)
        if (i < uint32_t(p.buffers_size()) && p.buffers(int(i)).tier() != plan::ARENA) {
          nvme |= p.buffers(int(i)).tier() == plan::NVME;
          moved += bufferBytes(p, i);
        }
    if (nvme && hw.nvmeBandwidth > 0)
      w = {hw.memory.latency + moved / hw.nvmeBandwidth, Class::Fixed};
    else if (hw.hostBandwidth > 0)
      w = {hw.memory.latency + moved / hw.hostBandwidth, Class::Fixed};
  } else {
    atLeast(in.flops() / hw.vectorFlops, Class::Elementwise);
    if (auto it = hw.elementSeconds.find(op); it != hw.elementSeconds.end()) {
      uint32_t first = in.outputs_size() ? in.outputs(0) : in.inputs(0);
      double elements = bufferBytes(p, first) /
                        double(dsrt::plan_util::elementBytes(p.buffers(int(first)).dtype()));
      atLeast(elements * it->second, Class::Elementwise);
    }
  }
  w.seconds += hw.instructionSeconds;
  return w;
}

/// Does `in` run on optimizer step `step` (first_step/last_step and a
/// 1-bit optimizer's step classes)?
bool runsOn(const plan::Instr &in, const plan::Plan &p, int64_t step) {
  if (in.first_step() && step < in.first_step())
    return false;
  if (in.last_step() && step > in.last_step())
    return false;
  if (in.step_classes() && p.has_step_rule())
    return (in.step_classes() & dsrt::zeroOneRuleOf(p.step_rule()).classOf(step)) != 0;
  return true;
}

int64_t microBatchesOf(const plan::Plan &top, const plan::Plan &stage) {
  if (top.pp() > 1)
    return std::max<int64_t>(1, top.pipeline_micro_batches());
  return std::max<int64_t>(1, stage.program().micro_batches());
}

struct Pending {
  bool known = false;
  double at = 0;
  bool pipeline = false;
};

struct Where {
  const char *list;
  int64_t micro;
  int index;
};

struct Proc {
  int stage = 0;
  std::vector<Where> where; // each instruction's place in the program
  bool begun = false;       // the instruction at pc has started
  double begunAt = 0;
  std::vector<TimelineEvent> events;
  const plan::Plan *plan = nullptr;
  std::vector<const plan::Instr *> code;
  size_t pc = 0;
  double work = 0;
  bool working = false, workIsComm = false, done = false;
  Class workClass = Class::Fixed;
  double speed = 0;
  int64_t waiting = -1;
  std::unordered_map<int64_t, Pending> handles;
  double engineFree = 0;
  int64_t ppSeq = 0;
  StageTimes times;
};

struct Message {
  int proc;
  int64_t handle;
  double issued;
};

class Run {
public:
  Run(const plan::Plan &top, const Hardware &hw, const SimulateOptions &options)
      : top_(top), hw_(hw), record_(options.timeline),
        L_(hw, int(top.dp()), int(top.tp()), int(top.pp() > 1 ? top.pp() : 1)) {
    const int pp = L_.pp;
    procs_.resize(size_t(pp));
    for (int s = 0; s < pp; ++s) {
      Proc &p = procs_[size_t(s)];
      p.stage = s;
      p.plan = pp > 1 ? &top.stages(s) : &top;
      const plan::Program &prog = p.plan->program();
      auto add = [&](const google::protobuf::RepeatedPtrField<plan::Instr> &list,
                     const char *name, int64_t micro) {
        for (int i = 0; i < list.size(); ++i)
          if (runsOn(list[i], *p.plan, options.step)) {
            p.code.push_back(&list[i]);
            p.where.push_back({name, micro, i});
          }
      };
      add(prog.prologue(), "prologue", 0);
      for (int64_t m = 0; m < std::max<int64_t>(1, prog.micro_batches()); ++m)
        add(prog.micro_batch(), "micro_batch", m);
      add(prog.epilogue(), "epilogue", 0);
      for (const plan::Instr *in : p.code)
        p.times.flops += in->flops();
      p.times.modelFlops =
          p.times.flops - double(microBatchesOf(top, *p.plan)) * p.plan->recomputed_flops();
    }
  }

  Report run() {
    double t = 0;
    const double inf = std::numeric_limits<double>::infinity();
    for (;;) {
      for (size_t i = 0; i < procs_.size(); ++i)
        advance(int(i), t);
      bool allDone = true;
      double busy = 0;
      for (const Proc &p : procs_) {
        allDone &= p.done;
        if (p.working)
          busy += double(L_.dp * L_.tp);
      }
      if (allDone)
        break;
      // The node's cores are shared by the ranks working on it.
      const double onNode = busy * double(L_.perNode) / double(L_.ranks);
      for (Proc &p : procs_)
        p.speed = p.working ? speedOf(hw_, L_, p.workClass, onNode) : 0;
      double dt = inf;
      for (const Proc &p : procs_) {
        if (p.working)
          dt = std::min(dt, p.work / p.speed);
        else if (p.waiting >= 0) {
          const Pending &h = p.handles.at(p.waiting);
          if (h.known)
            dt = std::min(dt, std::max(0.0, h.at - t));
        }
      }
      if (dt == inf)
        throw SimulationError(deadlock());
      for (Proc &p : procs_) {
        if (p.working) {
          (p.workIsComm ? p.times.comm : p.times.compute) += dt;
          p.work -= dt * p.speed;
          if (p.work <= 1e-15) {
            p.working = false;
            retire(p, t + dt);
          }
        } else if (p.waiting >= 0) {
          const Pending &h = p.handles.at(p.waiting);
          (h.pipeline ? p.times.pipeline : p.times.comm) += dt;
          if (h.known && h.at <= t + dt) {
            p.waiting = -1;
            retire(p, t + dt);
          }
        }
      }
      t += dt;
    }
    Report r;
    r.dp = L_.dp, r.tp = L_.tp, r.pp = L_.pp, r.ranks = L_.ranks, r.nodes = L_.nodes;
    r.threads = hw_.isCpu() ? L_.threads : 0;
    r.stepSeconds = t;
    r.byKind = std::move(byKind_);
    r.commBytes = std::move(commBytes_);
    double model = 0, hardware = 0;
    for (Proc &p : procs_) {
      r.stages.push_back(p.times);
      r.timeline.push_back(std::move(p.events));
      model += p.times.modelFlops * L_.dp * L_.tp;
      hardware += p.times.flops * L_.dp * L_.tp;
    }
    const plan::Plan &first = *procs_[0].plan;
    r.peakDtype = first.precision() == plan::PRECISION_BF16   ? "bf16"
                  : first.precision() == plan::PRECISION_FP16 ? "f16"
                                                              : "f32";
    double peak = hw_.peak(r.peakDtype) *
                  (hw_.isCpu() ? double(hw_.cores) * L_.nodes : double(L_.ranks));
    if (t > 0) {
      r.mfu = model / (t * peak);
      r.hfu = hardware / (t * peak);
    }
    r.samplesPerStep = first.micro_batch_size() * microBatchesOf(top_, first) * L_.dp;
    return r;
  }

private:
  /// Runs proc `i`'s instructions that take no time, up to one that
  /// computes or waits.
  void advance(int i, double t) {
    Proc &p = procs_[size_t(i)];
    while (!p.working && p.waiting < 0 && !p.done) {
      if (p.pc == p.code.size()) {
        p.done = true;
        p.times.finish = t;
        return;
      }
      if (!p.begun) {
        p.begun = true;
        p.begunAt = t;
      }
      const plan::Instr &in = *p.code[p.pc];
      const Kind kind = kindOf(in.op());
      if (kind == Kind::Wait) {
        auto it = p.handles.find(in.ints_size() ? in.ints(0) : -1);
        if (it == p.handles.end() || (it->second.known && it->second.at <= t)) {
          retire(p, t);
          continue;
        }
        p.waiting = it->first;
        return;
      }
      if (kind == Kind::Compute) {
        Work w = computeWork(in, *p.plan, hw_);
        if (p.stage == 0)
          byKind_[in.op()] += w.seconds / speedOf(hw_, L_, w.cls, 1);
        startWork(p, w, false, t);
        continue;
      }
      const int64_t n = in.ints_size() ? in.ints(0) : 1;
      const int64_t handle = in.ints_size() ? in.ints(in.ints_size() - 1) : 0;
      const double bytes = collectiveBytes(in, *p.plan);
      const int64_t peer = in.ints_size() > 1 ? in.ints(1) : 1;
      const int other = int(((p.stage + peer) % L_.pp + L_.pp) % L_.pp);
      Hop hop = kind == Kind::Collective ? hopOf(L_, in.axis(), n, p.stage)
                                         : hopOf(L_, in.axis(), 2, p.stage, other);
      double s = collectiveSeconds(hw_, in.op(), n, bytes, hop);
      if (p.stage == 0) {
        byKind_[in.op() + " (" + axisName(in.axis()) + ")"] += s;
        commBytes_[axisName(in.axis())] += bytes;
      }
      if (kind == Kind::Collective && in.axis() != kPpAxis) {
        // The ranks of a data- or tensor-parallel group run the same
        // stream: they issue it together.
        if (hw_.commOverlapsCompute) {
          double start = std::max(t, p.engineFree);
          p.engineFree = start + s;
          p.handles[handle] = {true, start + s, false};
          retire(p, t);
        } else {
          p.handles[handle] = {true, 0, false};
          startWork(p, {s, Class::Fixed}, true, t);
        }
        continue;
      }
      retire(p, t);
      if (kind == Kind::Collective) {
        // Over the stages: complete when the last stage has issued it.
        p.handles[handle] = {false, 0, true};
        Rendezvous &rv = rendezvous_[p.ppSeq++];
        rv.latest = std::max(rv.latest, t);
        rv.seconds = std::max(rv.seconds, s);
        rv.waiters.push_back({i, handle, t});
        if (int(rv.waiters.size()) == L_.pp)
          for (const Message &w : rv.waiters)
            procs_[size_t(w.proc)].handles[w.handle] = {true, rv.latest + rv.seconds, true};
        continue;
      }
      // A pipeline message arrives once both ends have posted it.
      const int64_t tag = in.ints_size() > 2 ? in.ints(2) : 0;
      const bool send = kind == Kind::Send;
      auto key = send ? std::make_tuple(p.stage, other, tag) : std::make_tuple(other, p.stage, tag);
      auto &mine = (send ? sends_ : recvs_)[key];
      auto &theirs = (send ? recvs_ : sends_)[key];
      p.handles[handle] = {false, 0, true};
      if (theirs.empty()) {
        mine.push_back({i, handle, t});
        continue;
      }
      Message m = theirs.front();
      theirs.pop_front();
      double at = std::max(t, m.issued) + s;
      p.handles[handle] = {true, at, true};
      procs_[size_t(m.proc)].handles[m.handle] = {true, at, true};
    }
  }

  /// Ends the instruction at `pc` at time `end` (recorded for --timeline).
  void retire(Proc &p, double end) {
    if (record_) {
      const Where &w = p.where[p.pc];
      const plan::Instr &in = *p.code[p.pc];
      p.events.push_back({w.list, w.micro, w.index, in.op(), p.begunAt, end,
                          in.micro_batch(), int(in.phase())});
    }
    ++p.pc;
    p.begun = false;
  }

  void startWork(Proc &p, Work w, bool comm, double t) {
    if (w.seconds <= 0) {
      retire(p, t);
      return;
    }
    p.work = w.seconds;
    p.workClass = w.cls;
    p.working = true;
    p.workIsComm = comm;
  }

  std::string deadlock() const {
    std::string what = "the simulation stopped: every stage waits for another (";
    for (const Proc &p : procs_) {
      if (p.done)
        continue;
      what += "stage " + std::to_string(p.stage) + " at instruction " + std::to_string(p.pc) +
              " " + (p.pc < p.code.size() ? p.code[p.pc]->op() : "end") + "; ";
    }
    what.resize(what.size() - 2);
    return what + "): the plan's messages do not pair up";
  }

  struct Rendezvous {
    double latest = 0, seconds = 0;
    std::vector<Message> waiters;
  };

  const plan::Plan &top_;
  const Hardware &hw_;
  bool record_ = false;
  Layout L_;
  std::vector<Proc> procs_;
  std::map<std::tuple<int, int, int64_t>, std::deque<Message>> sends_, recvs_;
  std::map<int64_t, Rendezvous> rendezvous_;
  std::map<std::string, double> byKind_, commBytes_;
};

} // namespace

std::string durationText(double s) {
  char buf[32];
  if (s >= 1)
    std::snprintf(buf, sizeof buf, "%.3f s", s);
  else if (s >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  return buf;
}

namespace {

std::string sizeText(double bytes) {
  char buf[32];
  if (bytes >= 1e9)
    std::snprintf(buf, sizeof buf, "%.3f GB", bytes / 1e9);
  else if (bytes >= 1e6)
    std::snprintf(buf, sizeof buf, "%.3f MB", bytes / 1e6);
  else if (bytes >= 1e3)
    std::snprintf(buf, sizeof buf, "%.3f kB", bytes / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f bytes", bytes);
  return buf;
}

} // namespace

Report simulate(const plan::Plan &plan, const Hardware &hw, const SimulateOptions &options) {
  return Run(plan, hw, options).run();
}

void printReport(const Report &r, const Hardware &hw, llvm::raw_ostream &os) {
  os << "simulated on:     " << hw.name;
  if (!hw.path.empty())
    os << " (" << hw.path << ")";
  os << "\n";
  os << "ranks:            " << r.ranks << " (dp " << r.dp << " x pp " << r.pp << " x tp "
     << r.tp << ") on " << r.nodes << (r.nodes == 1 ? " node" : " nodes");
  if (r.threads)
    os << ", " << r.threads << (r.threads == 1 ? " thread" : " threads") << " per rank";
  os << "\n";
  os << "step time:        " << durationText(r.stepSeconds) << " predicted ("
     << llvm::format("%.2f", r.stepSeconds > 0 ? double(r.samplesPerStep) / r.stepSeconds : 0)
     << " samples/s, " << r.samplesPerStep << " samples per step)\n";
  os << "MFU:              " << llvm::format("%.1f%%", 100 * r.mfu) << " of the " << r.peakDtype
     << " peak (" << llvm::format("%.1f%%", 100 * r.hfu) << " counting recomputation)\n";
  os << "per stage:        stage    finish   computing  collectives  pipeline wait\n";
  for (size_t s = 0; s < r.stages.size(); ++s) {
    const StageTimes &st = r.stages[s];
    os << llvm::format("                  %5zu %9s %11s %12s %14s\n", s,
                       durationText(st.finish).c_str(), durationText(st.compute).c_str(),
                       durationText(st.comm).c_str(), durationText(st.pipeline).c_str());
  }
  std::vector<std::pair<double, std::string>> kinds;
  double total = 0;
  for (auto &[k, s] : r.byKind) {
    if (s <= 0)
      continue; // free on this hardware
    kinds.push_back({s, k});
    total += s;
  }
  std::sort(kinds.rbegin(), kinds.rend());
  os << "stage 0's time by instruction (one rank, alone on its node):\n";
  for (size_t i = 0; i < kinds.size() && i < 8; ++i)
    os << llvm::format("  %-28s %11s %5.1f%%\n", kinds[i].second.c_str(),
                       durationText(kinds[i].first).c_str(),
                       total > 0 ? 100 * kinds[i].first / total : 0.0);
  for (auto &[axis, bytes] : r.commBytes)
    os << "communication:    " << axis << " group: " << sizeText(bytes)
       << " per step through each rank of stage 0 (the collectives' whole tensors)\n";
}

} // namespace dsc::sim

namespace dsc::sim {

void writeTimeline(const Report &r, const std::string &dir) {
  for (size_t s = 0; s < r.timeline.size(); ++s) {
    const int rank = int(s) * r.tp;
    const std::string path = dir + "/timeline.rank-" + std::to_string(rank) + ".csv";
    std::ofstream out(path);
    out << "rank,list,micro,index,op,start_us,end_us,mb,phase\n";
    for (const TimelineEvent &e : r.timeline[s])
      out << rank << ',' << e.list << ',' << e.micro << ',' << e.index << ',' << e.op << ','
          << std::llround(e.start * 1e6) << ',' << std::llround(e.end * 1e6) << ','
          << e.microBatch << ',' << e.phase << '\n';
    if (!out.flush())
      throw std::runtime_error("cannot write " + path);
  }
}

} // namespace dsc::sim
