// Range and relation checks of a parsed Config, one message per rule naming the key, its value and
// what is expected, so a bad preset fails before any data is read; and the resolution of the
// closed sets' spellings (constant, inverse_sqrt, ...) into their enums.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

#include "trainer/config/config.h"
#include "trainer/config/fields.h"

namespace tandem::config {
namespace detail {

template <class Enum>
bool resolve(const std::string& text, Enum* value) {
  const auto& names = Spellings<Enum>::kNames;
  for (size_t i = 0; i < names.size(); ++i) {
    if (text == names[i]) {
      *value = static_cast<Enum>(i);
      return true;
    }
  }
  return false;
}

template <class Enum>
std::string one_of() {
  const auto& names = Spellings<Enum>::kNames;
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
  }
  return text;
}

template bool resolve(const std::string&, Schedule*);
template bool resolve(const std::string&, Device*);
template bool resolve(const std::string&, Precision*);
template bool resolve(const std::string&, BasePrecision*);
template bool resolve(const std::string&, ValidMetric*);
template bool resolve(const std::string&, Activation*);
template bool resolve(const std::string&, PositionLayout*);
template std::string one_of<Schedule>();
template std::string one_of<Device>();
template std::string one_of<Precision>();
template std::string one_of<BasePrecision>();
template std::string one_of<ValidMetric>();
template std::string one_of<Activation>();
template std::string one_of<PositionLayout>();

}  // namespace detail

namespace {

std::string text(int64_t value) { return std::to_string(value); }
std::string text(double value) { return detail::format_double(value); }
std::string text(const std::string& value) { return value; }

template <class T>
void require(bool ok, const char* key, T value, const std::string& expected) {
  if (!ok)
    throw std::invalid_argument(std::string(key) + ": expected " + expected + ", got " +
                                text(value));
}

// Comparisons are written so NaN fails them.
void validate_model(const ModelConfig& m) {
  require(m.d_model > 0, "model.d_model", m.d_model, "a positive integer");
  require(m.heads > 0, "model.heads", m.heads, "a positive integer");
  require(m.d_model % m.heads == 0, "model.heads", m.heads,
          "a divisor of model.d_model (" + text(m.d_model) + ")");
  require(m.encoder_layers > 0, "model.encoder_layers", m.encoder_layers, "a positive integer");
  require(m.decoder_layers > 0, "model.decoder_layers", m.decoder_layers, "a positive integer");
  require(m.d_ff > 0, "model.d_ff", m.d_ff, "a positive integer");
  require(m.dropout >= 0 && m.dropout < 1, "model.dropout", m.dropout, "a number in [0, 1)");
  // Sentences are at most 65,534 tokens (corpus lengths are 16-bit), and the table is allocated
  // from this number, also when a checkpoint's /config says it.
  require(m.max_positions > 0 && m.max_positions <= kMaxPositions, "model.max_positions",
          m.max_positions, "an integer in [1, " + text(kMaxPositions) + "]");
  // fairseq's frequencies divide by d/2 - 1.
  require(m.positions != PositionLayout::kFairseq || m.d_model >= 4, "model.d_model", m.d_model,
          "at least 4 with model.positions fairseq");
}

void validate_data(const DataConfig& d) {
  if (d.corpus.empty()) {
    throw std::invalid_argument(
        "data.corpus: expected the path of a corpus written by tandem-prep, got nothing");
  }
  require(d.max_tokens > 0 || d.max_tokens == kAutoMaxTokens, "data.max_tokens", d.max_tokens,
          "a positive integer or auto");
  require(d.pool_batches > 0, "data.pool_batches", d.pool_batches, "a positive integer");
  require(d.prefetch_steps >= 0, "data.prefetch_steps", d.prefetch_steps,
          "a non-negative integer (0 turns prefetching off)");
  require(std::isfinite(d.temperature) && d.temperature > 0, "data.temperature", d.temperature,
          "a positive number (1: in proportion to each corpus's size)");
  if (!d.weights.empty()) {
    require(d.temperature == 1.0, "data.temperature", d.temperature,
            "1 with data.weights (give one or the other)");
  }
}

void validate_train(const TrainConfig& t) {
  require(t.max_steps >= 0, "train.max_steps", t.max_steps, ">= 0 (0 = no limit)");
  require(t.max_epochs >= 0, "train.max_epochs", t.max_epochs, ">= 0 (0 = no limit)");
  require(t.max_minutes >= 0, "train.max_minutes", t.max_minutes, ">= 0 (0 disables)");
  require(std::isfinite(t.lr) && t.lr > 0, "train.lr", t.lr, "a positive number");
  require(t.warmup_steps >= 0, "train.warmup_steps", t.warmup_steps, ">= 0 (0 disables)");
  require(t.schedule != Schedule::kInverseSqrt || t.warmup_steps > 0, "train.warmup_steps",
          t.warmup_steps, ">= 1 with schedule inverse_sqrt");
  require(t.adam_beta1 >= 0 && t.adam_beta1 < 1, "train.adam_beta1", t.adam_beta1,
          "a number in [0, 1)");
  require(t.adam_beta2 >= 0 && t.adam_beta2 < 1, "train.adam_beta2", t.adam_beta2,
          "a number in [0, 1)");
  require(t.adam_eps > 0, "train.adam_eps", t.adam_eps, "a positive number");
  require(t.clip_norm >= 0, "train.clip_norm", t.clip_norm, ">= 0 (0 disables)");
  require(t.label_smoothing >= 0 && t.label_smoothing < 1, "train.label_smoothing",
          t.label_smoothing, "a number in [0, 1)");
  require(t.ema_decay >= 0 && t.ema_decay < 1, "train.ema_decay", t.ema_decay,
          "a number in [0, 1) (0 disables)");
  require(t.accum_steps >= 1, "train.accum_steps", t.accum_steps, ">= 1");
  require(t.threads >= 1, "train.threads", t.threads, ">= 1");
  require(t.onednn_cache >= 0, "train.onednn_cache", t.onednn_cache, ">= 0 (0 caches none)");
}

// The aligned heads are the model's (also when the loss is off: --alignments reads them).
void validate_alignment(const AlignmentConfig& a, const ModelConfig& m) {
  require(std::isfinite(a.weight) && a.weight >= 0, "train.alignment.weight", a.weight,
          "a number >= 0 (0: no alignment loss)");
  require(a.layer >= -m.decoder_layers && a.layer < m.decoder_layers, "train.alignment.layer",
          a.layer,
          "a decoder layer in [" + text(-m.decoder_layers) + ", " + text(m.decoder_layers - 1) +
              "] (model.decoder_layers " + text(m.decoder_layers) +
              "; negative counts from the top)");
  require(a.heads >= 1 && a.heads <= m.heads, "train.alignment.heads", a.heads,
          "a number of heads in [1, " + text(m.heads) + "] (model.heads " + text(m.heads) + ")");
}

void validate_lora(const LoraConfig& l) {
  require(l.rank >= 1, "lora.rank", l.rank, ">= 1");
  require(std::isfinite(l.alpha) && l.alpha > 0, "lora.alpha", l.alpha, "a positive number");
  require(l.dropout >= 0 && l.dropout < 1, "lora.dropout", l.dropout, "a number in [0, 1)");
  std::stringstream names(l.targets);
  std::string name;
  int count = 0;
  while (std::getline(names, name, ',')) {
    const bool word = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
    });
    require(word, "lora.targets", "'" + l.targets + "'",
            "layer names separated by commas (q_proj,k_proj,v_proj,out_proj,fc1,fc2)");
    ++count;
  }
  require(count > 0, "lora.targets", "'" + l.targets + "'", "at least one layer name");
}

}  // namespace

