// tandem-import's readers of a Hugging Face model folder's small files, each as it comes: the
// input's first byte picks the file (config.json, tokenizer_config.json, special_tokens_map.json,
// tokenizer.json, model.safetensors.index.json or vocab.json) and the folder (an NLLB-200-layout
// one, or with its high bit an M2M-100-layout one), the rest is the file's content, written over
// a small M2M-100-family folder made here (a SentencePiece model Tandem trained, weights in two
// safetensors shards). What imports must be a checkpoint with language codes inside its
// vocabulary, which reads back. (The NLLB-layout folder's SentencePiece model has Tandem's four
// specials first rather than NLLB's <unk> <s> </s>, which its import refuses after reading the
// tokenizer's files: those files are what it is for; the M2M-100 folder imports whole.)
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/vocab/vocab.h"
#include "tests/fuzz/fuzz_files.h"
#include "tests/fuzz/fuzz_target.h"
#include "trainer/common/temp_dir.h"
#include "trainer/import/import.h"

namespace tandem::fuzz {
namespace {

using nlohmann::json;

const char* const kFiles[] = {
    "config.json",    "tokenizer_config.json",        "special_tokens_map.json",
    "tokenizer.json", "model.safetensors.index.json", "vocab.json"};
constexpr int kFileCount = sizeof kFiles / sizeof kFiles[0];
constexpr int64_t kD = 8, kFf = 16;

// A safetensors file of float32 tensors, each filled with a small value of its own.
std::string safetensors(const std::map<std::string, std::vector<int64_t>>& shapes) {
  json header = json::object();
  std::string data;
  float value = 0.01f;
  for (const auto& [name, shape] : shapes) {
    int64_t count = 1;
    for (const int64_t n : shape) count *= n;
    const size_t begin = data.size();
    for (int64_t i = 0; i < count; ++i, value = -value * 1.01f) {
      data.append(reinterpret_cast<const char*>(&value), sizeof value);
    }
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {begin, data.size()}}};
  }
  const std::string text = header.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  return out + text + data;
}

// The weights of a 1+1-layer model of `vocab` ids, under M2M100ForConditionalGeneration's names.
std::map<std::string, std::vector<int64_t>> weight_shapes(int64_t vocab) {
  std::map<std::string, std::vector<int64_t>> shapes = {{"model.shared.weight", {vocab, kD}}};
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    shapes[name + ".weight"] = shape;
    shapes[name + ".bias"] = {shape[0]};
  };
  for (const std::string& stack : {std::string("encoder"), std::string("decoder")}) {
    const std::string layer = "model." + stack + ".layers.0.";
    for (const std::string& attention :
         stack == "encoder" ? std::vector<std::string>{"self_attn"}
                            : std::vector<std::string>{"self_attn", "encoder_attn"}) {
      for (const char* proj : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
        add(layer + attention + "." + proj, {kD, kD});
      }
      add(layer + attention + "_layer_norm", {kD});
    }
    add(layer + "fc1", {kFf, kD});
    add(layer + "fc2", {kD, kFf});
    add(layer + "final_layer_norm", {kD});
    add("model." + stack + ".layer_norm", {kD});
  }
  return shapes;
}

// A folder of either layout, made once in memory (file name -> bytes); its files' texts are the
// seeds. (Files, not std::filesystem: the PyPI LibTorch's libtorch.so exports std::filesystem
// symbols that a binary linked against it may bind to.)
using Folder = std::map<std::string, std::string>;

// The folders' config.json: the M2M-100 / NLLB-200 layout of kD and kFf, one layer a side, over
// `vocab` ids.
json model_config(int64_t vocab) {
  return json{{"model_type", "m2m_100"},
              {"vocab_size", vocab},
              {"d_model", kD},
              {"encoder_layers", 1},
              {"decoder_layers", 1},
              {"encoder_attention_heads", 2},
              {"decoder_attention_heads", 2},
              {"encoder_ffn_dim", kFf},
              {"decoder_ffn_dim", kFf},
              {"max_position_embeddings", 32},
              {"activation_function", "relu"},
              {"scale_embedding", true},
              {"pad_token_id", 1},
              {"eos_token_id", 2},
              {"decoder_start_token_id", 2}};
}

