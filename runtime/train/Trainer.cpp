//===- Trainer.cpp - the training loop of a run ---------------------------===//
#include "runtime/train/Trainer.h"
#include "runtime/train/FlopsProfiler.h"

#include "runtime/core/Tier.h"
#include "runtime/kernels/cpu/Kernels.h"

#include "io/FileUtil.h"
#include "runtime/io/Metrics.h"
#include "io/OutputDir.h"
#include "runtime/io/Process.h"
#include "io/SafeTensors.h"
#include "runtime/monitor/TensorBoard.h"
#include "runtime/onnx/OnnxExport.h"
#include "plan/ElementBytes.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <stdexcept>

namespace fs = std::filesystem;
namespace plan = dsc::plan;

namespace dsrt::train {

namespace {
/// comm::OpLogOptions::kinds for comms_logger.prof_ops (DeepSpeed's names,
/// which the config reader checked).
uint32_t commsLoggerKinds(const std::vector<std::string> &ops) {
  uint32_t kinds = 0;
  auto bit = [](int b) { return 1u << b; };
  for (const std::string &op : ops) {
    auto starts = [&](const char *p) { return op.rfind(p, 0) == 0; };
    if (starts("all_reduce") || op == "inference_all_reduce")
      kinds |= bit(int(comm::Kind::AllReduce));
    else if (starts("all_gather") && op != "all_gather_coalesced")
      kinds |= bit(int(comm::Kind::AllGather));
    else if (starts("reduce_scatter"))
      kinds |= bit(int(comm::Kind::ReduceScatter));
    else if (starts("all_to_all"))
      kinds |= bit(int(comm::Kind::AllToAll));
    else if (op == "send" || op == "isend")
      kinds |= bit(comm::kNumKinds);
    else if (op == "recv" || op == "irecv")
      kinds |= bit(comm::kNumKinds + 1);
  }
  return kinds;
}

// DeepSpeed's monitor tags (edaa722 runtime/engine.py, runtime/pipe/engine.py).
constexpr const char *kTrainLoss = "Train/Samples/train_loss";
constexpr const char *kLr = "Train/Samples/lr";
constexpr const char *kLossScale = "Train/Samples/loss_scale";
// The validation loss (dsrt's; DeepSpeed's engine writes no evaluation
// event), beside them on the same x axis.
constexpr const char *kEvalLoss = "Train/Samples/eval_loss";

/// "nan", "inf" or "-inf" for messages.
std::string nonFinite(double v) { return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }

/// A loss scale as printed: 65536, 4294967296, 0.5.
std::string fmtG(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

/// The INPUT buffer `name` that `has` holds for, in the plan or any stage.
template <typename Has>
const plan::Buffer *inputWith(const plan::Plan &p, const std::string &name, Has has) {
  for (const auto &b : p.buffers())
    if (b.role() == plan::INPUT && b.name() == name && has(b))
      return &b;
  for (const auto &stage : p.stages())
    if (const plan::Buffer *b = inputWith(stage, name, has))
      return b;
  return nullptr;
}

/// The label the losses that read input `name` skip, if any (format 8).
std::optional<int64_t> ignoreIndex(const plan::Plan &p, const std::string &name) {
  const plan::Buffer *b =
      inputWith(p, name, [](const plan::Buffer &b) { return b.has_ignore_index(); });
  return b ? std::optional<int64_t>(b->ignore_index()) : std::nullopt;
}

/// The bound the plan records for integer input `name` (the embedding rows
/// or loss classes it indexes, in any stage), or 0 if none.
int64_t indexBound(const plan::Plan &p, const std::string &name) {
  const plan::Buffer *b =
      inputWith(p, name, [](const plan::Buffer &b) { return b.index_bound() > 0; });
  return b ? b->index_bound() : 0;
}

} // namespace

void checkFiniteWeights(const Executor &exec, const std::string &weightsPath) {
  std::vector<float> slice; // a parameter in the NVMe tier, a slice at a time
  for (const Tensor *t : exec.weights()) {
    constexpr int64_t kSlice = int64_t(1) << 20;
    for (int64_t at = 0; at < t->numel; at += kSlice) {
      const int64_t n = std::min(kSlice, t->numel - at);
      const float *v = t->f32() + (exec.inNvme(*t) ? 0 : at);
      if (exec.inNvme(*t)) {
        slice.resize(size_t(n));
        exec.readState(*t, at, n, slice.data());
        v = slice.data();
      }
      for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(v[i]))
          throw std::runtime_error(
              weightsPath + ": parameter '" + t->name + "' holds " + nonFinite(v[i]) +
              (t->shards > 1 ? " (in this rank's shard, element " : " (element ") +
              std::to_string(at + i) + "): training from it can only produce NaN");
    }
  }
}

std::vector<io::InputSpec> inputSpecs(const Executor &exec) {
  std::vector<io::InputSpec> specs;
  for (const Tensor *t : exec.inputs()) {
    io::InputSpec s;
    s.name = t->name;
    s.dtype = plan_util::ioDType(t->dtype);
    s.shape.assign(t->shape.dims, t->shape.dims + t->shape.rank);
    s.indexBound = indexBound(exec.plan(), t->name);
    s.ignoreIndex = ignoreIndex(exec.plan(), t->name);
    s.checkValues = exec.plan().format_version() >= 8;
    specs.push_back(std::move(s));
  }
  return specs;
}

Trainer::~Trainer() = default;

Trainer::Trainer(Executor &exec, io::DataSource &data, TrainOptions options)
    : exec_(exec), data_(data), options_(std::move(options)),
      rank0_(exec.worldSize() == 1 || exec.worldRank() == 0) {}

int Trainer::run() {
  // What can fail before anything is written: the evaluation's batches,
  // the flops profiler's step and report file.
  if (options_.evalData)
    evalBatches_ = planEvaluation();
  // DeepSpeed's flops_profiler: one step's instructions recorded.
  const config::FlopsProfilerConfig &fp = exec_.settings().flopsProfiler;
  if (fp.enabled) {
    if (fp.profileStep > options_.steps)
      throw std::runtime_error("flops_profiler.profile_step " + std::to_string(fp.profileStep) +
                               " is after the run's last step " +
                               std::to_string(options_.steps) +
                               ": nothing would be profiled; set it to a step of the run");
    if (fp.profileStep < options_.firstStep) {
      if (rank0_)
        std::fprintf(stderr, "dsrt: note: flops_profiler.profile_step %lld is before this "
                             "resumed run's first step %lld: no profile in this run\n",
                     (long long)fp.profileStep, (long long)options_.firstStep);
    } else {
      if (rank0_ && !fp.outputFile.empty())
        io::checkFileCanBeMade(fp.outputFile, "flops_profiler.output_file");
      exec_.recordStep(fp.profileStep);
    }
  }
  if (!options_.saveDir.empty()) {
    checkpoint::Layout layout;
    layout.dp = exec_.dp();
    layout.pp = exec_.pp();
    layout.zeroStage = int(exec_.plan().zero_stage());
    layout.configJson = exec_.plan().ds_config(); // the record, copied
    layout.precision = config::precisionName(exec_.settings().precision);
    for (const io::FileChecksum &c : io::readChecksums(options_.planDir))
      if (c.name == "plan.pb")
        layout.planSha256 = c.sha256;
    layout.nodeLocal = exec_.settings().checkpointNodeLocal;
    layout.hosts = options_.rankHosts;
    replicas_ = checkpoint::replicaWriter(exec_, layout.nodeLocal ? &layout.hosts : nullptr);
    saver_ = std::make_unique<checkpoint::Saver>(options_.saveDir, options_.keep,
                                                 options_.asyncSave, layout,
                                                 exec_.communicator(),
                                                 options_.continuesSaveDir);
  }
  if (options_.profile)
    exec_.enableProfile();
  if (options_.timeline) {
    if (!rank0_ && options_.outDir.empty())
      throw std::runtime_error(
          "--timeline on several ranks needs --out (dsrt's own launcher passes it)");
    exec_.recordTimeline(options_.steps);
  }
  // A new or empty folder (or the one dsrt's launcher made for this run).
  if (rank0_)
    runDir_ = io::makeRunDir(options_.outDir, options_.runToken);
  // With several ranks, metrics.csv also has the step's communication:
  // comm_elements (ZeRO-paper units, see comm::Counters), comm_calls and
  // comm_bytes (the same elements in their types' bytes: 1-bit Adam's
  // packed signs count 1 byte per 8 elements' signs):
  // rank 0's collectives (a pipeline's stage 0; its messages are in the
  // summary at the end). An fp16 run adds loss_scale (the scale the step's
  // loss was multiplied by) and skipped (1: the gradients overflowed and
  // the update was skipped).
  bool ranks = exec_.worldSize() > 1;
  if (rank0_) {
    std::vector<std::string> extra;
    if (ranks)
      extra = {"comm_elements", "comm_calls", "comm_bytes"};
    if (exec_.lossScaler())
      extra.insert(extra.end(), {"loss_scale", "skipped"});
    if (options_.evalData)
      extra.push_back("eval_loss");
    metrics_ = std::make_unique<io::MetricsWriter>(runDir_, extra);
    // DeepSpeed's csv_monitor: the events its engine writes each step
    // (docs/monitors.md), in <output_path or the run folder>/<job_name>.
    auto folder = [&](const config::MonitorConfig &m) {
      return ((m.outputPath.empty() ? fs::path(runDir_) : fs::path(m.outputPath)) / m.jobName)
          .string();
    };
    const config::MonitorConfig &csv = exec_.settings().csvMonitor;
    if (csv.enabled) {
      std::vector<std::string> tags = {kTrainLoss, kLr};
      if (exec_.lossScaler())
        tags.push_back(kLossScale);
      if (options_.evalData)
        tags.push_back(kEvalLoss);
      monitor_ = std::make_unique<io::CsvMonitor>(folder(csv), tags, options_.firstStep > 1);
    }
    // A new event file per run (TensorBoard reads every file of a folder,
    // so a resumed run's continue the curve).
    const config::MonitorConfig &tb = exec_.settings().tensorboard;
    if (tb.enabled)
      events_ = std::make_unique<monitor::EventWriter>(folder(tb));
  }
  if (rank0_) {
    std::string shape =
        exec_.pipelined()
            ? ", pipeline of " + std::to_string(exec_.pp()) + " stages x dp " +
                  std::to_string(exec_.dp()) + " (" +
                  (exec_.schedule().empty() ? std::string() : exec_.schedule() + " schedule, ") +
                  std::to_string(exec_.worldSize()) + " ranks)"
        : exec_.dp() > 1 ? " x " + std::to_string(exec_.dp()) + " ranks"
                         : std::string();
    std::string where = exec_.backend().onHost()
                            ? std::to_string(cpu::numThreads()) + " threads"
                            : "on " + exec_.backend().deviceName();
    std::printf("dsrt: %s, %lld steps x %lld micro-batches of %lld%s, %s, arena %.1f "
                "MiB%s, run folder %s\n",
                options_.planDir.c_str(), (long long)options_.steps,
                (long long)exec_.microBatches(), (long long)exec_.microBatchSize(),
                shape.c_str(), where.c_str(), exec_.plan().arena_bytes() / 1048576.0,
                exec_.pipelined() ? " (stage 0)" : "", runDir_.c_str());
    // What each tier holds: the optimizer state, the parameters or both.
    auto held = [&](plan::Tier tier) {
      bool params = false, state = false;
      for (const plan::Buffer &b : exec_.plan().buffers())
        if (b.tier() == tier)
          (b.role() == plan::PARAM ? params : state) = true;
      return std::string(params && state ? "the parameters and the optimizer state are"
                         : params        ? "the parameters are"
                                         : "the optimizer state is");
    };
    if (const NvmeTier *nvme = exec_.nvmeTier()) {
      uint64_t size = 0;
      std::string where;
      for (const NvmeTier::Part &part : nvme->files()) {
        size += part.file->size();
        where += (where.empty() ? "" : " and ") + part.file->path();
      }
      std::printf("dsrt: note: ZeRO-Infinity: %s in an NVMe tier of %.1f MiB "
                  "per rank (%s, %s), read and written tile by tile\n",
                  held(plan::NVME).c_str(), size / 1048576.0, where.c_str(),
                  io::aioModeName(nvme->files().front().file->mode()));
      if (!options_.saveDir.empty() && options_.asyncSave)
        std::printf("dsrt: note: --save-mode async: the state on NVMe is copied into each "
                    "checkpoint before the next step changes it, so those saves block training "
                    "(an async snapshot would need it all in memory)\n");
    }
    if (uint64_t tier = exec_.plan().host_tier_bytes())
      std::printf("dsrt: note: ZeRO-Offload: %s in a host tier of %.1f MiB "
                  "per rank, copied to the arena and back tile by tile; on the CPU runtime "
                  "both are RAM, so this frees nothing here\n",
                  held(plan::HOST).c_str(), tier / 1048576.0);
    std::fflush(stdout);
  }
  if (options_.evalData) {
    if (rank0_) {
      const int64_t perBatch = exec_.microBatches() * exec_.dp();
      std::string when = options_.evalInterval > 0
                             ? "every " + std::to_string(options_.evalInterval) +
                                   " steps and after the last"
                             : std::string("after the last step");
      std::printf("dsrt: evaluation: %lld batches of %lld micro-batches (%lld %s) from %s, %s; "
                  "the forward and the loss, dropout off\n",
                  (long long)evalBatches_, (long long)perBatch,
                  (long long)(evalBatches_ * perBatch * options_.evalData->itemsPerMicroBatch()),
                  options_.evalData->itemName(), options_.evalDataPath.c_str(), when.c_str());
      std::fflush(stdout);
    }
  }
  // DeepSpeed's wall_clock_breakdown: the forward, backward and step timers.
  if (exec_.settings().wallClockBreakdown)
    exec_.enablePhaseTimes();
  // DeepSpeed's comms_logger: every group's collectives and messages.
  const config::CommsLoggerConfig &cl = exec_.settings().commsLogger;
  if (cl.enabled) {
    comm::OpLogOptions lo;
    lo.verbose = cl.verbose;
    lo.debug = cl.debug;
    lo.kinds = cl.profAll ? ~0u : commsLoggerKinds(cl.profOps);
    exec_.setOpLog(&opLog_, lo);
  }
  loop();
  exec_.setOpLog(nullptr, {});
  return writeResults();
}

int64_t Trainer::planEvaluation() {
  std::string why = exec_.evalUnavailable();
  if (!why.empty())
    throw std::runtime_error("--eval-data: " + why);
  // Every rank reads its own share of each batch; the stages of a pipeline
  // that load nothing do not count. The fewest micro-batches any rank's
  // data holds decides.
  int64_t held = options_.evalData->microBatchesHeld();
  double agreed = held < 0 ? 1e300 : double(held);
  if (exec_.worldSize() > 1)
    agreed = exec_.communicator().blockingAllReduceScalar(agreed, comm::ReduceOp::Min);
  const int64_t perBatch = exec_.microBatches() * exec_.dp();
  const std::string batch = "one evaluation batch is a step's " +
                            std::to_string(exec_.microBatches()) + " micro-batches x dp " +
                            std::to_string(exec_.dp()) + " = " + std::to_string(perBatch) +
                            " micro-batches of " + std::to_string(exec_.microBatchSize());
  if (agreed >= 1e300)
    throw std::runtime_error("--eval-data " + options_.evalDataPath +
                             ": no rank reads inputs from it");
  const int64_t fit = int64_t(agreed) / perBatch;
  if (options_.evalBatches > fit)
    throw std::runtime_error(
        "--eval-batches " + std::to_string(options_.evalBatches) + ": " +
        options_.evalDataPath + " holds " + std::to_string(int64_t(agreed)) +
        " micro-batches of " + std::to_string(exec_.microBatchSize()) + ", " +
        std::to_string(fit) + " evaluation batches (" + batch +
        "); an evaluation reads no sample twice: ask for at most " + std::to_string(fit));
  if (fit == 0)
    throw std::runtime_error("--eval-data " + options_.evalDataPath + ": holds " +
                             std::to_string(int64_t(agreed)) + " micro-batches of " +
                             std::to_string(exec_.microBatchSize()) +
                             ", fewer than one evaluation batch (" + batch + ")");
  return options_.evalBatches > 0 ? options_.evalBatches : fit;
}

namespace {
/// Data that cannot be read during the run (every rank throws it alike).
struct DataFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
} // namespace

std::string Trainer::readAhead(io::DataSource &source, int64_t step) {
  if (!source.readsDuringRun())
    return {};
  std::vector<int64_t> ks;
  for (int64_t k = 0; k < exec_.microBatches(); ++k)
    ks.push_back(exec_.globalMicroBatch(step, k));
  std::string error;
  try {
    source.readAhead(ks);
  } catch (const io::IoError &e) {
    error = e.what();
  }
  if (exec_.worldSize() == 1)
    return error;
  // The first rank that failed, known to all (one scalar per step, only
  // for data read as the run goes); the others stop with it.
  const int64_t world = exec_.worldSize(), me = exec_.worldRank();
  const int64_t failed = int64_t(exec_.communicator().blockingAllReduceScalar(
      double(error.empty() ? world : me), comm::ReduceOp::Min));
  if (failed == world)
    return {};
  if (!error.empty() && me != 0)
    std::fprintf(stderr, "dsrt: error: rank %lld: %s\n", (long long)me, error.c_str());
  return error.empty() || me != failed
             ? "rank " + std::to_string(failed) + " cannot read its data (see its error)"
             : error;
}

double Trainer::evaluate() {
  std::vector<void *> into;
  double sum = 0;
  for (int64_t j = 0; j < evalBatches_; ++j) {
    std::string error = readAhead(*options_.evalData, j + 1);
    if (!error.empty())
      throw DataFailure("--eval-data: " + error);
    exec_.evaluate(j, [&](int64_t global, const std::vector<Tensor *> &tensors) {
      into.clear();
      for (Tensor *t : tensors)
        into.push_back(t->data);
      options_.evalData->load(global, into);
    });
    sum += exec_.globalLoss();
  }
  return sum / double(evalBatches_);
}

void Trainer::loop() {
  Outcome &o = outcome_;
  o.lastGood = options_.steps;
  const LossScaler *scaler = exec_.lossScaler();
  bool ranks = exec_.worldSize() > 1;
  const config::PlanSettings &cfg = exec_.settings();
  int64_t every = cfg.stepsPerPrint > 0 ? cfg.stepsPerPrint : 10;
  auto reportSave = [&](const std::optional<checkpoint::SaveResult> &saved) {
    if (!saved || !rank0_)
      return;
    o.lastSaved = *saved;
    char waited[64] = "";
    if (saver_->async())
      std::snprintf(waited, sizeof waited, ", training waited %.3fs", saved->blocked);
    std::printf("dsrt: checkpoint %s: %.1f MiB in %.2fs (%.0f MiB/s)%s\n", saved->path.c_str(),
                saved->bytes / 1048576.0, saved->seconds,
                saved->bytes / 1048576.0 / std::max(saved->seconds, 1e-9), waited);
    std::fflush(stdout);
  };
  // A checkpoint that cannot be written (a full disk, a folder made
  // read-only) stops the run after its step, every rank alike (the save
  // agrees on failure); the weights are still written to the run folder,
  // so the run is not lost.
  auto guardedSave = [&](int64_t s, auto &&call) {
    try {
      reportSave(call());
    } catch (const checkpoint::CheckpointError &e) {
      o.saveError = e.what();
      o.saveFailedAt = s;
      saver_.reset();
    }
  };

  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  auto windowStart = start;
  int64_t windowItems = 0;
  std::vector<void *> into;
  for (int64_t s = options_.firstStep; s <= options_.steps; ++s) {
    // Data read as the run goes (a token file) is read and checked before
    // the step: a file cut short or rewritten meanwhile stops the run with
    // the weights of the last step, on every rank alike.
    if (std::string error = readAhead(data_, s); !error.empty()) {
      o.stoppedAt = s;
      o.lastGood = s - 1;
      o.stopReason = "--data: " + error;
      o.dataFailed = true;
      break;
    }
    auto t0 = Clock::now();
    // A step whose loss or gradient norm is NaN or infinite ends the run
    // there, loudly: its number, what was not finite, and the weights of
    // the last finite step kept. (The norm is checked before the update;
    // a non-finite loss with a finite norm stops after its update.)
    try {
      exec_.step(s, [&](int64_t global, const std::vector<Tensor *> &tensors) {
        into.clear();
        for (Tensor *t : tensors)
          into.push_back(t->data);
        data_.load(global, into);
      });
    } catch (const NonFiniteError &e) {
      o.stoppedAt = s;
      o.lastGood = s - 1;
      o.stopReason = "the gradient norm is " + nonFinite(e.norm);
    } catch (const LossScaleError &e) {
      // Every rank alike (the overflow is global); the update was not
      // applied, so the weights are those of the last applied step.
      o.stoppedAt = s;
      o.lastGood = s - 1;
      o.stopReason = e.what();
    }
    double stepTime = std::chrono::duration<double>(Clock::now() - t0).count();
    double loss = exec_.globalLoss(); // the same on every rank
    // fp16: an overflow (which a non-finite loss also is) skips the step
    // instead of stopping the run.
    bool skipped = scaler && exec_.stepSkipped();
    // Every rank must have skipped alike (the overflow flag comes from the
    // globally reduced norm); a disagreement would train diverging
    // replicas, so it stops the run.
    if (scaler && ranks) {
      double agree = exec_.communicator().blockingAllReduceScalar(skipped ? 1.0 : 0.0,
                                                                  comm::ReduceOp::Sum);
      if (agree != 0.0 && agree != double(exec_.worldSize()))
        throw std::runtime_error("step " + std::to_string(s) + ": " +
                                 std::to_string(int64_t(agree)) + " of " +
                                 std::to_string(exec_.worldSize()) +
                                 " ranks saw a gradient overflow; every rank must skip the "
                                 "same steps");
    }
    if (!o.stoppedAt && !skipped && !std::isfinite(loss)) {
      o.stoppedAt = o.lastGood = s;
      o.stopReason = "the loss is " + nonFinite(loss);
    } else if (o.stoppedAt && !std::isfinite(loss)) {
      o.stopReason = "the loss is " + nonFinite(loss) + " and " + o.stopReason;
    }
    // flops_profiler: the report of its step (every rank takes part).
    const config::FlopsProfilerConfig &fp = cfg.flopsProfiler;
    if (fp.enabled && s == fp.profileStep && !o.stoppedAt) {
      auto p0 = Clock::now();
      Peak peak = measurePeak(exec_);
      FlopsProfile profile =
          flopsProfile(exec_, fp, s, peak,
                       exec_.microBatchSize() * exec_.microBatches() * exec_.dp());
      const std::string &report = profile.report;
      if (rank0_) {
        // The same figures unrounded, beside metrics.csv.
        try {
          io::writeFileAtomically(runDir_ + "/flops_profile.csv",
                                  {{profile.csv.data(), profile.csv.size()}},
                                  io::Existing::Refuse);
        } catch (const io::IoError &e) {
          std::fprintf(stderr, "dsrt: error: %s\n", e.what());
        }
        if (fp.outputFile.empty()) {
          std::fputs(report.c_str(), stdout);
        } else {
          try {
            io::writeFileAtomically(fp.outputFile, {{report.data(), report.size()}},
                                    io::Existing::Refuse);
            std::printf("dsrt: flops profile of step %lld in %s\n", (long long)s,
                        fp.outputFile.c_str());
          } catch (const io::IoError &e) {
            // The report goes to stdout instead, and the run ends with an
            // error status once its weights are written.
            o.reportError = std::string("flops_profiler.output_file: ") + e.what();
            std::fprintf(stderr, "dsrt: error: %s; the report follows on stdout\n",
                         o.reportError.c_str());
            std::fputs(report.c_str(), stdout);
          }
        }
        std::fflush(stdout);
      }
      windowStart += Clock::now() - p0; // not the training's time
    }
    // Items of the step: the pipeline's stages see the same micro-batches.
    windowItems += data_.itemsPerMicroBatch() * exec_.microBatches() * exec_.dp();
    // The validation loss of this step's weights (every rank), before the
    // checkpoint that records it. Its time is left out of the throughput.
    std::optional<double> evalLoss;
    double evalSeconds = 0;
    if (!o.stoppedAt && options_.evalsAt(s)) {
      auto e0 = Clock::now();
      try {
        evalLoss = evaluate();
      } catch (const DataFailure &e) {
        // This step's weights are whole: the evaluation changes none.
        o.stoppedAt = o.lastGood = s;
        o.stopReason = e.what();
        o.dataFailed = true;
      }
      evalSeconds = std::chrono::duration<double>(Clock::now() - e0).count();
      windowStart += Clock::now() - e0;
      if (evalLoss)
        lastEval_ = checkpoint::Progress::Eval{s, *evalLoss, evalBatches_};
      if (evalLoss && !std::isfinite(*evalLoss)) {
        // The weights of this step are finite (its loss and norm were).
        o.stoppedAt = o.lastGood = s;
        o.stopReason = "the validation loss is " + nonFinite(*evalLoss);
      }
    }
    // Checkpoints (every rank): start one at its steps; otherwise commit an
    // asynchronous one whose files are written.
    if (saver_ && !o.stoppedAt && options_.savesAt(s)) {
      checkpoint::Progress g;
      g.step = s;
      g.appliedSteps = exec_.appliedSteps();
      g.seed = exec_.seed();
      g.trainBatchSize = exec_.microBatchSize() * exec_.microBatches() * exec_.dp();
      g.microBatchSize = exec_.microBatchSize();
      if (scaler)
        g.scaler = scaler->state();
      g.lastEval = lastEval_;
      guardedSave(s, [&] { return saver_->save(checkpoint::ownedPieces(exec_, replicas_), g); });
      noteLocalStepSave(s);
    } else if (saver_) {
      guardedSave(s, [&] { return saver_->poll(); });
    }
    if (afterStep)
      afterStep({s, loss, exec_.lr(), exec_.gradNorm(), stepTime, skipped, evalLoss});
    if (!rank0_) {
      if (o.stoppedAt || o.saveFailedAt)
        break;
      continue;
    }
    std::vector<std::optional<double>> extra;
    if (ranks)
      extra = {double(exec_.commCounters().elements()), double(exec_.commCounters().calls()),
               double(exec_.commCounters().bytes())};
    if (scaler)
      extra.insert(extra.end(), {exec_.stepLossScale(), skipped ? 1.0 : 0.0});
    if (options_.evalData)
      extra.push_back(evalLoss);
    // metrics.csv that cannot be written (a full disk) does not cost the
    // run: training goes on (every rank in step), checkpoints and the final
    // weights are still written, and dsrt exits with status 1.
    if (o.metricsError.empty()) {
      try {
        metrics_->write(s, loss, exec_.lr(), exec_.gradNorm(), stepTime, extra);
        // DeepSpeed's x axis for the monitors: the samples trained so far.
        const int64_t samples = s * exec_.microBatchSize() * exec_.microBatches() * exec_.dp();
        if (monitor_) {
          monitor_->write(kLr, samples, exec_.lr());
          if (scaler)
            monitor_->write(kLossScale, samples, exec_.stepLossScale(), true);
          monitor_->write(kTrainLoss, samples, loss);
          if (evalLoss)
            monitor_->write(kEvalLoss, samples, *evalLoss, true); // as metrics.csv
        }
        if (events_) {
          events_->scalar(kLr, samples, float(exec_.lr()));
          if (scaler)
            events_->scalar(kLossScale, samples, float(exec_.stepLossScale()));
          events_->scalar(kTrainLoss, samples, float(loss));
          if (evalLoss)
            events_->scalar(kEvalLoss, samples, float(*evalLoss));
        }
      } catch (const io::IoError &e) {
        o.metricsError = e.what();
        o.metricsFailedAt = s;
        std::fprintf(stderr,
                     "dsrt: error: step %lld: %s; training goes on without metrics (the "
                     "checkpoints and the final weights are still written), and dsrt will "
                     "exit with status 1\n",
                     (long long)s, o.metricsError.c_str());
      }
    }
    if (skipped)
      std::printf("step %6lld/%lld | gradient overflow at loss scale %.17g: update skipped "
                  "(%lld so far), loss scale now %.17g\n",
                  (long long)s, (long long)options_.steps, exec_.stepLossScale(),
                  (long long)scaler->skippedSteps(), scaler->scale());
    if (s % every == 0 || s == options_.steps) {
      auto now = Clock::now();
      double window = std::chrono::duration<double>(now - windowStart).count();
      std::string fp16 = scaler ? " | loss scale " + fmtG(scaler->scale()) + " | skipped " +
                                      std::to_string(scaler->skippedSteps())
                                : std::string();
      double norm = exec_.gradNorm();
      std::string normText = std::isfinite(norm) ? std::string() : nonFinite(norm);
      if (normText.empty()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3f", norm);
        normText = buf;
      }
      std::printf("step %6lld/%lld | loss %.4f | lr %.3e | grad_norm %s%s | %.0f %s/s | "
                  "elapsed %.1fs\n",
                  (long long)s, (long long)options_.steps, loss, exec_.lr(), normText.c_str(),
                  fp16.c_str(), windowItems / std::max(window, 1e-9), data_.itemName(),
                  std::chrono::duration<double>(now - start).count());
      if (cfg.wallClockBreakdown) {
        // DeepSpeed's timers.log: milliseconds summed since the last print
        // (this rank's; bwd_allreduce: the backward's collectives and
        // waits, bwd_inner the rest of it).
        std::array<double, 4> t = exec_.takePhaseTimes();
        std::printf("time (ms) | fwd: %.2f | bwd: %.2f | bwd_inner: %.2f | bwd_allreduce: %.2f "
                    "| step: %.2f\n",
                    t[0] * 1e3, t[1] * 1e3, (t[1] - t[2]) * 1e3, t[2] * 1e3, t[3] * 1e3);
      }
      std::fflush(stdout);
      windowStart = now;
      windowItems = 0;
    }
    if (evalLoss) {
      // A language model's perplexity (token data): exp of the mean loss
      // per token.
      std::string ppl;
      if (std::string(options_.evalData->itemName()) == "tokens" && std::isfinite(*evalLoss)) {
        char buf[48];
        std::snprintf(buf, sizeof buf, " | perplexity %.3f", std::exp(*evalLoss));
        ppl = buf;
      }
      std::printf("eval %6lld/%lld | validation loss %.4f%s | %lld batches in %.2fs\n",
                  (long long)s, (long long)options_.steps, *evalLoss, ppl.c_str(),
                  (long long)evalBatches_, evalSeconds);
      std::fflush(stdout);
    }
    if (o.stoppedAt || o.saveFailedAt)
      break;
  }
  // The save in flight completes (also when the run stopped: it is of an
  // earlier, finite step).
  if (saver_)
    guardedSave(options_.steps, [&] { return saver_->finish(); });
  o.seconds = std::chrono::duration<double>(Clock::now() - start).count();
}

/// 0/1 Adam saved after a local step on several ranks: each rank's weights
/// and momenta have moved on its own gradients since the last sync, and
/// the checkpoint keeps data-parallel rank 0's (as DeepSpeed's does), which
/// a resume gives every rank. Said, once per save, on rank 0.
void Trainer::noteLocalStepSave(int64_t step) {
  if (!rank0_ || !exec_.stepRule() || exec_.dp() < 2)
    return;
  const ZeroOneRule &rule = *exec_.stepRule();
  if (rule.classOf(step) != kStepLocal)
    return;
  int64_t last = step, next = step + 1;
  while (last > 1 && !(rule.classOf(last) & kStepSync) && last >= rule.firstFrozenStep())
    --last;
  while (!(rule.classOf(next) & kStepSync))
    ++next;
  std::printf("dsrt: note: checkpoint of step %lld, a 0/1 Adam local step: each rank's weights "
              "and momenta have moved on its own gradients since %s (the next sync is step "
              "%lld); the checkpoint holds data-parallel rank 0's, as DeepSpeed's does, and a "
              "resume starts every rank from them. Saved right after a sync, the ranks differ "
              "only by rounding\n",
              (long long)step,
              (rule.classOf(last) & kStepSync ? "the sync of step " + std::to_string(last)
                                               : std::string("the freeze"))
                  .c_str(),
              (long long)next);
}

int Trainer::writeResults() {
  Outcome &o = outcome_;
  bool ranks = exec_.worldSize() > 1;
  // The training peak, before whole weights are gathered for writing: the
  // largest over the ranks.
  int64_t rss = io::peakRssMiB();
  double baseRss = options_.baseRssMiB;
  // Beyond the arena and the start-up footprint: what the plan misses
  // (kernel scratch, library caches, the loader), the largest over ranks.
  double arenaMiB = exec_.plan().arena_bytes() / 1048576.0;
  double other = double(rss) - baseRss - arenaMiB;
  double otherShare = arenaMiB > 0 ? 100.0 * other / arenaMiB : 0;
  if (ranks) {
    comm::Communicator &c = exec_.communicator();
    rss = (int64_t)c.blockingAllReduceScalar(double(rss), comm::ReduceOp::Max);
    baseRss = c.blockingAllReduceScalar(baseRss, comm::ReduceOp::Max);
    other = c.blockingAllReduceScalar(other, comm::ReduceOp::Max);
    otherShare = c.blockingAllReduceScalar(otherShare, comm::ReduceOp::Max);
  }
  if (options_.timeline)
    exec_.writeTimeline((fs::path(rank0_ ? runDir_ : options_.outDir) /
                         ("timeline.rank-" + std::to_string(exec_.worldRank()) + ".csv"))
                            .string());

  auto metricsNote = [&] {
    if (!o.metricsError.empty())
      std::fprintf(stderr, "dsrt: error: %s: metrics.csv has no rows from step %lld on\n",
                   o.metricsError.c_str(), (long long)o.metricsFailedAt);
  };
  // Every rank takes part in gathering ZeRO shards (and a pipeline's
  // stages send theirs to rank 0); rank 0 writes.
  exec_.releaseTransients();
  std::vector<WholeTensor> whole = exec_.gatherWeights();
  if (!rank0_)
    return o.stoppedAt || o.saveFailedAt ? 1 : 0;
  std::vector<io::TensorRef> refs;
  for (const WholeTensor &t : whole)
    refs.push_back({t.name, io::DType::F32, t.shape, t.data});
  std::string weightsPath = runDir_ + "/weights.safetensors";
  auto writeWeights = [&](int64_t step) {
    io::writeSafeTensors(weightsPath, refs, io::weightsMetadata(step));
    o.weightsPath = weightsPath;
  };
  if (o.stoppedAt) {
    // The weights after step lastGood; none when the first step failed
    // (they would be the plan's own).
    std::string kept = "no weights written (no step finished)";
    if (o.lastGood > 0) {
      writeWeights(o.lastGood);
      kept = "the weights after step " + std::to_string(o.lastGood) +
             (o.dataFailed ? "" : " (the last finite step)") + " are in " + weightsPath;
    }
    const char *advice = o.dataFailed ? "training stopped (restore the data, then --resume from a "
                                        "checkpoint or start again from these weights with --init)"
                                      : "training stopped (lower the learning rate, enable "
                                        "gradient_clipping, or check the data and the initial "
                                        "weights)";
    std::fprintf(stderr, "dsrt: error: step %lld: %s; %s; %s, metrics in %s\n",
                 (long long)o.stoppedAt, o.stopReason.c_str(), advice, kept.c_str(),
                 metrics_->path().c_str());
    metricsNote();
    return 1;
  }
  if (o.saveFailedAt) {
    // The weights of the last step run (the failed checkpoint's, or the
    // final one's), so that a failed save never costs the run.
    int64_t at = std::min(o.saveFailedAt, options_.steps);
    writeWeights(at);
    std::fprintf(stderr,
                 "dsrt: error: %s; training stopped after step %lld; its weights are in %s, "
                 "metrics in %s\n",
                 o.saveError.c_str(), (long long)at, weightsPath.c_str(),
                 metrics_->path().c_str());
    metricsNote();
    return 1;
  }
  try {
    writeWeights(options_.steps);
  } catch (const io::IoError &e) {
    // Where the trained weights are, when the run folder cannot take them
    // (a full disk): the last step's checkpoint, if one was saved.
    std::string where =
        o.lastSaved.step == options_.steps
            ? "; the trained weights are in the checkpoint " + o.lastSaved.path +
                  " (dsrt export " + o.lastSaved.path + " -o FILE writes them elsewhere)"
            : std::string("; the trained weights are lost (save checkpoints with "
                          "--save-dir to keep them)");
    std::fprintf(stderr, "dsrt: error: %s%s\n", e.what(), where.c_str());
    metricsNote();
    return 1;
  }
  std::printf("dsrt: done in %.1fs, peak RSS %lld MiB%s (planned arena %.1f MiB%s, %.0f MiB "
              "before it: binary, libraries, the plan; %.0f MiB other, %.1f%% of the arena); "
              "weights in %s, metrics in %s\n",
              o.seconds, (long long)rss, ranks ? " per rank (max)" : "", arenaMiB,
              exec_.pipelined() ? " on stage 0" : "", baseRss, other, otherShare,
              weightsPath.c_str(), metrics_->path().c_str());
  if (!options_.exportOnnx.empty()) {
    try {
      onnx_export::exportOnnx(options_.onnxSkeleton, refs, options_.exportOnnx);
    } catch (const std::exception &e) {
      throw std::runtime_error(std::string(e.what()) + " (the trained weights are in " +
                               weightsPath + ")");
    }
    std::printf("dsrt: ONNX model with the trained weights in %s\n",
                options_.exportOnnx.c_str());
  }
  if (ranks)
    std::printf("dsrt: communication per step%s: %s\n",
                exec_.pipelined() ? " (rank 0, stage 0)" : "",
                exec_.commCounters().summary().c_str());
  if (exec_.settings().commsLogger.enabled)
    writeCommsLog();
  if (options_.profile)
    exec_.printProfile(stdout);
  if (!o.metricsError.empty()) {
    metricsNote();
    return 1;
  }
  if (!o.reportError.empty()) {
    std::fprintf(stderr, "dsrt: error: %s (the run's weights are in %s)\n",
                 o.reportError.c_str(), weightsPath.c_str());
    return 1;
  }
  return 0;
}

void Trainer::writeCommsLog() {
  // DeepSpeed's log_all table (rank 0's ops), then the same rows with the
  // bus bandwidth of NCCL-tests in RUN/comms.csv.
  std::printf("dsrt: comms_logger (rank 0; latency from the start of each op to the end of its "
              "wait; algbw = S / t, busbw with NCCL-tests' factors):\n");
  std::printf("%-20s%-20s%-20s%-20s%-20s%-20s%-20s\n", "Comm. Op", "Message Size", "Count",
              "Total Latency(ms)", "Avg Latency(ms)", "tput_avg (Gbps)", "busbw_avg (Gbps)");
  std::string csv = "op,group_size,message_bytes,count,total_latency_ms,avg_latency_ms,"
                    "min_latency_ms,max_latency_ms,algbw_gbps,busbw_gbps\n";
  std::string last;
  for (const auto &[key, r] : opLog_) {
    if (key.name != last)
      std::printf("%s\n", key.name.c_str());
    last = key.name;
    double avg = r.totalMs / double(r.count);
    comm::BusBandwidth bw = comm::busBandwidth(key, avg);
    std::printf("%-20s%-20s%-20lld%-20.2f%-20.2f%-20.2f%-20.2f\n", "",
                comm::byteSize(key.bytes).c_str(), (long long)r.count, r.totalMs, avg, bw.algbw,
                bw.busbw);
    char row[512];
    std::snprintf(row, sizeof row, "%lld,%lld,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f\n",
                  (long long)key.bytes, (long long)r.count, r.totalMs, avg, r.minMs, r.maxMs,
                  bw.algbw, bw.busbw);
    csv += "\"" + key.name + "\"," + std::to_string(key.groupSize) + "," + row;
  }
  if (opLog_.empty()) {
    const config::CommsLoggerConfig &cl = exec_.settings().commsLogger;
    if (exec_.worldSize() == 1)
      std::printf("(no collectives or messages: one rank)\n");
    else if (!cl.profAll)
      std::printf("(none of the ops comms_logger.prof_ops names ran on rank 0)\n");
    else
      std::printf("(no collectives or messages on rank 0)\n");
  }
  std::string path = (fs::path(runDir_) / "comms.csv").string();
  try {
    io::writeFileAtomically(path, {io::ByteSpan{csv.data(), csv.size()}},
                            io::Existing::Refuse);
    std::printf("dsrt: comms_logger summary in %s\n", path.c_str());
  } catch (const io::IoError &e) {
    std::fprintf(stderr, "dsrt: error: %s\n", e.what());
  }
}

} // namespace dsrt::train
