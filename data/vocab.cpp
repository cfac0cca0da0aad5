// Vocab on top of SentencePiece, which is reached only through the separately loaded module
// libtandem_sentencepiece.so (data/sentencepiece_module.h says why).
#include "data/vocab.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "data/sentencepiece_module.h"

namespace tandem::data {
namespace {

constexpr const char* kModuleName = "libtandem_sentencepiece.so";
constexpr const char* kModuleEnv = "TANDEM_SENTENCEPIECE_MODULE";

// A fixed thread count keeps the trained model independent of the machine: SentencePiece splits
// its EM sums per thread, so a different count changes floating-point rounding.
constexpr int kTrainerThreads = 4;

// Where to look for the module: an explicit override, where the build wrote it, next to the
// running executable (a copied or installed tree).
std::vector<std::string> module_candidates() {
  std::vector<std::string> paths;
  if (const char* path = std::getenv(kModuleEnv)) paths.emplace_back(path);
  paths.emplace_back(TANDEM_SENTENCEPIECE_MODULE);
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) paths.push_back((exe.parent_path() / kModuleName).string());
  return paths;
}

const SentencePieceLibrary* open_library() {
  std::string failures;
  for (const std::string& path : module_candidates()) {
    // LOCAL: its protobuf symbols stay out of the process; DEEPBIND: it resolves its own first.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    void* entry = handle != nullptr ? dlsym(handle, "tandem_sentencepiece_library") : nullptr;
    if (entry != nullptr) {
      return reinterpret_cast<const SentencePieceLibrary* (*)()>(entry)();
    }
    const char* reason = dlerror();
    failures += "; " + path + ": " + (reason != nullptr ? reason : "unknown error");
  }
  throw std::runtime_error(std::string("cannot load the SentencePiece module ") + kModuleName +
                           failures + "; HINT: set " + kModuleEnv + " to its path");
}

const SentencePieceLibrary& library() {
  static const SentencePieceLibrary* const instance = open_library();  // never unloaded
  return *instance;
}

std::unordered_map<std::string, std::string> trainer_args(const VocabTrainOptions& options) {
  return {
      {"vocab_size", std::to_string(options.vocab_size)},
      {"character_coverage", std::to_string(options.character_coverage)},
      {"model_type", options.model_type},
      {"input_sentence_size", std::to_string(options.input_sentence_size)},
      {"shuffle_input_sentence", "true"},
      // A small corpus may not support the requested size: take what it supports, don't fail.
      {"hard_vocab_limit", "false"},
      {"pad_id", std::to_string(kPadId)},
      {"unk_id", std::to_string(kUnkId)},
      {"bos_id", std::to_string(kBosId)},
      {"eos_id", std::to_string(kEosId)},
      {"num_threads", std::to_string(kTrainerThreads)},
      {"minloglevel", "2"},  // errors only: training progress is noise in tool output
  };
}

}  // namespace

Vocab::Vocab() = default;
Vocab::Vocab(Vocab&&) noexcept = default;
Vocab& Vocab::operator=(Vocab&&) noexcept = default;
Vocab::~Vocab() = default;

Vocab Vocab::train(const std::vector<std::string>& texts, const VocabTrainOptions& options) {
  if (options.vocab_size <= kEosId + 1) {
    throw std::invalid_argument("vocab_size " + std::to_string(options.vocab_size) +
                                ": expected more than the 4 special ids");
  }
  if (texts.empty()) throw std::invalid_argument("cannot train a vocabulary on no sentences");
  std::string model;
  const std::string error =
      library().train(texts, trainer_args(options), static_cast<uint32_t>(options.seed), &model);
  if (!error.empty()) throw std::invalid_argument("SentencePiece training failed: " + error);
  return from_bytes(model);
}

Vocab Vocab::from_bytes(const std::string& model_bytes) {
  Vocab vocab;
  const std::string error = library().load(model_bytes, &vocab.sp_);
  if (!error.empty()) throw std::invalid_argument("not a SentencePiece model: " + error);
  return vocab;
}

std::string Vocab::bytes() const { return sp_->serialized(); }

int64_t Vocab::size() const { return sp_->size(); }

std::vector<int32_t> Vocab::encode(const std::string& text) const {
  std::vector<int> ids;
  const std::string error = sp_->encode(text, &ids);
  if (!error.empty()) throw std::runtime_error("SentencePiece encode failed: " + error);
  return {ids.begin(), ids.end()};
}

std::string Vocab::decode(const std::vector<int32_t>& ids) const {
  std::string text;
  const std::string error = sp_->decode(std::vector<int>(ids.begin(), ids.end()), &text);
  if (!error.empty()) throw std::runtime_error("SentencePiece decode failed: " + error);
  return text;
}

std::string Vocab::piece(int32_t id) const {
  if (id < 0 || id >= size()) {
    throw std::out_of_range("piece id " + std::to_string(id) + " outside the vocabulary of " +
                            std::to_string(size()));
  }
  return sp_->piece(id);
}

}  // namespace tandem::data
