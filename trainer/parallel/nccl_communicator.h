// The NCCL backend of Communicator: collectives on this rank's GPU, on a stream of their own
// ordered against the compute stream by CUDA events. Built only where CUDA and NCCL exist.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <functional>
#include <memory>

#include "trainer/parallel/communicator.h"
#include "trainer/parallel/mpi_communicator.h"
#include "trainer/parallel/nccl_watchdog.h"
#include "trainer/parallel/process_group.h"

namespace tandem::parallel {

// The NCCL backend of Communicator: collectives on CUDA tensors of this rank's GPU, run on a
// stream of their own and ordered against the caller's compute stream with CUDA events.
// Host values (control flow, metrics) go over MPI. A dead or stuck peer ends the job within the
// timeout (NcclWatchdog). Built only where CUDA and NCCL exist.

// The stream that produces and consumes the tensors a collective is given, asked at every
// collective (with LibTorch CUDA: its current stream, which callers may change).
using ComputeStream = std::function<cudaStream_t()>;

class NcclCommunicator : public Communicator {
 public:
  // Collective over the group's world on GPU `device` (made current here): rank 0 makes the NCCL
  // id and MPI broadcasts it. Collectives are ordered after `compute_stream()`'s work and before
  // its later work; default: the legacy default stream. `timeout_s` bounds the NCCL set-up
  // (NCCL >= 2.14) and every collective (see set_timeout).
  NcclCommunicator(const ProcessGroup& group, int device, ComputeStream compute_stream = {},
                   double timeout_s = Watchdog::kDefaultTimeoutS);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int device() const { return device_; }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  void all_reduce_sum(torch::Tensor& tensor) override;
  // Enqueued on the communication stream after the compute stream's work so far; fence() makes
  // the compute stream wait for it, so backward keeps running meanwhile.
  std::unique_ptr<Work> all_reduce_sum_async(torch::Tensor& tensor) override;
  // One ncclReduce to each rank of its run, grouped (NCCL's own reduce-scatter wants equal runs);
  // ordered as all_reduce_sum_async.
  std::unique_ptr<Work> reduce_scatter_sum_async(const torch::Tensor& send, torch::Tensor& recv,
                                                 const std::vector<int64_t>& counts) override;
  void broadcast(torch::Tensor& tensor, int root) override;
  void barrier() override;

  double all_reduce_sum(double value) override;
  std::vector<uint64_t> all_gather(uint64_t value) override;
  std::vector<std::string> gather_bytes(const std::string& bytes, int root) override;
  std::string broadcast_bytes(const std::string& bytes, int root) override;

  // Seconds any collective may take: host (MPI) ones under the MPI Watchdog; GPU ones, which never
  // block the host, are polled by NcclWatchdog (completion event, NCCL's asynchronous error,
  // deadline), which aborts the communicator and ends the process when one fails or times out.
  void set_timeout(double seconds) override;

 private:
  void create_resources();
  void init_nccl(const ncclUniqueId& id);
  void release_resources() noexcept;
  void destroy_nccl() noexcept;
  // Lets a (non-blocking) NCCL call finish; on failure aborts the communicator and throws
  // std::runtime_error naming `op` #sequence_, the NCCL function `what` and this rank.
  void settle(ncclResult_t result, const char* op, const char* what);
  std::string who() const;
  // Runs `collective` (returning ncclResult_t) on stream_, after the compute stream's work so far,
  // and records `done` after it; the watchdog watches it as `op` #sequence_.
  template <typename Collective>
  void launch(const char* op, const char* what, cudaEvent_t done, Collective collective);

  MpiCommunicator host_;
  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
  ComputeStream compute_stream_;
  double timeout_s_;
  uint64_t sequence_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t compute_ready_ = nullptr;
  cudaEvent_t collective_done_ = nullptr;
  float* barrier_scratch_ = nullptr;
  ncclComm_t comm_ = nullptr;
  std::unique_ptr<NcclWatchdog> watchdog_;  // exists while comm_ is initialised
};

}  // namespace tandem::parallel
