// The folder's weights as the streamed import takes them: checked when taken, read when made, rows
// in an id table's order, and the copies of tied weights compared a block of rows at a time.
#include "trainer/import/hf_folder.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/import/safetensors_writer.h"
#include "trainer/common/temp_dir.h"

namespace tandem::importer {
namespace {

// model.safetensors holding `shared` as model.shared.weight (fp16, as a half-precision save holds
// it) and `copy` as lm_head.weight.
std::string folder_with(const TempDir& dir, const torch::Tensor& shared,
                        const torch::Tensor& copy) {
  const auto half = shared.to(torch::kFloat16);
  const std::string header =
      R"({"model.shared.weight":{"dtype":"F16","shape":[5,3],"data_offsets":[0,30]},)"
      R"("lm_head.weight":{"dtype":"F32","shape":[5,3],"data_offsets":[30,90]}})";
  write_file(dir, "model.safetensors", header, bytes_of(half) + bytes_of(copy));
  return dir.path();
}

TEST(Weights, RowsTakenInAnIdTablesOrderAreReadWhenMadeAndConvertedToFloat32) {
  TempDir dir("hf_folder");
  const auto shared = torch::arange(15, torch::kFloat32).reshape({5, 3}) / 4;  // exact in fp16
  std::string file;
  Weights weights(read_weights(folder_with(dir, shared, shared), &file), file);
  // Tandem's specials first (a row repeated), then the rest in runs, one row moved to the end.
  const std::vector<int64_t> rows = {1, 3, 2, 2, 4, 0};
  const Pending pending = take_shared_embeddings(weights, 5, 3, rows);
  EXPECT_EQ(pending.shape, (std::vector<int64_t>{6, 3}));
  const torch::Tensor made = pending.make();
  EXPECT_EQ(made.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(made, shared.index_select(0, torch::tensor(rows))));
  weights.check_all_taken();  // the checked copy counts as taken
  EXPECT_THROW(weights.take("shared.weight", {3, 5}), std::invalid_argument);  // shape checked
}

TEST(Weights, ACopyOfTiedWeightsThatDiffersIsRefusedNamingIt) {
  TempDir dir("hf_folder");
  const auto shared = torch::arange(15, torch::kFloat32).reshape({5, 3}) / 4;
  auto other = shared.clone();
  other[4][2] = 100;
  std::string file;
  Weights weights(read_weights(folder_with(dir, shared, other), &file), file);
  try {
    take_shared_embeddings(weights, 5, 3, {0, 1, 2, 3, 4});
    FAIL() << "an untied copy was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'lm_head.weight' differs from the shared"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem::importer
