// The MPI backend of Communicator: collectives on contiguous CPU tensors and small host values
// over one MPI communicator, each blocking wait under a watchdog. ProcessGroup::cpu() returns the
// one over MPI_COMM_WORLD.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "trainer/parallel/communicator.h"
#include "trainer/parallel/watchdog.h"

namespace tandem::parallel {

class MpiCommunicator : public Communicator {
 public:
  static constexpr int kMaxMpiCount = 2147483647;  // INT_MAX: MPI counts are ints

  // Uses `comm` as given (no duplicate); it must outlive this object. Larger buffers go in chunks
  // of at most `max_chunk` elements (smaller only in tests, to exercise the chunking). A blocking
  // wait longer than `timeout_s` logs the collective and ends the process (Watchdog).
  explicit MpiCommunicator(MPI_Comm comm, int max_chunk = kMaxMpiCount,
                           double timeout_s = Watchdog::kDefaultTimeoutS);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  void all_reduce_sum(torch::Tensor& tensor) override;
  std::unique_ptr<Work> all_reduce_sum_async(torch::Tensor& tensor) override;  // MPI_Iallreduce
  std::unique_ptr<Work> reduce_scatter_sum_async(  // MPI_Ireduce_scatter
      const torch::Tensor& send, torch::Tensor& recv, const std::vector<int64_t>& counts) override;
  void broadcast(torch::Tensor& tensor, int root) override;
  void barrier() override;

  double all_reduce_sum(double value) override;
  std::vector<uint64_t> all_gather(uint64_t value) override;
  std::vector<std::string> gather_bytes(const std::string& bytes, int root) override;
  std::string broadcast_bytes(const std::string& bytes, int root) override;

  void set_timeout(double seconds) override { watchdog_.set_timeout(seconds); }

  // Collectives started since construction: all of them (a watchdog report's #k is the k-th),
  // and the asynchronous all-reduces among them. For tests and benchmarks.
  uint64_t collectives() const { return sequence_; }
  uint64_t async_all_reduces() const { return async_all_reduces_; }

 private:
  void check_root(int root, const char* op) const;
  // Counts a collective and arms the watchdog until the returned Watch ends.
  Watchdog::Watch watch(const char* name) { return watchdog_.watch(name, ++sequence_); }

  MPI_Comm comm_;
  int max_chunk_;
  int rank_ = 0;
  int size_ = 1;
  Watchdog watchdog_;
  uint64_t sequence_ = 0;
  uint64_t async_all_reduces_ = 0;
};

}  // namespace tandem::parallel
