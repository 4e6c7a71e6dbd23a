//===- Executor.cpp - plan loading, validation and the step loop ---------===//
#include "runtime/core/Executor.h"

#include "runtime/io/SafeTensors.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sys/mman.h>
#include <cstring>
#include <fstream>
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

Executor::Executor(const std::string &dir) : dir_(dir) {
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
                  : config::parseDsConfig(plan_.config_json(), path + " (baked config)");
  } catch (const config::ConfigError &e) {
    throw PlanError(e.what());
  }
  if (plan_.program().micro_batches() < 1)
    throw PlanError(path + ": micro_batches must be at least 1");
  validateBuffers();
  prologue_ = resolve(plan_.program().prologue(), "prologue");
  micro_ = resolve(plan_.program().micro_batch(), "micro_batch");
  epilogue_ = resolve(plan_.program().epilogue(), "epilogue");
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
    bindInstr(instr, name);
    out.push_back(std::move(instr));
  }
  return out;
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
  // Concat keeps raw input pointers: now that they exist, fill them in.
  for (auto *list : {&prologue_, &micro_, &epilogue_})
    for (Instr &i : *list)
      if (!i.ptrs.empty())
        for (size_t j = 0; j < i.in.size(); ++j)
          i.ptrs[j] = i.in[j]->f32();

  io::SafeTensorsFile file = io::SafeTensorsFile::open(weightsPath);
  for (Tensor &t : tensors_) {
    if (t.role != plan::PARAM && t.role != plan::FROZEN)
      continue;
    const io::TensorRef *w = file.find(t.name);
    if (!w)
      throw PlanError(weightsPath + ": no tensor '" + t.name + "' (a parameter of the plan)");
    std::vector<int64_t> shape(t.shape.dims, t.shape.dims + t.shape.rank);
    if (w->dtype != io::DType::F32 || w->shape != shape)
      throw PlanError(weightsPath + ": tensor '" + t.name + "' is " + io::dtypeName(w->dtype) + " " +
                      io::formatShape(w->shape) + ", the plan needs float32 " +
                      io::formatShape(shape));
    std::memcpy(t.data, w->data, t.bytes());
    // Drop the file's pages once copied: the peak stays the arena plus one
    // tensor instead of the arena plus the whole weights file.
    uintptr_t page = 4096, begin = reinterpret_cast<uintptr_t>(w->data) & ~(page - 1);
    uintptr_t end = reinterpret_cast<uintptr_t>(w->data) + t.bytes();
    madvise(reinterpret_cast<void *>(begin), end - begin, MADV_DONTNEED);
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

void Executor::runList(const std::vector<Instr> &list) {
  if (!profile_) {
    for (const Instr &i : list)
      i.run(i, ctx_);
    return;
  }
  for (const Instr &i : list) {
    auto t0 = std::chrono::steady_clock::now();
    i.run(i, ctx_);
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
}

void Executor::endStep() {
  if (ctx_.badIndices)
    throw PlanError("step " + std::to_string(ctx_.step) + ": " + std::to_string(ctx_.badIndices) +
                    " index or label values out of range in " + ctx_.badIndexOp +
                    " (token ids >= the vocabulary size? labels >= the number of classes?)");
}

} // namespace dsrt
