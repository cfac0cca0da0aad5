// The collective operations training needs, behind one interface with two backends:
// MPI (CPU tensors, mpi_communicator.cpp) and NCCL (CUDA tensors, nccl_communicator.cpp).
// Every rank must call the same collectives in the same order.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tandem::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "mpi" or "nccl"

  // In place, over all ranks. Tensors must be contiguous, same shape and dtype everywhere
  // (float32, float64, int64 supported).
  virtual void all_reduce_sum(torch::Tensor& tensor) = 0;
  virtual void broadcast(torch::Tensor& tensor, int root) = 0;
  virtual void barrier() = 0;

  // Small host values (control flow, metrics, checksums).
  virtual double all_reduce_sum(double value) = 0;
  virtual std::vector<uint64_t> all_gather(uint64_t value) = 0;
  virtual std::vector<std::string> gather_bytes(const std::string& bytes, int root) = 0;  // root gets all; others get {}
  virtual std::string broadcast_bytes(const std::string& bytes, int root) = 0;
};

}  // namespace tandem::dist
