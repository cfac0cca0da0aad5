#include "trainer/decode/beam.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>

#include "trainer/decode/beams.h"
#include "trainer/decode/constrained_step.h"
#include "trainer/decode/output_columns.h"
#include "trainer/decode/top_log_probs.h"
#include "trainer/kernels/cpu/denormals.h"

namespace tandem::decode {
namespace {

template <typename T>
void require(bool ok, const std::string& field, T value, const std::string& expected) {
  if (!ok) {
    std::ostringstream message;
    message << "DecodeOptions." << field << " = " << value << ": expected " << expected;
    throw std::invalid_argument(message.str());
  }
}

// Per row, the most decoding steps it may take: a * (non-pad source length) + b, at least 1 and
// at most the model's position table.
std::vector<int64_t> step_limits(const torch::Tensor& src, const DecodeOptions& options,
                                 int64_t max_positions) {
  auto lengths = src.ne(kPadId).sum(1).to(torch::kCPU, torch::kLong);
  auto length = lengths.accessor<int64_t, 1>();
  std::vector<int64_t> limits(lengths.size(0));
  for (size_t row = 0; row < limits.size(); ++row) {
    auto limit =
        static_cast<int64_t>(std::floor(options.max_len_a * length[row])) + options.max_len_b;
    limits[row] = std::clamp<int64_t>(limit, 1, max_positions);
  }
  return limits;
}

// Every sentence of a batch of `batch`, each with one empty hypothesis of score 0.
Beams start_beams(int64_t batch) {
  Beams beams;
  beams.sentence.resize(batch);
  std::iota(beams.sentence.begin(), beams.sentence.end(), 0);
  beams.tokens.resize(batch);
  beams.scores.assign(batch, 0.0);
  return beams;
}

// Whether a step's search takes the loops over rows' best tokens (log-probabilities, tokens or
// columns): contiguous float and int64 on the CPU; elsewhere tensor ops, which a GPU keeps there.
bool loops_apply(const torch::Tensor& logp, const torch::Tensor& tokens) {
  return logp.is_cpu() && logp.scalar_type() == torch::kFloat && logp.is_contiguous() &&
         tokens.is_contiguous();
}

// Each row's best tokens for a step: its 2K + `extra` best and as many more as are never taken
// (<pad> and <s>, and EOS before the minimum length), those put out of reach (-inf); extra makes
// room for tokens a row's avoid phrases ban. → (log-probabilities [rows, n] float, tokens
// [rows, n]) on the logits' device.
std::pair<torch::Tensor, torch::Tensor> row_tops(const std::vector<torch::Tensor>& logits,
                                                 const std::vector<double>& weights,
                                                 const OutputColumns& columns, int64_t beam,
                                                 bool ban_eos, int64_t extra = 0) {
  // Only a row's own 2K best tokens can be among its sentence's 2K best candidates, <pad> and <s>
  // aside: never a continuation (as a MarianMT model's bad_words_ids bans its pad, which is an
  // imported model's <s>), so two more are taken and those two put out of reach; and EOS too
  // before the minimum length, with one more.
  const int64_t banned = ban_eos ? 3 : 2;
  const int64_t per_row = std::min<int64_t>(2 * beam + banned + extra, logits.front().size(1));
  auto [row_logp, row_column] = top_log_probs(logits, weights, per_row);
  if (loops_apply(row_logp, row_column)) {
    // The same as the tensor ops below in a loop: at one row a step those were a tenth of it.
    float* logp = row_logp.data_ptr<float>();
    int64_t* token = row_column.data_ptr<int64_t>();
    for (int64_t i = 0; i < row_column.numel(); ++i) {
      token[i] = columns.id_of(token[i]);
      if (token[i] == kPadId || token[i] == kBosId || (ban_eos && token[i] == kEosId)) {
        logp[i] = -INFINITY;
      }
    }
    return {row_logp, row_column};
  }
  auto row_token = columns.to_ids(row_column);
  auto out_of_reach = row_token.eq(kPadId).logical_or(row_token.eq(kBosId));
  if (ban_eos) out_of_reach.logical_or_(row_token.eq(kEosId));
  row_logp.masked_fill_(out_of_reach, -INFINITY);
  return {row_logp, row_token};
}

// One step's best continuations from the rows' best tokens: per active sentence the 2K best
// (hypothesis, token) pairs by summed score, best first, as [sentences, 3, 2K] double on the CPU
// holding (score, token, row of the parent within its sentence). One transfer, so the host waits
// once per step.
torch::Tensor best_of(const torch::Tensor& row_logp, const torch::Tensor& row_token,
                      const Beams& beams, int64_t beam) {
  const auto sentences = static_cast<int64_t>(beams.sentence.size());
  const int64_t per_row = row_logp.size(1);
  auto prior = torch::tensor(beams.scores, torch::kDouble).to(row_logp.device()).unsqueeze(1);
  // Scores are sums of per-step float log-probabilities, added in double in step order.
  auto total = (prior + row_logp.to(torch::kDouble)).view({sentences, -1});
  auto [best, flat] = total.topk(std::min<int64_t>(2 * beam, total.size(1)), -1);
  auto token = row_token.view({sentences, -1}).gather(1, flat);
  auto parent = flat.div(per_row, "floor");
  return torch::stack({best, token.to(torch::kDouble), parent.to(torch::kDouble)}, 1)
      .to(torch::kCPU);
}

// Per active sentence its candidates from a step's [sentences, 3, n] choice, in that order.
std::vector<std::vector<Candidate>> candidates_of(const torch::Tensor& choice) {
  auto cell = choice.accessor<double, 3>();
  std::vector<std::vector<Candidate>> out(choice.size(0));
  for (int64_t i = 0; i < choice.size(0); ++i) {
    for (int64_t r = 0; r < choice.size(2); ++r) {
      out[i].push_back({cell[i][0][r], static_cast<int32_t>(cell[i][1][r]),
                        static_cast<int64_t>(cell[i][2][r]), {}});
    }
  }
  return out;
}

// best_of's candidates, best first, from row_tops' tensors: on the CPU by a loop over them (the
// same sums; equal scores keep their rows' order, where topk leaves it open), elsewhere by
// best_of's tensor ops and one transfer.
std::vector<std::vector<Candidate>> best_candidates(const torch::Tensor& row_logp,
                                                    const torch::Tensor& row_token,
                                                    const Beams& beams, int64_t beam) {
  if (!loops_apply(row_logp, row_token)) {
    return candidates_of(best_of(row_logp, row_token, beams, beam));
  }
  const auto sentences = static_cast<int64_t>(beams.sentence.size());
  const int64_t per_row = row_logp.size(1), n = row_logp.numel() / sentences;
  const int64_t kept = std::min<int64_t>(2 * beam, n);
  const float* logp = row_logp.data_ptr<float>();
  const int64_t* token = row_token.data_ptr<int64_t>();
  std::vector<std::vector<Candidate>> out(sentences);
  std::vector<double> total(n);
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < sentences; ++i) {
    // Sentence i's n candidates start at row i n / per_row; each scores its row's prior plus its
    // log-probability, added in double as best_of adds them.
    const int64_t first = i * n;
    for (int64_t f = 0; f < n; ++f) {
      total[f] = beams.scores[(first + f) / per_row] + static_cast<double>(logp[first + f]);
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + kept, order.end(), [&](int64_t a, int64_t b) {
      return total[a] > total[b] || (total[a] == total[b] && a < b);
    });
    for (int64_t r = 0; r < kept; ++r) {
      const int64_t f = order[r];
      out[i].push_back(
          {total[f], static_cast<int32_t>(token[first + f]), f / per_row, ConstraintState{}});
    }
  }
  return out;
}

// One step's draws when sampling (beam size 1): per active sentence its drawn token, in
// best_candidates' form [sentences, 3, 1]: (score, token, parent 0).
torch::Tensor sampled_candidates(const std::vector<torch::Tensor>& logits,
                                 const std::vector<double>& weights, const OutputColumns& columns,
                                 const Beams& beams, bool ban_eos, const DecodeOptions& options,
                                 const std::vector<int64_t>& streams, int64_t step) {
  const auto sentences = static_cast<int64_t>(beams.sentence.size());
  auto log_probs =
      torch::log_softmax(combine_log_probs(logits, weights).to(torch::kCPU, torch::kDouble), -1);
  for (const int64_t never : {kPadId, kBosId, ban_eos ? kEosId : kPadId}) {
    const int64_t column = columns.column_of(never);
    if (column >= 0) log_probs.select(1, column).fill_(-INFINITY);
  }
  std::vector<double> u;
  for (const int64_t sentence : beams.sentence) {
    u.push_back(sampling_uniform(options.sampling.seed, streams[sentence], step));
  }
  const auto tokens = draw_tokens(log_probs, options.sampling, u);
  auto out = torch::zeros({sentences, 3, 1}, torch::kDouble);
  auto cell = out.accessor<double, 3>();
  auto logp = log_probs.accessor<double, 2>();
  for (int64_t i = 0; i < sentences; ++i) {
    cell[i][0][0] = beams.scores[i] + logp[i][tokens[i]];
    cell[i][1][0] = static_cast<double>(columns.id_of(tokens[i]));
  }
  return out;
}

// `given` (rows of beam_search's) is empty or one per row; std::invalid_argument otherwise.
void check_row_count(size_t given, const char* what, int64_t rows) {
  if (given != 0 && static_cast<int64_t>(given) != rows) {
    throw std::invalid_argument("beam_search: " + std::to_string(given) + " " + what + " for " +
                                std::to_string(rows) + " rows");
  }
}

// Each row's sampling stream: the given ones, or the row's index.
std::vector<int64_t> row_streams(const std::vector<int64_t>& given, int64_t rows) {
  check_row_count(given.size(), "streams", rows);
  if (!given.empty()) return given;
  std::vector<int64_t> streams(rows);
  std::iota(streams.begin(), streams.end(), 0);
  return streams;
}

// The first step with each row's token forced (beam_search's first_tokens): the models read
// `bos` as always, and every hypothesis starts with its row's token at score 0. → the next
// step's input, those tokens.
torch::Tensor force_first_tokens(std::vector<model::Transformer>& models,
                                 std::vector<model::DecoderState>& states, const torch::Tensor& bos,
                                 const std::vector<int32_t>& first_tokens, Beams& beams) {
  for (size_t i = 0; i < models.size(); ++i) models[i]->decode_step(bos, states[i]);
  for (size_t row = 0; row < first_tokens.size(); ++row) beams.tokens[row] = {first_tokens[row]};
  return torch::tensor(std::vector<int64_t>(first_tokens.begin(), first_tokens.end()), torch::kLong)
      .to(bos.device());
}

// A step's log-probabilities are at most this above 0 (the normaliser's rounding), so that a
// hypothesis' score bounds its descendants' scores with this much slack per step.
constexpr double kLogProbSlack = 1e-5;

// Whether no live hypothesis of a sentence can still enter its n best finished ones: a descendant
// of a live hypothesis with `tokens` tokens and score s ends with at most tokens + 1 .. limit
// tokens and a score of at most s (log-probabilities are <= 0), so its normalised score is at
// most the larger of s / length^alpha at those two ends (monotonic in between). Results are then
// what searching on until K had finished would return, in fewer steps.
bool settled(const std::vector<Hypothesis>& finished, const std::vector<double>& live_scores,
             int64_t tokens, int64_t limit, const DecodeOptions& options) {
  if (static_cast<int64_t>(finished.size()) < options.nbest) return false;
  std::vector<double> scores;
  for (const auto& h : finished) scores.push_back(normalized_score(h, options.length_penalty));
  std::nth_element(scores.begin(), scores.begin() + (options.nbest - 1), scores.end(),
                   std::greater<>());
  const double nth_best = scores[options.nbest - 1];
  const double slack = kLogProbSlack * static_cast<double>(limit - tokens);
  for (const double score : live_scores) {
    const double bound =
        std::max(normalized_score(score + slack, tokens + 1, options.length_penalty),
                 normalized_score(score + slack, limit, options.length_penalty));
    if (!(bound < nth_best)) return false;
  }
  return true;
}

// Advances one sentence by its candidates (in the order they are taken): EOS among the first K
// finish, the first K others become its next live beam (appended to `next`, their parents' state
// rows to `rows`), unless the sentence is done.
void advance_sentence(const Beams& beams, int64_t index, const std::vector<Candidate>& candidates,
                      const DecodeOptions& options, int64_t step, int64_t limit,
                      std::vector<Hypothesis>& finished, Beams& next, std::vector<int64_t>& rows) {
  const int64_t beam = options.beam_size;
  std::vector<const Candidate*> live;
  for (size_t r = 0; r < candidates.size() && static_cast<int64_t>(live.size()) < beam; ++r) {
    const auto& c = candidates[r];
    if (c.token == kEosId) {
      // An EOS ranked past K would not have taken a beam slot, so it is not a result either. (One
      // banned before the minimum length ranks after at least 2K - 1 others, so never among K.)
      if (static_cast<int64_t>(r) < beam && static_cast<int64_t>(finished.size()) < beam) {
        finished.push_back({beams.tokens[index * beams.width + c.parent], c.score, true});
      }
      continue;
    }
    live.push_back(&c);
  }
  if (static_cast<int64_t>(finished.size()) >= beam) return;
  auto prefix = [&](const Candidate& c) {
    auto tokens = beams.tokens[index * beams.width + c.parent];
    tokens.push_back(c.token);
    return tokens;
  };
  if (step >= limit) {
    for (const auto* c : live) finished.push_back({prefix(*c), c->score, false});
    return;
  }
  if (live.empty()) return;  // every candidate ended (constrained search only)
  std::vector<double> live_scores;
  for (const auto* c : live) live_scores.push_back(c->score);
  if (settled(finished, live_scores, step, limit, options)) return;
  next.sentence.push_back(beams.sentence[index]);
  for (const auto* c : live) {
    next.tokens.push_back(prefix(*c));
    next.scores.push_back(c->score);
    if (!beams.standing.empty()) next.standing.push_back(c->standing);
    rows.push_back(index * beams.width + c->parent);
  }
}

// Applies one step to every active sentence; returns the state rows the next step keeps, in order.
std::vector<int64_t> advance(Beams& beams, const std::vector<std::vector<Candidate>>& candidates,
                             int64_t step, const std::vector<int64_t>& limits,
                             const DecodeOptions& options,
                             std::vector<std::vector<Hypothesis>>& finished) {
  Beams next;
  next.width = options.beam_size;
  std::vector<int64_t> rows;
  for (size_t i = 0; i < beams.sentence.size(); ++i) {
    const int64_t sentence = beams.sentence[i];
    advance_sentence(beams, static_cast<int64_t>(i), candidates[i], options, step,
                     limits[sentence], finished[sentence], next, rows);
  }
  beams = std::move(next);
  return rows;
}

// Normalises the scores, sorts best first and keeps the n best.
void rank(std::vector<Hypothesis>& hyps, const DecodeOptions& options) {
  for (auto& h : hyps) h.normalized = normalized_score(h, options.length_penalty);
  std::stable_sort(hyps.begin(), hyps.end(), [](const Hypothesis& a, const Hypothesis& b) {
    return a.normalized > b.normalized;
  });
  if (static_cast<int64_t>(hyps.size()) > options.nbest) hyps.resize(options.nbest);
}

// What every step of one beam_search call shares.
struct Step {
  const std::vector<double>& weights;
  const DecodeOptions& options;
  int64_t min_len;  // tokens before EOS may end a hypothesis, a forced first token included
  const std::vector<int64_t>& streams;
  const std::vector<Constraints>& constraints;  // empty, or one per input row
  const std::vector<int64_t>& limits;           // per input row
  const OutputColumns& columns;                 // what the logits' columns are
};

// A step of a batch whose sentences carry constraints (constrained_step.h): theirs chosen bank
// by bank, the others' as best_of chooses them.
std::vector<std::vector<Candidate>> with_constraints(const std::vector<torch::Tensor>& logits,
                                                     const Beams& beams, int64_t step,
                                                     const Step& how) {
  const bool ban_eos = step <= how.min_len;
  const int64_t beam = how.options.beam_size;
  ConstrainedStep known;
  known.banned = avoid_bans(beams, how.constraints);
  size_t most_banned = 0;
  for (const auto& banned : known.banned) most_banned = std::max(most_banned, banned.size());
  auto [logp, token] =
      row_tops(logits, how.weights, how.columns, beam, ban_eos, static_cast<int64_t>(most_banned));
  auto out = best_candidates(logp, token, beams, beam);
  known.logp = logp.to(torch::kCPU);
  known.token = token.to(torch::kCPU);
  known.needed = needed_log_probs(logits, how.weights, how.columns, beams, how.constraints);
  for (size_t i = 0; i < beams.sentence.size(); ++i) {
    const auto sentence = beams.sentence[i];
    const auto& mine = how.constraints[sentence];
    if (mine.empty()) continue;
    out[i] = constrained_candidates(known, beams, static_cast<int64_t>(i), mine, beam, ban_eos,
                                    how.limits[sentence] - step);
  }
  return out;
}

// One step's candidates for every active sentence, in the order advance() takes them.
std::vector<std::vector<Candidate>> step_candidates(const std::vector<torch::Tensor>& logits,
                                                    const Beams& beams, int64_t step,
                                                    const Step& how) {
  // Step s adds a hypothesis' s-th token: EOS may end it there once s - 1 >= min_len.
  const bool ban_eos = step <= how.min_len;
  if (how.options.sampling.kind != SamplingKind::kNone) {
    return candidates_of(
        sampled_candidates(logits, how.weights, how.columns, beams, ban_eos, how.options,
                           how.streams, step));
  }
  if (!beams.standing.empty()) return with_constraints(logits, beams, step, how);
  auto [logp, token] = row_tops(logits, how.weights, how.columns, how.options.beam_size, ban_eos);
  return best_candidates(logp, token, beams, how.options.beam_size);
}

// Per row, the most decoding steps it may take: step_limits, at least 2 with a forced first
// token (it and one after it), and room for the row's include phrases on top.
std::vector<int64_t> sentence_limits(const torch::Tensor& src, const DecodeOptions& options,
                                     int64_t max_positions, bool forced,
                                     const std::vector<Constraints>& constraints) {
  auto limits = step_limits(src, options, max_positions);
  for (size_t row = 0; row < limits.size(); ++row) {
    auto& limit = limits[row];
    if (forced) limit = std::max<int64_t>(limit, 2);
    if (!constraints.empty()) limit += constraints[row].include_tokens();
    limit = std::min(limit, max_positions);
  }
  return limits;
}

// beam_search's constraints checked (none, or one per row, each as check_constraints wants, and
// not with sampling). → whether any row has any.
bool constrained_rows(const std::vector<Constraints>& constraints, int64_t rows,
                      const DecodeOptions& options, const Ensemble& ensemble, bool forced) {
  check_row_count(constraints.size(), "constraint sets", rows);
  const bool any =
      check_constraints(constraints, ensemble.vocab_size(), ensemble.max_positions(), forced);
  if (any && options.sampling.kind != SamplingKind::kNone) {
    throw std::invalid_argument(
        "beam_search: constraints need search, not sampling (give no sampling)");
  }
  return any;
}

// Each model's decoder state for the encoded batch `src`, with room for `rows` rows of `steps`
// positions, its output layer on `columns` when a shortlist gives them.
std::vector<model::DecoderState> start_states(std::vector<model::Transformer>& models,
                                              const torch::Tensor& src, int64_t rows,
                                              int64_t steps, const OutputColumns& columns) {
  std::vector<model::DecoderState> states;
  for (auto& model : models) {
    states.push_back(model->start_decoding(model->encode(src), src));
    states.back().reserve(rows, steps);
    if (columns.ids.defined()) model->restrict_output(states.back(), columns.ids);
  }
  return states;
}

}  // namespace

