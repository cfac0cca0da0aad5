// The typed configuration tree of tandem-train: plain structs with defaults, parsed and validated
// once from YAML (config/parse.cpp). Downstream code never sees YAML nodes or string keys.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace tandem::config {

// Keys with a closed set of values are enums, resolved from their YAML spelling once, when the
// config is read (config/validate.cpp); downstream code compares enums, never strings.
enum class Schedule { kConstant, kInverseSqrt };
enum class Device { kAuto, kCpu, kCuda };
enum class Precision { kFp32, kBf16 };
enum class BasePrecision { kFp32, kBf16, kInt8 };
enum class ValidMetric { kBleu, kChrf, kLoss };
enum class Activation { kRelu, kSwish };
enum class PositionLayout { kInterleaved, kHalves, kFairseq };

// The YAML spellings of each closed set, in the order of its enum.
template <class Enum>
struct Spellings;
template <>
struct Spellings<Schedule> {
  static constexpr std::array<const char*, 2> kNames{"constant", "inverse_sqrt"};
};
template <>
struct Spellings<Device> {
  static constexpr std::array<const char*, 3> kNames{"auto", "cpu", "cuda"};
};
template <>
struct Spellings<Precision> {
  static constexpr std::array<const char*, 2> kNames{"fp32", "bf16"};
};
template <>
struct Spellings<BasePrecision> {
  static constexpr std::array<const char*, 3> kNames{"fp32", "bf16", "int8"};
};
template <>
struct Spellings<ValidMetric> {
  static constexpr std::array<const char*, 3> kNames{"bleu", "chrf", "loss"};
};
template <>
struct Spellings<Activation> {
  static constexpr std::array<const char*, 2> kNames{"relu", "swish"};
};
template <>
struct Spellings<PositionLayout> {
  static constexpr std::array<const char*, 3> kNames{"interleaved", "halves", "fairseq"};
};

// The YAML spelling of a value: name_of(Schedule::kInverseSqrt) is "inverse_sqrt".
template <class Enum>
const char* name_of(Enum value) {
  return Spellings<Enum>::kNames[static_cast<size_t>(value)];
}

// model.max_positions' largest value: a corpus sentence has at most 65,534 tokens.
inline constexpr int64_t kMaxPositions = 65536;

struct ModelConfig {
  int64_t d_model = 256;        // width of embeddings and every residual stream
  int64_t heads = 4;            // attention heads; must divide d_model
  int64_t encoder_layers = 3;   // encoder blocks
  int64_t decoder_layers = 3;   // decoder blocks
  int64_t d_ff = 1024;          // inner width of the position-wise feed-forward layer
  double dropout = 0.1;         // dropout on embeddings, attention outputs and FFN outputs; 0 disables
  bool pre_norm = false;        // false: post-norm (the paper, the seeds); true: pre-norm
  bool tie_embeddings = false;  // share source, target and output embeddings (joint vocabulary)
  int64_t max_positions = 1024; // longest sequence the sinusoidal table covers, in tokens
  Activation activation = Activation::kRelu;  // feed-forward: relu | swish (x sigmoid(x))
  // The sinusoidal table's columns: interleaved (sin on even, cos on odd: the paper, fairseq) |
  // halves (sin in the first d/2, cos in the second: Marian, MarianMT).
  PositionLayout positions = PositionLayout::kInterleaved;
};

// data.weights: one corpus's weight; its share of an epoch's target tokens is its weight over the
// sum of all of them.
struct CorpusWeight {
  std::string corpus;  // a corpus of the file (tandem-prep --corpora), by name
  double weight = 1;   // > 0
};

// valid.metric: a figure of the whole valid split ("bleu"), of the mean over the corpora of a file
// of several ("mean_bleu"), or of one of them ("es-en_chrf"), as metrics.jsonl names the figures
// (valid_mean_bleu, valid_es-en_chrf). Whether the corpus exists is for training to check.
struct ValidMetricChoice {
  std::string over;  // "": the whole split; "mean": the mean over the corpora; else a corpus name
  ValidMetric figure = ValidMetric::kBleu;
};

// data.max_tokens: auto, as Config holds it until train/batch_fit.h resolves it at start-up (the
// largest batch the device's memory holds; 4,096 on a CPU). No number a user types.
inline constexpr int64_t kAutoMaxTokens = std::numeric_limits<int64_t>::min();

