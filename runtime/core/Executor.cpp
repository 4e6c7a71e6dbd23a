//===- Executor.cpp - plan loading, validation and the step loop ---------===//
#include "runtime/core/Executor.h"

#include "runtime/io/SafeTensors.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sys/mman.h>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace dsrt {
namespace plan = dsc::plan;

size_t Tensor::bytes() const {
  switch (dtype) {
  case plan::F64:
  case plan::I64:
    return size_t(numel) * 8;
  case plan::F32:
  case plan::I32:
    return size_t(numel) * 4;
  default:
    return size_t(numel);
  }
}

namespace {
std::string shapeString(const cpu::Shape &s) {
  std::string r = "[";
  for (int i = 0; i < s.rank; ++i)
    r += (i ? "," : "") + std::to_string(s.dims[i]);
  return r + "]";
}
} // namespace

Executor::Executor(const std::string &dir, comm::Communicator *world)
    : dir_(dir), world_(world) {
  std::string path = dir + "/plan.pb";
  name_ = path;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw PlanError(path + ": cannot open (is '" + dir + "' a plan directory written by dsc -o?)");
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (buffer.str().empty())
    throw PlanError(path + ": empty file, not a plan");
  google::protobuf::SetLogHandler(nullptr); // our error says it instead
  plan::Plan top;
  if (!top.ParseFromString(buffer.str()))
    throw PlanError(path + ": not a valid plan (corrupt or truncated protobuf)");
  buffer = std::stringstream();
  if (top.format_version() != kPlanFormatVersion)
    throw PlanError(path + ": plan format version " + std::to_string(top.format_version()) +
                    ", this dsrt runs version " + std::to_string(kPlanFormatVersion) +
                    " (recompile the model with the matching dsc)");
  if (!world_) {
    ownWorld_ = std::make_unique<comm::SelfCommunicator>();
    world_ = ownWorld_.get();
  }
  if (top.pp() > 1) {
    setupPipeline(top, path);
  } else {
    plan_.Swap(&top);
    dp_ = std::max<int>(1, int(plan_.dp()));
    if (world_->size() != dp_)
      throw PlanError(path + ": plan compiled for dp=" + std::to_string(dp_) + " but running on " +
                      std::to_string(world_->size()) +
                      (world_->size() == 1 ? " rank" : " ranks") + ": recompile with --dp " +
                      std::to_string(world_->size()) +
                      (dp_ > 1 && world_->size() == 1
                           ? " (or run it with mpirun -np " + std::to_string(dp_) + ")"
                           : std::string()));
    comm_ = world_;
    // Axis 1 of a plan without a pipeline is this rank alone.
    ownPp_ = std::make_unique<comm::SelfCommunicator>(world_->timeoutSeconds());
    if (plan_.program().micro_batches() < 1)
      throw PlanError(path + ": micro_batches must be at least 1");
  }
  try {
    config_ = plan_.config_json().empty()
                  ? config::defaultConfig()
                  : config::parseDsConfig(plan_.config_json(), name_ + " (baked config)", dp_);
  } catch (const config::ConfigError &e) {
    throw PlanError(e.what());
  }
  ctx_.comm = comm_;
  ctx_.rank = comm_->rank();
  ctx_.comms[0] = comm_;
  ctx_.comms[1] = ownPp_.get();
  ctx_.ranks[0] = comm_->rank();
  ctx_.ranks[1] = ownPp_->rank();
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
  ctx_.config = &config_;
}

