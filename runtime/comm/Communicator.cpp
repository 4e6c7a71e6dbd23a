//===- Communicator.cpp - pending collectives, staging, counters, timeout -===//
//
// The backend-independent half of a communicator: argument checks, the
// counters, the pool of pending collectives with their staging ranges, and
// the polling wait with its timeout. SelfCommunicator (one rank) is here too.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/Communicator.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

namespace dsrt::comm {

const char *kindName(Kind kind) {
  switch (kind) {
  case Kind::AllReduce:
    return "all_reduce";
  case Kind::ReduceScatter:
    return "reduce_scatter";
  case Kind::AllGather:
    return "all_gather";
  case Kind::AllToAll:
    return "all_to_all";
  }
  return "?";
}

const char *reduceOpName(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return "sum";
  case ReduceOp::Avg:
    return "avg";
  case ReduceOp::Max:
    return "max";
  case ReduceOp::Min:
    return "min";
  }
  return "?";
}

int64_t Counters::calls() const {
  int64_t n = 0;
  for (const KindCounter &c : kind)
    n += c.calls;
  return n;
}

int64_t Counters::elements() const {
  int64_t n = 0;
  for (const KindCounter &c : kind)
    n += c.elements;
  return n;
}

int64_t Counters::bytes() const {
  int64_t n = 0;
  for (const KindCounter &c : kind)
    n += c.bytes;
  return n;
}

Counters &Counters::operator+=(const Counters &other) {
  for (int k = 0; k < kNumKinds; ++k) {
    kind[k].calls += other.kind[k].calls;
    kind[k].elements += other.kind[k].elements;
    kind[k].bytes += other.kind[k].bytes;
  }
  p2p.calls += other.p2p.calls;
  p2p.elements += other.p2p.elements;
  return *this;
}

std::string Counters::summary() const {
  std::string r;
  auto add = [&](const char *name, const KindCounter &c) {
    if (!c.calls)
      return;
    r += (r.empty() ? "" : ", ") + std::string(name) + " " + std::to_string(c.calls) +
         (c.calls == 1 ? " call " : " calls ") + std::to_string(c.elements) + " elements";
  };
  for (int k = 0; k < kNumKinds; ++k)
    add(kindName(Kind(k)), kind[k]);
  add("p2p", p2p);
  return r.empty() ? "none" : r;
}

int64_t firstFitOffset(const StagingRange *live, size_t count, int64_t length) {
  // Candidates: 0 and the end of every live range; the lowest one that
  // overlaps no live range wins (the end of the highest range always does).
  int64_t best = -1;
  for (size_t c = 0; c <= count; ++c) {
    int64_t at = c == count ? 0 : live[c].offset + live[c].length;
    if (best >= 0 && at >= best)
      continue;
    bool free = true;
    for (size_t j = 0; j < count && free; ++j)
      free = live[j].length == 0 || at + length <= live[j].offset ||
             live[j].offset + live[j].length <= at;
    if (free)
      best = at;
  }
  return best;
}

Communicator::Communicator(double timeoutSeconds) : timeoutSeconds_(timeoutSeconds) {
  resizeBookkeeping({0, 8, 64});
}

Communicator::~Communicator() = default;

void Communicator::resizeBookkeeping(const Reservation &r) {
  reserved_ = r;
  slots_.assign(size_t(r.maxPending), Pending());
  tensorArgs_.assign(size_t(r.maxPending) * size_t(r.maxTensors), TensorArg());
  numelScratch_.assign(size_t(r.maxTensors), 0);
  liveScratch_.assign(size_t(r.maxPending), StagingRange());
}

void Communicator::reserve(const Reservation &r) {
  if (pendingCount_)
    throw CommError(prefix() + "reserve() while " +
                    std::to_string(pendingCount_) + " collectives are pending");
  if (r.stagingElements < 0 || r.maxPending < 1 || r.maxTensors < 1)
    throw CommError(prefix() +
                    "reserve() needs staging >= 0, maxPending >= 1 and maxTensors >= 1");
  // Keep the generations so stale handles stay detectable.
  std::vector<uint32_t> generations;
  for (const Pending &p : slots_)
    generations.push_back(p.generation);
  resizeBookkeeping(r);
  for (size_t s = 0; s < slots_.size() && s < generations.size(); ++s)
    slots_[s].generation = generations[s];
  allocateStaging(r.stagingElements);
}

Handle Communicator::allReduce(const TensorArg *ts, size_t k, ReduceOp op, const char *what,
                               float *staging) {
  return start(Kind::AllReduce, ts, k, op, what, staging);
}

