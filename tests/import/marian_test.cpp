// import_marian's refusals, on folders written here: each config.json value or vocab.json that
// Tandem cannot compute as MarianMT does is named in one line. (The import itself, against
// Hugging Face's own model, is tests/e2e/import_test.cpp.)
#include "trainer/import/marian.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "trainer/common/temp_dir.h"

namespace tandem::importer {
namespace {

using nlohmann::json;

// An OPUS-MT config.json of a tiny model (the keys save_pretrained writes that the import reads).
json opus_config() {
  return json{{"model_type", "marian"},
              {"d_model", 8},
              {"encoder_layers", 1},
              {"decoder_layers", 1},
              {"encoder_attention_heads", 2},
              {"decoder_attention_heads", 2},
              {"encoder_ffn_dim", 16},
              {"decoder_ffn_dim", 16},
              {"activation_function", "swish"},
              {"scale_embedding", true},
              {"vocab_size", 5},
              {"decoder_vocab_size", 5},
              {"pad_token_id", 4},
              {"eos_token_id", 0},
              {"decoder_start_token_id", 4},
              {"max_position_embeddings", 16},
              {"share_encoder_decoder_embeddings", true}};
}

json opus_vocab() { return json{{"</s>", 0}, {"<unk>", 1}, {"▁a", 2}, {"▁b", 3}, {"<pad>", 4}}; }

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A folder with this config and vocabulary; the SentencePiece models and weights are never read
// before the refusals these tests look for.
std::string folder(const TempDir& dir, const json& config, const json& vocab = opus_vocab()) {
  write(dir.file("config.json"), config.dump());
  write(dir.file("vocab.json"), vocab.dump());
  write(dir.file("source.spm"), "not read");
  write(dir.file("target.spm"), "not read");
  return dir.path();
}

std::string refusal(const std::string& dir) {
  try {
    import_marian(dir);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(ImportMarian, RefusesEachConfigValueItCannotComputeNamingTheKey) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"model_type", "bart"}}, "model_type = \"bart\": not a MarianMT model"},
      {{{"activation_function", "gelu"}}, "activation_function = \"gelu\""},
      {{{"scale_embedding", false}}, "scale_embedding = false"},
      {{{"normalize_before", true}}, "normalize_before = true"},
      {{{"add_final_layer_norm", true}}, "add_final_layer_norm = true"},
      {{{"normalize_embedding", true}}, "normalize_embedding = true"},
      {{{"static_position_embeddings", false}}, "static_position_embeddings = false"},
      {{{"share_encoder_decoder_embeddings", false}}, "share_encoder_decoder_embeddings = false"},
      {{{"tie_word_embeddings", false}}, "tie_word_embeddings = false"},
      {{{"decoder_vocab_size", 7}}, "decoder_vocab_size = 7"},
      {{{"decoder_ffn_dim", 32}}, "decoder_ffn_dim = 32"},
      {{{"decoder_attention_heads", 4}}, "decoder_attention_heads = 4"},
      {{{"encoder_attention_heads", 3}, {"decoder_attention_heads", 3}},
       "encoder_attention_heads = 3: must divide d_model"},
      {{{"decoder_start_token_id", 0}}, "decoder_start_token_id = 0"},
      {{{"eos_token_id", 4}}, "eos_token_id = 4: the same id as pad_token_id"},
      {{{"pad_token_id", 9}}, "pad_token_id = 9: outside the vocabulary"},
      {{{"d_model", "512"}}, "d_model = \"512\": expected an integer"},
  };
  for (const auto& [change, expected] : cases) {
    TempDir dir("marian-config");
    json config = opus_config();
    for (const auto& [key, value] : change.items()) config[key] = value;
    if (change.contains("pad_token_id")) config["decoder_start_token_id"] = config["pad_token_id"];
    const std::string message = refusal(folder(dir, config));
    EXPECT_NE(message.find(expected), std::string::npos) << message;
    EXPECT_NE(message.find(dir.file("config.json")), std::string::npos) << message;
  }
  TempDir missing("marian-config");
  json config = opus_config();
  config.erase("activation_function");
  EXPECT_NE(refusal(folder(missing, config)).find("activation_function is missing"),
            std::string::npos);
}

TEST(ImportMarian, RefusesAVocabularyThatIsNotEveryIdOnce) {
  const std::vector<std::pair<json, std::string>> cases = {
      {json{{"</s>", 0}, {"<unk>", 1}, {"<pad>", 4}},
       "3 pieces, but config.json's vocab_size is 5"},
      {json{{"</s>", 0}, {"<unk>", 1}, {"▁a", 2}, {"▁b", 2}, {"<pad>", 4}}, "id 2 twice"},
      {json{{"</s>", 0}, {"<unk>", 1}, {"▁a", 2}, {"▁b", 7}, {"<pad>", 4}},
       "piece '▁b' has id 7, outside [0, 5)"},
      {json{{"</s>", 0}, {"▁x", 1}, {"▁a", 2}, {"▁b", 3}, {"<pad>", 4}}, "no piece <unk>"},
  };
  for (const auto& [vocab, expected] : cases) {
    TempDir dir("marian-vocab");
    const std::string message = refusal(folder(dir, opus_config(), vocab));
    EXPECT_NE(message.find(expected), std::string::npos) << message;
    EXPECT_NE(message.find("vocab.json"), std::string::npos) << message;
  }
}

TEST(ImportMarian, NamesTheMissingFile) {
  TempDir dir("marian-files");
  EXPECT_NE(refusal(dir.path()).find("no config.json: not a MarianMT model folder"),
            std::string::npos);
  folder(dir, opus_config());
  std::remove(dir.file("source.spm").c_str());
  EXPECT_NE(refusal(dir.path()).find("no source.spm"), std::string::npos);
  EXPECT_NE(refusal(dir.file("nothing-here")).find("is not a folder"), std::string::npos);
}

}  // namespace
}  // namespace tandem::importer
