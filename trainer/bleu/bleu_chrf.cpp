// BLEU and chrF as sacreBLEU 2.x computes them with its defaults, reproduced step by step so that
// Tandem's numbers can be quoted next to sacreBLEU's: same tokenization, same statistics, same
// smoothing, same floating-point order of operations.
#include "trainer/bleu/bleu_chrf.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

namespace tandem::eval {
namespace {

constexpr int kBleuOrder = 4;
constexpr int kChrfCharOrder = 6;
constexpr double kChrfBeta = 2.0;
// sacreBLEU's my_log(0): a log "floor" that makes exp() of the mean underflow to 0.
constexpr double kLogOfZero = -9999999999.0;

// ---------------------------------------------------------------------------------------------
// UTF-8 and Python's notion of whitespace (str.split() / str.rstrip() with no argument).

struct CodePoint {
  char32_t value;
  size_t length;  // bytes consumed
};

// Decodes the code point at s[i]. A malformed byte decodes alone to U+DC80+byte (Python's
// "surrogateescape" convention), so invalid input never merges with a real character.
CodePoint decode_utf8(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  const CodePoint invalid{static_cast<char32_t>(0xDC00 + b0), 1};
  if (b0 < 0x80) return {b0, 1};
  size_t len = 0;
  char32_t value = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, value = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, value = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, value = b0 & 0x07;
  } else {
    return invalid;
  }
  if (i + len > s.size()) return invalid;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return invalid;
    value = (value << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr char32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (value < kMinForLength[len] || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) {
    return invalid;
  }
  return {value, len};
}

// Exactly the code points for which Python's str.isspace() is true.
bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Python's line.split(): maximal runs of non-whitespace code points.
std::vector<std::string> split_whitespace(std::string_view s) {
  std::vector<std::string> words;
  size_t start = std::string_view::npos;
  for (size_t i = 0; i < s.size();) {
    const CodePoint cp = decode_utf8(s, i);
    if (is_python_space(cp.value)) {
      if (start != std::string_view::npos) words.emplace_back(s.substr(start, i - start));
      start = std::string_view::npos;
    } else if (start == std::string_view::npos) {
      start = i;
    }
    i += cp.length;
  }
  if (start != std::string_view::npos) words.emplace_back(s.substr(start));
  return words;
}

// Python's line.rstrip().
std::string rstrip_whitespace(std::string_view s) {
  size_t keep = 0;
  for (size_t i = 0; i < s.size();) {
    const CodePoint cp = decode_utf8(s, i);
    i += cp.length;
    if (!is_python_space(cp.value)) keep = i;
  }
  return std::string(s.substr(0, keep));
}

// Python's str.replace(from, to): non-overlapping, left to right.
void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  size_t pos = 0;
  for (size_t hit = s.find(from); hit != std::string::npos; hit = s.find(from, pos)) {
    out.append(s, pos, hit - pos).append(to);
    pos = hit + from.size();
  }
  if (pos == 0) return;
  out.append(s, pos, std::string::npos);
  s = std::move(out);
}

// ---------------------------------------------------------------------------------------------
// mteval-v13a punctuation rules. Every character class involved is ASCII, and a UTF-8 multi-byte
// sequence contains no ASCII byte, so scanning bytes gives the same result as Python scanning
// characters: a lead or continuation byte falls in "[^0-9]" exactly as its character would.

// [\{-\~\[-\` -\&\(-\+\:-\@\/]: {|}~ [\]^_` space!"#$%& ()*+ :;<=>?@ /
bool is_13a_symbol(unsigned char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
         (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_period_or_comma(unsigned char c) { return c == '.' || c == ','; }

// re.sub of a two-character pattern "(A)(B)": non-overlapping matches, scanning left to right,
// each match replaced by `pre` A `mid` B `post`.
template <typename First, typename Second>
std::string substitute_pairs(const std::string& s, First first, Second second, std::string_view pre,
                             std::string_view mid, std::string_view post) {
  std::string out;
  out.reserve(s.size() * 2);
  size_t i = 0;
  while (i < s.size()) {
    const auto a = static_cast<unsigned char>(s[i]);
    if (i + 1 < s.size() && first(a) && second(static_cast<unsigned char>(s[i + 1]))) {
      out.append(pre).push_back(s[i]);
      out.append(mid).push_back(s[i + 1]);
      out.append(post);
      i += 2;
    } else {
      out.push_back(s[i]);
      ++i;
    }
  }
  return out;
}

std::string join_words(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out.push_back(' ');
    out += w;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// BLEU statistics.

struct BleuStats {
  long long hyp_length = 0;
  long long ref_length = 0;
  long long correct[kBleuOrder] = {0, 0, 0, 0};
  long long total[kBleuOrder] = {0, 0, 0, 0};
};

// Counts of every 1..4-gram; tokens never contain a space, so the space-joined n-gram is a key
// that also tells its order.
std::unordered_map<std::string, long long> word_ngrams(const std::vector<std::string>& tokens) {
  std::unordered_map<std::string, long long> counts;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string ngram;
    for (size_t n = 0; n < static_cast<size_t>(kBleuOrder) && i + n < tokens.size(); ++n) {
      if (n > 0) ngram.push_back(' ');
      ngram += tokens[i + n];
      ++counts[ngram];
    }
  }
  return counts;
}

// sacreBLEU preprocesses each segment with rstrip() and then the tokenizer.
std::vector<std::string> bleu_tokens(const std::string& line) {
  return split_whitespace(tokenize_13a(rstrip_whitespace(line)));
}

void add_bleu_stats(const std::string& hypothesis, const std::string& reference, BleuStats& stats) {
  const std::vector<std::string> hyp = bleu_tokens(hypothesis);
  const std::vector<std::string> ref = bleu_tokens(reference);
  stats.hyp_length += static_cast<long long>(hyp.size());
  stats.ref_length += static_cast<long long>(ref.size());
  const auto ref_counts = word_ngrams(ref);
  for (const auto& [ngram, count] : word_ngrams(hyp)) {
    const size_t order = static_cast<size_t>(std::count(ngram.begin(), ngram.end(), ' '));
    stats.total[order] += count;
    const auto it = ref_counts.find(ngram);
    if (it != ref_counts.end()) stats.correct[order] += std::min(count, it->second);
  }
}

// sacreBLEU's BLEU.compute_bleu with smooth_method "exp" and effective_order False.
BleuScore score_from_stats(const BleuStats& stats) {
  BleuScore result;
  result.hyp_length = stats.hyp_length;
  result.ref_length = stats.ref_length;
  result.brevity_penalty = 1.0;
  if (stats.hyp_length < stats.ref_length) {
    result.brevity_penalty =
        stats.hyp_length > 0
            ? std::exp(1.0 - static_cast<double>(stats.ref_length) / stats.hyp_length)
            : 0.0;
  }
  bool any_correct = false;
  for (long long c : stats.correct) any_correct = any_correct || c > 0;
  if (!any_correct) return result;  // score 0, precisions 0 (sacreBLEU's early stop)

  double smooth = 1.0;
  for (int n = 0; n < kBleuOrder; ++n) {
    if (stats.total[n] == 0) break;  // no n-grams of this order: precision stays 0
    if (stats.correct[n] == 0) {
      smooth *= 2;  // NIST smoothing: 1/2, 1/4, ... of a match for each order without one
      result.precisions[n] = 100.0 / (smooth * static_cast<double>(stats.total[n]));
    } else {
      result.precisions[n] =
          100.0 * static_cast<double>(stats.correct[n]) / static_cast<double>(stats.total[n]);
    }
  }
  double log_sum = 0.0;
  for (double p : result.precisions) log_sum += p == 0.0 ? kLogOfZero : std::log(p);
  result.score = result.brevity_penalty * std::exp(log_sum / kBleuOrder);
  return result;
}

void check_sizes(const char* metric, size_t hypotheses, size_t references) {
  if (hypotheses != references) {
    throw std::invalid_argument(std::string(metric) + ": " + std::to_string(hypotheses) +
                                " hypotheses but " + std::to_string(references) +
                                " references (expected one reference per hypothesis)");
  }
}

// ---------------------------------------------------------------------------------------------
// chrF statistics: per character order, [hypothesis n-grams, reference n-grams, matches].

struct ChrfOrderStats {
  long long hyp = 0;
  long long ref = 0;
  long long match = 0;
};

// The sentence as code points with every whitespace character removed.
std::u32string chrf_characters(std::string_view line) {
  std::u32string chars;
  for (size_t i = 0; i < line.size();) {
    const CodePoint cp = decode_utf8(line, i);
    if (!is_python_space(cp.value)) chars.push_back(cp.value);
    i += cp.length;
  }
  return chars;
}

std::unordered_map<std::u32string, long long> char_ngrams(const std::u32string& s, size_t n) {
  std::unordered_map<std::u32string, long long> counts;
  for (size_t i = 0; i + n <= s.size(); ++i) ++counts[s.substr(i, n)];
  return counts;
}

void add_chrf_stats(const std::string& hypothesis, const std::string& reference,
                    ChrfOrderStats (&stats)[kChrfCharOrder]) {
  const std::u32string hyp = chrf_characters(hypothesis);
  const std::u32string ref = chrf_characters(reference);
  for (size_t n = 1; n <= static_cast<size_t>(kChrfCharOrder); ++n) {
    const auto hyp_counts = char_ngrams(hyp, n);
    const auto ref_counts = char_ngrams(ref, n);
    long long hyp_total = 0, ref_total = 0, matches = 0;
    for (const auto& [ngram, count] : hyp_counts) {
      hyp_total += count;
      const auto it = ref_counts.find(ngram);
      if (it != ref_counts.end()) matches += std::min(count, it->second);
    }
    for (const auto& entry : ref_counts) ref_total += entry.second;
    ChrfOrderStats& s = stats[n - 1];
    // sacreBLEU counts no hypothesis n-grams of an order the reference is too short to have.
    s.hyp += ref_counts.empty() ? 0 : hyp_total;
    s.ref += ref_total;
    s.match += matches;
  }
}

// sacreBLEU's CHRF._compute_f_score with eps_smoothing False: precision and recall averaged over
// the orders where both sides have n-grams, then one F-beta of the averages.
double chrf_from_stats(const ChrfOrderStats (&stats)[kChrfCharOrder]) {
  double avg_prec = 0.0, avg_rec = 0.0;
  int effective_order = 0;
  for (const ChrfOrderStats& s : stats) {
    if (s.hyp > 0 && s.ref > 0) {
      avg_prec += static_cast<double>(s.match) / static_cast<double>(s.hyp);
      avg_rec += static_cast<double>(s.match) / static_cast<double>(s.ref);
      ++effective_order;
    }
  }
  if (effective_order == 0) return 0.0;
  avg_prec /= effective_order;
  avg_rec /= effective_order;
  if (avg_prec + avg_rec == 0.0) return 0.0;
  const double factor = kChrfBeta * kChrfBeta;
  double score = (1 + factor) * avg_prec * avg_rec;
  score /= factor * avg_prec + avg_rec;
  return 100 * score;
}

}  // namespace

std::string BleuScore::to_string() const {
  const double ratio =
      ref_length != 0 ? static_cast<double>(hyp_length) / static_cast<double>(ref_length) : 0.0;
  char buffer[256];
  std::snprintf(buffer, sizeof(buffer),
                "BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld "
                "ref_len = %lld)",
                score, precisions[0], precisions[1], precisions[2], precisions[3], brevity_penalty,
                ratio, hyp_length, ref_length);
  return buffer;
}

std::string tokenize_13a(const std::string& line) {
  std::string s = line;
  replace_all(s, "<skipped>", "");
  replace_all(s, "-\n", "");
  replace_all(s, "\n", " ");
  replace_all(s, "&quot;", "\"");
  replace_all(s, "&amp;", "&");
  replace_all(s, "&lt;", "<");
  replace_all(s, "&gt;", ">");

  std::string padded = " ";
  for (const char c : s) {
    if (is_13a_symbol(static_cast<unsigned char>(c))) {
      padded.append(1, ' ').append(1, c).append(1, ' ');
    } else {
      padded.push_back(c);
    }
  }
  padded.push_back(' ');

  const auto not_digit = [](unsigned char c) { return !is_digit(c); };
  const auto is_dash = [](unsigned char c) { return c == '-'; };
  // Period and comma split off unless preceded by a digit, then unless followed by a digit.
  std::string t = substitute_pairs(padded, not_digit, is_period_or_comma, "", " ", " ");
  t = substitute_pairs(t, is_period_or_comma, not_digit, " ", " ", "");
  // A dash after a digit is split off.
  t = substitute_pairs(t, is_digit, is_dash, "", " ", " ");
  return join_words(split_whitespace(t));
}

BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::string>& references) {
  check_sizes("corpus_bleu", hypotheses.size(), references.size());
  BleuStats stats;
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    add_bleu_stats(hypotheses[i], references[i], stats);
  }
  return score_from_stats(stats);
}

double corpus_chrf(const std::vector<std::string>& hypotheses,
                   const std::vector<std::string>& references) {
  check_sizes("corpus_chrf", hypotheses.size(), references.size());
  ChrfOrderStats stats[kChrfCharOrder];
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    add_chrf_stats(hypotheses[i], references[i], stats);
  }
  return chrf_from_stats(stats);
}

}  // namespace tandem::eval
