// Collectives of the MPI backend under mpirun (np 2 and 4, one host): every result is compared
// with its closed form over the ranks.
#include "trainer/parallel/mpi_communicator.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/common/mpi_test.h"

namespace tandem::parallel {
namespace {

const std::vector<torch::ScalarType> kDtypes = {torch::kFloat32, torch::kFloat64, torch::kInt64};

// Element i of rank r holds (r + 1) * (i + 1); over N ranks the sum is (i + 1) * N (N + 1) / 2.
torch::Tensor rank_values(int rank, int64_t count, torch::ScalarType dtype) {
  return (torch::arange(1, count + 1, torch::kInt64) * (rank + 1)).to(dtype);
}

torch::Tensor closed_form_sum(int size, int64_t count, torch::ScalarType dtype) {
  return (torch::arange(1, count + 1, torch::kInt64) * (size * (size + 1) / 2)).to(dtype);
}

// Rank r sends r bytes: "", "\0", "\0\1", ... so sizes differ, one is empty and NULs are inside.
std::string rank_bytes(int rank) {
  std::string bytes;
  for (int i = 0; i < rank; ++i) bytes.push_back(static_cast<char>(i));
  return bytes;
}

TEST(MpiCommunicator, AllReduceSumOfRankDependentTensorsIsTheClosedForm) {
  Communicator& cpu = test::process_group().cpu();
  for (torch::ScalarType dtype : kDtypes) {
    torch::Tensor values = rank_values(cpu.rank(), 10, dtype).reshape({2, 5});
    cpu.all_reduce_sum(values);
    EXPECT_EQ(values.sizes(), (std::vector<int64_t>{2, 5}));
    EXPECT_TRUE(torch::equal(values, closed_form_sum(cpu.size(), 10, dtype).reshape({2, 5})))
        << "dtype " << dtype;
  }
}

TEST(MpiCommunicator, ChunkedCollectivesEqualUnchunkedOnes) {
  MpiCommunicator chunked(MPI_COMM_WORLD, /*max_chunk=*/3);
  torch::Tensor values = rank_values(chunked.rank(), 10, torch::kFloat64);
  chunked.all_reduce_sum(values);
  EXPECT_TRUE(torch::equal(values, closed_form_sum(chunked.size(), 10, torch::kFloat64)));

  const int root = chunked.size() - 1;
  torch::Tensor broadcast =
      chunked.rank() == root ? torch::arange(10, torch::kInt64) : torch::zeros({10}, torch::kInt64);
  const auto version = broadcast._version();
  chunked.broadcast(broadcast, root);
  EXPECT_TRUE(torch::equal(broadcast, torch::arange(10, torch::kInt64)));
  // What is derived from a tensor (a model's bf16 weight copies) learns it changed this way.
  EXPECT_GT(broadcast._version(), version) << "broadcast wrote without counting it";
  EXPECT_EQ(chunked.broadcast_bytes(chunked.rank() == root ? "0123456789" : "", root),
            "0123456789");
}

TEST(MpiCommunicator, AsyncAllReducesInFlightTogetherEachGiveTheClosedForm) {
  MpiCommunicator chunked(MPI_COMM_WORLD, /*max_chunk=*/4);
  std::vector<torch::Tensor> values;
  std::vector<std::unique_ptr<Work>> work;
  for (torch::ScalarType dtype : kDtypes) {
    values.push_back(rank_values(chunked.rank(), 10, dtype));  // 3 chunks each
    work.push_back(chunked.all_reduce_sum_async(values.back()));
  }
  for (auto& w : work) w->fence();
  for (size_t k = 0; k < kDtypes.size(); ++k) {
    EXPECT_TRUE(work[k]->test());
    EXPECT_TRUE(torch::equal(values[k], closed_form_sum(chunked.size(), 10, kDtypes[k])))
        << "dtype " << kDtypes[k];
  }
  EXPECT_EQ(chunked.async_all_reduces(), kDtypes.size());
  EXPECT_EQ(chunked.collectives(), kDtypes.size());
}

// Uneven runs, rank 1's empty: rank r receives the closed-form sums of its run only, from the
// backend's own and from the base class's synchronous version alike.
TEST(MpiCommunicator, ReduceScatterGivesEachRankTheSumsOfItsRun) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  std::vector<int64_t> counts(static_cast<size_t>(comm.size()));
  int64_t offset = 0, total = 0;
  for (int r = 0; r < comm.size(); ++r) {
    counts[r] = r == 1 ? 0 : 3 + 2 * r;
    if (r == comm.rank()) offset = total;
    total += counts[r];
  }
  for (torch::ScalarType dtype : kDtypes) {
    const torch::Tensor send = rank_values(comm.rank(), total, dtype);
    const torch::Tensor expected =
        closed_form_sum(comm.size(), total, dtype).narrow(0, offset, counts[comm.rank()]);
    torch::Tensor received = torch::full({counts[comm.rank()]}, -1, dtype);
    comm.reduce_scatter_sum_async(send, received, counts)->fence();
    EXPECT_TRUE(torch::equal(received, expected)) << "dtype " << dtype;
    EXPECT_TRUE(torch::equal(send, rank_values(comm.rank(), total, dtype))) << "send changed";
    torch::Tensor by_base = torch::full({counts[comm.rank()]}, -1, dtype);
    comm.Communicator::reduce_scatter_sum_async(send, by_base, counts)->fence();
    EXPECT_TRUE(torch::equal(by_base, expected)) << "dtype " << dtype;
  }
  torch::Tensor wrong = torch::empty({counts[comm.rank()] + 1});
  EXPECT_THROW(comm.reduce_scatter_sum_async(torch::zeros({total}), wrong, counts),
               std::invalid_argument);
}

TEST(MpiCommunicator, CountsEveryCollectiveOnce) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  torch::Tensor t = torch::ones({3});
  comm.all_reduce_sum(t);
  comm.broadcast(t, 0);
  comm.barrier();
  comm.all_reduce_sum(1.0);
  comm.all_gather(uint64_t{1});
  comm.gather_bytes("x", 0);
  comm.broadcast_bytes("y", 0);
  comm.all_reduce_sum_async(t)->fence();
  EXPECT_EQ(comm.collectives(), 8u);
  EXPECT_EQ(comm.async_all_reduces(), 1u);
}

