// The MPI backend of Communicator: collectives on contiguous CPU tensors and small host values
// over one MPI communicator. ProcessGroup::cpu() returns the one over MPI_COMM_WORLD.
#pragma once

#include <mpi.h>

#include "trainer/dist/communicator.h"

namespace tandem::dist {

class MpiCommunicator : public Communicator {
 public:
  static constexpr int kMaxMpiCount = 2147483647;  // INT_MAX: MPI counts are ints

  // Uses `comm` as given (no duplicate); it must outlive this object. Larger buffers go in chunks
  // of at most `max_chunk` elements (smaller only in tests, to exercise the chunking).
  explicit MpiCommunicator(MPI_Comm comm, int max_chunk = kMaxMpiCount);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  void all_reduce_sum(torch::Tensor& tensor) override;
  void broadcast(torch::Tensor& tensor, int root) override;
  void barrier() override;

  double all_reduce_sum(double value) override;
  std::vector<uint64_t> all_gather(uint64_t value) override;
  std::vector<std::string> gather_bytes(const std::string& bytes, int root) override;
  std::string broadcast_bytes(const std::string& bytes, int root) override;

 private:
  void check_root(int root, const char* op) const;

  MPI_Comm comm_;
  int max_chunk_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace tandem::dist
