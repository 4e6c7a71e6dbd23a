//===- Executor.cpp - loading and validating a plan, the arena -----------===//
#include "runtime/core/Executor.h"
#include "runtime/core/Tier.h"
#include "runtime/kernels/cpu/Kernels.h"

#include "plan/ElementBytes.h"
#include "plan/Version.h"

#include "io/SafeTensors.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/unknown_field_set.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

namespace dsrt {
namespace plan = dsc::plan;

namespace {
/// A collective operand's element type (bindCollective allows F32, BF16
/// and F16).
comm::Elem commElem(const Tensor &t) { return plan_util::ioDType(t.dtype); }
} // namespace

size_t Tensor::bytes() const {
  return size_t(numel) * size_t(plan_util::elementBytes(dtype));
}

namespace {

/// Whether the arena asks for transparent huge pages: DSRT_HUGEPAGES unset
/// or 1; 0 keeps 4 KiB pages; anything else is an error, not ignored.
bool hugePages() {
  const char *v = std::getenv("DSRT_HUGEPAGES");
  if (!v || std::string(v) == "1")
    return true;
  if (std::string(v) == "0")
    return false;
  throw PlanError(std::string("DSRT_HUGEPAGES=") + v +
                  ": expected 0 (4 KiB pages) or 1 (huge pages, the default)");
}

std::string shapeString(const cpu::Shape &s) {
  std::string r = "[";
  for (int i = 0; i < s.rank; ++i)
    r += (i ? "," : "") + std::to_string(s.dims[i]);
  return r + "]";
}

/// A dimension list whose product, and the product of any of its non-zero
/// dimensions, stays within kMaxPlanElements (a zero dimension must not
/// hide huge others: kernels multiply subsets of them). Returns the product.
int64_t boundedProduct(const google::protobuf::RepeatedField<int64_t> &dims, cpu::Shape &shape,
                       const std::string &where, const char *what) {
  shape.rank = dims.size();
  int64_t nonZero = 1;
  bool empty = false;
  for (int i = 0; i < dims.size(); ++i) {
    int64_t d = dims[i];
    if (d < 0 || (d > 0 && nonZero > kMaxPlanElements / d))
      throw PlanError(where + ": bad " + what + " dimension " + std::to_string(d) + " (at most " +
                      std::to_string(kMaxPlanElements) + " elements)");
    shape.dims[i] = d;
    empty |= d == 0;
    nonZero *= d ? d : 1;
  }
  return empty ? 0 : nonZero;
}

/// RAM and swap: what an allocation can get at most.
uint64_t machineMemoryBytes() {
  struct sysinfo si;
  if (::sysinfo(&si) != 0)
    return UINT64_MAX;
  return (uint64_t(si.totalram) + uint64_t(si.totalswap)) * si.mem_unit;
}

/// The memory limit of this process' cgroup (v1: the memory controller's
/// hierarchical limit; v2: the lowest memory.max from its cgroup up), or
/// UINT64_MAX where there is none: a container's limit, or one a test
/// sets, kills the process beyond it as surely as the machine's size.
uint64_t cgroupMemoryLimit() {
  std::ifstream self("/proc/self/cgroup");
  std::string line;
  uint64_t limit = UINT64_MAX;
  while (std::getline(self, line)) {
    size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos)
      continue;
    std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers == "memory" || (controllers.find("memory") != std::string::npos &&
                                    controllers.find(',') != std::string::npos)) {
      std::ifstream stat("/sys/fs/cgroup/" + controllers + path + "/memory.stat");
      std::string key;
      uint64_t value = 0;
      while (stat >> key >> value)
        if (key == "hierarchical_memory_limit")
          limit = std::min(limit, value);
    } else if (controllers.empty() && line.compare(0, 2, "0:") == 0) {
      for (std::string p = path; !p.empty(); p = p.substr(0, p.rfind('/'))) {
        std::ifstream max("/sys/fs/cgroup" + p + "/memory.max");
        std::string v;
        if (max >> v && v != "max")
          limit = std::min<uint64_t>(limit, std::strtoull(v.c_str(), nullptr, 10));
        if (p == "/")
          break;
      }
    }
  }
  return limit;
}
} // namespace


