//===- MpiCommunicator.cpp - CPU ranks over MPI ---------------------------===//
#include "runtime/comm/MpiCommunicator.h"

#include "runtime/half/HalfBits.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <limits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dsrt::comm {

namespace {

/// How a started collective lands in its outputs.
enum class Mode {
  Direct, // MPI wrote the outputs (Avg still to scale)
  Staged, // the result is in the staging range: unpack
  Ring,   // dsrt's own ring over point-to-point messages, in staging
  Message // a send or receive of the plan (dist.send / dist.recv)
};

/// A pending send or receive. Tested one by one (never by MPI_Testall,
/// which would drop a receive's status): `done` once MPI completed it, with
/// the bytes received or the error MPI reported.
struct Message {
  MPI_Request req = MPI_REQUEST_NULL;
  bool done = true;
  int64_t received = 0;
  int error = MPI_SUCCESS;
};

/// A reduce-scatter (and, for an all-reduce, the all-gather after it) run
/// as a ring of size - 1 steps of Isend/Irecv between neighbours, in the
/// staging bytes dsc planned: size blocks of `block` elements and one more
/// block to receive into. Unlike MPI's own non-blocking reduce-scatter and
/// all-reduce (OpenMPI's libnbc), which allocate temporaries as large as
/// the whole message, nothing outside the plan is allocated.
struct Ring {
  bool done = true;
  bool gather = false;     // all_reduce: an all-gather phase follows
  bool gathering = false;  // in that phase
  int step = 0;
  char *blocks = nullptr; // size x block elements
  char *recv = nullptr;   // block elements
  int64_t block = 0;      // elements
  Elem type = Elem::F32;
  size_t bytes() const { return type == Elem::F32 ? 4 : 2; }
  int tag = 0;
  ReduceOp op = ReduceOp::Sum;
  MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

/// Whether [a, a + na bytes) and [b, b + nb bytes) share a byte.
bool overlaps(const void *a, int64_t na, const void *b, int64_t nb) {
  const char *x = static_cast<const char *>(a), *y = static_cast<const char *>(b);
  return x < y + nb && y < x + na;
}

/// The MPI type that moves elements of `bytes` bytes (raw bytes, 16-bit
/// patterns or floats: a move never converts).
MPI_Datatype unitType(int64_t bytes) {
  return bytes == 1 ? MPI_BYTE : bytes == 2 ? MPI_UINT16_T : MPI_FLOAT;
}

MPI_Op mpiOp(ReduceOp op) {
  switch (op) {
  case ReduceOp::Max:
    return MPI_MAX;
  case ReduceOp::Min:
    return MPI_MIN;
  default:
    return MPI_SUM; // Avg: the sum, scaled at completion
  }
}

void scale(float *x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i)
    x[i] *= s;
}

size_t bytesOf(Elem t) { return t == Elem::F32 ? 4 : 2; }

/// Element i of `p` (of type t) as a float, and a float stored as type t
/// (bf16 / fp16: rounded to nearest even, as the kernels round).
float load(const void *p, int64_t i, Elem t) {
  switch (t) {
  case Elem::BF16:
    return half::bf16Value(static_cast<const uint16_t *>(p)[i]);
  case Elem::F16:
    return half::f16Value(static_cast<const uint16_t *>(p)[i]);
  default:
    return static_cast<const float *>(p)[i];
  }
}
void store(void *p, int64_t i, Elem t, float v) {
  switch (t) {
  case Elem::BF16:
    static_cast<uint16_t *>(p)[i] = half::bf16Bits(v);
    return;
  case Elem::F16:
    static_cast<uint16_t *>(p)[i] = half::f16Bits(v);
    return;
  default:
    static_cast<float *>(p)[i] = v;
  }
}

/// dst[0, n) = src[0, n) * s (s == 1: a copy), elements of type t.
void copyScaled(void *dst, const void *src, int64_t n, float s, Elem t) {
  if (s == 1.0f) {
    std::memcpy(dst, src, size_t(n) * bytesOf(t));
    return;
  }
  if (t == Elem::F32) {
    for (int64_t i = 0; i < n; ++i)
      static_cast<float *>(dst)[i] = static_cast<const float *>(src)[i] * s;
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    store(dst, i, t, load(src, i, t) * s);
}

} // namespace

struct MpiCommunicator::Impl {
  MPI_Comm comm = MPI_COMM_NULL;     // collectives
  MPI_Comm p2p = MPI_COMM_NULL;      // messages (a duplicate: own tag space)
  MPI_Comm health = MPI_COMM_NULL;   // missingRanks() after a timeout
  std::vector<MPI_Request> requests; // per slot
  std::vector<Mode> modes;           // per slot
  std::vector<Ring> rings;           // per slot
  std::vector<Message> messages;     // per slot
  int nextTag = 0; // same sequence on every rank: collectives start in order
  std::unique_ptr<float[]> staging;
  int64_t stagingElements = 0;
};

namespace {

void check(int rc, int rank, const char *call) {
  if (rc == MPI_SUCCESS)
    return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw CommError("rank " + std::to_string(rank) + ": " + call + " failed: " +
                  std::string(text, size_t(len)));
}

int mpiCount(int64_t n, int rank, const char *what) {
  if (n > INT_MAX)
    throw CommError("rank " + std::to_string(rank) + ": " + what + " of " + std::to_string(n) +
                    " elements exceeds MPI's count limit of " + std::to_string(INT_MAX) +
                    " per call (split the bucket)");
  return int(n);
}

} // namespace

void initMpi() {
  int initialized = 0, provided = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      throw CommError("MPI_Init_thread failed");
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_FUNNELED)
    throw CommError("the MPI library provides thread level " + std::to_string(provided) +
                    ", dsrt needs MPI_THREAD_FUNNELED");
}

