// Single-process tests: stable_hash against FNV-1a values computed by hand (independently, one
// byte at a time), and the process group as a world of one started without mpirun.
#include "trainer/parallel/process_group.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#ifdef TANDEM_HAVE_NCCL
#include <cuda_runtime.h>
#endif

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace tandem::parallel {
namespace {

// One group per process: MPI cannot be initialised again after MPI_Finalize (at exit).
ProcessGroup& singleton_group() {
  static ProcessGroup group(nullptr, nullptr);
  return group;
}

template <typename Error>
std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "no exception";
}

TEST(StableHash, EmptyListIsTheFnvOffsetBasis) {
  EXPECT_EQ(stable_hash({}), 0xcbf29ce484222325ULL);
}

// FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c (published vector); one more step over the NUL separator.
TEST(StableHash, MatchesFnv1aOfItemsEachFollowedByNul) {
  EXPECT_EQ(stable_hash({"a"}), 0x089be207b544f1e4ULL);
  EXPECT_EQ(stable_hash({""}), 0xaf63bd4c8601b7dfULL);
  EXPECT_EQ(stable_hash({"ab"}), 0xe72003190541fc1eULL);
  EXPECT_EQ(stable_hash({"a", "b"}), 0xab40d7820d408076ULL);
  EXPECT_EQ(stable_hash({"encoder.weight [4, 8] float32", "decoder.bias [8] float32"}),
            0x05b4d542cee9e818ULL);
}

TEST(StableHash, DependsOnItemBoundariesAndOrder) {
  EXPECT_NE(stable_hash({"ab"}), stable_hash({"a", "b"}));
  EXPECT_NE(stable_hash({"a", "b"}), stable_hash({"b", "a"}));
  EXPECT_NE(stable_hash({}), stable_hash({""}));
}

TEST(ProcessGroup, WithoutMpirunIsAWorldOfOneOnThisHost) {
  ProcessGroup& group = singleton_group();
  EXPECT_EQ(group.rank(), 0);
  EXPECT_EQ(group.size(), 1);
  EXPECT_EQ(group.local_rank(), 0);
  EXPECT_EQ(group.local_size(), 1);
  EXPECT_FALSE(group.hostname().empty());
  EXPECT_EQ(group.cpu().backend(), "mpi");
  EXPECT_EQ(group.cpu().size(), 1);
}

TEST(ProcessGroup, WorldOfOneCollectivesReturnTheLocalValues) {
  Communicator& cpu = singleton_group().cpu();
  torch::Tensor values = torch::tensor({1.5, -2.0, 4.0}, torch::kFloat64);
  cpu.all_reduce_sum(values);
  EXPECT_TRUE(torch::equal(values, torch::tensor({1.5, -2.0, 4.0}, torch::kFloat64)));
  EXPECT_EQ(cpu.all_reduce_sum(2.5), 2.5);
  EXPECT_EQ(cpu.all_gather(42), std::vector<uint64_t>{42});
  EXPECT_EQ(cpu.gather_bytes(std::string("x\0y", 3), 0),
            std::vector<std::string>{std::string("x\0y", 3)});
  EXPECT_EQ(cpu.broadcast_bytes("hello", 0), "hello");
  cpu.barrier();
}

TEST(MpiCommunicator, RejectsUnsupportedDtypesByName) {
  Communicator& cpu = singleton_group().cpu();
  torch::Tensor ints = torch::zeros({4}, torch::kInt32);
  torch::Tensor halves = torch::zeros({4}, torch::kFloat16);
  EXPECT_NE(message_of<std::runtime_error>([&] {
              cpu.all_reduce_sum(ints);
            }).find("unsupported dtype Int"),
            std::string::npos);
  EXPECT_NE(message_of<std::runtime_error>([&] {
              cpu.broadcast(halves, 0);
            }).find("unsupported dtype Half"),
            std::string::npos);
}

TEST(MpiCommunicator, RejectsNonContiguousAndUndefinedTensors) {
  Communicator& cpu = singleton_group().cpu();
  torch::Tensor transposed = torch::zeros({2, 3}, torch::kFloat32).t();
  torch::Tensor undefined;
  EXPECT_NE(message_of<std::runtime_error>([&] {
              cpu.all_reduce_sum(transposed);
            }).find("non-contiguous"),
            std::string::npos);
  EXPECT_NE(
      message_of<std::runtime_error>([&] { cpu.all_reduce_sum(undefined); }).find("undefined"),
      std::string::npos);
}

TEST(MpiCommunicator, RejectsARootOutsideTheWorld) {
  Communicator& cpu = singleton_group().cpu();
  torch::Tensor values = torch::zeros({2}, torch::kFloat32);
  EXPECT_THROW(cpu.broadcast(values, 1), std::invalid_argument);
  EXPECT_THROW(cpu.broadcast_bytes("x", -1), std::invalid_argument);
  EXPECT_THROW(cpu.gather_bytes("x", 1), std::invalid_argument);
}

#ifdef TANDEM_HAVE_NCCL
// Links the NCCL backend into a test wherever it is built; runs it where this host has a GPU.
TEST(NcclCommunicator, IsAWorldOfOneOnAGpuAndACudaErrorWithout) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    EXPECT_NE(message_of<std::runtime_error>([] {
                make_nccl_communicator(singleton_group(), 0, 30.0);
              }).find("CUDA cudaGetDeviceCount failed"),
              std::string::npos);
    return;
  }
  std::unique_ptr<Communicator> nccl = make_nccl_communicator(singleton_group(), 0, 30.0);
  EXPECT_EQ(nccl->backend(), "nccl");
  EXPECT_EQ(nccl->size(), 1);
  nccl->barrier();
  EXPECT_EQ(nccl->all_reduce_sum(1.5), 1.5);
  EXPECT_EQ(nccl->broadcast_bytes("id", 0), "id");
  torch::Tensor cpu_tensor = torch::zeros({2});
  EXPECT_THROW(nccl->all_reduce_sum(cpu_tensor), std::runtime_error);
}
#endif

}  // namespace
}  // namespace tandem::parallel
