// The NCCL backend of Communicator: collectives on CUDA tensors of this rank's GPU, run on a
// stream of their own and ordered against the caller's compute stream with CUDA events.
// Host values (control flow, metrics) go over MPI. Built only where CUDA and NCCL exist.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include "trainer/dist/communicator.h"
#include "trainer/dist/mpi_communicator.h"
#include "trainer/dist/process_group.h"

namespace tandem::dist {

class NcclCommunicator : public Communicator {
 public:
  // Collective over the group's world: selects GPU local_rank(), rank 0 makes the NCCL id and MPI
  // broadcasts it. `compute_stream` is the stream producing and consuming the tensors (with
  // LibTorch CUDA: at::cuda::getCurrentCUDAStream().stream()); default: the legacy default stream.
  explicit NcclCommunicator(const ProcessGroup& group,
                            cudaStream_t compute_stream = cudaStreamLegacy);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  void set_compute_stream(cudaStream_t stream) { compute_stream_ = stream; }
  int device() const { return device_; }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  void all_reduce_sum(torch::Tensor& tensor) override;
  // Enqueued on the communication stream after the compute stream's work so far; wait() makes
  // the compute stream wait for it, so backward keeps running meanwhile.
  std::unique_ptr<Work> all_reduce_sum_async(torch::Tensor& tensor) override;
  void broadcast(torch::Tensor& tensor, int root) override;
  void barrier() override;

  double all_reduce_sum(double value) override;
  std::vector<uint64_t> all_gather(uint64_t value) override;
  std::vector<std::string> gather_bytes(const std::string& bytes, int root) override;
  std::string broadcast_bytes(const std::string& bytes, int root) override;

  // Watches the host (MPI) collectives; GPU collectives never block the host.
  void set_timeout(double seconds) override { host_.set_timeout(seconds); }

 private:
  void create_resources();
  void release_resources() noexcept;
  // Runs `collective` (returning ncclResult_t) on stream_, after and before the compute stream.
  template <typename Collective>
  void enqueue(const char* what, Collective collective);

  MpiCommunicator host_;
  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
  cudaStream_t compute_stream_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t compute_ready_ = nullptr;
  cudaEvent_t collective_done_ = nullptr;
  float* barrier_scratch_ = nullptr;
  ncclComm_t comm_ = nullptr;
};

}  // namespace tandem::dist
