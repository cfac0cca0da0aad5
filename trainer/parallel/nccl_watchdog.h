// Dead or stuck peers under NCCL: GPU collectives never block the host, so a lost peer shows up
// as a kernel that never ends or as NCCL's asynchronous error. This polls both against a deadline
// and aborts the communicator (ncclCommAbort) rather than let the job hang.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

namespace tandem::parallel {

using SteadyClock = std::chrono::steady_clock;

// Where `deadline` falls `seconds` from now.
SteadyClock::time_point deadline_in(double seconds);

// Lets a call on a non-blocking communicator finish: while `result` or the communicator's state
// is ncclInProgress, polls ncclCommGetAsyncError until `deadline`. Returns the final state
// (ncclInProgress if the deadline passed first).
ncclResult_t nccl_settle(ncclComm_t comm, ncclResult_t result, SteadyClock::time_point deadline);

class NcclWatchdog {
 public:
  // `comm` must outlive this object; `who` names this process in reports ("rank 1 (GPU 1)").
  NcclWatchdog(ncclComm_t comm, std::string who, int device, double timeout_s);
  ~NcclWatchdog();  // stops the thread; collectives still pending are no longer watched
  NcclWatchdog(const NcclWatchdog&) = delete;
  NcclWatchdog& operator=(const NcclWatchdog&) = delete;

  void set_timeout(double seconds);  // applies to collectives watched from now on

  // Watches collective `op` #`sequence`, just enqueued on `stream`, from a background thread:
  // if it has not completed `timeout` seconds from now, or NCCL reports an asynchronous error
  // first, the thread logs the collective and this rank, aborts the communicator and ends the
  // process (the main thread may be blocked in a CUDA sync that would never return; a non-zero
  // exit without MPI_Finalize makes mpirun end the other ranks).
  void watch(cudaStream_t stream, const char* op, uint64_t sequence);

  // Blocks the host until `event` has completed, polling it, NCCL's asynchronous error and the
  // deadline; on error or timeout aborts the communicator and throws std::runtime_error naming
  // `op` #`sequence` and this rank.
  void wait(cudaEvent_t event, const char* op, uint64_t sequence);

  // Aborts the communicator, once (later calls do nothing): its operations in flight end and it
  // must then not be used, finalised or destroyed. Returns whether this call aborted it.
  bool abort_communicator();
  bool aborted() const { return aborted_.load(); }

 private:
  struct Pending {
    cudaEvent_t done;
    const char* op;
    uint64_t sequence;
    double timeout_s;
    SteadyClock::time_point deadline;
  };
  // Why collective `p` failed (its event's CUDA error, NCCL's asynchronous error, or its
  // deadline passed), or "" while it may still complete.
  std::string failure(const Pending& p, cudaError_t event_status);
  void run();
  [[noreturn]] void report_and_exit(const std::string& message);

  ncclComm_t comm_;
  std::string who_;
  int device_;
  std::atomic<double> timeout_s_;
  std::atomic<bool> aborted_{false};
  std::mutex comm_mutex_;  // orders queries of comm_ before its abort (which frees it)
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> pending_;  // in enqueue order, which is completion order on one stream
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tandem::parallel
