#include "trainer/import/import.h"

#include <stdexcept>

#include "trainer/import/hf_folder.h"
#include "trainer/import/m2m100.h"
#include "trainer/import/marian.h"

namespace tandem::importer {

ImportedModel import_folder(const std::string& dir) {
  if (!is_dir(dir)) throw std::invalid_argument("'" + dir + "' is not a folder");
  const std::string config = dir + "/config.json";
  if (!is_file(config)) {
    throw std::invalid_argument("'" + dir +
                                "' has no config.json: not a Hugging Face model "
                                "folder (save_pretrained's)");
  }
  const Keys keys(read_json(config), config);
  const std::string type = keys.text("model_type");
  if (type == "marian") return import_marian(dir);
  if (type == "m2m_100") return import_m2m100(dir);
  keys.refuse("model_type",
              "Tandem imports \"marian\" (OPUS-MT) and \"m2m_100\" (M2M-100, NLLB-200) models");
}

}  // namespace tandem::importer
