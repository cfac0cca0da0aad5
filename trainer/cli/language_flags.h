// --source-lang and --target-lang, which tandem-decode and tandem-eval share: how a line to
// translate carries its languages for the model at hand.
//   - A model with language codes (an imported NLLB-200 or M2M-100: "eng_Latn", "en") reads
//     [source code] pieces </s> and its translations start with the target's code: both options
//     are needed.
//   - A model with >>xx<< tags (OPUS-MT, tandem-prep --corpora) reads the target's tag before the
//     source; --target-lang puts it before each line that has none (--source-lang is not needed).
//   - Any other model translates one direction: neither is needed.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "data/direction.h"
#include "data/vocab.h"

namespace tandem::cli {

struct LanguageFlags {
  std::string source, target;
};

// What a tool does with its models, for the words of the flags the tools share.
enum class Task { kTranslate, kScore };

inline void add_language_flags(CLI::App& app, LanguageFlags& flags,
                               Task task = Task::kTranslate) {
  app.add_option("--source-lang", flags.source,
                 "the source's language, for a model with language codes (NLLB-200: eng_Latn, "
                 "M2M-100: en)");
  app.add_option("--target-lang", flags.target,
                 task == Task::kScore
                     ? "the target lines' language: with a model with language codes each "
                       "target line starts with its code, scored with it (NLLB-200: spa_Latn, "
                       "M2M-100: es); a model with >>xx<< tags gets its tag before each source "
                       "line that has none"
                     : "translate into this language: a model with language codes starts each "
                       "translation with its code (NLLB-200: spa_Latn, M2M-100: es); a model "
                       "with >>xx<< tags gets its tag before each line that has none");
}

// The flags given, as a file job's record keeps them (bulk/job_record.h).
inline std::vector<std::pair<std::string, std::string>> recorded_language_options(
    const LanguageFlags& flags) {
  std::vector<std::pair<std::string, std::string>> options;
  if (!flags.source.empty()) options.emplace_back("--source-lang", flags.source);
  if (!flags.target.empty()) options.emplace_back("--target-lang", flags.target);
  return options;
}

// What the flags ask of one model's vocabulary.
struct LanguageMarks {
  int32_t source_code = -1;  // a code model's source prefix
  int32_t target_code = -1;  // a code model's first target token
  std::string tag;           // a tagged model's ">>es<<"

  // The line's source ids as the model reads them (without EOS).
  std::vector<int32_t> source(const data::Vocab& vocab, const std::string& line) const {
    if (source_code >= 0) {
      std::vector<int32_t> ids = {source_code};
      const auto pieces = vocab.encode(line, data::Side::kSource);
      ids.insert(ids.end(), pieces.begin(), pieces.end());
      return ids;
    }
    const bool own_tag = tag.empty() || line.compare(0, 2, ">>") == 0;
    return vocab.encode(own_tag ? line : tag + " " + line, data::Side::kSource);
  }
  // A reference's ids as the model predicts them (without EOS).
  std::vector<int32_t> target(const data::Vocab& vocab, const std::string& line) const {
    std::vector<int32_t> ids;
    if (target_code >= 0) ids.push_back(target_code);
    const auto pieces = vocab.encode(line, data::Side::kTarget);
    ids.insert(ids.end(), pieces.begin(), pieces.end());
    return ids;
  }
  // Per sentence, the token its translation starts with (none without codes).
  std::vector<int32_t> first_tokens(size_t sentences) const {
    return target_code >= 0 ? std::vector<int32_t>(sentences, target_code) : std::vector<int32_t>{};
  }
};

// A language's code id in a model with codes; std::invalid_argument naming `flag` and the
// nearest languages the model has for one it lacks. M2M-100's codes are taken as "en" or
// "__en__".
inline int32_t language_code(const data::Vocab& vocab, const std::string& flag,
                             const std::string& language) {
  if (language.empty()) {
    std::string some;
    for (const auto& code : vocab.language_codes()) {
      if (some.size() > 40) break;
      some += (some.empty() ? "" : ", ") + code.language;
    }
    throw std::invalid_argument(flag + " is needed: the model marks languages with codes (" + some +
                                ", ...)");
  }
  int32_t id = vocab.code_id(language);
  if (id < 0 && language.size() > 4 && language.compare(0, 2, "__") == 0 &&
      language.compare(language.size() - 2, 2, "__") == 0) {
    id = vocab.code_id(language.substr(2, language.size() - 4));
  }
  if (id >= 0) return id;
  throw std::invalid_argument(flag + " '" + language + "': not a language of the model (" +
                              std::to_string(vocab.language_codes().size()) +
                              " codes; the nearest: " + vocab.nearest_languages(language, 5) + ")");
}

inline LanguageMarks language_marks(const data::Vocab& vocab, const LanguageFlags& flags) {
  LanguageMarks marks;
  if (vocab.coded()) {
    marks.source_code = language_code(vocab, "--source-lang", flags.source);
    marks.target_code = language_code(vocab, "--target-lang", flags.target);
    return marks;
  }
  if (flags.target.empty()) return marks;
  marks.tag = data::language_tag(flags.target);
  if (vocab.tag_id(marks.tag) >= 0) return marks;
  std::string known;
  for (const std::string& t : vocab.language_tags()) {
    known += (known.empty() ? "" : ", ") + t.substr(2, t.size() - 4);
  }
  throw std::invalid_argument(
      "--target-lang '" + flags.target + "': " +
      (known.empty() ? "the model has no language tags or codes (it translates one direction)"
                     : "not a language of the model (its target languages: " + known + ")"));
}

}  // namespace tandem::cli
