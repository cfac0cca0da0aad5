// Validation inside training: every rank translates and scores its share of the valid split (every
// N-th pair), the sums and translations meet on rank 0 for corpus BLEU and chrF2, and every rank
// gets the same numbers back, so keep-best and early stopping decide identically everywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/corpus/corpus.h"
#include "data/vocab/vocab.h"
#include "trainer/config/config.h"
#include "trainer/eval/direction_scores.h"
#include "trainer/model/transformer.h"
#include "trainer/parallel/communicator.h"

namespace tandem::train {

// One valid pair and its translation, as TensorBoard's text dashboard shows it.
struct ValidationSample {
  std::string source;
  std::string reference;
  std::string translation;
};

// What validation measures on a set of valid pairs.
struct ValidationFigures {
  double loss = 0;  // mean NLL per target token
  double perplexity = 0;
  double accuracy = 0;
  double bleu = 0;
  double chrf = 0;
  int64_t sentences = 0;
};

// One direction's figures, in a corpus of several (tandem-prep --corpora).
struct DirectionResult : ValidationFigures {
  std::string name;
};

// The whole valid split's figures, and what goes with them.
struct ValidationResult : ValidationFigures {
  double seconds = 0;
  std::vector<ValidationSample> samples;  // rank 0: the first valid.samples pairs
  // With several directions: each one's figures, and the mean of their BLEU and chrF2.
  std::vector<DirectionResult> directions;
  eval::Quality mean;
  // valid.metric's figure as "higher is better" (loss is negated): the whole split's, the mean
  // of the directions', or one direction's (std::invalid_argument when it has none of that name).
  double score(const config::ValidMetricChoice& metric) const;
};

class Validator {
 public:
  // Reads this rank's share of the valid split once: its first valid.max_sentences pairs (0: all),
  // or with several corpora the first valid.max_sentences of each. Throws std::invalid_argument
  // when the corpus has no valid split, or one of several corpora has none.
  Validator(const data::Corpus& corpus, const config::ValidConfig& config, int64_t max_tokens,
            parallel::Communicator& comm);

  // Collective: every rank must call it at the same step. Leaves the model in eval mode.
  ValidationResult run(model::Transformer& model);

 private:
  // Teacher-forced loss, perplexity and accuracy over all ranks' shares (and per direction).
  void measure_loss(model::Transformer& model, ValidationResult& result);
  // BLEU and chrF2 of all ranks' translations, scored on rank 0 and sent to every rank.
  void score_translations(model::Transformer& model, ValidationResult& result);
  // Rank 0: every rank's translations interleaved back into corpus order.
  std::vector<std::string> in_corpus_order(const std::vector<std::string>& gathered) const;

  data::Vocab vocab_;
  config::ValidConfig config_;
  int64_t max_tokens_;
  parallel::Communicator& comm_;
  int64_t total_ = 0;                         // pairs validated, all ranks
  std::vector<eval::DirectionSlice> slices_;  // each direction's, with several
  std::vector<data::SentencePair> pairs_;     // this rank's: positions rank, rank + N, ...
  std::vector<std::string> references_;       // rank 0: all, in global order
  std::vector<std::string> sample_sources_;   // rank 0: the first valid.samples sources
};

}  // namespace tandem::train
