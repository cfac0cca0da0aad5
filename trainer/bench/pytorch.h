// The PyTorch yardstick (ref_train.py, kept outside the repository) run on the same corpus, model
// shape, token budget, ranks and threads as Tandem's measurement, and its JSON line read back.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/corpus/corpus.h"
#include "trainer/config/config.h"

namespace tandem::bench {

struct YardstickOptions {
  std::string script;  // ref_train.py
  std::string python = "/usr/bin/python3";
  std::string
      data_dir;     // holds train.en (source) and train.es (target); "" = export from the corpus
  std::string spm;  // SentencePiece model; "" = the corpus's vocabulary
  int ranks = 1;
  int threads = 1;
  int steps = 30;                  // timed steps, after the script's own 2 warm-up steps
  bool cuda = false;               // on the GPU (with SDPA attention), as Tandem ran
  std::string precision = "fp32";  // fp32 | bf16 (torch.autocast of its forward pass)
};

struct YardstickResult {
  double tgt_tokens_per_s = 0;
  double rank0_peak_rss_mb = 0;
  bool reencoded = false;  // the text was exported from the corpus's tokens
  nlohmann::json record;   // the script's JSON line
};

// Throws std::invalid_argument, before anything is measured, when the script or the given data are
// missing or the model has a shape the script does not know (it has only tiny and base).
void check_yardstick(const YardstickOptions& options, const config::ModelConfig& model);

// Differences between `config` and the script's fixed model and optimiser (post-norm, untied
// embeddings, dropout 0.1, no label smoothing, one batch per step), one line each.
std::vector<std::string> yardstick_differences(const config::Config& config);

// Exports what the script needs into `work_dir` (unless given), runs it under mpirun (or alone for
// one rank) and parses its JSON line. std::runtime_error when it fails.
YardstickResult run_yardstick(const YardstickOptions& options, const config::Config& config,
                              const data::Corpus& corpus, const std::string& work_dir);

}  // namespace tandem::bench
