//===- ExecutorRun.cpp - running a step: lists, timeline, profile --------===//
#include "runtime/core/Executor.h"
#include "runtime/core/Tier.h"
#include "config/LrSchedule.h"

#include "io/FileUtil.h"
#include "runtime/kernels/cpu/Kernels.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>

#include <unistd.h>

namespace dsrt {
namespace plan = dsc::plan;

double Executor::globalLoss() {
  if (pp_ > 1) // the last stage's ranks hold it (each tp rank alike); the others add 0
    return world_->blockingAllReduceScalar(hasLoss_ ? double(loss()) : 0.0, comm::ReduceOp::Sum) /
           (dp_ * tp_);
  return dp_ > 1 ? comm_->blockingAllReduceScalar(loss(), comm::ReduceOp::Avg) : loss();
}

static int64_t nowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void Executor::recordTimeline(int64_t step) {
  timelineStep_ = step;
  timeline_.clear();
  timeline_.reserve(prologue_.size() + micro_.size() * size_t(microBatches()) +
                    epilogue_.size());
}

/// The process's resident set in bytes (/proc/self/statm), 0 where it
/// cannot be read.
static uint64_t residentBytesNow() {
  std::FILE *f = std::fopen("/proc/self/statm", "r");
  if (!f)
    return 0;
  unsigned long long size = 0, resident = 0;
  int got = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  static const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  return got == 2 ? uint64_t(resident) * page : 0;
}

void Executor::runList(const std::vector<Instr> &list, int which, int64_t micro) {
  if (!recording_)
    return runList(list, which);
  for (size_t k = 0; k < list.size(); ++k) {
    const Instr &i = list[k];
    int64_t t0 = nowUs();
    i.run(i, ctx_);
    backend_->synchronize(); // the kernel's end, not its launch
    progressComms();
    int64_t t1 = nowUs();
    // The resident set for --timeline's memory columns only: reading
    // /proc costs a file open per instruction, which the flops profiler's
    // wall time of its step should not include.
    timeline_.push_back({&i, which, micro, int64_t(k), t0, t1,
                         ctx_.step == timelineStep_ ? residentBytesNow() : 0});
    if (phaseTiming_)
      addPhaseTime(i, which, double(t1 - t0) * 1e-6);
  }
}

std::vector<uint64_t> Executor::plannedBytes() const {
  // Each activation's first and last event (a view's are its base's: the
  // bytes are in use from the first to the last of either); the others are
  // model state, inputs or constants, which the plan lays out before the
  // activations.
  auto bytesOf = [](const Tensor *t) { return t->viewOf ? t->viewOf : t; };
  std::map<const Tensor *, std::pair<size_t, size_t>> span;
  for (size_t k = 0; k < timeline_.size(); ++k) {
    const Instr &i = *timeline_[k].instr;
    for (const auto *list : {&i.in, &i.out})
      for (const Tensor *t : *list) {
        t = bytesOf(t);
        if (t->role != plan::ACTIVATION || t->tier != plan::ARENA)
          continue;
        auto [it, fresh] = span.try_emplace(t, k, k);
        if (!fresh)
          it->second.second = k;
      }
  }
  // What the host reads after the step (the loss, the gradient norm, the
  // lr: the step function's results) is in use to its end.
  if (!timeline_.empty())
    for (uint32_t read : {plan_.loss_buffer(), plan_.grad_norm_buffer(), plan_.lr_buffer()})
      if (read < tensors_.size())
        if (auto it = span.find(bytesOf(&tensors_[read])); it != span.end())
          it->second.second = timeline_.size() - 1;
  using Live = std::pair<size_t, std::pair<uint64_t, uint64_t>>; // last event, byte range
  std::vector<std::vector<Live>> starting(timeline_.size());
  // A collective holds its operands, and its staging bytes, until its
  // dist.wait (memory-plan's lifetimes): the communicator works in them.
  std::map<int64_t, size_t> open; // handle -> the collective's event
  for (size_t k = 0; k < timeline_.size(); ++k) {
    const Instr &i = *timeline_[k].instr;
    if (i.op == "dist.wait") {
      auto started = open.find(i.ints[0]);
      if (started == open.end())
        continue;
      const Instr &c = *timeline_[started->second].instr;
      for (const auto *list : {&c.in, &c.out})
        for (const Tensor *t : *list)
          if (auto it = span.find(bytesOf(t)); it != span.end())
            it->second.second = std::max(it->second.second, k);
      if (c.stagingBytes)
        starting[started->second].push_back(
            {k, {c.stagingOffset, c.stagingOffset + c.stagingBytes}});
      open.erase(started);
    } else if (i.op == "dist.send" || i.op == "dist.recv") {
      open[i.ints[3]] = k;
    } else if (i.collective && !i.comm.empty()) {
      open[i.ints.back()] = k;
    }
  }
  for (auto &[t, s] : span)
    starting[s.first].push_back({s.second, {t->offset, t->offset + t->bytes()}});
  std::vector<Live> live;
  std::vector<uint64_t> out(timeline_.size());
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (size_t k = 0; k < timeline_.size(); ++k) {
    live.insert(live.end(), starting[k].begin(), starting[k].end());
    live.erase(std::remove_if(live.begin(), live.end(), [&](auto &l) { return l.first < k; }),
               live.end());
    ranges.clear();
    for (auto &l : live)
      ranges.push_back(l.second);
    std::sort(ranges.begin(), ranges.end());
    uint64_t bytes = 0, end = 0;
    for (auto &[a, b] : ranges) {
      if (b <= end)
        continue;
      bytes += b - std::max(a, end);
      end = b;
    }
    out[k] = plan_.persistent_bytes() + bytes;
  }
  return out;
}

void Executor::writeTimeline(const std::string &path) const {
  static const char *lists[] = {"prologue", "micro_batch", "epilogue"};
  std::string text = "rank,list,micro,index,op,start_us,end_us,mb,phase,planned_bytes,"
                     "arena_bytes,rss_bytes\n";
  std::string rank = std::to_string(world_->rank());
  std::vector<uint64_t> planned = plannedBytes();
  for (size_t k = 0; k < timeline_.size(); ++k) {
    const Event &e = timeline_[k];
    text += rank + "," + lists[e.list] + "," + std::to_string(e.micro) + "," +
            std::to_string(e.index) + "," + e.instr->op + "," + std::to_string(e.startUs) + "," +
            std::to_string(e.endUs) + "," +
            std::to_string(pp_ > 1 ? e.instr->microBatch : e.micro) + "," +
            std::to_string(e.instr->phase) + "," + std::to_string(planned[k]) + "," +
            std::to_string(plan_.arena_bytes()) + "," + std::to_string(e.rssBytes) + "\n";
  }
  io::writeFileAtomically(path, {{text.data(), text.size()}});
}

void Executor::addPhaseTime(const Instr &i, int list, double seconds) {
  int phase = phaseOf(i, list);
  phaseSeconds_[phase == 2 ? 3 : phase] += seconds;
  // The backward's collectives and waits (DeepSpeed's bwd_allreduce).
  if (phase == 1 && i.collective)
    phaseSeconds_[2] += seconds;
}

void Executor::runList(const std::vector<Instr> &list, int which) {
  if (phaseTiming_ && !profile_) {
    // wall_clock_breakdown: each instruction's time to its phase (on a
    // GPU its launch: the phases' device time needs --profile).
    for (const Instr &i : list) {
      auto t0 = std::chrono::steady_clock::now();
      i.run(i, ctx_);
      progressComms();
      addPhaseTime(i, which,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return;
  }
  // While a collective is pending, let it advance between kernels.
  if (!profile_) {
    for (const Instr &i : list) {
      i.run(i, ctx_);
      progressComms();
    }
    return;
  }
  if (backend_->timesItsKernels()) {
    ProfileTimes times{opTime_, instrTime_, deviceIdle_};
    backend_->runTimed(list, times);
    return;
  }
  for (const Instr &i : list) {
    auto t0 = std::chrono::steady_clock::now();
    i.run(i, ctx_);
    progressComms();
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (phaseTiming_)
      addPhaseTime(i, which, dt);
    auto &slot = opTime_[i.opId];
    ++slot.first;
    slot.second += dt;
    instrTime_[&i] += dt;
  }
}

static std::string shapeText(const Tensor *t) {
  std::string s = plan::DType_Name(t->dtype) + "[";
  for (int d = 0; d < t->shape.rank; ++d)
    s += (d ? "x" : "") + std::to_string(t->shape.dims[d]);
  return s + "]";
}

void Executor::printProfile(std::FILE *out) const {
  double total = 0;
  for (auto &[calls, seconds] : opTime_)
    total += seconds;
  std::vector<std::pair<double, int>> rows; // seconds, op id
  for (size_t id = 0; id < opTime_.size(); ++id)
    if (opTime_[id].first)
      rows.push_back({opTime_[id].second, int(id)});
  std::sort(rows.rbegin(), rows.rend());
  if (!backend_->onHost())
    std::fprintf(out,
                 "%s time by op kind (the device's events around each instruction%s); it "
                 "waited %.3f s between instructions (%.1f%% of its time: launches, host work "
                 "and synchronizations)\n",
                 backend_->deviceName().c_str(),
                 profileSkippedFirst_ ? ", the first step left out" : "", deviceIdle_,
                 100.0 * deviceIdle_ / std::max(total + deviceIdle_, 1e-12));
  std::fprintf(out, "%-24s %10s %10s %7s\n", "op", "calls", "seconds", "share");
  for (auto &[sec, id] : rows)
    std::fprintf(out, "%-24s %10lld %10.3f %6.1f%%\n",
                 std::string(kPlanInstructions[id]).c_str(), (long long)opTime_[id].first, sec,
                 100.0 * sec / std::max(total, 1e-12));
  int masks = 0, casts = 0;
  for (const auto *list : {&prologue_, &micro_, &epilogue_})
    for (const Instr &i : *list)
      if (i.fused.absorbed)
        ++(i.op == "nn.cast" ? casts : masks);
  if (masks)
    std::fprintf(out,
                 "%d scale and mask instructions run inside their attention softmax (counted "
                 "there)\n",
                 masks);
  if (casts)
    std::fprintf(out,
                 "%d casts run inside their cross-entropy and its gradient (counted there)\n",
                 casts);
  // The instructions that took longest, with their operands: where a
  // kernel is slower than its bytes or flops say, it shows here.
  std::vector<std::pair<double, const Instr *>> slow;
  for (auto &[i, sec] : instrTime_)
    slow.push_back({sec, i});
  size_t top = std::min<size_t>(slow.size(), 15);
  std::partial_sort(slow.begin(), slow.begin() + top, slow.end(),
                    [](auto &a, auto &b) { return a.first > b.first; });
  if (top)
    std::fprintf(out, "the %zu slowest instructions (seconds over the profiled steps):\n", top);
  for (size_t k = 0; k < top; ++k) {
    const Instr &i = *slow[k].second;
    std::string operands;
    for (const Tensor *t : i.in)
      operands += (operands.empty() ? "" : ", ") + shapeText(t);
    operands += " -> ";
    for (size_t o = 0; o < i.out.size(); ++o)
      operands += (o ? ", " : "") + shapeText(i.out[o]);
    std::fprintf(out, "  %8.4f %5.1f%%  %s %s: %s\n", slow[k].first,
                 100.0 * slow[k].first / std::max(total, 1e-12), i.op.c_str(), i.label.c_str(),
                 operands.c_str());
  }
}

std::string Executor::evalUnavailable() const {
  if (plan_.format_version() < 6)
    return name_ + " is a format-" + std::to_string(plan_.format_version()) +
           " plan, from before plans marked their evaluation program (format 6); compile it "
           "again with this dsc";
  if (!plan_.eval_refused().empty())
    return name_ + " has no evaluation program: " + plan_.eval_refused();
  return {};
}

void Executor::refreshCopies() {
  if (!copiesStale_)
    return;
  bool any = false;
  for (Tensor &t : tensors_)
    if (t.copyOf) {
      cpu::cast(t.copyOf->data, cpu::DType::F32, t.data,
                t.dtype == plan::BF16 ? cpu::DType::BF16 : cpu::DType::F16, t.numel);
      any = true;
    }
  if (any)
    backend_->hostWritten();
  copiesStale_ = false;
}

void Executor::beginEval(int64_t batch) {
  std::string why = evalUnavailable();
  if (!why.empty())
    throw PlanError(why);
  refreshCopies();
  if (!afterEval_) {
    stepGradNorm_ = gradNorm();
    stepLr_ = lr();
    afterEval_ = true;
  }
  savedStep_ = ctx_.step;
  // The micro-batches' global indices (a pipeline's load_batch) count from
  // evaluation batch 0 as the step's count from step 1.
  ctx_.step = batch + 1;
  ctx_.eval = true;
  ctx_.badIndices = 0;
  // ZeRO-Infinity: the last step's parameter writes reach the NVMe tier
  // before the evaluation's fetches read it (they start no read-ahead).
  if (ctx_.nvme && ctx_.writeBehindBuffer)
    ctx_.nvme->wait(ctx_.writeBehindTicket);
  backend_->beginStep();
}

void Executor::endEval(int64_t batch, bool completed) {
  if (completed)
    backend_->endStep();
  ctx_.step = savedStep_;
  ctx_.eval = false;
  int64_t bad = ctx_.badIndices;
  ctx_.badIndices = 0;
  if (completed && bad)
    throw PlanError("evaluation batch " + std::to_string(batch + 1) + ": " + std::to_string(bad) +
                    " index or label values out of range in " + ctx_.badIndexOp +
                    " (token ids >= the vocabulary size? labels >= the number of classes?)");
}

void Executor::beginStep(int64_t stepIndex) {
  refreshCopies();
  afterEval_ = false;
  ctx_.step = stepIndex;
  if (profile_ && !backend_->onHost() && ++stepsBegun_ == 2) {
    // The first step's times hold cuBLAS's and the modules' set-up.
    opTime_.assign(kPlanInstructions.size(), {0, 0.0});
    instrTime_.clear();
    deviceIdle_ = 0;
    profileSkippedFirst_ = true;
  }
  // The optimizer's step (Adam's bias correction, the lr schedule) counts
  // applied updates: a step fp16's loss scaler skipped does not advance it.
  ctx_.optimizerStep = appliedSteps_ + 1;
  *tensors_[plan_.step_buffer()].i64() = ctx_.optimizerStep;
  const config::SchedulerConfig &s = settings_.scheduler;
  // cycleMomentum: the plan's optimizer has betas (PlanSettings).
  ctx_.cycledBetas = s.type == "OneCycle" && s.cycleMomentum;
  if (ctx_.cycledBetas) {
    // The lr's schedule index, step - 1.
    config::AdamBetas b = config::cycledBetas(s, ctx_.optimizerStep - 1);
    ctx_.beta1 = float(b.beta1);
    ctx_.beta2 = float(b.beta2);
  }
  ctx_.overflow = false;
  stepScale_ = scaler_ ? scaler_->scale() : 1.0;
  if (lossScale_)
    *lossScale_->f32() = float(stepScale_);
  ctx_.badIndices = 0;
  for (comm::Communicator *c : ctx_.comms)
    c->resetCounters();
  backend_->beginStep();
}

void Executor::endStep() {
  backend_->endStep();
  counters_ = ctx_.comms[0]->counters();
  counters_ += ctx_.comms[1]->counters();
  counters_ += ctx_.comms[2]->counters();
  // Every rank saw the same overflow flag: the norm that decides it is
  // reduced over the dp and pp groups (a non-finite sum on any rank is
  // non-finite on all), so every rank's scaler moves alike.
  lastSkipped_ = scaler_ ? !scaler_->update(ctx_.overflow) : false;
  if (!lastSkipped_)
    ++appliedSteps_;
  if (ctx_.badIndices)
    throw PlanError("step " + std::to_string(ctx_.step) + ": " + std::to_string(ctx_.badIndices) +
                    " index or label values out of range in " + ctx_.badIndexOp +
                    " (token ids >= the vocabulary size? labels >= the number of classes?)");
}

} // namespace dsrt