Handle Communicator::reduceScatter(const TensorArg *ts, size_t k, ReduceOp op,
                                   const char *what, float *staging) {
  return start(Kind::ReduceScatter, ts, k, op, what, staging);
}

Handle Communicator::allGather(const TensorArg *ts, size_t k, const char *what,
                               float *staging) {
  return start(Kind::AllGather, ts, k, ReduceOp::Sum, what, staging);
}

Handle Communicator::allToAll(const TensorArg *ts, size_t k, const char *what, float *staging) {
  return start(Kind::AllToAll, ts, k, ReduceOp::Sum, what, staging);
}

Handle Communicator::start(Kind kind, const TensorArg *ts, size_t k, ReduceOp op,
                           const char *what, float *external) {
  // Built only for an error: starting a collective never allocates.
  auto where = [&] {
    return prefix() + kindName(kind) +
           (what ? std::string(" (") + what + ")" : std::string());
  };
  if (k == 0)
    throw CommError(where() + ": no tensors");
  if (k > size_t(reserved_.maxTensors))
    throw CommError(where() + ": " + std::to_string(k) + " tensors in one collective, reserve() " +
                    "allowed " + std::to_string(reserved_.maxTensors));
  if (pendingCount_ >= reserved_.maxPending)
    throw CommError(where() + ": more than " + std::to_string(reserved_.maxPending) +
                    " collectives pending (the reserved number)");
  int64_t total = 0, totalBytes = 0;
  for (size_t j = 0; j < k; ++j) {
    if (ts[j].n < 0 || (ts[j].n > 0 && (!ts[j].in || !ts[j].out)))
      throw CommError(where() + ": tensor " + std::to_string(j) + " has no buffer or a negative size");
    const bool moves = kind == Kind::AllGather || kind == Kind::AllToAll;
    if (!moves && ts[j].type == Elem::U8)
      throw CommError(where() + ": tensor " + std::to_string(j) +
                      " holds raw bytes (U8), which a reduction cannot add");
    if (!moves && ts[j].type != ts[0].type)
      throw CommError(where() + ": tensor " + std::to_string(j) +
                      " has another element type than tensor 0 (a reduction adds one type)");
    if (kind == Kind::AllGather &&
        chunkOf(gatheredOf(ts[j], size()), size()) != ts[j].n)
      throw CommError(where() + ": tensor " + std::to_string(j) + ": " +
                      std::to_string(gatheredOf(ts[j], size())) + " elements are not " +
                      std::to_string(size()) + " chunks of " + std::to_string(ts[j].n));
    if (kind == Kind::AllToAll && ts[j].n % size())
      throw CommError(where() + ": tensor " + std::to_string(j) + ": " +
                      std::to_string(ts[j].n) + " elements are not " + std::to_string(size()) +
                      " equal chunks");
    numelScratch_[j] = kind == Kind::AllGather ? gatheredOf(ts[j], size()) : ts[j].n;
    total += ts[j].n;
    totalBytes += (kind == Kind::AllReduce ? 2 : 1) * numelScratch_[j] * ts[j].elementBytes();
  }

  int slot = takeSlot();
  Pending &p = slots_[slot];
  p.p2p = P2p::None;
  p.kind = kind;
  p.op = op;
  p.k = k;
  p.what = what;
  p.elements = 0; // whole tensors: reduced inputs, gathered outputs
  for (size_t j = 0; j < k; ++j)
    p.elements += numelScratch_[j];
  std::copy(ts, ts + k, tensorArgs_.begin() + size_t(slot) * reserved_.maxTensors);

  p.external = external;
  p.staging = {0, external ? 0 : stagingElements(kind, ts, k)};
  if (p.staging.length > 0) {
    size_t live = 0;
    for (const Pending &q : slots_)
      if (q.active && q.staging.length > 0)
        liveScratch_[live++] = q.staging;
    p.staging.offset = firstFitOffset(liveScratch_.data(), live, p.staging.length);
    if (p.staging.offset + p.staging.length > reserved_.stagingElements)
      throw CommError(where() + ": needs " + std::to_string(p.staging.length) +
                      " staging elements at offset " + std::to_string(p.staging.offset) +
                      ", reserve() allotted " + std::to_string(reserved_.stagingElements));
  }

  if (opLog_) {
    p.started = std::chrono::steady_clock::now();
    p.logBytes = 0;
    for (size_t j = 0; j < k; ++j)
      p.logBytes += numelScratch_[j] * ts[j].elementBytes();
  }
  startCollective(slot); // may throw: the slot is not taken yet
  if (counting_) {
    KindCounter &c = counters_.kind[int(kind)];
    ++c.calls;
    c.elements += kind == Kind::AllReduce ? 2 * total : p.elements;
    c.bytes += totalBytes;
  }
  return activate(slot);
}

