//===- RunSetup.cpp - dsrt's run policy before the first step -------------===//

#include "runtime/train/RunSetup.h"

#include "config/PlanSettings.h"
#include "io/OutputDir.h"
#include "runtime/onnx/OnnxExport.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

namespace fs = std::filesystem;

namespace dsrt::train {

std::unique_ptr<Executor> openExecutor(const std::string &planDir, comm::Communicator *comm,
                                       const std::string &device, const NoteFn &note) {
  // auto takes the GPU where the plan can run there; a plan the device
  // executor cannot run yet (DeviceUnsupported) then runs on the CPU, with
  // the reason. Without a GPU, auto is simply the CPU.
  // The plan is loaded and validated once; a backend that refuses it
  // leaves it on the CPU, as it was.
  auto exec = std::make_unique<Executor>(planDir, comm);
  if (device == "cuda" || (device == "auto" && cudaUsable(nullptr))) {
    try {
      exec->setBackend(makeBackend(Device::Cuda));
    } catch (const DeviceUnsupported &e) {
      if (device == "cuda")
        throw;
      note(std::string("running on the CPU, not the GPU: ") + e.what());
    }
  }
  return exec;
}

void checkRunFolders(const std::string &saveDir, const std::string &out) {
  if (saveDir.empty() || out.empty())
    return;
  bool saveInRun = io::isWithin(saveDir, out), runInSave = io::isWithin(out, saveDir);
  if (saveInRun || runInSave)
    throw std::runtime_error(
        "--save-dir " + saveDir + " and --out " + out + ": " +
        (saveInRun && runInSave ? std::string("the same folder")
         : saveInRun            ? "the save folder is inside the run folder"
                                : "the run folder is inside the save folder") +
        "; a run folder holds one run's results and a save folder only checkpoints: "
        "put them side by side (for example --save-dir " + out + "-ckpt)");
}

ResumePoint checkResume(Executor &exec, const checkpoint::Reader &ckpt,
                        std::optional<uint64_t> seed, int64_t steps) {
  const checkpoint::Progress &g = ckpt.progress();
  int64_t tbs = exec.microBatchSize() * exec.microBatches() * exec.dp();
  if (g.trainBatchSize != tbs)
    throw std::runtime_error("--resume " + ckpt.path() + ": saved with a global batch of " +
                             std::to_string(g.trainBatchSize) +
                             " samples per step, the plan's is " + std::to_string(tbs) +
                             "; the data position (step x batch) would not continue");
  if (seed && *seed != g.seed)
    throw std::runtime_error("--resume " + ckpt.path() + ": the run used --seed " +
                             std::to_string(g.seed) + ", not " + std::to_string(*seed) +
                             " (the dropout masks follow the seed); leave --seed out to "
                             "continue it");
  // Every rank resumes from the same step: with node-local storage each
  // host opened its own folder, and a save that some hosts committed and
  // others did not leaves their newest tags apart.
  comm::Communicator &world = exec.communicator();
  if (world.size() > 1) {
    double lo = world.blockingAllReduceScalar(double(g.step), comm::ReduceOp::Min);
    double hi = world.blockingAllReduceScalar(double(g.step), comm::ReduceOp::Max);
    if (lo != hi)
      throw std::runtime_error(
          "--resume " + ckpt.path() + ": this rank's checkpoint is of step " +
          std::to_string(g.step) + ", other ranks' of steps " + std::to_string(int64_t(lo)) +
          " to " + std::to_string(int64_t(hi)) +
          " (node-local folders of hosts that did not all commit the last save): resume from "
          "the tag every host has, --resume SAVE_DIR/" + checkpoint::tagFor(int64_t(lo)));
  }
  ResumePoint r{g.step + 1, g.seed};
  if (r.firstStep > steps)
    throw std::runtime_error("--resume " + ckpt.path() + ": the checkpoint is after step " +
                             std::to_string(g.step) + " and --steps " + std::to_string(steps) +
                             " (the total, counted from the first step) leaves nothing to run");
  return r;
}

void checkRunLength(const Executor &exec, int64_t steps) {
  if (__int128(steps) * exec.microBatches() * exec.dp() > (__int128(1) << 62))
    throw std::runtime_error("--steps " + std::to_string(steps) + " x " +
                             std::to_string(exec.microBatches()) + " micro-batches x dp " +
                             std::to_string(exec.dp()) +
                             " exceeds the 2^62 micro-batches a run can number; run fewer "
                             "steps");
}

std::unique_ptr<checkpoint::SaveDir> lockSaveDir(const TrainOptions &run, const Executor &exec) {
  if (run.saveDir.empty())
    return nullptr;
  // The folder's writer (checkpoint::isFolderWriter): rank 0, or with
  // node-local storage the first rank of each host, each its own folder.
  checkpoint::Layout storage;
  storage.nodeLocal = exec.settings().checkpointNodeLocal;
  storage.hosts = run.rankHosts;
  int world = exec.dp() * exec.pp() * exec.tp();
  if (storage.nodeLocal && storage.hosts.size() != size_t(world))
    throw std::runtime_error(
        "checkpoint.use_node_local_storage: the hosts of the " + std::to_string(world) +
        " ranks are not known (dsrt's launcher tells its ranks; a plain mpirun does not): "
        "start the run with dsrt --hostfile");
  if (!checkpoint::isFolderWriter(storage, exec.worldRank()))
    return nullptr;
  auto dir = std::make_unique<checkpoint::SaveDir>(run.saveDir, run.keep);
  for (int64_t s = run.firstStep; s <= run.steps; ++s)
    if (run.savesAt(s))
      dir->checkFree(s);
  return dir;
}

config::PlanSettings applyRunSettings(Executor &exec, const std::string &configPath,
                                      int64_t steps, const NoteFn &note) {
  config::PlanSettings settings = exec.settings();
  if (!configPath.empty()) {
    // The batch relation counts data-parallel ranks (not pipeline stages).
    config::AutoValues autos;
    autos.totalSteps = steps;
    autos.microBatch = exec.microBatchSize();
    config::PlanSettings given =
        config::planSettingsOf(config::loadDsConfig(configPath, exec.dp(), autos));
    // The settings compiled into the program (batch, optimizer, ZeRO,
    // precision, ...) must be the plan's; the run-time ones replace its.
    std::string differs = config::firstDifferingGroup(settings, given);
    if (!differs.empty())
      throw std::runtime_error(configPath + ": " + differs +
                               " differ from the plan's (they are compiled in: recompile "
                               "with dsc --config " + configPath + ")");
    settings = given;
  }
  // total_num_steps "auto" (the Trainer's max_steps): this run's --steps.
  if (settings.scheduler.totalStepsFromRun) {
    settings.scheduler.params["total_num_steps"] = double(steps);
    note("scheduler " + settings.scheduler.type + "'s total_num_steps is \"auto\": " +
         std::to_string(steps) + ", the run's --steps");
  }
  exec.setSettings(settings);
  return settings;
}

void checkExportOnnx(const Executor &exec, const std::string &skeleton,
                     const std::string &exportOnnx) {
  std::vector<std::string> names; // every stage's, which rank 0 gathers
  for (const auto &[name, shape] : exec.allWeights())
    names.push_back(name);
  onnx_export::checkSkeleton(skeleton, names);
  fs::path parent = fs::absolute(exportOnnx).parent_path();
  if (!fs::is_directory(parent))
    throw std::runtime_error("--export-onnx " + exportOnnx + ": the folder " +
                             parent.string() + " does not exist");
  if (fs::is_directory(exportOnnx))
    throw std::runtime_error("--export-onnx " + exportOnnx + ": is a folder; give a file name");
  // An existing file (the source model, the plan's model.onnx, an earlier
  // export) is never written over.
  io::checkNewFile(exportOnnx, "--export-onnx");
  io::checkNewFile(exportOnnx + ".data", "--export-onnx (its external data)");
}

void setNvmePath(Executor &exec, const std::string &nvmePath) {
  if (!exec.plan().nvme_tier().bytes())
    throw std::runtime_error("--nvme-path " + nvmePath +
                             ": the plan has no NVMe tier (its optimizer state is not "
                             "offloaded to NVMe); leave it out");
  exec.setNvmePath(nvmePath);
}

void restoreCheckpoint(Executor &exec, const checkpoint::Reader &ckpt, bool rank0,
                       const NoteFn &note) {
  // Load time (bench/checkpoint.py): the slowest rank's restore.
  auto start = std::chrono::steady_clock::now();
  std::string adapted = checkpoint::restore(exec, ckpt);
  if (!adapted.empty())
    note("--resume " + ckpt.path() + ": " + adapted);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (exec.worldSize() > 1)
    seconds = exec.communicator().blockingAllReduceScalar(seconds, comm::ReduceOp::Max);
  if (rank0)
    std::printf("dsrt: resuming %s after step %lld (%lld updates applied), restored in %.2fs\n",
                ckpt.path().c_str(), (long long)ckpt.progress().step,
                (long long)ckpt.progress().appliedSteps, seconds);
}

std::optional<std::pair<std::string, int64_t>> latestCheckpoint(const std::string &saveDir) {
  std::error_code ec;
  bool any = fs::exists(fs::path(saveDir) / checkpoint::kLatest, ec);
  for (fs::directory_iterator it(saveDir, ec), end; !any && !ec && it != end; it.increment(ec))
    any = it->path().filename().string().rfind("step-", 0) == 0 &&
          it->path().filename().string().find('.') == std::string::npos; // not a .partial
  if (!any)
    return std::nullopt;
  checkpoint::Reader r = checkpoint::Reader::open(saveDir);
  return std::make_pair(r.path(), r.progress().step);
}

} // namespace dsrt::train
