//===- Checkpoint.h - universal, crash-safe training checkpoints -*- C++ -*-===//
//
// A checkpoint holds every logical tensor of the training state under its
// model name (fp32 master weights, optimizer states, frozen buffers) and the
// progress that cannot be recomputed (steps, applied updates, the seed, the
// loss scaler); everything else (the lr schedule, the data position, the
// dropout counters, the 16-bit copies of mixed precision) follows from them.
// docs/checkpoints.md describes the files:
//
//   SAVE_DIR/.dsrt-checkpoints          marker: the folder is dsrt's
//   SAVE_DIR/latest                     the newest complete tag, one line
//   SAVE_DIR/step-00000010/index.json   progress, plan identity, config and,
//                                       per tensor, its pieces
//   SAVE_DIR/step-00000010/rank-00000.safetensors   what world rank 0 owns
//
// Each rank writes only what it owns (its ZeRO chunk; a replicated tensor
// only on data-parallel index 0 of its stage) into a temporary folder;
// rank 0 then writes the index, fsyncs and renames the folder to its tag and
// replaces `latest` atomically. A kill at any moment leaves the previous
// checkpoint and `latest` as they were. Loading reads, for each tensor a
// rank needs, only the elements it holds (its chunk under any dp, stage or
// ZeRO stage), from whichever pieces cover them: every checkpoint loads into
// every layout of the same model and optimizer.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_CHECKPOINT_CHECKPOINT_H
#define DSRT_CHECKPOINT_CHECKPOINT_H

#include "runtime/comm/Communicator.h"
#include "runtime/core/Executor.h"
#include "runtime/core/LossScaler.h"
#include "io/FileUtil.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace dsrt::checkpoint {

constexpr const char *kMarker = ".dsrt-checkpoints";
constexpr const char *kLatest = "latest";
constexpr const char *kIndex = "index.json";
constexpr const char *kFormat = "dsc-checkpoint";
constexpr int kVersion = 1;

/// A checkpoint that cannot be written or loaded; the message names the
/// folder (and the tensor or key at fault).
class CheckpointError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// What a run has done, beyond its tensors.
struct Progress {
  int64_t step = 0;         // training steps done (the next is step + 1)
  int64_t appliedSteps = 0; // optimizer updates applied (fp16 skips some)
  uint64_t seed = 0;        // dropout masks
  int64_t trainBatchSize = 0, microBatchSize = 0;
  std::optional<LossScalerState> scaler;
  /// The last evaluation before the checkpoint (dsrt --eval-data): its
  /// step, mean validation loss and evaluation batches.
  struct Eval {
    int64_t step = 0;
    double loss = 0;
    int64_t batches = 0;
  };
  std::optional<Eval> lastEval;
};

/// "step-00000010".
std::string tagFor(int64_t step);

/// One slice of a logical tensor that this rank holds: float32 elements
/// [start, start + count) of the flattened tensor of `shape`.
struct Piece {
  std::string name;
  std::string kind; // "param", "opt_state", "frozen"
  std::vector<int64_t> shape;
  int64_t start = 0, count = 0;
  const float *data = nullptr;
  /// Where the state is not in memory (the NVMe tier): elements [first,
  /// first + n) of the piece into `dst`, a slice at a time; data is null.
  std::function<void(int64_t first, int64_t n, float *dst)> read;
};

/// Which replicated tensors a rank writes: those whole on every rank of
/// its stage (`whole`), and its tp rank's part of those split over tp
/// (`tpPart`). One folder all ranks share: data-parallel index 0 (and tp
/// rank 0 for whole ones). Node-local storage (`hosts`: every world rank's
/// host): the first rank holding the same replica on each host, so that
/// every host's folder holds what its ranks load.
struct ReplicaWriter {
  bool whole = false, tpPart = false;
};
ReplicaWriter replicaWriter(const Executor &exec, const std::vector<std::string> *hosts);

