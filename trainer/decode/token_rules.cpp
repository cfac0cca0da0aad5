#include "trainer/decode/token_rules.h"

#include <algorithm>
#include <cmath>

#include "trainer/common/token_ids.h"
#include "trainer/decode/constrained_step.h"

namespace tandem::decode {

int64_t StepBans::most() const {
  size_t one_row = 0;
  for (const auto& banned : per_row) one_row = std::max(one_row, banned.size());
  return static_cast<int64_t>(everywhere.size() + one_row);
}

bool StepBans::bans_everywhere(int64_t token) const {
  return std::find(everywhere.begin(), everywhere.end(), token) != everywhere.end();
}

bool StepBans::bans(int64_t row, int64_t token) const {
  if (bans_everywhere(token)) return true;
  if (per_row.empty()) return false;
  const auto& mine = per_row[static_cast<size_t>(row)];
  return std::find(mine.begin(), mine.end(), token) != mine.end();
}

void NeverEmitted::ban(const StepView& /*step*/, StepBans& bans) const {
  bans.everywhere.insert(bans.everywhere.end(), {kPadId, kBosId});
}

void MinimumLength::ban(const StepView& step, StepBans& bans) const {
  if (step.step <= min_len_) bans.everywhere.push_back(kEosId);
}

void AvoidPhrases::ban(const StepView& step, StepBans& bans) const {
  bans.per_row = avoid_bans(step.beams, constraints_);
}

TokenRules token_rules(int64_t min_len, const std::vector<Constraints>& constraints,
                       bool constrained) {
  TokenRules rules;
  rules.push_back(std::make_unique<NeverEmitted>());
  rules.push_back(std::make_unique<MinimumLength>(min_len));
  if (constrained) rules.push_back(std::make_unique<AvoidPhrases>(constraints));
  return rules;
}

void step_bans(const TokenRules& rules, const StepView& step, StepBans& bans) {
  bans.everywhere.clear();
  bans.per_row.clear();
  for (const auto& rule : rules) rule->ban(step, bans);
}

void ban_tokens(const StepBans& bans, torch::Tensor& logp, const torch::Tensor& tokens) {
  if (logp.is_cpu() && tokens.is_cpu() && logp.is_contiguous() && tokens.is_contiguous() &&
      logp.scalar_type() == torch::kFloat) {
    float* value = logp.data_ptr<float>();
    const int64_t* token = tokens.data_ptr<int64_t>();
    const int64_t per_row = tokens.size(1);
    for (int64_t i = 0; i < tokens.numel(); ++i) {
      if (bans.bans(i / per_row, token[i])) value[i] = -INFINITY;
    }
    return;
  }
  auto out_of_reach = torch::zeros_like(tokens, torch::kBool);
  for (const int64_t banned : bans.everywhere) out_of_reach.logical_or_(tokens.eq(banned));
  if (!bans.per_row.empty()) {
    const auto cpu = tokens.to(torch::kCPU).contiguous();
    auto mask = torch::zeros_like(cpu, torch::kBool);
    const auto token = cpu.accessor<int64_t, 2>();
    auto banned = mask.accessor<bool, 2>();
    for (int64_t row = 0; row < cpu.size(0); ++row) {
      for (int64_t i = 0; i < cpu.size(1); ++i) banned[row][i] = bans.bans(row, token[row][i]);
    }
    out_of_reach.logical_or_(mask.to(tokens.device()));
  }
  logp.masked_fill_(out_of_reach, -INFINITY);
}

void ban_columns(const StepBans& bans, const OutputColumns& columns, torch::Tensor& log_probs) {
  for (const int64_t banned : bans.everywhere) {
    const int64_t column = columns.column_of(banned);
    if (column >= 0) log_probs.select(1, column).fill_(-INFINITY);
  }
  for (size_t row = 0; row < bans.per_row.size(); ++row) {
    for (const int32_t banned : bans.per_row[row]) {
      const int64_t column = columns.column_of(banned);
      if (column >= 0) log_probs[static_cast<int64_t>(row)][column].fill_(-INFINITY);
    }
  }
}

}  // namespace tandem::decode
