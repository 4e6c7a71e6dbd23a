//===- FakeCommunicator.h - a world that never communicates -----*- C++ -*-===//
//
// For the executor's plan checks (rank counts, groups, staging): every
// collective completes at once without moving data; split() returns fakes
// of the sizes in `splits`, one per call, ranked by the key.
//
//===----------------------------------------------------------------------===//
#ifndef DSRT_TEST_COMM_FAKECOMMUNICATOR_H
#define DSRT_TEST_COMM_FAKECOMMUNICATOR_H

#include "runtime/comm/Communicator.h"

#include <memory>
#include <vector>

namespace dsrt::test {

class FakeCommunicator : public comm::Communicator {
public:
  explicit FakeCommunicator(int size, int rank = 0, std::vector<int> splits = {})
      : Communicator(1), size_(size), rank_(rank), splits_(std::move(splits)) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char *backend() const override { return "fake"; }
  /// A bucket stages the elements of its first two tensors.
  int64_t stagingElements(comm::Kind, const comm::TensorArg *t, size_t k) const override {
    return k > 1 ? t[0].n + t[1].n : 0;
  }
  void progress() override {}
  double blockingAllReduceScalar(double v, comm::ReduceOp) override { return v; }
  std::unique_ptr<comm::Communicator> split(int, int key) override {
    int size = calls_ < splits_.size() ? splits_[calls_] : 1;
    ++calls_;
    return std::make_unique<FakeCommunicator>(size, key);
  }
  /// The staging the executor reserved (-1: none yet).
  int64_t allocated = -1;

protected:
  void startCollective(int) override {}
  bool testCollective(int) override { return true; }
  void finishCollective(int) override {}
  void allocateStaging(int64_t elements) override { allocated = elements; }

private:
  int size_, rank_;
  std::vector<int> splits_;
  size_t calls_ = 0;
};

} // namespace dsrt::test

#endif // DSRT_TEST_COMM_FAKECOMMUNICATOR_H
