//===- dsrt.cpp - run a dsc plan ------------------------------------------===//
//
//   dsrt PLAN --data DATA [--steps N] [--seed S] [--out DIR] [--config F]
//        [--threads T] [--token-dtype u16|u32] [--profile] [--export-onnx F]
//        [--comm-timeout SECONDS] [--nvme-path DIR]
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
#include "config/CliChecks.h"
#include "config/DsConfig.h"
#include "runtime/core/Executor.h"
#include "runtime/kernels/cpu/Kernels.h"
#include "io/OutputDir.h"
#include "runtime/io/Process.h"
#include "runtime/launch/Launcher.h"
#include "runtime/onnx/OnnxExport.h"
#include "runtime/onnx/StateDict.h"
#include "plan/Limits.h"
#include "runtime/train/RunSetup.h"
#include "runtime/train/Trainer.h"

#include <csignal>
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
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

/// Under mpirun, the communicator of all ranks (null otherwise; the
/// executor splits it for a pipeline plan). Ranks on one node share its cores unless --threads or
/// OMP_NUM_THREADS (which dsrt's launcher sets to cores / local ranks) says.
std::unique_ptr<dsrt::comm::MpiCommunicator> setupComm(double timeoutSeconds, int64_t threads) {
  std::optional<dsrt::launch::RankEnv> env = dsrt::launch::rankEnvironment();
  if (!env)
    return nullptr;
  auto comm =
      std::make_unique<dsrt::comm::MpiCommunicator>(timeoutSeconds, env->rank, env->size);
  if (!threads && env->localSize > 1 && !std::getenv("OMP_NUM_THREADS"))
    dsrt::cpu::setNumThreads(std::max(1, dsrt::cpu::numThreads() / env->localSize));
  return comm;
}

