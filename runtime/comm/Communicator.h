//===- Communicator.h - collectives and messages of a rank group -*- C++ -*-===//
//
// The interface the executor runs `dist.*` instructions through. A
// collective works on k tensors at once (a fused bucket; float32, bf16 or
// fp16 elements, TensorArg::type) and is
// non-blocking: allReduce / reduceScatter / allGather / allToAll start it
// and return a
// Handle, wait(Handle) completes it. Until then its inputs must not be
// written nor its outputs read. progress() lets pending collectives advance
// while kernels run.
//
// Point-to-point messages (pipeline stages) use the same handles: send /
// recv start one (bytes, any dtype), wait completes it; a receive whose
// message has another size is a CommError at the wait. Messages between two
// ranks with the same tag arrive in the order they were sent.
//
// A communicator of the whole world splits into groups (split(color, key),
// MPI_Comm_split's semantics): the executor of a pipeline plan runs the
// data-parallel group of its stage and the pipeline group of its
// data-parallel index. Errors name world ranks.
//
// Every wait is bounded by timeoutSeconds(): a collective that does not
// complete in time (a rank died, or the ranks issue different collectives)
// throws CommError naming this rank, the operation, the instruction, the
// element count and the seconds waited; the caller reports it and aborts
// every rank. The collective then stays pending (waiting again may complete
// it).
//
// Staging memory and bookkeeping are allocated by reserve(), once, before
// the step loop; starting or completing a collective never allocates.
//
// The counters count per kind, in the units of the ZeRO paper: an
// all_reduce of n elements moves 2n, a reduce_scatter counts its (full)
// input, an all_gather its (full) output, an all_to_all its input (of
// which (size - 1) / size leaves the rank). Point-to-point sends count
// separately (Counters::p2p: messages and their bytes / 4). Backends: MpiCommunicator (CPU
// ranks), NcclCommunicator (device pointers), SelfCommunicator (one rank).
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_COMM_COMMUNICATOR_H
#define DSRT_COMM_COMMUNICATOR_H

#include "io/DType.h"
#include "plan/Staging.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace dsrt::comm {

/// The collectives (the plan format's names, plan/Staging.h).
using Kind = staging::Collective;
constexpr int kNumKinds = staging::kNumCollectives;
using staging::chunkOf;

/// A collective that failed or timed out, or a misuse of the API.
class CommError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

enum class ReduceOp { Sum = 0, Avg = 1, Max = 2, Min = 3 };

/// "all_reduce", "reduce_scatter", "all_gather", "all_to_all".
const char *kindName(Kind kind);
/// "sum", "avg", "max", "min".
const char *reduceOpName(ReduceOp op);

/// One tensor of a bucketed collective. `n` is the element count of `in`.
/// `out` has n elements (all_reduce); c = ceil(n / size()) elements
/// (reduce_scatter: chunk `rank` of `in` zero-padded to size() chunks); or
/// `outN` elements (all_gather: every rank's chunk of c = n elements in rank
/// order, the padding beyond outN dropped; outN = 0 means n * size()).
/// Elements are float32, or bf16 / fp16 (mixed precision: the parameter
/// copies ZeRO gathers, gradients reduced in communication_data_type),
/// whose `in` / `out` then address 16-bit elements. A reduction's tensors
/// share one type and are added in float, each partial sum rounded to the
/// type (as NCCL does); an all_gather or all_to_all moves bytes and may mix
/// types, U8 among them (raw bytes: the 1-bit optimizers' packed signs,
/// which nothing adds). The element type is runtime/io's DType (F32, BF16,
/// F16 or U8 here), the one
/// vocabulary of element types outside the plan format.
using Elem = io::DType;
struct TensorArg {
  const float *in = nullptr;
  float *out = nullptr;
  int64_t n = 0;
  int64_t outN = 0;
  Elem type = Elem::F32;
  int elementBytes() const { return type == Elem::F32 ? 4 : type == Elem::U8 ? 1 : 2; }
};

/// The output elements of an all_gather of `t` over `size` ranks.
inline int64_t gatheredOf(const TensorArg &t, int64_t size) {
  return t.outN ? t.outN : t.n * size;
}

/// A started collective. Default-constructed: none.
struct Handle {
  int32_t slot = -1;
  uint32_t generation = 0;
  bool valid() const { return slot >= 0; }
};

struct KindCounter {
  int64_t calls = 0;
  int64_t elements = 0;
  int64_t bytes = 0; // the elements in their types' bytes (U8 1, 16-bit 2, F32 4)
};