/// What this rank of `exec` writes: its ZeRO chunks (without padding), and
/// the replicated tensors `writer` gives it.
std::vector<Piece> ownedPieces(const Executor &exec, ReplicaWriter writer);
inline std::vector<Piece> ownedPieces(const Executor &exec) {
  return ownedPieces(exec, replicaWriter(exec, nullptr));
}

/// The folder checkpoints are saved into. Rank 0 constructs it before the
/// first step: a missing folder is created, an empty one or one marked as
/// dsrt's is taken; anything else is a CheckpointError (dsrt never writes
/// into a folder of someone else's files). checkFree() refuses tags that
/// exist already, before any training is done.
///
/// One run at a time: the SaveDir holds an exclusive lock (flock) on the
/// folder's marker for as long as it lives, and a second run's SaveDir on
/// the same folder is refused while it does (two runs' --keep deleted each
/// other's checkpoints, and racing saves of a tag mixed their files). The
/// lock goes with the process, a killed run's too.
class SaveDir {
public:
  SaveDir(std::string dir, int64_t keep);
  ~SaveDir();
  SaveDir(const SaveDir &) = delete;
  SaveDir &operator=(const SaveDir &) = delete;
  const std::string &path() const { return dir_; }
  /// Throws CheckpointError if the tag of `step` exists (an earlier run's).
  void checkFree(int64_t step) const;
  int64_t keep() const { return keep_; }

private:
  std::string dir_;
  int64_t keep_;
  int lockFd_ = -1;
};

/// Plan identity and layout, stored in the index (not needed to load).
struct Layout {
  int dp = 1, pp = 1, zeroStage = 0;
  std::string precision, planSha256;
  std::string configJson; // the canonical ds_config
  /// checkpoint.use_node_local_storage: SAVE_DIR is a folder on each
  /// host's own disk; `hosts` names every world rank's host.
  bool nodeLocal = false;
  std::vector<std::string> hosts;
};

/// A completed save.
struct SaveResult {
  std::string path;   // SAVE_DIR/TAG
  int64_t step = 0;
  uint64_t bytes = 0; // over all ranks
  double seconds = 0; // from the save's start to `latest` naming it
  double blocked = 0; // of which the training loop waited (rank 0)
};

/// Saves checkpoints into a folder, synchronously or asynchronously. Every
/// call is collective over `world` (every rank, in the same order); only
/// the folder's writer needs the SaveDir constructed (the others pass its
/// path): rank 0, or with node-local storage the first rank of each host
/// (isFolderWriter).
///
/// Synchronous: save() writes every rank's file; each rank's piece list
/// and the file's SHA-256 are all-gathered, and the writer writes the
/// index, renames the folder and replaces `latest` (with node-local
/// storage every host's writer, each the same index into its own folder;
/// the older tags are pruned only once every host committed), and
/// returns the result.
/// Asynchronous: save() copies this rank's pieces into a staging buffer
/// (the size of what the rank owns, allocated at the first save and
/// reused) and returns; a thread writes the file while training goes on.
/// poll(), called after every step, commits the save once every rank's
/// file is written (one scalar all-reduce per step while a save is in
/// flight); the next save() or finish() waits for it first. Either way a
/// checkpoint is complete (and named by `latest`) only after the commit.
/// Throws CheckpointError on every rank if any rank failed (the partial
/// folder is removed; `latest` is untouched).
/// Whether world rank `rank` writes the index, renames and prunes in its
/// host's SAVE_DIR: rank 0, or with `layout.nodeLocal` the first world rank
/// on its host.
bool isFolderWriter(const Layout &layout, int rank);

class Saver {
public:
  /// `continues`: this run continues the series of checkpoints `dir`
  /// holds (it resumed from one of them), so --keep may remove them;
  /// otherwise --keep removes only the tags this Saver commits.
  Saver(std::string dir, int64_t keep, bool async, Layout layout, comm::Communicator &world,
        bool continues = false);
  ~Saver();
  Saver(const Saver &) = delete;
  Saver &operator=(const Saver &) = delete;

