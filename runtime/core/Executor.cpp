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

Executor::Executor(const std::string &dir, comm::Communicator *comm) : dir_(dir), comm_(comm) {
  std::string path = dir + "/plan.pb";
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw PlanError(path + ": cannot open (is '" + dir + "' a plan directory written by dsc -o?)");
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (buffer.str().empty())
    throw PlanError(path + ": empty file, not a plan");
  google::protobuf::SetLogHandler(nullptr); // our error says it instead
  if (!plan_.ParseFromString(buffer.str()))
    throw PlanError(path + ": not a valid plan (corrupt or truncated protobuf)");
  if (plan_.format_version() != kPlanFormatVersion)
    throw PlanError(path + ": plan format version " + std::to_string(plan_.format_version()) +
                    ", this dsrt runs version " + std::to_string(kPlanFormatVersion) +
                    " (recompile the model with the matching dsc)");
  try {
    config_ = plan_.config_json().empty()
                  ? config::defaultConfig()
                  : config::parseDsConfig(plan_.config_json(), path + " (baked config)",
                                          std::max<int64_t>(1, plan_.dp()));
  } catch (const config::ConfigError &e) {
    throw PlanError(e.what());
  }
  if (plan_.program().micro_batches() < 1)
    throw PlanError(path + ": micro_batches must be at least 1");
  dp_ = std::max<int>(1, int(plan_.dp()));
  if (!comm_) {
    ownComm_ = std::make_unique<comm::SelfCommunicator>();
    comm_ = ownComm_.get();
  }
  if (comm_->size() != dp_)
    throw PlanError(path + ": plan compiled for dp=" + std::to_string(dp_) + " but running on " +
                    std::to_string(comm_->size()) +
                    (comm_->size() == 1 ? " rank" : " ranks") + ": recompile with --dp " +
                    std::to_string(comm_->size()) +
                    (dp_ > 1 && comm_->size() == 1
                         ? " (or run it with mpirun -np " + std::to_string(dp_) + ")"
                         : std::string()));
  ctx_.comm = comm_;
  ctx_.rank = comm_->rank();
  validateBuffers();
  prologue_ = resolve(plan_.program().prologue(), "prologue");
  micro_ = resolve(plan_.program().micro_batch(), "micro_batch");
  epilogue_ = resolve(plan_.program().epilogue(), "epilogue");
  validateCollectives(prologue_, "prologue");
  validateCollectives(micro_, "micro_batch");
  validateCollectives(epilogue_, "epilogue");
  auto scalar = [&](uint32_t index, plan::DType dtype, const char *what) {
    if (index >= tensors_.size() || tensors_[index].dtype != dtype || tensors_[index].numel != 1)
      throw PlanError(path + ": the " + what + " buffer " + std::to_string(index) +
                      " is not a scalar of the right type");
  };
  scalar(plan_.loss_buffer(), plan::F32, "loss");
  scalar(plan_.grad_norm_buffer(), plan::F32, "grad_norm");
  scalar(plan_.lr_buffer(), plan::F32, "lr");
  scalar(plan_.step_buffer(), plan::I64, "step");
  ctx_.config = &config_;
}

Executor::~Executor() { std::free(arena_); }

void Executor::validateBuffers() {
  std::string path = dir_ + "/plan.pb";
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
    std::string name = dir_ + "/plan.pb: " + where + " instruction " + std::to_string(k) +
                       " (" + p.op() + ")";
    Instr instr;
    instr.op = p.op();
    for (uint32_t i : p.inputs()) {
      if (i >= tensors_.size())
        throw PlanError(name + ": input buffer " + std::to_string(i) + " does not exist");
      instr.in.push_back(&tensors_[i]);
    }
    for (uint32_t i : p.outputs()) {
      if (i >= tensors_.size())
        throw PlanError(name + ": output buffer " + std::to_string(i) + " does not exist");
      if (tensors_[i].role == plan::CONSTANT || tensors_[i].role == plan::INPUT)
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
    bool grouped = instr.op == "dist.all_reduce" || instr.op == "dist.reduce_scatter" ||
                   instr.op == "dist.all_gather" || instr.op == "dist.chunk";
    if (grouped && instr.ints[0] != dp_)
      throw PlanError(name + ": group size " + std::to_string(instr.ints[0]) +
                      " differs from the plan's dp=" + std::to_string(dp_));
    out.push_back(std::move(instr));
  }
  return out;
}