void Executor::setupPipeline(plan::Plan &top, const std::string &path) {
  pp_ = int(top.pp());
  if (top.stages_size() != pp_)
    throw PlanError(path + ": a pipeline plan of pp=" + std::to_string(pp_) + " has " +
                    std::to_string(top.stages_size()) + " stage plans");
  dp_ = std::max<int>(1, int(top.dp() ? top.dp() : top.stages(0).dp()));
  int losses = 0;
  for (int s = 0; s < pp_; ++s) {
    const plan::Plan &st = top.stages(s);
    if (std::max<int>(1, int(st.dp())) != dp_)
      throw PlanError(path + ": stage " + std::to_string(s) + " is compiled for dp=" +
                      std::to_string(std::max<int>(1, int(st.dp()))) + ", the pipeline for dp=" +
                      std::to_string(dp_));
    if (st.stages_size() || st.pp() > 1)
      throw PlanError(path + ": stage " + std::to_string(s) + " is itself a pipeline plan");
    losses += st.has_loss();
  }
  if (losses != 1)
    throw PlanError(path + ": " + std::to_string(losses) +
                    " stages hold the loss (has_loss); a pipeline has one, its last stage");
  int64_t m = top.pipeline_micro_batches();
  if (m < 1)
    throw PlanError(path + ": pipeline_micro_batches must be at least 1, is " +
                    std::to_string(m));
  int need = pp_ * dp_, have = world_->size();
  if (have != need)
    throw PlanError(path + ": plan compiled for pp=" + std::to_string(pp_) + " x dp=" +
                    std::to_string(dp_) + " = " + std::to_string(need) +
                    " ranks but running on " + std::to_string(have) +
                    (have == 1 ? " rank" : " ranks") + ": run it with mpirun -np " +
                    std::to_string(need) + " (or recompile for " + std::to_string(have) +
                    (have == 1 ? " rank)" : " ranks)"));
  // Every stage's parameters, for gathering the weights on world rank 0:
  // the first stage that holds a name gives it.
  std::map<std::string, size_t> seen;
  for (int s = 0; s < pp_; ++s)
    for (const plan::Buffer &b : top.stages(s).buffers()) {
      if (b.role() != plan::PARAM)
        continue;
      std::vector<int64_t> shape(b.shard_count() > 1 ? b.full_shape().begin() : b.shape().begin(),
                                 b.shard_count() > 1 ? b.full_shape().end() : b.shape().end());
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

  int w = world_->rank();
  stage_ = w % pp_;
  int index = w / pp_;
  std::string config = top.config_json();
  schedule_ = top.schedule();
  plan_.Swap(top.mutable_stages(stage_));
  top.Clear(); // the other stages' plans are not needed any more
  if (plan_.config_json().empty())
    plan_.set_config_json(config);
  name_ = path + " (stage " + std::to_string(stage_) + ")";
  hasLoss_ = plan_.has_loss();
  ctx_.microBatches = m;
  // The stage's data-parallel group (ordered by dp index) and the index's
  // pipeline group (ordered by stage).
  try {
    ownDp_ = world_->split(stage_, index);
    ownPp_ = world_->split(index, stage_);
  } catch (const comm::CommError &e) {
    throw PlanError(e.what());
  }
  comm_ = ownDp_.get();
  if (comm_->size() != dp_ || comm_->rank() != index || ownPp_->size() != pp_ ||
      ownPp_->rank() != stage_)
    throw PlanError(name_ + ": splitting the world of " + std::to_string(have) +
                    " ranks gave a dp group of " + std::to_string(comm_->size()) +
                    " and a pp group of " + std::to_string(ownPp_->size()));
  comm_->progressWhileWaiting(ownPp_.get());
  ownPp_->progressWhileWaiting(comm_);
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
  for (const std::vector<Instr> *list : {&prologue_, &epilogue_})
    for (const Instr &i : *list) {
      if (i.op != "load_batch")
        continue;
      if (i.ints[0] >= ctx_.microBatches)
        throw PlanError(name_ + ": " + i.label + " (load_batch): micro-batch " +
                        std::to_string(i.ints[0]) + " of a step of " +
                        std::to_string(ctx_.microBatches) + " (pipeline_micro_batches)");
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
  for (size_t k = 0; k < tensors_.size(); ++k)
    if (tensors_[k].role == plan::INPUT && !loaded[k])
      throw PlanError(name_ + ": buffer " + std::to_string(k) + " ('" + tensors_[k].name +
                      "') is an INPUT that no load_batch fills");
}

Executor::~Executor() { std::free(arena_); }

void Executor::validateBuffers() {
  const std::string &path = name_;
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
    t.dtype = b.dtype();
    t.offset = b.offset();
    t.role = b.role();
    t.name = b.name();
    t.shape.rank = b.shape_size();
    t.numel = 1;
    for (int i = 0; i < b.shape_size(); ++i) {
      int64_t d = b.shape(i);
      if (d < 0 || (d > 0 && t.numel > (int64_t(1) << 50) / d))
        throw PlanError(where + ": bad dimension " + std::to_string(d));
      t.shape.dims[i] = d;
      t.numel *= d;
    }
    uint64_t bytes = t.bytes();
    if (b.offset() > plan_.arena_bytes() || bytes > plan_.arena_bytes() - b.offset())
      throw PlanError(where + ": bytes [" + std::to_string(b.offset()) + ", " +
                      std::to_string(b.offset() + bytes) + ") lie outside the arena of " +
                      std::to_string(plan_.arena_bytes()) + " bytes");
    if (b.offset() % 8)
      throw PlanError(where + ": offset " + std::to_string(b.offset()) + " is not 8-byte aligned");
    if (b.role() == plan::CONSTANT && b.data().size() != bytes)
      throw PlanError(where + ": constant has " + std::to_string(b.data().size()) +
                      " bytes of data for " + std::to_string(bytes) + " bytes");
    if (b.shard_count() > 1) {
      if (b.role() != plan::PARAM && b.role() != plan::FROZEN && b.role() != plan::OPT_STATE)
        throw PlanError(where + ": only parameters, frozen buffers and optimizer states are "
                                "sharded, this is a " + plan::Role_Name(b.role()));
      if (b.dtype() != plan::F32)
        throw PlanError(where + ": a sharded buffer must be F32");
      if (int64_t(b.shard_count()) != dp_)
        throw PlanError(where + ": sharded " + std::to_string(b.shard_count()) +
                        " ways, but the plan runs on dp=" + std::to_string(dp_) + " ranks");
      if (b.full_shape_size() > cpu::kMaxRank)
        throw PlanError(where + ": full_shape has rank " + std::to_string(b.full_shape_size()));
      t.shards = b.shard_count();
      t.fullShape.rank = b.full_shape_size();
      t.fullNumel = 1;
      for (int i = 0; i < b.full_shape_size(); ++i) {
        int64_t d = b.full_shape(i);
        if (d < 0 || (d > 0 && t.fullNumel > (int64_t(1) << 50) / d))
          throw PlanError(where + ": bad full_shape dimension " + std::to_string(d));
        t.fullShape.dims[i] = d;
        t.fullNumel *= d;
      }
      int64_t chunk = (t.fullNumel + t.shards - 1) / t.shards;
      if (t.shape.rank != 1 || t.numel != chunk)
        throw PlanError(where + ": a shard of " + shapeString(t.fullShape) + " over " +
                        std::to_string(t.shards) + " ranks must have shape [" +
                        std::to_string(chunk) + "], has " + shapeString(t.shape));
    }
    if (b.role() == plan::INPUT) {
      if (t.shape.rank == 0 || t.shape.dims[0] != plan_.micro_batch_size())
        throw PlanError(where + ": input's first dimension must be the micro-batch size " +
                        std::to_string(plan_.micro_batch_size()));
      if (pp_ <= 1)
        inputs_.push_back(&t);
    }
  }
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
    instr.axis = p.axis();
    instr.microBatch = p.micro_batch();
    instr.phase = p.phase();
    if (p.axis() > 1)
      throw PlanError(name + ": axis " + std::to_string(p.axis()) + " (0: dp, 1: pp)");
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
    bool message = instr.op == "dist.send" || instr.op == "dist.recv";
    bool grouped = message || instr.op == "dist.all_reduce" ||
                   instr.op == "dist.reduce_scatter" || instr.op == "dist.all_gather" ||
                   instr.op == "dist.chunk";
    int groupSize = instr.axis == 0 ? dp_ : pp_;
    const char *axisName = instr.axis == 0 ? "dp" : "pp";
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
                                                        : comm::Kind::AllGather;
      args.clear();
      for (size_t j = 0; j < i.in.size(); ++j)
        args.push_back({nullptr, nullptr, i.in[j]->numel, i.out[j]->numel});
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

void Executor::initialize(const std::string &weightsPath, uint64_t seed) {
  size_t bytes = std::max<uint64_t>(plan_.arena_bytes(), 64);
  arena_ = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!arena_)
    throw PlanError("cannot allocate the arena of " + std::to_string(bytes) + " bytes");
  std::memset(arena_, 0, bytes);
  for (int k = 0; k < plan_.buffers_size(); ++k) {
    tensors_[k].data = static_cast<char *>(arena_) + plan_.buffers(k).offset();
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
        i.comm[j] = {i.in[j]->f32(), i.out[j]->f32(), i.in[j]->numel, i.out[j]->numel};
      if (i.stagingBytes)
        i.staging = reinterpret_cast<float *>(static_cast<char *>(arena_) + i.stagingOffset);
    }
  // Staging and handles, once: the step loop never allocates.
  try {
    ctx_.comms[0]->reserve(reservation_[0]);
    ctx_.comms[1]->reserve(reservation_[1]);
  } catch (const comm::CommError &e) {
    throw PlanError(e.what());
  }
  ctx_.handles.assign(size_t(maxHandle_ + 1), Context::Started());

  io::SafeTensorsFile file = io::SafeTensorsFile::open(weightsPath);
  for (Tensor &t : tensors_) {
    if (t.role != plan::PARAM && t.role != plan::FROZEN)
      continue;
    const io::TensorRef *w = file.find(t.name);
    if (!w)
      throw PlanError(weightsPath + ": no tensor '" + t.name + "' (a parameter of the plan)");
    const cpu::Shape &whole = t.shards > 1 ? t.fullShape : t.shape;
    std::vector<int64_t> shape(whole.dims, whole.dims + whole.rank);
    if (w->dtype != io::DType::F32 || w->shape != shape)
      throw PlanError(weightsPath + ": tensor '" + t.name + "' is " + io::dtypeName(w->dtype) + " " +
                      io::formatShape(w->shape) + ", the plan needs float32 " +
                      io::formatShape(shape));
    // A shard takes chunk `rank` of the flattened tensor; the padding past
    // its end stays zero (the arena is zeroed).
    int64_t first = t.shards > 1 ? std::min(t.fullNumel, ctx_.rank * t.numel) : 0;
    int64_t count = t.shards > 1 ? std::min(t.fullNumel - first, t.numel) : t.numel;
    const char *from = static_cast<const char *>(w->data) + first * 4;
    // Copy in slices and drop the file's pages behind each: the peak stays
    // the arena plus one slice, not plus the largest tensor (a GPT-2
    // embedding is 154 MB) or the whole weights file. The mapping is
    // read-only and file-backed, so a dropped page that the next tensor
    // shares is simply read again.
    constexpr size_t kSlice = size_t(8) << 20;
    size_t bytes = size_t(count) * 4;
    for (size_t done = 0; done < bytes; done += kSlice) {
      size_t n = std::min(kSlice, bytes - done);
      std::memcpy(static_cast<char *>(t.data) + done, from + done, n);
      uintptr_t page = 4096, begin = reinterpret_cast<uintptr_t>(from + done) & ~(page - 1);
      uintptr_t end = reinterpret_cast<uintptr_t>(from + done + n);
      madvise(reinterpret_cast<void *>(begin), end - begin, MADV_DONTNEED);
    }
  }
  ctx_.seed = seed;
}

std::vector<const Tensor *> Executor::weights() const {
  std::vector<const Tensor *> r;
  for (const Tensor &t : tensors_)
    if (t.role == plan::PARAM)
      r.push_back(&t);
  return r;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> Executor::allWeights() const {
  std::vector<std::pair<std::string, std::vector<int64_t>>> r;
  if (pp_ > 1) {
    for (const StageParam &p : stageParams_)
      r.push_back({p.name, p.shape});
    return r;
  }
  for (const Tensor *t : weights()) {
    const cpu::Shape &s = t->shards > 1 ? t->fullShape : t->shape;
    r.push_back({t->name, std::vector<int64_t>(s.dims, s.dims + s.rank)});
  }
  return r;
}

namespace {
/// Turns a communicator's counting off for a scope.
struct Uncounted {
  comm::Communicator &c;
  bool was;
  explicit Uncounted(comm::Communicator &c) : c(c), was(c.counting()) { c.setCounting(false); }
  ~Uncounted() { c.setCounting(was); }
};
} // namespace

std::vector<WholeTensor> Executor::gatherWeights() {
  std::vector<WholeTensor> r;
  gathered_.clear();
  // Every buffer gatherWeights keeps, so that the views stay valid (moving
  // a vector keeps its buffer, but reserve keeps the count simple).
  gathered_.reserve(weights().size() + stageParams_.size());
  for (const Tensor *t : weights()) {
    if (t->shards <= 1) {
      r.push_back({t->name, std::vector<int64_t>(t->shape.dims, t->shape.dims + t->shape.rank),
                   t->f32()});
      continue;
    }
    // Each chunk to its place in the padded whole; the padding is at the end.
    gathered_.emplace_back(size_t(t->numel * t->shards));
    comm::TensorArg arg{t->f32(), gathered_.back().data(), t->numel};
    Uncounted quiet(*comm_);
    comm_->wait(comm_->allGather(&arg, 1, ("gathering the weight '" + t->name + "'").c_str()));
    r.push_back({t->name,
                 std::vector<int64_t>(t->fullShape.dims, t->fullShape.dims + t->fullShape.rank),
                 gathered_.back().data()});
  }
  if (pp_ <= 1)
    return r;
  // The other stages' parameters to world rank 0: stage s's dp index 0 is
  // world rank s; blocking messages on the world, one after the other.
  Uncounted quiet(*world_);
  int w = world_->rank();
  auto numel = [](const std::vector<int64_t> &shape) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  };
  if (w == 0) {
    for (const StageParam &p : stageParams_) {
      if (p.stage == 0)
        continue;
      gathered_.emplace_back(size_t(numel(p.shape)));
      std::string what = "gathering the weight '" + p.name + "' of stage " +
                         std::to_string(p.stage);
      world_->wait(world_->recv(gathered_.back().data(), gathered_.back().size() * sizeof(float),
                                p.stage, 0, what.c_str()));
      r.push_back({p.name, p.shape, gathered_.back().data()});
    }
  } else if (ctx_.rank == 0) {
    for (const StageParam &p : stageParams_) {
      if (p.stage != stage_)
        continue;
      auto it = std::find_if(r.begin(), r.end(),
                             [&](const WholeTensor &t) { return t.name == p.name; });
      if (it == r.end())
        throw PlanError(name_ + ": no parameter '" + p.name + "' to send to rank 0");
      std::string what = "sending the weight '" + p.name + "' to rank 0";
      world_->wait(world_->send(it->data, size_t(numel(p.shape)) * sizeof(float), 0, 0,
                                what.c_str()));
    }
  }
  return r;
}

double Executor::globalLoss() {
  if (pp_ > 1) // the last stage's ranks hold it; the others add 0
    return world_->blockingAllReduceScalar(hasLoss_ ? double(loss()) : 0.0, comm::ReduceOp::Sum) /
           dp_;
  return dp_ > 1 ? comm_->blockingAllReduceScalar(loss(), comm::ReduceOp::Avg) : loss();
}

static int64_t nowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void Executor::recordTimeline(int64_t step) {
  timelineStep_ = step;
  timeline_.clear();
  timeline_.reserve(prologue_.size() + micro_.size() * size_t(microBatches()) +
                    epilogue_.size());
}

void Executor::runList(const std::vector<Instr> &list, int which, int64_t micro) {
  if (!recording_)
    return runList(list);
  for (size_t k = 0; k < list.size(); ++k) {
    const Instr &i = list[k];
    int64_t t0 = nowUs();
    i.run(i, ctx_);
    progressComms();
    timeline_.push_back({&i, which, micro, int64_t(k), t0, nowUs()});
  }
}

void Executor::writeTimeline(const std::string &path) const {
  static const char *lists[] = {"prologue", "micro_batch", "epilogue"};
  std::string text = "rank,list,micro,index,op,start_us,end_us,mb,phase\n";
  std::string rank = std::to_string(world_->rank());
  for (const Event &e : timeline_)
    text += rank + "," + lists[e.list] + "," + std::to_string(e.micro) + "," +
            std::to_string(e.index) + "," + e.instr->op + "," + std::to_string(e.startUs) + "," +
            std::to_string(e.endUs) + "," +
            std::to_string(pp_ > 1 ? e.instr->microBatch : e.micro) + "," +
            std::to_string(e.instr->phase) + "\n";
  io::writeFileAtomically(path, {{text.data(), text.size()}});
}

void Executor::runList(const std::vector<Instr> &list) {
  // While a collective is pending, let it advance between kernels.
  if (!profile_) {
    for (const Instr &i : list) {
      i.run(i, ctx_);
      progressComms();
    }
    return;
  }
  for (const Instr &i : list) {
    auto t0 = std::chrono::steady_clock::now();
    i.run(i, ctx_);
    progressComms();
    auto &slot = opTime_[i.op];
    ++slot.first;
    slot.second += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
}

void Executor::printProfile(std::FILE *out) const {
  double total = 0;
  for (auto &[op, v] : opTime_)
    total += v.second;
  std::vector<std::pair<double, std::string>> rows;
  for (auto &[op, v] : opTime_)
    rows.push_back({v.second, op});
  std::sort(rows.rbegin(), rows.rend());
  std::fprintf(out, "%-24s %10s %10s %7s\n", "op", "calls", "seconds", "share");
  for (auto &[sec, op] : rows)
    std::fprintf(out, "%-24s %10lld %10.3f %6.1f%%\n", op.c_str(),
                 (long long)opTime_.at(op).first, sec, 100.0 * sec / std::max(total, 1e-12));
}

void Executor::beginStep(int64_t stepIndex) {
  ctx_.step = stepIndex;
  *tensors_[plan_.step_buffer()].i64() = stepIndex;
  ctx_.badIndices = 0;
  ctx_.comms[0]->resetCounters();
  ctx_.comms[1]->resetCounters();
}

void Executor::endStep() {
  counters_ = ctx_.comms[0]->counters();
  counters_ += ctx_.comms[1]->counters();
  if (ctx_.badIndices)
    throw PlanError("step " + std::to_string(ctx_.step) + ": " + std::to_string(ctx_.badIndices) +
                    " index or label values out of range in " + ctx_.badIndexOp +
                    " (token ids >= the vocabulary size? labels >= the number of classes?)");
}

} // namespace dsrt