bool mpiActive() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

void finalizeMpi() {
  if (mpiActive())
    MPI_Finalize();
}

void abortAll(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (mpiActive())
    MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

MpiCommunicator::MpiCommunicator(double timeoutSeconds)
    : Communicator(timeoutSeconds), impl_(std::make_unique<Impl>()) {
  initMpi();
  int world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world);
  check(MPI_Comm_dup(MPI_COMM_WORLD, &impl_->comm), world, "MPI_Comm_dup");
  adopt();
}

MpiCommunicator::MpiCommunicator(double timeoutSeconds, int expectedRank, int expectedSize)
    : MpiCommunicator(timeoutSeconds) {
  if (rank_ != expectedRank || size_ != expectedSize)
    throw CommError("mpirun placed this process as rank " + std::to_string(expectedRank) +
                    " of " + std::to_string(expectedSize) + ", but MPI's world says rank " +
                    std::to_string(rank_) + " of " + std::to_string(size_) +
                    " (is dsrt linked against the MPI library of this mpirun?)");
}

MpiCommunicator::MpiCommunicator(double timeoutSeconds, Adopt, void *comm)
    : Communicator(timeoutSeconds), impl_(std::make_unique<Impl>()) {
  impl_->comm = *static_cast<MPI_Comm *>(comm);
  adopt();
}

