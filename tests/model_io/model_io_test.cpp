// Loading a checkpoint for inference: a /config that describes a larger model than the file holds
// is refused before the model is built (allocated).
#include "trainer/model_io/model_io.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <stdexcept>
#include <string>

#include "tests/data/test_corpus.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/common/temp_dir.h"
#include "trainer/config/config.h"

namespace tandem::checkpoint {
namespace {

config::ModelConfig small(bool tied, bool pre_norm, int64_t layers) {
  config::ModelConfig m;
  m.d_model = 16;
  m.heads = 2;
  m.encoder_layers = layers;
  m.decoder_layers = layers + 1;
  m.d_ff = 24;
  m.tie_embeddings = tied;
  m.pre_norm = pre_norm;
  m.max_positions = 64;
  return m;
}

int64_t counted(const config::ModelConfig& m, int64_t vocab) {
  int64_t total = 0;
  for (const auto& [name, tensor] : named_parameters(model::Transformer(model_options(m, vocab)))) {
    total += tensor.numel();
  }
  return total;
}

// The bound holds below the model's own count, and not far below it (what keeps the allocation a
// checkpoint can cause within a few times what the file holds).
TEST(ModelIo, ParametersAtLeastIsALowerBoundWithinAFewTimesTheCount) {
  for (const bool tied : {false, true}) {
    for (const bool pre_norm : {false, true}) {
      for (const int64_t layers : {1, 3}) {
        const config::ModelConfig m = small(tied, pre_norm, layers);
        const int64_t bound = parameters_at_least(m, 50), count = counted(m, 50);
        EXPECT_LE(bound, count) << tied << pre_norm << layers;
        EXPECT_GE(3 * bound, count) << tied << pre_norm << layers;
      }
    }
  }
  config::ModelConfig huge = small(false, false, 1);
  huge.d_model = int64_t{1} << 40;
  EXPECT_EQ(parameters_at_least(huge, 1 << 20), std::numeric_limits<int64_t>::max());
}

TEST(ModelIo, AConfigDescribingALargerModelThanTheFileHoldsIsRefusedBeforeBuildingIt) {
  TempDir dir("model-io");
  const data::testing::SyntheticText text = data::testing::synthetic_text(100, 1);
  const data::Vocab vocab = data::Vocab::train(text.src, data::testing::small_vocab());
  torch::manual_seed(1);
  config::Config config;
  config.model = small(false, false, 1);
  config.data.corpus = "corpus.h5";
  CheckpointData data;
  data.model = named_parameters(model::Transformer(model_options(config.model, vocab.size())));
  data.vocab = vocab.bytes();
  const auto write = [&](const config::Config& c) {
    data.config_yaml = config::to_yaml(c);
    save(dir.file("c.h5"), data);
  };
  write(config);
  EXPECT_EQ(load_for_inference(dir.file("c.h5"), Weights::kRaw).model->options().d_model, 16);

  // 4096 wide: over 0.7e9 parameters (3 GB) to allocate before the shapes would be compared.
  config::Config wide = config;
  wide.model.d_model = 4096;
  wide.model.d_ff = 16384;
  write(wide);
  try {
    load_for_inference(dir.file("c.h5"), Weights::kRaw);
    ADD_FAILURE() << "loaded";
  } catch (const std::invalid_argument& e) {
    const std::string expected = "its /config describes a model of at least " +
                                 std::to_string(parameters_at_least(wide.model, vocab.size())) +
                                 " parameters, but /model holds " +
                                 std::to_string(stored_elements(dir.file("c.h5"), "model")) +
                                 " values";
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::checkpoint