int Communicator::takeSlot() const {
  int slot = 0;
  while (slots_[slot].active)
    ++slot;
  return slot;
}

Handle Communicator::activate(int slot) {
  Pending &p = slots_[slot];
  p.active = true;
  ++p.generation;
  ++pendingCount_;
  return Handle{slot, p.generation};
}

Handle Communicator::send(const void *data, size_t bytes, int peer, int tag, const char *what) {
  return startP2p(P2p::Send, const_cast<void *>(data), bytes, peer, tag, what);
}

Handle Communicator::recv(void *data, size_t bytes, int peer, int tag, const char *what) {
  return startP2p(P2p::Recv, data, bytes, peer, tag, what);
}

Handle Communicator::startP2p(P2p dir, void *data, size_t bytes, int peer, int tag,
                              const char *what) {
  // Built only for an error: starting a message never allocates.
  auto where = [&] {
    return prefix() + (dir == P2p::Send ? "send to " : "recv from ") +
           (peer >= 0 && peer < size() ? "rank " + std::to_string(worldRankOf(peer))
                                       : "peer " + std::to_string(peer)) +
           (what ? std::string(" (") + what + ")" : std::string());
  };
  if (peer < 0 || peer >= size())
    throw CommError(where() + ": the peer is not a rank of this group of " +
                    std::to_string(size()));
  if (tag < 0 || tag > kMaxTag)
    throw CommError(where() + ": tag " + std::to_string(tag) + " outside [0, " +
                    std::to_string(kMaxTag) + "]");
  if (bytes && !data)
    throw CommError(where() + ": no buffer");
  if (pendingCount_ >= reserved_.maxPending)
    throw CommError(where() + ": more than " + std::to_string(reserved_.maxPending) +
                    " collectives pending (the reserved number)");
  int slot = takeSlot();
  Pending &p = slots_[slot];
  p.p2p = dir;
  p.peer = peer;
  p.tag = tag;
  p.buffer = data;
  p.bytes = bytes;
  p.k = 0;
  p.what = what;
  p.elements = int64_t(bytes / 4);
  p.external = nullptr;
  p.staging = {0, 0};
  if (opLog_) {
    p.started = std::chrono::steady_clock::now();
    p.logBytes = int64_t(bytes);
  }
  startMessage(slot); // may throw: the slot is not taken yet
  if (counting_ && dir == P2p::Send) {
    ++counters_.p2p.calls;
    counters_.p2p.elements += int64_t(bytes / 4);
  }
  return activate(slot);
}

void Communicator::startMessage(int slot) {
  (void)slot;
  throw CommError(prefix() + "the " + std::string(backend()) +
                  " communicator has no point-to-point messages (one rank)");
}

void Communicator::wait(Handle h) {
  if (!h.valid() || h.slot >= int(slots_.size()) || !slots_[h.slot].active ||
      slots_[h.slot].generation != h.generation)
    throw CommError(prefix() + "wait for handle " +
                    std::to_string(h.slot) + " which is not a pending collective");
  int slot = h.slot;
  auto start = std::chrono::steady_clock::now();
  for (unsigned spin = 0; !testCollective(slot); ++spin) {
    double waited = elapsedSince(start);
    if (waited > timeoutSeconds_) {
      abortCollective(slot);
      throw CommError(timeoutMessage(describe(slot), waited, slots_[slot].p2p != P2p::None) +
                      missingRanks(describe(slot)));
    }
    // The other group's rings and messages advance meanwhile: the rank we
    // wait for may itself wait for them.
    for (Communicator *c : companions_)
      if (c->pending())
        c->progress();
    pause(spin);
  }
  auto release = [&] {
    slots_[slot].active = false;
    slots_[slot].staging = {0, 0};
    --pendingCount_;
  };
  try {
    finishCollective(slot);
  } catch (...) {
    release();
    throw;
  }
  if (opLog_)
    logCompletion(slots_[slot]);
  release();
}