struct DataConfig {
  std::string corpus;           // HDF5 corpus written by tandem-prep (required)
  int64_t max_tokens = 4096;    // per rank per batch: sentences x max(src, tgt) padded length; or auto
  uint64_t seed = 1;            // seed of the global batch plan (shuffles per epoch)
  int64_t pool_batches = 100;   // sort-by-length pool, in batches' worth of sentences
  int64_t prefetch_steps = 2;   // steps of batches read ahead on a thread; 0 reads in the step
  // A corpus of several corpora (tandem-prep --corpora): each epoch draws from corpus i a share
  // p_i of its target tokens, p_i proportional to n_i^(1/temperature) (n_i: its train target
  // tokens), or to its weight in `weights` (YAML "name:weight,name:weight" or a mapping of
  // name: weight, every corpus named). temperature 1 without weights: each pair once an epoch.
  double temperature = 1.0;
  std::vector<CorpusWeight> weights;
};

// Guided alignment (Garg et al. 2019; Marian's --guided-alignment): the first `heads` heads of
// decoder layer `layer` learn the corpus's word alignments (tandem-prep --train-align) by
// cross-entropy against each target piece's row-normalised links, added to the token loss with
// `weight` (fairseq's 0.05, Marian's 0.1). The same layer gives tandem-decode's and
// tandem-score's --alignments, and the CTranslate2 export's heads, with heads_read() of its heads.
struct AlignmentConfig {
  double weight = 0;       // 0: no alignment loss
  int64_t layer = -1;      // decoder layer, 0-based; negative counts from the top (-1: the last)
  int64_t heads = 1;       // its first this many heads, averaged
  // The guided heads learn each target piece's links at the position where the piece is the
  // decoder's input (it knows the piece), not the one that predicts it: Shift-Att (Chen et al.,
  // EMNLP 2020). false for checkpoints written before the key.
  bool shift = false;

  // How many of the layer's first heads are read as alignment unless told otherwise, of a model
  // with `model_heads` heads: those guided alignment trained, or, for a model trained without it,
  // all of them averaged, for none learnt to align more than another (on the Bible tiny model:
  // AER 0.429 for its last layer's four heads, 0.458 for its best head alone, 0.525 for its first).
  int64_t heads_read(int64_t model_heads) const { return weight > 0 ? heads : model_heads; }
  // Whether they are read shifted unless told otherwise: as guided alignment trained them; a
  // model trained without it is read where each piece is predicted (the Bible tiny model's last
  // layer, its heads averaged: AER 0.428 so, 0.836 shifted).
  bool shift_read() const { return weight > 0 && shift; }
};

struct TrainConfig {
  int64_t max_steps = 0;        // stop after this many optimizer steps; 0 = no limit from this key
  int64_t max_epochs = 0;       // stop after this many epochs; 0 = no limit from this key
  double max_minutes = 0;       // stop (and checkpoint) after this much wall time; 0 disables
  double lr = 3.0e-4;           // peak learning rate
  Schedule schedule = Schedule::kConstant;  // constant | inverse_sqrt
  int64_t warmup_steps = 0;     // linear warmup steps (both schedules); 0 disables
  double adam_beta1 = 0.9;      // Adam first-moment decay
  double adam_beta2 = 0.98;     // Adam second-moment decay
  double adam_eps = 1e-9;       // Adam denominator epsilon
  double clip_norm = 1.0;       // clip the global gradient norm to this; 0 disables
  double label_smoothing = 0.0; // label smoothing of the cross-entropy; 0 disables
  // Exponential moving average of the weights (optim/ema.h), used by validation, eval and decode;
  // 0 disables. Each step the average keeps this fraction of itself (less while warming up).
  double ema_decay = 0.0;
  int64_t accum_steps = 1;      // batches per rank accumulated into one optimizer step
  // Activation checkpointing: each encoder and decoder layer keeps only its input for the backward
  // pass and runs again there (a third more compute, activations of one layer instead of all);
  // the gradients are bitwise those without it.
  bool checkpoint_activations = false;
  uint64_t seed = 1;            // seed of parameter init and dropout
  int64_t threads = 1;          // intra-op threads per rank
  // oneDNN primitives (bf16 matrix products on CPU) cached for reuse; 0 = none. Batch shapes change
  // every step, so a cache grows for hundreds of steps. Tiny shape, bf16, one rank (tandem-bench,
  // two runs each): 0 gives peak RSS 968 MB at 2439-2486 tokens/s (each primitive built anew,
  // about 4% of a step); 16 gives 1071-1105 MB at 2552-2634; oneDNN's default 1024, 1384 MB.
  int64_t onednn_cache = 0;
  // auto (the rank's GPU where LibTorch has CUDA and one is visible) | cpu | cuda
  Device device = Device::kAuto;
  // fp32 | bf16 (autocast of matrix products; fp32 weights and optimizer)
  Precision precision = Precision::kFp32;
  AlignmentConfig alignment;  // train.alignment.{weight, layer, heads}
};

struct CheckpointConfig {
  std::string dir = "runs/tiny";  // where step-*.h5, last.h5 and metrics.jsonl go
  int64_t every_steps = 500;      // save every this many steps (and always at the end); 0 = end only
  double every_minutes = 0;       // also save when this much wall time passed since the last save; 0 disables
  int64_t keep_last = 5;          // keep this many step-*.h5 files; 0 keeps all
};

