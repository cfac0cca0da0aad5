// tandem-import: a Hugging Face model folder as a Tandem checkpoint, by its config.json's
// model_type: "marian" (MarianMT, OPUS-MT: marian.h) or "m2m_100" (M2M-100, NLLB-200: m2m100.h).
#pragma once

#include <torch/torch.h>

#include <map>
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

// The folder's model, by config.json's model_type. std::invalid_argument, one line naming the
// folder, file or key, for a folder that is neither kind or that its kind's import refuses.
ImportedModel import_folder(const std::string& dir);

}  // namespace tandem::importer