void Executor::validateCollectives(const std::vector<Instr> &list, const char *where) {
  struct Open {
    size_t index;
    comm::StagingRange staging;
  };
  std::map<int64_t, Open> open; // handle -> its start
  std::vector<comm::StagingRange> live;
  std::vector<comm::TensorArg> args;
  auto name = [&](size_t k) {
    return dir_ + "/plan.pb: " + where + " instruction " + std::to_string(k) + " (" +
           list[k].op + ")";
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
    if (i.comm.empty())
      continue;
    int64_t handle = i.ints.back();
    maxHandle_ = std::max(maxHandle_, handle);
    if (open.count(handle))
      throw PlanError(name(k) + ": starts handle " + std::to_string(handle) + ", still pending from " +
                      list[open[handle].index].label + " (no dist.wait in between)");
    comm::Kind kind = i.op == "dist.all_reduce"       ? comm::Kind::AllReduce
                      : i.op == "dist.reduce_scatter" ? comm::Kind::ReduceScatter
                                                      : comm::Kind::AllGather;
    args.clear();
    for (size_t j = 0; j < i.in.size(); ++j)
      args.push_back({nullptr, nullptr, i.in[j]->numel, i.out[j]->numel});
    comm::StagingRange staging{0, comm_->stagingElements(kind, args.data(), args.size())};
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
        if (o.staging.length > 0)
          live.push_back(o.staging);
      staging.offset = comm::firstFitOffset(live.data(), live.size(), staging.length);
      reservation_.stagingElements =
          std::max(reservation_.stagingElements, staging.offset + staging.length);
    }
    open[handle] = {k, staging};
    reservation_.maxPending = std::max<int>(reservation_.maxPending, int(open.size()));
    reservation_.maxTensors = std::max<int>(reservation_.maxTensors, int(i.comm.size()));
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
    comm_->reserve(reservation_);
  } catch (const comm::CommError &e) {
    throw PlanError(e.what());
  }
  ctx_.handles.assign(size_t(maxHandle_ + 1), comm::Handle());

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

std::vector<WholeTensor> Executor::gatherWeights() {
  std::vector<WholeTensor> r;
  gathered_.clear();
  for (const Tensor *t : weights()) {
    if (t->shards <= 1) {
      r.push_back({t->name, std::vector<int64_t>(t->shape.dims, t->shape.dims + t->shape.rank),
                   t->f32()});
      continue;
    }
    // Each chunk to its place in the padded whole; the padding is at the end.
    gathered_.emplace_back(size_t(t->numel * t->shards));
    comm::TensorArg arg{t->f32(), gathered_.back().data(), t->numel};
    bool counting = comm_->counting();
    comm_->setCounting(false);
    try {
      comm_->wait(comm_->allGather(&arg, 1, ("gathering the weight '" + t->name + "'").c_str()));
    } catch (...) {
      comm_->setCounting(counting);
      throw;
    }
    comm_->setCounting(counting);
    r.push_back({t->name,
                 std::vector<int64_t>(t->fullShape.dims, t->fullShape.dims + t->fullShape.rank),
                 gathered_.back().data()});
  }
  // The views stay valid as gathered_ grows: moving a vector keeps its buffer.
  return r;
}

double Executor::globalLoss() {
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
    if (comm_->pending())
      comm_->progress();
    timeline_.push_back({&i, which, micro, int64_t(k), t0, nowUs()});
  }
}

void Executor::writeTimeline(const std::string &path) const {
  static const char *lists[] = {"prologue", "micro_batch", "epilogue"};
  std::string text = "rank,list,micro,index,op,start_us,end_us\n";
  for (const Event &e : timeline_)
    text += std::to_string(ctx_.rank) + "," + lists[e.list] + "," + std::to_string(e.micro) +
            "," + std::to_string(e.index) + "," + e.instr->op + "," +
            std::to_string(e.startUs) + "," + std::to_string(e.endUs) + "\n";
  io::writeFileAtomically(path, {{text.data(), text.size()}});
}

void Executor::runList(const std::vector<Instr> &list) {
  // While a collective is pending, let it advance between kernels.
  if (!profile_) {
    for (const Instr &i : list) {
      i.run(i, ctx_);
      if (comm_->pending())
        comm_->progress();
    }
    return;
  }
  for (const Instr &i : list) {
    auto t0 = std::chrono::steady_clock::now();
    i.run(i, ctx_);
    if (comm_->pending())
      comm_->progress();
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
  comm_->resetCounters();
}

void Executor::endStep() {
  if (ctx_.badIndices)
    throw PlanError("step " + std::to_string(ctx_.step) + ": " + std::to_string(ctx_.badIndices) +
                    " index or label values out of range in " + ctx_.badIndexOp +
                    " (token ids >= the vocabulary size? labels >= the number of classes?)");
}

} // namespace dsrt
