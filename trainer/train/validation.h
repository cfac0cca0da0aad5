// Validation inside training, as the loop sees it: the Validator measures, KeepBest decides, and
// this reports (a log line, a metrics.jsonl record). The keep-best state exists even when
// validation is off (valid.every_steps 0): a resumed run carries it on in its checkpoints.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "data/corpus/corpus.h"
#include "trainer/config/config.h"
#include "trainer/model/transformer.h"
#include "trainer/parallel/communicator.h"
#include "trainer/train/keep_best.h"
#include "trainer/train/validator.h"

namespace tandem::train {

struct ValidationOutcome {
  int64_t step = 0;
  ValidationResult result;
  ValidationVerdict verdict;
};

class Validation {
 public:
  // Reads this rank's share of the valid split when validation is on.
  Validation(const data::Corpus& corpus, const config::Config& config,
             parallel::Communicator& comm);

  bool enabled() const { return validator_ != nullptr; }
  // Collective (enabled() only): measures at `step` and records the result in keep_best().
  // Leaves the model in eval mode.
  ValidationOutcome run(model::Transformer& model, int64_t step);

  KeepBest& keep_best() { return keep_best_; }
  const KeepBest& keep_best() const { return keep_best_; }

  // "validation at step 400: loss 4.0570 | ... | best bleu at step 400 (new best)", and the
  // early-stopping line when it stops training.
  void log(const ValidationOutcome& outcome) const;
  // The metrics.jsonl record: valid_loss, valid_ppl, ..., best_step.
  nlohmann::json record(const ValidationOutcome& outcome) const;
  // Rank 0: the sample translations as a Markdown table (source, reference, translation); empty
  // without samples (valid.samples 0).
  static std::string samples_markdown(const ValidationOutcome& outcome);

 private:
  std::unique_ptr<Validator> validator_;
  KeepBest keep_best_;
};

}  // namespace tandem::train
