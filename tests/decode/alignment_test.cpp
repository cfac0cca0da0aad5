// What beam search says each token attended to (DecodeOptions::alignment) is what the model's
// full, teacher-forced decoder attends to over the hypothesis's own tokens (an independent
// computation: no cache, no beams), for every n-best entry, greedy and beam, with a forced first
// token, and shifted (each token at the step that read it); and reading the heads changes no
// translation.
#include <gtest/gtest.h>

#include "tests/decode/fixtures.h"

namespace tandem::decode {
namespace {

using fixtures::source_batch;
using fixtures::tiny_model;

// Each token's attended position holds the largest of the heads' attention (ties allowed) when
// the whole hypothesis is fed at once: in the row that predicts it, or with heads.shift the next,
// which reads it (the last token of a hypothesis cut at the length limit was never read: -1).
void expect_forced_argmax(model::Transformer& model, const std::vector<int32_t>& source,
                          const Hypothesis& h, const model::AlignmentHeads& heads) {
  ASSERT_EQ(h.attended.size(), h.tokens.size());
  if (h.tokens.empty()) return;
  std::vector<int64_t> in = {kBosId};
  in.insert(in.end(), h.tokens.begin(), h.tokens.end());
  torch::NoGradGuard no_grad;
  const auto log_probs = model->cross_attention(fixtures::source_row(source),
                                                torch::tensor(in, torch::kLong).unsqueeze(0),
                                                heads)[0];  // [tokens + 1, src_len]
  const size_t shift = heads.shift ? 1 : 0;
  for (size_t t = 0; t < h.tokens.size(); ++t) {
    if (heads.shift && !h.ended && t + 1 == h.tokens.size()) {
      EXPECT_EQ(h.attended[t], -1) << "the cut hypothesis' last token";
      continue;
    }
    const auto row = log_probs[static_cast<int64_t>(t + shift)];
    EXPECT_NEAR(row[h.attended[t]].item<double>(), row.max().item<double>(), 1e-5)
        << "token " << t << " attended " << h.attended[t];
  }
}

TEST(DecodeAlignment, EveryNbestEntryAttendsWhereTheForcedDecoderDoes) {
  auto model = tiny_model(1.0);
  torch::manual_seed(3);
  const auto sources = fixtures::random_sentences({5, 2, 7, 4});
  for (const int64_t beam : {1, 4}) {
    DecodeOptions options;
    options.beam_size = beam;
    options.nbest = beam == 1 ? 1 : 3;
    const auto plain = beam_search(model, source_batch(sources), options);
    options.alignment = model::AlignmentHeads{1, 1, 1};  // the last layer's second head
    const auto read = beam_search(model, source_batch(sources), options);
    ASSERT_EQ(read.size(), sources.size());
    for (size_t i = 0; i < sources.size(); ++i) {
      ASSERT_EQ(read[i].size(), plain[i].size());
      for (size_t k = 0; k < read[i].size(); ++k) {
        SCOPED_TRACE("beam " + std::to_string(beam) + " sentence " + std::to_string(i) + " entry " +
                     std::to_string(k));
        EXPECT_EQ(read[i][k].tokens, plain[i][k].tokens);
        EXPECT_EQ(read[i][k].score, plain[i][k].score);
        EXPECT_TRUE(plain[i][k].attended.empty());
        expect_forced_argmax(model, sources[i], read[i][k], *options.alignment);
      }
    }
  }
}

TEST(DecodeAlignment, AForcedFirstTokenHasTheFirstStepsAttention) {
  auto model = tiny_model(0.5);
  torch::manual_seed(4);
  const auto sources = fixtures::random_sentences({3, 6});
  DecodeOptions options;
  options.beam_size = 2;
  options.alignment = model::AlignmentHeads{0, 2, 0};  // the first layer, both heads averaged
  const auto read =
      beam_search(model, source_batch(sources), options, fixtures::row_inputs({9, 9}, {}));
  for (size_t i = 0; i < sources.size(); ++i) {
    ASSERT_EQ(read[i].front().tokens.front(), 9);
    expect_forced_argmax(model, sources[i], read[i].front(), *options.alignment);
  }
}

TEST(DecodeAlignment, ShiftedHeadsReadEachTokenAtTheStepThatReadIt) {
  auto model = tiny_model(1.0);
  torch::manual_seed(5);
  const auto sources = fixtures::random_sentences({5, 2, 7, 4});
  for (const int64_t limit : {int64_t{10}, int64_t{3}}) {  // 3: hypotheses cut at the limit
    for (const int64_t beam : {1, 4}) {
      DecodeOptions options;
      options.beam_size = beam;
      options.nbest = beam == 1 ? 1 : 3;
      options.max_len_a = 0;
      options.max_len_b = limit;
      options.alignment = model::AlignmentHeads{1, 1, 1, true};
      const auto read = beam_search(model, source_batch(sources), options);
      int64_t cut = 0;
      for (size_t i = 0; i < sources.size(); ++i) {
        for (size_t k = 0; k < read[i].size(); ++k) {
          SCOPED_TRACE("limit " + std::to_string(limit) + " beam " + std::to_string(beam) +
                       " sentence " + std::to_string(i) + " entry " + std::to_string(k));
          cut += read[i][k].ended ? 0 : 1;
          expect_forced_argmax(model, sources[i], read[i][k], *options.alignment);
        }
      }
      if (limit == 3) EXPECT_GT(cut, 0) << "the limit cut no hypothesis";
    }
  }
}

TEST(DecodeAlignment, HeadsTheModelLacksAreRefused) {
  auto model = tiny_model(1.0);
  DecodeOptions options;
  options.alignment = model::AlignmentHeads{2, 1, 0};
  EXPECT_THROW(beam_search(model, source_batch({{5, 6}}), options), std::invalid_argument);
  options.alignment = model::AlignmentHeads{1, 2, 1};
  EXPECT_THROW(beam_search(model, source_batch({{5, 6}}), options), std::invalid_argument);
}

}  // namespace
}  // namespace tandem::decode