Executor::Executor(const std::string &dir, comm::Communicator *world)
    : dir_(dir), world_(world) {
  std::string path = dir + "/plan.pb";
  name_ = path;
  PlanFile file = readPlanFile(dir);
  plan::Plan top = std::move(file.plan);
  weightsSha256_ = std::move(file.weightsSha256);
  if (!world_) {
    ownWorld_ = std::make_unique<comm::SelfCommunicator>();
    world_ = ownWorld_.get();
  }
  if (top.pp() > 1) {
    setupPipeline(top, path);
  } else {
    PlanShape shape = planShape(top, path);
    plan_.Swap(&top);
    dp_ = int(shape.dp);
    tp_ = int(shape.tp);
    if (tp_ > 1) {
      if (int64_t(world_->size()) != int64_t(dp_) * tp_)
        throw PlanError(path + ": plan compiled for dp=" + std::to_string(dp_) + " x tp=" +
                        std::to_string(tp_) + " but running on " +
                        std::to_string(world_->size()) +
                        (world_->size() == 1 ? " rank" : " ranks"));
      // tp innermost: world rank w is tp rank w % tp of dp index w / tp.
      int w = world_->rank();
      try {
        ownDp_ = world_->split(w % tp_, w / tp_);
        ownTp_ = world_->split(w / tp_, w % tp_);
      } catch (const comm::CommError &e) {
        throw PlanError(e.what());
      }
      comm_ = ownDp_.get();
      comm_->progressWhileWaiting(ownTp_.get());
      ownTp_->progressWhileWaiting(comm_);
    } else if (world_->size() != dp_) {
      throw PlanError(path + ": plan compiled for dp=" + std::to_string(dp_) + " but running on " +
                      std::to_string(world_->size()) +
                      (world_->size() == 1 ? " rank" : " ranks") + ": recompile with --dp " +
                      std::to_string(world_->size()) +
                      (dp_ > 1 && world_->size() == 1
                           ? " (or run it with mpirun -np " + std::to_string(dp_) + ")"
                           : std::string()));
    } else {
      comm_ = world_;
    }
    // Axis 1 of a plan without a pipeline is this rank alone.
    ownPp_ = std::make_unique<comm::SelfCommunicator>(world_->timeoutSeconds());
    int64_t m = plan_.program().micro_batches();
    if (m < 1 || m > kMaxMicroBatches)
      throw PlanError(path + ": micro_batches " + std::to_string(m) + " must lie in [1, " +
                      std::to_string(kMaxMicroBatches) + "]");
  }
  // The settings dsrt reads (format 9: typed plan data; an older plan's
  // from its recorded ds_config).
  try {
    settings_ = config::readPlanSettings(plan_, name_);
  } catch (const config::ConfigError &e) {
    throw PlanError(e.what());
  }
  // Format 7: the rule of the instructions' step classes (0/1 Adam).
  if (plan_.has_step_rule()) {
    const plan::StepRule &r = plan_.step_rule();
    if (r.var_freeze_step() < 0 || r.var_update_scaler() < 0 || r.local_step_scaler() < 0 ||
        r.local_step_clipper() < 1 || r.step_offset() < 0 || r.step_offset() > 1)
      throw PlanError(name_ + ": step_rule {var_freeze_step " +
                      std::to_string(r.var_freeze_step()) + ", var_update_scaler " +
                      std::to_string(r.var_update_scaler()) + ", local_step_scaler " +
                      std::to_string(r.local_step_scaler()) + ", local_step_clipper " +
                      std::to_string(r.local_step_clipper()) + ", step_offset " +
                      std::to_string(r.step_offset()) +
                      "} is out of range (non-negative, the clipper at least 1, the offset 0 "
                      "or 1)");
    stepRule_ = zeroOneRuleOf(r);
  }
  ctx_.comm = comm_;
  ctx_.rank = comm_->rank();
  // Axis 2 of a plan without tensor parallelism is this rank alone.
  if (!ownTp_)
    ownTp_ = std::make_unique<comm::SelfCommunicator>(world_->timeoutSeconds());
  ctx_.comms[0] = comm_;
  ctx_.comms[1] = ownPp_.get();
  ctx_.comms[2] = ownTp_.get();
  ctx_.ranks[0] = comm_->rank();
  ctx_.ranks[1] = ownPp_->rank();
  ctx_.ranks[2] = ownTp_->rank();
  ctx_.dp = dp_;
  ctx_.pipelined = pp_ > 1;
  validateBuffers();
  prologue_ = resolve(plan_.program().prologue(), "prologue");
  micro_ = resolve(plan_.program().micro_batch(), "micro_batch");
  epilogue_ = resolve(plan_.program().epilogue(), "epilogue");
  if (pp_ > 1)
    validatePipeline();
  validateCollectives(prologue_, "prologue");
  validateCollectives(micro_, "micro_batch");
  validateCollectives(epilogue_, "epilogue");
  validateEval();
  auto scalar = [&](uint32_t index, plan::DType dtype, const char *what) {
    if (index >= tensors_.size() || tensors_[index].dtype != dtype || tensors_[index].numel != 1)
      throw PlanError(name_ + ": the " + what + " buffer " + std::to_string(index) +
                      " is not a scalar of the right type");
  };
  if (hasLoss_)
    scalar(plan_.loss_buffer(), plan::F32, "loss");
  scalar(plan_.grad_norm_buffer(), plan::F32, "grad_norm");
  scalar(plan_.lr_buffer(), plan::F32, "lr");
  scalar(plan_.step_buffer(), plan::I64, "step");
  ctx_.settings = &settings_;
  // fp16: the loss scale the step reads, and DeepSpeed's scaler moving it.
  for (size_t k = 0; k < tensors_.size(); ++k) {
    if (tensors_[k].role != plan::LOSS_SCALE)
      continue;
    if (lossScale_)
      throw PlanError(name_ + ": buffers " + std::to_string(lossScale_ - tensors_.data()) +
                      " and " + std::to_string(k) + " are both the loss scale");
    scalar(uint32_t(k), plan::F32, "loss_scale");
    lossScale_ = &tensors_[k];
  }
  if (lossScale_ && settings_.precision != config::Precision::FP16)
    throw PlanError(name_ + ": the plan scales its loss, but does not train in fp16");
  if (lossScale_) {
    const config::Fp16Config &f = settings_.fp16;
    LossScalerConfig sc;
    static_cast<config::Fp16Config &>(sc) = f;
    try {
      scaler_.emplace(sc);
    } catch (const std::invalid_argument &e) {
      throw PlanError(name_ + " (baked config): " + e.what());
    }
  }
  program_.reset(new ProgramView{name_, plan_, tensors_, arena_, {&prologue_, &micro_, &epilogue_},
                                 ctx_, lossScale_, hasLoss_, world_->size(),
                                 [this] { progressComms(); }});
  backend_ = makeCpuBackend();
}

void Executor::setBackend(std::unique_ptr<Backend> backend) {
  if (arena_)
    throw PlanError(name_ + ": the backend is chosen before initialize()");
  backend->bind(*program_);
  backend_ = std::move(backend);
}


