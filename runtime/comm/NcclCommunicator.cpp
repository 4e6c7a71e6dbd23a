//===- NcclCommunicator.cpp - GPU ranks over NCCL -------------------------===//
#include "runtime/comm/NcclCommunicator.h"

#include "runtime/comm/MpiCommunicator.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdlib>

namespace dsrt::comm {

struct NcclCommunicator::Impl {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<cudaEvent_t> events; // per slot
  double *scalar = nullptr;        // device scratch of blockingAllReduceScalar
  cudaEvent_t scalarDone = nullptr;
  bool aborted = false;
};

namespace {

std::string rankPrefix(int rank) { return "rank " + std::to_string(rank) + ": "; }

void checkCuda(cudaError_t rc, int rank, const char *call) {
  if (rc != cudaSuccess)
    throw CommError(rankPrefix(rank) + call + " failed: " + cudaGetErrorString(rc));
}

void checkNccl(ncclResult_t rc, int rank, const char *call) {
  if (rc != ncclSuccess)
    throw CommError(rankPrefix(rank) + call + " failed: " + ncclGetErrorString(rc));
}

ncclRedOp_t ncclOp(ReduceOp op) {
  switch (op) {
  case ReduceOp::Avg:
    return ncclAvg;
  case ReduceOp::Max:
    return ncclMax;
  case ReduceOp::Min:
    return ncclMin;
  default:
    return ncclSum;
  }
}

} // namespace

int cudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError(); // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

NcclCommunicator::NcclCommunicator(double timeoutSeconds, int device)
    : Communicator(timeoutSeconds), impl_(std::make_unique<Impl>()) {
  initMpi();
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  int devices = cudaDeviceCount();
  if (devices == 0)
    throw CommError(rankPrefix(rank_) + "no CUDA device: the NCCL communicator needs one GPU per rank");
  if (device < 0) {
    const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    device = (local ? std::atoi(local) : 0) % devices;
  }
  if (device >= devices)
    throw CommError(rankPrefix(rank_) + "CUDA device " + std::to_string(device) + " does not exist (" +
                    std::to_string(devices) + " devices)");
  device_ = device;
  createStream();

  ncclUniqueId id;
  if (rank_ == 0)
    checkNccl(ncclGetUniqueId(&id), rank_, "ncclGetUniqueId");
  if (MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
    throw CommError(rankPrefix(rank_) + "MPI_Bcast of the NCCL unique id failed");
  checkNccl(ncclCommInitRank(&impl_->comm, size_, id, rank_), rank_, "ncclCommInitRank");
  allocateStaging(0);
}

void NcclCommunicator::createStream() {
  checkCuda(cudaSetDevice(device_), rank_, "cudaSetDevice");
  checkCuda(cudaStreamCreateWithFlags(&impl_->stream, cudaStreamNonBlocking), rank_,
            "cudaStreamCreate");
  checkCuda(cudaMalloc(reinterpret_cast<void **>(&impl_->scalar), sizeof(double)), rank_,
            "cudaMalloc");
  checkCuda(cudaEventCreateWithFlags(&impl_->scalarDone, cudaEventDisableTiming), rank_,
            "cudaEventCreate");
}

NcclCommunicator::NcclCommunicator(double timeoutSeconds, Adopt, void *comm, int device,
                                   std::vector<int> worldRanks)
    : Communicator(timeoutSeconds), impl_(std::make_unique<Impl>()) {
  impl_->comm = *static_cast<ncclComm_t *>(comm);
  device_ = device;
  worldRanks_ = std::move(worldRanks);
  checkNccl(ncclCommUserRank(impl_->comm, &rank_), -1, "ncclCommUserRank");
  checkNccl(ncclCommCount(impl_->comm, &size_), rank_, "ncclCommCount");
  createStream();
  allocateStaging(0);
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  if (impl_->aborted)
    throw CommError(prefix() + "the NCCL communicator was aborted after an earlier failure");
  if (pending())
    throw CommError(prefix() + "split while " + std::to_string(pending()) +
                    " collectives are pending");
  // The world ranks of the new group, for messages: MPI_Comm_split of the
  // world orders like ncclCommSplit (by key, then by rank), so only the
  // world's communicator splits.
  if (!worldRanks_.empty())
    throw CommError(prefix() + "splitting a split NCCL communicator is not supported");
  MPI_Comm group = MPI_COMM_NULL;
  if (MPI_Comm_split(MPI_COMM_WORLD, color, key, &group) != MPI_SUCCESS)
    throw CommError(prefix() + "MPI_Comm_split failed");
  int n = 0;
  MPI_Comm_size(group, &n);
  MPI_Group g, world;
  MPI_Comm_group(group, &g);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> ranks(static_cast<size_t>(n), 0), worldRanks(static_cast<size_t>(n), 0);
  for (int r = 0; r < n; ++r)
    ranks[size_t(r)] = r;
  MPI_Group_translate_ranks(g, n, ranks.data(), world, worldRanks.data());
  MPI_Group_free(&g);
  MPI_Group_free(&world);
  MPI_Comm_free(&group);
  ncclComm_t comm = nullptr;
  checkNccl(ncclCommSplit(impl_->comm, color, key, &comm, nullptr), rank_, "ncclCommSplit");
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(timeoutSeconds(), Adopt{}, &comm, device_, std::move(worldRanks)));
}

NcclCommunicator::~NcclCommunicator() {
  if (impl_->comm && !impl_->aborted)
    ncclCommDestroy(impl_->comm);
  for (cudaEvent_t e : impl_->events)
    cudaEventDestroy(e);
  if (impl_->scalarDone)
    cudaEventDestroy(impl_->scalarDone);
  cudaFree(impl_->scalar);
  if (impl_->stream)
    cudaStreamDestroy(impl_->stream);
}

void *NcclCommunicator::stream() const { return impl_->stream; }

void NcclCommunicator::allocateStaging(int64_t) {
  // No staging; one completion event per possible pending collective.
  size_t want = size_t(reservation().maxPending);
  while (impl_->events.size() > want) {
    cudaEventDestroy(impl_->events.back());
    impl_->events.pop_back();
  }
  while (impl_->events.size() < want) {
    cudaEvent_t e = nullptr;
    checkCuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), rank_, "cudaEventCreate");
    impl_->events.push_back(e);
  }
}

