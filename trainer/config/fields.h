// The key table of Config, private to config/: every key once, with its section and name, in the
// order to_yaml writes them. The parser, the emitter and the "did you mean" suggestions all walk
// it, so adding a field to config.h and one line here is all a new key needs. A section may hold
// a section ("train.alignment"): its keys come right after its parent's.
#pragma once

#include <string>
#include <vector>

#include "trainer/config/config.h"

namespace tandem::config::detail {

// The keys of what is trained and how: model, data, train.
template <class C, class Visit>
void for_each_learning_field(C& c, Visit& visit) {
  visit("model", "d_model", c.model.d_model);
  visit("model", "heads", c.model.heads);
  visit("model", "encoder_layers", c.model.encoder_layers);
  visit("model", "decoder_layers", c.model.decoder_layers);
  visit("model", "d_ff", c.model.d_ff);
  visit("model", "dropout", c.model.dropout);
  visit("model", "pre_norm", c.model.pre_norm);
  visit("model", "tie_embeddings", c.model.tie_embeddings);
  visit("model", "max_positions", c.model.max_positions);
  visit("model", "activation", c.model.activation);
  visit("model", "positions", c.model.positions);
  visit("data", "corpus", c.data.corpus);
  visit("data", "max_tokens", c.data.max_tokens);
  visit("data", "seed", c.data.seed);
  visit("data", "pool_batches", c.data.pool_batches);
  visit("data", "prefetch_steps", c.data.prefetch_steps);
  visit("data", "temperature", c.data.temperature);
  visit("data", "weights", c.data.weights);
  visit("train", "max_steps", c.train.max_steps);
  visit("train", "max_epochs", c.train.max_epochs);
  visit("train", "max_minutes", c.train.max_minutes);
  visit("train", "lr", c.train.lr);
  visit("train", "schedule", c.train.schedule);
  visit("train", "warmup_steps", c.train.warmup_steps);
  visit("train", "adam_beta1", c.train.adam_beta1);
  visit("train", "adam_beta2", c.train.adam_beta2);
  visit("train", "adam_eps", c.train.adam_eps);
  visit("train", "clip_norm", c.train.clip_norm);
  visit("train", "label_smoothing", c.train.label_smoothing);
  visit("train", "ema_decay", c.train.ema_decay);
  visit("train", "accum_steps", c.train.accum_steps);
  visit("train", "checkpoint_activations", c.train.checkpoint_activations);
  visit("train", "seed", c.train.seed);
  visit("train", "threads", c.train.threads);
  visit("train", "onednn_cache", c.train.onednn_cache);
  visit("train", "device", c.train.device);
  visit("train", "precision", c.train.precision);
  // A section inside a section: written and read as train: alignment: weight: ...
  visit("train.alignment", "weight", c.train.alignment.weight);
  visit("train.alignment", "layer", c.train.alignment.layer);
  visit("train.alignment", "heads", c.train.alignment.heads);
  visit("train.alignment", "shift", c.train.alignment.shift);
}

// The keys of how the run is kept, checked, spread and watched: checkpoint, valid, dist, log, lora.
template <class C, class Visit>
void for_each_run_field(C& c, Visit& visit) {
  visit("checkpoint", "dir", c.checkpoint.dir);
  visit("checkpoint", "every_steps", c.checkpoint.every_steps);
  visit("checkpoint", "every_minutes", c.checkpoint.every_minutes);
  visit("checkpoint", "keep_last", c.checkpoint.keep_last);
  visit("valid", "every_steps", c.valid.every_steps);
  visit("valid", "max_sentences", c.valid.max_sentences);
  visit("valid", "beam", c.valid.beam);
  visit("valid", "metric", c.valid.metric);
  visit("valid", "patience", c.valid.patience);
  visit("valid", "samples", c.valid.samples);
  visit("dist", "check_every_steps", c.dist.check_every_steps);
  visit("dist", "bucket_mb", c.dist.bucket_mb);
  visit("dist", "first_bucket_mb", c.dist.first_bucket_mb);
  visit("dist", "timeout_s", c.dist.timeout_s);
  visit("dist", "shard_optimizer", c.dist.shard_optimizer);
  visit("dist", "shard_gradients", c.dist.shard_gradients);
  visit("log", "every_steps", c.log.every_steps);
  visit("log", "tensorboard", c.log.tensorboard);
  visit("log", "tensorboard_dir", c.log.tensorboard_dir);
  visit("lora", "base", c.lora.base);
  visit("lora", "rank", c.lora.rank);
  visit("lora", "alpha", c.lora.alpha);
  visit("lora", "dropout", c.lora.dropout);
  visit("lora", "targets", c.lora.targets);
  visit("lora", "base_precision", c.lora.base_precision);
}

// Calls visit(section, key, field&) for every key; C is Config or const Config.
template <class C, class Visit>
void for_each_field(C& c, Visit&& visit) {
  for_each_learning_field(c, visit);
  for_each_run_field(c, visit);
}

// Whether the integer key section.key also takes the word auto (stored as kAutoMaxTokens).
inline bool takes_auto(const std::string& section, const std::string& key) {
  return section == "data" && key == "max_tokens";
}

// Sets *value to the closed-set value spelled `text` (config.h's Spellings) and returns true, or
// returns false when `text` spells none of them. Defined in validate.cpp for every closed set.
template <class Enum>
bool resolve(const std::string& text, Enum* value);
// The spellings for a message: "constant or inverse_sqrt", "auto, cpu or cuda".
template <class Enum>
std::string one_of();

// The shortest decimal text that reads back as exactly `value`: 0.0003 (not
// 0.00029999999999999997), 2, 1e-09.
std::string shortest_decimal(double value);

// format_double: shortest_decimal, with ".0" added to whole numbers so they read as floats; .inf,
// -.inf and .nan as YAML spells them.
std::string format_double(double value);

// Appends data.weights' entry `name`: `number` (its text, from `entry`, which messages quote);
// std::invalid_argument naming data.weights when the weight is not a positive number or the name
// is empty or already weighted.
void add_corpus_weight(std::vector<CorpusWeight>& weights, const std::string& name,
                       const std::string& number, const std::string& entry);

}  // namespace tandem::config::detail
