// What the decoding tests share: tiny models (random, or briefly trained to reverse word
// sequences), source batches, and reference decoders that re-run the full decoder on the whole
// prefix for every hypothesis (no cache, no batching) — the obvious algorithms to compare against.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "trainer/decode/beam.h"

namespace tandem::decode::fixtures {

constexpr int64_t kVocab = 24;
constexpr int64_t kFirstWord = 4;  // ids below are pad, unk, bos, eos

inline model::TransformerOptions tiny_options() {
  model::TransformerOptions o;
  o.vocab_size = kVocab;
  o.d_model = 16;
  o.heads = 2;
  o.encoder_layers = 2;
  o.decoder_layers = 2;
  o.d_ff = 32;
  o.dropout = 0.0;
  o.max_positions = 64;
  return o;
}

// A random tiny model whose EOS bias makes sentences end after different numbers of steps.
inline model::Transformer tiny_model(double eos_bias) {
  torch::manual_seed(17);
  model::Transformer model(tiny_options());
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    if (item.key() == "output_proj.bias") item.value()[kEosId].fill_(eos_bias);
  }
  model->eval();
  return model;
}

inline std::vector<int32_t> random_sentence(int64_t len) {
  auto t = torch::randint(kFirstWord, kVocab, {len}, torch::kInt);
  return std::vector<int32_t>(t.data_ptr<int32_t>(), t.data_ptr<int32_t>() + len);
}

inline std::vector<std::vector<int32_t>> random_sentences(const std::vector<int64_t>& lengths) {
  std::vector<std::vector<int32_t>> out;
  for (int64_t len : lengths) out.push_back(random_sentence(len));
  return out;
}

// sentence + EOS → [1, len + 1] int64.
inline torch::Tensor source_row(const std::vector<int32_t>& sentence) {
  std::vector<int64_t> ids(sentence.begin(), sentence.end());
  ids.push_back(kEosId);
  return torch::tensor(ids, torch::kLong).unsqueeze(0);
}

// Rows right-padded with kPadId → [rows, longest + 1].
inline torch::Tensor source_batch(const std::vector<std::vector<int32_t>>& sentences) {
  std::vector<torch::Tensor> rows;
  int64_t width = 0;
  for (const auto& s : sentences) {
    rows.push_back(source_row(s)[0]);
    width = std::max(width, rows.back().size(0));
  }
  auto batch = torch::full({static_cast<int64_t>(rows.size()), width}, kPadId, torch::kLong);
  for (size_t i = 0; i < rows.size(); ++i) batch[i].slice(0, 0, rows[i].size(0)).copy_(rows[i]);
  return batch;
}

// beam_search's rows with `first_tokens` (none: none) and `constraints` (none: none), one per
// entry.
inline std::vector<RowInput> row_inputs(const std::vector<int32_t>& first_tokens,
                                        const std::vector<Constraints>& constraints) {
  auto rows = first_token_rows(first_tokens);
  rows.resize(std::max(rows.size(), constraints.size()));
  for (size_t i = 0; i < constraints.size(); ++i) rows[i].constraints = constraints[i];
  return rows;
}

// A model briefly trained (Adam, a few seconds) to write its source words in reverse order: good
// enough that its translations are mostly right, unsure enough that beam search matters.
inline model::Transformer reverse_model(int steps) {
  torch::manual_seed(5);
  auto options = tiny_options();
  options.d_model = 32;
  options.d_ff = 64;
  options.encoder_layers = 1;
  options.decoder_layers = 1;
  model::Transformer model(options);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(3e-3));
  model->train();
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<int32_t>> src, tgt_in, tgt_out;
    for (int row = 0; row < 32; ++row) {
      src.push_back(random_sentence(torch::randint(2, 9, {1}).item<int64_t>()));
      std::vector<int32_t> reversed(src.back().rbegin(), src.back().rend());
      tgt_in.push_back(reversed);
      tgt_in.back().insert(tgt_in.back().begin(), static_cast<int32_t>(kBosId));
      tgt_out.push_back(reversed);
    }
    // source_batch appends EOS: right for src and tgt_out; tgt_in's becomes padding (the
    // longest row's is cut), so each tgt_in row is BOS + words, aligned with words + EOS.
    auto out = source_batch(tgt_out);
    auto in = source_batch(tgt_in).slice(1, 0, out.size(1));
    in.masked_fill_(in.eq(kEosId), kPadId);
    auto logits = model->forward(source_batch(src), in);
    auto loss = torch::nn::functional::cross_entropy(
        logits.reshape({-1, kVocab}), out.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(kPadId));
    adam.zero_grad();
    loss.backward();
    adam.step();
  }
  model->eval();
  return model;
}

