#include "trainer/train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/cuda.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <sstream>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/common/fault_injection.h"
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
void check_same_layout(const checkpoint::NamedTensors& params, parallel::Communicator& comm) {
  std::vector<std::string> items;
  for (const auto& [name, p] : params) {
    std::ostringstream item;
    item << name << ' ' << p.sizes() << ' ' << p.dtype();
    items.push_back(item.str());
  }
  auto hashes = comm.all_gather(parallel::stable_hash(items));
  for (size_t r = 1; r < hashes.size(); ++r) {
    if (hashes[r] != hashes[0]) {
      throw std::runtime_error("parameter layout differs between rank 0 and rank " +
                               std::to_string(r) + " (different config or build?)");
    }
  }
}

// dir/name becomes the same file as step_path (a hard link, or a copy where links fail), replaced
// atomically, so last.h5 and best.h5 survive pruning of the step files.
void link_as(const std::string& step_path, const std::string& dir, const std::string& name) {
  const fs::path tmp = fs::path(dir) / (name + ".tmp");
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_hard_link(step_path, tmp, ec);
  if (ec) fs::copy_file(step_path, tmp, fs::copy_options::overwrite_existing);
  fs::rename(tmp, fs::path(dir) / name);
}

}  // namespace

Trainer::Trainer(config::Config config, parallel::ProcessGroup& group, const ResumeOptions& resume)
    : config_(std::move(config)),
      group_(group),
      comm_(group.cpu()),
      corpus_(config_.data.corpus),
      loader_(corpus_, "train", plan_options(config_.data), group.rank(), group.size()) {
  set_compute_threads(static_cast<int>(config_.train.threads));
  device_ = choose_device(config_.train, group.local_rank(), group.local_size());
  tensor_comm_ = &comm_;
#ifdef TANDEM_HAVE_NCCL
  if (device_.device.is_cuda()) {
    gpu_comm_ = parallel::make_nccl_communicator(group, config_.dist.timeout_s);
    tensor_comm_ = gpu_comm_.get();
  }
#endif
  comm_.set_timeout(config_.dist.timeout_s);
  tensor_comm_->set_timeout(config_.dist.timeout_s);
  vocab_bytes_ = corpus_.vocab().bytes();
  vocab_size_ = data::Vocab::from_bytes(vocab_bytes_).size();
  torch::manual_seed(config_.train.seed);
  model_ = model::Transformer(model_options(config_.model, vocab_size_));
  model_->to(device_.device);
  auto named = named_parameters(model_);
  for (const auto& item : named) params_.push_back(item.second);
  check_same_layout(named, comm_);
  adam_ = std::make_unique<optim::Adam>(named, adam_options(config_.train));
  reducer_ = std::make_unique<parallel::GradientReducer>(params_, *tensor_comm_, config_.dist.bucket_mb,
                                                     config_.dist.first_bucket_mb);
  if (config_.valid.every_steps > 0) {
    vocab_ = std::make_unique<data::Vocab>(data::Vocab::from_bytes(vocab_bytes_));
    validator_ = std::make_unique<Validator>(corpus_, *vocab_, config_.valid,
                                             config_.data.max_tokens, comm_);
  }

  if (group_.rank() == 0) fs::create_directories(config_.checkpoint.dir);
  comm_.barrier();
  const std::string path =
      resume.path.empty() ? checkpoint::find_latest(config_.checkpoint.dir) : resume.path;
  if (path.empty()) {
    start_fresh();
  } else {
    resume_from(path, resume);
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
  for (auto& p : params_) tensor_comm_->broadcast(p, 0);
  torch::manual_seed(dropout_seed(config_.train.seed, group_.rank()));  // CPU and CUDA streams
  log::info("starting from scratch in " + config_.checkpoint.dir);
}

// What every rank needs from a checkpoint besides tensors, sent from rank 0 as one CBOR message.
struct ResumeHeader {
  int64_t step = 0;
  int64_t world_size = 0;
  int64_t epoch = 0;
  int64_t next_batch = 0;
  int64_t optimizer_step = 0;
  std::vector<std::string> rng;
  std::string validation;  // checkpoint JSON, "" when the run had not validated
};

namespace {

std::string encode_header(const ResumeHeader& h) {
  nlohmann::json rng = nlohmann::json::array();
  for (const auto& state : h.rng) rng.push_back(nlohmann::json::binary({state.begin(), state.end()}));
  const nlohmann::json j{{"step", h.step}, {"world_size", h.world_size}, {"epoch", h.epoch},
                         {"next_batch", h.next_batch}, {"optimizer_step", h.optimizer_step},
                         {"rng", rng}, {"validation", h.validation}};
  const auto bytes = nlohmann::json::to_cbor(j);
  return std::string(bytes.begin(), bytes.end());
}

ResumeHeader decode_header(const std::string& bytes) {
  const auto j = nlohmann::json::from_cbor(bytes);
  ResumeHeader h{j.at("step"), j.at("world_size"), j.at("epoch"), j.at("next_batch"),
                 j.at("optimizer_step"), {}, j.at("validation")};
  for (const auto& state : j.at("rng")) {
    const auto& b = state.get_binary();
    h.rng.emplace_back(b.begin(), b.end());
  }
  return h;
}

}  // namespace

void Trainer::resume_from(const std::string& path, const ResumeOptions& options) {
  // Rank 0 reads the file and sends everything on: the other ranks never open it (it may live
  // on rank 0's disk only), and a bad file fails on one rank with one message.
  ResumeHeader header;
  if (group_.rank() == 0) header = read_checkpoint(path, options);
  header = decode_header(comm_.broadcast_bytes(encode_header(header), 0));
  {
    torch::NoGradGuard no_grad;
    for (auto& p : params_) tensor_comm_->broadcast(p, 0);
    if (!options.reset_optimizer) {
      auto state = adam_->state();  // live buffers: broadcast in place, then adopt the step
      for (auto& [group_name, tensors] : state) {
        for (auto& named : tensors) tensor_comm_->broadcast(named.second, 0);
      }
      adam_->load_state(state, header.optimizer_step);
    }
  }
  step_ = header.step;
  last_saved_step_ = header.step;
  if (!options.reset_data) loader_.set_position({header.epoch, header.next_batch});
  restore_rng(header);
  restore_validation(header.validation);
  // Epochs as the progress lines count them: fractional epochs done.
  char where[96];
  std::snprintf(where, sizeof where, " (epoch %.2f, next global batch %lld)", epoch_progress(),
                static_cast<long long>(loader_.position().next_batch));
  log::info("resuming from " + path + " at step " + std::to_string(step_) + where +
            (options.reset_optimizer ? ", optimizer state reset" : "") +
            (options.reset_data ? ", data position reset" : ""));
}

ResumeHeader Trainer::read_checkpoint(const std::string& path, const ResumeOptions& options) {
  auto data = checkpoint::load(path);
  if (data.vocab != vocab_bytes_) {
    throw std::invalid_argument("checkpoint '" + path + "': its vocabulary differs from corpus '" +
                                corpus_.path() + "' (token ids would mean other pieces)");
  }
  load_parameters(model_, data.model, path);
  if (!options.reset_optimizer && data.optimizer.empty()) {
    throw std::invalid_argument("checkpoint '" + path +
                                "' holds no optimizer state (an averaged checkpoint?); resume from "
                                "it with --reset-optimizer");
  }
  if (!options.reset_optimizer) adam_->load_state(data.optimizer, data.optimizer_step);
  return ResumeHeader{data.step,           data.world_size,     data.data_epoch,
                      data.data_next_batch, data.optimizer_step, std::move(data.rng),
                      std::move(data.validation)};
}

// Keep-best and early stopping continue across restarts: the best score, the count of
// validations without improvement and the history come back from the checkpoint.
void Trainer::restore_validation(const std::string& text) {
  if (text.empty()) return;
  const auto state = nlohmann::json::parse(text);
  validation_history_ = state.at("history");
  last_valid_step_ = state.at("last_step");
  if (state.at("metric") != config_.valid.metric) {
    log::info("valid.metric changed from " + state.at("metric").get<std::string>() + " to " +
              config_.valid.metric + ": the best-checkpoint record starts anew");
    return;
  }
  best_valid_step_ = state.at("best_step");
  best_valid_score_ = state.at("best_score");
  bad_validations_ = state.at("bad_validations");
}

std::string Trainer::validation_state() const {
  if (validation_history_.empty()) return "";
  return nlohmann::json{{"metric", config_.valid.metric},
                        {"best_step", best_valid_step_},
                        {"best_score", best_valid_score_},
                        {"bad_validations", bad_validations_},
                        {"last_step", last_valid_step_},
                        {"history", validation_history_}}
      .dump();
}

void Trainer::restore_rng(const ResumeHeader& header) {
  const bool same_world = header.world_size == group_.size() &&
                          static_cast<int64_t>(header.rng.size()) == group_.size();
  if (same_world) {
    set_rng_state(header.rng[group_.rank()]);
    // Checkpoints hold the CPU generator; GPU dropout continues on a stream fixed by the step.
    if (device_.device.is_cuda()) {
      torch::cuda::manual_seed_all(dropout_seed(config_.train.seed, group_.rank()) + step_);
    }
    return;
  }
  torch::manual_seed(dropout_seed(config_.train.seed, group_.rank()) + step_);
  log::info("checkpoint was written by " + std::to_string(header.world_size) +
            " rank(s), continuing with " + std::to_string(group_.size()) +
            ": same global batch cursor, dropout streams reseeded");
}

StepStats Trainer::train_step() {
  inject_fault_if_requested(group_.rank(), step_ + 1);  // tests only: TANDEM_FAULT_INJECT
  auto batches = loader_.next_step(config_.train.accum_steps);
  adam_->zero_grad();
  // Local sums, then one small all-reduce: tokens, nll, correct, and rank 0's (or a signalled
  // rank's) decisions to stop or to save, so every rank acts on them at the same step.
  double local[5] = {0, 0, 0, 0, 0};
  // Gradient buckets are summed over ranks during the backward pass of the last micro-batch with
  // data (earlier ones only accumulate locally), overlapping communication with computation.
  size_t last_with_data = 0;
  for (size_t m = 0; m < batches.size(); ++m) {
    if (!batches[m].empty()) last_with_data = m;
  }
  for (size_t m = 0; m < batches.size(); ++m) {
    if (m == last_with_data) reducer_->prepare_for_backward();
    const auto& batch = batches[m];
    if (batch.empty()) continue;
    const auto& device = device_.device;
    TokenLoss loss;
    {
      AutocastGuard autocast(device_.bf16, device_.device);
      auto states = model_->features(batch.src.to(device, /*non_blocking=*/true),
                                     batch.tgt_in.to(device, /*non_blocking=*/true));
      const auto [weight, bias] = model_->output_weights();
      loss = projected_token_loss(states, weight, bias,
                                  batch.tgt_out.to(device, /*non_blocking=*/true),
                                  config_.train.label_smoothing);
    }
    loss.loss_sum.backward();
    local[0] += static_cast<double>(loss.tokens);
    local[1] += loss.nll_sum;
    local[2] += static_cast<double>(loss.correct);
  }
  // Buckets not yet sent (unused parameters, or no data here) go now, before the next collective,
  // so every rank issues the same collectives in the same order.
  reducer_->end_backward();
  local[3] = stop_requested_locally() ? 1.0 : 0.0;
  local[4] = save_due_locally() ? 1.0 : 0.0;
  auto totals = torch::tensor({local[0], local[1], local[2], local[3], local[4]}, torch::kFloat64);
  comm_.all_reduce_sum(totals);
  auto sums = totals.accessor<double, 1>();

  StepStats stats{sums[0], sums[1], sums[2]};
  stop_requested_ = sums[3] > 0;
  save_due_ = sums[4] > 0;
  // Loss is a sum over this rank's targets; dividing by the global count makes N ranks equal
  // one process that saw all N batches.
  reducer_->finish(stats.tgt_tokens > 0 ? 1.0 / stats.tgt_tokens : 0.0);
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

bool Trainer::save_due_locally() const {
  const double every = config_.checkpoint.every_minutes;
  if (group_.rank() != 0 || every <= 0) return false;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - last_save_time_).count() >=
         every * 60.0;
}

// Parameters must be bitwise equal on every rank (same reduced gradients, same update); a
// difference means a broken reduction or nondeterministic kernel, and training on is wasted.
void Trainer::check_ranks_agree() {
  std::vector<std::string> bytes;
  for (const auto& param : params_) {
    const torch::Tensor p = param.detach().to(torch::kCPU).contiguous();
    bytes.emplace_back(static_cast<const char*>(p.data_ptr()), p.numel() * p.element_size());
  }
  const auto hashes = comm_.all_gather(parallel::stable_hash(bytes));
  std::string differing;
  for (size_t r = 1; r < hashes.size(); ++r) {
    if (hashes[r] != hashes[0]) differing += (differing.empty() ? "" : ", ") + std::to_string(r);
  }
  if (!differing.empty()) {
    throw std::runtime_error("step " + std::to_string(step_) + ": parameters of rank(s) " +
                             differing + " differ from rank 0's; stopping");
  }
}

void Trainer::validate() {
  const auto result = validator_->run(model_);
  model_->train();
  last_valid_step_ = step_;
  const std::string& metric = config_.valid.metric;
  const double score = result.score(metric);
  validation_history_.push_back({{"step", step_},
                                 {"loss", result.loss},
                                 {"ppl", result.perplexity},
                                 {"accuracy", result.accuracy},
                                 {"bleu", result.bleu},
                                 {"chrf", result.chrf}});
  const bool improved = best_valid_step_ < 0 || score > best_valid_score_;
  if (improved) {
    best_valid_score_ = score;
    best_valid_step_ = step_;
    bad_validations_ = 0;
  } else {
    ++bad_validations_;
  }
  const int64_t patience = config_.valid.patience;
  early_stop_ = patience > 0 && bad_validations_ >= patience;
  if (improved && last_saved_step_ != step_) save_checkpoint();
  if (group_.rank() != 0) return;
  if (improved) {
    const auto path = fs::path(config_.checkpoint.dir) / checkpoint::step_file_name(step_);
    link_as(path.string(), config_.checkpoint.dir, "best.h5");
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "validation at step %lld: loss %.4f | ppl %.2f | acc %.1f%% | BLEU %.2f | chrF2 %.2f"
                " | %zu sentences in %.1fs | best %s at step %lld%s",
                static_cast<long long>(step_), result.loss, result.perplexity,
                100.0 * result.accuracy, result.bleu, result.chrf,
                static_cast<size_t>(result.sentences), result.seconds, metric.c_str(),
                static_cast<long long>(best_valid_step_), improved ? " (new best)" : "");
  log::info(line);
  if (early_stop_) {
    log::info("early stopping: " + std::to_string(bad_validations_) +
              " validations without improvement of " + metric);
  }
  metrics_->write({{"step", step_}, {"valid_loss", result.loss}, {"valid_ppl", result.perplexity},
                   {"valid_accuracy", result.accuracy}, {"valid_bleu", result.bleu},
                   {"valid_chrf", result.chrf}, {"valid_seconds", result.seconds},
                   {"best_step", best_valid_step_}});
}

bool Trainer::should_stop() {
  if (stop_requested_ || early_stop_) return true;
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
  last_save_time_ = started_;
  log::info(banner());
  model_->train();
  ProgressMeter meter(config_, step_);
  while (!should_stop()) {
    const auto stats = train_step();
    meter.add(stats);
    if (step_ % config_.log.every_steps == 0) report(meter.take(step_, epoch_progress()));
    meter.show(step_, epoch_progress());  // live line on a terminal (rank 0); nothing otherwise
    const int64_t check = config_.dist.check_every_steps;
    if (check > 0 && step_ % check == 0) check_ranks_agree();
    if (validator_ && step_ % config_.valid.every_steps == 0) validate();
    const int64_t every = config_.checkpoint.every_steps;
    if ((save_due_ || (every > 0 && step_ % every == 0)) && last_saved_step_ != step_) {
      save_checkpoint();
    }
  }
  if (validator_ && last_valid_step_ != step_ && stop_signal() == 0) validate();
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
  last_save_time_ = std::chrono::steady_clock::now();
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
  data.validation = validation_state();
  data.vocab = vocab_bytes_;
  const std::string path =
      (fs::path(config_.checkpoint.dir) / checkpoint::step_file_name(step_)).string();
  checkpoint::save(path, data);
  link_as(path, config_.checkpoint.dir, "last.h5");
  checkpoint::prune(config_.checkpoint.dir, config_.checkpoint.keep_last);
  log::info("saved " + path + " (step " + std::to_string(step_) + ")");
}

std::string Trainer::banner() const {
  int64_t count = 0;
  for (const auto& p : params_) count += p.numel();
  std::ostringstream out;
  out << "tandem-train: " << group_.size() << " rank(s), backend " << tensor_comm_->backend()
      << ", " << config_.train.threads << " thread(s) per rank, host " << group_.hostname() << "\n"
      << "device: " << device_.description << " (rank 0; one device per rank), precision "
      << (device_.bf16 ? "bf16 autocast" : "fp32") << "\n"
      << "corpus " << corpus_.path() << ": " << corpus_.size("train") << " training pairs, vocabulary "
      << vocab_size_ << "\n"
      << "model: " << count << " parameters\n"
      << "resolved config:\n"
      << config::to_yaml(config_);
  return out.str();
}

}  // namespace tandem::train
