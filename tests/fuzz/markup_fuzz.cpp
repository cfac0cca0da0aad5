// tandem-decode --markup's reader of a line: markup::parse either refuses it (std::invalid_argument)
// or takes its tags out; then markup::restore puts them into a translation (the line's own text,
// its words linked in a pattern drawn from the input's bytes). The output must parse back, hold
// every tag once and byte for byte, and read as the translation.
#include <algorithm>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_target.h"
#include "trainer/markup/markup.h"

namespace tandem::fuzz {

std::vector<std::string> seeds() {
  return {"Click <a href=\"x>y\">here</a> &amp; <b>now</b><br/> &#233;",
          "<p>the <b>big <i>red</i></b> dog<x id=\"1\"/></p> <!-- note -->",
          "plain text, no markup > at all", "<g id=\"1\">un<b>believ</b>able</g> &#x41;&nbsp;"};
}

}  // namespace tandem::fuzz

namespace {

using namespace tandem;

std::vector<std::string> tag_texts(const markup::MarkedLine& line) {
  std::vector<std::string> texts;
  for (const auto& tag : line.tags) texts.push_back(tag.text);
  std::sort(texts.begin(), texts.end());
  return texts;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  if (line.find('\n') != std::string::npos) return 0;  // one line at a time
  markup::MarkedLine marked;
  try {
    marked = markup::parse(line);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  if (!marked.marked) return 0;
  // The translation: the text itself, reversed word order links drawn from the bytes.
  const auto words = data::split_words(marked.text);
  std::vector<data::WordLink> links;
  for (size_t w = 0; w < words.size(); ++w) {
    const auto target = static_cast<int32_t>((w * 7 + (size > 0 ? data[w % size] : 0)) %
                                             words.size());
    links.push_back({static_cast<int32_t>(w), target});
  }
  const auto count = static_cast<int64_t>(words.size());
  const std::string out =
      markup::restore(marked, marked.text, data::links_as_attention(links, count, count));
  markup::MarkedLine back;
  try {
    back = markup::parse(out);
  } catch (const std::invalid_argument& e) {
    fuzz::fail(std::string("restore wrote a line that does not parse: ") + e.what() + ": " + out);
  }
  if (back.text != marked.text) fuzz::fail("restore changed the text: " + out);
  if (tag_texts(back) != tag_texts(marked)) fuzz::fail("restore lost or changed a tag: " + out);
  return 0;
}
