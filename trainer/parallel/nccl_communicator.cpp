#include "trainer/parallel/nccl_communicator.h"

#include <torch/csrc/autograd/variable.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <sstream>
#include <stdexcept>

#ifdef TANDEM_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

// Non-blocking communicators (ncclConfig_t.blocking = 0, ncclCommFinalize) came with NCCL 2.14;
// before it the set-up and the final tear-down cannot be bounded by the timeout.
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
#define TANDEM_NCCL_NONBLOCKING 1
#endif

namespace tandem::parallel {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string("CUDA ") + what +
                             " failed: " + cudaGetErrorString(status));
  }
}

void check(ncclResult_t status, const char* what) {
  if (status != ncclSuccess) {
    throw std::runtime_error(std::string("NCCL ") + what +
                             " failed: " + ncclGetErrorString(status));
  }
}

// NCCL 2.9 changed the version code from major*1000+minor*100+patch to major*10000+minor*100+patch.
std::string nccl_version() {
  int code = 0;
  check(ncclGetVersion(&code), "ncclGetVersion");
  const int major_scale = code >= 10000 ? 10000 : 1000;
  const int minor = (code % major_scale) / 100;
  return std::to_string(code / major_scale) + "." + std::to_string(minor) + "." +
         std::to_string(code % 100);
}

// The NCCL type of a tensor this backend can reduce on `device`, or a runtime_error.
ncclDataType_t nccl_type_of(const torch::Tensor& tensor, int device, const char* op) {
  const std::string where = std::string("NcclCommunicator::") + op + ": ";
  if (!tensor.defined()) throw std::runtime_error(where + "the tensor is undefined");
  std::ostringstream got;
  got << c10::toString(tensor.scalar_type()) << " on " << tensor.device()
      << (tensor.is_contiguous() ? "" : ", non-contiguous");
  if (tensor.layout() != torch::kStrided || !tensor.is_cuda() || !tensor.is_contiguous() ||
      tensor.device().index() != device) {
    throw std::runtime_error(where + "expected a contiguous dense tensor on cuda:" +
                             std::to_string(device) + ", got " + got.str());
  }
  switch (tensor.scalar_type()) {
    case torch::kFloat32:
      return ncclFloat32;
    case torch::kFloat64:
      return ncclFloat64;
    case torch::kInt64:
      return ncclInt64;
    default:
      throw std::runtime_error(where + "unsupported dtype " + got.str() +
                               " (supported: float32, float64, int64)");
  }
}

// An all-reduce enqueued on the communication stream, its end marked by an event of its own.
class NcclWork : public Work {
 public:
  NcclWork(std::vector<torch::Tensor> tensors, cudaStream_t compute_stream)
      : tensors_(std::move(tensors)), compute_stream_(compute_stream) {
    check(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
  }
  // The event is released by CUDA once it has completed; the tensors must live as long, which
  // fence() guarantees by ordering the compute stream (and so the caching allocator) after it.
  ~NcclWork() override { cudaEventDestroy(done_); }
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  cudaEvent_t event() const { return done_; }

  bool test() override {
    const cudaError_t status = cudaEventQuery(done_);
    if (status == cudaErrorNotReady) return false;
    check(status, "cudaEventQuery");
    return true;
  }

  void fence() override {
    check(cudaStreamWaitEvent(compute_stream_, done_, 0), "cudaStreamWaitEvent");
  }

 private:
  std::vector<torch::Tensor> tensors_;
  cudaStream_t compute_stream_;
  cudaEvent_t done_ = nullptr;
};

}  // namespace

