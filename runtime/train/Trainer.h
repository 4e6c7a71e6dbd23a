//===- Trainer.h - the training loop of a run --------------------*- C++ -*-===//
//
// What dsrt does once a plan is loaded, its weights initialized and its
// data open: the step loop and what it writes. Every rank runs it; rank 0
// alone prints and writes the run folder.
//
//   * the steps firstStep..steps, each through Executor::step with the
//     data source's micro-batches (rank r of dp reads the global
//     micro-batches r, r + dp, ...);
//   * the stop on a non-finite loss or gradient norm (the weights of the
//     last finite step are written, the exit status is 1), fp16's skipped
//     steps, which every rank must agree on;
//   * metrics.csv (a full disk costs the rows, not the run), the progress
//     line every steps_per_print steps;
//   * checkpoints (sync or async; a failed save stops the run after its
//     step with the weights written);
//   * at the end the trained weights (and the ONNX export), the memory and
//     communication summary, the timeline and the profile.
//
// `afterStep` is the hook for what runs between steps on every rank
// (evaluation, monitors).
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_TRAIN_TRAINER_H
#define DSRT_TRAIN_TRAINER_H

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/core/Executor.h"
#include "runtime/io/DataSource.h"
#include "runtime/io/Metrics.h"

#include <functional>
#include <optional>
#include <string>

namespace dsrt::monitor {
class EventWriter;
}

namespace dsrt::train {

struct TrainOptions {
  std::string planDir;   // for the banner and the checkpoints' plan checksum
  int64_t steps = 1;     // the last step (a total, counted from 1)
  int64_t firstStep = 1; // after --resume, the step after the checkpoint's
  std::string outDir;    // --out: the run folder ("": ./runs/<timestamp>)
  std::string runToken;  // the launcher's token for a folder it made ("": none)
  std::string saveDir;   // checkpoints (empty: none); its writer holds its lock
  // Every world rank's host (launch::rankHosts; empty where unknown), for
  // checkpoint.use_node_local_storage.
  std::vector<std::string> rankHosts;
  int64_t saveInterval = 0; // 0: only after the last step
  int64_t keep = 0;         // 0: keep every checkpoint
  // --resume continues the series in --save-dir (its checkpoint is there):
  // --keep may remove that series' earlier tags. Otherwise the tags the
  // folder holds at the start are another run's and --keep never touches
  // them.
  bool continuesSaveDir = false;
  bool asyncSave = false;
  bool profile = false;  // per-op-kind times at the end
  bool timeline = false; // the last step's instructions, per rank
  std::string exportOnnx; // also the ONNX model with the trained weights
  std::string onnxSkeleton; // the plan's model.onnx, for exportOnnx
  double baseRssMiB = 0; // the process before the arena (for the summary)
  // Evaluation (--eval-data): the held-out data, every evalInterval steps
  // (0: only after the last step) evalBatches batches of a step's
  // micro-batches (0: every whole batch the data holds).
  io::DataSource *evalData = nullptr;
  std::string evalDataPath;
  int64_t evalInterval = 0;
  int64_t evalBatches = 0;

  /// Whether the validation loss is computed after step `s`.
  bool evalsAt(int64_t s) const {
    return evalData && (s == steps || (evalInterval > 0 && s % evalInterval == 0));
  }

  /// Whether a checkpoint is saved after step `s`.
  bool savesAt(int64_t s) const {
    return !saveDir.empty() && (s == steps || (saveInterval > 0 && s % saveInterval == 0));
  }
};

/// One finished step, as every rank sees it.
struct StepRecord {
  int64_t step = 0;
  double loss = 0, lr = 0, gradNorm = 0, seconds = 0;
  bool skipped = false; // fp16: the update was skipped on overflow
  std::optional<double> evalLoss; // the validation loss after this step
};

/// How the loop ended (also for tests).
struct Outcome {
  int64_t stoppedAt = 0; // the step with a non-finite loss or norm, or
                         // whose data could not be read (0: none)
  int64_t lastGood = 0;  // the last step whose weights are whole
  std::string stopReason;
  bool dataFailed = false; // the stop was data that could not be read
  int64_t saveFailedAt = 0; // the step whose checkpoint failed (0: none)
  std::string saveError;
  int64_t metricsFailedAt = 0; // the first step without a metrics.csv row
  std::string metricsError;
  std::string reportError; // a report the run could not write (rank 0)
  checkpoint::SaveResult lastSaved; // the newest committed checkpoint
  std::string weightsPath;          // where rank 0 wrote the weights ("": none)
  double seconds = 0;               // the loop's wall time
};

class Trainer {
public:
  Trainer(Executor &exec, io::DataSource &data, TrainOptions options);
  ~Trainer();

  /// Runs the steps, then writes the results. Returns the exit status: 0,
  /// or 1 when the run stopped early or something could not be written
  /// (each said on stderr). Throws on errors that end every rank (a
  /// disagreement between ranks, an unwritable ONNX export).
  int run();

  const Outcome &outcome() const { return outcome_; }
  /// Rank 0's run folder (made by run(); "" on the other ranks).
  const std::string &runDir() const { return runDir_; }

  /// Runs after every step on every rank, before the progress line.
  std::function<void(const StepRecord &)> afterStep;

private:
  void loop();
  /// The evaluation batches, agreed by every rank (throws when the data
  /// holds fewer than asked for, or not one).
  int64_t planEvaluation();
  /// The mean validation loss over the evaluation batches (every rank);
  /// throws DataFailure when the data cannot be read.
  double evaluate();
  /// Reads ahead what `source` loads for `step` (evaluation batch step - 1
  /// for the validation data) and agrees on it with every rank: "" or why
  /// the data cannot be read, the same stop on every rank.
  std::string readAhead(io::DataSource &source, int64_t step);
  int64_t evalBatches_ = 0;
  std::optional<checkpoint::Progress::Eval> lastEval_;
  int writeResults();
  /// 0/1 Adam saved between syncs on several ranks: says whose state the
  /// checkpoint holds.
  void noteLocalStepSave(int64_t step);
  Executor &exec_;
  io::DataSource &data_;
  TrainOptions options_;
  Outcome outcome_;
  bool rank0_;
  std::string runDir_;
  std::unique_ptr<checkpoint::Saver> saver_;
  checkpoint::ReplicaWriter replicas_; // which replicated tensors this rank saves
  std::unique_ptr<io::MetricsWriter> metrics_;
  std::unique_ptr<io::CsvMonitor> monitor_; // csv_monitor (rank 0)
  std::unique_ptr<monitor::EventWriter> events_; // tensorboard (rank 0)
  comm::OpLog opLog_;                              // comms_logger
  void writeCommsLog();
};

/// Throws on a NaN or infinity in this rank's initial parameters (its ZeRO
/// shard), naming `weightsPath`, the tensor and the element: such a run can
/// only train NaN.
void checkFiniteWeights(const Executor &exec, const std::string &weightsPath);

/// The plan's inputs as the data sources take them (dtype, one
/// micro-batch's shape, and the index bound the plan records for integer
/// inputs on any stage).
std::vector<io::InputSpec> inputSpecs(const Executor &exec);

} // namespace dsrt::train

#endif // DSRT_TRAIN_TRAINER_H
