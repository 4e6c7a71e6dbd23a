//===- dsrt.cpp - run a dsc plan ------------------------------------------===//
//
//   dsrt PLAN --data DATA [--steps N] [--seed S] [--out DIR] [--config F]
//        [--threads T] [--token-dtype u16|u32] [--profile] [--export-onnx F]
//        [--comm-timeout SECONDS]
//
// Validates the plan and the data before the first step, then trains:
// a progress line every steps_per_print steps, metrics.csv every step, and
// the trained weights (safetensors, and optionally the ONNX model with the
// trained weights) at the end.
//
// `dsrt PLAN --hostfile HOSTS` (or a plan for dp > 1) starts the ranks itself
// through mpirun, with DeepSpeed's launcher flags (runtime/launch).
// Under mpirun (a plan compiled with --dp N, run with -np N) every process
// is one data-parallel rank; rank 0 alone prints, writes the run folder
// (with the global loss and the step's communication in metrics.csv) and
// the weights. A pipeline plan (--pp P) runs on P x N ranks: rank w is
// stage w % P of data-parallel index w / P, loads only the inputs its
// stage reads, and rank 0 gathers every stage's weights. Any error on any
// rank aborts every rank.
//
//===----------------------------------------------------------------------===//
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/Export.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/config/CliChecks.h"
#include "runtime/config/DsConfig.h"
#include "runtime/core/Executor.h"
#include "runtime/io/Metrics.h"
#include "runtime/io/Npy.h"
#include "runtime/io/OutputDir.h"
#include "runtime/io/SafeTensors.h"
#include "runtime/io/TokenFile.h"
#include "runtime/launch/Launcher.h"
#include "runtime/onnx/OnnxExport.h"
#include "runtime/onnx/StateDict.h"
#include "runtime/plan/Limits.h"

#include <csignal>
#include <CLI/CLI.hpp>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <xmmintrin.h>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sys/resource.h>
#include <unistd.h>

namespace plan = dsc::plan;
namespace fs = std::filesystem;
using dsrt::PlanError;
using dsrt::Tensor;