NcclCommunicator::NcclCommunicator(const ProcessGroup& group, int device,
                                   ComputeStream compute_stream, double timeout_s)
    : host_(MPI_COMM_WORLD, MpiCommunicator::kMaxMpiCount, timeout_s),
      rank_(group.rank()),
      size_(group.size()),
      device_(device),
      compute_stream_(compute_stream ? std::move(compute_stream)
                                     : ComputeStream([] { return cudaStreamLegacy; })),
      timeout_s_(timeout_s) {
  try {
    create_resources();
  } catch (...) {
    release_resources();
    throw;
  }
  std::fprintf(stderr, "[tandem][rank %d] NCCL %s on GPU %d of %s\n", rank_, nccl_version().c_str(),
               device_, group.hostname().c_str());
  std::fflush(stderr);
}

void NcclCommunicator::create_resources() {
  int devices = 0;
  check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  if (device_ < 0 || device_ >= devices) {
    throw std::runtime_error("NcclCommunicator: rank " + std::to_string(rank_) + " was given GPU " +
                             std::to_string(device_) + " but sees " + std::to_string(devices) +
                             " GPU(s); start at most one process per GPU on each host");
  }
  // NCCL binds the communicator to the current device (the trainer has made it current already).
  set_current_gpu(device_);
  // Non-blocking: the legacy default stream must not serialise with communication; the events
  // below are the only ordering, which lets bucketed all-reduces overlap the backward pass.
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  check(cudaEventCreateWithFlags(&compute_ready_, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventCreateWithFlags(&collective_done_, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaMalloc(reinterpret_cast<void**>(&barrier_scratch_), sizeof(float)), "cudaMalloc");

  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (rank_ == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  const std::string shared =
      host_.broadcast_bytes(std::string(reinterpret_cast<const char*>(&id), sizeof(id)), 0);
  std::memcpy(&id, shared.data(), sizeof(id));
  init_nccl(id);
  watchdog_ = std::make_unique<NcclWatchdog>(comm_, who(), device_, timeout_s_);
}

// Non-blocking where NCCL allows it, so that a peer that never joins costs the timeout, not a hang.
void NcclCommunicator::init_nccl(const ncclUniqueId& id) {
#ifdef TANDEM_NCCL_NONBLOCKING
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t started = ncclCommInitRankConfig(&comm_, size_, id, rank_, &config);
  if (comm_ == nullptr) check(started, "ncclCommInitRankConfig");
  const ncclResult_t state = nccl_settle(comm_, started, deadline_in(timeout_s_));
  if (state == ncclSuccess) return;
  ncclCommAbort(comm_);
  comm_ = nullptr;
  std::ostringstream message;
  message << "NCCL set-up (ncclCommInitRankConfig) on " << who();
  if (state == ncclInProgress) {
    message << " did not finish within " << timeout_s_ << " s; a peer did not join";
  } else {
    message << " failed: " << ncclGetErrorString(state);
  }
  throw std::runtime_error(message.str());
#else
  check(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
#endif
}

std::string NcclCommunicator::who() const {
  return "rank " + std::to_string(rank_) + " (GPU " + std::to_string(device_) + ")";
}

void NcclCommunicator::set_timeout(double seconds) {
  host_.set_timeout(seconds);  // validates: > 0
  timeout_s_ = seconds;
  if (watchdog_) watchdog_->set_timeout(seconds);
}

void NcclCommunicator::settle(ncclResult_t result, const char* op, const char* what) {
  const ncclResult_t state = nccl_settle(comm_, result, deadline_in(timeout_s_));
  if (state == ncclSuccess) return;
  watchdog_->abort_communicator();
  std::ostringstream message;
  message << "NCCL " << op << " #" << sequence_ << " on " << who() << ": " << what;
  if (state == ncclInProgress) {
    message << " did not finish within " << timeout_s_ << " s; a peer is dead or stuck";
  } else {
    message << " failed: " << ncclGetErrorString(state);
  }
  throw std::runtime_error(message.str() + "; the NCCL communicator was aborted");
}

void NcclCommunicator::release_resources() noexcept {
  // Errors are ignored: this runs in the destructor and while unwinding a failed constructor.
  destroy_nccl();
  if (barrier_scratch_ != nullptr) cudaFree(barrier_scratch_);
  if (collective_done_ != nullptr) cudaEventDestroy(collective_done_);
  if (compute_ready_ != nullptr) cudaEventDestroy(compute_ready_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  comm_ = nullptr;
  barrier_scratch_ = nullptr;
  collective_done_ = compute_ready_ = nullptr;
  stream_ = nullptr;
}

NcclCommunicator::~NcclCommunicator() { release_resources(); }

// An aborted communicator is gone already. While an error unwinds (this rank failed, so its
// peers will not complete what is in flight) it is aborted: finalising would wait for them, up
// to the timeout. A healthy one is finalised (which waits for its work in flight, and so for the
// peers) under the timeout, then destroyed; if that fails, aborted.
void NcclCommunicator::destroy_nccl() noexcept {
  const bool aborted = watchdog_ && watchdog_->aborted();
  watchdog_.reset();
  if (comm_ == nullptr || aborted) {
    comm_ = nullptr;
    return;
  }
  if (std::uncaught_exceptions() > 0) {
    ncclCommAbort(comm_);
    comm_ = nullptr;
    return;
  }
#ifdef TANDEM_NCCL_NONBLOCKING
  const ncclResult_t state = nccl_settle(comm_, ncclCommFinalize(comm_), deadline_in(timeout_s_));
  if (state == ncclSuccess) {
    ncclCommDestroy(comm_);
  } else {
    ncclCommAbort(comm_);
  }
#else
  ncclCommDestroy(comm_);
#endif
  comm_ = nullptr;
}

// Events, not host syncs: the collective starts once the compute stream has produced the tensor;
// the caller orders later compute work (and the caching allocator's reuse of the memory) after
// `done`. The watchdog's own event after it bounds how long it may take.
template <typename Collective>
void NcclCommunicator::launch(const char* op, const char* what, cudaEvent_t done,
                              Collective collective) {
  ++sequence_;
  check(cudaEventRecord(compute_ready_, compute_stream_()), "cudaEventRecord");
  check(cudaStreamWaitEvent(stream_, compute_ready_, 0), "cudaStreamWaitEvent");
  settle(collective(), op, what);
  check(cudaEventRecord(done, stream_), "cudaEventRecord");
  watchdog_->watch(stream_, op, sequence_);
}

void NcclCommunicator::all_reduce_sum(torch::Tensor& tensor) {
  const ncclDataType_t type = nccl_type_of(tensor, device_, "all_reduce_sum");
  void* data = tensor.data_ptr();
  const size_t count = static_cast<size_t>(tensor.numel());
  launch("all_reduce_sum", "ncclAllReduce", collective_done_,
         [&] { return ncclAllReduce(data, data, count, type, ncclSum, comm_, stream_); });
  check(cudaStreamWaitEvent(compute_stream_(), collective_done_, 0), "cudaStreamWaitEvent");
}

std::unique_ptr<Work> NcclCommunicator::all_reduce_sum_async(torch::Tensor& tensor) {
  const ncclDataType_t type = nccl_type_of(tensor, device_, "all_reduce_sum_async");
  void* data = tensor.data_ptr();
  const size_t count = static_cast<size_t>(tensor.numel());
  auto work = std::make_unique<NcclWork>(std::vector{tensor}, compute_stream_());
  launch("all_reduce_sum_async", "ncclAllReduce", work->event(),
         [&] { return ncclAllReduce(data, data, count, type, ncclSum, comm_, stream_); });
  return work;
}

std::unique_ptr<Work> NcclCommunicator::reduce_scatter_sum_async(
    const torch::Tensor& send, torch::Tensor& recv, const std::vector<int64_t>& counts) {
  const ncclDataType_t type = nccl_type_of(send, device_, "reduce_scatter_sum_async");
  nccl_type_of(recv, device_, "reduce_scatter_sum_async");
  check_reduce_scatter(send, recv, counts);
  auto* sent = static_cast<char*>(send.data_ptr());
  const size_t element = send.element_size();
  auto work = std::make_unique<NcclWork>(std::vector{send, recv}, compute_stream_());
  launch("reduce_scatter_sum_async", "ncclReduce", work->event(), [&] {
    ncclResult_t result = ncclGroupStart();
    size_t offset = 0;  // elements
    for (int root = 0; root < size_ && result == ncclSuccess; ++root) {
      const auto count = static_cast<size_t>(counts[root]);
      void* segment = sent + offset * element;
      // Only the root's receiving buffer is written; the others pass their own run.
      void* into = root == rank_ ? recv.data_ptr() : segment;
      if (count > 0) result = ncclReduce(segment, into, count, type, ncclSum, root, comm_, stream_);
      if (result == ncclInProgress) result = ncclSuccess;
      offset += count;
    }
    const ncclResult_t ended = ncclGroupEnd();
    return result == ncclSuccess ? ended : result;
  });
  return work;
}

void NcclCommunicator::broadcast(torch::Tensor& tensor, int root) {
  if (root < 0 || root >= size_) {
    throw std::invalid_argument("NcclCommunicator::broadcast: root " + std::to_string(root) +
                                " is not a rank of a world of " + std::to_string(size_));
  }
  const ncclDataType_t type = nccl_type_of(tensor, device_, "broadcast");
  void* data = tensor.data_ptr();
  const size_t count = static_cast<size_t>(tensor.numel());
  launch("broadcast", "ncclBroadcast", collective_done_,
         [&] { return ncclBroadcast(data, data, count, type, root, comm_, stream_); });
  check(cudaStreamWaitEvent(compute_stream_(), collective_done_, 0), "cudaStreamWaitEvent");
  // Written outside LibTorch's ops: count it, as they would, in the tensor's version counter
  // (what is derived from a parameter, such as the model's bf16 weight copies, watches it).
  torch::autograd::impl::bump_version(tensor);
}

// A barrier is a meeting point of the hosts, so here (only) the host waits for the collective:
// by polling, under the timeout, never in a cudaStreamSynchronize that a dead peer would hang.
void NcclCommunicator::barrier() {
  launch("barrier", "ncclAllReduce", collective_done_, [&] {
    return ncclAllReduce(barrier_scratch_, barrier_scratch_, 1, ncclFloat32, ncclSum, comm_,
                         stream_);
  });
  check(cudaStreamWaitEvent(compute_stream_(), collective_done_, 0), "cudaStreamWaitEvent");
  watchdog_->wait(collective_done_, "barrier", sequence_);
}

double NcclCommunicator::all_reduce_sum(double value) { return host_.all_reduce_sum(value); }

std::vector<uint64_t> NcclCommunicator::all_gather(uint64_t value) {
  return host_.all_gather(value);
}

std::vector<std::string> NcclCommunicator::gather_bytes(const std::string& bytes, int root) {
  return host_.gather_bytes(bytes, root);
}

std::string NcclCommunicator::broadcast_bytes(const std::string& bytes, int root) {
  return host_.broadcast_bytes(bytes, root);
}

std::string gpu_name(int device) {
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, device) != cudaSuccess) {
    return "GPU " + std::to_string(device);
  }
  return properties.name;
}

void set_current_gpu(int device) { check(cudaSetDevice(device), "cudaSetDevice"); }

std::unique_ptr<Communicator> make_nccl_communicator(const ProcessGroup& group, int device,
                                                     double timeout_s) {
  ComputeStream current;  // LibTorch's current stream on `device`, where LibTorch has CUDA
#ifdef TANDEM_TORCH_CUDA
  current = [device] {
    return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
  };
#endif
  return std::make_unique<NcclCommunicator>(group, device, std::move(current), timeout_s);
}

}  // namespace tandem::parallel