void Executor::setupPipeline(plan::Plan &top, const std::string &path) {
  PlanShape shape = planShape(top, path);
  pp_ = int(shape.pp);
  tp_ = int(shape.tp);
  if (top.stages_size() != pp_)
    throw PlanError(path + ": a pipeline plan of pp=" + std::to_string(pp_) + " has " +
                    std::to_string(top.stages_size()) + " stage plans");
  dp_ = int(shape.dp);
  int losses = 0;
  for (int s = 0; s < pp_; ++s) {
    const plan::Plan &st = top.stages(s);
    if (std::max<uint32_t>(1, st.dp()) != uint32_t(dp_))
      throw PlanError(path + ": stage " + std::to_string(s) + " is compiled for dp=" +
                      std::to_string(std::max<uint32_t>(1, st.dp())) + ", the pipeline for dp=" +
                      std::to_string(dp_));
    if (st.stages_size() || st.pp() > 1)
      throw PlanError(path + ": stage " + std::to_string(s) + " is itself a pipeline plan");
    if (std::max<uint32_t>(1, st.tp()) != uint32_t(tp_))
      throw PlanError(path + ": stage " + std::to_string(s) + " is compiled for tp=" +
                      std::to_string(std::max<uint32_t>(1, st.tp())) + ", the pipeline for tp=" +
                      std::to_string(tp_));
    losses += st.has_loss();
  }
  if (losses != 1)
    throw PlanError(path + ": " + std::to_string(losses) +
                    " stages hold the loss (has_loss); a pipeline has one, its last stage");
  int64_t m = top.pipeline_micro_batches();
  if (m < 1 || m > kMaxMicroBatches)
    throw PlanError(path + ": pipeline_micro_batches " + std::to_string(m) + " must lie in [1, " +
                    std::to_string(kMaxMicroBatches) + "]");
  int need = pp_ * dp_ * tp_, have = world_->size();
  if (have != need)
    throw PlanError(path + ": plan compiled for pp=" + std::to_string(pp_) + " x dp=" +
                    std::to_string(dp_) +
                    (tp_ > 1 ? " x tp=" + std::to_string(tp_) : std::string()) + " = " +
                    std::to_string(need) + " ranks but running on " + std::to_string(have) +
                    (have == 1 ? " rank" : " ranks") + ": run it with mpirun -np " +
                    std::to_string(need) + " (or recompile for " + std::to_string(have) +
                    (have == 1 ? " rank)" : " ranks)"));
  // Every stage's parameters, for gathering the weights on world rank 0:
  // the first stage that holds a name gives it.
  // Model buffers that train.assign writes (BatchNorm's running
  // statistics) are gathered like them.
  std::map<std::string, size_t> seen;
  for (int s = 0; s < pp_; ++s) {
    std::set<uint32_t> assigned;
    const plan::Program &prog = top.stages(s).program();
    for (const auto *list : {&prog.prologue(), &prog.micro_batch(), &prog.epilogue()})
      for (const plan::Instr &in : *list)
        if (in.op() == "train.assign")
          assigned.insert(in.outputs().begin(), in.outputs().end());
    for (int k = 0; k < top.stages(s).buffers_size(); ++k) {
      const plan::Buffer &b = top.stages(s).buffers(k);
      if (b.role() != plan::PARAM && !(b.role() == plan::FROZEN && assigned.count(uint32_t(k))))
        continue;
      // The whole tensor (of a ZeRO shard or a tp part).
      const auto &dims = b.full_shape_size() ? b.full_shape() : b.shape();
      // World rank 0 allocates every stage's parameters: bounded here, as
      // its own stage's buffers are by validateBuffers().
      cpu::Shape bounded;
      if (dims.size() > cpu::kMaxRank)
        throw PlanError(path + ": stage " + std::to_string(s) + " parameter '" + b.name() +
                        "' has rank " + std::to_string(dims.size()));
      boundedProduct(dims, bounded,
                     path + ": stage " + std::to_string(s) + " parameter '" + b.name() + "'",
                     "shape");
      std::vector<int64_t> shape(dims.begin(), dims.end());
      auto [it, fresh] = seen.emplace(b.name(), stageParams_.size());
      if (fresh) {
        stageParams_.push_back({b.name(), shape, s});
      } else if (stageParams_[it->second].shape != shape) {
        throw PlanError(path + ": parameter '" + b.name() + "' has shape " +
                        io::formatShape(shape) + " in stage " + std::to_string(s) + " but " +
                        io::formatShape(stageParams_[it->second].shape) + " in stage " +
                        std::to_string(stageParams_[it->second].stage));
      }
    }
    }

  // tp innermost, then the stage: world rank w is tp rank w % tp of stage
  // (w / tp) % pp of dp index (w / tp) / pp (the launcher's rank table).
  int w = world_->rank();
  int tpRank = w % tp_, rest = w / tp_;
  stage_ = rest % pp_;
  int index = rest / pp_;
  std::string config = top.ds_config();
  std::optional<plan::LrSchedule> lrSchedule;
  if (top.has_lr_schedule())
    lrSchedule = top.lr_schedule();
  schedule_ = top.schedule();
  plan_.Swap(top.mutable_stages(stage_));
  top.Clear(); // the other stages' plans are not needed any more
  if (plan_.ds_config().empty()) // format 1-8 stages read their settings from it
    plan_.set_ds_config(config);
  if (!plan_.has_lr_schedule() && lrSchedule)
    *plan_.mutable_lr_schedule() = *lrSchedule;
  name_ = path + " (stage " + std::to_string(stage_) + ")";
  hasLoss_ = plan_.has_loss();
  ctx_.microBatches = m;
  // The stage's data-parallel group (ordered by dp index), the index's
  // pipeline group (ordered by stage) and, with tp, the tensor-parallel
  // group of one stage and dp index (ordered by tp rank); each group of
  // the same tp rank.
  try {
    ownDp_ = world_->split(stage_ * tp_ + tpRank, index);
    ownPp_ = world_->split(index * tp_ + tpRank, stage_);
    if (tp_ > 1)
      ownTp_ = world_->split(rest, tpRank);
  } catch (const comm::CommError &e) {
    throw PlanError(e.what());
  }
  comm_ = ownDp_.get();
  if (comm_->size() != dp_ || comm_->rank() != index || ownPp_->size() != pp_ ||
      ownPp_->rank() != stage_ || (ownTp_ && (ownTp_->size() != tp_ || ownTp_->rank() != tpRank)))
    throw PlanError(name_ + ": splitting the world of " + std::to_string(have) +
                    " ranks gave a dp group of " + std::to_string(comm_->size()) +
                    " and a pp group of " + std::to_string(ownPp_->size()));
  std::vector<comm::Communicator *> groups{comm_, ownPp_.get(), ownTp_.get()};
  for (comm::Communicator *a : groups)
    for (comm::Communicator *b : groups)
      if (a && b && a != b)
        a->progressWhileWaiting(b);
  // Checks of this stage's plan alone come after the (collective) splits,
  // so a rank that fails them does not leave the others inside a split.
  if (plan_.program().micro_batch_size())
    throw PlanError(name_ + ": a pipeline stage runs its whole schedule in the prologue; its "
                            "micro_batch list has " +
                    std::to_string(plan_.program().micro_batch_size()) + " instructions");
}

void Executor::validatePipeline() {
  // load_batch: the micro-batch in range, every set like micro-batch 0's,
  // every INPUT buffer loaded by one.
  const Instr *first = nullptr;
  std::vector<bool> loaded(tensors_.size(), false);
  std::vector<std::vector<const Instr *>> loaders(size_t(ctx_.microBatches)); // by micro-batch
  for (const std::vector<Instr> *list : {&prologue_, &epilogue_})
    for (const Instr &i : *list) {
      if (i.op != "load_batch")
        continue;
      if (i.ints[0] >= ctx_.microBatches)
        throw PlanError(name_ + ": " + i.label + " (load_batch): micro-batch " +
                        std::to_string(i.ints[0]) + " of a step of " +
                        std::to_string(ctx_.microBatches) + " (pipeline_micro_batches)");
      loaders[size_t(i.ints[0])].push_back(&i);
      if (!first || (i.ints[0] == 0 && first->ints[0] != 0))
        first = &i;
      for (const Tensor *t : i.out)
        loaded[size_t(t - tensors_.data())] = true;
    }
  inputs_.clear();
  if (first)
    inputs_ = first->out;
  auto describe = [](const std::vector<Tensor *> &ts) {
    std::string r;
    for (const Tensor *t : ts)
      r += (r.empty() ? "" : ", ") + t->name + " " + plan::DType_Name(t->dtype) + " " +
           shapeString(t->shape);
    return r;
  };
  for (const std::vector<Instr> *list : {&prologue_, &epilogue_})
    for (const Instr &i : *list) {
      if (i.op != "load_batch")
        continue;
      bool same = i.out.size() == inputs_.size();
      for (size_t j = 0; same && j < i.out.size(); ++j) {
        const Tensor *a = i.out[j], *b = inputs_[j];
        same = a->name == b->name && a->dtype == b->dtype && a->shape.rank == b->shape.rank &&
               std::equal(a->shape.dims, a->shape.dims + a->shape.rank, b->shape.dims);
      }
      if (!same)
        throw PlanError(name_ + ": " + i.label + " (load_batch): loads micro-batch " +
                        std::to_string(i.ints[0]) + " into " + describe(i.out) +
                        "; micro-batch " + std::to_string(first->ints[0]) + " into " +
                        describe(inputs_));
    }
  // A stage that loads data loads every micro-batch of the step, once.
  for (size_t m = 0; first && m < loaders.size(); ++m)
    if (loaders[m].size() != 1)
      throw PlanError(name_ + ": " +
                      (loaders[m].empty()
                           ? "no load_batch loads micro-batch " + std::to_string(m)
                           : loaders[m][1]->label + " (load_batch) loads micro-batch " +
                                 std::to_string(m) + " again (" + loaders[m][0]->label + " did)") +
                      "; a stage that loads data loads each of the step's " +
                      std::to_string(ctx_.microBatches) + " micro-batches once");
  for (size_t k = 0; k < tensors_.size(); ++k)
    if (tensors_[k].role == plan::INPUT && !loaded[k])
      throw PlanError(name_ + ": buffer " + std::to_string(k) + " ('" + tensors_[k].name +
                      "') is an INPUT that no load_batch fills");
}

Executor::~Executor() {
  nvme_.reset(); // its I/O thread finishes the writes it was given first
  backend_.reset(); // the device's memory
  std::free(arena_);
  std::free(hostTier_);
}