// reverse_model(150), trained once per test binary (about a second) for the suites that share it.
inline model::Transformer& trained_model() {
  static model::Transformer model = reverse_model(150);
  return model;
}

// The most steps a sentence of `len` words may take (DecodeOptions' rule, clamped).
inline int64_t step_limit(size_t len, const DecodeOptions& options, int64_t max_positions) {
  auto limit = static_cast<int64_t>(std::floor(options.max_len_a * static_cast<double>(len + 1))) +
               options.max_len_b;
  return std::clamp<int64_t>(limit, 1, max_positions);
}

// log-probabilities [vocab] of the token after `prefix` (without BOS), from the full decoder.
inline torch::Tensor next_logp(model::Transformer& model, const torch::Tensor& src,
                               const std::vector<int32_t>& prefix) {
  std::vector<int64_t> ids = {kBosId};
  ids.insert(ids.end(), prefix.begin(), prefix.end());
  auto tgt = torch::tensor(ids, torch::kLong).unsqueeze(0);
  return torch::log_softmax(model->forward(src, tgt)[0][-1], -1).to(torch::kDouble);
}

// An ensemble's scores of the token after `prefix`: the weighted sum of its models' next_logp.
inline torch::Tensor ensemble_next_logp(const Ensemble& ensemble, const torch::Tensor& src,
                                        const std::vector<int32_t>& prefix) {
  torch::Tensor sum = torch::zeros({ensemble.vocab_size()}, torch::kDouble);
  for (size_t i = 0; i < ensemble.models().size(); ++i) {
    auto model = ensemble.models()[i];
    sum += next_logp(model, src, prefix) * ensemble.weights()[i];
  }
  return sum;
}

// Whether decoding may emit `token`: never <pad> or <s> (DecodeOptions).
inline bool emittable(int64_t token) { return token != kPadId && token != kBosId; }

// The obvious greedy algorithm: argmax of the last position (over the emittable tokens, EOS
// among them once min_len tokens are out) until EOS or max_steps steps.
inline Hypothesis naive_greedy(model::Transformer& model, const std::vector<int32_t>& sentence,
                               int64_t max_steps, int64_t min_len = DecodeOptions().min_len) {
  torch::NoGradGuard no_grad;
  auto src = source_row(sentence);
  Hypothesis hyp;
  for (int64_t step = 0; step < max_steps; ++step) {
    auto logp = next_logp(model, src, hyp.tokens);
    int64_t best = -1;
    for (int64_t token = 0; token < logp.size(0); ++token) {
      const bool banned = token == kEosId && static_cast<int64_t>(hyp.tokens.size()) < min_len;
      if (emittable(token) && !banned &&
          (best < 0 || logp[token].item<double>() > logp[best].item<double>())) {
        best = token;
      }
    }
    hyp.score += logp[best].item<double>();
    if (best == kEosId) {
      hyp.ended = true;
      break;
    }
    hyp.tokens.push_back(static_cast<int32_t>(best));
  }
  return hyp;
}

// A copy of `model` (its options and parameter values) in eval mode, frozen in `precision`, as
// the decoding tools prepare a model; checks that freezing left the parameters as they were.
inline model::Transformer frozen_copy(const model::Transformer& model,
                                      kernels::InferencePrecision precision) {
  model::Transformer copy(model->options());
  {
    torch::NoGradGuard no_grad;
    auto from = model->parameters(), to = copy->parameters();
    for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
  }
  copy->eval();
  copy->freeze(precision);
  EXPECT_EQ(copy->frozen(), precision);
  auto original = model->parameters(), kept = copy->parameters();
  for (size_t i = 0; i < original.size(); ++i) {
    EXPECT_TRUE(torch::equal(original[i], kept[i])) << "parameter " << i;
  }
  return copy;
}

