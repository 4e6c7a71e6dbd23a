//===- RunSetup.h - dsrt's run policy before the first step -----*- C++ -*-===//
//
// What a run checks and settles between the plan's executor and the first
// step, so that the driver only reads its command line: the folders of the
// run and of its checkpoints, the checkpoint it resumes (its batch, seed
// and step against the plan and the run), the save folder's lock, the
// run-time ds_config, the ONNX export's destination, the NVMe tier's
// folder, and the restore itself. Each refusal throws std::runtime_error
// (or a subclass) with the message dsrt prints after "dsrt: error: ",
// before anything is written.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_TRAIN_RUNSETUP_H
#define DSRT_TRAIN_RUNSETUP_H

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/core/Executor.h"
#include "runtime/train/Trainer.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace dsrt::train {

/// A note for people (rank 0 prints it on stderr after "dsrt: note: ").
using NoteFn = std::function<void(const std::string &)>;

/// The executor of `planDir` on `device` ("cpu", "cuda", or "auto": the
/// GPU where there is one and the plan can run there, else the CPU, with
/// a note saying why).
std::unique_ptr<Executor> openExecutor(const std::string &planDir, comm::Communicator *comm,
                                       const std::string &device, const NoteFn &note);

/// --save-dir and --out: a run folder holds one run's results and a save
/// folder only checkpoints, so neither may be inside the other.
void checkRunFolders(const std::string &saveDir, const std::string &out);

/// The newest complete checkpoint in `saveDir` (SAVE_DIR/TAG and its step),
/// nullopt when the folder holds none yet (a restart from the start);
/// throws CheckpointError when one is there but cannot be read.
std::optional<std::pair<std::string, int64_t>> latestCheckpoint(const std::string &saveDir);

/// Where --resume continues: the step after the checkpoint's, with its seed.
struct ResumePoint {
  int64_t firstStep = 1;
  uint64_t seed = 0;
};

/// --resume: the checkpoint must have the plan's global batch (the data
/// position is step x batch), the run's --seed when one is given (the
/// dropout masks follow it), and leave a step to run before --steps.
ResumePoint checkResume(Executor &exec, const checkpoint::Reader &ckpt,
                        std::optional<uint64_t> seed, int64_t steps);

/// Every micro-batch of the run has a global index (data and dropout):
/// steps x micro-batches x dp must fit in it.
void checkRunLength(const Executor &exec, int64_t steps);

/// The save folder's lock (rank 0 holds it until the run ends), checked
/// for every tag this run would write: none may exist yet.
std::unique_ptr<checkpoint::SaveDir> lockSaveDir(const TrainOptions &run, const Executor &exec);

/// dsrt --config (when `configPath` is not empty): the run-time settings
/// of that ds_config replace the plan's, refused when a setting compiled
/// into the plan differs (named by its group); then a total_num_steps left
/// to the run ("auto") becomes `steps`, with a note. Returns the settings
/// the run uses.
config::PlanSettings applyRunSettings(Executor &exec, const std::string &configPath,
                                      int64_t steps, const NoteFn &note);

/// --export-onnx: the plan's model.onnx (`skeleton`) holds every weight
/// the run trains, and the file (and its external data) can be made new
/// in an existing folder; checked before the run, not after it.
void checkExportOnnx(const Executor &exec, const std::string &skeleton,
                     const std::string &exportOnnx);

/// --nvme-path: the plan must have an NVMe tier for it to hold.
void setNvmePath(Executor &exec, const std::string &nvmePath);

/// Restores `ckpt` into the initialized executor (every rank), with the
/// slowest rank's time; notes what the restore adapted.
void restoreCheckpoint(Executor &exec, const checkpoint::Reader &ckpt, bool rank0,
                       const NoteFn &note);

} // namespace dsrt::train

#endif // DSRT_TRAIN_RUNSETUP_H