void MpiCommunicator::adopt() {
  MPI_Comm_rank(impl_->comm, &rank_);
  MPI_Comm_size(impl_->comm, &size_);
  MPI_Comm_set_errhandler(impl_->comm, MPI_ERRORS_RETURN);
  // Errors name world ranks.
  MPI_Group group, world;
  MPI_Comm_group(impl_->comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> ranks(size_t(size_), 0);
  for (int r = 0; r < size_; ++r)
    ranks[size_t(r)] = r;
  worldRanks_.assign(size_t(size_), 0);
  MPI_Group_translate_ranks(group, size_, ranks.data(), world, worldRanks_.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  check(MPI_Comm_dup(impl_->comm, &impl_->p2p), worldRankOf(rank_), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(impl_->p2p, MPI_ERRORS_RETURN);
  check(MPI_Comm_dup(impl_->comm, &impl_->health), worldRankOf(rank_), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(impl_->health, MPI_ERRORS_RETURN);
  allocateStaging(0);
}

MpiCommunicator::~MpiCommunicator() {
  if (!mpiActive())
    return;
  if (impl_->p2p != MPI_COMM_NULL)
    MPI_Comm_free(&impl_->p2p);
  if (impl_->health != MPI_COMM_NULL)
    MPI_Comm_free(&impl_->health);
  if (impl_->comm != MPI_COMM_NULL)
    MPI_Comm_free(&impl_->comm);
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  if (pending())
    throw CommError(prefix() + "split while " + std::to_string(pending()) +
                    " collectives are pending");
  MPI_Comm comm = MPI_COMM_NULL;
  check(MPI_Comm_split(impl_->comm, color, key, &comm), worldRankOf(rank_), "MPI_Comm_split");
  return std::unique_ptr<Communicator>(
      new MpiCommunicator(timeoutSeconds(), Adopt{}, &comm));
}

int64_t MpiCommunicator::stagingElements(Kind kind, const TensorArg *ts, size_t k) const {
  return staging::collectiveStagingBytes(
             kind, size_, k, [&](size_t j) { return ts[j].n; },
             [&](size_t j) { return kind == Kind::AllGather ? gatheredOf(ts[j], size_) : ts[j].n; },
             [&](size_t j) { return int64_t(ts[j].elementBytes()); }) /
         int64_t(sizeof(float));
}

namespace {

void combine(float *into, const float *from, int64_t n, ReduceOp op);

/// into = into (op) from, for 16-bit elements: added in float, rounded.
void combine16(void *into, const void *from, int64_t n, ReduceOp op, Elem t) {
  for (int64_t i = 0; i < n; ++i) {
    float a = load(into, i, t), b = load(from, i, t);
    float r = op == ReduceOp::Max ? std::max(a, b) : op == ReduceOp::Min ? std::min(a, b) : a + b;
    store(into, i, t, r);
  }
}

void combine(float *into, const float *from, int64_t n, ReduceOp op) {
  switch (op) {
  case ReduceOp::Max:
    for (int64_t i = 0; i < n; ++i)
      into[i] = std::max(into[i], from[i]);
    return;
  case ReduceOp::Min:
    for (int64_t i = 0; i < n; ++i)
      into[i] = std::min(into[i], from[i]);
    return;
  default:
    for (int64_t i = 0; i < n; ++i)
      into[i] += from[i];
  }
}

int mod(int a, int n) { return ((a % n) + n) % n; }

} // namespace

void MpiCommunicator::postRingStep(int slot) {
  Ring &g = impl_->rings[slot];
  const int S = size_, r = rank_, s = g.step;
  int next = mod(r + 1, S), prev = mod(r - 1, S);
  // Reduce-scatter step s: send block r-s-1, receive block r-s-2 and add it
  // in; after size-1 steps rank r holds block r reduced. All-gather step s:
  // send block r-s, receive block r-s-1 in place.
  int sendIdx = g.gathering ? mod(r - s, S) : mod(r - s - 1, S);
  int recvIdx = g.gathering ? mod(r - s - 1, S) : mod(r - s - 2, S);
  int n = mpiCount(g.block, worldRankOf(rank_), "ring block");
  size_t blockBytes = size_t(g.block) * g.bytes();
  char *into = g.gathering ? g.blocks + size_t(recvIdx) * blockBytes : g.recv;
  MPI_Datatype type = g.type == Elem::F32 ? MPI_FLOAT : MPI_UINT16_T;
  check(MPI_Irecv(into, n, type, prev, g.tag, impl_->comm, &g.req[0]), worldRankOf(rank_), "MPI_Irecv");
  check(MPI_Isend(g.blocks + size_t(sendIdx) * blockBytes, n, type, next, g.tag, impl_->comm,
                  &g.req[1]),
        worldRankOf(rank_), "MPI_Isend");
}

bool MpiCommunicator::advanceRing(int slot) {
  Ring &g = impl_->rings[slot];
  while (!g.done) {
    int flag = 0;
    check(MPI_Testall(2, g.req, &flag, MPI_STATUSES_IGNORE), worldRankOf(rank_), "MPI_Testall");
    if (!flag)
      return false;
    if (!g.gathering) {
      char *into = g.blocks + size_t(mod(rank_ - g.step - 2, size_)) * size_t(g.block) * g.bytes();
      if (g.type == Elem::F32)
        combine(reinterpret_cast<float *>(into), reinterpret_cast<const float *>(g.recv), g.block,
                g.op);
      else
        combine16(into, g.recv, g.block, g.op, g.type);
    }
    if (++g.step == size_ - 1) {
      g.step = 0;
      if (g.gather && !g.gathering) {
        g.gathering = true;
      } else {
        g.done = true;
        break;
      }
    }
    postRingStep(slot);
  }
  return true;
}

void MpiCommunicator::startRing(int slot, char *blocks, int64_t block, bool gather, ReduceOp op,
                                Elem type) {
  Ring &g = impl_->rings[slot];
  g = Ring();
  g.type = type;
  g.blocks = blocks;
  g.recv = blocks + size_t(size_) * size_t(block) * g.bytes();
  g.block = block;
  g.gather = gather;
  g.op = op;
  g.tag = impl_->nextTag;
  impl_->nextTag = (impl_->nextTag + 1) % 32768;
  g.done = size_ == 1 || block == 0;
  if (!g.done)
    postRingStep(slot);
}

void MpiCommunicator::allocateStaging(int64_t elements) {
  impl_->requests.assign(size_t(reservation().maxPending), MPI_REQUEST_NULL);
  impl_->modes.assign(size_t(reservation().maxPending), Mode::Direct);
  impl_->rings.assign(size_t(reservation().maxPending), Ring());
  impl_->messages.assign(size_t(reservation().maxPending), Message());
  if (elements != impl_->stagingElements) {
    impl_->staging.reset(elements ? new float[size_t(elements)] : nullptr);
    impl_->stagingElements = elements;
  }
}

void MpiCommunicator::startCollective(int slot) {
  const Pending &p = pendingAt(slot);
  const TensorArg *ts = tensors(slot);
  const size_t k = p.k;
  MPI_Request *req = &impl_->requests[slot];
  Mode &mode = impl_->modes[slot];
  MPI_Comm comm = impl_->comm;
  float *stage = (p.external ? p.external : impl_->staging.get() + p.staging.offset);
  const int64_t S = size_;

  switch (p.kind) {
  case Kind::AllReduce: {
    // Packed and zero-padded to size blocks, reduced by the ring (zero
    // bits are +0 in every element type).
    const Elem type = ts[0].type;
    const size_t eb = bytesOf(type);
    char *bytes = reinterpret_cast<char *>(stage);
    int64_t off = 0;
    for (size_t j = 0; j < k; off += ts[j].n, ++j)
      std::memcpy(bytes + size_t(off) * eb, ts[j].in, size_t(ts[j].n) * eb);
    int64_t block = chunkOf(off, S);
    std::memset(bytes + size_t(off) * eb, 0, size_t(S * block - off) * eb);
    mode = Mode::Ring;
    startRing(slot, bytes, block, /*gather=*/true, p.op, type);
    return;
  }
  case Kind::ReduceScatter: {
    // [rank 0: t1 c0, t2 c0, ...][rank 1: t1 c1, t2 c1, ...] ..., each
    // chunk zero-padded to ceil(n / S); the ring leaves this rank's
    // block reduced.
    const Elem type = ts[0].type;
    const size_t eb = bytesOf(type);
    int64_t block = 0;
    for (size_t j = 0; j < k; ++j)
      block += chunkOf(ts[j].n, S);
    char *bytes = reinterpret_cast<char *>(stage);
    for (int64_t r = 0; r < S; ++r) {
      char *dst = bytes + size_t(r * block) * eb;
      for (size_t j = 0; j < k; ++j) {
        int64_t c = chunkOf(ts[j].n, S);
        int64_t have = std::max<int64_t>(0, std::min(c, ts[j].n - r * c));
        if (have)
          std::memcpy(dst, reinterpret_cast<const char *>(ts[j].in) + size_t(r * c) * eb,
                      size_t(have) * eb);
        std::memset(dst + size_t(have) * eb, 0, size_t(c - have) * eb);
        dst += size_t(c) * eb;
      }
    }
    mode = Mode::Ring;
    startRing(slot, bytes, block, /*gather=*/false, p.op, type);
    return;
  }
  case Kind::AllToAll: {
    // Bytes are moved: a lone tensor goes from `in` to `out` (in place when
    // they are the same bytes) in units of its element; a bucket is
    // packed into the staging's send blocks [to rank 0: t1 chunk 0, t2
    // chunk 0, ...][to rank 1: ...] and received into the blocks after them.
    const char *call = "MPI_Ialltoall";
    if (k == 1) {
      const TensorArg &t = ts[0];
      size_t eb = size_t(t.elementBytes());
      MPI_Datatype type = unitType(int64_t(eb));
      int c = mpiCount(t.n / S, worldRankOf(rank_), "all_to_all chunk");
      mode = Mode::Direct;
      if (static_cast<const void *>(t.in) == static_cast<const void *>(t.out)) {
        check(MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, t.out, c, type, comm, req), rank_,
              call);
        return;
      }
      if (overlaps(t.in, t.n * int64_t(eb), t.out, t.n * int64_t(eb)))
        throw CommError(prefix() + "all_to_all: the input and output overlap without being the "
                                   "same bytes");
      check(MPI_Ialltoall(t.in, c, type, t.out, c, type, comm, req), rank_, call);
      return;
    }
    int64_t blockBytes = 0, unit = 4; // the narrowest element moves the bucket
    for (size_t j = 0; j < k; ++j) {
      blockBytes += ts[j].n / S * ts[j].elementBytes();
      unit = std::min<int64_t>(unit, ts[j].elementBytes());
    }
    char *send = reinterpret_cast<char *>(stage);
    for (int64_t r = 0; r < S; ++r) {
      char *dst = send + r * blockBytes;
      for (size_t j = 0; j < k; ++j) {
        size_t bytes = size_t(ts[j].n / S) * size_t(ts[j].elementBytes());
        std::memcpy(dst, reinterpret_cast<const char *>(ts[j].in) + size_t(r) * bytes, bytes);
        dst += bytes;
      }
    }
    int count = mpiCount(blockBytes / unit, worldRankOf(rank_), "all_to_all block");
    MPI_Datatype type = unitType(unit);
    mode = Mode::Staged;
    check(MPI_Ialltoall(send, count, type, send + S * blockBytes, count, type, comm, req), rank_,
          call);
    return;
  }
  case Kind::AllGather: {
    // Bytes are moved, never added: 2-byte (bf16/fp16) tensors travel as
    // 16-bit units and raw bytes (U8) as bytes; a bucket is packed in units
    // of its narrowest element.
    const char *call = "MPI_Iallgather";
    if (k == 1 && gatheredOf(ts[0], S) == ts[0].n * S) { // no padding to drop
      const TensorArg &t = ts[0];
      size_t eb = size_t(t.elementBytes());
      MPI_Datatype type = unitType(int64_t(eb));
      int n = mpiCount(t.n, worldRankOf(rank_), "all_gather input");
      mpiCount(t.n * S, worldRankOf(rank_), "all_gather");
      char *out = reinterpret_cast<char *>(t.out);
      const char *in = reinterpret_cast<const char *>(t.in);
      char *mine = out + size_t(rank_) * size_t(t.n) * eb;
      mode = Mode::Direct;
      if (in != mine && !overlaps(t.in, t.n * int64_t(eb), t.out, t.n * S * int64_t(eb))) {
        check(MPI_Iallgather(t.in, n, type, t.out, n, type, comm, req), rank_, call);
        return;
      }
      if (in != mine)
        std::memmove(mine, in, size_t(t.n) * eb);
      check(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, t.out, n, type, comm, req), rank_,
            call);
      return;
    }
    int64_t blockBytes = 0, unit = 4; // the narrowest element moves the bucket
    for (size_t j = 0; j < k; ++j) {
      blockBytes += ts[j].n * ts[j].elementBytes();
      unit = std::min<int64_t>(unit, ts[j].elementBytes());
    }
    char *dst = reinterpret_cast<char *>(stage) + rank_ * blockBytes;
    for (size_t j = 0; j < k; ++j) {
      size_t bytes = size_t(ts[j].n) * size_t(ts[j].elementBytes());
      std::memcpy(dst, ts[j].in, bytes);
      dst += bytes;
    }
    mode = Mode::Staged;
    mpiCount(blockBytes / unit * S, worldRankOf(rank_), "all_gather");
    check(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, stage,
                         mpiCount(blockBytes / unit, worldRankOf(rank_), "all_gather input"),
                         unitType(unit), comm, req),
          rank_, call);
    return;
  }
  }
}

void MpiCommunicator::startMessage(int slot) {
  const Pending &p = pendingAt(slot);
  Message &m = impl_->messages[slot];
  int n = mpiCount(int64_t(p.bytes), worldRankOf(rank_), p.p2p == P2p::Send ? "send" : "recv");
  m = Message();
  m.done = false;
  if (p.p2p == P2p::Send)
    check(MPI_Isend(p.buffer, n, MPI_BYTE, p.peer, p.tag, impl_->p2p, &m.req), worldRankOf(rank_),
          "MPI_Isend");
  else
    check(MPI_Irecv(p.buffer, n, MPI_BYTE, p.peer, p.tag, impl_->p2p, &m.req), worldRankOf(rank_),
          "MPI_Irecv");
  impl_->modes[slot] = Mode::Message;
}

bool MpiCommunicator::testMessage(int slot) {
  Message &m = impl_->messages[slot];
  if (m.done)
    return true;
  int flag = 0;
  MPI_Status status;
  int rc = MPI_Test(&m.req, &flag, &status);
  if (rc != MPI_SUCCESS) {
    // A receive of a longer message fails here (MPI_ERR_TRUNCATE); the wait
    // reports it as a size mismatch.
    m.done = true;
    m.error = rc;
    m.req = MPI_REQUEST_NULL;
    return true;
  }
  if (!flag)
    return false;
  m.done = true;
  if (pendingAt(slot).p2p == P2p::Recv) {
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    m.received = count;
  }
  return true;
}

bool MpiCommunicator::testCollective(int slot) {
  if (impl_->modes[slot] == Mode::Message)
    return testMessage(slot);
  if (impl_->modes[slot] == Mode::Ring)
    return advanceRing(slot);
  int flag = 0;
  check(MPI_Test(&impl_->requests[slot], &flag, MPI_STATUS_IGNORE), worldRankOf(rank_), "MPI_Test");
  return flag != 0;
}

void MpiCommunicator::progress() {
  for (size_t slot = 0; slot < impl_->rings.size(); ++slot) {
    if (impl_->modes[slot] == Mode::Ring && !impl_->rings[slot].done)
      advanceRing(int(slot));
    else if (impl_->modes[slot] == Mode::Message && !impl_->messages[slot].done)
      testMessage(int(slot));
  }
  int flag = 0;
  check(MPI_Testall(int(impl_->requests.size()), impl_->requests.data(), &flag,
                    MPI_STATUSES_IGNORE),
        worldRankOf(rank_), "MPI_Testall");
}

void MpiCommunicator::finishCollective(int slot) {
  const Pending &p = pendingAt(slot);
  const TensorArg *ts = tensors(slot);
  const size_t k = p.k;
  const float s = p.op == ReduceOp::Avg ? 1.0f / float(size_) : 1.0f;
  const float *stage = (p.external ? p.external : impl_->staging.get() + p.staging.offset);
  const int64_t S = size_;

  switch (impl_->modes[slot]) {
  case Mode::Message: {
    const Message &m = impl_->messages[slot];
    if (p.p2p == P2p::Recv && (m.error != MPI_SUCCESS || m.received != int64_t(p.bytes))) {
      std::string got = m.error == MPI_ERR_TRUNCATE ? "a longer message"
                        : m.error != MPI_SUCCESS    ? "an error"
                                                    : std::to_string(m.received) + " bytes";
      if (m.error != MPI_SUCCESS && m.error != MPI_ERR_TRUNCATE) {
        char text[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(m.error, text, &len);
        got += " (" + std::string(text, size_t(len)) + ")";
      }
      throw CommError(prefix() + describe(slot) + ": received " + got +
                      ": the sender's message has another size (the stages' plans disagree)");
    }
    if (p.p2p == P2p::Send && m.error != MPI_SUCCESS) {
      char text[MPI_MAX_ERROR_STRING];
      int len = 0;
      MPI_Error_string(m.error, text, &len);
      throw CommError(prefix() + describe(slot) + " failed: " + std::string(text, size_t(len)));
    }
    return;
  }
  case Mode::Direct:
    if (s != 1.0f)
      for (size_t j = 0; j < k; ++j)
        scale(ts[j].out, ts[j].n, s);
    return;
  case Mode::Ring: {
    const Elem type = ts[0].type;
    const size_t eb = bytesOf(type);
    const char *bytes = reinterpret_cast<const char *>(stage);
    if (p.kind == Kind::AllReduce) {
      for (size_t j = 0; j < k; bytes += size_t(ts[j].n) * eb, ++j)
        copyScaled(ts[j].out, bytes, ts[j].n, s, type);
    } else { // reduce_scatter: this rank's block
      int64_t block = impl_->rings[slot].block;
      const char *mine = bytes + size_t(rank_ * block) * eb;
      for (size_t j = 0; j < k; mine += size_t(chunkOf(ts[j].n, S)) * eb, ++j)
        copyScaled(ts[j].out, mine, chunkOf(ts[j].n, S), s, type);
    }
    return;
  }
  case Mode::Staged:
    if (p.kind == Kind::AllToAll) {
      // The received blocks, after the sent ones: block r holds every
      // tensor's chunk from rank r.
      int64_t blockBytes = 0;
      for (size_t j = 0; j < k; ++j)
        blockBytes += ts[j].n / S * ts[j].elementBytes();
      const char *recv = reinterpret_cast<const char *>(stage) + S * blockBytes;
      for (int64_t r = 0; r < S; ++r) {
        const char *src = recv + r * blockBytes;
        for (size_t j = 0; j < k; ++j) {
          size_t bytes = size_t(ts[j].n / S) * size_t(ts[j].elementBytes());
          std::memcpy(reinterpret_cast<char *>(ts[j].out) + size_t(r) * bytes, src, bytes);
          src += bytes;
        }
      }
      return;
    }
    break; // all_gather's packed blocks
  }
  {
    int64_t blockBytes = 0;
    for (size_t j = 0; j < k; ++j)
      blockBytes += ts[j].n * ts[j].elementBytes();
    for (int64_t r = 0; r < S; ++r) {
      const char *src = reinterpret_cast<const char *>(stage) + r * blockBytes;
      for (size_t j = 0; j < k; ++j) {
        size_t eb = size_t(ts[j].elementBytes());
        // Drop the padding past the gathered tensor's end.
        int64_t have = std::max<int64_t>(0, std::min(ts[j].n, gatheredOf(ts[j], S) - r * ts[j].n));
        if (have)
          std::memcpy(reinterpret_cast<char *>(ts[j].out) + size_t(r * ts[j].n) * eb, src,
                      size_t(have) * eb);
        src += size_t(ts[j].n) * eb;
      }
    }
  }
}

double MpiCommunicator::blockingAllReduceScalar(double value, ReduceOp op) {
  double v = value;
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Iallreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, mpiOp(op), impl_->comm, &req), rank_,
        "MPI_Iallreduce");
  bool done = pollUntil([&] {
    int flag = 0;
    check(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), worldRankOf(rank_), "MPI_Test");
    return flag != 0;
  });
  if (!done) {
    std::string what = "all_reduce of one value (the step's metrics)";
    throw CommError(timeoutMessage(what, timeoutSeconds()) + missingRanks(what));
  }
  return op == ReduceOp::Avg ? v / size_ : v;
}