/// DeepSpeed's comms_logger: each completed collective and message, from
/// its start to the end of its wait (so it includes the time it overlapped
/// with kernels), by record name ("all_reduce", ..., "send", "recv"; with
/// debug, the instruction after " | "), group size and message bytes S
/// (NCCL-tests' S: an all_reduce's tensor, a reduce_scatter's input, an
/// all_gather's output, an all_to_all's input, a message's bytes).
struct OpRecord {
  int64_t count = 0;
  double totalMs = 0, minMs = 0, maxMs = 0;
};
struct OpKey {
  std::string name;
  int groupSize = 1;
  int64_t bytes = 0;
  bool operator<(const OpKey &o) const {
    return name != o.name ? name < o.name
           : groupSize != o.groupSize ? groupSize < o.groupSize
                                      : bytes < o.bytes;
  }
};
using OpLog = std::map<OpKey, OpRecord>;
/// What a comms_logger records: which kinds (bit k: Kind k; bits
/// kNumKinds and kNumKinds + 1: send and recv), each op printed as it
/// completes (`verbose`), the instruction in the name (`debug`).
struct OpLogOptions {
  uint32_t kinds = ~0u;
  bool verbose = false;
  bool debug = false;
};

/// Algorithm and bus bandwidth in Gbit/s of a record's op taking `ms`:
/// algbw = S / t; busbw = algbw x 2(n-1)/n (all_reduce), (n-1)/n
/// (all_gather, reduce_scatter, all_to_all) or 1 (messages).
struct BusBandwidth {
  double algbw = 0, busbw = 0;
};
BusBandwidth busBandwidth(const OpKey &key, double ms);
/// DeepSpeed's convert_size: "1.50 MB" (powers of 1024).
std::string byteSize(int64_t bytes);

/// Collectives started since the last resetCounters(), by kind, and the
/// point-to-point messages sent (calls: messages; elements: bytes / 4).
struct Counters {
  KindCounter kind[kNumKinds];
  KindCounter p2p;

  const KindCounter &operator[](Kind k) const { return kind[int(k)]; }
  /// Collectives only (p2p not included).
  int64_t calls() const;
  int64_t elements() const;
  int64_t bytes() const;
  /// Adds another communicator's counts.
  Counters &operator+=(const Counters &other);
  /// "reduce_scatter 1 call 4096 elements, all_gather 1 call 4096 elements"
  /// then "p2p 4 calls 512 elements" (kinds with calls only; "none" if
  /// there were none).
  std::string summary() const;
};

/// What reserve() sizes: the staging elements the largest set of
/// simultaneously pending collectives needs (see stagingElements and
/// firstFitOffset), how many may be pending at once, and the most tensors
/// in one collective.
struct Reservation {
  int64_t stagingElements = 0;
  int maxPending = 1;
  int maxTensors = 1;
};

/// A live staging range [offset, offset + length).
struct StagingRange {
  int64_t offset = 0;
  int64_t length = 0;
};

/// The lowest offset at which `length` elements fit between the `live`
/// ranges (first fit; capacity unbounded). The backends place staging with
/// it, and the executor replays a plan's starts and waits through it at load
/// time to size the reservation exactly.
int64_t firstFitOffset(const StagingRange *live, size_t count, int64_t length);

class Communicator {
public:
  virtual ~Communicator();

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "mpi", "nccl", "self".
  virtual const char *backend() const = 0;
  /// The world rank of this communicator's rank `r` (the same number for
  /// a communicator of the whole world). Errors name world ranks.
  int worldRankOf(int r) const {
    return r >= 0 && size_t(r) < worldRanks_.size() ? worldRanks_[size_t(r)] : r;
  }

  /// The communicator of the ranks that give the same `color`, ordered by
  /// `key` (ties by rank), like MPI_Comm_split. Every rank of this
  /// communicator must call it, with nothing pending. The new communicator
  /// has this one's timeout and the default reservation. Throws CommError.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  /// Staging elements one collective of `kind` on the tensors `ts` (only
  /// their sizes are read) needs with this backend; 0 when it needs none.
  virtual int64_t stagingElements(Kind kind, const TensorArg *ts, size_t k) const = 0;

  /// Allocates staging and bookkeeping. Only while nothing is pending.
  /// Throws CommError.
  void reserve(const Reservation &r);
  const Reservation &reservation() const { return reserved_; }

