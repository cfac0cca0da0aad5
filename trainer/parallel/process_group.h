// The MPI process group: initialisation, world and local ranks (which device a rank uses is the
// trainer's choice, runtime/device.h), the MPI communicator over the world, and job-wide abort.
// One per process, created first thing in a tool's main().
#pragma once

#include <memory>
#include <string>

#include "trainer/jobs/rank_main.h"
#include "trainer/parallel/communicator.h"

namespace tandem::parallel {

class ProcessGroup {
 public:
  // MPI_Init_thread (works without mpirun: a world of one). Sets the log rank. argc/argv may be
  // null. If MPI is already initialised (e.g. by a test main), joins it and leaves finalising to
  // its owner.
  ProcessGroup(int* argc, char*** argv);
  ~ProcessGroup();  // MPI_Finalize, if this group initialised MPI
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // rank among the processes on this host
  int local_size() const { return local_size_; }
  std::string hostname() const;

  // The MPI communicator over the world (CPU tensors).
  Communicator& cpu();

  // Ends every process of the job with `code` (MPI_Abort); never returns.
  [[noreturn]] void abort(int code);

  // This rank's seat in its job, for jobs::run_rank.
  jobs::RankSeat seat();

 private:
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  bool owns_mpi_ = false;
  std::unique_ptr<Communicator> cpu_;
};

#ifdef TANDEM_HAVE_NCCL
// The NCCL communicator over the world on GPU `device` of this rank, ordered against LibTorch's
// current CUDA stream where LibTorch has CUDA (TANDEM_TORCH_CUDA), else the legacy default stream.
// Collective: every rank calls it. `timeout_s` bounds the set-up and every collective
// (Communicator::set_timeout).
std::unique_ptr<Communicator> make_nccl_communicator(const ProcessGroup& group, int device,
                                                     double timeout_s);

// Makes GPU `device` this thread's current CUDA device (LibTorch's too); std::runtime_error if not.
void set_current_gpu(int device);

// The CUDA name of GPU `device` ("NVIDIA H100 80GB HBM3"), or "GPU <device>" when it cannot be read.
std::string gpu_name(int device);
#endif

// Hashes an ordered list of strings (e.g. "name shape dtype" of every parameter) the same way on
// every machine (FNV-1a 64), for cross-rank consistency checks.
uint64_t stable_hash(const std::vector<std::string>& items);

}  // namespace tandem::parallel
