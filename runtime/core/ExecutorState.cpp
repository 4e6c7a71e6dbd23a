//===- ExecutorState.cpp - the weights and state a rank holds ------------===//
//
// Loading the initial weights into the arena (checked against the plan and
// its checksum), the state tensors checkpoints save and restore, and the
// whole weights gathered from the ranks' ZeRO chunks, tp parts and stages.
//
//===----------------------------------------------------------------------===//
#include "runtime/core/Executor.h"
#include "runtime/core/Tier.h"
#include "runtime/kernels/cpu/Kernels.h"

#include "plan/ElementBytes.h"

#include "io/SafeTensors.h"

#include <algorithm>
#include <cstring>

#include <sys/mman.h>
#include <unistd.h>
#include <sys/stat.h>

namespace dsrt {
namespace plan = dsc::plan;
std::vector<TpRun> tpRuns(const Tensor &t, int rank) {
  std::vector<TpRun> runs;
  const cpu::Shape &f = t.fullShape;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < f.rank; ++i)
    (i < t.tpDim ? outer : inner) *= i == t.tpDim ? 1 : f.dims[i];
  int64_t n = f.dims[t.tpDim], block = n / t.tpBlocks, part = block / t.tpSize;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < t.tpBlocks; ++k)
      runs.push_back({(o * n + k * block + rank * part) * inner,
                      (o * (n / t.tpSize) + k * part) * inner, part * inner});
  return runs;
}

std::vector<TpRun> heldRuns(const Tensor &t, int dpRank, int tpRank) {
  if (t.shards <= 1)
    return t.tpDim >= 0 ? tpRuns(t, tpRank) : std::vector<TpRun>{{0, 0, t.numel}};
  // A ZeRO chunk: elements [begin, end) of the flattened tp part (or whole).
  int64_t partNumel = t.partNumel();
  int64_t begin = std::min(partNumel, int64_t(dpRank) * t.numel);
  int64_t end = std::min(partNumel, begin + t.numel);
  std::vector<TpRun> in =
      t.tpDim >= 0 ? tpRuns(t, tpRank) : std::vector<TpRun>{{0, 0, partNumel}};
  std::vector<TpRun> out;
  for (const TpRun &r : in) {
    int64_t b = std::max(begin, r.part), e = std::min(end, r.part + r.count);
    if (b < e)
      out.push_back({r.whole + (b - r.part), b - begin, e - b});
  }
  return out;
}