  /// Start a collective on k tensors. `what` names it in errors (for
  /// example "instruction 57 of the epilogue"); it must stay valid until
  /// the wait. Throw CommError on misuse (k = 0, more tensors or pending
  /// collectives than reserved, a size not divisible by size()).
  /// `staging`, when given, is where a bucket is packed (at least
  /// stagingElements() floats, untouched until the wait: dsc plans it in
  /// the arena); otherwise the reserved staging is used.
  Handle allReduce(const TensorArg *ts, size_t k, ReduceOp op, const char *what = nullptr,
                   float *staging = nullptr);
  Handle reduceScatter(const TensorArg *ts, size_t k, ReduceOp op, const char *what = nullptr,
                       float *staging = nullptr);
  Handle allGather(const TensorArg *ts, size_t k, const char *what = nullptr,
                   float *staging = nullptr);
  /// Each tensor's n elements are size() equal chunks (n divisible by
  /// size()); chunk r goes to rank r, and the result's chunk r came from
  /// rank r. Bytes are moved, never added (tensors may mix element types).
  Handle allToAll(const TensorArg *ts, size_t k, const char *what = nullptr,
                  float *staging = nullptr);
  Handle allReduce(const std::vector<TensorArg> &ts, ReduceOp op, const char *what = nullptr) {
    return allReduce(ts.data(), ts.size(), op, what);
  }
  Handle reduceScatter(const std::vector<TensorArg> &ts, ReduceOp op,
                       const char *what = nullptr) {
    return reduceScatter(ts.data(), ts.size(), op, what);
  }
  Handle allGather(const std::vector<TensorArg> &ts, const char *what = nullptr) {
    return allGather(ts.data(), ts.size(), what);
  }

  /// Tags of point-to-point messages: [0, kMaxTag] (MPI's guaranteed range).
  static constexpr int kMaxTag = 32767;
  /// Starts sending `bytes` bytes at `data` to rank `peer` of this
  /// communicator with `tag`; the bytes must stay unchanged until the wait.
  /// Takes one pending slot of the reservation (no staging, no tensors).
  /// Throws CommError (peer or tag out of range, no free slot, a backend
  /// without messages).
  Handle send(const void *data, size_t bytes, int peer, int tag, const char *what = nullptr);
  /// Starts receiving exactly `bytes` bytes from rank `peer` with `tag` into
  /// `data`. The wait throws CommError if the message has another size.
  Handle recv(void *data, size_t bytes, int peer, int tag, const char *what = nullptr);

  /// Completes the collective (Avg: the sum scaled by 1 / size()). Throws
  /// CommError after timeoutSeconds() or on a failure.
  void wait(Handle h);
  /// Lets pending collectives advance (call it between kernels).
  virtual void progress() = 0;
  /// Collectives started and not yet waited for.
  int pending() const { return pendingCount_; }
  /// While wait() polls, also let `other`'s pending work advance (the
  /// executor links its data-parallel, pipeline and tensor-parallel groups,
  /// so a rank blocked on one does not stall a ring or a message of
  /// another). Each call adds one.
  void progressWhileWaiting(Communicator *other) {
    if (other && other != this &&
        std::find(companions_.begin(), companions_.end(), other) == companions_.end())
      companions_.push_back(other);
  }

  /// A blocking all_reduce of one value for metrics (the loss). Not
  /// counted; bounded by the timeout like wait().
  virtual double blockingAllReduceScalar(double value, ReduceOp op = ReduceOp::Avg) = 0;
  /// Every rank's `mine`, in rank order (blocking, not counted; bounded by
  /// the timeout). For small records (a checkpoint file's index entry).
  /// This default serves one rank; a backend of several overrides it.
  virtual std::vector<std::string> blockingAllGatherText(const std::string &mine);

  double timeoutSeconds() const { return timeoutSeconds_; }
  void setTimeoutSeconds(double seconds) { timeoutSeconds_ = seconds; }

  const Counters &counters() const { return counters_; }
  void resetCounters() { counters_ = Counters(); }
  /// comms_logger: records every collective and message completed from
  /// now on into `log` (nullptr: stop). The first completion of each
  /// record adds its entry (the only allocation while logging).
  void setOpLog(OpLog *log, const OpLogOptions &options = {}) {
    opLog_ = log;
    opLogOptions_ = options;
  }
  /// While false, collectives are not counted (gathering weights to write).
  void setCounting(bool on) { counting_ = on; }
  bool counting() const { return counting_; }

protected:
  /// Point-to-point direction of a pending slot (None: a collective).
  enum class P2p { None, Send, Recv };

  /// What the base class knows about a pending collective or message;
  /// backends keep their request state in arrays indexed by the same slot.
  struct Pending {
    bool active = false;
    uint32_t generation = 0;
    P2p p2p = P2p::None;
    int peer = 0, tag = 0;     // messages: the peer's rank here, the tag
    void *buffer = nullptr;    // messages: the bytes sent or received into
    size_t bytes = 0;
    Kind kind = Kind::AllReduce;
    ReduceOp op = ReduceOp::Sum;
    size_t k = 0;             // tensors, at tensors(slot)
    int64_t elements = 0;     // for messages: input (all_gather: output) elements
    const char *what = nullptr;
    StagingRange staging{0, 0}; // length 0: none
    float *external = nullptr;  // staging given by the caller (planned)
    std::chrono::steady_clock::time_point started{}; // comms_logger
    int64_t logBytes = 0;                            // comms_logger's S
  };

