// BLEU, chrF and the 13a tokenizer against hand-derived values and values from sacreBLEU 2.x.
//
// Where a number says "sacreBLEU 2.6.0", it was printed by sacreBLEU's own Python code (its
// public repository at release 2.6.0, run locally with `BLEU().corpus_score(hyps, [refs])` and
// `CHRF().corpus_score(hyps, [refs])`), and agreed to 1e-9 with a separate throwaway Python
// re-implementation written for this test; neither script is part of the repository.
#include "trainer/bleu/bleu_chrf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace tandem::eval {
namespace {

constexpr double kTol = 1e-9;

TEST(Tokenize13a, SplitsSymbolsButKeepsApostrophesAndHyphenatedWords) {
  EXPECT_EQ(tokenize_13a("Hello, world!"), "Hello , world !");
  EXPECT_EQ(tokenize_13a("don't (a)[b]{c} x/y @home #1 50%"),
            "don't ( a ) [ b ] { c } x / y @ home # 1 50 %");
  EXPECT_EQ(tokenize_13a("pages 10-20 and well-known"), "pages 10 - 20 and well-known");
}

TEST(Tokenize13a, SplitsPeriodAndCommaUnlessBetweenDigits) {
  // "$" is a symbol; "3,000.50" keeps its separators (a digit on both sides); "y." splits.
  EXPECT_EQ(tokenize_13a("It costs $3,000.50 today."), "It costs $ 3,000.50 today .");
  // "e.g.," : every period/comma has a non-digit on one side. " .5" splits (a space precedes
  // the period); "5." splits too (a space follows it); "1.5" has digits on both sides.
  EXPECT_EQ(tokenize_13a("e.g., U.S.A. 1.5 .5 5. 3,a"), "e . g . , U . S . A . 1.5 . 5 5 . 3 , a");
  // " ,.5": the match " ," consumes the comma, so the period is next tried with "5" after it
  // and stays glued (re.sub matches never overlap); "x.," → "x . ,"; "9-" → "9 -".
  EXPECT_EQ(tokenize_13a("x.,y ,.5 9-"), "x . , y , .5 9 -");
  EXPECT_EQ(tokenize_13a("1.2.3 a..b"), "1.2.3 a . . b");
}

TEST(Tokenize13a, UnescapesEntitiesInSacrebleuOrder) {
  // &quot; first, then &amp; → "&", which turns "&amp;lt;" into "&lt;", unescaped next to "<".
  EXPECT_EQ(tokenize_13a("&quot;Quoted&quot; &amp;lt; x"), "\" Quoted \" < x");
  EXPECT_EQ(tokenize_13a("a &gt; b &amp; c"), "a > b & c");
}

TEST(Tokenize13a, DropsSkippedMarkerAndJoinsHyphenatedLineBreaks) {
  EXPECT_EQ(tokenize_13a("<skipped>line-\nbreak\nnext"), "linebreak next");
}

TEST(Tokenize13a, LeavesNonAsciiAloneAndSplitsOnUnicodeWhitespace) {
  // "¿" and "—" are not ASCII punctuation, so they stay glued; "?" splits.
  EXPECT_EQ(tokenize_13a("¿Qué pasó?  —dijo él."), "¿Qué pasó ? —dijo él .");
  // A no-break space (U+00A0) separates tokens as Python's str.split() does.
  EXPECT_EQ(tokenize_13a("a\u00a0b\tc  d"), "a b c d");
  EXPECT_EQ(tokenize_13a("   "), "");
}

TEST(CorpusBleu, IdenticalCorporaScoreHundred) {
  const std::vector<std::string> text = {"The quick brown fox jumps over the lazy dog.",
                                         "El niño comió una manzana en el jardín."};
  const BleuScore bleu = corpus_bleu(text, text);
  EXPECT_NEAR(bleu.score, 100.0, kTol);
  for (double p : bleu.precisions) EXPECT_NEAR(p, 100.0, kTol);
  EXPECT_DOUBLE_EQ(bleu.brevity_penalty, 1.0);
  EXPECT_EQ(bleu.hyp_length, 19);  // 9 + 8 words, plus the two final periods split off
  EXPECT_EQ(bleu.ref_length, 19);
}

TEST(CorpusBleu, SmallCorpusMatchesHandCount) {
  // Sentence 1: hyp "The cat sat on the mat ." (7 tokens), ref "The cat is on the mat ." (7).
  //   1-grams 6/7 (all but "sat"); 2-grams 4/6 (The cat, on the, the mat, mat .);
  //   3-grams 2/5 (on the mat, the mat .); 4-grams 1/4 (on the mat .).
  // Sentence 2: hyp "the the the the dog" (5), ref "the dog barked at the cat" (6).
  //   1-grams: "the" x4 clipped to the reference's 2, plus "dog" → 3/5; 2-grams 1/4 ("the dog");
  //   3-grams 0/3; 4-grams 0/2.
  // Corpus: correct 9/5/2/1 of 12/10/8/6 → precisions 75, 50, 25, 16.667 (no order is zero);
  // lengths 12 vs 13 → BP = exp(1 - 13/12) = 0.920044.
  // BLEU = BP * (75 * 50 * 25 * 100/6)^(1/4) = 0.920044 * 1562500^(1/4) = 0.920044 * 35.35534.
  const BleuScore bleu = corpus_bleu({"The cat sat on the mat.", "the the the the dog"},
                                     {"The cat is on the mat.", "the dog barked at the cat"});
  EXPECT_EQ(bleu.hyp_length, 12);
  EXPECT_EQ(bleu.ref_length, 13);
  EXPECT_NEAR(bleu.precisions[0], 75.0, kTol);
  EXPECT_NEAR(bleu.precisions[1], 50.0, kTol);
  EXPECT_NEAR(bleu.precisions[2], 25.0, kTol);
  EXPECT_NEAR(bleu.precisions[3], 100.0 / 6.0, kTol);
  const double bp = std::exp(1.0 - 13.0 / 12.0);
  EXPECT_NEAR(bleu.brevity_penalty, bp, kTol);
  EXPECT_NEAR(bleu.score, bp * std::pow(75.0 * 50.0 * 25.0 * 100.0 / 6.0, 0.25), kTol);
  EXPECT_NEAR(bleu.score, 32.52848222886011, kTol);  // sacreBLEU 2.6.0
}

TEST(CorpusBleu, SacrebleuStatisticsTestCaseWithExpSmoothing) {
  // sacreBLEU's test/test_bleu.py (test_case_statistics) gives these counts for this pair:
  // correct [4, 2, 1, 0] of totals [6, 5, 4, 3]. No 4-gram matches, so 'exp' smoothing makes
  // p4 = 100 / (2 * 3). BP = exp(1 - 8/6).
  const BleuScore bleu =
      corpus_bleu({"am I am a character sequence"}, {"I am a symbol string sequence a a"});
  EXPECT_NEAR(bleu.precisions[0], 100.0 * 4 / 6, kTol);
  EXPECT_NEAR(bleu.precisions[1], 40.0, kTol);
  EXPECT_NEAR(bleu.precisions[2], 25.0, kTol);
  EXPECT_NEAR(bleu.precisions[3], 100.0 / 6.0, kTol);
  const double expected =
      std::exp(1.0 - 8.0 / 6.0) * std::pow((400.0 / 6) * 40.0 * 25.0 * (100.0 / 6), 0.25);
  EXPECT_NEAR(bleu.score, expected, kTol);
  EXPECT_NEAR(bleu.score, 23.263472697663296, kTol);  // sacreBLEU 2.6.0
}

TEST(CorpusBleu, ExpSmoothingHalvesForEachOrderWithoutMatches) {
  // hyp "a b c d e" vs ref "a x b y c": 1-grams 3/5, then no 2-, 3- or 4-gram matches:
  // p2 = 100/(2*4) = 12.5, p3 = 100/(4*3) = 8.333, p4 = 100/(8*2) = 6.25. Equal lengths, BP 1.
  const BleuScore bleu = corpus_bleu({"a b c d e"}, {"a x b y c"});
  EXPECT_NEAR(bleu.precisions[0], 60.0, kTol);
  EXPECT_NEAR(bleu.precisions[1], 12.5, kTol);
  EXPECT_NEAR(bleu.precisions[2], 100.0 / 12.0, kTol);
  EXPECT_NEAR(bleu.precisions[3], 6.25, kTol);
  EXPECT_NEAR(bleu.score, std::pow(60.0 * 12.5 * (100.0 / 12.0) * 6.25, 0.25), kTol);
  EXPECT_NEAR(bleu.score, 14.058533129758727, kTol);  // sacreBLEU 2.6.0
}

TEST(CorpusBleu, NoMatchAtAllScoresZero) {
  const BleuScore bleu = corpus_bleu({"a b c d"}, {"w x y z"});
  EXPECT_EQ(bleu.score, 0.0);
  for (double p : bleu.precisions) EXPECT_EQ(p, 0.0);
  EXPECT_DOUBLE_EQ(bleu.brevity_penalty, 1.0);
}

TEST(CorpusBleu, CorpusWithoutFourGramsScoresZeroEvenWhenIdentical) {
  // sacreBLEU stops at the first order with no hypothesis n-grams; that precision stays 0 and
  // (effective order being off for corpus BLEU) the score is 0.
  const BleuScore bleu = corpus_bleu({"a b c"}, {"a b c"});
  EXPECT_EQ(bleu.score, 0.0);
  EXPECT_NEAR(bleu.precisions[2], 100.0, kTol);
  EXPECT_EQ(bleu.precisions[3], 0.0);
}

TEST(CorpusBleu, BrevityPenaltyForShortHypothesis) {
  // Every n-gram of the 4-token hypothesis matches; ref has 6 tokens: BLEU = 100 * exp(1 - 6/4).
  const BleuScore bleu = corpus_bleu({"the cat sat on"}, {"the cat sat on the mat"});
  EXPECT_NEAR(bleu.brevity_penalty, std::exp(-0.5), kTol);
  EXPECT_NEAR(bleu.score, 100.0 * std::exp(-0.5), kTol);
}

TEST(CorpusBleu, EmptyHypothesisHasZeroPenaltyAndScore) {
  const BleuScore bleu = corpus_bleu({""}, {"the cat"});
  EXPECT_EQ(bleu.brevity_penalty, 0.0);
  EXPECT_EQ(bleu.score, 0.0);
  EXPECT_EQ(bleu.hyp_length, 0);
  EXPECT_EQ(bleu.ref_length, 2);
}

TEST(CorpusBleu, SpanishTextMatchesSacrebleu) {
  const BleuScore bleu =
      corpus_bleu({"El niño comió una manzana en el jardín.", "¿Dónde está la canción?"},
                  {"El niño se comió una manzana roja en el jardín.", "¿Dónde está mi canción?"});
  EXPECT_EQ(bleu.hyp_length, 14);
  EXPECT_EQ(bleu.ref_length, 16);
  EXPECT_NEAR(bleu.score, 33.8373826390176, kTol);  // sacreBLEU 2.6.0
}

TEST(CorpusBleu, ToStringFormatsLikeSacrebleu) {
  // The hypotheses of sacreBLEU's README example, with only its first reference set; sacreBLEU
  // 2.6.0 prints exactly this line.
  const BleuScore bleu =
      corpus_bleu({"The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."},
                  {"The dog bit the man.", "It was not unexpected.", "The man bit him first."});
  EXPECT_NEAR(bleu.score, 45.06750632106114, kTol);
  EXPECT_EQ(bleu.to_string(),
            "BLEU = 45.07 70.6/42.9/36.4/37.5 (BP = 1.000 ratio = 1.000 hyp_len = 17 "
            "ref_len = 17)");
}

TEST(CorpusBleu, SizeMismatchThrowsInvalidArgument) {
  EXPECT_THROW(corpus_bleu({"a", "b"}, {"a"}), std::invalid_argument);
}

TEST(CorpusChrf, SingleCharacterIdenticalScoresHundred) {
  // Only 1-grams exist (1/1 on both sides); higher orders have no n-grams and are left out.
  EXPECT_NEAR(corpus_chrf({"a"}, {"a"}), 100.0, kTol);
}

TEST(CorpusChrf, SingleWordByHand) {
  // "cat" vs "cut": 1-grams 2/3 both ways, 2-grams 0/2, 3-grams 0/1, no 4..6-grams.
  // Average precision = average recall = (2/3 + 0 + 0) / 3 = 2/9, so F2 = 2/9.
  EXPECT_NEAR(corpus_chrf({"cat"}, {"cut"}), 100.0 * 2.0 / 9.0, kTol);
}

TEST(CorpusChrf, RecallWeighsMoreThanPrecision) {
  // "ab" vs "abc": 1-grams P 2/2 R 2/3; 2-grams P 1/1 R 1/2; 3-grams: the hypothesis has none,
  // so that order is left out. avgP = 1, avgR = 7/12, F2 = 5 * 7/12 / (4 + 7/12) = 7/11.
  EXPECT_NEAR(corpus_chrf({"ab"}, {"abc"}), 700.0 / 11.0, kTol);
}

TEST(CorpusChrf, IgnoresWhitespace) {
  // sacreBLEU test/test_chrf.py, test_cases_effective_order: "a b c" vs "abc" → 100.
  EXPECT_NEAR(corpus_chrf({"a b c"}, {"abc"}), 100.0, kTol);
}

TEST(CorpusChrf, SumsStatisticsOverTheCorpusBeforeAveraging) {
  // sacreBLEU test/test_chrf.py, test_cases_effective_order (P = R there, so beta does not
  // matter): ["a", "b"] vs ["a", "c"] → 1-grams 1/2 → 50; ["aa"] vs ["ab"] → (1/2 + 0)/2 → 25.
  EXPECT_NEAR(corpus_chrf({"a", "b"}, {"a", "c"}), 50.0, kTol);
  EXPECT_NEAR(corpus_chrf({"aa"}, {"ab"}), 25.0, kTol);
}

TEST(CorpusChrf, HypothesisNgramsOfOrdersTheReferenceLacksAreNotCounted) {
  // Pair 1 "abc" vs "a": the reference has no 2-grams, so the hypothesis' two 2-grams are not
  // counted. Pair 2 "xy" vs "xy". 1-grams: P 3/5, R 3/3; 2-grams: P 1/1, R 1/1.
  // avgP = 0.8, avgR = 1, F2 = 5 * 0.8 / (4 * 0.8 + 1) = 4/4.2.
  EXPECT_NEAR(corpus_chrf({"abc", "xy"}, {"a", "xy"}), 400.0 / 4.2, kTol);
}

TEST(CorpusChrf, CountsCharactersNotBytes) {
  // "canción" vs "cancion": 7 characters each (7 and 8 bytes); P = R per order:
  // 6/7, 4/6, 3/5, 2/4, 1/3, 0/2 → F2 = their mean = 2.957143 / 6.
  const double mean = (6.0 / 7 + 4.0 / 6 + 3.0 / 5 + 2.0 / 4 + 1.0 / 3 + 0.0) / 6;
  EXPECT_NEAR(corpus_chrf({"canción"}, {"cancion"}), 100.0 * mean, kTol);
}

TEST(CorpusChrf, SpanishTextMatchesSacrebleu) {
  const double chrf =
      corpus_chrf({"El niño comió una manzana en el jardín.", "¿Dónde está la canción?"},
                  {"El niño se comió una manzana roja en el jardín.", "¿Dónde está mi canción?"});
  EXPECT_NEAR(chrf, 73.26197609716093, kTol);  // sacreBLEU 2.6.0
}

TEST(CorpusChrf, ReadmeHypothesesMatchSacrebleu) {
  const double chrf =
      corpus_chrf({"The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."},
                  {"The dog bit the man.", "It was not unexpected.", "The man bit him first."});
  EXPECT_NEAR(chrf, 50.043063606582294, kTol);  // sacreBLEU 2.6.0
}

TEST(CorpusChrf, EmptyHypothesisScoresZero) {
  EXPECT_EQ(corpus_chrf({""}, {"reference"}), 0.0);
  EXPECT_EQ(corpus_chrf({}, {}), 0.0);
}

TEST(CorpusChrf, SizeMismatchThrowsInvalidArgument) {
  EXPECT_THROW(corpus_chrf({"a"}, {"a", "b"}), std::invalid_argument);
}

}  // namespace
}  // namespace tandem::eval
