//===- MpiCommunicator.h - CPU ranks over MPI -------------------*- C++ -*-===//
//
// The Communicator of CPU ranks started by mpirun (Open MPI). MPI runs with
// MPI_THREAD_FUNNELED: every MPI call comes from the main thread (kernels
// use OpenMP threads in between). Collectives run on a duplicate of
// MPI_COMM_WORLD (or, for a split communicator, of MPI_Comm_split's
// result) with MPI_ERRORS_RETURN, so a failed call becomes a CommError and
// other traffic on MPI_COMM_WORLD never matches them. Point-to-point
// messages (MPI_Isend / MPI_Irecv of bytes) run on a second duplicate, so
// their tags never meet the rings' tags.
//
// all_reduce and reduce_scatter, of one tensor or a bucket, are packed into
// the staging bytes dsc planned and run as dsrt's own ring of Isend/Irecv
// steps between neighbours (nothing allocated outside the plan, unlike
// libnbc's non-blocking collectives): all_reduce packs the inputs back to
// back; reduce_scatter packs them interleaved by destination rank ([rank 0:
// t1 c0, t2 c0, ...][rank 1: t1 c1, ...]). all_gather is MPI_Iallgather: a
// bucket packs this rank's inputs into its block of the staging bytes and
// gathers in place; a single unpadded tensor needs no staging (in place
// when the input is the output's own chunk). wait() unpacks (and scales Avg
// by 1 / size()).
//
// mpi.h stays out of this header: callers need not find MPI's includes.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_COMM_MPICOMMUNICATOR_H
#define DSRT_COMM_MPICOMMUNICATOR_H

#include "runtime/comm/Communicator.h"

#include <memory>

namespace dsrt::comm {

class MpiCommunicator : public Communicator {
public:
  /// Initializes MPI if needed (see initMpi) and duplicates MPI_COMM_WORLD.
  /// Throws CommError.
  explicit MpiCommunicator(double timeoutSeconds = 300);
  /// The same, for the rank `expectedRank` of `expectedSize` the launcher
  /// placed (launch::rankEnvironment): throws CommError naming both when
  /// MPI's world disagrees (another MPI library than mpirun's, say).
  MpiCommunicator(double timeoutSeconds, int expectedRank, int expectedSize);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char *backend() const override { return "mpi"; }
  /// MPI_Comm_split of this communicator (blocking, like MPI_Comm_split).
  std::unique_ptr<Communicator> split(int color, int key) override;
  int64_t stagingElements(Kind kind, const TensorArg *ts, size_t k) const override;
  void progress() override;
  double blockingAllReduceScalar(double value, ReduceOp op = ReduceOp::Avg) override;
  std::vector<std::string> blockingAllGatherText(const std::string &mine) override;

  /// A barrier on this communicator, bounded by the timeout (tests).
  void barrier();

protected:
  void startCollective(int slot) override;
  void startMessage(int slot) override;
  bool testCollective(int slot) override;
  void finishCollective(int slot) override;
  void allocateStaging(int64_t elements) override;
  /// Every rank that timed out posts what it waits in to every other rank
  /// on a communicator of its own and listens for theirs for a while: the
  /// ranks that never answer are the ones that stalled (frozen, dead, or
  /// computing outside any collective); the answers show who waits where.
  std::string missingRanks(const std::string &what) override;
  void startRing(int slot, char *blocks, int64_t block, bool gather, ReduceOp op, Elem type);
  void postRingStep(int slot);
  bool advanceRing(int slot);

private:
  struct Impl;
  struct Adopt {};
  /// Takes ownership of `comm` (an MPI_Comm, from MPI_Comm_split).
  MpiCommunicator(double timeoutSeconds, Adopt, void *comm);
  void adopt();
  bool testMessage(int slot);

  std::unique_ptr<Impl> impl_;
  int rank_ = 0, size_ = 1;
};

/// MPI_Init_thread(MPI_THREAD_FUNNELED) unless MPI is already initialized.
/// Throws CommError if the library grants less than FUNNELED.
void initMpi();
/// True between initMpi and finalizeMpi.
bool mpiActive();
/// MPI_Finalize if MPI is active.
void finalizeMpi();
/// MPI_Abort(MPI_COMM_WORLD, code) when MPI is active (every rank exits),
/// std::exit(code) otherwise.
[[noreturn]] void abortAll(int code);

} // namespace dsrt::comm

#endif // DSRT_COMM_MPICOMMUNICATOR_H
