#include "trainer/train/progress.h"

#include <cmath>
#include <cstdio>

namespace tandem::train {

std::string format_duration(double seconds) {
  const auto total = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  char buf[32];
  if (total >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm%02llds", static_cast<long long>(total / 3600),
                  static_cast<long long>(total / 60 % 60), static_cast<long long>(total % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(total / 60),
                  static_cast<long long>(total % 60));
  }
  return buf;
}

std::string ProgressRecord::line() const {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "step %lld | epoch %.2f | loss %.4f | ppl %.2f | acc %.1f%% | lr %.3e | gnorm %.3f"
                " | %.0f tok/s | %s",
                static_cast<long long>(step), epoch, loss, perplexity, 100.0 * accuracy, lr,
                grad_norm, tokens_per_s, format_duration(elapsed_s).c_str());
  std::string out = buf;
  if (eta_s >= 0) out += " | ETA " + format_duration(eta_s);
  return out;
}

nlohmann::json ProgressRecord::json() const {
  return {{"step", step},           {"epoch", epoch},         {"loss", loss},
          {"ppl", perplexity},      {"accuracy", accuracy},   {"lr", lr},
          {"grad_norm", grad_norm}, {"tgt_tokens_per_s", tokens_per_s},
          {"elapsed_s", elapsed_s}};
}

ProgressMeter::ProgressMeter(const config::Config& config, int64_t start_step)
    : max_steps_(static_cast<double>(config.train.max_steps)),
      max_minutes_(config.train.max_minutes),
      start_step_(start_step),
      started_(Clock::now()),
      window_start_(started_) {}

void ProgressMeter::add(const StepStats& stats) {
  window_.tgt_tokens += stats.tgt_tokens;
  window_.nll_sum += stats.nll_sum;
  window_.correct += stats.correct;
  window_.grad_norm += stats.grad_norm;
  window_.lr = stats.lr;
  ++window_steps_;
  total_tokens_ += stats.tgt_tokens;
}

ProgressRecord ProgressMeter::take(int64_t step, double epoch) {
  const auto now = Clock::now();
  const double window_s = std::chrono::duration<double>(now - window_start_).count();
  ProgressRecord r;
  r.step = step;
  r.epoch = epoch;
  const double tokens = std::max(1.0, window_.tgt_tokens);
  r.loss = window_.nll_sum / tokens;
  r.perplexity = std::exp(std::min(r.loss, 100.0));
  r.accuracy = window_.correct / tokens;
  r.lr = window_.lr;
  r.grad_norm = window_steps_ > 0 ? window_.grad_norm / window_steps_ : 0;
  r.tokens_per_s = window_s > 0 ? window_.tgt_tokens / window_s : 0;
  r.elapsed_s = std::chrono::duration<double>(now - started_).count();
  const double per_step = r.elapsed_s / std::max<int64_t>(1, step - start_step_);
  double eta = -1;
  if (max_steps_ > 0) eta = (max_steps_ - static_cast<double>(step)) * per_step;
  if (max_minutes_ > 0) {
    const double left = max_minutes_ * 60.0 - r.elapsed_s;
    eta = eta < 0 ? left : std::min(eta, left);
  }
  r.eta_s = eta < 0 ? -1 : std::max(0.0, eta);
  window_ = StepStats{};
  window_steps_ = 0;
  window_start_ = now;
  return r;
}

std::string ProgressMeter::summary(int64_t step, double epoch) const {
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