void NcclCommunicator::startCollective(int slot) {
  if (impl_->aborted)
    throw CommError(rankPrefix(rank_) + "the NCCL communicator was aborted after an earlier failure");
  const Pending &p = pendingAt(slot);
  const TensorArg *ts = tensors(slot);
  ncclComm_t comm = impl_->comm;
  cudaStream_t stream = impl_->stream;
  // NCCL moves equal blocks; ZeRO's padded chunks need a device staging
  // buffer, which this backend does not have yet.
  for (size_t j = 0; j < p.k; ++j)
    if ((p.kind == Kind::ReduceScatter && ts[j].n % size_) ||
        (p.kind == Kind::AllGather && gatheredOf(ts[j], size_) != ts[j].n * size_))
      throw CommError(rankPrefix(rank_) + "tensor " + std::to_string(j) + " of a " +
                      kindName(p.kind) + " is padded to " + std::to_string(size_) +
                      " chunks; the NCCL backend needs sizes divisible by the group size");
  for (size_t j = 0; j < p.k; ++j)
    if (p.kind == Kind::AllToAll &&
        static_cast<const void *>(ts[j].in) == static_cast<const void *>(ts[j].out))
      throw CommError(rankPrefix(rank_) + "all_to_all in place: the NCCL backend needs a "
                                          "separate input and output");
  checkNccl(ncclGroupStart(), rank_, "ncclGroupStart");
  ncclResult_t rc = ncclSuccess;
  for (size_t j = 0; j < p.k && rc == ncclSuccess; ++j) {
    const TensorArg &t = ts[j];
    ncclDataType_t type = t.type == Elem::BF16  ? ncclBfloat16
                          : t.type == Elem::F16 ? ncclFloat16
                          : t.type == Elem::U8  ? ncclUint8
                                                : ncclFloat32;
    switch (p.kind) {
    case Kind::AllReduce:
      rc = ncclAllReduce(t.in, t.out, size_t(t.n), type, ncclOp(p.op), comm, stream);
      break;
    case Kind::ReduceScatter:
      rc = ncclReduceScatter(t.in, t.out, size_t(t.n / size_), type, ncclOp(p.op), comm, stream);
      break;
    case Kind::AllGather:
      rc = ncclAllGather(t.in, t.out, size_t(t.n), type, comm, stream);
      break;
    case Kind::AllToAll: {
      // Chunk r to rank r and rank r's chunk into slot r: a send and a
      // receive per rank, in the group (not in place: the receives would
      // overwrite chunks not yet sent).
      const size_t c = size_t(t.n / size_), bytes = c * size_t(t.elementBytes());
      for (int r = 0; r < size_ && rc == ncclSuccess; ++r) {
        rc = ncclSend(reinterpret_cast<const char *>(t.in) + r * bytes, c, type, r, comm, stream);
        if (rc == ncclSuccess)
          rc = ncclRecv(reinterpret_cast<char *>(t.out) + r * bytes, c, type, r, comm, stream);
      }
      break;
    }
    }
  }
  ncclResult_t end = ncclGroupEnd();
  checkNccl(rc, rank_, kindName(p.kind));
  checkNccl(end, rank_, "ncclGroupEnd");
  checkCuda(cudaEventRecord(impl_->events[slot], stream), rank_, "cudaEventRecord");
}

