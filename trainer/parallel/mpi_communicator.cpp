#include "trainer/parallel/mpi_communicator.h"

#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <climits>
#include <sstream>
#include <stdexcept>

// MPI calls are not checked one by one: MPI_COMM_WORLD's default handler, MPI_ERRORS_ARE_FATAL,
// already ends the whole job on any MPI error, which is the failure policy of DESIGN.md. What MPI
// cannot see, a peer that never joins a collective, the watchdog ends instead.

namespace tandem::parallel {
namespace {

std::string describe(const torch::Tensor& tensor) {
  std::ostringstream out;
  out << c10::toString(tensor.scalar_type()) << " on " << tensor.device()
      << (tensor.is_contiguous() ? "" : ", non-contiguous");
  return out.str();
}

// The MPI type of a tensor this backend can reduce, or a runtime_error saying what is wrong.
MPI_Datatype mpi_type_of(const torch::Tensor& tensor, const char* op) {
  const std::string where = std::string("MpiCommunicator::") + op + ": ";
  if (!tensor.defined()) throw std::runtime_error(where + "the tensor is undefined");
  if (tensor.layout() != torch::kStrided || !tensor.device().is_cpu() || !tensor.is_contiguous()) {
    throw std::runtime_error(where + "expected a contiguous dense CPU tensor, got " +
                             describe(tensor));
  }
  switch (tensor.scalar_type()) {
    case torch::kFloat32:
      return MPI_FLOAT;
    case torch::kFloat64:
      return MPI_DOUBLE;
    case torch::kInt64:
      return MPI_INT64_T;
    default:
      throw std::runtime_error(where + "unsupported dtype " + describe(tensor) +
                               " (supported: float32, float64, int64)");
  }
}

// Calls op(pointer, count) over `total` elements of `element_size` bytes, `max_chunk` at a time.
template <typename Op>
void for_each_chunk(void* data, int64_t total, size_t element_size, int max_chunk, Op op) {
  auto* bytes = static_cast<char*>(data);
  for (int64_t done = 0; done < total;) {
    const int count = static_cast<int>(std::min<int64_t>(total - done, max_chunk));
    op(bytes + done * static_cast<int64_t>(element_size), count);
    done += count;
  }
}

// A non-blocking collective on `tensors`, in one MPI request per chunk; it keeps them (and the
// counts MPI reads until it completes) alive.
class MpiWork : public Work {
 public:
  MpiWork(std::vector<torch::Tensor> tensors, const char* name, Watchdog& watchdog,
          uint64_t sequence)
      : tensors_(std::move(tensors)), name_(name), watchdog_(watchdog), sequence_(sequence) {}
  // MPI may still be writing into the tensor: a request is never dropped, only completed.
  ~MpiWork() override { fence(); }
  MpiWork(const MpiWork&) = delete;
  MpiWork& operator=(const MpiWork&) = delete;

  std::vector<MPI_Request>& requests() { return requests_; }
  std::vector<int>& counts() { return counts_; }

  bool test() override {
    if (!done_) {
      int flag = 0;
      MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &flag, MPI_STATUSES_IGNORE);
      done_ = flag != 0;
    }
    return done_;
  }

  void fence() override {
    if (done_) return;
    const auto watch = watchdog_.watch(name_, sequence_);
    MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    done_ = true;
  }