/// The exit of a rank that finished (MPI_Finalize under mpirun).
int finishRank(int status = 0) {
  std::fflush(stdout);
  dsrt::comm::finalizeMpi();
  return status;
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
  try {
    dsrt::checkpoint::exportCheckpoint({ckpt, out, planDir, onnxOut},
                                       [](const std::string &line, bool note) {
                                         std::fprintf(note ? stderr : stdout, "%s\n",
                                                      line.c_str());
                                       });
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
                 "ds_config.json: steps_per_print, wall_clock_breakdown, the scheduler, the "
                 "monitors, comms_logger and flops_profiler may change at run time; the other "
                 "settings are compiled in and must match the plan's")
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
  std::string nvmePath;
  app.add_option("--nvme-path", nvmePath,
                 "folder of the NVMe tier's files (one or two per rank), instead of the "
                 "plan's nvme_path(s)")
      ->check(CLI::ExistingDirectory);
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
  app.add_option(
      "--resume", resume,
      "continue from a checkpoint (a --save-dir: its latest; or DIR/TAG), saved with any dp, "
      "pp or ZeRO stage; --steps is the total, counted from the first step")
      ->check(dsrt::cli::nonEmpty());
  std::string init;
  app.add_option("--init", init,
                 "start from these weights instead of the plan's: a safetensors file of the "
                 "model's PyTorch state_dict (fine-tuning; dsrt export writes one)")
      ->check(dsrt::cli::nonEmpty());
  std::string evalData;
  int64_t evalInterval = 0, evalBatches = 0;
  app.add_option("--eval-data", evalData,
                 "held-out data, as --data takes it: the validation loss (and a language "
                 "model's perplexity) after the last step and every --eval-interval steps, "
                 "from the plan's evaluation program (forward and loss, dropout off)")
      ->check(dsrt::cli::nonEmpty());
  app.add_option("--eval-interval", evalInterval,
                 "steps between evaluations (0, the default: only after the last step)")
      ->check(integer<int64_t>(0, dsrt::limits::kMaxSteps));
  app.add_option("--eval-batches", evalBatches,
                 "evaluation batches, each a step's micro-batches (0, the default: every "
                 "whole batch --eval-data holds)")
      ->check(integer<int64_t>(0, dsrt::limits::kMaxSteps));
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
  for (const char *flag : {"--eval-interval", "--eval-batches"})
    if (app.count(flag) && evalData.empty())
      die(std::string(flag) + " applies to evaluation: give --eval-data PATH too (or leave " +
          flag + " out)");
  for (const char *flag : {"--save-interval", "--keep", "--save-mode"})
    if (app.count(flag) && saveDir.empty())
      die(std::string(flag) + " applies to saving checkpoints: give --save-dir DIR too (or "
          "leave " + flag + " out)");
  try {
    dsrt::train::checkRunFolders(saveDir, out);
  } catch (const std::exception &e) {
    die(e.what());
  }
  if (!init.empty() && !resume.empty())
    die("--init and --resume exclude each other: --resume continues a run (its weights, "
        "optimizer state and step), --init starts a new one from other weights");

  try {
    // With --hostfile or a plan for dp > 1, a dsrt that is not itself a rank
    // starts the ranks through mpirun and supervises them (runtime/launch).
    if (std::optional<int> status = dsrt::launch::launchIfNeeded(
            launchOptions, {planDir, out, threads, {argv, argv + argc}, saveDir,
                            dsrt::train::latestCheckpoint}))
      return *status;
    if (std::optional<int> rank = dsrt::launch::mpiRank())
      dsrt::launch::writeRankPidFile(out, *rank);
    std::unique_ptr<dsrt::comm::MpiCommunicator> comm = setupComm(commTimeout, threads);
    bool rank0 = !comm || comm->rank() == 0; // prints and writes the results
    auto note = [rank0](const std::string &text) {
      if (rank0)
        std::fprintf(stderr, "dsrt: note: %s\n", text.c_str());
    };
    std::unique_ptr<dsrt::Executor> execPtr =
        dsrt::train::openExecutor(planDir, comm.get(), device, note);
    dsrt::Executor &exec = *execPtr;
    // A plan compiled from a model file without its weights trains only
    // from weights given here.
    if (exec.plan().no_weights() && init.empty() && resume.empty())
      throw std::runtime_error(
          planDir + " holds no weights: " + exec.plan().source_model() +
          " was exported without them (--no-weights), or it is an elastic plan, compiled for a "
          "restart; give the initial weights with --init "
          "FILE (the model's state_dict as safetensors, as dsrt export or "
          "safetensors.torch.save_file write it) or continue a run with --resume CHECKPOINT");
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
      dsrt::train::ResumePoint r = dsrt::train::checkResume(
          exec, *ckpt, seedOpt->count() ? std::optional<uint64_t>(seed) : std::nullopt, steps);
      firstStep = r.firstStep;
      seed = r.seed;
    }
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
    dsrt::train::TrainOptions run;
    run.planDir = planDir;
    run.steps = steps;
    run.firstStep = firstStep;
    run.outDir = out;
    run.runToken = dsrt::launch::runToken();
    run.saveDir = saveDir;
    run.saveInterval = saveInterval;
    run.keep = keep;
    if (ckpt && !saveDir.empty()) { // resumed from a checkpoint in --save-dir
      std::error_code ec;
      run.continuesSaveDir = fs::equivalent(fs::path(ckpt->path()).parent_path(), saveDir, ec);
    }
    run.asyncSave = saveMode == "async";
    run.profile = profile;
    run.timeline = timeline;
    run.exportOnnx = exportOnnx;
    run.rankHosts = dsrt::launch::rankHosts(exec.communicator().size()).value_or(run.rankHosts);
    dsrt::train::checkRunLength(exec, steps);
    dsrt::config::PlanSettings cfg =
        dsrt::train::applyRunSettings(exec, configPath, steps, note);
    // The save folder is checked before any training: a tag this run would
    // write must not exist yet. Its writer holds its lock until the run ends.
    std::unique_ptr<dsrt::checkpoint::SaveDir> saveDirLock = dsrt::train::lockSaveDir(run, exec);
    // ds_config's wall_clock_breakdown asks for dsrt's per-op timing.
    if (cfg.wallClockBreakdown)
      profile = true;
    if (threads)
      dsrt::cpu::setNumThreads((int)threads);
    dsrt::cpu::flushDenormals();

    if (data.empty() && tokenDtype.empty() && rank0)
      std::fprintf(stderr, "dsrt: no --data: training on synthetic random batches (token ids "
                           "uniform over the vocabulary), a smoke test, not a dataset\n");
    std::unique_ptr<dsrt::io::DataSource> source = dsrt::io::openDataSource(
        {data, tokenDtype}, dsrt::train::inputSpecs(exec), exec.microBatchSize(),
        exec.pipelined());
    std::unique_ptr<dsrt::io::DataSource> evalSource;
    if (!evalData.empty()) {
      std::string why = exec.evalUnavailable();
      if (!why.empty())
        die("--eval-data: " + why);
      evalSource = dsrt::io::openDataSource({evalData, tokenDtype, "--eval-data"},
                                            dsrt::train::inputSpecs(exec),
                                            exec.microBatchSize(), exec.pipelined());
      run.evalData = evalSource.get();
      run.evalDataPath = evalData;
      run.evalInterval = evalInterval;
      run.evalBatches = evalBatches;
    }

    std::string skeleton = planDir + "/model.onnx";
    if (!exportOnnx.empty() && rank0)
      dsrt::train::checkExportOnnx(exec, skeleton, exportOnnx);

    // What the process holds before the arena (binary, libraries, MPI,
    // the plan): the peak's part the plan does not predict by design.
    double baseRss = dsrt::io::currentRssMiB();
    if (!nvmePath.empty())
      dsrt::train::setNvmePath(exec, nvmePath);
    exec.initialize(initialWeights, seed);
    dsrt::train::checkFiniteWeights(exec, initialWeights);
    if (ckpt) {
      dsrt::train::restoreCheckpoint(exec, *ckpt, rank0, note);
      ckpt.reset(); // unmaps its files
    }
    run.onnxSkeleton = skeleton;
    run.baseRssMiB = baseRss;
    dsrt::train::Trainer trainer(exec, *source, run);
    return finishRank(trainer.run());
  } catch (const std::exception &e) {
    die(e.what());
  }
  return finishRank();
}
