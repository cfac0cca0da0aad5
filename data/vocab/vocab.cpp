// Vocab on top of SentencePiece, which is reached only through the separately loaded module
// libtandem_sentencepiece.so (data/vocab/sentencepiece_module.h says why).
#include "data/vocab/vocab.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "data/vocab/sentencepiece_check.h"
#include "data/vocab/sentencepiece_module.h"
#include "data/vocab/words.h"
#include "trainer/common/edit_distance.h"

namespace tandem::data {
namespace {

constexpr const char* kModuleName = "libtandem_sentencepiece.so";
constexpr const char* kModuleEnv = "TANDEM_SENTENCEPIECE_MODULE";

// A fixed thread count keeps the trained model independent of the machine: SentencePiece splits
// its EM sums per thread, so a different count changes floating-point rounding.
constexpr int kTrainerThreads = 4;

// dlopen with RTLD_DEEPBIND. The sanitizers' own dlopen refuses DEEPBIND (a library that resolves
// malloc in its own scope hides allocations from them), so a sanitizer build calls the C library's
// dlopen behind it: the module's allocations then go unchecked, as a library Tandem does not build
// would anyway, and ASan is told to allow operator delete on them (launch/sanitize.sh's
// alloc_dealloc_mismatch=0).
void* dlopen_deepbind(const char* path, int flags) {
#ifdef TANDEM_SANITIZED
  using Dlopen = void* (*)(const char*, int);
  static const auto libc_dlopen = reinterpret_cast<Dlopen>(dlsym(RTLD_NEXT, "dlopen"));
  return libc_dlopen(path, flags | RTLD_DEEPBIND);
#else
  return dlopen(path, flags | RTLD_DEEPBIND);
#endif
}

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
    void* handle = dlopen_deepbind(path.c_str(), RTLD_NOW | RTLD_LOCAL);
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

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : separator) + item;
  return text;
}

std::unordered_map<std::string, std::string> trainer_args(const VocabTrainOptions& options) {
  std::unordered_map<std::string, std::string> args = {
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
  if (!options.user_symbols.empty()) args["user_defined_symbols"] = join(options.user_symbols, ",");
  return args;
}

// A paired vocabulary's bytes: this line, then the source model, the target model (each a
// little-endian uint64 length and its bytes), the number of pieces (uint32) and each piece (a
// uint32 length and its bytes). Version 2 (written only when there are extras) goes on with the
// number of language codes (uint32), each code's language (a uint32 length and its bytes) and id
// (uint32), then the number of other special ids (uint32) and each id (uint32). A SentencePiece
// model proto never starts with either line (its first byte is a field tag, 0x0a).
constexpr char kPairMagic[] = "tandem paired vocabulary 1\n";
constexpr char kPairMagic2[] = "tandem paired vocabulary 2\n";
constexpr size_t kPairMagicSize = sizeof kPairMagic - 1;
static_assert(sizeof kPairMagic == sizeof kPairMagic2, "one magic length");

template <class T>
void put(std::string& out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>(value >> (8 * i) & 0xff));
}

// Reads the paired bytes front to back; every length is checked against what is left.
class PairReader {
 public:
  explicit PairReader(const std::string& bytes) : bytes_(bytes), at_(kPairMagicSize) {}

  template <class T>
  T number(const char* what) {
    need(sizeof(T), what);
    T value = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      value |= static_cast<T>(static_cast<unsigned char>(bytes_[at_ + i])) << (8 * i);
    }
    at_ += sizeof(T);
    return value;
  }
  std::string text(uint64_t size, const char* what) {
    need(size, what);
    std::string out = bytes_.substr(at_, size);
    at_ += size;
    return out;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  void need(uint64_t size, const char* what) const {
    if (size > bytes_.size() - at_) {
      throw std::invalid_argument(std::string("paired vocabulary: ") + what + " needs " +
                                  std::to_string(size) + " bytes, " +
                                  std::to_string(bytes_.size() - at_) + " are left");
    }
  }
  const std::string& bytes_;
  size_t at_;
};

SentencePieceModel* load_model(const std::string& bytes, const char* what,
                               std::unique_ptr<SentencePieceModel>* model) {
  // SentencePiece trusts the normalization tables inside a model; Tandem checks them first.
  if (const std::string problem = sentencepiece_table_problem(bytes); !problem.empty()) {
    throw std::invalid_argument(std::string(what) +
                                ": not a SentencePiece model Tandem can read safely: " + problem);
  }
  const std::string error = library().load(bytes, model);
  if (!error.empty()) {
    throw std::invalid_argument(std::string(what) + ": not a SentencePiece model: " + error);
  }
  return model->get();
}

