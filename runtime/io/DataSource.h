//===- DataSource.h - the training data a run reads -------------*- C++ -*-===//
//
// The loaders of a run's inputs: a folder of NAME.npy files, a flat token
// file (nanoGPT / llm.c) or, without data, deterministic synthetic batches.
// Each is built for the plan's inputs (InputSpec: name, type, shape of one
// micro-batch, the bound of ids that index an embedding or a loss's
// classes) and fills micro-batch k of the whole run into the inputs'
// memory, the same on every rank and stage. Construction checks the data
// against the inputs and throws IoError naming the file and the input.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_IO_DATASOURCE_H
#define DSRT_IO_DATASOURCE_H

#include "io/DType.h"
#include "runtime/io/TokenFile.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dsrt::io {

/// One input of the plan, as one micro-batch fills it (dim 0: the batch).
struct InputSpec {
  std::string name;
  DType dtype = DType::F32; // F32, F64, I64, I32 or Bool
  std::vector<int64_t> shape;
  /// Integer ids must be in [0, indexBound) (0: no bound known), or equal
  /// ignoreIndex, the label a loss skips.
  int64_t indexBound = 0;
  std::optional<int64_t> ignoreIndex;
  /// Whether a .npy input's values are checked against those before
  /// training (a plan older than format 8 cannot say which label its loss
  /// skips).
  bool checkValues = true;
  int64_t numel() const;
  int64_t bytes() const;
};

class DataSource {
public:
  virtual ~DataSource() = default;
  /// Fills global micro-batch `k` into `into`, one buffer per spec, in the
  /// specs' order (a pipeline's stage loads the set a load_batch asks for).
  virtual void load(int64_t k, const std::vector<void *> &into) = 0;
  /// Tokens (or samples) one micro-batch consumes, for the throughput.
  virtual int64_t itemsPerMicroBatch() const = 0;
  virtual const char *itemName() const = 0;
  /// Whole micro-batches the data holds before load() wraps around (-1:
  /// unbounded, as synthetic batches are, or nothing to load on this
  /// pipeline stage). An evaluation reads no sample twice.
  virtual int64_t microBatchesHeld() const { return -1; }
  /// Whether load() reads a file while the run goes on (a token file), and
  /// so can fail after the checks before step 1: the file cut short or
  /// rewritten with ids the model has no row for. The same on every rank.
  virtual bool readsDuringRun() const { return false; }
  /// Reads and checks micro-batches `ks` before the load() calls that ask
  /// for them, so that such a failure comes before a step changes any
  /// weight (throws IoError naming the file). Only for readsDuringRun().
  virtual void readAhead(const std::vector<int64_t> &ks) { (void)ks; }
};

/// Where the data comes from (dsrt's --data and --token-dtype).
struct DataOptions {
  std::string path;      // empty: synthetic batches
  std::string tokenDtype; // u16 | u32 for a token file; empty: from the file
  std::string flag = "--data"; // the option that gave `path`, for errors
};

/// The loader `options` name for `inputs` with micro-batches of `batch`
/// samples. `pipelineStage`: the inputs are one stage's (a token file then
/// feeds the tokens, the targets, both or neither). Throws IoError.
std::unique_ptr<DataSource> openDataSource(const DataOptions &options,
                                           const std::vector<InputSpec> &inputs, int64_t batch,
                                           bool pipelineStage);

/// No data: deterministic random batches, for a first run of a plan and
/// for benchmarks. Integer inputs with an index bound are uniform in
/// [0, bound), other integers 0 or 1; floats uniform in [-1, 1); other
/// types zero. Micro-batch k draws the same values on every rank and stage.
std::unique_ptr<DataSource> syntheticSource(const std::vector<InputSpec> &inputs, int64_t batch);

/// A folder of NAME.npy files, one per input; dim 0 counts samples, and
/// micro-batch k reads samples k * batch ... (wrapping around).
std::unique_ptr<DataSource> npyFolderSource(const std::string &dir,
                                            const std::vector<InputSpec> &inputs, int64_t batch);

/// A flat token file: the two [B, T] int64 inputs get windows of T tokens
/// and the same windows shifted by one (the targets: the input named like
/// target/label, else the second). Every id is checked against the
/// inputs' index bound once, here, and again as each window is read.
std::unique_ptr<DataSource> tokenFileSource(const std::string &path,
                                            std::optional<TokenWidth> width,
                                            const std::vector<InputSpec> &inputs, int64_t batch,
                                            bool pipelineStage);

} // namespace dsrt::io

#endif // DSRT_IO_DATASOURCE_H
