//===- NcclCommunicator.h - GPU ranks over NCCL -----------------*- C++ -*-===//
//
// The Communicator of GPU ranks: the same interface on DEVICE pointers.
// Ranks are the processes of MPI_COMM_WORLD (mpirun); MPI only bootstraps
// (rank 0 creates the ncclUniqueId and broadcasts it). A bucket of k
// tensors is one ncclGroupStart/End of k calls on this communicator's
// stream (no staging: NCCL fuses them); Avg is ncclAvg. A CUDA event per
// pending collective completes it: wait() polls cudaEventQuery and
// ncclCommGetAsyncError, and after timeoutSeconds() aborts the NCCL
// communicator (ncclCommAbort) and throws CommError; the communicator is
// unusable afterwards.
//
// Point-to-point messages are ncclSend / ncclRecv of bytes on the same
// stream. NCCL has no tags: the messages between two ranks pair in the
// order they are issued, which the plans' order guarantees; a size
// mismatch is not detected. split() is ncclCommSplit (of the world's
// communicator only).
//
// In-place forms are NCCL's: all_reduce with in == out, reduce_scatter with
// out == in + rank * n / size, all_gather with in == out + rank * n. Other
// overlaps of inputs and outputs are not supported.
//
// nccl.h and cuda_runtime.h stay out of this header.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_COMM_NCCLCOMMUNICATOR_H
#define DSRT_COMM_NCCLCOMMUNICATOR_H

#include "runtime/comm/Communicator.h"

#include <memory>

namespace dsrt::comm {

class NcclCommunicator : public Communicator {
public:
  /// Initializes MPI if needed, selects `device` (-1: the node-local rank
  /// modulo the device count) and creates the NCCL communicator over all
  /// ranks of MPI_COMM_WORLD. Throws CommError (no CUDA device, NCCL
  /// failures).
  explicit NcclCommunicator(double timeoutSeconds = 300, int device = -1);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char *backend() const override { return "nccl"; }
  std::unique_ptr<Communicator> split(int color, int key) override;
  int64_t stagingElements(Kind, const TensorArg *, size_t) const override { return 0; }
  void progress() override {}
  double blockingAllReduceScalar(double value, ReduceOp op = ReduceOp::Avg) override;

  int device() const { return device_; }
  /// The cudaStream_t the collectives run on.
  void *stream() const;

protected:
  void startCollective(int slot) override;
  void startMessage(int slot) override;
  bool testCollective(int slot) override;
  void finishCollective(int) override {}
  void abortCollective(int slot) override;
  void allocateStaging(int64_t elements) override;

private:
  struct Impl;
  struct Adopt {};
  /// A communicator of ncclCommSplit's result on `device` (`comm` points
  /// to the ncclComm_t).
  NcclCommunicator(double timeoutSeconds, Adopt, void *comm, int device,
                   std::vector<int> worldRanks);
  void createStream();
  std::unique_ptr<Impl> impl_;
  int rank_ = 0, size_ = 1, device_ = 0;
};

/// The number of CUDA devices (0 when there is no driver or no device).
int cudaDeviceCount();

} // namespace dsrt::comm

#endif // DSRT_COMM_NCCLCOMMUNICATOR_H