// 60 random sentences of 2 to 8 words (from `seed`), their source batch, and a teacher-forced
// target prefix of 4 positions (BOS, then source words; EOS turned to padding) to compare logits.
struct ProbeBatch {
  std::vector<std::vector<int32_t>> sentences;
  torch::Tensor src, tgt;
};

inline ProbeBatch probe_batch(uint64_t seed) {
  torch::manual_seed(seed);
  ProbeBatch probe;
  for (int i = 0; i < 60; ++i) probe.sentences.push_back(random_sentence(2 + i % 7));
  probe.src = source_batch(probe.sentences);
  probe.tgt = probe.src.narrow(1, 0, 4).clone();
  probe.tgt.select(1, 0).fill_(kBosId);
  probe.tgt.masked_fill_(probe.tgt.eq(kEosId), kPadId);
  return probe;
}

// Beam search as DecodeOptions documents it, for one sentence, written for clarity: every
// (hypothesis, emittable token) pair is scored and sorted (EOS emittable once a hypothesis has
// min_len tokens); EOS among the first K finish (up to K in all),
// the first K others live on; done at K finished or at max_steps, where the live ones finish
// unterminated; the n best by score / length^alpha. An ensemble scores a token by the weighted sum
// of its models' log-probabilities.
// With `first_token` >= 0 every hypothesis starts with that token at no score (one live
// hypothesis after step 1), and min_len counts the tokens after it.
inline std::vector<Hypothesis> naive_beam(const Ensemble& ensemble,
                                          const std::vector<int32_t>& sentence,
                                          const DecodeOptions& options, int64_t max_steps,
                                          int32_t first_token = -1) {
  torch::NoGradGuard no_grad;
  const auto src = source_row(sentence);
  const auto k = static_cast<size_t>(options.beam_size);
  std::vector<Hypothesis> live(1), finished;
  int64_t step = 1, min_len = options.min_len;
  if (first_token >= 0) {
    live[0].tokens = {first_token};
    step = 2;
    min_len += 1;
  }
  for (; step <= max_steps && finished.size() < k; ++step) {
    std::vector<Hypothesis> candidates;
    for (const auto& hyp : live) {
      auto logp = ensemble_next_logp(ensemble, src, hyp.tokens);
      for (int64_t token = 0; token < logp.size(0); ++token) {
        if (!emittable(token)) continue;
        if (token == kEosId && static_cast<int64_t>(hyp.tokens.size()) < min_len) continue;
        Hypothesis c = hyp;
        c.score += logp[token].item<double>();
        c.ended = token == kEosId;
        if (!c.ended) c.tokens.push_back(static_cast<int32_t>(token));
        candidates.push_back(std::move(c));
      }
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
    std::vector<Hypothesis> next;
    for (size_t rank = 0; next.size() < k; ++rank) {
      if (!candidates[rank].ended) {
        next.push_back(candidates[rank]);
      } else if (rank < k && finished.size() < k) {
        finished.push_back(candidates[rank]);
      }
    }
    if (step == max_steps && finished.size() < k) {
      finished.insert(finished.end(), next.begin(), next.end());
    }
    live = std::move(next);
  }
  for (auto& h : finished) {
    h.normalized =
        h.score / std::pow(static_cast<double>(hypothesis_length(h)), options.length_penalty);
  }
  std::stable_sort(finished.begin(), finished.end(), [](const Hypothesis& a, const Hypothesis& b) {
    return a.normalized > b.normalized;
  });
  finished.resize(std::min(finished.size(), static_cast<size_t>(options.nbest)));
  return finished;
}

inline void expect_same(const Hypothesis& actual, const Hypothesis& expected,
                        const std::string& what) {
  EXPECT_EQ(actual.tokens, expected.tokens) << what;
  EXPECT_NEAR(actual.score, expected.score, 1e-4) << what;
  EXPECT_EQ(actual.ended, expected.ended) << what;
}

}  // namespace tandem::decode::fixtures
