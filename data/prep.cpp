// prepare_corpus: read and check the split files, train the vocabulary on train, encode every split
// and write the HDF5 corpus (layout in data/corpus.h) through "<out>.tmp" and a rename.
#include "data/prep.h"

#include <cstdio>
#include <fstream>
#include <iomanip>
#include <set>
#include <sstream>
#include <stdexcept>

#include "trainer/common/error.h"
#include "trainer/common/hdf5.h"

namespace tandem::data {
namespace {

constexpr const char* kFormat = "tandem-corpus";
constexpr int64_t kFormatVersion = 1;
constexpr const char* kReasons[] = {"empty", "invalid_utf8", "too_long"};

// CRC-32 as zlib, gzip and Python's zlib.crc32 compute it (reflected polynomial 0xEDB88320), so
// a user can check a recorded input against their file.
class Crc32 {
 public:
  void update(const char* data, size_t size) {
    static const std::vector<uint32_t> table = make_table();
    for (size_t i = 0; i < size; ++i) {
      crc_ = table[(crc_ ^ static_cast<uint8_t>(data[i])) & 0xFFu] ^ (crc_ >> 8);
    }
  }
  uint32_t value() const { return crc_ ^ 0xFFFFFFFFu; }

 private:
  static std::vector<uint32_t> make_table() {
    std::vector<uint32_t> table(256);
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[n] = c;
    }
    return table;
  }
  uint32_t crc_ = 0xFFFFFFFFu;
};

// Lines of one input file, checksumming every byte read (newlines included).
class LineReader {
 public:
  LineReader(const std::string& path, const std::string& role) : in_(path, std::ios::binary) {
    if (!in_) throw_cannot_open(role, path);
  }
  bool next(std::string& line) {
    if (!std::getline(in_, line)) return false;
    crc_.update(line.data(), line.size());
    if (!in_.eof()) crc_.update("\n", 1);                       // getline consumed a newline
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF files
    return true;
  }
  uint32_t checksum() const { return crc_.value(); }

