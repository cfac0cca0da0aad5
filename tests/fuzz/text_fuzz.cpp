// The readers of raw text: tandem-prep's line reader (plain or gzip, told apart by content), the
// lines tandem-decode and tandem-eval read (tools' read_lines) and what they do with them
// (SentencePiece encoding and decoding, the 13a tokenizer, corpus BLEU and chrF). The input is one
// file's bytes; the reader's lines must be the bytes split at newlines, gzip-compressed or not.
#include <zlib.h>

#include <cmath>
#include <string>
#include <vector>

#include "data/prep/text_input.h"
#include "data/vocab/vocab.h"
#include "tests/fuzz/fuzz_files.h"
#include "tests/fuzz/fuzz_target.h"
#include "trainer/bleu/bleu_chrf.h"
#include "trainer/cli/tool_main.h"

namespace tandem::fuzz {

std::vector<std::string> seeds() {
  return {"red green blue\nblue green red\n", "the cat\r\nthe cat sat\r\n\n\nlast line, no newline",
          "\xc3\xa9t\xc3\xa9 \xe2\x80\x94 \"quoted\" &amp; 1,000.5 -- "
          "tokens\n\xe5\x9c\x8b\xe5\xae\xb6\n"};
}

}  // namespace tandem::fuzz

namespace {

using namespace tandem;

// The bytes split at '\n', a final line without one kept, one trailing '\r' of each line dropped.
std::vector<std::string> naive_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
    begin = end + 1;
  }
  return lines;
}

std::vector<std::string> read_all(const std::string& path) {
  data::TextReader reader({path}, "fuzz text");
  std::vector<std::string> lines;
  for (std::string line; reader.next(line);) lines.push_back(line);
  if (reader.lines() != static_cast<int64_t>(lines.size())) fuzz::fail("TextReader miscounts");
  return lines;
}

std::string gzipped(const std::string& text) {
  const std::string path = fuzz::scratch_dir() + "/text.gz";
  gzFile out = gzopen(path.c_str(), "wb");
  if (out == nullptr) fuzz::fail("cannot write " + path);
  if (!text.empty()) gzwrite(out, text.data(), static_cast<unsigned>(text.size()));
  gzclose(out);
  return path;
}

void check_scores(const std::vector<std::string>& lines) {
  std::vector<std::string> hyps, refs;
  for (size_t i = 0; i + 1 < lines.size(); i += 2) {
    hyps.push_back(lines[i]);
    refs.push_back(lines[i + 1]);
  }
  const eval::BleuScore bleu = eval::corpus_bleu(hyps, refs);
  // sacreBLEU's own arithmetic, exp(mean(log(precision %))), gives 100.00000000000004 for a
  // perfect match, and Tandem's is the same.
  if (!(bleu.score >= 0 && bleu.score <= 100 + 1e-9))
    fuzz::fail("BLEU outside [0, 100]: " + bleu.to_string());
  const double chrf = eval::corpus_chrf(hyps, refs);
  if (!(chrf >= 0 && chrf <= 100)) fuzz::fail("chrF outside [0, 100]: " + std::to_string(chrf));
  const eval::BleuScore self = eval::corpus_bleu(refs, refs);
  if (self.hyp_length != self.ref_length) fuzz::fail("BLEU of a text with itself: lengths differ");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const bool looks_gzipped = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  const std::string path = fuzz::write_scratch("text", text);
  const std::vector<std::string> expected = naive_lines(text);
  // As tandem-prep reads it: a plain file's lines are its bytes' lines; a gzip one (by its first
  // two bytes) is decompressed or refused.
  fuzz::refused_or_read([&] {
    if (read_all(path) != expected && !looks_gzipped) fuzz::fail("TextReader's lines differ");
  });
  // The same text gzip-compressed reads as the same lines.
  if (read_all(gzipped(text)) != expected) {
    fuzz::fail("TextReader's lines of the gzip-compressed text differ");
  }
  // As tandem-decode and tandem-eval read it, and what they do with each line.
  const std::vector<std::string> lines = cli::read_lines(path, "--input");
  if (lines.size() != expected.size()) fuzz::fail("read_lines' line count differs");
  const data::Vocab& vocab = fuzz::base_vocab();
  for (const std::string& line : lines) {
    for (const auto side : {data::Side::kSource, data::Side::kTarget}) {
      const auto ids = vocab.encode(line, side);
      for (const int32_t id : ids) {
        if (id < 0 || id >= vocab.size()) fuzz::fail("encode gave an id outside the vocabulary");
      }
      vocab.decode(ids, side);
    }
    eval::tokenize_13a(line);
  }
  check_scores(lines);
  return 0;
}