void Executor::validateBuffers() {
  const std::string &path = name_;
  if (plan_.arena_bytes() > kMaxArenaBytes)
    throw PlanError(path + ": arena of " + std::to_string(plan_.arena_bytes()) +
                    " bytes, more than the " + std::to_string(kMaxArenaBytes) +
                    " a plan may have");
  if (plan_.nvme_tier().bytes() &&
      (plan_.nvme_tier().path().empty() || plan_.nvme_tier().block_size() == 0 ||
       plan_.nvme_tier().block_size() % io::AioFile::kAlign ||
       plan_.nvme_tier().queue_depth() == 0 || plan_.nvme_tier().queue_depth() > 4096))
    throw PlanError(path + ": nvme_tier needs a path, a block size that is a multiple of " +
                    std::to_string(io::AioFile::kAlign) + " and a queue depth of 1 to 4096");
  const plan::NvmeTier &nvmeTier = plan_.nvme_tier();
  const bool paramFile = !nvmeTier.param_path().empty();
  if (paramFile && (nvmeTier.param_offset() > nvmeTier.bytes() ||
                    nvmeTier.param_offset() % io::AioFile::kAlign))
    throw PlanError(path + ": nvme_tier.param_offset " +
                    std::to_string(nvmeTier.param_offset()) +
                    " must be a multiple of " + std::to_string(io::AioFile::kAlign) +
                    " within the tier's " + std::to_string(nvmeTier.bytes()) + " bytes");
  if (paramFile && plan_.format_version() < 10)
    throw PlanError(path + ": nvme_tier has a param_path, which a format-" +
                    std::to_string(plan_.format_version()) +
                    " plan cannot say (format 10 and later)");
  if (plan_.peak_live_bytes() > plan_.arena_bytes())
    throw PlanError(path + ": peak_live_bytes " + std::to_string(plan_.peak_live_bytes()) +
                    " exceeds the arena's " + std::to_string(plan_.arena_bytes()) +
                    " bytes (no arena holds less than what is live at once)");
  if (!paramFile && nvmeTier.param_offset())
    throw PlanError(path + ": nvme_tier.param_offset without a param_path");
  if (plan_.host_tier_bytes() > kMaxArenaBytes)
    throw PlanError(path + ": host tier of " + std::to_string(plan_.host_tier_bytes()) +
                    " bytes, more than the " + std::to_string(kMaxArenaBytes) +
                    " a plan may have");
  if (plan_.micro_batch_size() < 0 || plan_.micro_batch_size() > kMaxPlanElements)
    throw PlanError(path + ": micro_batch_size " + std::to_string(plan_.micro_batch_size()) +
                    " out of range");
  tensors_.resize(plan_.buffers_size());
  for (int k = 0; k < plan_.buffers_size(); ++k) {
    const plan::Buffer &b = plan_.buffers(k);
    Tensor &t = tensors_[k];
    std::string where = path + ": buffer " + std::to_string(k) +
                        (b.name().empty() ? "" : " ('" + b.name() + "')");
    if (!plan::DType_IsValid(b.dtype()) || b.dtype() == plan::DTYPE_UNSPECIFIED)
      throw PlanError(where + ": unknown dtype " + std::to_string(b.dtype()));
    if (!plan::Role_IsValid(b.role()) || b.role() == plan::ROLE_UNSPECIFIED)
      throw PlanError(where + ": unknown role " + std::to_string(b.role()));
    if (b.shape_size() > cpu::kMaxRank)
      throw PlanError(where + ": rank " + std::to_string(b.shape_size()) + " exceeds " +
                      std::to_string(cpu::kMaxRank));
    if (b.has_view_of()) {
      if (b.view_of() >= uint32_t(k) || plan_.buffers(int(b.view_of())).offset() != b.offset() ||
          plan_.buffers(int(b.view_of())).has_view_of())
        throw PlanError(where + ": view_of " + std::to_string(b.view_of()) +
                        " must name an earlier buffer at the same offset that is no view itself");
      t.viewOf = &tensors_[b.view_of()];
    }
    t.dtype = b.dtype();
    t.offset = b.offset();
    t.role = b.role();
    t.name = b.name();
    t.numel = boundedProduct(b.shape(), t.shape, where, "shape");
    uint64_t bytes = t.bytes();
    if (!plan::Tier_IsValid(b.tier()))
      throw PlanError(where + ": unknown memory tier " + std::to_string(b.tier()));
    t.tier = b.tier();
    if (b.tier() != plan::ARENA) {
      // ZeRO-Offload's optimizer state, ZeRO-Infinity's parameters: in a
      // tier, not the arena.
      const bool nvme = b.tier() == plan::NVME;
      const uint64_t tier = nvme ? plan_.nvme_tier().bytes() : plan_.host_tier_bytes();
      const char *what = nvme ? "NVMe" : "host";
      if ((b.role() != plan::OPT_STATE && b.role() != plan::PARAM) || b.dtype() != plan::F32)
        throw PlanError(where + ": only float32 parameters and optimizer state live in the " +
                        what + " tier, this is a " + plan::DType_Name(b.dtype()) + " " +
                        plan::Role_Name(b.role()));
      if (b.offset() > tier || bytes > tier - b.offset())
        throw PlanError(where + ": bytes [" + std::to_string(b.offset()) + ", " +
                        std::to_string(b.offset() + bytes) + ") lie outside the " + what +
                        " tier of " + std::to_string(tier) + " bytes");
      if (nvme && b.offset() % io::AioFile::kAlign)
        throw PlanError(where + ": NVMe tier offset " + std::to_string(b.offset()) +
                        " is not a multiple of " + std::to_string(io::AioFile::kAlign));
      if (nvme && paramFile && b.offset() < nvmeTier.param_offset() &&
          b.offset() + bytes > nvmeTier.param_offset())
        throw PlanError(where + ": NVMe bytes [" + std::to_string(b.offset()) + ", " +
                        std::to_string(b.offset() + bytes) +
                        ") span the tier's two files (the parameters' begins at " +
                        std::to_string(nvmeTier.param_offset()) + ")");
    } else if (b.offset() > plan_.arena_bytes() || bytes > plan_.arena_bytes() - b.offset())
      throw PlanError(where + ": bytes [" + std::to_string(b.offset()) + ", " +
                      std::to_string(b.offset() + bytes) + ") lie outside the arena of " +
                      std::to_string(plan_.arena_bytes()) + " bytes");
    if (b.offset() % 8)
      throw PlanError(where + ": offset " + std::to_string(b.offset()) + " is not 8-byte aligned");
    if (b.role() == plan::CONSTANT && b.data().size() != bytes)
      throw PlanError(where + ": constant has " + std::to_string(b.data().size()) +
                      " bytes of data for " + std::to_string(bytes) + " bytes");
    if (b.shard_count() > 1 || b.tp_split_size()) {
      if (b.full_shape_size() > cpu::kMaxRank)
        throw PlanError(where + ": full_shape has rank " + std::to_string(b.full_shape_size()));
      t.fullNumel = boundedProduct(b.full_shape(), t.fullShape, where, "full_shape");
    }
    if (b.tp_split_size()) {
      const auto &sp = b.tp_split();
      if (b.tp_split_size() != 3 || sp[2] != tp_ || sp[1] < 1 || sp[0] < 0 ||
          sp[0] >= int64_t(b.full_shape_size()) ||
          (b.role() != plan::PARAM && b.role() != plan::OPT_STATE) || b.dtype() != plan::F32)
        throw PlanError(where + ": tp_split must be [dim, blocks, " + std::to_string(tp_) +
                        "] on a float32 parameter or optimizer state");
      t.tpDim = sp[0];
      t.tpBlocks = sp[1];
      t.tpSize = sp[2];
      if (t.fullShape.dims[t.tpDim] % (tp_ * t.tpBlocks))
        throw PlanError(where + ": dimension " + std::to_string(t.tpDim) + " of " +
                        shapeString(t.fullShape) + " does not split into " +
                        std::to_string(t.tpBlocks) + " block(s) x tp " + std::to_string(tp_));
      if (b.shard_count() <= 1) {
        bool ok = b.full_shape_size() == b.shape_size();
        for (int i = 0; ok && i < t.shape.rank; ++i)
          ok = t.shape.dims[i] ==
               (i == t.tpDim ? t.fullShape.dims[i] / tp_ : t.fullShape.dims[i]);
        if (!ok)
          throw PlanError(where + ": a tp part of " + shapeString(t.fullShape) + " split " +
                          std::to_string(t.tpBlocks) + " block(s) x tp " + std::to_string(tp_) +
                          " along dimension " + std::to_string(t.tpDim) + " cannot have shape " +
                          shapeString(t.shape));
      }
    }
    if (b.shard_count() > 1) {
      if (b.role() != plan::PARAM && b.role() != plan::FROZEN && b.role() != plan::OPT_STATE)
        throw PlanError(where + ": only parameters, frozen buffers and optimizer states are "
                                "sharded, this is a " + plan::Role_Name(b.role()));
      if (b.dtype() != plan::F32)
        throw PlanError(where + ": a sharded buffer must be F32");
      if (int64_t(b.shard_count()) != dp_)
        throw PlanError(where + ": sharded " + std::to_string(b.shard_count()) +
                        " ways, but the plan runs on dp=" + std::to_string(dp_) + " ranks");
      t.shards = b.shard_count();
      int64_t partNumel = t.partNumel();
      int64_t chunk = (partNumel + t.shards - 1) / t.shards;
      if (t.shape.rank != 1 || t.numel != chunk)
        throw PlanError(where + ": a shard of " +
                        (t.tpDim >= 0 ? "a tp part (" + std::to_string(partNumel) +
                                            " elements) of " + shapeString(t.fullShape)
                                      : shapeString(t.fullShape)) +
                        " over " + std::to_string(t.shards) + " ranks must have shape [" +
                        std::to_string(chunk) + "], has " + shapeString(t.shape));
    }
    // The synthetic data source draws index inputs from [0, index_bound).
    if (b.index_bound() < 0 ||
        (b.index_bound() > 0 &&
         (b.role() != plan::INPUT || (b.dtype() != plan::I64 && b.dtype() != plan::I32))))
      throw PlanError(where + ": index_bound " + std::to_string(b.index_bound()) +
                      " (only integer INPUT buffers have one, and it is positive)");
    if (b.role() == plan::INPUT) {
      if (t.shape.rank == 0 || t.shape.dims[0] != plan_.micro_batch_size())
        throw PlanError(where + ": input's first dimension must be the micro-batch size " +
                        std::to_string(plan_.micro_batch_size()));
      if (pp_ <= 1)
        inputs_.push_back(&t);
    }
  }
  resolveCopies(path);
}