void validate(const DecodeOptions& options, int64_t vocab_size) {
  require(options.max_len_a >= 0, "max_len_a", options.max_len_a, ">= 0");
  require(options.min_len >= 0, "min_len", options.min_len, ">= 0");
  require(options.batch_tokens > 0, "batch_tokens", options.batch_tokens, "> 0");
  // Each row's 2K + 2 best tokens, <pad> and <s> among them at worst (best_candidates).
  require(options.beam_size >= 1 && 2 * options.beam_size + 2 <= vocab_size, "beam_size",
          options.beam_size,
          "between 1 and (vocab_size - 2) / 2 = " + std::to_string((vocab_size - 2) / 2));
  require(options.nbest >= 1 && options.nbest <= options.beam_size, "nbest", options.nbest,
          "between 1 and beam_size = " + std::to_string(options.beam_size));
  require(std::isfinite(options.length_penalty), "length_penalty", options.length_penalty,
          "a finite number");
  require(options.threads >= 1, "threads", options.threads, ">= 1");
  require(!options.shortlist || options.shortlist->vocab_size() == vocab_size,
          "shortlist's vocabulary size",
          options.shortlist ? options.shortlist->vocab_size() : 0,
          "the model's, " + std::to_string(vocab_size));
  if (options.sampling.kind != SamplingKind::kNone) {
    require(options.beam_size == 1, "beam_size", options.beam_size,
            "1 when sampling (a draw is one token per step)");
    require(std::isfinite(options.sampling.temperature) && options.sampling.temperature > 0,
            "sampling.temperature", options.sampling.temperature, "a number above 0");
    require(options.sampling.kind != SamplingKind::kTopK || options.sampling.k >= 1, "sampling.k",
            options.sampling.k, ">= 1");
    require(options.sampling.kind != SamplingKind::kTopP ||
                (options.sampling.p > 0 && options.sampling.p <= 1),
            "sampling.p", options.sampling.p, "in (0, 1]");
  }
}

