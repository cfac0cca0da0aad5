#include "trainer/eval/evaluate.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "data/batching/batch.h"
#include "data/batching/batch_plan.h"
#include "data/corpus/language_marks.h"
#include "trainer/common/log.h"
#include "trainer/common/token_ids.h"
#include "trainer/kernels/cpu/denormals.h"
#include "trainer/model/token_loss.h"

namespace tandem::eval {
namespace {

// Index groups of similar length whose padded size stays within max_tokens (the batch plan's cut).
std::vector<std::vector<int64_t>> length_batches(const std::vector<data::SentencePair>& pairs,
                                                 int64_t max_tokens) {
  std::vector<int64_t> padded(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    padded[i] = data::padded_length(static_cast<int32_t>(pairs[i].src.size()),
                                    static_cast<int32_t>(pairs[i].tgt.size()));
  }
  return data::sorted_batches(padded, max_tokens);
}

// The position table bounds what the model can read: longer sequences are cut (BOS/EOS need one
// slot) and counted, rather than failing a whole file for one line.
size_t position_limit(const decode::Ensemble& ensemble) {
  return static_cast<size_t>(ensemble.max_positions() - 1);
}

int64_t truncate(std::vector<int32_t>& sequence, size_t limit) {
  if (sequence.size() <= limit) return 0;
  sequence.resize(limit);
  return 1;
}

void warn_truncated(int64_t count, size_t limit) {
  if (count == 0) return;
  log::warn(std::to_string(count) + " sentence(s) longer than " + std::to_string(limit) +
            " tokens were truncated (model.max_positions)");
}

// Both sides of every pair cut to what the model's positions hold (with one warning).
void truncate_pairs(const decode::Ensemble& ensemble, std::vector<data::SentencePair>& pairs) {
  const size_t limit = position_limit(ensemble);
  int64_t truncated = 0;
  for (auto& pair : pairs) truncated += truncate(pair.src, limit) + truncate(pair.tgt, limit);
  warn_truncated(truncated, limit);
}

// Calls `use(indices, batch)` for each batch of `pairs` (length_batches' cut), its tensors on the
// ensemble's device, in inference (eval mode, no gradients, denormals flushed as beam_search does:
// attention's far keys cost nothing).
template <typename Use>
void for_each_batch(const decode::Ensemble& ensemble, const std::vector<data::SentencePair>& pairs,
                    int64_t max_tokens, Use use) {
  torch::NoGradGuard no_grad;
  const kernels::FlushedDenormals flushed;
  ensemble.eval();
  const torch::Device device = ensemble.device();
  for (const auto& indices : length_batches(pairs, max_tokens)) {
    std::vector<data::SentencePair> chunk;
    for (int64_t i : indices) chunk.push_back(pairs[i]);
    auto batch = data::make_batch(chunk);
    batch.src = batch.src.to(device);
    batch.tgt_in = batch.tgt_in.to(device);
    batch.tgt_out = batch.tgt_out.to(device);
    use(indices, batch);
  }
}

// Calls `score(indices, targets, log_probs)` for each batch of `pairs`: its targets and the
// ensemble's unnormalised log-probabilities [batch, tgt_len, vocab] of them, teacher-forced (a
// log_softmax of them is its distribution).
template <typename Score>
void for_each_forced_batch(const decode::Ensemble& ensemble,
                           const std::vector<data::SentencePair>& pairs, int64_t max_tokens,
                           Score score) {
  for_each_batch(ensemble, pairs, max_tokens,
                 [&](const std::vector<int64_t>& indices, const data::Batch& batch) {
                   std::vector<torch::Tensor> logits;
                   for (auto member : ensemble.models()) {
                     logits.push_back(member->forward(batch.src, batch.tgt_in));
                   }
                   score(indices, batch.tgt_out,
                         decode::combine_log_probs(logits, ensemble.weights()));
                 });
}

}  // namespace

TeacherForced teacher_forced(const decode::Ensemble& ensemble,
                             std::vector<data::SentencePair> pairs, int64_t max_tokens) {
  truncate_pairs(ensemble, pairs);
  torch::Tensor stats;  // [nll sum, tokens, correct], added up on the device, read once
  for_each_forced_batch(ensemble, pairs, max_tokens,
                        [&](const std::vector<int64_t>&, const torch::Tensor& targets,
                            const torch::Tensor& log_probs) {
                          // token_loss normalises what it is given.
                          const auto loss = model::token_loss(log_probs, targets, 0.0);
                          stats = stats.defined() ? stats + loss.stats : loss.stats;
                        });
  const auto counts = stats.defined() ? model::read_token_counts(stats) : model::TokenCounts{};
  const auto tokens = static_cast<double>(counts.tokens);
  TeacherForced out;
  out.tokens = counts.tokens;
  out.loss = tokens > 0 ? counts.nll_sum / tokens : 0;
  out.perplexity = std::exp(std::min(out.loss, 100.0));
  out.accuracy = tokens > 0 ? static_cast<double>(counts.correct) / tokens : 0;
  return out;
}

std::vector<SentenceScore> sentence_scores(const decode::Ensemble& ensemble,
                                           std::vector<data::SentencePair> pairs,
                                           int64_t max_tokens) {
  truncate_pairs(ensemble, pairs);
  std::vector<SentenceScore> scores(pairs.size());
  for_each_forced_batch(
      ensemble, pairs, max_tokens,
      [&](const std::vector<int64_t>& indices, const torch::Tensor& targets,
          const torch::Tensor& log_probs) {
        // [batch, tgt_len]: each target token's log-probability, 0 at padding.
        const auto picked = torch::log_softmax(log_probs.to(torch::kFloat), -1)
                                .gather(-1, targets.unsqueeze(-1).to(torch::kLong))
                                .squeeze(-1);
        const auto real = targets.ne(kPadId);
        const auto totals = picked.masked_fill(real.logical_not(), 0).to(torch::kDouble).sum(-1);
        const auto counts = real.sum(-1).to(torch::kLong);
        const auto total = totals.cpu().contiguous(), count = counts.cpu().contiguous();
        for (size_t row = 0; row < indices.size(); ++row) {
          scores[static_cast<size_t>(indices[row])] = {total.data_ptr<double>()[row],
                                                       count.data_ptr<int64_t>()[row]};
        }
      });
  return scores;
}

std::vector<int32_t> most_attended(const AttentionRows& attention) {
  std::vector<int32_t> best;
  const auto width = static_cast<size_t>(attention.positions);
  for (size_t at = 0; width > 0 && at + width <= attention.rows.size(); at += width) {
    const auto row = attention.rows.begin() + static_cast<std::ptrdiff_t>(at);
    best.push_back(static_cast<int32_t>(
        std::max_element(row, row + static_cast<std::ptrdiff_t>(width)) - row));
  }
  return best;
}

std::vector<AttentionRows> forced_attention(const decode::Ensemble& ensemble,
                                            std::vector<data::SentencePair> pairs,
                                            int64_t max_tokens,
                                            const model::AlignmentHeads& heads) {
  truncate_pairs(ensemble, pairs);
  auto model = ensemble.models().front();
  model::check_alignment_heads(heads, model->options().decoder_layers, model->options().heads);
  std::vector<AttentionRows> out(pairs.size());
  for_each_batch(
      ensemble, pairs, max_tokens,
      [&](const std::vector<int64_t>& indices, const data::Batch& batch) {
        const auto attention = model->cross_attention(batch.src, batch.tgt_in, heads)
                                   .exp()
                                   .to(torch::kCPU, torch::kFloat)
                                   .contiguous();  // [batch, tgt_len, src_len]
        const auto cell = attention.accessor<float, 3>();
        for (size_t row = 0; row < indices.size(); ++row) {
          const auto& pair = pairs[static_cast<size_t>(indices[row])];
          auto& rows = out[static_cast<size_t>(indices[row])];
          rows.positions = static_cast<int64_t>(pair.src.size()) + 1;
          const size_t shift = heads.shift ? 1 : 0;  // the position reading piece t
          for (size_t t = 0; t < pair.tgt.size(); ++t) {
            const float* first = cell[row][t + shift].data();  // its source positions, in order
            rows.rows.insert(rows.rows.end(), first, first + rows.positions);
          }
        }
      });
  return out;
}

std::vector<std::vector<Translation>> translate_tokens_nbest(
    const decode::Ensemble& ensemble, const data::Vocab& vocab,
    std::vector<std::vector<int32_t>> sources, const decode::DecodeOptions& options,
    const std::vector<decode::RowInput>& rows) {
  ensemble.eval();
  const size_t limit = position_limit(ensemble);
  int64_t truncated = 0;
  for (auto& source : sources) truncated += truncate(source, limit);
  warn_truncated(truncated, limit);
  std::vector<std::vector<Translation>> out;
  out.reserve(sources.size());
  for (const auto& hypotheses : decode::translate_nbest(ensemble, sources, options, rows)) {
    out.emplace_back();
    for (const auto& h : hypotheses) {
      Translation translation{"", h.score, h.normalized, {}, {}, h.attended};
      if (options.alignment) translation.tokens = h.tokens;
      translation.text = vocab.decode(h.tokens, data::Side::kTarget,
                                      options.alignment ? &translation.words : nullptr);
      out.back().push_back(std::move(translation));
    }
  }
  return out;
}

std::vector<std::string> translate_tokens(const decode::Ensemble& ensemble,
                                          const data::Vocab& vocab,
                                          std::vector<std::vector<int32_t>> sources,
                                          const decode::DecodeOptions& options,
                                          const std::vector<decode::RowInput>& rows) {
  decode::DecodeOptions best = options;
  best.nbest = 1;
  std::vector<std::string> out;
  out.reserve(sources.size());
  for (auto& translations :
       translate_tokens_nbest(ensemble, vocab, std::move(sources), best, rows)) {
    out.push_back(std::move(translations.front().text));
  }
  return out;
}

Evaluation evaluate(const decode::Ensemble& ensemble, const data::Vocab& vocab,
                    const std::vector<data::SentencePair>& pairs,
                    const std::vector<std::string>& references, int64_t max_tokens,
                    const decode::DecodeOptions& options) {
  Evaluation out;
  out.forced = teacher_forced(ensemble, pairs, max_tokens);
  std::vector<std::vector<int32_t>> sources;
  sources.reserve(pairs.size());
  for (const auto& pair : pairs) sources.push_back(pair.src);
  out.hypotheses = translate_tokens(ensemble, vocab, sources, options,
                                    decode::first_token_rows(data::target_codes(vocab, pairs)));
  out.bleu = corpus_bleu(out.hypotheses, references);
  out.chrf = corpus_chrf(out.hypotheses, references);
  return out;
}

}  // namespace tandem::eval