void Communicator::logCompletion(const Pending &p) {
  int bit = p.p2p == P2p::None ? int(p.kind) : kNumKinds + (p.p2p == P2p::Send ? 0 : 1);
  if (!(opLogOptions_.kinds >> bit & 1u))
    return;
  double ms = 1e3 * elapsedSince(p.started);
  OpKey key;
  key.name = p.p2p == P2p::None ? kindName(p.kind) : p.p2p == P2p::Send ? "send" : "recv";
  if (opLogOptions_.debug && p.what)
    key.name += std::string(" | ") + p.what;
  key.groupSize = size();
  key.bytes = p.logBytes;
  OpRecord &r = (*opLog_)[key];
  r.minMs = r.count ? std::min(r.minMs, ms) : ms;
  r.maxMs = std::max(r.maxMs, ms);
  r.totalMs += ms;
  ++r.count;
  if (opLogOptions_.verbose && worldRankOf(rank()) == 0) { // DeepSpeed's log_dist(ranks=[0])
    BusBandwidth bw = busBandwidth(key, ms);
    std::printf("comm op: %s | time (ms): %.2f | msg size: %s | algbw (Gbps): %.2f | busbw "
                "(Gbps): %.2f\n",
                key.name.c_str(), ms, byteSize(key.bytes).c_str(), bw.algbw, bw.busbw);
  }
}

BusBandwidth busBandwidth(const OpKey &key, double ms) {
  BusBandwidth bw;
  if (ms <= 0)
    return bw;
  const double n = key.groupSize;
  bw.algbw = double(key.bytes) * 8 / (ms * 1e6);
  // NCCL-tests' bus bandwidth (doc/PERFORMANCE.md): what each link carries.
  auto starts = [&](const char *p) { return key.name.rfind(p, 0) == 0; };
  double factor = starts("all_reduce")                                   ? 2 * (n - 1) / n
                  : starts("all_gather") || starts("reduce_scatter") ||
                          starts("all_to_all")                           ? (n - 1) / n
                                                                         : 1.0;
  bw.busbw = bw.algbw * factor;
  return bw;
}

std::string byteSize(int64_t bytes) {
  // DeepSpeed's convert_size: powers of 1024, two decimals.
  static const char *units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  if (bytes <= 0)
    return "0B";
  int i = 0;
  double v = double(bytes);
  while (v >= 1024 && i < 5) {
    v /= 1024;
    ++i;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, units[i]);
  return buf;
}

std::string Communicator::describe(int slot) const {
  const Pending &p = slots_[slot];
  std::string what = p.what ? std::string(p.what) : "handle " + std::to_string(slot);
  if (p.p2p != P2p::None)
    return std::string(p.p2p == P2p::Send ? "send of " : "recv of ") + std::to_string(p.bytes) +
           " bytes " + (p.p2p == P2p::Send ? "to" : "from") + " rank " +
           std::to_string(worldRankOf(p.peer)) + " (tag " + std::to_string(p.tag) + ", " + what +
           ")";
  return std::string(kindName(p.kind)) + " of " + std::to_string(p.elements) + " elements (" +
         what + ")";
}

std::string Communicator::timeoutMessage(const std::string &what, double seconds,
                                         bool p2p) const {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.3g", seconds);
  return prefix() + what + " did not complete in " + secs +
         (p2p ? " s: a rank died or the ranks' sends and receives do not match"
              : " s: a rank died or the ranks issue different collectives");
}

double Communicator::elapsedSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void Communicator::pause(unsigned spin) {
  // Yield for the first few thousand polls (a few milliseconds: a ring step
  // advances only while both ranks poll, and a sleep costs its timer slack,
  // about 50 us more, per step), then back off so a stuck wait does not
  // burn a core. A yield gives the core to a rank that shares it.
  if (spin < 4096)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(spin < 8192 ? 20 : 200));
}

void SelfCommunicator::startCollective(int slot) {
  // One rank: reduce_scatter's chunk 0, all_gather's concatenation and
  // all_to_all's only chunk are the input itself; Avg divides by 1.
  const TensorArg *ts = tensors(slot);
  for (size_t j = 0; j < pendingAt(slot).k; ++j)
    if (ts[j].out != ts[j].in && ts[j].n)
      std::memmove(ts[j].out, ts[j].in,
                   size_t(pendingAt(slot).kind == Kind::AllGather ? gatheredOf(ts[j], 1)
                                                                  : ts[j].n) *
                       size_t(ts[j].elementBytes()));
}

std::vector<std::string> Communicator::blockingAllGatherText(const std::string &mine) {
  if (size() != 1)
    throw CommError(prefix() + "the " + backend() + " backend has no all-gather of text");
  return {mine};
}

} // namespace dsrt::comm