void Executor::loadWeights(const std::string &path) {
  io::requireRegularFile(path);
  io::SafeTensorsFile file = io::SafeTensorsFile::open(path);
  // The header is checked against the plan first; then one pass over the
  // file, in file order, copies the parameters and hashes every byte (the
  // plan's own weights are checked against plan.sha256; another file has
  // no checksum to match). The pass reads through a mapping of its own and
  // drops each slice's pages behind it: the peak stays the arena plus one
  // slice, not plus the whole weights file.
  io::MappedFile bytes = io::MappedFile::open(path);
  const uint8_t *base = bytes.data();
  uint64_t size = bytes.size(), header = 0;
  for (int i = 0; i < 8 && size >= 8; ++i)
    header |= uint64_t(base[i]) << (8 * i);
  uint64_t dataStart = 8 + (size >= 8 ? std::min(header, size - 8) : 0);
  const auto &refs = file.tensors(); // in file order, tiling the data from offset 0
  auto offsetOf = [&](const io::TensorRef &w) {
    return dataStart + uint64_t(static_cast<const char *>(w.data) -
                                static_cast<const char *>(refs.front().data));
  };
  // Both mappings must be of the same file (it could be replaced between).
  if (size < 8 || header > size - 8 ||
      (refs.empty() ? dataStart != size : offsetOf(refs.back()) + refs.back().nbytes() != size))
    throw PlanError(path + ": changed while it was being read");

  struct Load {
    uint64_t begin, end; // in the file
    char *to;            // null: into the NVMe tier, at element `at` of `nvme`
    Tensor *nvme = nullptr;
    int64_t at = 0;
  };
  std::vector<Load> loads;
  for (Tensor &t : tensors_) {
    if (t.role != plan::PARAM && t.role != plan::FROZEN)
      continue;
    const io::TensorRef *w = file.find(t.name);
    // A plan without its weights: the trained ones come from the
    // checkpoint dsrt resumes (dsrt asks for --init or --resume).
    if (!w && plan_.no_weights() && t.role == plan::PARAM)
      continue;
    if (!w && plan_.no_weights())
      throw PlanError(path + ": no value for the frozen tensor '" + t.name +
                      "': the plan was compiled from a model file without its weights (a "
                      "--no-weights export), and a checkpoint holds only what trains; give "
                      "the model's state_dict with --init");
    if (!w)
      throw PlanError(path + ": no tensor '" + t.name + "' (a parameter of the plan)");
    const cpu::Shape &whole = t.whole();
    std::vector<int64_t> shape(whole.dims, whole.dims + whole.rank);
    if (w->dtype != io::DType::F32 || w->shape != shape)
      throw PlanError(path + ": tensor '" + t.name + "' is " + io::dtypeName(w->dtype) + " " +
                      io::formatShape(w->shape) + ", the plan needs float32 " +
                      io::formatShape(shape));
    // Its runs of the whole (a ZeRO chunk's padding stays zero: the arena
    // is zeroed).
    for (const TpRun &r : heldRuns(t, ctx_.ranks[0], ctx_.ranks[2])) {
      uint64_t begin = offsetOf(*w) + uint64_t(r.whole) * 4;
      if (inNvme(t)) // ZeRO-Infinity's parameters: written into the tier
        loads.push_back({begin, begin + uint64_t(r.count) * 4, nullptr, &t, r.part});
      else
        loads.push_back(
            {begin, begin + uint64_t(r.count) * 4, static_cast<char *>(t.data) + r.part * 4});
    }
  }
  std::sort(loads.begin(), loads.end(),
            [](const Load &a, const Load &b) { return a.begin < b.begin; });

  struct stat mine, plans;
  bool verify = !weightsSha256_.empty() && ::stat(path.c_str(), &mine) == 0 &&
                ::stat((dir_ + "/weights.safetensors").c_str(), &plans) == 0 &&
                mine.st_dev == plans.st_dev && mine.st_ino == plans.st_ino;
  io::Sha256 sha;
  constexpr uint64_t kSlice = uint64_t(8) << 20; // page-aligned slices of the mapping
  size_t next = 0; // loads before it are complete
  for (uint64_t at = 0; at < size; at += kSlice) {
    uint64_t end = std::min(size, at + kSlice);
    bool touched = verify;
    for (size_t j = next; j < loads.size() && loads[j].begin < end; ++j) {
      uint64_t b = std::max(at, loads[j].begin), e = std::min(end, loads[j].end);
      if (b < e) {
        if (loads[j].nvme) // whole float32s: both ends lie on 4-byte bounds of the file
          writeState(*loads[j].nvme, loads[j].at + int64_t(b - loads[j].begin) / 4,
                     int64_t(e - b) / 4, reinterpret_cast<const float *>(base + b));
        else
          std::memcpy(loads[j].to + (b - loads[j].begin), base + b, e - b);
        touched = true;
      }
    }
    while (next < loads.size() && loads[next].end <= end)
      ++next;
    if (verify)
      sha.update(base + at, end - at);
    if (touched)
      ::madvise(const_cast<uint8_t *>(base) + at, end - at, MADV_DONTNEED);
  }
  copiesStale_ = true;
  if (verify && sha.hex() != weightsSha256_)
    throw PlanError(path + ": does not match its checksum in " + dir_ + "/" + io::kChecksumFile +
                    ": the file was modified after dsc wrote it (" + planChecksumHint(dir_) + ")");
}

