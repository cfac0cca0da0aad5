// Corpus-level translation metrics as sacreBLEU defines them: BLEU (13a tokenization, 4-grams,
// exponential smoothing, brevity penalty) and chrF2 (character 6-grams, beta 2, no word n-grams).
// Inputs are detokenized sentences, one hypothesis and one reference per line.
#pragma once

#include <string>
#include <vector>

namespace tandem::eval {

struct BleuScore {
  double score = 0;                     // 0..100
  double precisions[4] = {0, 0, 0, 0};  // percent, smoothed as used in the score
  double brevity_penalty = 0;
  long long hyp_length = 0;  // 13a tokens
  long long ref_length = 0;
  std::string to_string() const;  // "BLEU = 23.45 56.7/30.1/18.2/11.0 (BP = 0.981 ratio = 0.981
                                  // hyp_len = .. ref_len = ..)"
};

// sacreBLEU's tokenizer_13a (mteval-v13a), exactly.
std::string tokenize_13a(const std::string& line);

// Throws std::invalid_argument when the sizes differ.
BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::string>& references);

// chrF with char_order 6, word_order 0, beta 2 (sacreBLEU's CHRF defaults): 0..100.
double corpus_chrf(const std::vector<std::string>& hypotheses,
                   const std::vector<std::string>& references);

}  // namespace tandem::eval