namespace {

/// Under mpirun this aborts every rank, so none waits for a dead one.
[[noreturn]] void die(const std::string &message) {
  std::fprintf(stderr, "dsrt: error: %s\n", message.c_str());
  dsrt::comm::abortAll(1);
}

/// Fills a set of the plan's input tensors with micro-batch `k` of the
/// whole run. The source is built from exec.inputs() (validated there);
/// every set it loads has the same names, dtypes and shapes in that order
/// (a pipeline plan has one set per micro-batch of the step).
class DataSource {
public:
  virtual ~DataSource() = default;
  virtual void load(int64_t k, const std::vector<Tensor *> &into) = 0;
  /// Tokens (or samples) one micro-batch consumes, for the throughput.
  virtual int64_t itemsPerMicroBatch() const = 0;
  virtual const char *itemName() const = 0;
};

/// No --data: deterministic random batches, for a first run of a plan
/// (the card's `dsrt plan --hostfile hosts`) and for benchmarks. Integer
/// inputs read as indices are uniform in [0, index_bound) (the plan records
/// the embedding rows or loss classes they index); other integers are 0 or
/// 1; floats are uniform in [-1, 1). Global micro-batch g draws the same
/// values on every rank and stage.
/// The bound the plan records for integer input `name` (the embedding rows
/// or loss classes it indexes, in any stage), or 0 if none.
int64_t indexBound(const plan::Plan &p, const std::string &name) {
  for (const plan::Buffer &b : p.buffers())
    if (b.role() == plan::INPUT && b.name() == name && b.index_bound() > 0)
      return b.index_bound();
  for (const plan::Plan &st : p.stages())
    for (const plan::Buffer &b : st.buffers())
      if (b.role() == plan::INPUT && b.name() == name && b.index_bound() > 0)
        return b.index_bound();
  return 0;
}

class SyntheticSource : public DataSource {
public:
  SyntheticSource(const plan::Plan &p, const std::vector<Tensor *> &inputs, int64_t batch)
      : batch_(batch) {
    for (Tensor *t : inputs) {
      int64_t bound = indexBound(p, t->name);
      bounds_.push_back(bound > 0 ? bound : 2);
    }
  }
  void load(int64_t k, const std::vector<Tensor *> &into) override {
    for (size_t j = 0; j < into.size(); ++j) {
      Tensor *t = into[j];
      if (t->dtype != plan::F32 && t->dtype != plan::I64) { // masks and the like: zero
        std::memset(t->data, 0, t->bytes());
        continue;
      }
      for (int64_t i = 0; i < t->numel; ++i) {
        uint64_t r = mix(uint64_t(k) * 0x9E3779B97F4A7C15ull + j * 0xD1B54A32D192ED03ull +
                         uint64_t(i));
        if (t->dtype == plan::F32)
          t->f32()[i] = float(double(r >> 11) / double(1ull << 53) * 2.0 - 1.0);
        else
          t->i64()[i] = int64_t(r % uint64_t(bounds_[j]));
      }
    }
  }
  int64_t itemsPerMicroBatch() const override { return batch_; }
  const char *itemName() const override { return "samples"; }

private:
  static uint64_t mix(uint64_t z) { // SplitMix64's finalizer
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::vector<int64_t> bounds_;
  int64_t batch_;
};

/// A folder of NAME.npy files, one per input; dim 0 counts samples.
class NpyFolder : public DataSource {
public:
  NpyFolder(const std::string &dir, const std::vector<Tensor *> &inputs, int64_t batch)
      : batch_(batch) {
    for (Tensor *t : inputs) {
      std::string path = (fs::path(dir) / (t->name + ".npy")).string();
      if (!fs::exists(path))
        die(path + ": missing; the plan's input '" + t->name + "' is read from it");
      arrays_.push_back(std::make_unique<dsrt::io::NpyArray>(dsrt::io::readNpy(path)));
      const dsrt::io::NpyArray &a = *arrays_.back();
      using dsrt::io::DType;
      DType need = t->dtype == plan::F32   ? DType::F32
                   : t->dtype == plan::F64 ? DType::F64
                   : t->dtype == plan::I64 ? DType::I64
                   : t->dtype == plan::I32 ? DType::I32
                                           : DType::Bool;
      widen_.push_back(dsrt::io::checkInputDType(a, path, need, t->name));
      std::vector<int64_t> want(t->shape.dims + 1, t->shape.dims + t->shape.rank);
      std::vector<int64_t> have(a.shape.begin() + (a.shape.empty() ? 0 : 1), a.shape.end());
      if (a.shape.empty() || have != want) {
        want.insert(want.begin(), -1);
        die(path + ": shape " + dsrt::io::formatShape(a.shape) + ", the input '" + t->name +
            "' needs [N" + dsrt::io::formatShape(want).substr(3));
      }
      if (a.shape[0] < batch)
        die(path + ": " + std::to_string(a.shape[0]) + " samples, fewer than one micro-batch (" +
            std::to_string(batch) + ")");
      if (samples_ && a.shape[0] != samples_)
        die(path + ": " + std::to_string(a.shape[0]) + " samples, but the other inputs have " +
            std::to_string(samples_));
      samples_ = a.shape[0];
    }
  }
  void load(int64_t k, const std::vector<Tensor *> &into) override {
    for (size_t j = 0; j < into.size(); ++j) {
      Tensor *t = into[j];
      const dsrt::io::NpyArray &a = *arrays_[j];
      int64_t row = t->numel / batch_;
      for (int64_t i = 0; i < batch_; ++i) {
        int64_t src = (k * batch_ + i) % samples_;
        if (widen_[j]) {
          // A version 2/3 .npy header need not leave the data 4-byte
          // aligned: read each int32 with memcpy.
          auto *from = static_cast<const char *>(a.data()) + src * row * 4;
          int64_t *to = t->i64() + i * row;
          for (int64_t e = 0; e < row; ++e) {
            int32_t v;
            std::memcpy(&v, from + e * 4, 4);
            to[e] = v;
          }
        } else {
          size_t bytes = t->bytes() / batch_;
          std::memcpy(static_cast<char *>(t->data) + i * bytes,
                      static_cast<const char *>(a.data()) + src * bytes, bytes);
        }
      }
    }
  }
  int64_t itemsPerMicroBatch() const override { return batch_; }
  const char *itemName() const override { return "samples"; }

private:
  std::vector<std::unique_ptr<dsrt::io::NpyArray>> arrays_;
  std::vector<bool> widen_; // int32 file for an int64 input
  int64_t batch_, samples_ = 0;
};

/// A flat token file (nanoGPT / llm.c): the two [B, T] integer inputs get
/// windows of T tokens and the same windows shifted by one. A pipeline
/// stage reads what it needs: both, the tokens only (the first stage) or
/// the targets only (the last), or nothing.
class TokenSource : public DataSource {
public:
  TokenSource(const std::string &path, std::optional<dsrt::io::TokenWidth> width,
              const plan::Plan &p, const std::vector<Tensor *> &inputs, int64_t batch,
              bool pipelineStage)
      : file_(dsrt::io::TokenFile::open(path, width)), batch_(batch) {
    bool ok = pipelineStage ? inputs.size() <= 2 : inputs.size() == 2;
    for (const Tensor *t : inputs)
      ok = ok && t->dtype == plan::I64 && t->shape.rank == 2 &&
           t->shape.dims[1] == inputs[0]->shape.dims[1];
    if (!ok)
      die(path + ": a token file feeds a model with two int64 [batch, seq] inputs (tokens and "
                 "next-token targets); this plan's inputs differ, give --data a folder of .npy "
                 "files named after them");
    // The targets are the input named like targets/labels, else the second.
    auto isTarget = [](const std::string &n) {
      return n.find("target") != std::string::npos || n.find("label") != std::string::npos;
    };
    if (inputs.size() == 2) {
      bool swap = isTarget(inputs[0]->name) && !isTarget(inputs[1]->name);
      tokens_ = swap ? 1 : 0;
      targets_ = swap ? 0 : 1;
    } else if (inputs.size() == 1) {
      (isTarget(inputs[0]->name) ? targets_ : tokens_) = 0;
    }
    if (inputs.empty())
      return; // a middle stage: nothing to load
    seq_ = inputs[0]->shape.dims[1];
    windows_ = (file_.size() - 1) / seq_;
    if (windows_ < batch)
      die(path + ": " + std::to_string(file_.size()) + " tokens, too few for one micro-batch of " +
          std::to_string(batch) + " x " + std::to_string(seq_) + " (+1) tokens");
    // Every id against the vocabulary, once, before the first step: a bad
    // id would otherwise surface only at the step that reads it.
    int64_t bound = 0;
    for (const Tensor *t : inputs)
      if (int64_t b = indexBound(p, t->name); b > 0)
        bound = bound ? std::min(bound, b) : b;
    if (bound > 0)
      file_.checkIds(bound, "the model's vocabulary");
  }
  void load(int64_t k, const std::vector<Tensor *> &into) override {
    for (int64_t i = 0; i < batch_; ++i) {
      int64_t start = ((k * batch_ + i) % windows_) * seq_;
      if (tokens_ >= 0)
        file_.copyWindow(start, seq_, into[size_t(tokens_)]->i64() + i * seq_);
      if (targets_ >= 0)
        file_.copyWindow(start + 1, seq_, into[size_t(targets_)]->i64() + i * seq_);
    }
  }
  int64_t itemsPerMicroBatch() const override { return batch_ * seq_; }
  const char *itemName() const override { return "tokens"; }

private:
  dsrt::io::TokenFile file_;
  int tokens_ = -1, targets_ = -1; // positions in the loaded set
  int64_t batch_, seq_ = 0, windows_ = 0;
};

int64_t peakRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

/// The resident set now, in MiB (0 where /proc is not readable).
double currentRssMiB() {
  std::FILE *f = std::fopen("/proc/self/statm", "r");
  if (!f)
    return 0;
  long long size = 0, resident = 0;
  int got = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  return got == 2 ? double(resident) * double(sysconf(_SC_PAGESIZE)) / 1048576.0 : 0;
}

/// Under mpirun, the communicator of all ranks (null otherwise; the
/// executor splits it for a pipeline plan). Ranks on one node share its cores unless --threads or
/// OMP_NUM_THREADS (which dsrt's launcher sets to cores / local ranks) says.
std::unique_ptr<dsrt::comm::MpiCommunicator> setupComm(double timeoutSeconds, int64_t threads) {
  if (!dsrt::comm::launchedByMpirun())
    return nullptr;
  auto comm = std::make_unique<dsrt::comm::MpiCommunicator>(timeoutSeconds);
  int local = dsrt::comm::localRanks();
  if (!threads && local > 1 && !std::getenv("OMP_NUM_THREADS"))
    dsrt::cpu::setNumThreads(std::max(1, dsrt::cpu::numThreads() / local));
  return comm;
}

/// The keys dsc bakes into the plan must not differ at run time.
void checkRuntimeConfig(const dsrt::config::TrainConfig &baked,
                        const dsrt::config::TrainConfig &given, const std::string &path) {
  auto differs = [&](bool d, const char *keys) {
    if (d)
      die(path + ": " + keys + " differ from the plan's (they are compiled in: recompile with "
                               "dsc --config " + path + ")");
  };
  differs(baked.trainBatchSize != given.trainBatchSize ||
              baked.microBatchPerGpu != given.microBatchPerGpu ||
              baked.gradAccumSteps != given.gradAccumSteps,
          "the batch sizes / gradient_accumulation_steps");
  differs(baked.optimizer != given.optimizer, "the optimizer settings");
  differs(baked.gradientClipping != given.gradientClipping, "the gradient_clipping settings");
  differs(!(baked.zero == given.zero), "the zero_optimization settings");
  differs(!(baked.pipeline == given.pipeline), "the pipeline settings");
  differs(baked.precision != given.precision,
          "the bf16 / fp16 / data_types / communication_data_type settings");
  differs(!(baked.recompute == given.recompute), "the activation_checkpointing settings");
  differs(baked.tensorParallel != given.tensorParallel,
          "the tensor_parallel.autotp_size settings");
}

/// The exit of a rank that finished (MPI_Finalize under mpirun).
int finishRank(int status = 0) {
  std::fflush(stdout);
  dsrt::comm::finalizeMpi();
  return status;
}

/// "nan", "inf" or "-inf" for messages.
std::string nonFinite(double v) { return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }

/// A loss scale as printed: 65536, 4294967296, 0.5.
std::string fmtG(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

/// Fails on a NaN or infinity in this rank's initial parameters (its ZeRO
/// shard), naming the tensor: such a run can only train NaN.
void checkFiniteWeights(const dsrt::Executor &exec, const std::string &weightsPath) {
  for (const Tensor *t : exec.weights())
    for (int64_t i = 0; i < t->numel; ++i)
      if (!std::isfinite(t->f32()[i]))
        die(weightsPath + ": parameter '" + t->name + "' holds " + nonFinite(t->f32()[i]) +
            (t->shards > 1 ? " (in this rank's shard, element " : " (element ") +
            std::to_string(i) + "): training from it can only produce NaN");
}

} // namespace

/// dsrt export CKPT [--plan PLAN] [-o FILE] [--onnx FILE]: the consolidated
/// weights of a checkpoint, as the model's PyTorch state_dict and/or its
/// ONNX model (runtime/checkpoint/Export.h).
int exportMain(int argc, char **argv) {
  CLI::App app{"dsrt export: writes a checkpoint's weights as the model's PyTorch state_dict "
               "in one safetensors file (with --plan: load_state_dict(strict=True) takes it) "
               "and/or as the plan's ONNX model with the trained weights, streamed: the peak "
               "memory is a few MiB, not the model (an inline ONNX model is held once)"};
  std::string ckpt, out, planDir, onnxOut;
  app.add_option("checkpoint", ckpt, "a checkpoint: --save-dir DIR (its latest) or DIR/TAG")
      ->required()
      ->check(dsrt::cli::nonEmpty());
  app.add_option("-o,--output", out, "the safetensors file to write (must not exist)")
      ->check(dsrt::cli::nonEmpty());
  app.add_option("--plan", planDir,
                 "a plan of the checkpoint's model (any layout): its model.onnx names the "
                 "state_dict's keys (tied weights under each name, the buffers dsc compiled in)")
      ->check(dsrt::cli::nonEmpty());
  app.add_option("--onnx", onnxOut,
                 "also write the plan's ONNX model with the trained weights here (needs --plan; "
                 "weights over 2 GiB go to FILE.data beside it)")
      ->check(dsrt::cli::nonEmpty());
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    die(std::string(e.what()) + " (see dsrt export --help)");
  }
  if (out.empty() && onnxOut.empty())
    die("dsrt export: nothing to write: give -o FILE (safetensors) and/or --onnx FILE");
  if (!onnxOut.empty() && planDir.empty())
    die("dsrt export: --onnx needs --plan PLAN (the ONNX model is the plan's model.onnx)");
  // Both outputs are checked before either is written (the ONNX model was
  // checked only after the state_dict had been written).
  try {
    if (!out.empty())
      dsrt::io::checkNewFile(out, "-o");
    if (!onnxOut.empty()) {
      dsrt::io::checkNewFile(onnxOut, "--onnx");
      dsrt::io::checkNewFile(onnxOut + ".data", "--onnx (its external data)");
    }
  } catch (const std::exception &e) {
    die(e.what());
  }
  if (!out.empty() && !onnxOut.empty() &&
      fs::weakly_canonical(out) == fs::weakly_canonical(onnxOut))
    die("dsrt export: -o and --onnx name the same file, " + out);
  try {
    auto start = std::chrono::steady_clock::now();
    dsrt::checkpoint::Reader reader = dsrt::checkpoint::Reader::open(ckpt);
    double weightsMiB = 0;
    for (const auto &[name, t] : reader.tensors())
      if (t.kind == "param" || t.kind == "frozen")
        weightsMiB += double(t.numel) * 4 / 1048576.0;
    if (!out.empty() && planDir.empty()) {
      int64_t n = dsrt::checkpoint::exportWeights(reader, out);
      std::printf("dsrt export: %s: %lld float32 tensors under the model's initializer names\n",
                  out.c_str(), (long long)n);
      std::fprintf(stderr, "dsrt export: without --plan, tied weights appear under one name "
                           "and the buffers dsc compiled in are left out; PyTorch's "
                           "load_state_dict(strict=True) needs the file --plan PLAN writes\n");
    } else if (!out.empty()) {
      dsrt::checkpoint::StateDictExport r =
          dsrt::checkpoint::exportStateDict(reader, planDir, out);
      std::printf("dsrt export: %s: the model's state_dict%s, %lld tensors (%lld from the "
                  "checkpoint, %lld tied, %lld buffers of the model), %.1f MiB\n",
                  out.c_str(), r.recorded ? "" : " as its initializers (no record of it)",
                  (long long)r.tensors, (long long)(r.tensors - r.buffers - r.tied),
                  (long long)r.tied, (long long)r.buffers, r.bytes / 1048576.0);
    }
    if (!onnxOut.empty()) {
      dsrt::checkpoint::exportOnnxModel(reader, planDir, onnxOut);
      std::printf("dsrt export: %s: the ONNX model with the trained weights\n",
                  onnxOut.c_str());
    }
    std::printf("dsrt export: step %lld of %s in %.1fs, peak RSS %lld MiB (the weights: %.1f "
                "MiB)\n",
                (long long)reader.progress().step, reader.path().c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                (long long)peakRssMiB(), weightsMiB);
  } catch (const std::exception &e) {
    die(e.what());
  }
  return 0;
}

int main(int argc, char **argv) {
  // A write past the file-size limit (ulimit -f) fails with EFBIG and an
  // error naming the file, instead of SIGXFSZ ending the process with the
  // output half written.
  std::signal(SIGXFSZ, SIG_IGN);
  if (argc > 1 && std::string(argv[1]) == "export")
    return exportMain(argc - 1, argv + 1);
  CLI::App app{"dsrt: runs a plan compiled by dsc"};
  std::string planDir, data, out, configPath, tokenDtype, exportOnnx, device = "auto";
  int64_t steps = 100, threads = 0;
  double commTimeout = 300;
  bool profile = false, timeline = false;
  uint64_t seed = 1234;
  app.add_option("plan", planDir, "plan directory written by dsc -o")->required();
  app.add_option("--data", data,
                 "a folder of NAME.npy files (one per input, dim 0 = samples) or a flat token "
                 "file (uint16/uint32 ids, nanoGPT/llm.c format); without it, synthetic "
                 "random batches (a smoke test)")
      ->check(dsrt::cli::nonEmpty());
  using dsrt::cli::integer;
  // Checked in their own types before conversion (CLI11 would saturate an
  // overflowing integer); threads against this machine's cores below.
  app.add_option("--steps", steps, "optimizer steps to run")
      ->check(integer<int64_t>(1, dsrt::limits::kMaxSteps));
  app.add_option("--seed", seed, "seed of the dropout masks")->check(integer<uint64_t>(0));
  app.add_option("--out", out, "run folder (default: ./runs/<timestamp>)")
      ->check(dsrt::cli::nonEmpty());
  app.add_option("--config", configPath,
                 "ds_config.json: steps_per_print and scheduler may change at run time; "
                 "batch, optimizer and clipping keys must match the plan")
      ->check(dsrt::cli::nonEmpty());
  app.add_option("--threads", threads, "CPU threads for the kernels (0: all cores)")
      ->check(integer<int64_t>(0, dsrt::launch::availableCores()));
  app.add_option("--device", device,
                 "where the kernels run: cuda (a CUDA GPU; plans for one rank in fp32 so far), "
                 "cpu, or auto (cuda where the plan can run there, else cpu, saying why). "
                 "Default: $DSRT_DEVICE if set, else auto")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_flag("--profile", profile, "print the time spent per op kind at the end");
  app.add_flag("--timeline", timeline,
               "record every instruction's start and end in the last step: "
               "RUN/timeline.rank-N.csv per rank (render with tools/render_timeline.py)");
  app.add_option("--token-dtype", tokenDtype, "token width of a token file: u16 or u32")
      ->check(dsrt::cli::nonEmpty());
  app.add_option("--export-onnx", exportOnnx,
                 "also write the source ONNX model with the trained weights here (weights over "
                 "2 GiB go to FILE.data beside it)")
      ->check(dsrt::cli::nonEmpty());
  app.add_option("--comm-timeout", commTimeout,
                 "seconds a collective may take before every rank aborts (under mpirun)")
      ->check(dsrt::cli::positiveSeconds(7 * 24 * 3600));
  std::string saveDir, resume;
  int64_t saveInterval = 0, keep = 0;
  app.add_option("--save-dir", saveDir,
                 "save checkpoints here (docs/checkpoints.md): every --save-interval steps and "
                 "after the last; a new or empty folder, or one dsrt saved into before")
      ->check(dsrt::cli::nonEmpty());
  app.add_option("--save-interval", saveInterval,
                 "steps between checkpoints (0: only after the last step)")
      ->check(integer<int64_t>(0, dsrt::limits::kMaxSteps));
  app.add_option("--keep", keep,
                 "keep only the newest K checkpoints, deleting older ones once a new one is "
                 "complete (0: keep all)")
      ->check(integer<int64_t>(0, dsrt::limits::kMaxSteps));
  // sync by default: on the CPU the writer thread competes with the
  // kernels' threads, and bench/checkpoint.py measured async dearer there.
  std::string saveMode = "sync";
  app.add_option("--save-mode", saveMode,
                 "sync (default): training waits for the save; async: training goes on while a "
                 "snapshot of the state is written (host memory the size of the rank's state; "
                 "pays off where a core is idle during training)")
      ->check(CLI::IsMember({"async", "sync"}));
  auto *resumeOpt = app.add_option(
      "--resume", resume,
      "continue from a checkpoint (a --save-dir: its latest; or DIR/TAG), saved with any dp, "
      "pp or ZeRO stage; --steps is the total, counted from the first step")
      ->check(dsrt::cli::nonEmpty());
  std::string init;
  app.add_option("--init", init,
                 "start from these weights instead of the plan's: a safetensors file of the "
                 "model's PyTorch state_dict (fine-tuning; dsrt export writes one)")
      ->check(dsrt::cli::nonEmpty());
  auto *seedOpt = app.get_option("--seed");
  dsrt::launch::LaunchOptions launchOptions; // --hostfile, --include, ...
  launchOptions.addTo(app);
  // The default device from the environment (the test suite pins cpu).
  if (const char *env = std::getenv("DSRT_DEVICE")) {
    device = env;
    if (device != "auto" && device != "cpu" && device != "cuda")
      die("DSRT_DEVICE=" + device + ": must be auto, cpu or cuda (the default of --device)");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    die(std::string(e.what()) + " (see dsrt --help)");
  }
  // Settings that only apply with another one are not accepted alone.
  for (const char *flag : {"--save-interval", "--keep", "--save-mode"})
    if (app.count(flag) && saveDir.empty())
      die(std::string(flag) + " applies to saving checkpoints: give --save-dir DIR too (or "
          "leave " + flag + " out)");
  // The run folder holds one run's results and must be new or empty; a
  // save folder inside it (or holding it) would make each the other's
  // foreign file, and every retry fail the same way.
  if (!saveDir.empty() && !out.empty()) {
    bool saveInRun = dsrt::io::isWithin(saveDir, out), runInSave = dsrt::io::isWithin(out, saveDir);
    if (saveInRun || runInSave)
      die("--save-dir " + saveDir + " and --out " + out + ": " +
          (saveInRun && runInSave ? std::string("the same folder")
           : saveInRun            ? "the save folder is inside the run folder"
                                  : "the run folder is inside the save folder") +
          "; a run folder holds one run's results and a save folder only checkpoints: "
          "put them side by side (for example --save-dir " + out + "-ckpt)");
  }
  if (!init.empty() && !resume.empty())
    die("--init and --resume exclude each other: --resume continues a run (its weights, "
        "optimizer state and step), --init starts a new one from other weights");

  try {
    // With --hostfile or a plan for dp > 1, a dsrt that is not itself a rank
    // starts the ranks through mpirun and supervises them (runtime/launch).
    if (std::optional<int> status = dsrt::launch::launchIfNeeded(
            launchOptions, {planDir, out, threads, {argv, argv + argc}}))
      return *status;
    if (std::optional<int> rank = dsrt::launch::mpiRank())
      dsrt::launch::writeRankPidFile(out, *rank);
    std::unique_ptr<dsrt::comm::MpiCommunicator> comm = setupComm(commTimeout, threads);
    bool rank0 = !comm || comm->rank() == 0; // prints and writes the results
    // --device: auto takes the GPU where the plan can run there; a plan
    // the device executor cannot run yet (DeviceUnsupported) then runs on
    // the CPU, with the reason. Without a GPU, auto is simply the CPU.
    std::unique_ptr<dsrt::Executor> execPtr;
    if (device == "cuda" || (device == "auto" && dsrt::Executor::cudaUsable(nullptr))) {
      try {
        execPtr = std::make_unique<dsrt::Executor>(planDir, comm.get(), dsrt::Device::Cuda);
      } catch (const dsrt::DeviceUnsupported &e) {
        if (device == "cuda")
          throw;
        if (rank0)
          std::fprintf(stderr, "dsrt: note: running on the CPU, not the GPU: %s\n", e.what());
      }
    }
    if (!execPtr)
      execPtr = std::make_unique<dsrt::Executor>(planDir, comm.get(), dsrt::Device::Cpu);
    dsrt::Executor &exec = *execPtr;
    dsrt::config::TrainConfig cfg = exec.config();
    // A plan for one rank runs without mpirun and has no collective to time.
    if (app.count("--comm-timeout") && !comm)
      die("--comm-timeout: the plan runs on one rank, which has no collectives to time out; "
          "leave it out");
    // --resume: the checkpoint's progress (its seed drives the dropout
    // masks, so a different --seed would not continue the same run).
    std::optional<dsrt::checkpoint::Reader> ckpt;
    int64_t firstStep = 1;
    if (!resume.empty()) {
      ckpt.emplace(dsrt::checkpoint::Reader::open(resume));
      const dsrt::checkpoint::Progress &g = ckpt->progress();
      int64_t tbs = exec.microBatchSize() * exec.microBatches() * exec.dp();
      if (g.trainBatchSize != tbs)
        die("--resume " + ckpt->path() + ": saved with a global batch of " +
            std::to_string(g.trainBatchSize) + " samples per step, the plan's is " +
            std::to_string(tbs) + "; the data position (step x batch) would not continue");
      if (seedOpt->count() && seed != g.seed)
        die("--resume " + ckpt->path() + ": the run used --seed " + std::to_string(g.seed) +
            ", not " + std::to_string(seed) + " (the dropout masks follow the seed); leave "
            "--seed out to continue it");
      seed = g.seed;
      firstStep = g.step + 1;
      if (firstStep > steps)
        die("--resume " + ckpt->path() + ": the checkpoint is after step " +
            std::to_string(g.step) + " and --steps " + std::to_string(steps) +
            " (the total, counted from the first step) leaves nothing to run");
    }
    (void)resumeOpt;
    // --init: the whole file against the plan's model, before anything is
    // created (each rank loads only its own tensors later).
    std::string initialWeights = planDir + "/weights.safetensors";
    if (!init.empty()) {
      dsrt::onnx_export::InitCheck c = dsrt::onnx_export::checkInitWeights(init, planDir);
      initialWeights = init;
      if (rank0)
        std::printf("dsrt: initial weights from %s: the plan's %lld weights (other keys "
                    "checked: %lld tied aliases, %lld buffers of the model)\n",
                    init.c_str(), (long long)c.weights, (long long)c.tied,
                    (long long)c.buffers);
    }
    auto saveStep = [&](int64_t s) {
      return !saveDir.empty() && (s == steps || (saveInterval > 0 && s % saveInterval == 0));
    };
    // The save folder is checked before any training: a tag this run would
    // write must not exist yet. Rank 0 holds its lock until the run ends.
    std::optional<dsrt::checkpoint::SaveDir> saveDirLock;
    if (!saveDir.empty() && rank0) {
      saveDirLock.emplace(saveDir, keep);
      for (int64_t s = firstStep; s <= steps; ++s)
        if (saveStep(s))
          saveDirLock->checkFree(s);
    }
    // Every micro-batch of the run has a global index (data and dropout):
    // steps x micro-batches x dp must fit in it.
    if (__int128(steps) * exec.microBatches() * exec.dp() > (__int128(1) << 62))
      die("--steps " + std::to_string(steps) + " x " + std::to_string(exec.microBatches()) +
          " micro-batches x dp " + std::to_string(exec.dp()) +
          " exceeds the 2^62 micro-batches a run can number; run fewer steps");
    if (!configPath.empty()) {
      // The batch relation counts data-parallel ranks (not pipeline stages).
      dsrt::config::AutoValues autos;
      autos.totalSteps = steps;
      autos.microBatch = exec.microBatchSize();
      dsrt::config::TrainConfig given = dsrt::config::loadDsConfig(configPath, exec.dp(), autos);
      checkRuntimeConfig(cfg, given, configPath);
      cfg = given;
      exec.setConfig(given);
    }
    // total_num_steps "auto" (the Trainer's max_steps): this run's --steps.
    if (cfg.scheduler.totalStepsFromRun) {
      cfg.scheduler.params["total_num_steps"] = double(steps);
      exec.setConfig(cfg);
      if (rank0)
        std::fprintf(stderr, "dsrt: note: scheduler %s's total_num_steps is \"auto\": %lld, "
                             "the run's --steps\n",
                     cfg.scheduler.type.c_str(), (long long)steps);
    }
    // ds_config's wall_clock_breakdown asks for dsrt's per-op timing.
    if (cfg.wallClockBreakdown)
      profile = true;
    if (threads)
      dsrt::cpu::setNumThreads((int)threads);
    // Flush denormals to zero on every kernel thread: gradients and Adam
    // moments decay into the denormal range, where x86 arithmetic is ~100x
    // slower. (PyTorch's oneDNN/MKL paths do the same.)
#pragma omp parallel
    _mm_setcsr(_mm_getcsr() | 0x8040);

    std::unique_ptr<DataSource> source;
    if (data.empty() && !tokenDtype.empty())
      die("--token-dtype " + tokenDtype + ": applies only to a token file given with --data");
    if (data.empty()) {
      if (rank0)
        std::fprintf(stderr, "dsrt: no --data: training on synthetic random batches (token ids "
                             "uniform over the vocabulary), a smoke test, not a dataset\n");
      source = std::make_unique<SyntheticSource>(exec.plan(), exec.inputs(),
                                                 exec.microBatchSize());
    } else if (!tokenDtype.empty() && (fs::is_directory(data) || !fs::exists(data))) {
      die("--token-dtype " + tokenDtype + ": applies only to a token file, and --data " + data +
          " is " + (fs::is_directory(data) ? "a folder of .npy files" : "not a file"));
    } else if (fs::is_directory(data)) {
      source = std::make_unique<NpyFolder>(data, exec.inputs(), exec.microBatchSize());
    } else if (fs::exists(data)) {
      std::optional<dsrt::io::TokenWidth> width;
      if (!tokenDtype.empty())
        width = dsrt::io::parseTokenWidth(tokenDtype);
      source = std::make_unique<TokenSource>(data, width, exec.plan(), exec.inputs(),
                                             exec.microBatchSize(), exec.pipelined());
    } else {
      die("--data " + data + ": no such file or folder");
    }

    std::string skeleton = planDir + "/model.onnx";
    if (!exportOnnx.empty() && rank0) {
      std::vector<std::string> names; // every stage's, which rank 0 gathers
      for (const auto &[name, shape] : exec.allWeights())
        names.push_back(name);
      dsrt::onnx_export::checkSkeleton(skeleton, names);
      fs::path parent = fs::absolute(exportOnnx).parent_path();
      if (!fs::is_directory(parent))
        die("--export-onnx " + exportOnnx + ": the folder " + parent.string() +
            " does not exist");
      if (fs::is_directory(exportOnnx))
        die("--export-onnx " + exportOnnx + ": is a folder; give a file name");
      // Checked now, not after the run: an existing file (the source model,
      // the plan's model.onnx, an earlier export) is never written over.
      dsrt::io::checkNewFile(exportOnnx, "--export-onnx");
      dsrt::io::checkNewFile(exportOnnx + ".data", "--export-onnx (its external data)");
    }

    // What the process holds before the arena (binary, libraries, MPI,
    // the plan): the peak's part the plan does not predict by design.
    double baseRss = currentRssMiB();
    exec.initialize(initialWeights, seed);
    checkFiniteWeights(exec, initialWeights);
    if (ckpt) {
      // Load time (bench/checkpoint.py): the slowest rank's restore.
      auto restoreStart = std::chrono::steady_clock::now();
      std::string note = dsrt::checkpoint::restore(exec, *ckpt);
      if (rank0 && !note.empty())
        std::fprintf(stderr, "dsrt: note: --resume %s: %s\n", ckpt->path().c_str(), note.c_str());
      double restoreSeconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - restoreStart).count();
      if (exec.worldSize() > 1)
        restoreSeconds =
            exec.communicator().blockingAllReduceScalar(restoreSeconds, dsrt::comm::ReduceOp::Max);
      if (rank0)
        std::printf("dsrt: resuming %s after step %lld (%lld updates applied), restored in "
                    "%.2fs\n",
                    ckpt->path().c_str(), (long long)ckpt->progress().step,
                    (long long)ckpt->progress().appliedSteps, restoreSeconds);
      ckpt.reset(); // unmaps its files
    }
    dsrt::checkpoint::Layout layout;
    layout.dp = exec.dp();
    layout.pp = exec.pp();
    layout.zeroStage = int(exec.plan().zero_stage());
    layout.configJson = exec.plan().config_json();
    layout.precision = dsrt::config::precisionName(cfg.precision.kind);
    for (const dsrt::io::FileChecksum &c : dsrt::io::readChecksums(planDir))
      if (c.name == "plan.pb")
        layout.planSha256 = c.sha256;
    std::unique_ptr<dsrt::checkpoint::Saver> saver;
    if (!saveDir.empty())
      saver = std::make_unique<dsrt::checkpoint::Saver>(saveDir, keep, saveMode == "async",
                                                        layout, exec.communicator());
    dsrt::checkpoint::SaveResult lastSaved; // the newest committed checkpoint
    auto reportSave = [&](const std::optional<dsrt::checkpoint::SaveResult> &saved) {
      if (!saved || !rank0)
        return;
      lastSaved = *saved;
      char waited[64] = "";
      if (saver->async())
        std::snprintf(waited, sizeof waited, ", training waited %.3fs", saved->blocked);
      std::printf("dsrt: checkpoint %s: %.1f MiB in %.2fs (%.0f MiB/s)%s\n", saved->path.c_str(),
                  saved->bytes / 1048576.0, saved->seconds,
                  saved->bytes / 1048576.0 / std::max(saved->seconds, 1e-9), waited);
      std::fflush(stdout);
    };
    if (profile)
      exec.enableProfile();
    if (timeline) {
      if (!rank0 && out.empty())
        die("--timeline on several ranks needs --out (dsrt's own launcher passes it)");
      exec.recordTimeline(steps);
    }
    // A new or empty folder (or the one dsrt's launcher made for this run).
    std::string runDir =
        rank0 ? dsrt::io::makeRunDir(out, dsrt::launch::runToken()) : std::string();
    // With several ranks, metrics.csv also has the step's communication:
    // comm_elements (ZeRO-paper units, see comm::Counters) and comm_calls:
    // rank 0's collectives (a pipeline's stage 0; its messages are in the
    // summary at the end).
    // An fp16 run adds loss_scale (the scale the step's loss was multiplied
    // by) and skipped (1: the gradients overflowed and the update was
    // skipped).
    bool ranks = exec.worldSize() > 1;
    const dsrt::LossScaler *scaler = exec.lossScaler();
    std::unique_ptr<dsrt::io::MetricsWriter> metrics;
    if (rank0) {
      std::vector<std::string> extra;
      if (ranks)
        extra = {"comm_elements", "comm_calls"};
      if (scaler)
        extra.insert(extra.end(), {"loss_scale", "skipped"});
      metrics = std::make_unique<dsrt::io::MetricsWriter>(runDir, extra);
    }
    int64_t every = cfg.stepsPerPrint > 0 ? cfg.stepsPerPrint : 10;
    if (rank0) {
      std::string layout =
          exec.pipelined()
              ? ", pipeline of " + std::to_string(exec.pp()) + " stages x dp " +
                    std::to_string(exec.dp()) + " (" +
                    (exec.schedule().empty() ? std::string() : exec.schedule() + " schedule, ") +
                    std::to_string(exec.worldSize()) + " ranks)"
          : exec.dp() > 1 ? " x " + std::to_string(exec.dp()) + " ranks"
                          : std::string();
      std::string where = exec.device() == dsrt::Device::Cuda
                              ? "on " + dsrt::Executor::cudaDeviceName()
                              : std::to_string(dsrt::cpu::numThreads()) + " threads";
      std::printf("dsrt: %s, %lld steps x %lld micro-batches of %lld%s, %s, arena %.1f "
                  "MiB%s, run folder %s\n",
                  planDir.c_str(), (long long)steps, (long long)exec.microBatches(),
                  (long long)exec.microBatchSize(), layout.c_str(), where.c_str(),
                  exec.plan().arena_bytes() / 1048576.0,
                  exec.pipelined() ? " (stage 0)" : "", runDir.c_str());
      std::fflush(stdout);
    }

    // A step whose loss or gradient norm is NaN or infinite ends the run
    // there, loudly: its number, what was not finite, and the weights of
    // the last finite step kept. (The norm is checked before the update;
    // a non-finite loss with a finite norm stops after its update.)
    int64_t stoppedAt = 0, lastGood = steps;
    std::string stopReason;
    // A checkpoint that cannot be written (a full disk, a folder made
    // read-only) stops the run after its step, every rank alike (the save
    // agrees on failure); the weights are still written to the run folder,
    // so the run is not lost.
    std::string saveError;
    int64_t saveFailedAt = 0;
    // metrics.csv on a full disk: the error and the first step without a row.
    std::string metricsError;
    int64_t metricsFailedAt = 0;
    auto metricsNote = [&] {
      if (!metricsError.empty())
        std::fprintf(stderr, "dsrt: error: %s: metrics.csv has no rows from step %lld on\n",
                     metricsError.c_str(), (long long)metricsFailedAt);
    };
    auto guardedSave = [&](int64_t s, auto &&call) {
      try {
        reportSave(call());
      } catch (const dsrt::checkpoint::CheckpointError &e) {
        saveError = e.what();
        saveFailedAt = s;
        saver.reset();
      }
    };

    using Clock = std::chrono::steady_clock;
    auto start = Clock::now();
    auto windowStart = start;
    int64_t windowItems = 0;
    for (int64_t s = firstStep; s <= steps; ++s) {
      auto t0 = Clock::now();
      // Rank r reads the global micro-batches r, r + dp, ... of the step
      // (a pipeline's stages: those of their dp index, into the set of the
      // load_batch that asks).
      try {
        exec.step(s, [&](int64_t global, const std::vector<Tensor *> &into) {
          source->load(global, into);
        });
      } catch (const dsrt::NonFiniteError &e) {
        stoppedAt = s;
        lastGood = s - 1;
        stopReason = "the gradient norm is " + nonFinite(e.norm);
      } catch (const dsrt::LossScaleError &e) {
        // Every rank alike (the overflow is global); the update was not
        // applied, so the weights are those of the last applied step.
        stoppedAt = s;
        lastGood = s - 1;
        stopReason = e.what();
      }
      double stepTime = std::chrono::duration<double>(Clock::now() - t0).count();
      double loss = exec.globalLoss(); // the same on every rank
      // fp16: an overflow (which a non-finite loss also is) skips the step
      // instead of stopping the run.
      bool skipped = scaler && exec.stepSkipped();
      // Every rank must have skipped alike (the overflow flag comes from
      // the globally reduced norm); a disagreement would train diverging
      // replicas, so it stops the run.
      if (scaler && ranks) {
        double agree = exec.communicator().blockingAllReduceScalar(skipped ? 1.0 : 0.0,
                                                                   dsrt::comm::ReduceOp::Sum);
        if (agree != 0.0 && agree != double(exec.worldSize()))
          die("step " + std::to_string(s) + ": " + std::to_string(int64_t(agree)) + " of " +
              std::to_string(exec.worldSize()) +
              " ranks saw a gradient overflow; every rank must skip the same steps");
      }
      if (!stoppedAt && !skipped && !std::isfinite(loss)) {
        stoppedAt = lastGood = s;
        stopReason = "the loss is " + nonFinite(loss);
      } else if (stoppedAt && !std::isfinite(loss)) {
        stopReason = "the loss is " + nonFinite(loss) + " and " + stopReason;
      }
      // Items of the step: the pipeline's stages see the same micro-batches.
      windowItems += source->itemsPerMicroBatch() * exec.microBatches() * exec.dp();
      // Checkpoints (every rank): start one at its steps; otherwise commit
      // an asynchronous one whose files are written.
      if (saver && !stoppedAt && saveStep(s)) {
        dsrt::checkpoint::Progress g;
        g.step = s;
        g.appliedSteps = exec.appliedSteps();
        g.seed = exec.seed();
        g.trainBatchSize = exec.microBatchSize() * exec.microBatches() * exec.dp();
        g.microBatchSize = exec.microBatchSize();
        if (scaler)
          g.scaler = scaler->state();
        guardedSave(s, [&] { return saver->save(dsrt::checkpoint::ownedPieces(exec), g); });
      } else if (saver) {
        guardedSave(s, [&] { return saver->poll(); });
      }
      if (!rank0) {
        if (stoppedAt || saveFailedAt)
          break;
        continue;
      }
      std::vector<double> extra;
      if (ranks)
        extra = {double(exec.commCounters().elements()), double(exec.commCounters().calls())};
      if (scaler)
        extra.insert(extra.end(), {exec.stepLossScale(), skipped ? 1.0 : 0.0});
      // metrics.csv that cannot be written (a full disk) does not cost the
      // run: training goes on (every rank in step), checkpoints and the
      // final weights are still written, and dsrt exits with status 1.
      if (metricsError.empty()) {
        try {
          metrics->write(s, loss, exec.lr(), exec.gradNorm(), stepTime, extra);
        } catch (const dsrt::io::IoError &e) {
          metricsError = e.what();
          metricsFailedAt = s;
          std::fprintf(stderr,
                       "dsrt: error: step %lld: %s; training goes on without metrics (the "
                       "checkpoints and the final weights are still written), and dsrt will "
                       "exit with status 1\n",
                       (long long)s, metricsError.c_str());
        }
      }
      if (skipped)
        std::printf("step %6lld/%lld | gradient overflow at loss scale %.17g: update skipped "
                    "(%lld so far), loss scale now %.17g\n",
                    (long long)s, (long long)steps, exec.stepLossScale(),
                    (long long)scaler->skippedSteps(), scaler->scale());
      if (s % every == 0 || s == steps) {
        auto now = Clock::now();
        double window = std::chrono::duration<double>(now - windowStart).count();
        std::string fp16 = scaler ? " | loss scale " + fmtG(scaler->scale()) + " | skipped " +
                                        std::to_string(scaler->skippedSteps())
                                  : std::string();
        double norm = exec.gradNorm();
        std::string normText = std::isfinite(norm) ? std::string() : nonFinite(norm);
        if (normText.empty()) {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%.3f", norm);
          normText = buf;
        }
        std::printf("step %6lld/%lld | loss %.4f | lr %.3e | grad_norm %s%s | %.0f %s/s | "
                    "elapsed %.1fs\n",
                    (long long)s, (long long)steps, loss, exec.lr(), normText.c_str(),
                    fp16.c_str(), windowItems / std::max(window, 1e-9), source->itemName(),
                    std::chrono::duration<double>(now - start).count());
        std::fflush(stdout);
        windowStart = now;
        windowItems = 0;
      }
      if (stoppedAt || saveFailedAt)
        break;
    }
    // The save in flight completes (also when the run stopped: it is of
    // an earlier, finite step).
    if (saver)
      guardedSave(steps, [&] { return saver->finish(); });
    double total = std::chrono::duration<double>(Clock::now() - start).count();
    // The training peak, before whole weights are gathered for writing: the
    // largest over the ranks.
    int64_t rss = peakRssMiB();
    // Beyond the arena and the start-up footprint: what the plan misses
    // (kernel scratch, library caches, the loader), the largest over ranks.
    double arenaMiB = exec.plan().arena_bytes() / 1048576.0;
    double other = double(rss) - baseRss - arenaMiB;
    double otherShare = arenaMiB > 0 ? 100.0 * other / arenaMiB : 0;
    if (ranks) {
      rss = (int64_t)exec.communicator().blockingAllReduceScalar(double(rss),
                                                                 dsrt::comm::ReduceOp::Max);
      baseRss = exec.communicator().blockingAllReduceScalar(baseRss, dsrt::comm::ReduceOp::Max);
      other = exec.communicator().blockingAllReduceScalar(other, dsrt::comm::ReduceOp::Max);
      otherShare =
          exec.communicator().blockingAllReduceScalar(otherShare, dsrt::comm::ReduceOp::Max);
    }

    if (timeline)
      exec.writeTimeline((fs::path(rank0 ? runDir : out) /
                          ("timeline.rank-" + std::to_string(exec.worldRank()) + ".csv"))
                             .string());

    // Every rank takes part in gathering ZeRO shards (and a pipeline's
    // stages send theirs to rank 0); rank 0 writes.
    std::vector<dsrt::WholeTensor> whole = exec.gatherWeights();
    if (!rank0)
      return finishRank(stoppedAt || saveFailedAt ? 1 : 0);
    std::vector<dsrt::io::TensorRef> refs;
    for (const dsrt::WholeTensor &t : whole)
      refs.push_back({t.name, dsrt::io::DType::F32, t.shape, t.data});
    std::string weightsPath = runDir + "/weights.safetensors";
    if (stoppedAt) {
      // The weights after step lastGood; none when the first step failed
      // (they would be the plan's own).
      std::string kept = "no weights written (no step finished)";
      if (lastGood > 0) {
        dsrt::io::writeSafeTensors(weightsPath, refs,
                                   {{"format", "pt"},
                                    {"producer", "dsrt"},
                                    {"step", std::to_string(lastGood)}});
        kept = "the weights after step " + std::to_string(lastGood) +
               " (the last finite step) are in " + weightsPath;
      }
      std::fprintf(stderr,
                   "dsrt: error: step %lld: %s; training stopped (lower the learning rate, "
                   "enable gradient_clipping, or check the data and the initial weights); "
                   "%s, metrics in %s\n",
                   (long long)stoppedAt, stopReason.c_str(), kept.c_str(),
                   metrics->path().c_str());
      metricsNote();
      return finishRank(1);
    }
    if (saveFailedAt) {
      // The weights of the last step run (the failed checkpoint's, or the
      // final one's), so that a failed save never costs the run.
      int64_t at = std::min(saveFailedAt, steps);
      dsrt::io::writeSafeTensors(weightsPath, refs,
                                 {{"format", "pt"}, {"producer", "dsrt"},
                                  {"step", std::to_string(at)}});
      std::fprintf(stderr,
                   "dsrt: error: %s; training stopped after step %lld; its weights are in %s, "
                   "metrics in %s\n",
                   saveError.c_str(), (long long)at, weightsPath.c_str(),
                   metrics->path().c_str());
      metricsNote();
      return finishRank(1);
    }
    try {
      dsrt::io::writeSafeTensors(weightsPath, refs,
                                 {{"format", "pt"}, {"producer", "dsrt"},
                                  {"step", std::to_string(steps)}});
    } catch (const dsrt::io::IoError &e) {
      // Where the trained weights are, when the run folder cannot take
      // them (a full disk): the last step's checkpoint, if one was saved.
      std::string where =
          lastSaved.step == steps
              ? "; the trained weights are in the checkpoint " + lastSaved.path +
                    " (dsrt export " + lastSaved.path + " -o FILE writes them elsewhere)"
              : std::string("; the trained weights are lost (save checkpoints with "
                            "--save-dir to keep them)");
      std::fprintf(stderr, "dsrt: error: %s%s\n", e.what(), where.c_str());
      metricsNote();
      return finishRank(1);
    }
    std::printf("dsrt: done in %.1fs, peak RSS %lld MiB%s (planned arena %.1f MiB%s, %.0f MiB "
                "before it: binary, libraries, the plan; %.0f MiB other, %.1f%% of the arena); "
                "weights in %s, metrics in %s\n",
                total, (long long)rss, ranks ? " per rank (max)" : "", arenaMiB,
                exec.pipelined() ? " on stage 0" : "", baseRss, other, otherShare,
                weightsPath.c_str(), metrics->path().c_str());
    if (!exportOnnx.empty()) {
      try {
        dsrt::onnx_export::exportOnnx(skeleton, refs, exportOnnx);
      } catch (const std::exception &e) {
        die(std::string(e.what()) + " (the trained weights are in " + weightsPath + ")");
      }
      std::printf("dsrt: ONNX model with the trained weights in %s\n", exportOnnx.c_str());
    }
    if (ranks)
      std::printf("dsrt: communication per step%s: %s\n",
                  exec.pipelined() ? " (rank 0, stage 0)" : "",
                  exec.commCounters().summary().c_str());
    if (profile)
      exec.printProfile(stdout);
    if (!metricsError.empty()) {
      metricsNote();
      return finishRank(1);
    }
  } catch (const std::exception &e) {
    die(e.what());
  }
  return finishRank();
}