 private:
  std::vector<torch::Tensor> tensors_;
  const char* name_;
  Watchdog& watchdog_;
  uint64_t sequence_;
  std::vector<MPI_Request> requests_;
  std::vector<int> counts_;
  bool done_ = false;
};

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, int max_chunk, double timeout_s)
    : comm_(comm), max_chunk_(max_chunk), watchdog_(timeout_s) {
  if (max_chunk <= 0) throw std::invalid_argument("MpiCommunicator: max_chunk must be > 0");
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

void MpiCommunicator::check_root(int root, const char* op) const {
  if (root < 0 || root >= size_) {
    throw std::invalid_argument("MpiCommunicator::" + std::string(op) + ": root " +
                                std::to_string(root) + " is not a rank of a world of " +
                                std::to_string(size_));
  }
}

void MpiCommunicator::all_reduce_sum(torch::Tensor& tensor) {
  const MPI_Datatype type = mpi_type_of(tensor, "all_reduce_sum");
  const auto watching = watch("all_reduce_sum");
  for_each_chunk(tensor.data_ptr(), tensor.numel(), tensor.element_size(), max_chunk_,
                 [&](void* chunk, int count) {
                   MPI_Allreduce(MPI_IN_PLACE, chunk, count, type, MPI_SUM, comm_);
                 });
}

std::unique_ptr<Work> MpiCommunicator::all_reduce_sum_async(torch::Tensor& tensor) {
  const MPI_Datatype type = mpi_type_of(tensor, "all_reduce_sum_async");
  ++async_all_reduces_;
  auto work =
      std::make_unique<MpiWork>(std::vector{tensor}, "all_reduce_sum_async", watchdog_, ++sequence_);
  for_each_chunk(tensor.data_ptr(), tensor.numel(), tensor.element_size(), max_chunk_,
                 [&](void* chunk, int count) {
                   work->requests().push_back(MPI_REQUEST_NULL);
                   MPI_Iallreduce(MPI_IN_PLACE, chunk, count, type, MPI_SUM, comm_,
                                  &work->requests().back());
                 });
  return work;
}

// One request: no run may exceed MPI's int count (a gradient bucket is far smaller).
std::unique_ptr<Work> MpiCommunicator::reduce_scatter_sum_async(
    const torch::Tensor& send, torch::Tensor& recv, const std::vector<int64_t>& counts) {
  const MPI_Datatype type = mpi_type_of(send, "reduce_scatter_sum_async");
  mpi_type_of(recv, "reduce_scatter_sum_async");
  check_reduce_scatter(send, recv, counts);
  auto work = std::make_unique<MpiWork>(std::vector{send, recv}, "reduce_scatter_sum_async",
                                        watchdog_, ++sequence_);
  for (const int64_t count : counts) {
    if (count > kMaxMpiCount) {
      throw std::runtime_error("MpiCommunicator::reduce_scatter_sum_async: a run of " +
                               std::to_string(count) + " elements exceeds MPI's int count");
    }
    work->counts().push_back(static_cast<int>(count));
  }
  work->requests().push_back(MPI_REQUEST_NULL);
  MPI_Ireduce_scatter(send.data_ptr(), recv.data_ptr(), work->counts().data(), type, MPI_SUM,
                      comm_, &work->requests().back());
  return work;
}

void MpiCommunicator::broadcast(torch::Tensor& tensor, int root) {
  check_root(root, "broadcast");
  const MPI_Datatype type = mpi_type_of(tensor, "broadcast");
  const auto watching = watch("broadcast");
  for_each_chunk(tensor.data_ptr(), tensor.numel(), tensor.element_size(), max_chunk_,
                 [&](void* chunk, int count) { MPI_Bcast(chunk, count, type, root, comm_); });
  // Written outside LibTorch's ops: count it, as they would, in the tensor's version counter
  // (what is derived from a parameter, such as the model's bf16 weight copies, watches it).
  torch::autograd::impl::bump_version(tensor);
}

void MpiCommunicator::barrier() {
  const auto watching = watch("barrier");
  MPI_Barrier(comm_);
}

double MpiCommunicator::all_reduce_sum(double value) {
  const auto watching = watch("all_reduce_sum");
  double sum = 0.0;
  MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, comm_);
  return sum;
}

std::vector<uint64_t> MpiCommunicator::all_gather(uint64_t value) {
  std::vector<uint64_t> values(static_cast<size_t>(size_));
  const auto watching = watch("all_gather");
  MPI_Allgather(&value, 1, MPI_UINT64_T, values.data(), 1, MPI_UINT64_T, comm_);
  return values;
}

// Two steps: the root learns every size, then receives all bytes into one buffer at offsets.
// MPI_Gatherv counts and offsets are ints, so the total is limited to INT_MAX bytes.
std::vector<std::string> MpiCommunicator::gather_bytes(const std::string& bytes, int root) {
  check_root(root, "gather_bytes");
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    throw std::runtime_error("MpiCommunicator::gather_bytes: " + std::to_string(bytes.size()) +
                             " bytes exceed the MPI limit of INT_MAX");
  }
  const int size = static_cast<int>(bytes.size());
  std::vector<int> sizes(rank_ == root ? static_cast<size_t>(size_) : 0);
  const auto watching = watch("gather_bytes");
  MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, root, comm_);

  std::vector<int> offsets(sizes.size());
  int64_t total = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    offsets[r] = static_cast<int>(std::min<int64_t>(total, INT_MAX));
    total += sizes[r];
  }
  if (total > INT_MAX) {
    throw std::runtime_error("MpiCommunicator::gather_bytes: " + std::to_string(total) +
                             " bytes in all exceed the MPI limit of INT_MAX");
  }
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Gatherv(bytes.data(), size, MPI_BYTE, all.data(), sizes.data(), offsets.data(), MPI_BYTE,
              root, comm_);

  std::vector<std::string> result;
  for (size_t r = 0; r < sizes.size(); ++r) result.push_back(all.substr(offsets[r], sizes[r]));
  return result;
}

std::string MpiCommunicator::broadcast_bytes(const std::string& bytes, int root) {
  check_root(root, "broadcast_bytes");
  const auto watching = watch("broadcast_bytes");
  uint64_t size = bytes.size();
  MPI_Bcast(&size, 1, MPI_UINT64_T, root, comm_);
  std::string result = rank_ == root ? bytes : std::string(size, '\0');
  for_each_chunk(result.data(), static_cast<int64_t>(size), 1, max_chunk_,
                 [&](void* chunk, int count) { MPI_Bcast(chunk, count, MPI_BYTE, root, comm_); });
  return result;
}

}  // namespace tandem::parallel