std::vector<std::vector<Hypothesis>> beam_search(const Ensemble& ensemble,
                                                 const torch::Tensor& src_in,
                                                 const DecodeOptions& options,
                                                 const std::vector<int32_t>& first_tokens,
                                                 const std::vector<int64_t>& stream_ids,
                                                 const std::vector<Constraints>& constraints) {
  validate(options, ensemble.vocab_size());
  const std::vector<int64_t> streams = row_streams(stream_ids, src_in.size(0));
  check_row_count(first_tokens.size(), "first tokens", src_in.size(0));
  const bool forced = !first_tokens.empty();
  const bool constrained = constrained_rows(constraints, src_in.size(0), options, ensemble, forced);
  // Its tensors, the caches kept for later batches among them, are inference tensors: never
  // recorded by autograd, and only changed in place under this guard.
  c10::InferenceMode inference;
  const kernels::FlushedDenormals flushed;
  const int64_t batch = src_in.size(0);
  std::vector<std::vector<Hypothesis>> finished(batch);
  if (batch == 0) return finished;
  auto src = src_in.to(ensemble.device(), torch::kLong);
  const auto limits = sentence_limits(src, options, ensemble.max_positions(), forced, constraints);
  const int64_t longest = *std::max_element(limits.begin(), limits.end());
  // Encoder output and its cross-attention keys/values: once per sentence, shared by its K beam
  // rows. The self-attention caches are allocated once, for the longest sentence's limit.
  auto models = ensemble.models();
  const auto columns = options.shortlist
                           ? shortlist_columns(*options.shortlist, src, constraints, src.device())
                           : OutputColumns{};
  auto states = start_states(models, src, batch * options.beam_size, longest, columns);
  Beams beams = start_beams(batch);
  if (constrained) beams.standing.assign(batch, ConstraintState{});
  auto tokens = torch::full({batch}, kBosId, src.options());
  int64_t step = 1;
  if (forced) {
    tokens = force_first_tokens(models, states, tokens, first_tokens, beams);
    step = 2;
  }
  const Step how{ensemble.weights(), options, options.min_len + (forced ? 1 : 0), streams,
                 constraints, limits, columns};
  for (; !beams.sentence.empty(); ++step) {
    std::vector<torch::Tensor> logits;
    for (size_t i = 0; i < models.size(); ++i) {
      logits.push_back(models[i]->decode_step(tokens, states[i]));
    }
    auto rows = advance(beams, step_candidates(logits, beams, step, how), step, limits, options,
                        finished);
    if (beams.sentence.empty()) break;
    for (auto& state : states) state.select(rows, beams.width);
    std::vector<int64_t> last;
    for (const auto& prefix : beams.tokens) last.push_back(prefix.back());
    tokens = torch::tensor(last, torch::kLong).to(src.device());
  }
  for (auto& hyps : finished) rank(hyps, options);
  return finished;
}

}  // namespace tandem::decode
