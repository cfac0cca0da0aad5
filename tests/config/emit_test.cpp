#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "trainer/config/config.h"

namespace tandem::config {
namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(ToYaml, WritesEveryKeyInShortestExactForm) {
  Config c;
  c.data.corpus = "work/bible/corpus.h5";
  const std::string expected =
      "model:\n  d_model: 256\n  heads: 4\n  encoder_layers: 3\n  decoder_layers: 3\n"
      "  d_ff: 1024\n  dropout: 0.1\n  pre_norm: false\n  tie_embeddings: false\n"
      "  max_positions: 1024\n  activation: relu\n  positions: interleaved\n"
      "data:\n  corpus: work/bible/corpus.h5\n  max_tokens: 4096\n  seed: 1\n  pool_batches: 100\n"
      "  prefetch_steps: 2\n  temperature: 1.0\n  weights: \"\"\n"
      "train:\n  max_steps: 0\n  max_epochs: 0\n  max_minutes: 0.0\n  lr: 0.0003\n"
      "  schedule: constant\n  warmup_steps: 0\n  adam_beta1: 0.9\n  adam_beta2: 0.98\n"
      "  adam_eps: 1.0e-9\n  clip_norm: 1.0\n  label_smoothing: 0.0\n  ema_decay: 0.0\n"
      "  accum_steps: 1\n"
      "  checkpoint_activations: false\n"
      "  seed: 1\n  threads: 1\n  onednn_cache: 0\n  device: auto\n  precision: fp32\n"
      "  alignment:\n    weight: 0.0\n    layer: -1\n    heads: 1\n    shift: false\n"
      "checkpoint:\n  dir: runs/tiny\n  every_steps: 500\n  every_minutes: 0.0\n  keep_last: 5\n"
      "valid:\n  every_steps: 0\n  max_sentences: 0\n  beam: 1\n  metric: bleu\n  patience: 0\n"
      "  samples: 3\n"
      "dist:\n  check_every_steps: 100\n  bucket_mb: 25.0\n  first_bucket_mb: 1.0\n"
      "  timeout_s: 300.0\n  shard_optimizer: false\n  shard_gradients: false\n"
      "log:\n  every_steps: 50\n  tensorboard: true\n  tensorboard_dir: \"\"\n"
      "lora:\n  base: \"\"\n  rank: 8\n  alpha: 16.0\n  dropout: 0.0\n"
      "  targets: q_proj,k_proj,v_proj,out_proj\n  base_precision: fp32\n";
  EXPECT_EQ(to_yaml(c), expected);
}

TEST(ToYaml, WritesAutoMaxTokensAsTheWordAndReadsItBack) {
  Config c;
  c.data.corpus = "c.h5";
  c.data.max_tokens = kAutoMaxTokens;
  const std::string yaml = to_yaml(c);
  EXPECT_NE(yaml.find("  max_tokens: auto\n"), std::string::npos) << yaml;
  EXPECT_EQ(parse_config(yaml, "emitted").data.max_tokens, kAutoMaxTokens);
}

// data.weights and valid.metric are written in their text forms, which read back the same.
TEST(ToYaml, WritesTheCompoundValuesAsTextThatReadsBack) {
  Config c;
  c.data.corpus = "c.h5";
  c.data.weights = {{"en-es", 1.0}, {"web_crawl.v2", 0.1 + 0.2}};
  c.valid.metric = {"es-en", ValidMetric::kChrf};
  const std::string yaml = to_yaml(c);
  EXPECT_NE(yaml.find("  weights: en-es:1,web_crawl.v2:0.30000000000000004\n"), std::string::npos)
      << yaml;
  EXPECT_NE(yaml.find("  metric: es-en_chrf\n"), std::string::npos) << yaml;
  const Config back = parse_config(yaml, "emitted");
  ASSERT_EQ(back.data.weights.size(), 2u);
  EXPECT_EQ(back.data.weights[1].corpus, "web_crawl.v2");
  EXPECT_TRUE(same_bits(back.data.weights[1].weight, 0.1 + 0.2));
  EXPECT_EQ(back.valid.metric.over, "es-en");
  EXPECT_EQ(back.valid.metric.figure, ValidMetric::kChrf);
}

TEST(ToYaml, RoundTripIsBitExact) {
  Config c;
  c.model.d_model = 96;
  c.model.heads = 3;
  c.model.dropout = 1.0 / 3.0;
  c.model.pre_norm = true;
  c.model.tie_embeddings = true;
  c.model.activation = Activation::kSwish;
  c.model.positions = PositionLayout::kHalves;
  c.data.corpus = "dir with: colon/#1 'q'.h5";
  c.data.seed = UINT64_MAX;
  c.train.lr = 0.1 + 0.2;  // 0.30000000000000004 needs all 17 digits
  c.train.max_minutes = 1e300;
  c.train.adam_eps = 5e-324;  // the smallest subnormal
  c.train.adam_beta2 = 0.999;
  c.train.schedule = Schedule::kInverseSqrt;
  c.train.warmup_steps = 7;
  c.train.label_smoothing = -0.0 + 0.1;
  c.checkpoint.dir = "123";  // looks like a number, is a string
  c.train.alignment = {0.1 + 0.2, -2, 3, true};
  const std::string text = to_yaml(c);
  const Config back = parse_config(text, "round-trip");
  EXPECT_EQ(back.model.d_model, 96);
  EXPECT_EQ(back.model.heads, 3);
  EXPECT_TRUE(same_bits(back.model.dropout, c.model.dropout));
  EXPECT_TRUE(back.model.pre_norm);
  EXPECT_TRUE(back.model.tie_embeddings);
  EXPECT_EQ(back.model.activation, Activation::kSwish);
  EXPECT_EQ(back.model.positions, PositionLayout::kHalves);
  EXPECT_EQ(back.data.corpus, c.data.corpus);
  EXPECT_EQ(back.data.seed, UINT64_MAX);
  EXPECT_TRUE(same_bits(back.train.lr, c.train.lr));
  EXPECT_TRUE(same_bits(back.train.max_minutes, 1e300));
  EXPECT_TRUE(same_bits(back.train.adam_eps, 5e-324));
  EXPECT_TRUE(same_bits(back.train.adam_beta2, 0.999));
  EXPECT_EQ(back.train.schedule, Schedule::kInverseSqrt);
  EXPECT_EQ(back.train.warmup_steps, 7);
  EXPECT_EQ(back.checkpoint.dir, "123");
  EXPECT_TRUE(same_bits(back.train.alignment.weight, 0.1 + 0.2));
  EXPECT_EQ(back.train.alignment.layer, -2);
  EXPECT_EQ(back.train.alignment.heads, 3);
  EXPECT_TRUE(back.train.alignment.shift);
  EXPECT_EQ(to_yaml(back), text);
  EXPECT_NE(text.find("  alignment:\n    weight: 0.30000000000000004\n    layer: -2\n"
                      "    heads: 3\n    shift: true\ncheckpoint:\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  lr: 0.30000000000000004\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  dropout: 0.3333333333333333\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  max_minutes: 1.0e+300\n"), std::string::npos) << text;
}

TEST(Emit, WholeNumbersPrintInFullBelowSixteenDigits) {
  Config c;
  c.data.corpus = "corpus.h5";
  c.train.max_minutes = 20;
  c.train.lr = 1500;
  c.train.adam_eps = 1e20;
  const std::string text = to_yaml(c);
  EXPECT_NE(text.find("  max_minutes: 20.0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  lr: 1500.0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  adam_eps: 1.0e+20\n"), std::string::npos) << text;
  EXPECT_EQ(to_yaml(parse_config(text, "emitted")), text);
}

}  // namespace
}  // namespace tandem::config