std::vector<std::string> MpiCommunicator::blockingAllGatherText(const std::string &mine) {
  const std::string what = "all_gather of " + std::to_string(mine.size()) + " bytes of text";
  auto finish = [&](MPI_Request &req) {
    bool done = pollUntil([&] {
      int flag = 0;
      check(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), worldRankOf(rank_), "MPI_Test");
      return flag != 0;
    });
    if (!done)
      throw CommError(timeoutMessage(what, timeoutSeconds()) + missingRanks(what));
  };
  if (mine.size() > size_t(std::numeric_limits<int>::max()))
    throw CommError(prefix() + what + ": more than 2 GiB");
  int n = int(mine.size());
  std::vector<int> counts(static_cast<size_t>(size_)), offsets(static_cast<size_t>(size_));
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Iallgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, impl_->comm, &req), rank_,
        "MPI_Iallgather");
  finish(req);
  int64_t total = 0;
  for (int r = 0; r < size_; ++r) {
    if (total + counts[size_t(r)] > std::numeric_limits<int>::max())
      throw CommError(prefix() + what + ": the ranks' texts exceed 2 GiB");
    offsets[size_t(r)] = int(total);
    total += counts[size_t(r)];
  }
  std::string all(size_t(total), '\0');
  check(MPI_Iallgatherv(mine.data(), n, MPI_CHAR, all.data(), counts.data(), offsets.data(),
                        MPI_CHAR, impl_->comm, &req),
        rank_, "MPI_Iallgatherv");
  finish(req);
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r)
    out.push_back(all.substr(size_t(offsets[size_t(r)]), size_t(counts[size_t(r)])));
  return out;
}