void Executor::resolveCopies(const std::string &path) {
  std::map<std::string, const Tensor *> params;
  for (const Tensor &t : tensors_)
    if (t.role == plan::PARAM)
      params.emplace(t.name, &t);
  for (size_t k = 0; k < tensors_.size(); ++k) {
    Tensor &t = tensors_[k];
    if (t.role != plan::PARAM_COPY)
      continue;
    std::string where = path + ": buffer " + std::to_string(k) + " ('" + t.name + "')";
    if (t.dtype != plan::BF16 && t.dtype != plan::F16)
      throw PlanError(where + ": a working copy is BF16 or F16, this is " +
                      plan::DType_Name(t.dtype));
    auto param = params.find(copiedParameter(t.name));
    if (param == params.end())
      throw PlanError(where + ": a working copy is named like its parameter plus '" +
                      kParamCopySuffix + "', and no parameter is");
    const Tensor &p = *param->second;
    if (p.tier != plan::ARENA || p.numel != t.numel || p.shape.rank != t.shape.rank ||
        !std::equal(p.shape.dims, p.shape.dims + p.shape.rank, t.shape.dims))
      throw PlanError(where + ": the working copy of a " + shapeString(p.shape) +
                      " parameter in the arena must have its shape, has " +
                      shapeString(t.shape));
    t.copyOf = &p;
  }
}

/// Whether `i` runs on optimizer step `s` (rangeInstr).
static bool runsOnStep(const Instr &i, int64_t s) {
  if (i.stepClasses)
    return (i.stepRule->classOf(s) & i.stepClasses) != 0;
  return s >= i.firstStep && (i.lastStep == 0 || s <= i.lastStep);
}

/// An instruction of a range of optimizer steps (plan format 5) or of
/// step classes (format 7).
void Executor::rangeInstr(Instr &instr, const plan::Instr &p, const std::string &name) {
  const int64_t first = p.first_step(), last = p.last_step();
  const uint32_t classes = p.step_classes();
  if (classes) {
    if (plan_.format_version() < 7)
      throw PlanError(name + ": runs on step classes " + std::to_string(classes) +
                      ", which a format-" + std::to_string(plan_.format_version()) +
                      " plan cannot say (format 7 and later)");
    if (classes > kAllStepClasses)
      throw PlanError(name + ": step classes " + std::to_string(classes) +
                      " are no mask of the classes (1 to " + std::to_string(kAllStepClasses) +
                      ")");
    if (first || last)
      throw PlanError(name + ": has both a range of optimizer steps and step classes");
    if (!plan_.has_step_rule())
      throw PlanError(name + ": runs on step classes, but the plan has no step_rule to "
                             "tell the classes of its steps");
  } else {
    if (plan_.format_version() < 5)
      throw PlanError(name + ": runs on optimizer steps [" + std::to_string(first) + ", " +
                      std::to_string(last) + "], which a format-" +
                      std::to_string(plan_.format_version()) +
                      " plan cannot say (format 5 and later)");
    if (first < 0 || last < 0 || (last != 0 && last < std::max<int64_t>(first, 1)))
      throw PlanError(name + ": optimizer steps [" + std::to_string(first) + ", " +
                      std::to_string(last) +
                      "] are no range (first >= 0; last 0 for no end, or >= first)");
  }
  instr.firstStep = first;
  instr.lastStep = last;
  instr.stepClasses = classes;
  instr.stepRule = &stepRule_;
  instr.ranged = instr.run;
  if (instr.op == "dist.all_reduce")
    instr.run = [](const Instr &i, Context &ctx) {
      if (runsOnStep(i, ctx.optimizerStep))
        return i.ranged(i, ctx);
      // Off its steps an all-reduce is the identity (its wait then does nothing).
      for (size_t k = 0; k < i.in.size(); ++k)
        if (i.out[k]->data != i.in[k]->data)
          std::memcpy(i.out[k]->data, i.in[k]->data, i.in[k]->bytes());
    };
  else
    instr.run = [](const Instr &i, Context &ctx) {
      if (runsOnStep(i, ctx.optimizerStep))
        i.ranged(i, ctx);
    };
}

