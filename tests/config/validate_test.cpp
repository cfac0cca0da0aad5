#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/config/config.h"

namespace tandem::config {
namespace {

Config valid_config() {
  Config c;
  c.data.corpus = "c.h5";
  return c;
}

TEST(Validate, DefaultsWithACorpusAreValid) { EXPECT_NO_THROW(validate(valid_config())); }

TEST(Validate, InverseSqrtWithWarmupIsValid) {
  Config c = valid_config();
  c.train.schedule = Schedule::kInverseSqrt;
  c.train.warmup_steps = 4000;
  EXPECT_NO_THROW(validate(c));
}

TEST(Validate, EachRuleNamesKeyValueAndExpectation) {
  struct Case {
    std::function<void(Config&)> break_it;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](Config& c) { c.model.heads = 3; },
       "model.heads: expected a divisor of model.d_model (256), got 3"},
      {[](Config& c) { c.model.d_model = 0; }, "model.d_model: expected a positive integer, got 0"},
      {[](Config& c) { c.model.heads = 0; }, "model.heads: expected a positive integer, got 0"},
      {[](Config& c) { c.model.encoder_layers = 0; }, "model.encoder_layers: expected a positive"},
      {[](Config& c) { c.model.decoder_layers = -1; }, "model.decoder_layers: expected a positive"},
      {[](Config& c) { c.model.d_ff = 0; }, "model.d_ff: expected a positive integer, got 0"},
      {[](Config& c) { c.model.dropout = 1.0; },
       "model.dropout: expected a number in [0, 1), got 1.0"},
      {[](Config& c) { c.model.dropout = -0.1; },
       "model.dropout: expected a number in [0, 1), got -0.1"},
      {[](Config& c) { c.model.max_positions = 0; },
       "model.max_positions: expected an integer in [1, 65536], got 0"},
      {[](Config& c) { c.model.max_positions = 65537; },
       "model.max_positions: expected an integer in [1, 65536], got 65537"},
      {[](Config& c) { c.data.corpus = ""; }, "data.corpus: expected the path of a corpus"},
      {[](Config& c) { c.data.max_tokens = 0; },
       "data.max_tokens: expected a positive integer or auto, got 0"},
      {[](Config& c) { c.data.pool_batches = 0; }, "data.pool_batches: expected a positive"},
      {[](Config& c) { c.train.max_steps = -1; }, "train.max_steps: expected >= 0"},
      {[](Config& c) { c.train.max_epochs = -1; }, "train.max_epochs: expected >= 0"},
      {[](Config& c) { c.train.max_minutes = -1; }, "train.max_minutes: expected >= 0"},
      {[](Config& c) { c.train.lr = 0; }, "train.lr: expected a positive number, got 0.0"},
      {[](Config& c) { c.dist.shard_gradients = true; },
       "dist.shard_gradients: true needs dist.shard_optimizer: true"},
      {[](Config& c) { c.lora.rank = 0; }, "lora.rank: expected >= 1, got 0"},
      {[](Config& c) { c.lora.alpha = 0; }, "lora.alpha: expected a positive number, got 0.0"},
      {[](Config& c) { c.lora.dropout = 1; }, "lora.dropout: expected a number in [0, 1), got 1.0"},
      {[](Config& c) { c.lora.targets = "q_proj,,v_proj"; },
       "lora.targets: expected layer names separated by commas "
       "(q_proj,k_proj,v_proj,out_proj,fc1,fc2), got 'q_proj,,v_proj'"},
      {[](Config& c) { c.lora.targets = ""; },
       "lora.targets: expected at least one layer name, got ''"},
      {[](Config& c) { c.train.lr = std::nan(""); },
       "train.lr: expected a positive number, got .nan"},
      {[](Config& c) { c.train.warmup_steps = -5; }, "train.warmup_steps: expected >= 0"},
      {[](Config& c) { c.train.schedule = Schedule::kInverseSqrt; },
       "train.warmup_steps: expected >= 1 with schedule inverse_sqrt, got 0"},
      {[](Config& c) { c.train.adam_beta1 = 1; }, "train.adam_beta1: expected a number in [0, 1)"},
      {[](Config& c) { c.train.adam_beta2 = -0.5; },
       "train.adam_beta2: expected a number in [0, 1)"},
      {[](Config& c) { c.train.adam_eps = 0; }, "train.adam_eps: expected a positive number"},
      {[](Config& c) { c.train.clip_norm = -1; }, "train.clip_norm: expected >= 0"},
      {[](Config& c) { c.train.label_smoothing = 1; },
       "train.label_smoothing: expected a number in [0, 1)"},
      {[](Config& c) { c.train.ema_decay = 1; },
       "train.ema_decay: expected a number in [0, 1) (0 disables), got 1.0"},
      {[](Config& c) { c.train.accum_steps = 0; }, "train.accum_steps: expected >= 1, got 0"},
      {[](Config& c) { c.train.threads = 0; }, "train.threads: expected >= 1, got 0"},
      {[](Config& c) { c.train.onednn_cache = -1; },
       "train.onednn_cache: expected >= 0 (0 caches none), got -1"},
      {[](Config& c) { c.checkpoint.dir = ""; }, "checkpoint.dir: expected a directory"},
      {[](Config& c) { c.checkpoint.every_steps = -1; }, "checkpoint.every_steps: expected >= 0"},
      {[](Config& c) { c.checkpoint.keep_last = -1; },
       "checkpoint.keep_last: expected >= 0 (0 keeps all), got -1"},
      {[](Config& c) { c.log.every_steps = 0; }, "log.every_steps: expected >= 1, got 0"},
      {[](Config& c) { c.checkpoint.every_minutes = -1; },
       "checkpoint.every_minutes: expected >= 0 (0 disables)"},
      {[](Config& c) { c.valid.beam = 0; }, "valid.beam: expected >= 1, got 0"},
      {[](Config& c) { c.dist.timeout_s = 0; }, "dist.timeout_s: expected a positive number"},
      {[](Config& c) {
         c.model.d_model = 2;
         c.model.heads = 1;
         c.model.positions = PositionLayout::kFairseq;
       },
       "model.d_model: expected at least 4 with model.positions fairseq, got 2"},
      {[](Config& c) { c.dist.check_every_steps = -5; },
       "dist.check_every_steps: expected >= 0 (0 disables), got -5"},
      {[](Config& c) { c.train.alignment.layer = 3; },
       "train.alignment.layer: expected a decoder layer in [-3, 2] (model.decoder_layers 3; "
       "negative counts from the top), got 3"},
      {[](Config& c) { c.train.alignment.layer = -4; },
       "train.alignment.layer: expected a decoder layer in [-3, 2]"},
      {[](Config& c) { c.train.alignment.heads = 5; },
       "train.alignment.heads: expected a number of heads in [1, 4] (model.heads 4), got 5"},
      {[](Config& c) { c.train.alignment.heads = 0; }, "train.alignment.heads: expected"},
      {[](Config& c) { c.train.alignment.weight = -0.1; },
       "train.alignment.weight: expected a number >= 0 (0: no alignment loss), got -0.1"},
  };
  for (const Case& test_case : cases) {
    SCOPED_TRACE(test_case.message);
    Config c = valid_config();
    test_case.break_it(c);
    try {
      validate(c);
      ADD_FAILURE() << "accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind(test_case.message, 0), 0u) << e.what();
    }
  }
}

TEST(Validate, ZeroMeansNoLimitWhereDocumented) {
  Config c = valid_config();
  c.train.max_steps = 0;
  c.train.max_epochs = 0;
  c.train.max_minutes = 0;
  c.train.clip_norm = 0;
  c.model.dropout = 0;
  c.checkpoint.every_steps = 0;
  c.checkpoint.keep_last = 0;
  EXPECT_NO_THROW(validate(c));
}

}  // namespace
}  // namespace tandem::config