const Folder& base_folder(bool m2m) {
  static Folder folders[2];
  Folder& folder = folders[m2m ? 1 : 0];
  if (!folder.empty()) return folder;
  const data::Vocab& spm = base_vocab();
  auto write = [&](const std::string& name, const std::string& bytes) { folder[name] = bytes; };
  write("sentencepiece.bpe.model", spm.sentencepiece_bytes(data::Side::kSource));
  int64_t vocab = 0;
  if (m2m) {
    json pieces = {{"<s>", 0}, {"<pad>", 1}, {"</s>", 2}, {"<unk>", 3}};
    for (int32_t id = 4; id < spm.size(); ++id) pieces[spm.piece(id)] = pieces.size();
    write("vocab.json", pieces.dump());
    write("tokenizer_config.json",
          json{{"tokenizer_class", "M2M100Tokenizer"}, {"language_codes", "wmt21"}}.dump());
    write("special_tokens_map.json",
          json{{"additional_special_tokens", {"__en__", "__de__"}}}.dump());
    vocab = static_cast<int64_t>(pieces.size()) + 2 + 8;
  } else {
    write("tokenizer_config.json", json{{"tokenizer_class", "NllbTokenizer"},
                                        {"additional_special_tokens", {"eng_Latn", "spa_Latn"}}}
                                       .dump());
    json added = json::array();
    const std::vector<std::string> specials = {"<s>", "<pad>", "</s>", "<unk>"};
    for (int i = 0; i < 4; ++i) added.push_back({{"id", i}, {"content", specials[i]}});
    const int64_t after = spm.size() + 1;
    added.push_back({{"id", after}, {"content", "eng_Latn"}});
    added.push_back({{"id", after + 1}, {"content", "spa_Latn"}});
    added.push_back({{"id", after + 2}, {"content", "<mask>"}});
    write("tokenizer.json", json{{"added_tokens", added}}.dump());
    write("special_tokens_map.json", json{{"mask_token", "<mask>"}}.dump());
    vocab = after + 3 + 2;
  }
  write("config.json", model_config(vocab).dump());
  // Two shards, the embeddings in the first, and their index.
  std::map<std::string, std::vector<int64_t>> first, second;
  json map = json::object();
  for (const auto& [name, shape] : weight_shapes(vocab)) {
    const bool one = name.find("shared") != std::string::npos;
    (one ? first : second)[name] = shape;
    map[name] = one ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  write("model-00001-of-00002.safetensors", safetensors(first));
  write("model-00002-of-00002.safetensors", safetensors(second));
  write("model.safetensors.index.json",
        json{{"metadata", json::object()}, {"weight_map", map}}.dump());
  return folder;
}

}  // namespace

std::vector<std::string> seeds() {
  std::vector<std::string> out;
  for (const bool m2m : {false, true}) {
    for (int file = 0; file < kFileCount; ++file) {
      const auto it = base_folder(m2m).find(kFiles[file]);
      if (it == base_folder(m2m).end()) continue;
      out.push_back(std::string(1, static_cast<char>(file | (m2m ? 0x80 : 0))) + it->second);
    }
  }
  return out;
}

}  // namespace tandem::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem;
  if (size == 0) return 0;
  const bool m2m = (data[0] & 0x80) != 0;
  const int file = (data[0] & 0x7f) % fuzz::kFileCount;
  const TempDir folder("hf-folder");
  auto files = fuzz::base_folder(m2m);
  files[fuzz::kFiles[file]] = std::string(reinterpret_cast<const char*>(data + 1), size - 1);
  for (const auto& [name, bytes] : files) {
    std::ofstream(folder.file(name), std::ios::binary) << bytes;
  }
  const std::string& dir = folder.path();
  fuzz::refused_or_read([&] {
    const auto imported = importer::import_folder(dir);
    const auto vocab = data::Vocab::from_bytes(imported.checkpoint.vocab);
    if (!vocab.coded()) fuzz::fail("an M2M-100-family model imported without language codes");
    for (const auto& code : vocab.language_codes()) {
      if (code.id <= 3 || code.id >= vocab.size()) fuzz::fail("a language code outside the ids");
    }
    if (data::Vocab::from_bytes(vocab.bytes()).bytes() != vocab.bytes()) {
      fuzz::fail("the imported vocabulary does not read back as the same");
    }
  });
  return 0;
}
