// Which GPU a rank takes: every GPU visible to every rank (mpirun on a node), or one per rank
// (SLURM --gpus-per-task=1, CUDA_VISIBLE_DEVICES per rank), and the counts in between refused.
#include "trainer/runtime/device.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <stdexcept>
#include <string>

namespace tandem::runtime {
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

// The message of the std::invalid_argument inference_device(flag) throws ("" if none).
std::string refusal(const std::string& flag) {
  try {
    inference_device(flag);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(InferenceDevice, CpuIsTheCpuAndAutoIsTheCpuWithoutAGpu) {
  EXPECT_EQ(inference_device("cpu"), torch::Device(torch::kCPU));
  const auto chosen = inference_device("auto");
  if (torch::cuda::is_available()) {
    EXPECT_EQ(chosen, torch::Device(torch::kCUDA, 0));
  } else {
    EXPECT_EQ(chosen, torch::Device(torch::kCPU));
  }
}

TEST(InferenceDevice, RefusesWhatIsNotADeviceNamingTheFlag) {
  for (const std::string flag : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CPU", "cuda0", ""}) {
    EXPECT_EQ(refusal(flag), "--device '" + flag + "': expected cpu, cuda, cuda:N or auto");
  }
}

TEST(InferenceDevice, RefusesAGpuThatIsNotThere) {
  const auto visible = static_cast<int>(torch::cuda::device_count());
  const std::string absent = "cuda:" + std::to_string(visible);
  if (visible == 0) {
    EXPECT_EQ(refusal("cuda"),
              "--device 'cuda': no GPU is usable (LibTorch built without CUDA, or no device "
              "visible)");
    EXPECT_NE(refusal(absent).find("no GPU is usable"), std::string::npos);
  } else {
    EXPECT_EQ(refusal(absent), "--device '" + absent + "': this process sees " +
                                   std::to_string(visible) + " GPU(s), numbered from 0");
  }
}

}  // namespace
}  // namespace tandem::runtime
