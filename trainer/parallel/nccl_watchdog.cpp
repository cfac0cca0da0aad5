#include "trainer/parallel/nccl_watchdog.h"

#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "trainer/common/error.h"
#include "trainer/common/log.h"
#include "trainer/jobs/rank_state.h"

namespace tandem::parallel {
namespace {

// How often the thread looks at the oldest collective: often enough that a timeout is reported
// within a fraction of a second of its deadline, rarely enough to cost nothing.
constexpr auto kThreadPoll = std::chrono::milliseconds(100);
// A host wait (barrier) or a non-blocking call settling: short, since the host is idle meanwhile.
constexpr auto kHostPoll = std::chrono::microseconds(50);
constexpr auto kAbortWait = std::chrono::seconds(2);

}  // namespace

SteadyClock::time_point deadline_in(double seconds) {
  return SteadyClock::now() +
         std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(seconds));
}

ncclResult_t nccl_settle(ncclComm_t comm, ncclResult_t result, SteadyClock::time_point deadline) {
  ncclResult_t state = result;
  while (state == ncclInProgress) {
    if (SteadyClock::now() >= deadline) return ncclInProgress;
    std::this_thread::sleep_for(kHostPoll);
    const ncclResult_t query = ncclCommGetAsyncError(comm, &state);
    if (query != ncclSuccess) return query;
  }
  return state;
}

NcclWatchdog::NcclWatchdog(ncclComm_t comm, std::string who, int device, double timeout_s)
    : comm_(comm), who_(std::move(who)), device_(device), timeout_s_(timeout_s) {
  thread_ = std::thread([this] { run(); });
}

NcclWatchdog::~NcclWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
  for (const Pending& p : pending_) cudaEventDestroy(p.done);
}

void NcclWatchdog::set_timeout(double seconds) { timeout_s_.store(seconds); }

void NcclWatchdog::watch(cudaStream_t stream, const char* op, uint64_t sequence) {
  cudaEvent_t done = nullptr;
  cudaError_t status = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  if (status == cudaSuccess) status = cudaEventRecord(done, stream);
  if (status != cudaSuccess) {
    if (done != nullptr) cudaEventDestroy(done);
    throw std::runtime_error("NCCL " + std::string(op) + " #" + std::to_string(sequence) + " on " +
                             who_ + ": cannot record its completion event: " +
                             cudaGetErrorString(status));
  }
  const double timeout = timeout_s_.load();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back({done, op, sequence, timeout, deadline_in(timeout)});
  }
  wake_.notify_one();
}

void NcclWatchdog::wait(cudaEvent_t event, const char* op, uint64_t sequence) {
  const double timeout = timeout_s_.load();
  const Pending p{event, op, sequence, timeout, deadline_in(timeout)};
  for (;;) {
    const cudaError_t status = cudaEventQuery(event);
    if (status == cudaSuccess) return;
    const std::string message = failure(p, status);
    if (!message.empty()) {
      abort_communicator();
      throw std::runtime_error(message + "; the NCCL communicator was aborted");
    }
    std::this_thread::sleep_for(kHostPoll);
  }
}

// ncclCommAbort releases NCCL's own kernels, but it was seen to block while other work ahead of
// them on the stream never ends (a spinning kernel, on an H100 with NCCL 2.28): so it runs on a
// thread of its own, waited for at most kAbortWait; the caller ends the process in any case.
bool NcclWatchdog::abort_communicator() {
  std::lock_guard<std::mutex> lock(comm_mutex_);
  if (aborted_.exchange(true)) return false;
  auto finished = std::make_shared<std::promise<void>>();
  std::future<void> done = finished->get_future();
  std::thread([comm = comm_, finished] {
    ncclCommAbort(comm);
    finished->set_value();
  }).detach();
  if (done.wait_for(kAbortWait) != std::future_status::ready) {
    log::warn("ncclCommAbort did not return within " + std::to_string(kAbortWait.count()) +
              " s; going on without it");
  }
  return true;
}

std::string NcclWatchdog::failure(const Pending& p, cudaError_t event_status) {
  std::ostringstream message;
  message << "NCCL " << p.op << " #" << p.sequence << " on " << who_;
  ncclResult_t state = ncclSuccess;
  std::string detail;
  {
    std::lock_guard<std::mutex> lock(comm_mutex_);
    if (aborted_.load()) return "";  // whoever aborted it reports
    if (event_status != cudaSuccess && event_status != cudaErrorNotReady) {
      message << " failed: CUDA " << cudaGetErrorString(event_status);
      return message.str();
    }
    const ncclResult_t query = ncclCommGetAsyncError(comm_, &state);
    if (query != ncclSuccess) state = query;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
    if (state != ncclSuccess && state != ncclInProgress) detail = ncclGetLastError(comm_);
#endif
  }
  if (state != ncclSuccess && state != ncclInProgress) {
    message << " failed: " << ncclGetErrorString(state);
    if (!detail.empty()) message << " (" << detail << ")";
    message << "; a peer may have died";
    return message.str();
  }
  if (SteadyClock::now() < p.deadline) return "";
  message << " did not complete within " << p.timeout_s << " s; a peer is dead or stuck";
  return message.str();
}

void NcclWatchdog::run() {
  cudaSetDevice(device_);  // the thread's queries concern the communicator's GPU
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    // Collectives on one stream complete in order: drop the finished ones from the front.
    cudaError_t status = cudaSuccess;
    while (!pending_.empty() && (status = cudaEventQuery(pending_.front().done)) == cudaSuccess) {
      cudaEventDestroy(pending_.front().done);
      pending_.pop_front();
    }
    if (pending_.empty()) {
      wake_.wait(lock);
      continue;
    }
    const Pending oldest = pending_.front();
    lock.unlock();
    const std::string message = failure(oldest, status);
    if (!message.empty()) report_and_exit(message);
    lock.lock();
    if (aborted_.load()) return;  // the main thread aborted and is reporting
    wake_.wait_for(lock, kThreadPoll);
  }
}

// The main thread may be blocked in a CUDA synchronisation inside LibTorch, where no exception
// can reach it, and this thread may not call MPI (MPI_THREAD_FUNNELED): so, as the MPI Watchdog
// does, log and end the process; mpirun then ends the other ranks.
void NcclWatchdog::report_and_exit(const std::string& message) {
  log::error(message + "; aborting the NCCL communicator and this process");
  jobs::rank_state::end(jobs::RankState::Outcome::kTimedOut, -1, kExitFailure, 0, message);
  std::fflush(nullptr);  // before the abort, which might itself not return
  abort_communicator();
  std::_Exit(kExitFailure);
}

}  // namespace tandem::parallel