// MarianTokenizer's language token: text that starts with ">>", then at least one character, then
// "<<" (the last "<<" in the line: its pattern is greedy) gives that span as a token of its own.
// (Lines hold no newline, which the pattern would not cross.)
// Such a span anywhere else is dropped. The token ("" if none), the rest of the text, and where
// the span was cut from the text.
struct TagSplit {
  std::string language, rest;
  size_t cut = 0, cut_size = 0;  // rest's byte b is the text's b, or b + cut_size from `cut` on

  size_t text_byte(size_t rest_byte) const {
    return rest_byte < cut ? rest_byte : rest_byte + cut_size;
  }
};

TagSplit split_language_token(const std::string& text) {
  const size_t open = text.find(">>");
  const size_t close = text.rfind("<<");
  if (open == std::string::npos || close == std::string::npos || close < open + 3) {
    return {"", text, 0, 0};
  }
  std::string rest = text.substr(0, open) + text.substr(close + 2);
  return {open == 0 ? text.substr(0, close + 2) : "", rest, open, close + 2 - open};
}

// Whether `piece` is a language tag: ">>", then at least one character, then "<<".
bool is_language_tag(const std::string& piece) {
  return piece.size() >= 5 && piece.compare(0, 2, ">>") == 0 &&
         piece.compare(piece.size() - 2, 2, "<<") == 0;
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace

struct Vocab::Pair {
  std::unique_ptr<SentencePieceModel> target;
  std::vector<std::string> pieces;               // by id
  std::unordered_map<std::string, int32_t> ids;  // by piece
  PairExtras extras;
  std::vector<bool> skipped;  // by id: a code or another special that decode() leaves out
};

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

Vocab Vocab::from_pair(const std::string& source_model, const std::string& target_model,
                       std::vector<std::string> pieces, PairExtras extras) {
  if (pieces.size() <= static_cast<size_t>(kEosId) ||
      pieces.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw std::invalid_argument("paired vocabulary: " + std::to_string(pieces.size()) +
                                " pieces; expected the 4 special ones and more");
  }
  Vocab vocab;
  load_model(source_model, "the source model", &vocab.sp_);
  vocab.pair_ = std::make_unique<Pair>();
  load_model(target_model, "the target model", &vocab.pair_->target);
  for (size_t id = 0; id < pieces.size(); ++id) {
    if (!vocab.pair_->ids.emplace(pieces[id], static_cast<int32_t>(id)).second) {
      throw std::invalid_argument("paired vocabulary: piece '" + pieces[id] + "' has ids " +
                                  std::to_string(vocab.pair_->ids.at(pieces[id])) + " and " +
                                  std::to_string(id));
    }
  }
  const auto size = static_cast<int32_t>(pieces.size());
  vocab.pair_->skipped.assign(pieces.size(), false);
  auto mark = [&](int32_t id, const std::string& what) {
    if (id <= kEosId || id >= size) {
      throw std::invalid_argument("paired vocabulary: " + what + " has id " + std::to_string(id) +
                                  ", outside (" + std::to_string(kEosId) + ", " +
                                  std::to_string(size) + ")");
    }
    if (vocab.pair_->skipped[id]) {
      throw std::invalid_argument("paired vocabulary: id " + std::to_string(id) + " (" + what +
                                  ") is named twice among the codes and specials");
    }
    vocab.pair_->skipped[id] = true;
  };
  std::unordered_map<std::string, int32_t> languages;
  for (const LanguageCode& code : extras.codes) {
    if (code.language.empty() || !languages.emplace(code.language, code.id).second) {
      throw std::invalid_argument("paired vocabulary: language code '" + code.language +
                                  "' is empty or given twice");
    }
    mark(code.id, "language code '" + code.language + "'");
  }
  for (const int32_t id : extras.specials) mark(id, "a special piece");
  std::sort(extras.codes.begin(), extras.codes.end(),
            [](const LanguageCode& a, const LanguageCode& b) { return a.id < b.id; });
  vocab.pair_->pieces = std::move(pieces);
  vocab.pair_->extras = std::move(extras);
  vocab.find_tags();
  return vocab;
}

const std::vector<LanguageCode>& Vocab::language_codes() const {
  static const std::vector<LanguageCode> kNone;
  return pair_ ? pair_->extras.codes : kNone;
}

int32_t Vocab::code_id(const std::string& language) const {
  for (const LanguageCode& code : language_codes()) {
    if (code.language == language) return code.id;
  }
  return -1;
}

std::string Vocab::nearest_languages(const std::string& language, size_t count) const {
  std::vector<std::pair<size_t, std::string>> ranked;
  for (const LanguageCode& code : language_codes()) {
    ranked.emplace_back(edit_distance(lower(language), lower(code.language)), code.language);
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> nearest;
  for (size_t i = 0; i < ranked.size() && i < count; ++i) nearest.push_back(ranked[i].second);
  return join(nearest, ", ");
}

bool Vocab::special(int32_t id) const {
  return id <= kEosId || id >= size() || (pair_ && pair_->skipped[id]);
}

void Vocab::find_tags() {
  for (int64_t id = 0; id < size(); ++id) {
    std::string text = piece(static_cast<int32_t>(id));
    if (is_language_tag(text)) tags_.emplace_back(std::move(text), static_cast<int32_t>(id));
  }
}

std::vector<std::string> Vocab::language_tags() const {
  std::vector<std::string> tags;
  for (const auto& [tag, id] : tags_) tags.push_back(tag);
  return tags;
}

int32_t Vocab::tag_id(const std::string& tag) const {
  for (const auto& [text, id] : tags_) {
    if (text == tag) return id;
  }
  return -1;
}

Vocab Vocab::from_bytes(const std::string& bytes) {
  const bool version2 = bytes.compare(0, kPairMagicSize, kPairMagic2) == 0;
  if (!version2 && bytes.compare(0, kPairMagicSize, kPairMagic) != 0) {
    Vocab vocab;
    load_model(bytes, "the vocabulary", &vocab.sp_);
    vocab.find_tags();
    return vocab;
  }
  PairReader in(bytes);
  const std::string source =
      in.text(in.number<uint64_t>("the source model's size"), "the source model");
  const std::string target =
      in.text(in.number<uint64_t>("the target model's size"), "the target model");
  const uint32_t count = in.number<uint32_t>("the number of pieces");
  std::vector<std::string> pieces;
  for (uint32_t i = 0; i < count; ++i) {
    pieces.push_back(in.text(in.number<uint32_t>("a piece's size"), "a piece"));
  }
  PairExtras extras;
  if (version2) {
    const uint32_t codes = in.number<uint32_t>("the number of language codes");
    for (uint32_t i = 0; i < codes && i <= count; ++i) {
      std::string language = in.text(in.number<uint32_t>("a language's size"), "a language");
      const auto id = in.number<uint32_t>("a language code's id");
      extras.codes.push_back({std::move(language), static_cast<int32_t>(std::min(id, count))});
    }
    const uint32_t specials = in.number<uint32_t>("the number of special ids");
    for (uint32_t i = 0; i < specials && i <= count; ++i) {
      extras.specials.push_back(
          static_cast<int32_t>(std::min(in.number<uint32_t>("a special id"), count)));
    }
  }
  if (!in.done()) throw std::invalid_argument("paired vocabulary: bytes after its last record");
  return from_pair(source, target, std::move(pieces), std::move(extras));
}

std::string Vocab::bytes() const {
  if (!pair_) return sp_->serialized();
  const PairExtras& extras = pair_->extras;
  const bool version2 = !extras.codes.empty() || !extras.specials.empty();
  std::string out(version2 ? kPairMagic2 : kPairMagic, kPairMagicSize);
  for (const std::string& model : {sp_->serialized(), pair_->target->serialized()}) {
    put<uint64_t>(out, model.size());
    out += model;
  }
  put<uint32_t>(out, static_cast<uint32_t>(pair_->pieces.size()));
  for (const std::string& piece : pair_->pieces) {
    put<uint32_t>(out, static_cast<uint32_t>(piece.size()));
    out += piece;
  }
  if (!version2) return out;
  put<uint32_t>(out, static_cast<uint32_t>(extras.codes.size()));
  for (const LanguageCode& code : extras.codes) {
    put<uint32_t>(out, static_cast<uint32_t>(code.language.size()));
    out += code.language;
    put<uint32_t>(out, static_cast<uint32_t>(code.id));
  }
  put<uint32_t>(out, static_cast<uint32_t>(extras.specials.size()));
  for (const int32_t id : extras.specials) put<uint32_t>(out, static_cast<uint32_t>(id));
  return out;
}

std::string Vocab::sentencepiece_bytes(Side side) const {
  return (pair_ && side == Side::kTarget ? pair_->target : sp_)->serialized();
}

int64_t Vocab::size() const {
  return pair_ ? static_cast<int64_t>(pair_->pieces.size()) : sp_->size();
}

std::vector<int32_t> Vocab::encode(const std::string& text, Side side) const {
  return encode(text, side, nullptr);
}

// A joint vocabulary with tags (a leading tag is one piece) and a paired one without language codes
// (MarianTokenizer's >>xx<< tags) split off the language token; a model with codes takes those as
// ids instead.
std::vector<int32_t> Vocab::encode(const std::string& text, Side side,
                                   std::vector<int32_t>* words) const {
  const bool tagged = pair_ ? !coded() : !tags_.empty();
  const TagSplit split = tagged ? split_language_token(text) : TagSplit{"", text, 0, 0};
  const auto& model = pair_ && side == Side::kTarget ? pair_->target : sp_;
  const auto id_of = [this](const std::string& piece) {
    if (!pair_) return tag_id(piece) >= 0 ? tag_id(piece) : kUnkId;
    const auto found = pair_->ids.find(piece);
    return found == pair_->ids.end() ? kUnkId : found->second;
  };
  PieceSpans spans;
  if (!split.language.empty()) {
    spans.ids.push_back(id_of(split.language));
    spans.begins.push_back(0);
    spans.ends.push_back(static_cast<uint32_t>(split.language.size()));
  }
  PieceSpans rest;
  std::string error;
  if (words != nullptr) {
    error = model->encode_spans(split.rest, &rest);
  } else if (pair_) {
    error = model->encode_pieces(split.rest, &rest.pieces);
  } else {
    error = model->encode(split.rest, &rest.ids);
  }
  if (!error.empty()) throw std::runtime_error("SentencePiece encode failed: " + error);
  if (pair_) {
    for (const std::string& piece : rest.pieces) spans.ids.push_back(id_of(piece));
  } else {
    spans.ids.insert(spans.ids.end(), rest.ids.begin(), rest.ids.end());
  }
  if (words != nullptr) {
    for (size_t k = 0; k < rest.begins.size(); ++k) {
      spans.begins.push_back(static_cast<uint32_t>(split.text_byte(rest.begins[k])));
      spans.ends.push_back(static_cast<uint32_t>(split.text_byte(rest.ends[k])));
    }
    *words = words_of_pieces(text, split_words(text), spans.begins, spans.ends);
  }
  return std::vector<int32_t>(spans.ids.begin(), spans.ids.end());
}

// A paired vocabulary detokenizes as MarianTokenizer.decode(skip_special_tokens=True) (and
// NllbTokenizer's, M2M100Tokenizer's): the specials (unk, language codes and the extras' other
// ids too) are left out, the rest are the side's SentencePiece pieces joined, with any "▁" left in
// them a space, and white space trimmed at both ends.
std::string Vocab::decode(const std::vector<int32_t>& ids, Side side) const {
  std::string text;
  if (!pair_) {
    const std::string error = sp_->decode(std::vector<int>(ids.begin(), ids.end()), &text);
    if (!error.empty()) throw std::runtime_error("SentencePiece decode failed: " + error);
    return text;
  }
  std::vector<std::string> pieces;
  for (const int32_t id : ids) {
    if (!special(id)) pieces.push_back(pair_->pieces[id]);
  }
  const auto& model = side == Side::kTarget ? pair_->target : sp_;
  const std::string error = model->decode_pieces(pieces, &text);
  if (!error.empty()) throw std::runtime_error("SentencePiece decode failed: " + error);
  static const std::string kSpace = "\u2581";  // ▁
  for (size_t at = text.find(kSpace); at != std::string::npos; at = text.find(kSpace, at)) {
    text.replace(at, kSpace.size(), " ");
  }
  const size_t first = text.find_first_not_of(" \t\n\r\f\v");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\n\r\f\v") - first + 1);
}

// The word an id's text falls in is the last word of the text its prefix decodes to: an id that
// opens a word adds one, one that continues a word adds none.
std::string Vocab::decode(const std::vector<int32_t>& ids, Side side,
                          std::vector<int32_t>* words) const {
  std::string text = decode(ids, side);
  if (words == nullptr) return text;
  words->assign(ids.size(), -1);
  std::vector<int32_t> prefix;
  for (size_t j = 0; j < ids.size(); ++j) {
    prefix.push_back(ids[j]);
    if (special(ids[j]) || is_language_tag(piece(ids[j]))) continue;
    const auto count = static_cast<int32_t>(split_words(decode(prefix, side)).size());
    (*words)[j] = count - 1;
  }
  return text;
}

std::string Vocab::piece(int32_t id) const {
  if (id < 0 || id >= size()) {
    throw std::out_of_range("piece id " + std::to_string(id) + " outside the vocabulary of " +
                            std::to_string(size()));
  }
  return pair_ ? pair_->pieces[id] : sp_->piece(id);
}

}  // namespace tandem::data
