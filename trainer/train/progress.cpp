#include "trainer/train/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "trainer/common/log.h"
#include "trainer/common/timestamp.h"

namespace tandem::train {
namespace {
constexpr int kBarWidth = 12;
constexpr std::chrono::milliseconds kRedrawEvery{100};  // fast steps would flood the terminal

// "[###---------]  25%"
std::string bar(double fraction) {
  const double f = std::clamp(fraction, 0.0, 1.0);
  const int filled = static_cast<int>(f * kBarWidth);
  char percent[8];
  std::snprintf(percent, sizeof percent, " %3d%%", static_cast<int>(f * 100.0));
  return "[" + std::string(filled, '#') + std::string(kBarWidth - filled, '-') + "]" + percent;
}
}  // namespace

std::string ProgressRecord::line() const {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "step %lld | epoch %.2f | loss %.4f | ppl %.2f | acc %.1f%% | lr %.3e | gnorm %.3f"
                " | %.0f tok/s | %s",
                static_cast<long long>(step), epoch, loss, perplexity, 100.0 * accuracy, lr,
                grad_norm, tokens_per_s, format_duration(elapsed_s).c_str());
  std::string out = buf;
  if (eta_s >= 0) out += " | ETA " + format_duration(eta_s);
  if (alignment_loss >= 0) {
    std::snprintf(buf, sizeof buf, " | align %.4f", alignment_loss);
    out += buf;
  }
  for (size_t k = 0; k < directions.size(); ++k) {
    std::snprintf(buf, sizeof buf, "%.4f", directions[k].loss);
    out += (k == 0 ? " | by corpus: " : ", ") + directions[k].name + " " + buf;
  }
  return out;
}

std::string LiveView::line(size_t width) const {
  std::string out = "step " + std::to_string(step);
  if (max_steps > 0) out += "/" + std::to_string(max_steps);
  if (fraction >= 0) out += " " + bar(fraction);
  std::vector<std::string> fields;
  if (eta_s >= 0) fields.push_back("ETA " + format_duration(eta_s));
  char buf[64];
  std::snprintf(buf, sizeof buf, "loss %.4f", loss);
  fields.emplace_back(buf);
  std::snprintf(buf, sizeof buf, "%.0f tok/s", tokens_per_s);
  fields.emplace_back(buf);
  std::snprintf(buf, sizeof buf, "epoch %.2f", epoch);
  fields.emplace_back(buf);
  std::snprintf(buf, sizeof buf, "lr %.2e", lr);
  fields.emplace_back(buf);
  for (const auto& field : fields) {
    if (out.size() + 3 + field.size() > width) break;
    out += " | " + field;
  }
  return out;
}

nlohmann::json ProgressRecord::json() const {
  nlohmann::json record = {{"step", step},
                           {"epoch", epoch},
                           {"loss", loss},
                           {"ppl", perplexity},
                           {"accuracy", accuracy},
                           {"lr", lr},
                           {"grad_norm", grad_norm},
                           {"skipped_updates", skipped},
                           {"tgt_tokens_per_s", tokens_per_s},
                           {"elapsed_s", elapsed_s}};
  if (alignment_loss >= 0) record["alignment_loss"] = alignment_loss;
  for (const DirectionProgress& direction : directions) {
    record["loss_" + direction.name] = direction.loss;
    record["accuracy_" + direction.name] = direction.accuracy;
    record["tgt_tokens_" + direction.name] = direction.tokens;
  }
  return record;
}

ProgressMeter::ProgressMeter(const config::Config& config, int64_t start_step,
                             SumOverRanks sum_over_ranks, std::vector<std::string> directions)
    : limits_{static_cast<double>(config.train.max_steps), config.train.max_minutes,
              static_cast<double>(config.train.max_epochs)},
      start_step_(start_step),
      started_(Clock::now()),
      sum_over_ranks_(std::move(sum_over_ranks)),
      directions_(std::move(directions)) {
  window_.start = started_;
  log::progress_mode_from_env();  // a bad value fails here, on every rank, before any step
  live_.enabled = log::live_status_enabled();
}

