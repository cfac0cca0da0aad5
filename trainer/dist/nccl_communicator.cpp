#include "trainer/dist/nccl_communicator.h"

#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace tandem::dist {
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
  NcclWork(torch::Tensor tensor, cudaStream_t compute_stream)
      : tensor_(std::move(tensor)), compute_stream_(compute_stream) {
    check(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
  }
  // The event is released by CUDA once it has completed; the tensor must live as long, which
  // wait() guarantees by ordering the compute stream (and so the caching allocator) after it.
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

  void wait() override {
    check(cudaStreamWaitEvent(compute_stream_, done_, 0), "cudaStreamWaitEvent");
  }

 private:
  torch::Tensor tensor_;
  cudaStream_t compute_stream_;
  cudaEvent_t done_ = nullptr;
};

}  // namespace

NcclCommunicator::NcclCommunicator(const ProcessGroup& group, cudaStream_t compute_stream)
    : host_(MPI_COMM_WORLD),
      rank_(group.rank()),
      size_(group.size()),
      device_(group.local_rank()),
      compute_stream_(compute_stream) {
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
  if (device_ >= devices) {
    throw std::runtime_error("NcclCommunicator: rank " + std::to_string(rank_) + " is local rank " +
                             std::to_string(device_) + " but this host has " +
                             std::to_string(devices) +
                             " GPU(s); start at most one process per GPU on each host");
  }
  // NCCL binds the communicator to the current device, so select it first.
  check(cudaSetDevice(device_), "cudaSetDevice");
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
  check(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
}

void NcclCommunicator::release_resources() noexcept {
  // Errors are ignored: this runs in the destructor and while unwinding a failed constructor.
  if (comm_ != nullptr) ncclCommDestroy(comm_);
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

// Events, not host syncs: the collective starts once the compute stream has produced the tensor,
// and later compute work (and the caching allocator's reuse of the memory) waits for it to end.
template <typename Collective>
void NcclCommunicator::enqueue(const char* what, Collective collective) {
  check(cudaEventRecord(compute_ready_, compute_stream_), "cudaEventRecord");
  check(cudaStreamWaitEvent(stream_, compute_ready_, 0), "cudaStreamWaitEvent");
  check(collective(), what);
  check(cudaEventRecord(collective_done_, stream_), "cudaEventRecord");
  check(cudaStreamWaitEvent(compute_stream_, collective_done_, 0), "cudaStreamWaitEvent");
}

void NcclCommunicator::all_reduce_sum(torch::Tensor& tensor) {
  const ncclDataType_t type = nccl_type_of(tensor, device_, "all_reduce_sum");
  void* data = tensor.data_ptr();
  const size_t count = static_cast<size_t>(tensor.numel());
  enqueue("ncclAllReduce",
          [&] { return ncclAllReduce(data, data, count, type, ncclSum, comm_, stream_); });
}

std::unique_ptr<Work> NcclCommunicator::all_reduce_sum_async(torch::Tensor& tensor) {
  const ncclDataType_t type = nccl_type_of(tensor, device_, "all_reduce_sum_async");
  void* data = tensor.data_ptr();
  const size_t count = static_cast<size_t>(tensor.numel());
  auto work = std::make_unique<NcclWork>(tensor, compute_stream_);
  check(cudaEventRecord(compute_ready_, compute_stream_), "cudaEventRecord");
  check(cudaStreamWaitEvent(stream_, compute_ready_, 0), "cudaStreamWaitEvent");
  check(ncclAllReduce(data, data, count, type, ncclSum, comm_, stream_), "ncclAllReduce");
  check(cudaEventRecord(work->event(), stream_), "cudaEventRecord");
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
  enqueue("ncclBroadcast",
          [&] { return ncclBroadcast(data, data, count, type, root, comm_, stream_); });
}

// A barrier is a meeting point of the hosts, so here (only) the host waits for the stream.
void NcclCommunicator::barrier() {
  enqueue("ncclAllReduce", [&] {
    return ncclAllReduce(barrier_scratch_, barrier_scratch_, 1, ncclFloat32, ncclSum, comm_,
                         stream_);
  });
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
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

std::unique_ptr<Communicator> make_nccl_communicator(const ProcessGroup& group) {
  return std::make_unique<NcclCommunicator>(group);
}

}  // namespace tandem::dist