void validate(const Config& config) {
  validate_model(config.model);
  validate_data(config.data);
  validate_train(config.train);
  validate_alignment(config.train.alignment, config.model);
  validate_lora(config.lora);
  if (config.checkpoint.dir.empty()) {
    throw std::invalid_argument("checkpoint.dir: expected a directory, got nothing");
  }
  require(config.checkpoint.every_steps >= 0, "checkpoint.every_steps",
          config.checkpoint.every_steps, ">= 0 (0 = at the end only)");
  require(config.checkpoint.every_minutes >= 0, "checkpoint.every_minutes",
          config.checkpoint.every_minutes, ">= 0 (0 disables)");
  const ValidConfig& v = config.valid;
  require(v.every_steps >= 0, "valid.every_steps", v.every_steps, ">= 0 (0 disables)");
  require(v.max_sentences >= 0, "valid.max_sentences", v.max_sentences, ">= 0 (0 = all)");
  require(v.beam >= 1, "valid.beam", v.beam, ">= 1");
  require(v.patience >= 0, "valid.patience", v.patience, ">= 0 (0 disables)");
  require(v.samples >= 0, "valid.samples", v.samples, ">= 0 (0 shows none)");
  require(config.dist.bucket_mb > 0, "dist.bucket_mb", config.dist.bucket_mb, "a positive number");
  require(config.dist.first_bucket_mb > 0, "dist.first_bucket_mb", config.dist.first_bucket_mb,
          "a positive number");
  require(config.dist.timeout_s > 0, "dist.timeout_s", config.dist.timeout_s, "a positive number");
  require(config.dist.check_every_steps >= 0, "dist.check_every_steps",
          config.dist.check_every_steps, ">= 0 (0 disables)");
  if (config.dist.shard_gradients && !config.dist.shard_optimizer) {
    throw std::invalid_argument(
        "dist.shard_gradients: true needs dist.shard_optimizer: true (the gradients are sharded "
        "as the optimizer state is: ZeRO stage 2 is stage 1 and more)");
  }
  require(config.checkpoint.keep_last >= 0, "checkpoint.keep_last", config.checkpoint.keep_last,
          ">= 0 (0 keeps all)");
  require(config.log.every_steps >= 1, "log.every_steps", config.log.every_steps, ">= 1");
}

}  // namespace tandem::config
