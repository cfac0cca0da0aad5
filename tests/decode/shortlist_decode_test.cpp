// Decoding with a lexical shortlist: every output token of a batch is among the batch's
// candidates (its sources' lists, the frequent ids, EOS, its constraints' tokens), in beam search,
// greedy and sampling, unfrozen and frozen in fp32 and int8; a shortlist of the whole vocabulary
// translates as no shortlist does; and a shortlist of another vocabulary size is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "data/shortlist/ibm_model1.h"
#include "tests/decode/fixtures.h"
#include "trainer/decode/beam.h"

namespace tandem::decode {
namespace {

using namespace fixtures;

// A shortlist of the tiny vocabulary built from pairs whose targets are their sources reversed
// with each word w written as the next one (w + 1, the last as the first), so that its lists
// lack most of what the reversing model writes; lists of `top_k`, `frequent` frequent ids.
std::shared_ptr<const data::Shortlist> tiny_shortlist(int64_t top_k, int64_t frequent) {
  torch::manual_seed(12);
  std::vector<data::SentencePair> pairs;
  for (int i = 0; i < 200; ++i) {
    auto src = random_sentence(3 + i % 5);
    std::vector<int32_t> tgt;
    for (auto w = src.rbegin(); w != src.rend(); ++w) {
      tgt.push_back(*w + 1 < kVocab ? *w + 1 : static_cast<int32_t>(kFirstWord));
    }
    pairs.push_back({src, tgt});
  }
  data::ShortlistOptions options;
  options.top_k = top_k;
  options.frequent = frequent;
  return std::make_shared<const data::Shortlist>(
      data::build_shortlist(pairs, kVocab, "tiny", options));
}

TEST(ShortlistDecode, EveryOutputTokenIsInItsBatchsCandidates) {
  const auto shortlist = tiny_shortlist(2, 1);
  torch::manual_seed(4);
  const auto sentences = random_sentences({3, 2});
  const auto src = source_batch(sentences);
  Constraints with;
  with.include = {{static_cast<int32_t>(kFirstWord + 2)}};
  const std::vector<Constraints> constraints = {with, {}};
  auto allowed = shortlist->candidates(sentences, {static_cast<int32_t>(kEosId), kFirstWord + 2});
  ASSERT_LT(allowed.size(), static_cast<size_t>(kVocab - 6));  // it does leave ids out
  // Without the shortlist the model writes tokens outside it (so the check below can fail).
  bool outside = false;
  for (const auto& h : beam_search(trained_model(), src, DecodeOptions())) {
    for (const int32_t token : h.front().tokens) {
      outside = outside || !std::binary_search(allowed.begin(), allowed.end(), token);
    }
  }
  EXPECT_TRUE(outside);
  auto int8 = frozen_copy(trained_model(), kernels::InferencePrecision::kInt8);
  auto fp32 = frozen_copy(trained_model(), kernels::InferencePrecision::kFp32);
  for (auto* model : {&trained_model(), &fp32, &int8}) {
    for (const int64_t beam : {1, 4}) {
      for (const bool sampled : {false, true}) {
        if (sampled && beam != 1) continue;
        DecodeOptions options;
        options.beam_size = beam;
        options.nbest = beam;
        options.shortlist = shortlist;
        if (sampled) options.sampling.kind = SamplingKind::kFull;
        const auto lists =
            beam_search(*model, src, options,
                        row_inputs({}, sampled ? std::vector<Constraints>{} : constraints));
        for (size_t i = 0; i < lists.size(); ++i) {
          for (const auto& h : lists[i]) {
            EXPECT_TRUE(std::isfinite(h.score));
            for (const int32_t token : h.tokens) {
              EXPECT_TRUE(std::binary_search(allowed.begin(), allowed.end(), token))
                  << "beam " << beam << ", sentence " << i << ": token " << token;
            }
          }
        }
      }
    }
  }
}

TEST(ShortlistDecode, AShortlistOfTheWholeVocabularyTranslatesAsNone) {
  const auto everything = tiny_shortlist(kVocab, kVocab);
  torch::manual_seed(5);
  const auto src = source_batch(random_sentences({5, 3, 7, 4, 6}));
  DecodeOptions options;
  const auto without = beam_search(trained_model(), src, options);
  options.shortlist = everything;
  ASSERT_EQ(everything->candidates({}, {static_cast<int32_t>(kEosId)}).size(),
            static_cast<size_t>(kVocab - 3));  // all but <pad>, <unk> and <s>
  const auto with = beam_search(trained_model(), src, options);
  for (size_t i = 0; i < with.size(); ++i) {
    EXPECT_EQ(with[i].front().tokens, without[i].front().tokens) << i;
  }
}

TEST(ShortlistDecode, AShortlistOfAnotherVocabularySizeIsRefused) {
  DecodeOptions options;
  options.shortlist =
      std::make_shared<const data::Shortlist>(data::build_shortlist({}, kVocab + 1, "other", {}));
  EXPECT_THROW(beam_search(trained_model(), source_batch({{5, 6}}), options),
               std::invalid_argument);
}

}  // namespace
}  // namespace tandem::decode