 private:
  std::ifstream in_;
  Crc32 crc_;
};

bool is_blank(const std::string& text) {
  return text.find_first_not_of(" \t\r\v\f") == std::string::npos;
}

// Continuation bytes after a UTF-8 lead byte, or -1 when it cannot start a character.
int utf8_extra_bytes(uint8_t lead) {
  if (lead < 0x80) return 0;
  if ((lead & 0xE0) == 0xC0) return 1;
  if ((lead & 0xF0) == 0xE0) return 2;
  if ((lead & 0xF8) == 0xF0) return 3;
  return -1;
}

// Strict UTF-8: no overlong forms, surrogates or code points past U+10FFFF.
bool is_valid_utf8(const std::string& text) {
  static const uint32_t kMinCodePoint[] = {0, 0x80, 0x800, 0x10000};
  static const uint8_t kLeadMask[] = {0x7F, 0x1F, 0x0F, 0x07};
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<uint8_t>(text[i]);
    const int extra = utf8_extra_bytes(lead);
    if (extra < 0 || i + extra >= text.size()) return false;
    uint32_t code = lead & kLeadMask[extra];
    for (int k = 1; k <= extra; ++k) {
      const auto next = static_cast<uint8_t>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3Fu);
    }
    if (code < kMinCodePoint[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

// Why a raw pair is skipped before any vocabulary exists, or nullptr to keep it.
const char* raw_drop_reason(const std::string& src, const std::string& tgt) {
  if (is_blank(src) || is_blank(tgt)) return "empty";
  if (!is_valid_utf8(src) || !is_valid_utf8(tgt)) return "invalid_utf8";
  return nullptr;
}

// A split's text after the checks that need no vocabulary.
struct SplitText {
  SplitFiles files;
  SplitSummary summary;
  uint32_t src_crc32 = 0;
  uint32_t tgt_crc32 = 0;
  // Kept pairs interleaved (pair i is lines[2i] → lines[2i+1]) so that the train split is
  // already the vocabulary trainer's input, without a second copy of the corpus.
  std::vector<std::string> lines;
};

SplitText read_split(const SplitFiles& files) {
  SplitText split{files, {}, 0, 0, {}};
  split.summary.name = files.name;
  for (const char* reason : kReasons) split.summary.dropped[reason] = 0;
  LineReader src(files.src, files.name + " source");
  LineReader tgt(files.tgt, files.name + " target");
  std::string src_line, tgt_line;
  int64_t src_lines = 0, tgt_lines = 0;
  while (true) {
    const bool has_src = src.next(src_line);
    const bool has_tgt = tgt.next(tgt_line);
    src_lines += has_src;
    tgt_lines += has_tgt;
    if (!has_src || !has_tgt) {
      if (has_src || has_tgt) continue;  // keep counting the longer file for the message
      break;
    }
    if (const char* reason = raw_drop_reason(src_line, tgt_line)) {
      ++split.summary.dropped[reason];
    } else {
      split.lines.push_back(std::move(src_line));
      split.lines.push_back(std::move(tgt_line));
    }
  }
  if (src_lines != tgt_lines) {
    throw std::invalid_argument(files.name + " split: '" + files.src + "' has " +
                                std::to_string(src_lines) + " lines but '" + files.tgt + "' has " +
                                std::to_string(tgt_lines) +
                                "; expected one target line per source line");
  }
  split.summary.lines = src_lines;
  split.src_crc32 = src.checksum();
  split.tgt_crc32 = tgt.checksum();
  return split;
}

// Token arrays of one split in the corpus layout: flat tokens, offsets with n + 1 entries.
struct EncodedSide {
  std::vector<int32_t> tokens;
  std::vector<int64_t> offsets{0};
  void append(const std::vector<int32_t>& ids) {
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    offsets.push_back(static_cast<int64_t>(tokens.size()));
  }
};

// Encodes the kept pairs, dropping those that encode to nothing or to more than max_len tokens.
void encode_split(const Vocab& vocab, int64_t max_len, SplitText& split, EncodedSide& src,
                  EncodedSide& tgt) {
  SplitSummary& summary = split.summary;
  for (size_t i = 0; i + 1 < split.lines.size(); i += 2) {
    const std::vector<int32_t> src_ids = vocab.encode(split.lines[i]);
    const std::vector<int32_t> tgt_ids = vocab.encode(split.lines[i + 1]);
    if (src_ids.empty() || tgt_ids.empty()) {  // e.g. only characters the normalizer removes
      ++summary.dropped["empty"];
    } else if (static_cast<int64_t>(src_ids.size()) > max_len ||
               static_cast<int64_t>(tgt_ids.size()) > max_len) {
      ++summary.dropped["too_long"];
    } else {
      src.append(src_ids);
      tgt.append(tgt_ids);
    }
  }
  summary.kept = static_cast<int64_t>(src.offsets.size()) - 1;
  summary.src_tokens = static_cast<int64_t>(src.tokens.size());
  summary.tgt_tokens = static_cast<int64_t>(tgt.tokens.size());
}

void write_side(hid_t split_group, const std::string& side, const EncodedSide& encoded) {
  h5::Handle group = h5::create_group(split_group, side);
  // Tokens are read a sentence at a time at random places (contiguous); offsets are read whole.
  h5::write_vector(group.get(), "tokens", encoded.tokens, h5::Layout::kContiguous);
  h5::write_vector(group.get(), "offsets", encoded.offsets, h5::Layout::kCompressed);
}

// /<split>/{src,tgt}/{tokens,offsets} and the split's provenance attributes.
void write_split(hid_t file, const SplitText& split, const EncodedSide& src,
                 const EncodedSide& tgt) {
  const SplitSummary& summary = split.summary;
  h5::Handle group = h5::create_group(file, summary.name);
  write_side(group.get(), "src", src);
  write_side(group.get(), "tgt", tgt);
  const hid_t g = group.get();
  h5::write_attribute(g, "src_file", split.files.src);
  h5::write_attribute(g, "tgt_file", split.files.tgt);
  h5::write_attribute(g, "src_crc32", static_cast<int64_t>(split.src_crc32));
  h5::write_attribute(g, "tgt_crc32", static_cast<int64_t>(split.tgt_crc32));
  h5::write_attribute(g, "lines", summary.lines);
  h5::write_attribute(g, "kept", summary.kept);
  for (const auto& [reason, count] : summary.dropped) {
    h5::write_attribute(g, "dropped_" + reason, count);
  }
  h5::write_attribute(g, "src_tokens", summary.src_tokens);
  h5::write_attribute(g, "tgt_tokens", summary.tgt_tokens);
}

void write_root(hid_t file, const Vocab& vocab, const PrepOptions& options) {
  h5::write_bytes(file, "vocab", vocab.bytes());
  h5::write_attribute(file, "format", std::string(kFormat));
  h5::write_attribute(file, "format_version", kFormatVersion);
  h5::write_attribute(file, "vocab_size", vocab.size());
  h5::write_attribute(file, "vocab_model_type", options.vocab.model_type);
  h5::write_attribute(file, "max_len", options.max_len);
  h5::write_attribute(file, "checksum", std::string("crc32 (zlib) of each input file's bytes"));
}

void validate(const PrepOptions& options) {
  std::set<std::string> names;
  for (const SplitFiles& split : options.splits) {
    if (split.name != "train" && split.name != "valid" && split.name != "test") {
      throw std::invalid_argument("split '" + split.name + "': expected train, valid or test");
    }
    if (!names.insert(split.name).second) {
      throw std::invalid_argument("split '" + split.name + "' is given twice");
    }
    if (split.src.empty() || split.tgt.empty()) {
      throw std::invalid_argument("split '" + split.name +
                                  "' needs both a source and a target file");
    }
  }
  if (names.count("train") == 0) throw std::invalid_argument("the train split is required");
  if (options.out.empty()) throw std::invalid_argument("the output corpus path is empty");
  if (options.max_len < 1) {
    throw std::invalid_argument("max_len " + std::to_string(options.max_len) + ": expected >= 1");
  }
}

// Fails before the slow work when `out` cannot be written through `tmp` (missing directory,
// permissions).
void check_writable(const std::string& tmp, const std::string& out) {
  std::FILE* probe = std::fopen(tmp.c_str(), "wb");
  if (probe == nullptr) throw_cannot_open("output", out);
  std::fclose(probe);
  std::remove(tmp.c_str());
}

Vocab train_vocab(const std::vector<SplitText>& splits, const VocabTrainOptions& options) {
  for (const SplitText& split : splits) {
    if (split.files.name != "train") continue;
    if (split.lines.empty()) {
      throw std::invalid_argument("train split ('" + split.files.src + "', '" + split.files.tgt +
                                  "') has no usable sentence pairs");
    }
    return Vocab::train(split.lines, options);
  }
  throw std::invalid_argument("the train split is required");
}

// Encodes and writes every split into the (temporary) file at `path`; returns the summaries.
std::vector<SplitSummary> write_corpus(const std::string& path, const Vocab& vocab,
                                       std::vector<SplitText>& splits, const PrepOptions& options) {
  h5::QuietErrors quiet;
  h5::Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!file.valid()) throw std::invalid_argument("output: cannot create HDF5 file '" + path + "'");
  write_root(file.get(), vocab, options);
  std::vector<SplitSummary> summaries;
  for (SplitText& split : splits) {
    EncodedSide src, tgt;
    encode_split(vocab, options.max_len, split, src, tgt);
    write_split(file.get(), split, src, tgt);
    split.lines = {};  // the text is no longer needed
    summaries.push_back(split.summary);
  }
  h5::check(file.close(), "cannot close '" + path + "'");
  return summaries;
}

}  // namespace

PrepSummary prepare_corpus(const PrepOptions& options) {
  validate(options);
  const std::string tmp = options.out + ".tmp";
  check_writable(tmp, options.out);
  std::vector<SplitText> splits;
  for (const SplitFiles& files : options.splits) splits.push_back(read_split(files));
  const Vocab vocab = train_vocab(splits, options.vocab);

  PrepSummary summary;
  summary.vocab_size = vocab.size();
  try {
    summary.splits = write_corpus(tmp, vocab, splits, options);
    if (std::rename(tmp.c_str(), options.out.c_str()) != 0) {
      throw std::runtime_error("cannot rename '" + tmp + "' to '" + options.out + "'");
    }
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  return summary;
}

std::string PrepSummary::to_string() const {
  std::ostringstream out;
  out << "vocabulary: " << vocab_size << " pieces (pad 0, unk 1, bos 2, eos 3)\n";
  out << std::left << std::setw(8) << "split" << std::right << std::setw(12) << "pairs read"
      << std::setw(12) << "kept";
  for (const char* reason : kReasons) out << std::setw(14) << reason;
  out << std::setw(14) << "src tokens" << std::setw(14) << "tgt tokens"
      << "\n";
  for (const SplitSummary& split : splits) {
    out << std::left << std::setw(8) << split.name << std::right << std::setw(12) << split.lines
        << std::setw(12) << split.kept;
    for (const char* reason : kReasons) {
      const auto it = split.dropped.find(reason);
      out << std::setw(14) << (it == split.dropped.end() ? 0 : it->second);
    }
    out << std::setw(14) << split.src_tokens << std::setw(14) << split.tgt_tokens << "\n";
  }
  out << "(empty, invalid_utf8, too_long: pairs skipped for that reason; tokens exclude BOS/EOS)\n";
  return out.str();
}

}  // namespace tandem::data
