#include "trainer/train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <sstream>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/common/log.h"
#include "trainer/optim/schedule.h"
#include "trainer/train/loss.h"
#include "trainer/train/model_io.h"
#include "trainer/train/progress.h"
#include "trainer/train/stop_signal.h"
#include "trainer/train/threads.h"

namespace tandem::train {
namespace fs = std::filesystem;
namespace {

data::BatchPlanOptions plan_options(const config::DataConfig& data) {
  data::BatchPlanOptions options;
  options.max_tokens = data.max_tokens;
  options.seed = data.seed;
  options.pool_batches = data.pool_batches;
  return options;
}

optim::AdamOptions adam_options(const config::TrainConfig& train) {
  optim::AdamOptions options;
  options.beta1 = train.adam_beta1;
  options.beta2 = train.adam_beta2;
  options.eps = train.adam_eps;
  return options;
}

optim::ScheduleOptions schedule_options(const config::TrainConfig& train) {
  return optim::ScheduleOptions{train.schedule, train.lr, train.warmup_steps};
}

// Dropout streams differ per rank (different data deserves independent masks) but are fixed by
// the seed, so a run is reproducible at a given world size.
uint64_t dropout_seed(uint64_t seed, int rank) { return seed * 1000003ULL + 7919ULL * (rank + 1); }

std::string rng_state() {
  auto state = at::detail::getDefaultCPUGenerator().get_state();
  return std::string(static_cast<const char*>(state.data_ptr()), state.numel());
}

void set_rng_state(const std::string& bytes) {
  auto state = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  std::memcpy(state.data_ptr(), bytes.data(), bytes.size());
  auto generator = at::detail::getDefaultCPUGenerator();  // a handle sharing the default's state
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

// Every rank must build the same parameter list; compare a hash of (name, shape, dtype).
void check_same_layout(const checkpoint::NamedTensors& params, dist::Communicator& comm) {
  std::vector<std::string> items;
  for (const auto& [name, p] : params) {
    std::ostringstream item;
    item << name << ' ' << p.sizes() << ' ' << p.dtype();
    items.push_back(item.str());
  }
  auto hashes = comm.all_gather(dist::stable_hash(items));
  for (size_t r = 1; r < hashes.size(); ++r) {
    if (hashes[r] != hashes[0]) {
      throw std::runtime_error("parameter layout differs between rank 0 and rank " +
                               std::to_string(r) + " (different config or build?)");
    }
  }
}

void link_last(const std::string& step_path, const std::string& dir) {
  const fs::path tmp = fs::path(dir) / "last.h5.tmp";
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_hard_link(step_path, tmp, ec);
  if (ec) fs::copy_file(step_path, tmp, fs::copy_options::overwrite_existing);
  fs::rename(tmp, fs::path(dir) / "last.h5");
}

}  // namespace

Trainer::Trainer(config::Config config, dist::ProcessGroup& group, const std::string& resume)
    : config_(std::move(config)),
      group_(group),
      comm_(group.cpu()),
      corpus_(config_.data.corpus),
      loader_(corpus_, "train", plan_options(config_.data), group.rank(), group.size()) {
  set_compute_threads(static_cast<int>(config_.train.threads));
  vocab_bytes_ = corpus_.vocab().bytes();
  vocab_size_ = data::Vocab::from_bytes(vocab_bytes_).size();
  torch::manual_seed(config_.train.seed);
  model_ = model::Transformer(model_options(config_.model, vocab_size_));
  auto named = named_parameters(model_);
  for (const auto& item : named) params_.push_back(item.second);
  check_same_layout(named, comm_);
  adam_ = std::make_unique<optim::Adam>(named, adam_options(config_.train));
  reducer_ = std::make_unique<dist::GradientReducer>(params_, comm_);

  if (group_.rank() == 0) fs::create_directories(config_.checkpoint.dir);
  comm_.barrier();
  const std::string path = resume.empty() ? checkpoint::find_latest(config_.checkpoint.dir) : resume;
  if (path.empty()) {
    start_fresh();
  } else {
    resume_from(path);
  }
  if (group_.rank() == 0) {
    metrics_ = std::make_unique<MetricsLog>(
        (fs::path(config_.checkpoint.dir) / "metrics.jsonl").string(), step_);
  }
}

Trainer::~Trainer() = default;

void Trainer::start_fresh() {
  // Rank 0's initial parameters are everyone's, whatever the ranks' RNGs did.
  torch::NoGradGuard no_grad;
  for (auto& p : params_) comm_.broadcast(p, 0);
  torch::manual_seed(dropout_seed(config_.train.seed, group_.rank()));
  log::info("starting from scratch in " + config_.checkpoint.dir);
}

void Trainer::resume_from(const std::string& path) {
  auto data = checkpoint::load(path);
  load_parameters(model_, data.model, path);
  adam_->load_state(data.optimizer, data.optimizer_step);
  step_ = data.step;
  last_saved_step_ = data.step;
  loader_.set_position({data.data_epoch, data.data_next_batch});
  const bool same_world = data.world_size == group_.size() &&
                          static_cast<int64_t>(data.rng.size()) == group_.size();
  if (same_world) {
    set_rng_state(data.rng[group_.rank()]);
  } else {
    torch::manual_seed(dropout_seed(config_.train.seed, group_.rank()) + step_);
    log::info("checkpoint was written by " + std::to_string(data.world_size) +
              " ranks, continuing with " + std::to_string(group_.size()) +
              ": same global batch cursor, dropout streams reseeded");
  }
  log::info("resuming from " + path + " at step " + std::to_string(step_) + " (epoch " +
            std::to_string(data.data_epoch + 1) + ", global batch " +
            std::to_string(data.data_next_batch) + ")");
}

StepStats Trainer::train_step() {
  auto batches = loader_.next_step(config_.train.accum_steps);
  adam_->zero_grad();
  // Local sums, then one small all-reduce: tokens, nll, correct, stop flag.
  double local[4] = {0, 0, 0, 0};
  for (const auto& batch : batches) {
    if (batch.empty()) continue;
    auto logits = model_->forward(batch.src, batch.tgt_in);
    auto loss = token_loss(logits, batch.tgt_out, config_.train.label_smoothing);
    loss.loss_sum.backward();
    local[0] += static_cast<double>(loss.tokens);
    local[1] += loss.nll_sum;
    local[2] += static_cast<double>(loss.correct);
  }
  local[3] = stop_requested_locally() ? 1.0 : 0.0;
  auto totals = torch::tensor({local[0], local[1], local[2], local[3]}, torch::kFloat64);
  comm_.all_reduce_sum(totals);
  auto sums = totals.accessor<double, 1>();

  StepStats stats{sums[0], sums[1], sums[2]};
  stop_requested_ = sums[3] > 0;
  // Loss is a sum over this rank's targets; dividing by the global count makes N ranks equal
  // one process that saw all N batches.
  reducer_->all_reduce(stats.tgt_tokens > 0 ? 1.0 / stats.tgt_tokens : 0.0);
  stats.grad_norm = optim::global_grad_norm(params_);
  ++step_;
  stats.lr = optim::learning_rate(schedule_options(config_.train), step_);
  if (!std::isfinite(stats.grad_norm)) {
    stats.skipped = true;  // same reduced gradients everywhere, so every rank skips
    log::info("step " + std::to_string(step_) + ": non-finite gradient norm, update skipped");
    return stats;
  }
  optim::clip_grads(params_, stats.grad_norm, config_.train.clip_norm);
  adam_->step(stats.lr);
  return stats;
}

bool Trainer::stop_requested_locally() const {
  if (stop_signal() != 0) return true;
  const double limit = config_.train.max_minutes;
  if (group_.rank() != 0 || limit <= 0) return false;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count() >=
         limit * 60.0;
}

bool Trainer::should_stop() {
  if (stop_requested_) return true;
  if (config_.train.max_steps > 0 && step_ >= config_.train.max_steps) return true;
  if (config_.train.max_epochs > 0 && completed_epochs() >= config_.train.max_epochs) return true;
  return false;
}

int64_t Trainer::completed_epochs() {
  const auto position = loader_.position();
  return position.epoch + (position.next_batch >= loader_.batches_in_epoch() ? 1 : 0);
}

double Trainer::epoch_progress() {
  const auto position = loader_.position();
  const double in_epoch = std::min<double>(
      1.0, static_cast<double>(position.next_batch) / std::max<int64_t>(1, loader_.batches_in_epoch()));
  return static_cast<double>(position.epoch) + in_epoch;
}

int Trainer::run() {
  install_stop_signal_handlers();
  started_ = std::chrono::steady_clock::now();
  log::info(banner());
  model_->train();
  ProgressMeter meter(config_, step_);
  while (!should_stop()) {
    const auto stats = train_step();
    meter.add(stats);
    if (step_ % config_.log.every_steps == 0) report(meter.take(step_, epoch_progress()));
    if (config_.checkpoint.every_steps > 0 && step_ % config_.checkpoint.every_steps == 0) {
      save_checkpoint();
    }
  }
  if (last_saved_step_ != step_) save_checkpoint();
  comm_.barrier();
  const int sig = stop_signal();
  log::info(meter.summary(step_, epoch_progress()) +
            (sig != 0 ? " (stopped by signal " + std::to_string(sig) + ")" : ""));
  return sig != 0 ? 128 + sig : 0;
}

void Trainer::report(const ProgressRecord& record) {
  if (group_.rank() != 0) return;
  log::info(record.line());
  metrics_->write(record.json());
}

void Trainer::save_checkpoint() {
  auto rngs = comm_.gather_bytes(rng_state(), 0);
  last_saved_step_ = step_;
  if (group_.rank() != 0) return;
  checkpoint::CheckpointData data;
  data.step = step_;
  data.world_size = group_.size();
  data.model = named_parameters(model_);
  data.optimizer = adam_->state();
  data.optimizer_step = adam_->step_count();
  data.schedule = {{"lr", optim::learning_rate(schedule_options(config_.train), step_)}};
  const auto position = loader_.position();
  data.data_epoch = position.epoch;
  data.data_next_batch = position.next_batch;
  data.rng = std::move(rngs);
  data.config_yaml = config::to_yaml(config_);
  data.vocab = vocab_bytes_;
  const std::string path =
      (fs::path(config_.checkpoint.dir) / checkpoint::step_file_name(step_)).string();
  checkpoint::save(path, data);
  link_last(path, config_.checkpoint.dir);
  checkpoint::prune(config_.checkpoint.dir, config_.checkpoint.keep_last);
  log::info("saved " + path + " (step " + std::to_string(step_) + ")");
}

std::string Trainer::banner() const {
  int64_t count = 0;
  for (const auto& p : params_) count += p.numel();
  std::ostringstream out;
  out << "tandem-train: " << group_.size() << " rank(s), backend " << comm_.backend() << ", "
      << config_.train.threads << " thread(s) per rank, host " << group_.hostname() << "\n"
      << "corpus " << corpus_.path() << ": " << corpus_.size("train") << " training pairs, vocabulary "
      << vocab_size_ << "\n"
      << "model: " << count << " parameters\n"
      << "resolved config:\n"
      << config::to_yaml(config_);
  return out.str();
}

}  // namespace tandem::train
