// The collective operations training needs, behind one interface with two backends:
// MPI (CPU tensors, mpi_communicator.cpp) and NCCL (CUDA tensors, nccl_communicator.cpp).
// Every rank must call the same collectives (blocking or not) in the same order.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tandem::parallel {

// A collective in flight (all_reduce_sum_async): its tensor must stay untouched until it is done.
class Work {
 public:
  virtual ~Work() = default;
  // Without blocking: whether the collective has completed (MPI: also drives its progress).
  virtual bool test() = 0;
  // Orders what the caller does next after the collective, so that it sees the result. Not a
  // host wait on every backend: MPI blocks the host until the collective has completed (under
  // the communicator's timeout); NCCL makes the compute stream wait for it and returns at once.
  virtual void fence() = 0;
};

// Work that was done when it was made (a backend's synchronous fallback).
class CompletedWork : public Work {
 public:
  bool test() override { return true; }
  void fence() override {}
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "mpi" or "nccl"

  // In place, over all ranks. Tensors must be contiguous, same shape and dtype everywhere
  // (float32, float64, int64 supported).
  virtual void all_reduce_sum(torch::Tensor& tensor) = 0;
  // The same, started now and finished by the returned Work, which keeps the tensor's storage
  // alive and must not outlive this communicator. This base version runs synchronously.
  virtual std::unique_ptr<Work> all_reduce_sum_async(torch::Tensor& tensor) {
    all_reduce_sum(tensor);
    return std::make_unique<CompletedWork>();
  }
  // Sum over ranks of `send` (contiguous, of the same size and dtype everywhere) cut into
  // consecutive runs of counts[r] elements (the same counts everywhere, summing to its size): run
  // r's sum lands in rank r's `recv` (counts[rank()] elements, contiguous). Started now, finished
  // by the returned Work, which keeps both tensors alive; `send` must stay untouched until then.
  // This base version runs synchronously, all-reducing a copy of `send` whole.
  virtual std::unique_ptr<Work> reduce_scatter_sum_async(const torch::Tensor& send,
                                                         torch::Tensor& recv,
                                                         const std::vector<int64_t>& counts) {
    const int64_t offset = check_reduce_scatter(send, recv, counts);
    torch::Tensor sum = send.clone();
    all_reduce_sum(sum);
    recv.copy_(sum.narrow(0, offset, recv.numel()));
    return std::make_unique<CompletedWork>();
  }
  virtual void broadcast(torch::Tensor& tensor, int root) = 0;
  virtual void barrier() = 0;

  // Small host values (control flow, metrics, checksums).
  virtual double all_reduce_sum(double value) = 0;
  virtual std::vector<uint64_t> all_gather(uint64_t value) = 0;
  virtual std::vector<std::string> gather_bytes(const std::string& bytes, int root) = 0;  // root gets all; others get {}
  virtual std::string broadcast_bytes(const std::string& bytes, int root) = 0;

  // Seconds a blocking collective may wait for the other ranks before this process reports the
  // collective and ends (a dead or stuck peer must not hang the job). Backends without such a
  // watchdog ignore it.
  virtual void set_timeout(double seconds) { (void)seconds; }

 protected:
  // Where this rank's run starts in `send`; throws std::invalid_argument when the counts are not
  // one per rank summing to send's size, or recv does not hold this rank's run.
  int64_t check_reduce_scatter(const torch::Tensor& send, const torch::Tensor& recv,
                               const std::vector<int64_t>& counts) const {
    int64_t total = 0, offset = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      if (static_cast<int>(r) == rank()) offset = total;
      total += counts[r];
    }
    if (counts.size() != static_cast<size_t>(size()) || total != send.numel() ||
        !send.is_contiguous() || !recv.is_contiguous() ||
        recv.numel() != counts[static_cast<size_t>(rank())] ||
        recv.scalar_type() != send.scalar_type()) {
      throw std::invalid_argument(
          "reduce_scatter_sum_async: expected one count per rank summing to the " +
          std::to_string(send.numel()) + " elements sent, and a contiguous receiving tensor of " +
          "this rank's count and the sent type");
    }
    return offset;
  }
};

}  // namespace tandem::parallel
