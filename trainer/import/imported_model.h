// What tandem-import writes of a model folder, whatever its family (marian.h, m2m100.h): a step-0
// checkpoint whose weights are read a tensor at a time as it is written, and a line saying what
// was read.
#pragma once

#include <string>

#include "data/vocab/vocab.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/config.h"
#include "trainer/import/hf_folder.h"

namespace tandem::importer {

// What tandem-import writes, and a line that says what it read.
struct ImportedModel {
  checkpoint::CheckpointData checkpoint;  // step 0, the weights (placeholders, fetched as they
                                          // are written), config and vocabulary; no optimizer
                                          // state (fine-tune with --reset-optimizer)
  std::string summary;                    // "marian: 6+6 layers, d_model 512, ..."
};

// What an import of folder `dir` writes: Tandem's model of `config` over `vocab`, every parameter
// from `named` (Tandem's names) in the model's order, the config with data.corpus saying where it
// came from, the vocabulary, and `summary`. The checkpoint's /model holds placeholders, each
// pending tensor made as the save writes it (CheckpointData::fetch), so that the import holds
// about one tensor at a time.
ImportedModel imported_model(const std::string& dir, config::Config config,
                             const data::Vocab& vocab, PendingTensors named, std::string summary);

}  // namespace tandem::importer
