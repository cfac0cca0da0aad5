// Inline markup carried across translation (tandem-decode --markup): a line's XML/HTML tags and
// entities are taken out, the text alone is translated, and the tags are put back by the word
// attention between their words. A paired tag wraps the contiguous run of target words that are
// clearly more the wrapped source words' than not (a word's share of its attention on them plus its
// share of what the one it takes most from receives, past 1.2; nesting kept valid); a self-closing
// tag (or a comment) stands before the translation of the source word that followed it. Each tag
// comes out byte for byte as it came in; text is unescaped for the model and escaped back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/vocab/words.h"

namespace tandem::markup {

// One tag of a line, as it stands in it.
struct Tag {
  enum class Kind { kOpen, kClose, kSelfClosing };
  Kind kind = Kind::kOpen;
  std::string text;      // the tag's bytes, "<a href=\"x\">" (a comment's "<!-- ... -->" too)
  size_t at = 0;         // the byte of the plain text it stands before
  int64_t partner = -1;  // an open tag's close and a close tag's open (an index into tags)
};

// A line with its markup taken out.
struct MarkedLine {
  std::string text;       // the plain text: the text between the tags, entities unescaped
  std::vector<Tag> tags;  // in line order
  bool marked = false;    // it had a tag or an entity: the output is escaped and re-tagged
};

// Reads `line`: tags (<name attributes>, </name>, <name attributes/>, comments <!-- -->; HTML's
// void elements <br>, <img ...> and the like without the slash are self-closing), and the
// entities &amp; &lt; &gt; &quot; &apos; &nbsp; &#N; &#xN;. std::invalid_argument saying what is
// wrong, by the byte it starts at: a tag left open, a close without its open or closing another
// tag (crossing), a '<' that starts no tag, an unknown or unterminated entity.
MarkedLine parse(const std::string& line);

// The translation `translation` (plain text, as the model wrote it) of a MarkedLine's text,
// with `attention` from the words of the translation to those of line.text (both as
// data::split_words counts them), escaped (& < >) and with line's tags put back. Unmarked lines
// come back as they are.
std::string restore(const MarkedLine& line, const std::string& translation,
                    const data::WordAttention& attention);

// & → &amp;, < → &lt;, > → &gt;.
std::string escape(const std::string& text);

}  // namespace tandem::markup
