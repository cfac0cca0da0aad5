#include "trainer/decode/beam.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <string>

#include "trainer/decode/beams.h"
#include "trainer/decode/constrained_step.h"
#include "trainer/decode/output_columns.h"
#include "trainer/decode/step_candidates.h"
#include "trainer/decode/token_rules.h"
#include "trainer/kernels/cpu/denormals.h"

namespace tandem::decode {
namespace {

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

// beam_search's rows as its steps use them, checked: per input row its first token, its
// sampling stream and its constraints.
struct BatchRows {
  std::vector<int32_t> first_tokens;     // empty (no row has one), or one per row
  std::vector<int64_t> streams;          // one per row
  std::vector<Constraints> constraints;  // empty (no row has any), or one per row
};

BatchRows batch_rows(const std::vector<RowInput>& rows, int64_t batch) {
  if (!rows.empty() && static_cast<int64_t>(rows.size()) != batch) {
    throw std::invalid_argument("beam_search: " + std::to_string(rows.size()) + " row inputs for " +
                                std::to_string(batch) + " rows");
  }
  BatchRows out;
  int64_t forced = 0;
  bool constrained = false;
  for (int64_t r = 0; r < batch; ++r) {
    const int64_t stream = rows.empty() ? -1 : rows[r].stream;
    out.streams.push_back(stream >= 0 ? stream : r);
    forced += !rows.empty() && rows[r].first_token >= 0 ? 1 : 0;
    constrained = constrained || (!rows.empty() && !rows[r].constraints.empty());
  }
  if (forced != 0 && forced != batch) {
    throw std::invalid_argument("beam_search: " + std::to_string(forced) + " of " +
                                std::to_string(batch) +
                                " rows have a first token: every row has one, or none does");
  }
  for (int64_t r = 0; forced != 0 && r < batch; ++r)
    out.first_tokens.push_back(rows[r].first_token);
  for (int64_t r = 0; constrained && r < batch; ++r) out.constraints.push_back(rows[r].constraints);
  return out;
}

// The first step with each row's token forced (beam_search's first_tokens): the models read
// `bos` as always, and every hypothesis starts with its row's token at score 0. → the next
// step's input, those tokens.
// Per decoder row, the source position its alignment heads attended to most at the step just
// taken (DecoderState::attention); empty when the state reads none.
std::vector<int32_t> attended_positions(const model::DecoderState& state) {
  if (!state.readout) return {};
  const auto best = state.attention.argmax(1).to(torch::kCPU, torch::kInt).contiguous();
  return std::vector<int32_t>(best.data_ptr<int32_t>(), best.data_ptr<int32_t>() + best.numel());
}

torch::Tensor force_first_tokens(std::vector<model::Transformer>& models,
                                 std::vector<model::DecoderState>& states, const torch::Tensor& bos,
                                 const std::vector<int32_t>& first_tokens, Beams& beams) {
  for (size_t i = 0; i < models.size(); ++i) models[i]->decode_step(bos, states[i]);
  for (size_t row = 0; row < first_tokens.size(); ++row) beams.tokens[row] = {first_tokens[row]};
  const auto attended = attended_positions(states.front());
  for (size_t row = 0; row < attended.size(); ++row) beams.attended[row] = {attended[row]};
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

// A step's continuations of one sentence's hypotheses: its candidates' prefixes as they become
// hypotheses, with what their heads attended to (`attended`, per state row: this step's).
struct Continuations {
  const Beams& beams;
  int64_t index;  // the sentence's place among the active ones
  const std::vector<int32_t>& attended;
  bool shift = false;  // AlignmentHeads::shift: a token's attention is the step after it's

  int64_t row(const Candidate& c) const { return index * beams.width + c.parent; }
  std::vector<int32_t> tokens(const Candidate& c) const {
    auto tokens = beams.tokens[row(c)];
    tokens.push_back(c.token);
    return tokens;
  }
  std::vector<int32_t> attended_by(const Candidate& c, bool with_token) const {
    if (beams.attended.empty()) return {};
    auto positions = beams.attended[row(c)];
    if (with_token) positions.push_back(attended[row(c)]);
    return positions;
  }
  // Per token of a hypothesis that took `steps` (each step's attention, the last one's too): with
  // shift each token's is the step that read it (the first step read BOS; a cut hypothesis' last
  // token was never read: -1, no link), else the step that predicted it.
  std::vector<int32_t> per_token(std::vector<int32_t> steps, size_t tokens) const {
    if (!shift || steps.empty()) {
      steps.resize(std::min(steps.size(), tokens));
      return steps;
    }
    steps.erase(steps.begin());
    steps.resize(tokens, -1);
    return steps;
  }
  // The parent ended by the candidate's EOS (left out of the tokens), or the candidate cut at the
  // length limit.
  Hypothesis ended(const Candidate& c) const {
    const auto& parent = beams.tokens[row(c)];
    return {parent, c.score, true, 0, per_token(attended_by(c, true), parent.size())};
  }
  Hypothesis cut(const Candidate& c) const {
    auto with_token = tokens(c);
    const size_t n = with_token.size();
    return {std::move(with_token), c.score, false, 0, per_token(attended_by(c, true), n)};
  }
};

// Advances one sentence by its candidates (in the order they are taken): EOS among the first K
// finish, the first K others become its next live beam (appended to `next`, their parents' state
// rows to `rows`), unless the sentence is done.
void advance_sentence(const Continuations& from, const std::vector<Candidate>& candidates,
                      const DecodeOptions& options, int64_t step, int64_t limit,
                      std::vector<Hypothesis>& finished, Beams& next, std::vector<int64_t>& rows) {
  const Beams& beams = from.beams;
  const int64_t beam = options.beam_size;
  std::vector<const Candidate*> live;
  for (size_t r = 0; r < candidates.size() && static_cast<int64_t>(live.size()) < beam; ++r) {
    const auto& c = candidates[r];
    if (c.token == kEosId) {
      // An EOS ranked past K would not have taken a beam slot, so it is not a result either. (One
      // banned before the minimum length ranks after at least 2K - 1 others, so never among K.)
      if (static_cast<int64_t>(r) < beam && static_cast<int64_t>(finished.size()) < beam) {
        finished.push_back(from.ended(c));
      }
      continue;
    }
    live.push_back(&c);
  }
  if (static_cast<int64_t>(finished.size()) >= beam) return;
  if (step >= limit) {
    for (const auto* c : live) finished.push_back(from.cut(*c));
    return;
  }
  if (live.empty()) return;  // every candidate ended (constrained search only)
  std::vector<double> live_scores;
  for (const auto* c : live) live_scores.push_back(c->score);
  if (settled(finished, live_scores, step, limit, options)) return;
  next.sentence.push_back(beams.sentence[from.index]);
  for (const auto* c : live) {
    next.tokens.push_back(from.tokens(*c));
    next.scores.push_back(c->score);
    if (!beams.standing.empty()) next.standing.push_back(c->standing);
    if (!beams.attended.empty()) next.attended.push_back(from.attended_by(*c, true));
    rows.push_back(from.row(*c));
  }
}

// Applies one step to every active sentence; returns the state rows the next step keeps, in order.
// `attended`: per state row the source position its alignment heads attended to most this step
// (none without DecodeOptions::alignment).
std::vector<int64_t> advance_beams(Beams& beams,
                                   const std::vector<std::vector<Candidate>>& candidates,
                                   const std::vector<int32_t>& attended, int64_t step,
                                   const std::vector<int64_t>& limits,
                                   const DecodeOptions& options,
                                   std::vector<std::vector<Hypothesis>>& finished) {
  Beams next;
  next.width = options.beam_size;
  std::vector<int64_t> rows;
  const bool shift = options.alignment.has_value() && options.alignment->shift;
  for (size_t i = 0; i < beams.sentence.size(); ++i) {
    const int64_t sentence = beams.sentence[i];
    advance_sentence({beams, static_cast<int64_t>(i), attended, shift}, candidates[i], options,
                     step, limits[sentence], finished[sentence], next, rows);
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

// beam_search's constraints checked (each as check_constraints wants, and not with sampling).
// → whether any row has any.
bool constrained_rows(const std::vector<Constraints>& constraints, const DecodeOptions& options,
                      const Ensemble& ensemble, bool forced) {
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
// The first model's reads its alignment heads when options.alignment asks (std::invalid_argument
// for heads it lacks).
std::vector<model::DecoderState> start_states(std::vector<model::Transformer>& models,
                                              const torch::Tensor& src, int64_t rows,
                                              int64_t steps, const OutputColumns& columns,
                                              const DecodeOptions& options) {
  if (options.alignment) {
    const auto& o = models.front()->options();
    model::check_alignment_heads(*options.alignment, o.decoder_layers, o.heads);
  }
  std::vector<model::DecoderState> states;
  for (auto& model : models) {
    states.push_back(model->start_decoding(model->encode(src), src));
    states.back().reserve(rows, steps);
    if (columns.ids.defined()) model->restrict_output(states.back(), columns.ids);
  }
  states.front().readout = options.alignment;
  return states;
}

}  // namespace

std::vector<RowInput> first_token_rows(const std::vector<int32_t>& first_tokens) {
  std::vector<RowInput> rows(first_tokens.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i].first_token = first_tokens[i];
  return rows;
}

std::vector<std::vector<Hypothesis>> beam_search(const Ensemble& ensemble,
                                                 const torch::Tensor& src_in,
                                                 const DecodeOptions& options,
                                                 const std::vector<RowInput>& row_inputs) {
  check_options(options, ensemble.vocab_size());
  const BatchRows in = batch_rows(row_inputs, src_in.size(0));
  const bool forced = !in.first_tokens.empty();
  const bool constrained = constrained_rows(in.constraints, options, ensemble, forced);
  // Its tensors, the caches kept for later batches among them, are inference tensors: never
  // recorded by autograd, and only changed in place under this guard.
  c10::InferenceMode inference;
  const kernels::FlushedDenormals flushed;
  const int64_t batch = src_in.size(0);
  std::vector<std::vector<Hypothesis>> finished(batch);
  if (batch == 0) return finished;
  auto src = src_in.to(ensemble.device(), torch::kLong);
  const auto limits =
      sentence_limits(src, options, ensemble.max_positions(), forced, in.constraints);
  // Encoder output and its cross-attention keys/values: once per sentence, shared by its K beam
  // rows. The self-attention caches are allocated once, for the longest sentence's limit.
  auto models = ensemble.models();
  const auto columns =
      options.shortlist ? shortlist_columns(*options.shortlist, src, in.constraints, src.device())
                        : OutputColumns{};
  auto states = start_states(models, src, batch * options.beam_size,
                             *std::max_element(limits.begin(), limits.end()), columns, options);
  Beams beams = start_beams(batch);
  if (constrained) beams.standing.assign(batch, ConstraintState{});
  if (options.alignment) beams.attended.assign(batch, {});
  auto tokens = torch::full({batch}, kBosId, src.options());
  int64_t step = 1;
  if (forced) {
    tokens = force_first_tokens(models, states, tokens, in.first_tokens, beams);
    step = 2;
  }
  // A forced first token is one of a hypothesis' tokens; min_len counts those after it.
  const TokenRules rules =
      token_rules(options.min_len + (forced ? 1 : 0), in.constraints, constrained);
  const StepContext how{ensemble.weights(), options, rules,  in.streams,
                        in.constraints,     limits,  columns};
  StepBans bans;  // the step's, its storage kept from step to step
  for (; !beams.sentence.empty(); ++step) {
    std::vector<torch::Tensor> logits;
    for (size_t i = 0; i < models.size(); ++i) {
      logits.push_back(models[i]->decode_step(tokens, states[i]));
    }
    auto rows = advance_beams(beams, step_candidates(logits, beams, step, how, bans),
                              attended_positions(states.front()), step, limits, options, finished);
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