  /// Starts with a reservation of 8 pending collectives of up to 64
  /// tensors and no staging.
  explicit Communicator(double timeoutSeconds);

  /// Backend hooks. startCollective issues the collective of `slot` (its
  /// tensors and staging already recorded); startMessage the send or
  /// receive of `slot` (default: CommError, the backend has none);
  /// testCollective returns true once either has completed (and must not
  /// block); finishCollective unpacks and scales, or checks a received
  /// size (it may throw: the slot is released anyway); abortCollective is
  /// called once when wait times out.
  virtual void startCollective(int slot) = 0;
  virtual void startMessage(int slot);
  virtual bool testCollective(int slot) = 0;
  virtual void finishCollective(int slot) = 0;
  virtual void abortCollective(int slot) { (void)slot; }
  /// Called by reserve() with the new staging size (elements).
  virtual void allocateStaging(int64_t elements) = 0;
  /// After a timeout: which ranks of the group did not arrive, as far as
  /// this rank can tell (" ranks 2, 3 did not answer ..."), or "" when the
  /// backend cannot tell. `what` is what this rank waits in.
  virtual std::string missingRanks(const std::string &what) {
    (void)what;
    return "";
  }

  const Pending &pendingAt(int slot) const { return slots_[slot]; }
  const TensorArg *tensors(int slot) const { return &tensorArgs_[size_t(slot) * reserved_.maxTensors]; }
  /// "all_reduce of 1234 elements (instruction 57 of the epilogue)";
  /// "recv of 64 bytes from rank 1 (tag 3, instruction 5 of the prologue)".
  std::string describe(int slot) const;
  /// "rank W: " with this rank's world rank.
  std::string prefix() const { return "rank " + std::to_string(worldRankOf(rank())) + ": "; }
  /// Polls `done` until it returns true (then true) or the timeout passes
  /// (then false). For the backends' blocking helpers.
  template <typename Done> bool pollUntil(Done &&done) const {
    auto start = std::chrono::steady_clock::now();
    for (unsigned spin = 0;; ++spin) {
      if (done())
        return true;
      if (elapsedSince(start) > timeoutSeconds_)
        return false;
      pause(spin);
    }
  }
  static double elapsedSince(std::chrono::steady_clock::time_point start);
  static void pause(unsigned spin);
  /// The message of a timed-out collective (or message: `p2p`).
  std::string timeoutMessage(const std::string &what, double seconds, bool p2p = false) const;

  /// Group rank -> world rank (split communicators; empty: the identity).
  std::vector<int> worldRanks_;

private:
  Handle start(Kind kind, const TensorArg *ts, size_t k, ReduceOp op, const char *what,
               float *staging);
  Handle startP2p(P2p dir, void *data, size_t bytes, int peer, int tag, const char *what);
  int takeSlot() const;
  Handle activate(int slot);
  void resizeBookkeeping(const Reservation &r);

  void logCompletion(const Pending &p);

  double timeoutSeconds_;
  Counters counters_;
  bool counting_ = true;
  OpLog *opLog_ = nullptr;
  OpLogOptions opLogOptions_;
  Reservation reserved_{0, 0, 0};
  std::vector<Pending> slots_;
  std::vector<TensorArg> tensorArgs_;
  std::vector<int64_t> numelScratch_;  // maxTensors
  std::vector<StagingRange> liveScratch_; // maxPending
  int pendingCount_ = 0;
  std::vector<Communicator *> companions_;
};

/// One rank: every collective is a local copy (for plans with dp <= 1 and
/// for tests); messages are an error (there is no other rank). Host
/// pointers.
class SelfCommunicator : public Communicator {
public:
  explicit SelfCommunicator(double timeoutSeconds = 300) : Communicator(timeoutSeconds) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char *backend() const override { return "self"; }
  std::unique_ptr<Communicator> split(int, int) override {
    return std::make_unique<SelfCommunicator>(timeoutSeconds());
  }
  int64_t stagingElements(Kind, const TensorArg *, size_t) const override { return 0; }
  void progress() override {}
  double blockingAllReduceScalar(double value, ReduceOp) override { return value; }

protected:
  void startCollective(int slot) override;
  bool testCollective(int) override { return true; }
  void finishCollective(int) override {}
  void allocateStaging(int64_t) override {}
};

} // namespace dsrt::comm

#endif // DSRT_COMM_COMMUNICATOR_H
