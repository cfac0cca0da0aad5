#include "tests/fuzz/fuzz_files.h"

#include <torch/torch.h>

#include <fstream>
#include <iterator>
#include <memory>

#include "data/corpus/corpus.h"
#include "tests/common/synthetic_corpus.h"
#include "tests/fuzz/fuzz_target.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/common/temp_dir.h"
#include "trainer/config/config.h"
#include "trainer/model_io/model_io.h"
#include "trainer/train/keep_best.h"
#include "trainer/train/rng.h"
#include "trainer/train/validator.h"

namespace tandem::fuzz {

const std::string& scratch_dir() {
  static const std::unique_ptr<TempDir> dir = std::make_unique<TempDir>("fuzz");
  return dir->path();
}

std::string write_scratch(const std::string& name, const std::string& bytes) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  if (!out.flush()) fail("cannot write " + path);
  return path;
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

const std::string& base_corpus() {
  static const std::string path = [] {
    test::SyntheticCorpusOptions options;
    options.train_pairs = 24;
    options.valid_pairs = 4;
    options.test_pairs = 4;
    options.max_words = 5;
    return test::make_reverse_corpus(scratch_dir(), options);
  }();
  return path;
}

const data::Vocab& base_vocab() {
  static const data::Vocab vocab = data::Corpus(base_corpus()).vocab();
  return vocab;
}

const std::string& base_config_yaml() {
  static const std::string yaml = config::to_yaml(config::parse_config(
      "model: {d_model: 8, heads: 2, encoder_layers: 1, decoder_layers: 1, d_ff: 16,\n"
      "        max_positions: 32, dropout: 0.0}\n"
      "data: {corpus: " +
          base_corpus() +
          "}\n"
          "train: {ema_decay: 0.9}\n",
      "fuzz base config"));
  return yaml;
}

const std::string& base_checkpoint() {
  static const std::string path = [] {
    torch::manual_seed(1);
    const config::Config config = config::parse_config(base_config_yaml(), "fuzz base config");
    model::Transformer model(checkpoint::model_options(config.model, base_vocab().size()));
    checkpoint::CheckpointData data;
    data.step = 7;
    data.model = checkpoint::named_parameters(model);
    for (const auto& [name, tensor] : data.model) {
      data.ema.emplace_back(name, tensor.detach().clone() * 0.5);
      data.optimizer["exp_avg"].emplace_back(name, torch::full_like(tensor, 0.25));
      data.optimizer["exp_avg_sq"].emplace_back(name, torch::full_like(tensor, 0.125));
    }
    data.holds_ema = true;
    data.optimizer_step = 7;
    data.schedule = {{"last_lr", 1e-3}, {"step", 7}};
    data.data_epoch = 1;
    data.data_next_batch = 3;
    data.rng = {train::dropout_rng_state(torch::kCPU), train::dropout_rng_state(torch::kCPU)};
    data.world_size = 2;
    data.config_yaml = base_config_yaml();
    train::KeepBest keep_best(config.valid.metric, 2);
    train::ValidationResult result;
    result.bleu = 1.5;
    keep_best.record(5, result);
    data.validation = keep_best.to_json();
    data.vocab = base_vocab().bytes();
    const std::string out = scratch_dir() + "/base.h5";
    checkpoint::save(out, data);
    return out;
  }();
  return path;
}

}  // namespace tandem::fuzz
