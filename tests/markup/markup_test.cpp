// Markup taken out of a line and put back into its translation: parse against hand-made lines
// (nesting, attributes, self-closing and void tags, comments, entities) and its refusals; restore
// against hand-made alignments (reordering, nesting, spans, self-closing tags, words without
// links, escaping) and against a naive search over every run of target words; and over random
// lines, tags and alignments, that every output parses, holds every tag once byte for byte, and
// reads as the translation.
#include "trainer/markup/markup.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace tandem::markup {
namespace {

using data::WordLink;

std::vector<std::string> tag_texts(const MarkedLine& line) {
  std::vector<std::string> texts;
  for (const Tag& tag : line.tags) texts.push_back(tag.text);
  return texts;
}

TEST(Parse, TakesOutTagsAndEntitiesAndSaysWhereEachTagStood) {
  const MarkedLine line =
      parse("Click <a href=\"x>y\" title='z'>here</a> &amp; <b>now</b><br/> &#233;&#x41;&lt;");
  EXPECT_EQ(line.text,
            "Click here & now \xC3\xA9"
            "A<");
  EXPECT_TRUE(line.marked);
  ASSERT_EQ(line.tags.size(), 5u);
  EXPECT_EQ(line.tags[0].text, "<a href=\"x>y\" title='z'>");
  EXPECT_EQ(line.tags[0].kind, Tag::Kind::kOpen);
  EXPECT_EQ(line.tags[0].at, 6u);
  EXPECT_EQ(line.tags[0].partner, 1);
  EXPECT_EQ(line.tags[1].text, "</a>");
  EXPECT_EQ(line.tags[1].at, 10u);
  EXPECT_EQ(line.tags[1].partner, 0);
  EXPECT_EQ(line.tags[2].at, 13u);
  EXPECT_EQ(line.tags[4].text, "<br/>");
  EXPECT_EQ(line.tags[4].kind, Tag::Kind::kSelfClosing);
  EXPECT_EQ(line.tags[4].at, 16u);
}

TEST(Parse, VoidElementsAndCommentsStandAloneAndPlainLinesAreUnmarked) {
  const MarkedLine line = parse("one<br>two <img src=\"a.png\"> <!-- x <b> --> <x id=\"1\"/>");
  EXPECT_EQ(line.text, "onetwo   ");
  ASSERT_EQ(line.tags.size(), 4u);
  for (const Tag& tag : line.tags) EXPECT_EQ(tag.kind, Tag::Kind::kSelfClosing) << tag.text;
  EXPECT_EQ(line.tags[2].text, "<!-- x <b> -->");
  const MarkedLine plain = parse("no markup > here");
  EXPECT_FALSE(plain.marked);
  EXPECT_EQ(plain.text, "no markup > here");
}

std::string parse_error(const std::string& line) {
  try {
    parse(line);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << line;
  return "";
}

TEST(Parse, RefusesUnclosedCrossingAndStrayTagsAndUnknownEntities) {
  EXPECT_EQ(parse_error("a <b>bold"), "<b> at byte 2 is never closed");
  EXPECT_EQ(parse_error("<b><i>x</b></i>"), "</b> at byte 7 closes <i> (tags cross)");
  EXPECT_EQ(parse_error("x</b>"), "</b> at byte 1 closes no open tag");
  EXPECT_EQ(parse_error("1 < 2"), "'<' at byte 2 starts no tag (write &lt; for a '<' in text)");
  EXPECT_EQ(parse_error("<b x=\"1>"), "tag <b> at byte 0 never ends (no '>')");
  EXPECT_EQ(parse_error("caf&eacute;"),
            "unknown entity '&eacute;' at byte 3 (known: &amp; &lt; &gt; &quot; &apos; &nbsp; "
            "&#N; &#xN;)");
  EXPECT_EQ(parse_error("AT&T rocks"),
            "'&' at byte 2 starts no entity (write &amp; for an ampersand)");
  EXPECT_EQ(parse_error("x <!-- y"), "comment at byte 2 never ends");
}

// Hard links as the attention restore reads: 1 where linked.
data::WordAttention hard(const std::string& text, const std::string& translation,
                         const std::vector<WordLink>& links) {
  return data::links_as_attention(links, static_cast<int64_t>(data::split_words(text).size()),
                                  static_cast<int64_t>(data::split_words(translation).size()));
}

std::string restored(const std::string& line, const std::string& translation,
                     const std::vector<WordLink>& links) {
  const MarkedLine marked = parse(line);
  return restore(marked, translation, hard(marked.text, translation, links));
}

// Soft attention: rows[t][s], target word t's attention to source word s.
std::string restored_soft(const std::string& line, const std::string& translation,
                          const std::vector<std::vector<float>>& rows) {
  data::WordAttention attention{
      static_cast<int64_t>(rows.front().size()), static_cast<int64_t>(rows.size()), {}};
  for (const auto& row : rows) {
    attention.weights.insert(attention.weights.end(), row.begin(), row.end());
  }
  return restore(parse(line), translation, attention);
}

TEST(Restore, PairedTagsWrapTheWordsAlignedToWhatTheyWrapped) {
  EXPECT_EQ(restored("a <b>b</b> c", "x y z", {{0, 0}, {1, 1}, {2, 2}}), "x <b>y</b> z");
  EXPECT_EQ(restored("<b>red</b> <i>car</i>", "coche rojo", {{0, 1}, {1, 0}}),
            "<i>coche</i> <b>rojo</b>");
  EXPECT_EQ(restored("<p>the <b>big</b> dog</p>", "el perro grande", {{0, 0}, {1, 2}, {2, 1}}),
            "<p>el perro <b>grande</b></p>");
  // Two wrapped words aligned next to each other, in the other order: both.
  EXPECT_EQ(restored("<a href=\"#\">new house</a> now", "ya casa nueva", {{0, 2}, {1, 1}, {2, 0}}),
            "ya <a href=\"#\">casa nueva</a>");
  EXPECT_EQ(restored("un<b>believ</b>able story", "historia increible", {{0, 1}, {1, 0}}),
            "historia <b>increible</b>");
}

TEST(Restore, APairWrapsTheRunOfTargetWordsClearlyMoreTheWrappedWordsThanNot) {
  // "casa" and "nueva" both come mostly from the wrapped words, apart: the run that is more so.
  // casa: 0.9 of its attention on them, 0.7 of what "house" receives; ya: 0.2 and 0.13; nueva: 0.7
  // and 0.63 of what "new" receives.
  const std::vector<std::vector<float>> rows = {
      {0.2f, 0.7f, 0.1f}, {0.1f, 0.1f, 0.8f}, {0.5f, 0.2f, 0.3f}};
  EXPECT_EQ(restored_soft("<a href=\"#\">new house</a> now", "casa ya nueva", rows),
            "<a href=\"#\">casa</a> ya nueva");
  // casa: 0.6 and 0.67; nueva: 0.95 and 0.69.
  const std::vector<std::vector<float>> more = {
      {0.3f, 0.3f, 0.4f}, {0.1f, 0.1f, 0.8f}, {0.9f, 0.05f, 0.05f}};
  EXPECT_EQ(restored_soft("<a href=\"#\">new house</a> now", "casa ya nueva", more),
            "casa ya <a href=\"#\">nueva</a>");
  // Equal runs: the first.
  EXPECT_EQ(restored("<a href=\"#\">new house</a> now", "casa ya nueva", {{0, 2}, {1, 0}, {2, 1}}),
            "<a href=\"#\">casa</a> ya nueva");
  // "la" attends more to "house" than to "the", and takes 0.42 of what "house" receives: 0.7 +
  // 0.42 is short of 1.2, the sum a word inside a tag needs, and the tag leaves it out. With more
  // of it (0.8 + 0.46) it is in.
  EXPECT_EQ(restored_soft("the <b>house</b>", "la casa", {{0.3f, 0.7f}, {0.05f, 0.95f}}),
            "la <b>casa</b>");
  EXPECT_EQ(restored_soft("the <b>house</b>", "la casa", {{0.2f, 0.8f}, {0.05f, 0.95f}}),
            "<b>la casa</b>");
}

TEST(Restore, WhenNoTargetWordIsClearlyTheWrappedWordsThePairTakesTheClosestOne) {
  // Every target word attends most to "the" or "dog"; "grande" is the closest to "big":
  // 0.35 of its attention and 0.41 of big's (perro: 0.3 and 0.35).
  const std::vector<std::vector<float>> rows = {
      {0.7f, 0.2f, 0.1f}, {0.1f, 0.3f, 0.6f}, {0.2f, 0.35f, 0.45f}};
  EXPECT_EQ(restored_soft("the <b>big</b> dog", "el perro grande", rows), "el perro <b>grande</b>");
}

// Random attention, one tag over one or two source words: the pair wraps the run of target words
// that a naive search over every run finds with the largest sum of (share of the word's attention
// on the wrapped words + the largest share of a wrapped word's attention in the word - 1.2).
TEST(Restore, APairWrapsTheRunANaiveSearchOverEveryRunFinds) {
  std::mt19937 random(11);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  for (int round = 0; round < 300; ++round) {
    const int sources = 2 + static_cast<int>(random() % 5);
    const int targets = 1 + static_cast<int>(random() % 7);
    const int first = static_cast<int>(random() % static_cast<unsigned>(sources));
    const int last = std::min(sources - 1, first + static_cast<int>(random() % 2));
    std::string line, translation;
    for (int s = 0; s < sources; ++s) {
      line += std::string(s > 0 ? " " : "") + (s == first ? "<b>" : "") + "s" + std::to_string(s) +
              (s == last ? "</b>" : "");
    }
    std::vector<std::vector<float>> rows(static_cast<size_t>(targets));
    for (int t = 0; t < targets; ++t) {
      translation += (t > 0 ? " t" : "t") + std::to_string(t);
      float sum = 0;
      for (int s = 0; s <= sources; ++s) rows[t].push_back(uniform(random)), sum += rows[t].back();
      for (float& x : rows[t]) x /= sum;  // a softmax row: its last position is the source's end
      rows[t].pop_back();
    }
    std::vector<double> gain(static_cast<size_t>(targets)), received(sources, 0.0);
    for (int t = 0; t < targets; ++t) {
      for (int s = 0; s < sources; ++s) received[s] += rows[t][s];
    }
    for (int t = 0; t < targets; ++t) {
      double mine = 0, total = 0, share = 0;
      for (int s = 0; s < sources; ++s) total += rows[t][s];
      for (int s = first; s <= last; ++s) {
        mine += rows[t][s];
        share = std::max(share, rows[t][s] / received[s]);
      }
      gain[t] = mine / total + share - 1.2;  // markup.cpp's kInsideTag
    }
    int best_begin = 0, best_end = 1;
    double best = gain[0];
    for (int b = 0; b < targets; ++b) {
      for (int e = b + 1; e <= targets; ++e) {
        double sum = 0;
        for (int t = b; t < e; ++t) sum += gain[t];
        if (sum > best + 1e-5) best = sum, best_begin = b, best_end = e;
      }
    }
    std::string want;
    for (int t = 0; t < targets; ++t) {
      want += std::string(t > 0 ? " " : "") + (t == best_begin ? "<b>" : "") + "t" +
              std::to_string(t) + (t + 1 == best_end ? "</b>" : "");
    }
    SCOPED_TRACE(line);
    EXPECT_EQ(restored_soft(line, translation, rows), want);
  }
}

TEST(Restore, SelfClosingTagsStandBeforeTheWordAlignedToTheNextSourceWord) {
  EXPECT_EQ(restored("Hello <br/>world", "hola mundo", {{0, 0}, {1, 1}}), "hola <br/>mundo");
  EXPECT_EQ(restored("<x id=\"1\"/>big dog", "perro grande", {{0, 1}, {1, 0}}),
            "perro <x id=\"1\"/>grande");
  EXPECT_EQ(restored("the end<br/>", "el fin", {{0, 0}, {1, 1}}), "el fin<br/>");
}

TEST(Restore, WordsWithoutLinksGiveAnEmptyPairBeforeTheNextAlignedWord) {
  EXPECT_EQ(restored("a <b>b</b> c", "x z", {{0, 0}, {2, 1}}), "x <b></b>z");
  EXPECT_EQ(restored("a <b>b</b>", "x", {{0, 0}}), "x<b></b>");
}

TEST(Restore, TextIsEscapedBackAndUnmarkedLinesComeBackAsTheyAre) {
  EXPECT_EQ(restored("<b>fish &amp; chips</b>", "pescado & <papas>", {{0, 0}, {1, 1}, {2, 2}}),
            "<b>pescado &amp; &lt;papas&gt;</b>");
  EXPECT_EQ(restored("fish &amp; chips", "a & b", {{0, 0}}), "a &amp; b");
  EXPECT_EQ(restored("fish and chips", "a & <b>", {{0, 0}}), "a & <b>");
  EXPECT_EQ(restored("  <i>x</i> ", "  y  ", {{0, 0}}), "  <i>y</i>  ");
}

// Random lines of words with random tags (nested, siblings, self-closing), random translations
// and alignments: the output always parses, holds every tag once, byte for byte, and its text is
// the translation.
TEST(Restore, EveryOutputIsWellFormedWithEveryTagOnceAndReadsAsTheTranslation) {
  std::mt19937 random(7);
  const auto pick = [&](int n) { return static_cast<int>(random() % static_cast<unsigned>(n)); };
  for (int round = 0; round < 500; ++round) {
    std::string line;
    std::vector<std::string> open;
    int opened = 0;
    const int words = 1 + pick(8);
    for (int w = 0; w < words; ++w) {
      if (pick(3) == 0) {
        const std::string name = std::string(1, static_cast<char>('a' + pick(4)));
        line += "<" + name + " n=\"" + std::to_string(opened++) + "\">";
        open.push_back(name);
      }
      if (pick(5) == 0) line += "<x i=\"" + std::to_string(opened++) + "\"/>";
      line += (pick(6) == 0 ? "a&amp;b" : "w" + std::to_string(w));
      while (!open.empty() && pick(2) == 0) {
        line += "</" + open.back() + ">";
        open.pop_back();
      }
      line += " ";
    }
    while (!open.empty()) {
      line += "</" + open.back() + ">";
      open.pop_back();
    }
    const MarkedLine marked = parse(line);
    if (!marked.marked) continue;  // written as the model wrote it: tested above
    const int target_words = 1 + pick(9);
    std::string translation;
    for (int t = 0; t < target_words; ++t) {
      translation += (t > 0 ? " t<&" : "t<&") + std::to_string(t);
    }
    std::vector<WordLink> links;
    for (int s = 0; s < words; ++s) {
      for (int k = pick(3); k > 0; --k) links.push_back({s, pick(target_words)});
    }
    const std::string out = restore(marked, translation, hard(marked.text, translation, links));
    SCOPED_TRACE(line + " → " + out);
    MarkedLine back;
    ASSERT_NO_THROW(back = parse(out));
    EXPECT_EQ(back.text, translation);
    auto in_tags = tag_texts(marked), out_tags = tag_texts(back);
    std::sort(in_tags.begin(), in_tags.end());
    std::sort(out_tags.begin(), out_tags.end());
    EXPECT_EQ(out_tags, in_tags);
  }
}

}  // namespace
}  // namespace tandem::markup