TEST(MpiCommunicator, BroadcastFromTheLastRankOverwritesEveryRank) {
  Communicator& cpu = test::process_group().cpu();
  const int root = cpu.size() - 1;
  for (torch::ScalarType dtype : kDtypes) {
    torch::Tensor expected = (torch::arange(6, torch::kInt64) * 7 + root).to(dtype);
    torch::Tensor values = cpu.rank() == root ? expected.clone() : torch::full({6}, -1).to(dtype);
    cpu.broadcast(values, root);
    EXPECT_TRUE(torch::equal(values, expected)) << "dtype " << dtype;
  }
}

TEST(MpiCommunicator, HostValuesSumAndGatherInRankOrder) {
  Communicator& cpu = test::process_group().cpu();
  const int n = cpu.size();
  EXPECT_DOUBLE_EQ(cpu.all_reduce_sum(cpu.rank() + 0.5), n * n / 2.0);

  std::vector<uint64_t> expected;
  for (int r = 0; r < n; ++r)
    expected.push_back((uint64_t{1} << 63) + static_cast<uint64_t>(r * r));
  EXPECT_EQ(cpu.all_gather((uint64_t{1} << 63) + static_cast<uint64_t>(cpu.rank() * cpu.rank())),
            expected);
}

TEST(MpiCommunicator, GatherBytesKeepsSizesEmptyStringsAndNuls) {
  Communicator& cpu = test::process_group().cpu();
  for (int root : {0, cpu.size() - 1}) {
    const std::vector<std::string> gathered = cpu.gather_bytes(rank_bytes(cpu.rank()), root);
    if (cpu.rank() != root) {
      EXPECT_TRUE(gathered.empty());
      continue;
    }
    ASSERT_EQ(gathered.size(), static_cast<size_t>(cpu.size()));
    for (int r = 0; r < cpu.size(); ++r) EXPECT_EQ(gathered[r], rank_bytes(r)) << "rank " << r;
  }
}

TEST(MpiCommunicator, BroadcastBytesCopiesTheRootsBytes) {
  Communicator& cpu = test::process_group().cpu();
  const int root = 1;
  const std::string payload = std::string("vocab\0model", 11) + std::string(100000, 'x');
  EXPECT_EQ(cpu.broadcast_bytes(cpu.rank() == root ? payload : "ignored", root), payload);
  EXPECT_EQ(cpu.broadcast_bytes(cpu.rank() == root ? "" : "ignored", root), "");
  cpu.barrier();
}

TEST(ProcessGroup, OnOneHostLocalRanksAreWorldRanks) {
  parallel::ProcessGroup& group = test::process_group();
  EXPECT_EQ(group.local_rank(), group.rank());
  EXPECT_EQ(group.local_size(), group.size());
  const std::vector<uint64_t> hosts = group.cpu().all_gather(stable_hash({group.hostname()}));
  EXPECT_EQ(hosts, std::vector<uint64_t>(hosts.size(), hosts.front()));
}

}  // namespace
}  // namespace tandem::parallel