std::vector<Instr>
Executor::resolve(const google::protobuf::RepeatedPtrField<plan::Instr> &list, const char *where) {
  std::vector<Instr> out;
  out.reserve(list.size());
  for (int k = 0; k < list.size(); ++k) {
    const plan::Instr &p = list[k];
    std::string name = name_ + ": " + where + " instruction " + std::to_string(k) + " (" +
                       p.op() + ")";
    Instr instr;
    instr.op = p.op();
    instr.opId = instructionId(instr.op);
    instr.collective = instr.op.rfind("dist.", 0) == 0;
    instr.axis = p.axis();
    instr.microBatch = p.micro_batch();
    instr.phase = p.phase();
    instr.eval = p.eval();
    instr.flops = p.flops();
    instr.source = p.source();
    if (p.axis() > 2)
      throw PlanError(name + ": axis " + std::to_string(p.axis()) + " (0: dp, 1: pp, 2: tp)");
    if (instr.op == "load_batch" && pp_ <= 1)
      throw PlanError(name + ": load_batch outside a pipeline plan (pp=1: the inputs are "
                             "loaded before each micro_batch iteration)");
    for (uint32_t i : p.inputs()) {
      if (i >= tensors_.size())
        throw PlanError(name + ": input buffer " + std::to_string(i) + " does not exist");
      instr.in.push_back(&tensors_[i]);
    }
    for (uint32_t i : p.outputs()) {
      if (i >= tensors_.size())
        throw PlanError(name + ": output buffer " + std::to_string(i) + " does not exist");
      if (tensors_[i].role == plan::CONSTANT ||
          (tensors_[i].role == plan::INPUT && instr.op != "load_batch"))
        throw PlanError(name + ": writes the read-only buffer " + std::to_string(i));
      instr.out.push_back(&tensors_[i]);
    }
    instr.ints.assign(p.ints().begin(), p.ints().end());
    // Before format 17 the fused attention had no layout flag: head-major.
    if (plan_.format_version() < 17 &&
        (instr.op == "nn.attention" || instr.op == "nn.attention_grad") && instr.ints.size() >= 3)
      instr.ints.insert(instr.ints.begin() + 3, 0);
    instr.floats.assign(p.floats().begin(), p.floats().end());
    instr.stagingOffset = p.staging_offset();
    instr.stagingBytes = p.staging_bytes();
    if (instr.stagingBytes &&
        (instr.stagingOffset % 4 || instr.stagingOffset > plan_.arena_bytes() ||
         instr.stagingBytes > plan_.arena_bytes() - instr.stagingOffset))
      throw PlanError(name + ": staging [" + std::to_string(instr.stagingOffset) + ", +" +
                      std::to_string(instr.stagingBytes) + ") is not inside the arena of " +
                      std::to_string(plan_.arena_bytes()) + " bytes");
    instr.label = "instruction " + std::to_string(k) + " of the " + where;
    bindInstr(instr, name);
    if (p.first_step() != 0 || p.last_step() != 0 || p.step_classes() != 0)
      rangeInstr(instr, p, name);
    bool message = instr.op == "dist.send" || instr.op == "dist.recv";
    bool grouped = message || instr.op == "dist.all_reduce" ||
                   instr.op == "dist.reduce_scatter" || instr.op == "dist.all_gather" ||
                   instr.op == "dist.all_to_all" || instr.op == "dist.chunk";
    int groupSize = instr.axis == 0 ? dp_ : instr.axis == 1 ? pp_ : tp_;
    const char *axisName = instr.axis == 0 ? "dp" : instr.axis == 1 ? "pp" : "tp";
    if (grouped && instr.ints[0] != groupSize)
      throw PlanError(name + ": group size " + std::to_string(instr.ints[0]) +
                      " differs from the plan's " + axisName + "=" + std::to_string(groupSize));
    if (message) {
      int64_t peer = instr.ints[1], to = ctx_.ranks[instr.axis] + peer;
      if (to < 0 || to >= groupSize)
        throw PlanError(
            name + ": peer " + (peer > 0 ? "+" : "") + std::to_string(peer) + " is " +
            (instr.axis == 1 ? "stage " + std::to_string(to) + ", outside the pipeline's " +
                                   std::to_string(pp_) + " stages (this is stage " +
                                   std::to_string(stage_) + ")"
                             : "dp rank " + std::to_string(to) + ", outside the dp group of " +
                                   std::to_string(dp_)));
    }
    out.push_back(std::move(instr));
  }
  return out;
}

// The evaluation program (Instr.eval) runs alone: within each list a
// collective it starts is waited for by it, a wait it runs waits for a
// collective it started, and none of its instructions writes model state.
void Executor::validateEval() {
  static const char *where[] = {"prologue", "micro_batch", "epilogue"};
  const std::vector<Instr> *lists[] = {&prologue_, &micro_, &epilogue_};
  for (int l = 0; l < 3; ++l) {
    evalLists_[l].clear();
    std::map<int64_t, bool> started; // handle -> started by an eval instruction
    for (size_t k = 0; k < lists[l]->size(); ++k) {
      const Instr &i = (*lists[l])[k];
      auto name = [&] {
        return name_ + ": " + where[l] + " instruction " + std::to_string(k) + " (" + i.op + ")";
      };
      if (i.op == "dist.wait") {
        auto it = started.find(i.ints[0]);
        if (it != started.end() && it->second != i.eval)
          throw PlanError(name() + ": " + (i.eval ? "an evaluation" : "a training-only") +
                          " wait for a collective " +
                          (it->second ? "of the evaluation program" : "only training runs"));
        if (it != started.end())
          started.erase(it);
      } else if (!i.comm.empty() || i.op == "dist.send" || i.op == "dist.recv") {
        started[i.ints.back()] = i.eval;
      }
      if (!i.eval)
        continue;
      for (const Tensor *t : i.out)
        if (t->role == plan::PARAM || t->role == plan::OPT_STATE || t->role == plan::FROZEN ||
            t->role == plan::STEP || t->role == plan::LOSS_SCALE)
          throw PlanError(name() + ": an evaluation instruction writes the model state '" +
                          t->name + "'");
      evalLists_[l].push_back(&i);
    }
    for (auto &[handle, eval] : started)
      if (eval)
        throw PlanError(name_ + ": " + where[l] + ": the evaluation program starts handle " +
                        std::to_string(handle) + " and never waits for it");
  }
}

