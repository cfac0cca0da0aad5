// The vocabulary, of one of two kinds, with Tandem's fixed special ids (pad 0, unk 1, bos 2,
// eos 3), stored as bytes (corpus and checkpoint files' /vocab):
// - joint: one SentencePiece model for both sides, its ids Tandem's; trained by tandem-prep with
//   the SentencePiece C++ trainer;
// - paired: a source and a target SentencePiece model whose pieces map into one id table, as a
//   MarianMT (OPUS-MT) model's source.spm, target.spm and vocab.json do; a piece the table lacks
//   is unk; it may carry a model's language codes (PairExtras). Written by tandem-import.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainer/common/token_ids.h"

namespace tandem::data {

class SentencePieceModel;  // data/vocab/sentencepiece_module.h

struct VocabTrainOptions {
  int64_t vocab_size = 8000;           // pieces, specials included
  double character_coverage = 1.0;     // SentencePiece's --character_coverage
  std::string model_type = "unigram";  // unigram | bpe
  // Sentences sampled for training; 0 = all. Training needs about 25 bytes per character of the
  // sample (SentencePiece's suffix arrays): 200k sentences of ~130 characters take ~0.7 GB.
  int64_t input_sentence_size = 200000;
  uint64_t seed = 1;  // for the sentence sample
  // Pieces of their own, whatever the text (SentencePiece's user-defined symbols): the language
  // tags of a multilingual corpus (">>es<<"). Their ids follow the 4 specials, in this order.
  std::vector<std::string> user_symbols;
};

// Which side's text is tokenized or detokenized: a paired vocabulary has a model for each.
enum class Side { kSource, kTarget };

// A language code of a model whose sequences start with one (NLLB-200, M2M-100): the language as
// its users name it ("eng_Latn", "en") and the id of its token ("eng_Latn", "__en__"). A source
// is [source code] pieces </s>; a target [target code] pieces </s>, after the decoder's start.
struct LanguageCode {
  std::string language;
  int32_t id = -1;
};

// What a paired vocabulary knows beyond its pieces: the language codes, and the ids that are
// neither text nor produced from text (a <mask>, rows without a piece), which decode() skips as
// it skips the codes.
struct PairExtras {
  std::vector<LanguageCode> codes;
  std::vector<int32_t> specials;
};

class Vocab {
 public:
  // Trains a joint model on the lines of `texts` (all sides together). Deterministic for the
  // same input and options.
  static Vocab train(const std::vector<std::string>& texts, const VocabTrainOptions& options);
  // A paired vocabulary: the two SentencePiece models' bytes, and pieces[id], the text of id `id`
  // (at least the four specials, each text once). std::invalid_argument naming what is wrong.
  // `extras` must name ids of the table, each code and language once.
  static Vocab from_pair(const std::string& source_model, const std::string& target_model,
                         std::vector<std::string> pieces, PairExtras extras = {});
  // Either kind, from the bytes bytes() produced (as stored in corpus and checkpoint files); a
  // joint vocabulary's bytes are its SentencePiece model's. std::invalid_argument if neither.
  static Vocab from_bytes(const std::string& bytes);

  Vocab(Vocab&&) noexcept;
  Vocab& operator=(Vocab&&) noexcept;
  ~Vocab();

  std::string bytes() const;
  bool paired() const { return pair_ != nullptr; }
  // The SentencePiece model that tokenizes `side` (a joint vocabulary's one model for both).
  std::string sentencepiece_bytes(Side side) const;
  int64_t size() const;
  // No BOS/EOS added. A vocabulary with language tags (a paired one always) tokenizes as
  // MarianTokenizer does: a leading language token ">>xx<<" is a piece of its own (unk when the
  // vocabulary lacks it), a ">>...<<" span elsewhere is dropped, the rest is the side's
  // SentencePiece pieces.
  std::vector<int32_t> encode(const std::string& text, Side side) const;
  // The same ids, and for each the word of `text` it comes from (data/vocab/words.h: an index
  // into split_words(text)), as a word alignment of the text is mapped to its pieces.
  std::vector<int32_t> encode(const std::string& text, Side side,
                              std::vector<int32_t>* words) const;
  std::string decode(const std::vector<int32_t>& ids, Side side) const;  // specials are skipped
  // The same text, and for each id the word of it the id's text falls in (an index into
  // split_words(text)); -1 for an id that decode() skips or a language tag, and for one before
  // the text's first word. Decodes every prefix of `ids`: for output lines, not corpora.
  std::string decode(const std::vector<int32_t>& ids, Side side,
                     std::vector<int32_t>* words) const;
  // The text of piece `id` as SentencePiece spells it ("▁the", "<unk>", "</s>"): what other
  // engines' vocabulary files list. std::out_of_range unless 0 <= id < size().
  std::string piece(int32_t id) const;
  // The language tags among the pieces (">>es<<", as multilingual Marian and OPUS-MT models and
  // tandem-prep's multilingual corpora have them), in id order; and a tag's id, -1 if absent.
  std::vector<std::string> language_tags() const;
  int32_t tag_id(const std::string& tag) const;
  // The language codes of a model that marks languages with them (NLLB-200, M2M-100), in id
  // order; none for any other vocabulary. A code's id, -1 if the model has no such language.
  const std::vector<LanguageCode>& language_codes() const;
  int32_t code_id(const std::string& language) const;
  bool coded() const { return !language_codes().empty(); }
  // Whether decode() leaves `id` out of the text: the four specials, and a paired vocabulary's
  // language codes and other specials (ids outside the vocabulary too).
  bool special(int32_t id) const;
  // The languages of the codes nearest to `language` (edit distance, case ignored), at most
  // `count`, nearest first, joined by ", ": for "unknown language" messages.
  std::string nearest_languages(const std::string& language, size_t count) const;

 private:
  struct Pair;  // a paired vocabulary's target model and id table

  Vocab();
  void find_tags();                         // fills tags_ from the pieces
  std::unique_ptr<SentencePieceModel> sp_;  // the joint model, or the paired source side's
  std::unique_ptr<Pair> pair_;              // null for a joint vocabulary
  std::vector<std::pair<std::string, int32_t>> tags_;  // language tags and their ids, by id
};

}  // namespace tandem::data