void MpiCommunicator::barrier() {
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Ibarrier(impl_->comm, &req), worldRankOf(rank_), "MPI_Ibarrier");
  bool done = pollUntil([&] {
    int flag = 0;
    check(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), worldRankOf(rank_), "MPI_Test");
    return flag != 0;
  });
  if (!done)
    throw CommError(timeoutMessage("barrier", timeoutSeconds()) + missingRanks("barrier"));
}

std::string MpiCommunicator::missingRanks(const std::string &what) {
  // The other survivors time out within about the spread of their arrival
  // times: listen that long, but not for ever.
  const double window = std::min(30.0, std::max(2.0, timeoutSeconds() / 2));
  constexpr int kText = 160, kTag = 7;
  struct Slot {
    char text[kText] = {};
    MPI_Request recv = MPI_REQUEST_NULL, send = MPI_REQUEST_NULL;
    bool answered = false;
  };
  std::vector<Slot> peers(static_cast<size_t>(size_));
  char mine[kText] = {};
  std::snprintf(mine, sizeof mine, "%s", what.c_str());
  for (int r = 0; r < size_; ++r) {
    if (r == rank_)
      continue;
    Slot &s = peers[size_t(r)];
    if (MPI_Irecv(s.text, kText, MPI_CHAR, r, kTag, impl_->health, &s.recv) != MPI_SUCCESS ||
        MPI_Isend(mine, kText, MPI_CHAR, r, kTag, impl_->health, &s.send) != MPI_SUCCESS)
      return ""; // nothing to tell
  }
  auto start = std::chrono::steady_clock::now();
  for (unsigned spin = 0; elapsedSince(start) < window; ++spin) {
    bool all = true;
    for (int r = 0; r < size_; ++r) {
      Slot &s = peers[size_t(r)];
      if (r == rank_ || s.answered)
        continue;
      int flag = 0;
      if (MPI_Test(&s.recv, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag)
        s.answered = true;
      all = all && s.answered;
    }
    if (all)
      break;
    pause(spin);
  }
  // The job is aborted next: the requests still open are left to it.
  std::string silent, waiting;
  int nSilent = 0;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_)
      continue;
    const Slot &s = peers[size_t(r)];
    std::string who = std::to_string(worldRankOf(r));
    if (!s.answered) {
      silent += (nSilent++ ? ", " : "") + who;
    } else if (std::string(s.text, strnlen(s.text, kText)) != what) {
      waiting += "; rank " + who + " waits in " + std::string(s.text, strnlen(s.text, kText));
    }
  }
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.3g", window);
  if (nSilent)
    return std::string("; rank") + (nSilent > 1 ? "s " : " ") + silent +
           (nSilent > 1 ? " did" : " did") + " not arrive (no answer within " + secs +
           " s: stalled, frozen or dead)" + waiting;
  return "; every rank of the group answered" +
         (waiting.empty() ? std::string(" and waits in the same operation") : waiting);
}

} // namespace dsrt::comm