void NcclCommunicator::startMessage(int slot) {
  if (impl_->aborted)
    throw CommError(prefix() + "the NCCL communicator was aborted after an earlier failure");
  const Pending &p = pendingAt(slot);
  if (p.p2p == P2p::Send)
    checkNccl(ncclSend(p.buffer, p.bytes, ncclUint8, p.peer, impl_->comm, impl_->stream),
              worldRankOf(rank_), "ncclSend");
  else
    checkNccl(ncclRecv(p.buffer, p.bytes, ncclUint8, p.peer, impl_->comm, impl_->stream),
              worldRankOf(rank_), "ncclRecv");
  checkCuda(cudaEventRecord(impl_->events[slot], impl_->stream), worldRankOf(rank_),
            "cudaEventRecord");
}

bool NcclCommunicator::testCollective(int slot) {
  ncclResult_t async = ncclSuccess;
  checkNccl(ncclCommGetAsyncError(impl_->comm, &async), rank_, "ncclCommGetAsyncError");
  if (async != ncclSuccess && async != ncclInProgress) {
    abortCollective(slot);
    throw CommError(rankPrefix(rank_) + describe(slot) + " failed: " + ncclGetErrorString(async));
  }
  cudaError_t rc = cudaEventQuery(impl_->events[slot]);
  if (rc == cudaErrorNotReady)
    return false;
  checkCuda(rc, rank_, "cudaEventQuery");
  return true;
}

void NcclCommunicator::abortCollective(int) {
  if (!impl_->aborted && impl_->comm)
    ncclCommAbort(impl_->comm);
  impl_->aborted = true;
}

double NcclCommunicator::blockingAllReduceScalar(double value, ReduceOp op) {
  if (impl_->aborted)
    throw CommError(rankPrefix(rank_) + "the NCCL communicator was aborted after an earlier failure");
  cudaStream_t stream = impl_->stream;
  checkCuda(cudaMemcpyAsync(impl_->scalar, &value, sizeof value, cudaMemcpyHostToDevice, stream),
            rank_, "cudaMemcpyAsync");
  checkNccl(ncclAllReduce(impl_->scalar, impl_->scalar, 1, ncclFloat64, ncclOp(op), impl_->comm,
                          stream),
            rank_, "ncclAllReduce");
  double result = 0;
  checkCuda(cudaMemcpyAsync(&result, impl_->scalar, sizeof result, cudaMemcpyDeviceToHost, stream),
            rank_, "cudaMemcpyAsync");
  checkCuda(cudaEventRecord(impl_->scalarDone, stream), rank_, "cudaEventRecord");
  bool done = pollUntil([&] {
    cudaError_t rc = cudaEventQuery(impl_->scalarDone);
    if (rc == cudaErrorNotReady)
      return false;
    checkCuda(rc, rank_, "cudaEventQuery");
    return true;
  });
  if (!done) {
    abortCollective(0);
    throw CommError(timeoutMessage("all_reduce of one value (the step's metrics)", timeoutSeconds()));
  }
  return result;
}

} // namespace dsrt::comm