  /// Starts (sync: does) the save of `pieces` as the checkpoint of
  /// `progress.step`. Returns the result of a save it completed: this one
  /// (sync) or the one before, which it waited for (async).
  std::optional<SaveResult> save(const std::vector<Piece> &pieces, const Progress &progress);
  /// Commits an asynchronous save whose files are all written.
  std::optional<SaveResult> poll();
  /// Waits for and commits the save in flight, if any.
  std::optional<SaveResult> finish();
  bool async() const { return async_; }

private:
  struct Pending;
  void begin(const std::string &tag);
  void commit(Pending &p);
  std::string dir_;
  int64_t keep_;
  std::set<std::string> othersTags_; // another run's: never pruned
  bool async_;
  Layout layout_;
  comm::Communicator &world_;
  bool writer_ = false; // isFolderWriter
  std::vector<float> staging_;
  std::unique_ptr<Pending> pending_;
};

/// A checkpoint opened for reading: SAVE_DIR (its newest complete tag:
/// the one `latest` names, or a newer tag a kill left `latest` behind) or
/// SAVE_DIR/TAG.
class Reader {
public:
  static Reader open(const std::string &path);
  Reader(Reader &&) noexcept;
  ~Reader();

  const std::string &path() const { return path_; } // SAVE_DIR/TAG
  const Progress &progress() const { return progress_; }
  const nlohmann::json &index() const { return index_; }

  struct Tensor {
    std::string kind;
    std::vector<int64_t> shape;
    int64_t numel = 0;
  };
  /// Every logical tensor, by name.
  const std::map<std::string, Tensor> &tensors() const { return tensors_; }

  /// Copies float32 elements [start, start + count) of the flattened
  /// `name` into `dst`. Throws CheckpointError naming the tensor and the
  /// elements no piece covers, or an unreadable file.
  void read(const std::string &name, int64_t start, int64_t count, float *dst) const;
  /// Appends the whole float32 tensor `name` to `file`, read in 4 MiB
  /// slices (an export's peak is one slice, not the model).
  void writeTo(const std::string &name, io::AtomicFile &file) const;

private:
  Reader() = default;
  struct PieceRef {
    std::string file, key;
    int64_t start = 0, count = 0;
  };
  struct Open;
  /// The float32 data of piece `p` of `name`, its file opened (and checked:
  /// checksum, step) on first use.
  const float *pieceData(const std::string &name, const PieceRef &p) const;
  std::string path_;
  nlohmann::json index_;
  Progress progress_;
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, std::vector<PieceRef>> pieces_;
  /// Whole repeated pieces (a tensor two pipeline stages hold), by tensor.
  std::map<std::string, std::vector<PieceRef>> copies_;
  /// index.json's "files": each rank file's SHA-256.
  std::map<std::string, std::string> sha256_;
  /// Saved with node-local storage: the folder holds its host's files.
  bool nodeLocal_ = false;
  mutable std::map<std::string, bool> present_;
  bool present(const std::string &file) const;
  mutable std::map<std::string, std::unique_ptr<Open>> open_;
};

/// Loads the tensors `exec` holds from `ckpt` (each rank its own elements)
/// and its progress. Throws CheckpointError when the checkpoint is of
/// another model or optimizer: a tensor missing, extra, or of another shape,
/// or a value that is not finite. Returns a note for the user when the
/// checkpoint crosses fp16 loss scaling (Executor::restoreProgress), else "".
std::string restore(Executor &exec, const Reader &ckpt);

/// Writes the consolidated float32 parameters (and frozen buffers) of
/// `ckpt` to `out` as one safetensors file, streamed: the peak memory is one
/// buffer of a few MiB, not the model. Never writes over an existing file.
/// Returns the number of tensors written.
int64_t exportWeights(const Reader &ckpt, const std::string &out);

} // namespace dsrt::checkpoint

#endif // DSRT_CHECKPOINT_CHECKPOINT_H