std::vector<const Tensor *> Executor::weights() const {
  backend_->pull();
  std::vector<const Tensor *> r;
  for (const Tensor &t : tensors_)
    if (t.role == plan::PARAM || (t.role == plan::FROZEN && t.assigned))
      r.push_back(&t);
  return r;
}

std::vector<Tensor *> Executor::stateTensors() {
  // The caller may write them (a restore): the device takes them back
  // before the next step.
  backend_->pull();
  backend_->hostWritten();
  copiesStale_ = true;
  std::vector<Tensor *> r;
  for (Tensor &t : tensors_)
    if (t.role == plan::PARAM || t.role == plan::OPT_STATE || t.role == plan::FROZEN)
      r.push_back(&t);
  return r;
}

std::vector<const Tensor *> Executor::stateTensors() const {
  backend_->pull();
  std::vector<const Tensor *> r;
  for (const Tensor &t : tensors_)
    if (t.role == plan::PARAM || t.role == plan::OPT_STATE || t.role == plan::FROZEN)
      r.push_back(&t);
  return r;
}

void Executor::readState(const Tensor &t, int64_t first, int64_t count, float *dst) const {
  if (first < 0 || count < 0 || first + count > t.numel)
    throw PlanError(name_ + ": elements [" + std::to_string(first) + ", " +
                    std::to_string(first + count) + ") of '" + t.name + "' out of range");
  if (!inNvme(t)) {
    std::memcpy(dst, t.f32() + first, size_t(count) * 4);
    return;
  }
  nvme_->read(t.offset + uint64_t(first) * 4, uint64_t(count) * 4, dst);
}

void Executor::writeState(const Tensor &t, int64_t first, int64_t count, const float *src) {
  if (first < 0 || count < 0 || first + count > t.numel)
    throw PlanError(name_ + ": elements [" + std::to_string(first) + ", " +
                    std::to_string(first + count) + ") of '" + t.name + "' out of range");
  copiesStale_ = true;
  if (!inNvme(t)) {
    std::memcpy(t.f32() + first, src, size_t(count) * 4);
    return;
  }
  nvme_->write(t.offset + uint64_t(first) * 4, uint64_t(count) * 4, src);
}

