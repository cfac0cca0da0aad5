// The decoding flags tandem-decode and tandem-eval share, so both translate with the same options
// and defaults (those of decode::DecodeOptions) and describe them alike in --help; and the choice
// of a checkpoint's weights.
#pragma once

#include <CLI/CLI.hpp>

#include "trainer/decode/beam.h"
#include "trainer/train/model_io.h"

namespace tandem::tools {

inline void add_decode_flags(CLI::App& app, decode::DecodeOptions& options) {
  app.add_option("--beam", options.beam_size,
                 "beam size (Vaswani et al. 2017 used 4); 1 is greedy decoding")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option(
         "--lenpen", options.length_penalty,
         "length penalty alpha: finished hypotheses are ranked by log-probability / "
         "length^alpha, length counting EOS (fairseq's --lenpen; 1 = mean per token, 0 = sum)")
      ->capture_default_str();
  app.add_option("--batch-tokens", options.batch_tokens, "source tokens per decoding batch")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-len-a", options.max_len_a,
                 "at most a * source length + b decoding steps (an emitted EOS is one; source "
                 "length counts its EOS)")
      ->capture_default_str();
  app.add_option("--max-len-b", options.max_len_b, "see --max-len-a")->capture_default_str();
}

// --raw-weights: the checkpoint's weights as training left them rather than their moving average.
inline void add_weights_flag(CLI::App& app, train::Weights& weights) {
  app.add_flag_callback(
      "--raw-weights", [&weights] { weights = train::Weights::kRaw; },
      "translate with the weights as the last training step left them, not their exponential "
      "moving average (the default when the checkpoint holds one: train.ema_decay > 0)");
}

}  // namespace tandem::tools
