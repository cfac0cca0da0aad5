#include "trainer/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "data/batching/direction_sampling.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/common/fault_injection.h"
#include "trainer/common/log.h"
#include "trainer/jobs/stop_handler.h"
#include "trainer/model/lora.h"
#include "trainer/model_io/model_io.h"
#include "trainer/optim/shard_exchange.h"
#include "trainer/runtime/cpu_runtime.h"
#include "trainer/train/batch_fit.h"
#include "trainer/train/forward_backward.h"
#include "trainer/train/rank_checks.h"
#include "trainer/train/rng.h"

namespace tandem::train {
namespace {

// The batch plan's options; with data.temperature or data.weights, how many pairs an epoch draws
// from each direction of the file (data/batching/direction_sampling.h).
data::BatchPlanOptions plan_options(const config::DataConfig& data, const data::Corpus& corpus) {
  data::BatchPlanOptions options;
  options.max_tokens = data.max_tokens;
  options.seed = data.seed;
  options.pool_batches = data.pool_batches;
  data::SamplingPolicy policy;
  policy.temperature = data.temperature;
  for (const config::CorpusWeight& entry : data.weights) {
    policy.weights.emplace_back(entry.corpus, entry.weight);
  }
  if (policy.each_pair_once()) return options;
  options.directions =
      data::epoch_draws(corpus.directions(), corpus.tgt_lengths("train"), policy, corpus.path());
  return options;
}

// A NaN gradient that backward accumulates into and the reducer sums over ranks, as an overflow
// on one rank would give.
void poison_gradient(torch::Tensor param) {
  torch::NoGradGuard no_grad;
  param.mutable_grad() = torch::full_like(param, std::nan(""));
}

// The banner's line on sharded optimizer state (and gradients); nothing when it is not sharded.
std::string describe_sharding(const optim::ShardPlan& plan, bool gradients) {
  if (!plan.sharded()) return "";
  int64_t total = 0;
  for (size_t i = 0; i < plan.params(); ++i) total += plan.numel(i);
  return std::string(gradients ? "optimizer state and gradients" : "optimizer state") +
         " sharded over " + std::to_string(plan.ranks()) + " ranks (dist.shard_optimizer" +
         (gradients ? ", dist.shard_gradients" : "") + "): rank 0 keeps Adam's moments" +
         (gradients ? ", the summed gradients" : "") + " and the average of " +
         std::to_string(plan.elements_of(0)) + " of " + std::to_string(total) + " values\n";
}

// With dist.shard_gradients, the plan's pieces as the runs of the gradients each rank keeps.
std::vector<parallel::GradientRun> gradient_runs(const config::DistConfig& dist,
                                                 const optim::ShardPlan& plan) {
  std::vector<parallel::GradientRun> runs;
  if (!dist.shard_gradients || !plan.sharded()) return runs;
  for (const optim::Piece& piece : plan.pieces()) {
    runs.push_back({piece.param, piece.begin, piece.end, piece.rank});
  }
  return runs;
}

// Text as a Markdown code block: every line indented by four spaces.
std::string as_markdown_code(const std::string& text) {
  std::string code = "    ";
  for (char c : text) {
    code += c;
    if (c == '\n') code += "    ";
  }
  return code;
}

optim::AdamOptions adam_options(const config::TrainConfig& train) {
  return optim::AdamOptions{train.adam_beta1, train.adam_beta2, train.adam_eps};
}

// With dist.shard_optimizer, each rank's 1/N of the parameters' elements; else (and alone) all of
// them.
optim::ShardPlan shard_plan(const config::DistConfig& dist, const checkpoint::NamedTensors& named,
                            const parallel::ProcessGroup& group) {
  auto shapes = optim::ShardPlan::shapes_of(named);
  if (!dist.shard_optimizer || group.size() == 1) return optim::ShardPlan(std::move(shapes));
  return optim::ShardPlan(std::move(shapes), group.size(), group.rank());
}

constexpr double kBytesPerMb = 1024.0 * 1024.0;

// The loss's terms from train.*; std::invalid_argument when guided alignment is asked of a corpus
// whose train split has no word alignments.
LossTerms loss_terms(const config::Config& config, const data::Corpus& corpus) {
  const config::AlignmentConfig& alignment = config.train.alignment;
  LossTerms terms;
  terms.label_smoothing = config.train.label_smoothing;
  terms.alignment_weight = alignment.weight;
  terms.alignment_heads = {model::bottom_up_layer(alignment.layer, config.model.decoder_layers),
                           alignment.heads, 0, alignment.shift};
  if (alignment.weight > 0 && !corpus.has_alignments("train")) {
    throw std::invalid_argument(
        "train.alignment.weight is above 0 but corpus '" + corpus.path() +
        "' has no word alignments in its train split (tandem-prep --train-align; "
        "docs/corpus.md)");
  }
  return terms;
}

}  // namespace

Trainer::Trainer(config::Config config, parallel::ProcessGroup& group, const ResumeOptions& resume)
    : config_(std::move(config)),
      ranks_{group, nullptr},
      corpus_(config_.data.corpus),
      cadence_(config_, group.rank()) {
  optimizer_.schedule = {config_.train.schedule, config_.train.lr, config_.train.warmup_steps};
  loss_terms_ = loss_terms(config_, corpus_);
  const MetricsOutputs outputs = metrics_outputs(config_);
  if (group.rank() == 0) require_writable(outputs);
  runtime::configure_cpu_runtime(
      {static_cast<int>(config_.train.threads), config_.train.onednn_cache});
  device_ = runtime::choose_device(config_.train, group.local_rank(), group.local_size());
  connect_ranks();
  build_model();
  // Rank 0's view of checkpoint.dir decides for all (the directory may be on its disk only).
  std::string path = resume.path;
  if (path.empty() && group.rank() == 0) path = checkpoint::find_latest(config_.checkpoint.dir);
  path = group.cpu().broadcast_bytes(path, 0);
  open_data(path);
  outputs_.checkpoints = std::make_unique<CheckpointWriter>(
      config_, corpus_.vocab().bytes(), model_.lora_base_hash, group.rank() == 0);
  if (path.empty()) {
    start_fresh();
  } else {
    resume_from(path, resume);
  }
  if (group.rank() == 0) {
    outputs_.metrics = std::make_unique<MetricsLog>(outputs, step_);
    outputs_.metrics->text(step_, "config", as_markdown_code(config::to_yaml(config_)));
  }
}

Trainer::~Trainer() = default;

void Trainer::connect_ranks() {
#ifdef TANDEM_HAVE_NCCL
  if (device_.device.is_cuda()) {
    ranks_.gpu = parallel::make_nccl_communicator(ranks_.group, device_.device.index(),
                                                  config_.dist.timeout_s);
  }
#endif
  ranks_.group.cpu().set_timeout(config_.dist.timeout_s);
  ranks_.tensors().set_timeout(config_.dist.timeout_s);
}

void Trainer::build_model() {
  torch::manual_seed(config_.train.seed);
  model::TransformerOptions options =
      checkpoint::model_options(config_.model, corpus_.vocab().size());
  options.recompute_layers = config_.train.checkpoint_activations;
  if (config_.lora.base.empty()) {
    model_.net = model::Transformer(options);
  } else {
    model_.net = lora_model(options);
  }
  model_.net->to(device_.device);
  const auto named = checkpoint::trainable_parameters(model_.net);
  check_same_layout(named, ranks_.group.cpu());
  optimizer_.adam = std::make_unique<optim::Adam>(named, adam_options(config_.train),
                                                  shard_plan(config_.dist, named, ranks_.group));
  if (config_.train.ema_decay > 0) {
    optimizer_.ema = std::make_unique<optim::Ema>(optimizer_.adam->plan().owned_slices(named),
                                                  config_.train.ema_decay);
  }
  optimizer_.reducer = std::make_unique<parallel::GradientReducer>(
      optimizer_.adam->parameters(), ranks_.tensors(), config_.dist.bucket_mb,
      config_.dist.first_bucket_mb, gradient_runs(config_.dist, optimizer_.adam->plan()));
  if (optimizer_.reducer->sharded()) {
    optimizer_.adam->take_gradients_from(optimizer_.reducer->owned_gradients());
  }
}

// LoRA: the base's weights read a tensor at a time into a model built hollow (never whole in
// float32 where lora.base_precision is bf16 or int8), then the adapters, drawn from the seed.
model::Transformer Trainer::lora_model(model::TransformerOptions options) {
  const config::LoraConfig& lora = config_.lora;
  options.on_part_built = model::hollow_parameters;
  model::Transformer model(options);
  const checkpoint::LoraBase base = checkpoint::read_lora_base(
      lora.base, model, checkpoint::held_as(lora.base_precision));
  if (base.vocab != corpus_.vocab().bytes()) {
    throw std::invalid_argument("LoRA base '" + lora.base + "': its vocabulary differs from corpus '" +
                                corpus_.path() + "' (token ids would mean other pieces)");
  }
  model_.lora_base_hash = base.hash;
  const auto adapted = model::add_adapters(model, model::lora_targets(lora.targets),
                                           checkpoint::adapter_options(lora));
  if (ranks_.group.rank() == 0) {
    log::info("LoRA on base " + lora.base + " (content hash " + base.hash + ", held in " +
              config::name_of(lora.base_precision) + "): adapters of rank " +
              std::to_string(lora.rank) + " beside " + std::to_string(adapted.size()) +
              " layers");
  }
  return model;
}

// What plans batches or writes the config comes after data.max_tokens is a number.
void Trainer::open_data(const std::string& resume_path) {
  parallel::ProcessGroup& group = ranks_.group;
  if (config_.data.max_tokens == config::kAutoMaxTokens) {
    config_.data.max_tokens =
        fit_max_tokens(model_.net, device_, corpus_, resume_path, group.cpu());
  }
  data::BatchPlanOptions plan = plan_options(config_.data, corpus_);
  if (group.rank() == 0 && !plan.directions.empty()) {
    log::info(data::describe_draws(plan.directions, corpus_.directions()));
  }
  loader_ = std::make_unique<data::ShardedLoader>(corpus_, "train", std::move(plan), group.rank(),
                                                  group.size(), config_.data.prefetch_steps);
  loader_->pin_batches(device_.device.is_cuda());  // host-to-GPU copies that do not block
  loader_->read_links(loss_terms_.alignment_weight > 0);
  validation_ = std::make_unique<Validation>(corpus_, config_, group.cpu());
}

void Trainer::start_fresh() {
  // Rank 0's initial parameters are everyone's, whatever the ranks' RNGs did.
  torch::NoGradGuard no_grad;
  for (auto p : optimizer_.adam->parameters()) ranks_.tensors().broadcast(p, 0);
  if (optimizer_.ema) optimizer_.ema->reset();  // the average starts at those parameters
  // The dropout streams, CPU and CUDA.
  torch::manual_seed(dropout_seed(config_.train.seed, ranks_.group.rank()));
  log::info("starting from scratch in " + config_.checkpoint.dir);
}

void Trainer::resume_from(const std::string& path, const ResumeOptions& options) {
  const ResumePoint point =
      load_everywhere(path, options,
                      ResumeTarget{model_.net, *optimizer_.adam, optimizer_.ema.get(), corpus_,
                                   model_.lora_base_hash},
                      ranks_.group.cpu(), ranks_.tensors());
  step_ = point.step;
  cadence_.record_resume(step_);
  if (!options.reset_data) loader_->set_position(point.position);
  restore_dropout_streams(point, config_.train.seed, ranks_.group.rank(), ranks_.group.size(),
                          device_.device);
  validation_->keep_best().restore(point.validation, "checkpoint '" + path + "' /validation");
  // Epochs as the progress lines count them: fractional epochs done.
  char where[96];
  std::snprintf(where, sizeof where, " (epoch %.2f, next global batch %lld)", epoch_progress(),
                static_cast<long long>(loader_->position().next_batch));
  log::info("resuming from " + path + " at step " + std::to_string(step_) + where +
            (options.reset_optimizer ? ", optimizer state reset" : "") +
            (options.reset_data ? ", data position reset" : ""));
}

StepStats Trainer::train_step() {
  step_in_progress_ = step_ + 1;
  // Tests only (TANDEM_FAULT_INJECT): an error here, or a non-finite gradient on this rank.
  const bool poison = inject_fault_if_requested(ranks_.group.rank(), step_ + 1);
  // Next batches: this rank's micro-batches of the step's global batches.
  const auto batches = loader_->next_step(config_.train.accum_steps);
  clear_gradients();
  if (poison) poison_gradient(optimizer_.adam->parameters().front());
  // Forward and backward; gradient buckets are all-reduced while the last backward runs.
  const RankStep local = forward_backward(model_.net, batches, *optimizer_.reducer, device_,
                                          loss_terms_, loader_->directions());
  // Agree across ranks: the global target count, and every rank's votes to stop or to save.
  const Agreement agreed =
      agree_across_ranks(local.tgt_tokens, cadence_.local_votes(), ranks_.group.cpu());
  cadence_.agree(agreed.votes);
  // Finish the reduction: the loss is a sum over this rank's targets, so dividing by the global
  // count makes N ranks equal one process that saw all N batches.
  optimizer_.reducer->finish(agreed.tgt_tokens > 0 ? 1.0 / agreed.tgt_tokens : 0.0);
  ++step_;
  StepStats stats;
  stats.step = step_;
  stats.tgt_tokens = agreed.tgt_tokens;
  stats.rank_tokens = local.tgt_tokens;
  stats.token_sums = local.token_sums;
  stats.direction_sums = local.direction_sums;
  stats.alignment_sums = local.alignment_sums;
  // Clip, update, and move the weights' average.
  update(stats);
  return stats;
}

// Alone on a GPU the gradients are let go, so backward hands them over without an add per
// parameter; elsewhere they are zeroed in place (across ranks they are the reducer's bucket views,
// and the CPU keeps its buffers warm).
void Trainer::clear_gradients() {
  if (optimizer_.reducer->solo() && device_.device.is_cuda()) {
    optimizer_.adam->release_gradients();
  } else {
    optimizer_.adam->zero_grad();
  }
}

// Decided on the device (optim::GradientGate): the host reads nothing, so on a GPU it goes on
// queueing the next step's work. A non-finite norm (the same reduced gradients everywhere) makes
// every rank skip the update; the log step reports it.
void Trainer::update(StepStats& stats) {
  const optim::GradientGate gate =
      optimizer_.reducer->sharded()
          ? optim::gate_sharded_gradients(optimizer_.reducer->owned_gradients(),
                                          config_.train.clip_norm, ranks_.tensors(),
                                          device_.device)
          : optim::gate_gradients(optimizer_.adam->parameters(), config_.train.clip_norm);
  stats.lr = optim::learning_rate(optimizer_.schedule, step_);
  optimizer_.adam->step(stats.lr, gate);
  if (optimizer_.ema) optimizer_.ema->update(step_, gate.finite);
  share_updated_parameters();  // with sharded state: each rank's pieces to the others
  stats.update = torch::stack({gate.norm, gate.finite.logical_not().to(torch::kFloat64)});
}

int Trainer::run() {
  jobs::install_stop_signal_handlers();
  cadence_.start();
  log::info(banner());
  model_.net->train();
  // The loss figures of a log window are summed over ranks where they are, on the device.
  ProgressMeter meter(
      config_, step_, [this](torch::Tensor& t) { ranks_.tensors().all_reduce_sum(t); },
      corpus_.directions().names());
  while (!cadence_.should_stop(step_, completed_epochs(), validation_->keep_best().stop_early())) {
    meter.add(train_step());
    after_step(meter);
  }
  if (ranks_.group.rank() == 0) {  // what the last log step did not cover
    const auto skips = meter.unreported_skips();
    log_skipped_updates(skips.count, skips.last, step_);
  }
  if (validation_->enabled() && validation_->keep_best().last_step() != step_ &&
      jobs::stop_signal() == 0) {
    validate();
  }
  if (!cadence_.saved_at(step_)) save_checkpoint();
  ranks_.group.cpu().barrier();
  const int sig = jobs::stop_signal();
  const std::string why = sig == jobs::kLauncherStopSignal ? " (stopped at the launcher's request)"
                          : sig != 0 ? " (stopped by signal " + std::to_string(sig) + ")"
                                     : "";
  log::info(meter.summary(step_, epoch_progress()) + why);
  return jobs::stopped_exit_status(sig);
}

void Trainer::after_step(ProgressMeter& meter) {
  if (cadence_.log_due(step_)) {
    const ProgressRecord record = meter.take(step_, epoch_progress());
    if (ranks_.group.rank() == 0) {
      log_skipped_updates(record.skipped, record.last_skipped, record.step);
      log::info(record.line());
      outputs_.metrics->write(record.json());
    }
  }
  meter.show(step_, epoch_progress());  // live line on a terminal (rank 0); nothing otherwise
  if (cadence_.check_due(step_))
    check_parameters_agree(optimizer_.adam->parameters(), step_, ranks_.group.cpu());
  if (validation_->enabled() && cadence_.validate_due(step_)) validate();
  if (cadence_.save_due(step_)) save_checkpoint();
}

void Trainer::log_skipped_updates(int64_t count, int64_t last, int64_t up_to) {
  if (count == 1) {
    log::info("step " + std::to_string(last) + ": non-finite gradient norm, update skipped");
  } else if (count > 1) {
    log::info(std::to_string(count) +
              " updates skipped for a non-finite gradient norm in the steps up to " +
              std::to_string(up_to) + ", the last at step " + std::to_string(last));
  }
}

void Trainer::share_updated_parameters() {
  optim::share_updated(optimizer_.adam->plan(), optimizer_.adam->parameters(), ranks_.tensors(),
                       static_cast<int64_t>(config_.dist.bucket_mb * kBytesPerMb));
}

void Trainer::validate() {
  ValidationOutcome outcome;
  {
    // What eval and decode will use (with sharded averages, every rank's pieces, shared).
    const optim::AveragedWeights averaged(optimizer_.ema.get(),
                                          [this] { share_updated_parameters(); });
    outcome = validation_->run(model_.net, step_);
  }
  model_.net->train();
  if (outcome.verdict.improved && !cadence_.saved_at(step_)) save_checkpoint();
  if (ranks_.group.rank() != 0) return;
  if (outcome.verdict.improved) outputs_.checkpoints->link_best(step_);
  validation_->log(outcome);
  outputs_.metrics->write(validation_->record(outcome));
  const std::string samples = Validation::samples_markdown(outcome);
  if (!samples.empty()) outputs_.metrics->text(step_, "valid/samples", samples);
}

void Trainer::save_checkpoint() {
  cadence_.record_save(step_);
  outputs_.checkpoints->save(RunState{step_, model_.net, *optimizer_.adam, optimizer_.ema.get(),
                                      optim::learning_rate(optimizer_.schedule, step_),
                                      loader_->position(), validation_->keep_best().to_json()},
                             ranks_.group.cpu(), ranks_.tensors());
}

int64_t Trainer::completed_epochs() {
  const auto position = loader_->position();
  return position.epoch + (position.next_batch >= loader_->batches_in_epoch() ? 1 : 0);
}

double Trainer::epoch_progress() {
  const auto position = loader_->position();
  const double in_epoch =
      std::min<double>(1.0, static_cast<double>(position.next_batch) /
                                std::max<int64_t>(1, loader_->batches_in_epoch()));
  return static_cast<double>(position.epoch) + in_epoch;
}

std::string Trainer::banner() {
  int64_t count = 0;
  for (const auto& p : optimizer_.adam->parameters()) count += p.numel();
  std::ostringstream out;
  out << "tandem-train: " << ranks_.group.size() << " rank(s), backend "
      << ranks_.tensors().backend() << ", " << config_.train.threads << " thread(s) per rank, host "
      << ranks_.group.hostname() << "\n"
      << "device: " << device_.description << " (rank 0; one device per rank), precision "
      << (device_.bf16 ? "bf16 autocast" : "fp32") << "\n"
      << "corpus " << corpus_.path() << ": " << corpus_.size("train")
      << " training pairs, vocabulary " << corpus_.vocab().size() << "\n"
      << "model: " << count << (model_.lora_base_hash.empty() ? "" : " trained") << " parameters\n"
      << describe_sharding(optimizer_.adam->plan(), optimizer_.reducer->sharded())
      << "resolved config:\n"
      << config::to_yaml(config_);
  return out.str();
}

}  // namespace tandem::train