void Executor::validateCollectives(const std::vector<Instr> &list, const char *where) {
  struct Open {
    size_t index;
    uint32_t axis;
    comm::StagingRange staging;
  };
  std::map<int64_t, Open> open; // handle -> its start (both groups)
  std::vector<comm::StagingRange> live;
  std::vector<comm::TensorArg> args;
  auto name = [&](size_t k) {
    return name_ + ": " + where + " instruction " + std::to_string(k) + " (" + list[k].op + ")";
  };
  for (size_t k = 0; k < list.size(); ++k) {
    const Instr &i = list[k];
    if (i.op == "dist.wait") {
      auto it = open.find(i.ints[0]);
      if (it == open.end())
        throw PlanError(name(k) + ": waits for handle " + std::to_string(i.ints[0]) +
                        ", which no earlier collective of the " + where + " started");
      open.erase(it);
      continue;
    }
    bool message = i.op == "dist.send" || i.op == "dist.recv";
    if (i.comm.empty() && !message)
      continue;
    int64_t handle = i.ints.back();
    maxHandle_ = std::max(maxHandle_, handle);
    if (open.count(handle))
      throw PlanError(name(k) + ": starts handle " + std::to_string(handle) + ", still pending from " +
                      list[open[handle].index].label + " (no dist.wait in between)");
    comm::Communicator *c = ctx_.comms[i.axis];
    comm::Reservation &reservation = reservation_[i.axis];
    comm::StagingRange staging{0, 0};
    if (!message) {
      comm::Kind kind = i.op == "dist.all_reduce"       ? comm::Kind::AllReduce
                        : i.op == "dist.reduce_scatter" ? comm::Kind::ReduceScatter
                        : i.op == "dist.all_to_all"     ? comm::Kind::AllToAll
                                                        : comm::Kind::AllGather;
      args.clear();
      for (size_t j = 0; j < i.in.size(); ++j)
        args.push_back({nullptr, nullptr, i.in[j]->numel, i.out[j]->numel,
                        commElem(*i.in[j])});
      staging.length = c->stagingElements(kind, args.data(), args.size());
      if (i.stagingBytes) {
        // Planned by dsc in the arena.
        if (i.stagingBytes < uint64_t(staging.length) * sizeof(float))
          throw PlanError(name(k) + ": staging of " + std::to_string(i.stagingBytes) +
                          " bytes, the collective needs " +
                          std::to_string(staging.length * sizeof(float)));
        staging.length = 0;
      }
      if (staging.length > 0) {
        live.clear();
        for (auto &[h, o] : open)
          if (o.axis == i.axis && o.staging.length > 0)
            live.push_back(o.staging);
        staging.offset = comm::firstFitOffset(live.data(), live.size(), staging.length);
        reservation.stagingElements =
            std::max(reservation.stagingElements, staging.offset + staging.length);
        // Bounded at every step, so no offset of the next one overflows.
        if (reservation.stagingElements > kMaxPlanElements)
          throw PlanError(name(k) + ": the collectives pending with it need " +
                          std::to_string(reservation.stagingElements) +
                          " elements of staging, more than the " +
                          std::to_string(kMaxPlanElements) + " a plan may have");
      }
      reservation.maxTensors = std::max<int>(reservation.maxTensors, int(i.comm.size()));
    }
    open[handle] = {k, i.axis, staging};
    int pendingHere = 0;
    for (auto &[h, o] : open)
      pendingHere += o.axis == i.axis;
    reservation.maxPending = std::max(reservation.maxPending, pendingHere);
  }
  if (!open.empty()) {
    size_t k = open.begin()->second.index;
    throw PlanError(name(k) + ": starts handle " + std::to_string(open.begin()->first) +
                    ", which no later dist.wait of the " + where + " completes");
  }
}

namespace {
/// The bytes of `ts` that live in the NVMe tier.
uint64_t nvmeBytesOf(const std::vector<Tensor *> &ts) {
  uint64_t n = 0;
  for (const Tensor *t : ts)
    n += t->tier == plan::NVME ? t->bytes() : 0;
  return n;
}
} // namespace

std::string Executor::tileAdvice(uint64_t excess) const {
  // The arena holds one tile's working copies of the offloaded state at a
  // time (the offload pass tiles the update by sub_group_size parameters):
  // the largest tile's bytes, and the parameters it updates (a state
  // "NAME/..." belongs to parameter NAME).
  // Each tiered tensor (a fetch's input: the state "NAME/..." or the
  // parameter NAME) counts once in its tile, however often it is fetched.
  std::map<int64_t, uint64_t> tileBytes;
  std::map<int64_t, std::map<std::string, int64_t>> tileParams;
  std::set<const Tensor *> seen;
  for (const auto *list : {&prologue_, &micro_, &epilogue_})
    for (const Instr &i : *list) {
      if (i.op != "tier.fetch")
        continue;
      int64_t tile = i.ints[0];
      for (const Tensor *t : i.in) {
        if (!seen.insert(t).second)
          continue;
        tileBytes[tile] += t->bytes();
        int64_t &n = tileParams[tile][t->name.substr(0, t->name.find('/'))];
        n = std::max(n, t->numel);
      }
    }
  if (tileBytes.empty())
    return "";
  auto largest = std::max_element(tileBytes.begin(), tileBytes.end(),
                                  [](auto &a, auto &b) { return a.second < b.second; });
  uint64_t bytes = largest->second;
  int64_t params = 0, biggest = 0;
  for (const auto &[name, n] : tileParams[largest->first]) {
    params += n;
    biggest = std::max(biggest, n);
  }
  std::string tile = "; its largest tile of the offloaded update holds " + std::to_string(bytes) +
                     " bytes of working copies in the arena for " + std::to_string(params) +
                     " parameters (zero_optimization.sub_group_size)";
  if (excess >= bytes)
    return tile + ": smaller tiles cannot save the " + std::to_string(excess) +
           " bytes missing; give the run more memory";
  // The working copies scale with the tile's parameters; a tile closes
  // once it holds sub_group_size parameters or more, whole tensors each, so
  // it may hold up to (the largest tensor - 1) more.
  int64_t fits = int64_t(double(params) * double(bytes - excess) / double(bytes));
  if (fits < biggest)
    return tile + ": a tile that fits would split a tensor of " + std::to_string(biggest) +
           " elements, and a tile holds whole tensors; give the run more memory";
  int64_t setting = fits - biggest + 1;
  return tile + ": recompile with sub_group_size at most " + std::to_string(setting) +
         (setting == 1 ? " (one tensor per tile)" : "") + " to fit (tiles of at most " +
         std::to_string(fits) + " parameters)";
}

uint64_t Executor::linkReadAhead() {
  auto nvmeBytes = [](const Instr &i) { return nvmeBytesOf(i.in); };
  uint64_t largest = 0;
  for (auto *list : {&prologue_, &micro_, &epilogue_}) {
    Instr *previous = nullptr; // the last fetch with NVMe bytes
    std::vector<const Tensor *> stored; // NVMe tensors stored since it
    for (Instr &i : *list) {
      if (i.op == "tier.store") {
        for (const Tensor *t : i.out)
          if (t->tier == plan::NVME)
            stored.push_back(t);
        continue;
      }
      if (i.op != "tier.fetch" || !nvmeBytes(i))
        continue;
      largest = std::max(largest, nvmeBytes(i));
      bool clean = true; // none of its bytes written since `previous`
      for (const Tensor *t : i.in)
        for (const Tensor *w : stored)
          clean &= t->tier != plan::NVME || t->offset + t->bytes() <= w->offset ||
                   w->offset + w->bytes() <= t->offset;
      if (previous && clean)
        previous->readAhead = &i;
      previous = &i;
      stored.clear();
    }
  }
  return largest;
}