ProgressMeter::~ProgressMeter() { log::end_status(); }

void ProgressMeter::add(const StepStats& stats) {
  torch::NoGradGuard no_grad;
  const torch::Tensor skipped_at = stats.update.select(0, 1) * static_cast<double>(stats.step);
  if (window_.steps == 0) {
    window_.token_sums = stats.token_sums.clone();
    if (stats.direction_sums.defined()) window_.direction_sums = stats.direction_sums.clone();
    if (stats.alignment_sums.defined()) window_.alignment_sums = stats.alignment_sums.clone();
    window_.update = stats.update.clone();
    window_.last_skipped = skipped_at;
  } else {
    window_.token_sums.add_(stats.token_sums);
    if (stats.direction_sums.defined()) window_.direction_sums.add_(stats.direction_sums);
    if (stats.alignment_sums.defined()) window_.alignment_sums.add_(stats.alignment_sums);
    window_.update.add_(stats.update);
    window_.last_skipped = torch::maximum(window_.last_skipped, skipped_at);
  }
  window_.tokens += stats.tgt_tokens;
  window_.rank_tokens += stats.rank_tokens;
  window_.lr = stats.lr;
  ++window_.steps;
  total_tokens_ += stats.tgt_tokens;
}

ProgressRecord ProgressMeter::take(int64_t step, double epoch) {
  // The window's device figures, the ranks' loss sums added up (one collective), in one read.
  double nll = 0, correct = 0, norm_sum = 0, skipped = 0, last_skipped = 0;
  std::vector<double> by_direction;  // [nll, targets, correct] per direction
  double alignment_sum = 0, aligned = -1;  // -1: no guided alignment
  if (window_.steps > 0) {
    torch::NoGradGuard no_grad;
    // [nll, correct, (alignment sum, aligned targets), (per direction)]
    std::vector<torch::Tensor> parts{window_.token_sums};
    const bool guided = window_.alignment_sums.defined();
    if (guided) parts.push_back(window_.alignment_sums);
    if (!directions_.empty() && window_.direction_sums.defined()) {
      parts.push_back(window_.direction_sums.flatten());
    }
    torch::Tensor sums = torch::cat(parts);
    if (sum_over_ranks_) sum_over_ranks_(sums);
    const torch::Tensor all =
        torch::cat({sums, window_.update, window_.last_skipped.reshape({1})}).cpu().contiguous();
    const auto v = all.accessor<double, 1>();
    nll = v[0], correct = v[1];
    if (guided) alignment_sum = v[2], aligned = v[3];
    const int64_t after = sums.numel();
    norm_sum = v[after], skipped = v[after + 1], last_skipped = v[after + 2];
    by_direction.assign(all.data_ptr<double>() + (guided ? 4 : 2), all.data_ptr<double>() + after);
  }
  const auto now = Clock::now();
  const double window_s = std::chrono::duration<double>(now - window_.start).count();
  ProgressRecord r;
  r.step = step;
  r.epoch = epoch;
  const double tokens = std::max(1.0, window_.tokens);
  r.loss = nll / tokens;
  r.perplexity = std::exp(std::min(r.loss, 100.0));
  r.accuracy = correct / tokens;
  r.lr = window_.lr;
  r.grad_norm = window_.steps > 0 ? norm_sum / window_.steps : 0;
  r.skipped = static_cast<int64_t>(skipped);
  r.last_skipped = static_cast<int64_t>(last_skipped);
  r.tokens_per_s = window_s > 0 ? window_.tokens / window_s : 0;
  r.elapsed_s = std::chrono::duration<double>(now - started_).count();
  r.eta_s = eta(step, r.elapsed_s);
  if (aligned >= 0) r.alignment_loss = aligned > 0 ? alignment_sum / aligned : 0;
  for (size_t k = 0; k < directions_.size() && 3 * k + 2 < by_direction.size(); ++k) {
    const double direction_tokens = by_direction[3 * k + 1];
    const double per_token = direction_tokens > 0 ? 1.0 / direction_tokens : 0.0;
    r.directions.push_back({directions_[k], by_direction[3 * k] * per_token,
                            by_direction[3 * k + 2] * per_token, direction_tokens});
  }
  window_.tokens = window_.rank_tokens = 0;
  window_.steps = 0;
  window_.start = now;
  last_record_ = r;
  return r;
}