std::string Executor::restoreProgress(int64_t appliedSteps,
                                     const std::optional<LossScalerState> &scaler) {
  std::string note;
  if (scaler && !scaler_) {
    note = "the checkpoint was saved with fp16 loss scaling (scale " +
           std::to_string(scaler->scale) + "); this plan does not scale its loss, so its "
           "scaler state is left aside";
  } else if (!scaler && scaler_) {
    note = "the checkpoint was saved without fp16 loss scaling; this fp16 plan's loss scaler "
           "starts afresh from its config (scale " + std::to_string(scaler_->scale()) + ")";
  } else if (scaler) {
    try {
      scaler_->restore(*scaler);
    } catch (const std::invalid_argument &e) {
      throw PlanError(name_ + ": the checkpoint's loss scaler state: " + e.what());
    }
  }
  appliedSteps_ = appliedSteps;
  return note;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> Executor::allWeights() const {
  std::vector<std::pair<std::string, std::vector<int64_t>>> r;
  if (pp_ > 1) {
    for (const StageParam &p : stageParams_)
      r.push_back({p.name, p.shape});
    return r;
  }
  for (const Tensor *t : weights()) {
    const cpu::Shape &s = t->whole();
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

void Executor::releaseTransients() {
  if (!arena_)
    return;
  const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t base = reinterpret_cast<uintptr_t>(arena_);
  const uintptr_t begin = (base + plan_.persistent_bytes() + page - 1) / page * page;
  const uintptr_t end = (base + plan_.arena_bytes()) / page * page;
  if (begin < end)
    ::madvise(reinterpret_cast<void *>(begin), end - begin, MADV_DONTNEED);
}

std::vector<WholeTensor> Executor::gatherWeights() {
  std::vector<WholeTensor> r;
  gathered_.clear();
  // Every buffer gatherWeights keeps, so that the views stay valid (moving
  // a vector keeps its buffer, but reserve keeps the count simple).
  gathered_.reserve(weights().size() + stageParams_.size());
  // A sharded or split tensor is assembled on its stage's root (dp index 0,
  // tp rank 0) only, from blocking messages (not counted): the dp group's
  // ZeRO chunks to dp index 0, then the tp group's parts to tp rank 0. The
  // other ranks allocate nothing for it.
  const bool dpRoot = ctx_.ranks[0] == 0;
  for (const Tensor *t : weights()) {
    // A parameter in the NVMe tier is read into memory first (4 bytes per
    // element of this rank's part, held until the weights are written;
    // moving gathered_ keeps its buffers where they are).
    const float *mine = t->f32();
    if (inNvme(*t)) {
      gathered_.emplace_back(size_t(t->numel));
      readState(*t, 0, t->numel, gathered_.back().data());
      mine = gathered_.back().data();
    }
    if (t->shards <= 1 && t->tpDim < 0) {
      r.push_back({t->name, std::vector<int64_t>(t->shape.dims, t->shape.dims + t->shape.rank),
                   mine});
      continue;
    }
    std::string what = "gathering the weight '" + t->name + "'";
    // ZeRO: the chunks, in dp order, make the tp part (or the whole)
    // followed by the padding.
    const float *part = mine;
    int64_t partNumel = t->partNumel();
    std::vector<float> chunks;
    if (t->shards > 1) {
      Uncounted quiet(*comm_);
      size_t bytes = size_t(t->numel) * sizeof(float);
      if (!dpRoot) {
        comm_->wait(comm_->send(mine, bytes, 0, 0, what.c_str()));
        continue;
      }
      chunks.resize(size_t(t->numel * t->shards));
      std::memcpy(chunks.data(), mine, bytes);
      for (int k = 1; k < t->shards; ++k)
        comm_->wait(comm_->recv(chunks.data() + size_t(k) * t->numel, bytes, k, 0, what.c_str()));
      part = chunks.data();
    } else if (!dpRoot) {
      continue;
    }
    if (t->tpDim >= 0 && ctx_.ranks[2] != 0) {
      Uncounted quiet(*ownTp_);
      ownTp_->wait(ownTp_->send(part, size_t(partNumel) * sizeof(float), 0, 0, what.c_str()));
      continue;
    }
    gathered_.emplace_back(size_t(t->fullNumel));
    if (t->tpDim < 0) {
      std::memcpy(gathered_.back().data(), part, size_t(partNumel) * sizeof(float));
    } else {
      // Each tp rank's part, its runs to their places in the whole.
      std::vector<float> other(static_cast<size_t>(partNumel));
      Uncounted quiet(*ownTp_);
      for (int rank = 0; rank < tp_; ++rank) {
        const float *from = part;
        if (rank > 0) {
          ownTp_->wait(ownTp_->recv(other.data(), other.size() * sizeof(float), rank, 0,
                                    what.c_str()));
          from = other.data();
        }
        for (const TpRun &run : tpRuns(*t, rank))
          std::memcpy(gathered_.back().data() + run.whole, from + run.part,
                      size_t(run.count) * sizeof(float));
      }
    }
    r.push_back({t->name,
                 std::vector<int64_t>(t->fullShape.dims, t->fullShape.dims + t->fullShape.rank),
                 gathered_.back().data()});
  }
  if (pp_ <= 1)
    return r;
  // The other stages' parameters to world rank 0: stage s's dp index 0
  // and tp rank 0 is world rank s * tp (tp ranks gathered their parts
  // above); blocking messages on the world, one after the other.
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
                                p.stage * tp_, 0, what.c_str()));
      r.push_back({p.name, p.shape, gathered_.back().data()});
    }
  } else if (ctx_.rank == 0 && ctx_.ranks[2] == 0) {
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

} // namespace dsrt
