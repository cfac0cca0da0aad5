// Which GPU a rank takes: every GPU visible to every rank (mpirun on a node), or one per rank
// (SLURM --gpus-per-task=1, CUDA_VISIBLE_DEVICES per rank), and the counts in between refused.
#include "trainer/train/device.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace tandem::train {
namespace {

TEST(GpuForLocalRank, IsTheLocalRankWhenEveryRankSeesEveryGpu) {
  for (int rank = 0; rank < 8; ++rank) EXPECT_EQ(gpu_for_local_rank(rank, 8, 8), rank);
  EXPECT_EQ(gpu_for_local_rank(1, 2, 4), 1);  // more GPUs than ranks: the first ones
  EXPECT_EQ(gpu_for_local_rank(0, 1, 1), 0);
}

TEST(GpuForLocalRank, IsTheOnlyVisibleGpuWhenEachRankSeesOne) {
  for (int rank = 0; rank < 8; ++rank) EXPECT_EQ(gpu_for_local_rank(rank, 8, 1), 0);
}

TEST(GpuForLocalRank, RefusesRanksThatWouldShareAGpu) {
  try {
    gpu_for_local_rank(3, 4, 2);
    FAIL() << "4 ranks on 2 GPUs were accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("4 ranks on this host but 2 visible GPU(s)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(gpu_for_local_rank(0, 2, 0), std::invalid_argument);
}

}  // namespace
}  // namespace tandem::train
