#include "trainer/decode/step_candidates.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "trainer/common/token_ids.h"
#include "trainer/decode/constrained_step.h"
#include "trainer/decode/ensemble.h"
#include "trainer/decode/top_log_probs.h"

namespace tandem::decode {
namespace {

// Whether a step's search takes the loops over rows' best tokens (log-probabilities, tokens or
// columns): contiguous float and int64 on the CPU; elsewhere tensor ops, which a GPU keeps there.
bool loops_apply(const torch::Tensor& logp, const torch::Tensor& tokens) {
  return logp.is_cpu() && logp.scalar_type() == torch::kFloat && logp.is_contiguous() &&
         tokens.is_contiguous();
}

// Each row's best tokens for a step: its 2K best and as many more as `bans` may take from one
// row, those banned put out of reach (-inf). Only a row's own 2K best tokens can be among its
// sentence's 2K best candidates, banned tokens aside. → (log-probabilities [rows, n] float,
// tokens [rows, n] ids) on the logits' device.
std::pair<torch::Tensor, torch::Tensor> row_tops(const std::vector<torch::Tensor>& logits,
                                                 const StepBans& bans, const StepContext& how) {
  const int64_t per_row =
      std::min<int64_t>(2 * how.options.beam_size + bans.most(), logits.front().size(1));
  auto [row_logp, row_column] = top_log_probs(logits, how.weights, per_row);
  if (loops_apply(row_logp, row_column)) {
    // The same as to_ids in a loop: at one row a step LibTorch's ops were a tenth of it.
    int64_t* token = row_column.data_ptr<int64_t>();
    for (int64_t i = 0; i < row_column.numel(); ++i) token[i] = how.columns.id_of(token[i]);
  } else {
    row_column = how.columns.to_ids(row_column);
  }
  ban_tokens(bans, row_logp, row_column);
  return {row_logp, row_column};
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
      out[i].push_back({cell[i][0][r],
                        static_cast<int32_t>(cell[i][1][r]),
                        static_cast<int64_t>(cell[i][2][r]),
                        {}});
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
// best_of's form [sentences, 3, 1]: (score, token, parent 0).
torch::Tensor sampled_candidates(const std::vector<torch::Tensor>& logits, const Beams& beams,
                                 const StepBans& bans, int64_t step, const StepContext& how) {
  const auto sentences = static_cast<int64_t>(beams.sentence.size());
  auto log_probs = torch::log_softmax(
      combine_log_probs(logits, how.weights).to(torch::kCPU, torch::kDouble), -1);
  ban_columns(bans, how.columns, log_probs);
  std::vector<double> u;
  for (const int64_t sentence : beams.sentence) {
    u.push_back(sampling_uniform(how.options.sampling.seed, how.streams[sentence], step));
  }
  const auto tokens = draw_tokens(log_probs, how.options.sampling, u);
  auto out = torch::zeros({sentences, 3, 1}, torch::kDouble);
  auto cell = out.accessor<double, 3>();
  auto logp = log_probs.accessor<double, 2>();
  for (int64_t i = 0; i < sentences; ++i) {
    cell[i][0][0] = beams.scores[i] + logp[i][tokens[i]];
    cell[i][1][0] = static_cast<double>(how.columns.id_of(tokens[i]));
  }
  return out;
}

// A step of a batch whose sentences carry constraints (constrained_step.h): theirs chosen bank
// by bank, the others' as best_of chooses them.
std::vector<std::vector<Candidate>> with_constraints(const std::vector<torch::Tensor>& logits,
                                                     const Beams& beams, const StepBans& bans,
                                                     int64_t step, const StepContext& how) {
  const int64_t beam = how.options.beam_size;
  auto [logp, token] = row_tops(logits, bans, how);
  auto out = best_candidates(logp, token, beams, beam);
  ConstrainedStep known;
  known.banned = bans.per_row;
  known.logp = logp.to(torch::kCPU);
  known.token = token.to(torch::kCPU);
  known.needed = needed_log_probs(logits, how.weights, how.columns, beams, how.constraints);
  const bool ban_eos = bans.bans_everywhere(kEosId);
  for (size_t i = 0; i < beams.sentence.size(); ++i) {
    const auto sentence = beams.sentence[i];
    const auto& mine = how.constraints[sentence];
    if (mine.empty()) continue;
    out[i] = constrained_candidates(known, beams, static_cast<int64_t>(i), mine, beam, ban_eos,
                                    how.limits[sentence] - step);
  }
  return out;
}

}  // namespace

std::vector<std::vector<Candidate>> step_candidates(const std::vector<torch::Tensor>& logits,
                                                    const Beams& beams, int64_t step,
                                                    const StepContext& how, StepBans& bans) {
  step_bans(how.rules, StepView{step, beams}, bans);
  if (how.options.sampling.kind != SamplingKind::kNone) {
    return candidates_of(sampled_candidates(logits, beams, bans, step, how));
  }
  if (!beams.standing.empty()) return with_constraints(logits, beams, bans, step, how);
  auto [logp, token] = row_tops(logits, bans, how);
  return best_candidates(logp, token, beams, how.options.beam_size);
}

}  // namespace tandem::decode
