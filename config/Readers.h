//===- Readers.h - the ds_config section readers (internal) --------------===//
#ifndef DSRT_CONFIG_READERS_H
#define DSRT_CONFIG_READERS_H

#include "config/Section.h"

namespace dsrt::config::detail {

// KeyCheck.cpp: the key table's checks and "auto"; returns the config the
// section readers read (Inert and Refused keys removed).
/// `totalStepsFromRun`: scheduler.params.total_num_steps was "auto" and
/// is left to the run (AutoValues::runLengthAtRun).
json checkAgainstKeyTable(const json &root, const std::string &source, const AutoValues &autos,
                          std::vector<std::string> &notes, bool &totalStepsFromRun);
// DsConfigPrecision.cpp
void readPrecision(const Section &top, PrecisionConfig &p, std::vector<std::string> &notes);
// DsConfigFeatures.cpp
void readActivationCheckpointing(const Section &top, TrainConfig &cfg);
void readCheckpoint(const Section &top, TrainConfig &cfg);
void readTensorParallel(const Section &top, TrainConfig &cfg);
void readMonitor(const Section &top, const std::string &key, MonitorConfig &m);
void readCommsLogger(const Section &top, CommsLoggerConfig &c);
void readFlopsProfiler(const Section &top, FlopsProfilerConfig &f);
/// The names comms_logger.prof_ops takes for the ops dsrt issues.
const std::vector<std::string> &commsLoggerOps();
// DsConfigElastic.cpp: false when the section is absent or disabled;
// otherwise sets the batch keys as DeepSpeed's elasticity does.
bool readElasticity(const Section &top, int64_t worldSize, TrainConfig &cfg,
                    std::vector<std::string> &notes);
// DsConfigBatch.cpp
void readBatch(const Section &top, int64_t worldSize, TrainConfig &cfg);
void readPipeline(const Section &top, PipelineConfig &p);
void readZero(const Section &top, ZeroConfig &z, std::vector<std::string> &notes);
void readAio(const Section &top, AioConfig &a);
// DsConfigOptimizer.cpp
void readOptimizer(const Section &top, OptimizerConfig &o, std::vector<std::string> &notes);
void readScheduler(const Section &top, const OptimizerConfig &opt, SchedulerConfig &s);
/// The scheduler's params as toJson writes them (nullopt: no known type).
std::optional<ordered_json> schedulerParamsJson(const SchedulerConfig &s);

} // namespace dsrt::config::detail

#endif // DSRT_CONFIG_READERS_H