ProgressMeter::Skips ProgressMeter::unreported_skips() const {
  if (window_.steps == 0) return {};
  return {static_cast<int64_t>(window_.update[1].item<double>()),
          static_cast<int64_t>(window_.last_skipped.item<double>())};
}

// The nearer of the step and time limits, at this process's mean time per step so far.
double ProgressMeter::eta(int64_t step, double elapsed_s) const {
  const double per_step = elapsed_s / std::max<int64_t>(1, step - start_step_);
  double eta = -1;
  if (limits_.steps > 0) eta = (limits_.steps - static_cast<double>(step)) * per_step;
  if (limits_.minutes > 0) {
    const double left = limits_.minutes * 60.0 - elapsed_s;
    eta = eta < 0 ? left : std::min(eta, left);
  }
  return eta < 0 ? -1 : std::max(0.0, eta);
}

void ProgressMeter::show(int64_t step, double epoch) {
  if (!live_.enabled) return;
  if (live_.first_epoch < 0) live_.first_epoch = epoch;
  const auto now = Clock::now();
  if (now - live_.last_shown < kRedrawEvery) return;
  live_.last_shown = now;
  log::status(view(step, epoch).line(static_cast<size_t>(log::terminal_columns() - 1)));
}

LiveView ProgressMeter::view(int64_t step, double epoch) const {
  const auto now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - started_).count();
  LiveView v;
  v.step = step;
  v.max_steps = static_cast<int64_t>(limits_.steps);
  v.epoch = epoch;
  // Right after take() the window is empty: keep showing the record just printed.
  const bool fresh = window_.steps > 0 && window_.tokens > 0;
  const double window_s = std::chrono::duration<double>(now - window_.start).count();
  // The loss so far in the window is this rank's, read where reading costs nothing (the CPU); on
  // a GPU the live line shows the last record's, as waiting for the GPU would slow training.
  v.loss = last_record_.loss;
  if (fresh && window_.rank_tokens > 0 && window_.token_sums.is_cpu()) {
    v.loss = window_.token_sums[0].item<double>() / window_.rank_tokens;
  }
  v.lr = window_.steps > 0 ? window_.lr : last_record_.lr;
  v.tokens_per_s = fresh && window_s > 0 ? window_.tokens / window_s : last_record_.tokens_per_s;
  double fraction = -1;
  if (limits_.steps > 0) fraction = static_cast<double>(step) / limits_.steps;
  if (limits_.minutes > 0) fraction = std::max(fraction, elapsed / (limits_.minutes * 60.0));
  if (limits_.epochs > 0) fraction = std::max(fraction, epoch / limits_.epochs);
  v.fraction = fraction < 0 ? -1 : std::min(1.0, fraction);
  v.eta_s = eta(step, elapsed);
  if (limits_.epochs > 0 && live_.first_epoch >= 0 && epoch > live_.first_epoch) {
    const double by_epochs = (limits_.epochs - epoch) * elapsed / (epoch - live_.first_epoch);
    v.eta_s = std::max(0.0, v.eta_s < 0 ? by_epochs : std::min(v.eta_s, by_epochs));
  }
  return v;
}

std::string ProgressMeter::summary(int64_t step, double epoch) const {
  log::end_status();
  const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "finished at step %lld (epoch %.2f): %lld steps, %.0f target tokens in %s, %.0f tok/s",
                static_cast<long long>(step), epoch, static_cast<long long>(step - start_step_),
                total_tokens_, format_duration(elapsed).c_str(),
                elapsed > 0 ? total_tokens_ / elapsed : 0.0);
  return buf;
}

}  // namespace tandem::train
