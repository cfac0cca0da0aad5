// The lexical shortlist: IBM Model 1's EM gives the translation table a dense textbook
// implementation gives, and so the same lists; on pairs whose words translate one to one each
// source word's best target is its translation; a batch's candidates are the union the header
// describes; a saved shortlist loads back the same, and a file that is not one is named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "data/shortlist/ibm_model1.h"
#include "trainer/common/temp_dir.h"

namespace tandem::data {
namespace {

constexpr int64_t kVocab = 40;  // ids 0-3 special, 4-21 source words, 22-39 target words

// Pairs whose target is the source's words mapped w -> w + 18, in a shuffled order, with an
// extra frequent target word (39) in most of them.
std::vector<SentencePair> mapped_pairs(int count, uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<SentencePair> pairs;
  for (int i = 0; i < count; ++i) {
    SentencePair pair;
    const int len = 2 + static_cast<int>(random() % 6);
    for (int w = 0; w < len; ++w) pair.src.push_back(4 + static_cast<int32_t>(random() % 17));
    for (const int32_t w : pair.src) pair.tgt.push_back(w + 18);
    std::shuffle(pair.tgt.begin(), pair.tgt.end(), random);
    if (i % 3 != 0) pair.tgt.push_back(39);
    pairs.push_back(std::move(pair));
  }
  return pairs;
}

// Textbook IBM Model 1: a dense t[f][e] (f = kVocab is NULL), uniform start, `iterations` EM
// steps over every target token of every pair. → source f's top_k targets by t (ties: lower id)
// among those it co-occurred with.
std::vector<int32_t> naive_list(const std::vector<SentencePair>& pairs, int iterations, int32_t f,
                                int64_t top_k) {
  std::vector<std::vector<double>> t(kVocab + 1, std::vector<double>(kVocab, 1.0));
  std::set<std::pair<int32_t, int32_t>> seen;
  for (int it = 0; it < iterations; ++it) {
    std::vector<std::vector<double>> count(kVocab + 1, std::vector<double>(kVocab, 0.0));
    for (const auto& pair : pairs) {
      std::vector<int32_t> sources = pair.src;
      sources.push_back(kVocab);
      for (const int32_t e : pair.tgt) {
        double z = 0;
        for (const int32_t s : sources) z += t[s][e];
        for (const int32_t s : sources) {
          count[s][e] += t[s][e] / z;
          seen.insert({s, e});
        }
      }
    }
    for (int32_t s = 0; s <= kVocab; ++s) {
      double total = 0;
      for (const double c : count[s]) total += c;
      for (int32_t e = 0; e < kVocab; ++e) t[s][e] = total > 0 ? count[s][e] / total : 1.0;
    }
  }
  std::vector<int32_t> targets;
  for (int32_t e = 0; e < kVocab; ++e) {
    if (seen.count({f, e})) targets.push_back(e);
  }
  std::stable_sort(targets.begin(), targets.end(),
                   [&](int32_t a, int32_t b) { return t[f][a] > t[f][b]; });
  if (static_cast<int64_t>(targets.size()) > top_k) targets.resize(top_k);
  return targets;
}

TEST(Shortlist, ModelOneGivesTheListsOfADenseTextbookImplementation) {
  const auto pairs = mapped_pairs(300, 1);
  ShortlistOptions options;
  options.top_k = 5;
  options.iterations = 4;
  const auto shortlist = build_shortlist(pairs, kVocab, "vocab bytes", options);
  for (int32_t f = 4; f < 21; ++f) {
    EXPECT_EQ(shortlist.targets_of(f), naive_list(pairs, 4, f, 5)) << "source " << f;
    ASSERT_FALSE(shortlist.targets_of(f).empty());
    EXPECT_EQ(shortlist.targets_of(f).front(), f + 18) << "source " << f;  // its translation
  }
  EXPECT_TRUE(shortlist.targets_of(30).empty());  // a target word: never a source
  EXPECT_TRUE(shortlist.targets_of(kVocab).empty());
}

TEST(Shortlist, ABatchsCandidatesAreTheFrequentItsSourcesListsAndTheExtra) {
  const auto pairs = mapped_pairs(300, 2);
  ShortlistOptions options;
  options.top_k = 2;
  options.frequent = 1;
  const auto shortlist = build_shortlist(pairs, kVocab, "v", options);
  EXPECT_EQ(shortlist.frequent(), (std::vector<int32_t>{39}));
  const std::vector<std::vector<int32_t>> sources = {{5, 6}, {6, 9, 0}};
  std::set<int64_t> want = {39, 3};
  for (const int32_t s : {5, 6, 9}) {
    for (const int32_t e : shortlist.targets_of(s)) want.insert(e);
  }
  const auto got = shortlist.candidates(sources, {3});
  EXPECT_EQ(got, std::vector<int64_t>(want.begin(), want.end()));
}

TEST(Shortlist, SavedLoadsBackTheSameAndAFileThatIsNotOneIsNamed) {
  const TempDir dir("shortlist");
  const auto shortlist = build_shortlist(mapped_pairs(100, 3), kVocab, "the vocab", {});
  shortlist.save(dir.file("list.h5"));
  const auto back = Shortlist::load(dir.file("list.h5"));
  EXPECT_EQ(back.fingerprint(), shortlist.fingerprint());
  EXPECT_EQ(back.frequent(), shortlist.frequent());
  EXPECT_EQ(back.options().top_k, shortlist.options().top_k);
  for (int32_t s = 0; s < kVocab; ++s) EXPECT_EQ(back.targets_of(s), shortlist.targets_of(s));
  std::ofstream(dir.file("text.h5")) << "not hdf5\n";
  for (const auto& name : {"text.h5", "absent.h5"}) {
    try {
      Shortlist::load(dir.file(name));
      ADD_FAILURE() << name;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(dir.file(name)), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tandem::data