void Executor::initialize(const std::string &weightsPath, uint64_t seed) {
  // What this rank allocates, against what the machine has: an allocation
  // beyond it may well succeed, and then the first touch of its pages
  // kills the process. Bounded at load time, none of these sums overflows.
  uint64_t arenaBytes = (std::max<uint64_t>(plan_.arena_bytes(), 64) + 63) / 64 * 64;
  uint64_t commBytes = 0;
  for (const comm::Reservation &r : reservation_)
    commBytes += uint64_t(r.stagingElements) * sizeof(float) +
                 uint64_t(r.maxPending) * uint64_t(r.maxTensors) * sizeof(comm::TensorArg);
  uint64_t tierBytes = (plan_.host_tier_bytes() + 4095) / 4096 * 4096;
  // NVMe pipelining (pipeline_read / pipeline_write): each fetch links the
  // next fetch of its list it may start reading (no store between them
  // writes its bytes); the buffers hold the largest fetch's and store's
  // NVMe bytes.
  uint64_t readAheadBytes = 0, writeBehindBytes = 0;
  if (plan_.nvme_tier().bytes() && plan_.nvme_tier().pipeline_read())
    readAheadBytes = linkReadAhead();
  if (plan_.nvme_tier().bytes() && plan_.nvme_tier().pipeline_write())
    for (auto *list : {&prologue_, &micro_, &epilogue_})
      for (const Instr &i : *list)
        if (i.op == "tier.store")
          writeBehindBytes = std::max(writeBehindBytes, nvmeBytesOf(i.out));
  const uint64_t pipelineBytes = readAheadBytes + writeBehindBytes;
  const uint64_t machine = machineMemoryBytes(), cgroup = cgroupMemoryLimit();
  const uint64_t need = arenaBytes + commBytes + tierBytes + pipelineBytes;
  if (uint64_t have = std::min(machine, cgroup); need > have)
    throw PlanError(name_ + ": needs " +
                    std::to_string(arenaBytes + commBytes + tierBytes + pipelineBytes) +
                    " bytes (the arena " + std::to_string(arenaBytes) +
                    ", the collectives' staging " + std::to_string(commBytes) +
                    ", the host tier " + std::to_string(tierBytes) +
                    ", the NVMe tier's read-ahead and write-behind buffers " +
                    std::to_string(pipelineBytes) + "), more than " +
                    (cgroup < machine ? "its cgroup's memory limit of "
                                      : "this machine's ") +
                    std::to_string(have) +
                    (cgroup < machine ? " bytes" : " bytes of memory and swap") +
                    (plan_.host_tier_bytes() || plan_.nvme_tier().bytes()
                         ? tileAdvice(need - have)
                         : " (zero_optimization.offload_optimizer / offload_param with device "
                           "\"nvme\" keep the state on disk)"));
  // On 2 MiB boundaries and marked for transparent huge pages (the kernel's
  // THP mode "madvise" gives them only on request): zero-filling the arena
  // faults in 512x fewer pages, and the first step came out shorter and
  // steadier (docs/performance.md). DSRT_HUGEPAGES=0 keeps 4 KiB pages.
  constexpr uint64_t kHuge = uint64_t(2) << 20;
  const bool huge = hugePages() && arenaBytes >= kHuge;
  const uint64_t align = huge ? kHuge : 64; // arenaBytes is a multiple of 64
  const uint64_t allocBytes = (arenaBytes + align - 1) / align * align;
  arena_ = std::aligned_alloc(align, allocBytes);
  if (!arena_)
    throw PlanError("cannot allocate the arena of " + std::to_string(arenaBytes) + " bytes");
  if (huge)
    ::madvise(arena_, allocBytes, MADV_HUGEPAGE);
  std::memset(arena_, 0, arenaBytes);
  if (tierBytes) {
    hostTier_ = std::aligned_alloc(4096, tierBytes);
    if (!hostTier_)
      throw PlanError("cannot allocate the host tier of " + std::to_string(tierBytes) + " bytes");
    std::memset(hostTier_, 0, tierBytes);
  }
  if (const plan::NvmeTier &t = plan_.nvme_tier(); t.bytes()) {
    io::AioOptions o;
    o.blockSize = t.block_size();
    o.queueDepth = int(t.queue_depth());
    o.singleSubmit = t.single_submit();
    // One file per rank, or two when the parameters have a folder of their
    // own; --nvme-path puts them all in its folder.
    const std::string suffix =
        "rank" + std::to_string(world_->rank()) + "-" + std::to_string(::getpid()) + ".swp";
    std::vector<NvmeTier::FileSpec> files;
    const uint64_t split = t.param_path().empty() ? t.bytes() : t.param_offset();
    files.push_back({nvmePath_.empty() ? t.path() : nvmePath_, "dsrt-tier-" + suffix, split});
    if (!t.param_path().empty())
      files.push_back({nvmePath_.empty() ? t.param_path() : nvmePath_,
                       "dsrt-param-tier-" + suffix, t.bytes() - split});
    try {
      nvme_ = std::make_unique<NvmeTier>(files, o);
    } catch (const io::IoError &e) {
      throw PlanError(name_ + ": the NVMe tier: " + e.what());
    }
    ctx_.nvme = nvme_.get();
    if (readAheadBytes || writeBehindBytes) {
      pipelineBuffers_.reset(static_cast<char *>(
          std::aligned_alloc(64, (readAheadBytes + writeBehindBytes + 63) / 64 * 64 + 64)));
      if (!pipelineBuffers_)
        throw PlanError("cannot allocate the NVMe tier's read-ahead and write-behind buffers");
      if (readAheadBytes)
        ctx_.readAheadBuffer = pipelineBuffers_.get();
      if (writeBehindBytes)
        ctx_.writeBehindBuffer = pipelineBuffers_.get() + (readAheadBytes + 63) / 64 * 64;
      nvme_->startIoThread();
    }
  }
  for (int k = 0; k < plan_.buffers_size(); ++k) {
    if (tensors_[k].tier == plan::NVME) { // no bytes in memory: NvmeTier
      tensors_[k].data = nullptr;
      continue;
    }
    tensors_[k].data = static_cast<char *>(tensors_[k].tier == plan::HOST ? hostTier_ : arena_) +
                       plan_.buffers(k).offset();
    if (plan_.buffers(k).role() == plan::CONSTANT)
      std::memcpy(tensors_[k].data, plan_.buffers(k).data().data(), tensors_[k].bytes());
  }
  // Concat and the collectives keep raw pointers: now that they exist,
  // fill them in.
  for (auto *list : {&prologue_, &micro_, &epilogue_})
    for (Instr &i : *list) {
      if (!i.ptrs.empty())
        for (size_t j = 0; j < i.in.size(); ++j)
          i.ptrs[j] = i.in[j]->f32();
      for (size_t j = 0; j < i.comm.size(); ++j)
        i.comm[j] = {i.in[j]->f32(), i.out[j]->f32(), i.in[j]->numel, i.out[j]->numel,
                     commElem(*i.in[j])};
      if (i.stagingBytes)
        i.staging = reinterpret_cast<float *>(static_cast<char *>(arena_) + i.stagingOffset);
    }
  // Staging and handles, once: the step loop never allocates.
  try {
    ctx_.comms[0]->reserve(reservation_[0]);
    ctx_.comms[1]->reserve(reservation_[1]);
    ctx_.comms[2]->reserve(reservation_[2]);
  } catch (const comm::CommError &e) {
    throw PlanError(e.what());
  }
  ctx_.handles.assign(size_t(maxHandle_ + 1), Context::Started());
  loadWeights(weightsPath);
  ctx_.seed = seed;
  backend_->allocate();
}

} // namespace dsrt