struct ValidConfig {
  int64_t every_steps = 0;      // validate on the corpus's valid split this often (and at the end); 0 disables
  int64_t max_sentences = 0;    // use the first this many valid pairs; 0 = all
  int64_t beam = 1;             // beam size of validation translations; 1 = greedy (fastest)
  // what keep-best (best.h5) and early stopping follow: bleu | chrf | loss of the whole valid
  // split; with several corpora also mean_bleu ... (their mean) or <corpus>_bleu ... (one of them)
  ValidMetricChoice metric;
  int64_t patience = 0;         // stop after this many validations without improvement; 0 disables
  int64_t samples = 3;          // translations of the first valid pairs shown in TensorBoard's text
};

struct DistConfig {
  int64_t check_every_steps = 100;  // compare a parameter checksum across ranks this often; 0 disables
  double bucket_mb = 25;            // gradient bucket size cap, MiB (each bucket is one all-reduce)
  double first_bucket_mb = 1;       // cap of the first bucket, sent earliest in the backward pass
  double timeout_s = 300;           // a collective not done after this long ends the job (dead or stuck peer)
  bool shard_optimizer = false;     // each rank keeps Adam's moments and the moving average for 1/N
                                    // of the parameters (ZeRO stage 1): the same run, less memory
  bool shard_gradients = false;     // with shard_optimizer: each rank also keeps the summed
                                    // gradients of its 1/N only (ZeRO stage 2), reduce-scattered
};

struct LogConfig {
  int64_t every_steps = 50;     // progress line and metrics record every this many steps
  bool tensorboard = true;      // TensorBoard event files beside metrics.jsonl (rank 0)
  std::string tensorboard_dir;  // where the event files go; empty = checkpoint.dir
};

// LoRA (Hu et al. 2021): the weights of a base checkpoint frozen, and low-rank adapters trained
// beside the layers `targets` names: y = x Wᵀ + b + (alpha / rank) · dropout(x) Aᵀ Bᵀ, B starting
// at zero. Checkpoints then hold the adapters and name the base (model/lora.h).
struct LoraConfig {
  std::string base;             // the base checkpoint (tandem-import's or a run's); empty: no LoRA
  int64_t rank = 8;             // the adapters' rank r
  double alpha = 16;            // the adapters' scale is alpha / rank
  double dropout = 0.0;         // dropout on the adapters' input; 0 disables
  // the layers that get adapters, comma-separated: a name matches a layer whose dotted path is it
  // or ends in "." and it (peft's target_modules): q_proj, k_proj, v_proj, out_proj, fc1, fc2,
  // or narrower ones such as cross_attn.q_proj or decoder.layers.0.ffn.fc1
  std::string targets = "q_proj,k_proj,v_proj,out_proj";
  // fp32 | bf16 | int8: how the frozen base's weight matrices are held (bf16: 2 bytes a
  // parameter; int8: 1, quantized per row as int8 decoding holds weights; computed in fp32 unless
  // train.precision is bf16)
  BasePrecision base_precision = BasePrecision::kFp32;
};

struct Config {
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  CheckpointConfig checkpoint;
  ValidConfig valid;
  DistConfig dist;
  LogConfig log;
  LoraConfig lora;
};

// Reads a YAML file and applies "key.path=value" overrides (tandem-train --set) on top.
// Throws std::invalid_argument naming the file, the full key path and the value at fault;
// unknown keys suggest the closest known key.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// Same from YAML text; `source` names it in errors (a file name, or "checkpoint").
Config parse_config(const std::string& yaml_text, const std::string& source,
                    const std::vector<std::string>& overrides = {});

// Checks ranges and relations (heads divide d_model, positive sizes, ...); throws
// std::invalid_argument naming the key. load_config/parse_config call it.
void validate(const Config& config);

// data.weights from its text form, "en-es:1, es-en:2.5". Throws std::invalid_argument naming
// data.weights and the entry when one is not name:weight with a positive weight, or a name comes
// twice.
std::vector<CorpusWeight> parse_corpus_weights(const std::string& text);
// The text form: "en-es:1,es-en:2.5" (each weight in its shortest exact decimal); "" for none.
std::string to_text(const std::vector<CorpusWeight>& weights);

// valid.metric from its text; std::invalid_argument naming valid.metric and the text when it is
// none of the forms ValidMetricChoice describes.
ValidMetricChoice parse_valid_metric(const std::string& text);
// The text form: "bleu", "mean_chrf", "es-en_loss".
std::string to_text(const ValidMetricChoice& metric);

// The resolved config as YAML, every key present; parse_config(to_yaml(c)) == c.
std::string to_yaml(const Config& config);

}  // namespace tandem::config
