// The language codes of M2M-100's tokenizer (M2M100Tokenizer's language_codes setting: "m2m100",
// "wmt21"), which tandem-import reads a folder's codes by and tandem-export --to huggingface names
// a folder's codes with.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace tandem::data {

// The languages M2M100Tokenizer knows by its language_codes setting, each the token __xx__, their
// ids following vocab.json's, in this order (the codes of the published M2M-100 models).
inline const std::map<std::string, std::vector<std::string>>& m2m100_language_lists() {
  static const std::map<std::string, std::vector<std::string>> kLists = {
      {"m2m100",
       {"af", "am", "ar", "ast", "az", "ba", "be", "bg", "bn", "br",  "bs", "ca", "ceb", "cs", "cy",
        "da", "de", "el", "en",  "es", "et", "fa", "ff", "fi", "fr",  "fy", "ga", "gd",  "gl", "gu",
        "ha", "he", "hi", "hr",  "ht", "hu", "hy", "id", "ig", "ilo", "is", "it", "ja",  "jv", "ka",
        "kk", "km", "kn", "ko",  "lb", "lg", "ln", "lo", "lt", "lv",  "mg", "mk", "ml",  "mn", "mr",
        "ms", "my", "ne", "nl",  "no", "ns", "oc", "or", "pa", "pl",  "ps", "pt", "ro",  "ru", "sd",
        "si", "sk", "sl", "so",  "sq", "sr", "ss", "su", "sv", "sw",  "ta", "th", "tl",  "tn", "tr",
        "uk", "ur", "uz", "vi",  "wo", "xh", "yi", "yo", "zh", "zu"}},
      {"wmt21", {"en", "ha", "is", "ja", "cs", "ru", "zh", "de"}},
  };
  return kLists;
}

}  // namespace tandem::data
