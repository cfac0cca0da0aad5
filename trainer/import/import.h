// tandem-import: a Hugging Face model folder as a Tandem checkpoint, by its config.json's
// model_type: "marian" (MarianMT, OPUS-MT: marian.h) or "m2m_100" (M2M-100, NLLB-200: m2m100.h).
#pragma once

#include <string>

#include "trainer/import/imported_model.h"

namespace tandem::importer {

// The folder's model, by config.json's model_type. std::invalid_argument, one line naming the
// folder, file or key, for a folder that is neither kind or that its kind's import refuses.
ImportedModel import_folder(const std::string& dir);

}  // namespace tandem::importer
