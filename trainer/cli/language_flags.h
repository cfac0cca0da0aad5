// --source-lang and --target-lang, which tandem-decode, tandem-score and tandem-eval share: the
// languages a line to translate (or score) carries for the model at hand, checked against it
// (data/corpus/language_marks.h decides how the line carries them).
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

#include "data/corpus/direction.h"
#include "data/corpus/language_marks.h"
#include "data/vocab/vocab.h"

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

// What the flags ask of one model's vocabulary; std::invalid_argument naming the flag that the
// model needs or a language it lacks.
inline data::LanguageMarks language_marks(const data::Vocab& vocab, const LanguageFlags& flags) {
  data::LanguageMarks marks;
  if (vocab.coded()) {
    marks.source_code = language_code(vocab, "--source-lang", flags.source);
    marks.target_code = language_code(vocab, "--target-lang", flags.target);
    return marks;
  }
  if (flags.target.empty()) return marks;
  marks.tag = data::language_tag(flags.target);
  marks.tag_id = vocab.tag_id(marks.tag);
  if (marks.tag_id >= 0) return marks;
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
