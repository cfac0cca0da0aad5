// prepare_corpus: check that every input opens, sample the train split and train the vocabulary on
// the sample (data/vocab_sample.h), then stream every split (data/pair_reader.h) through the
// encoder into the HDF5 corpus (layout in data/corpus.h), written as "<out>.tmp" and renamed.
#include "data/prep.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <future>
#include <iomanip>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "data/pair_reader.h"
#include "data/text_input.h"
#include "data/vocab_sample.h"
#include "trainer/common/error.h"
#include "trainer/common/hdf5.h"

namespace tandem::data {
namespace {

constexpr const char* kFormat = "tandem-corpus";
constexpr int64_t kFormatVersion = 1;
constexpr int64_t kCorporaFormatVersion = 2;  // a file of several corpora (/corpora)
constexpr size_t kSpillBlock = size_t{1} << 20;  // elements copied from a spill per HDF5 write
                                                 // (16 compressed chunks)
constexpr size_t kShownSkips = 5;                // skipped pairs whose position is reported

// One corpus's part of a split, as written: its files, the label its messages use, and the tag
// its source sentences start with (-1: none).
struct SplitPart {
  const SplitFiles* files;
  std::string label;
  int32_t tag = -1;
};

// What encoding decided for a slice of a chunk of pairs: a verdict per pair, and the kept pairs'
// tokens (flat) and lengths.
struct EncodedSlice {
  std::vector<Verdict> verdicts;
  std::vector<int32_t> src_tokens, tgt_tokens;
  std::vector<int64_t> src_lengths, tgt_lengths;
};

// A pair's source gets `tag` (>= 0) as its first token; max_len counts it.
void encode_slice(const Vocab& vocab, int64_t max_len, int32_t tag, const RawPair* pairs,
                  size_t count, EncodedSlice& out) {
  for (size_t i = 0; i < count; ++i) {
    Verdict verdict = raw_verdict(pairs[i].src, pairs[i].tgt);
    if (verdict == kKept) {
      std::vector<int32_t> src = vocab.encode(pairs[i].src, Side::kSource);
      const std::vector<int32_t> tgt = vocab.encode(pairs[i].tgt, Side::kTarget);
      if (tag >= 0 && !src.empty()) src.insert(src.begin(), tag);
      const auto longest = static_cast<int64_t>(std::max(src.size(), tgt.size()));
      if (src.empty() || tgt.empty()) {  // e.g. only characters the normalizer removes
        verdict = kEmpty;
      } else if (longest > max_len) {
        verdict = kTooLong;
      } else {
        out.src_tokens.insert(out.src_tokens.end(), src.begin(), src.end());
        out.tgt_tokens.insert(out.tgt_tokens.end(), tgt.begin(), tgt.end());
        out.src_lengths.push_back(static_cast<int64_t>(src.size()));
        out.tgt_lengths.push_back(static_cast<int64_t>(tgt.size()));
      }
    }
    out.verdicts.push_back(verdict);
  }
}

// Encodes `count` pairs on up to `threads` threads, each a contiguous slice (the calling thread
// takes the first): the slices in order are the same whatever the thread count.
std::vector<EncodedSlice> encode_chunk(const Vocab& vocab, int64_t max_len, int32_t tag,
                                       const RawPair* pairs, size_t count, int threads) {
  const size_t slices = std::max<size_t>(1, std::min<size_t>(threads, count));
  std::vector<EncodedSlice> encoded(slices);
  std::vector<std::exception_ptr> errors(slices);
  const auto run = [&](size_t k) {
    try {
      const size_t begin = count * k / slices;
      const size_t end = count * (k + 1) / slices;
      encode_slice(vocab, max_len, tag, pairs + begin, end - begin, encoded[k]);
    } catch (...) {
      errors[k] = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  for (size_t k = 1; k < slices; ++k) workers.emplace_back(run, k);
  run(0);
  for (std::thread& worker : workers) worker.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return encoded;
}

// Values of type T appended to an anonymous temporary file beside the output (the name is
// unlinked at once, so nothing is left behind even by a crash), then copied into a dataset a block
// at a time: arrays larger than memory on their way into the corpus file.
template <class T>
class Spill {
 public:
  explicit Spill(const std::string& beside) : what_("temporary file beside '" + beside + "'") {
    std::string name = beside + ".spill-XXXXXX";
    const int fd = mkstemp(name.data());
    if (fd < 0) throw_cannot_open("output", name);
    ::unlink(name.c_str());
    file_ = fdopen(fd, "w+b");
    if (file_ == nullptr) {
      ::close(fd);
      fail("open");
    }
  }
  Spill(const Spill&) = delete;
  Spill& operator=(const Spill&) = delete;
  ~Spill() { std::fclose(file_); }

  void append(const T* values, size_t count) {
    if (count > 0 && std::fwrite(values, sizeof(T), count, file_) != count) fail("write");
    count_ += count;
  }
  uint64_t count() const { return count_; }

  // Writes everything appended to `dataset` (count() elements of mem_type, which is T).
  void copy_to(hid_t dataset, hid_t mem_type) {
    if (std::fflush(file_) != 0 || std::fseek(file_, 0, SEEK_SET) != 0) fail("rewind");
    std::vector<T> block(kSpillBlock);
    for (uint64_t begin = 0; begin < count_; begin += block.size()) {
      const size_t count = std::min<uint64_t>(block.size(), count_ - begin);
      if (std::fread(block.data(), sizeof(T), count, file_) != count) fail("read");
      h5::write_range(dataset, mem_type, begin, count, block.data());
    }
  }

 private:
  [[noreturn]] void fail(const char* action) const {
    const int err = errno;
    throw std::runtime_error("cannot " + std::string(action) + " the " + what_ + " (" +
                             (err != 0 ? std::strerror(err) : "unknown reason") + ")");
  }

  std::string what_;
  std::FILE* file_ = nullptr;
  uint64_t count_ = 0;
};

// One side of a split on its way to /<split>/<side>/{tokens,offsets}.
class SpilledSide {
 public:
  explicit SpilledSide(const std::string& beside) : tokens_(beside), offsets_(beside) {
    offsets_.append(&end_, 1);
  }
  void append(const std::vector<int32_t>& tokens, const std::vector<int64_t>& lengths) {
    tokens_.append(tokens.data(), tokens.size());
    std::vector<int64_t> offsets(lengths.size());
    for (size_t i = 0; i < lengths.size(); ++i) offsets[i] = end_ += lengths[i];
    offsets_.append(offsets.data(), offsets.size());
  }
  int64_t tokens() const { return end_; }
  int64_t sentences() const { return static_cast<int64_t>(offsets_.count()) - 1; }

  void write(hid_t split_group, const std::string& side) {
    h5::Handle group = h5::create_group(split_group, side);
    // Tokens are read a sentence at a time at random places (contiguous); offsets are read whole.
    h5::Handle tokens = h5::create_dataset(group.get(), "tokens", H5T_STD_I32LE, tokens_.count(),
                                           h5::Layout::kContiguous);
    tokens_.copy_to(tokens.get(), H5T_NATIVE_INT32);
    h5::Handle offsets = h5::create_dataset(group.get(), "offsets", H5T_STD_I64LE, offsets_.count(),
                                            h5::Layout::kCompressed);
    offsets_.copy_to(offsets.get(), H5T_NATIVE_INT64);
  }

 private:
  Spill<int32_t> tokens_;
  Spill<int64_t> offsets_;
  int64_t end_ = 0;
};

void count_skip(SplitSummary& summary, Verdict verdict, const PairReader& reader, int64_t index) {
  ++summary.dropped[kSkipReasons[verdict]];
  if (summary.first_skipped.size() < kShownSkips) {
    summary.first_skipped.push_back(reader.position_of(index) + ": " + kSkipReasons[verdict]);
  }
}

// A split's figures as attributes of its group.
void write_counts(hid_t group, const SplitSummary& summary) {
  h5::write_attribute(group, "lines", summary.lines);
  h5::write_attribute(group, "kept", summary.kept);
  for (const auto& [reason, count] : summary.dropped) {
    h5::write_attribute(group, "dropped_" + reason, count);
  }
  h5::write_attribute(group, "src_tokens", summary.src_tokens);
  h5::write_attribute(group, "tgt_tokens", summary.tgt_tokens);
}

// Where a split's text came from (file names and CRC-32s), and its figures.
void write_provenance(hid_t group, const SplitFiles& files, const PairReader& reader,
                      const SplitSummary& summary) {
  h5::write_attribute(group, "src_file", join_paths(files.src));
  h5::write_attribute(group, "tgt_file", join_paths(files.tgt));
  h5::write_attribute(group, "src_crc32", static_cast<int64_t>(reader.src_checksum()));
  h5::write_attribute(group, "tgt_crc32", static_cast<int64_t>(reader.tgt_checksum()));
  write_counts(group, summary);
}

SplitSummary empty_summary(const std::string& name) {
  SplitSummary summary;
  summary.name = name;
  for (const char* reason : kSkipReasons) summary.dropped[reason] = 0;
  return summary;
}

// Pass 2 over one corpus's part of a split: pairs read a chunk at a time, encoded on `threads`
// threads, the kept ones' tokens appended to `src` and `tgt` in order.
SplitSummary encode_part(const SplitPart& part, const Vocab& vocab, const PrepOptions& options,
                         int threads, SpilledSide& src, SpilledSide& tgt,
                         std::unique_ptr<PairReader>& reader_out) {
  SplitSummary summary = empty_summary(part.files->name);
  const int64_t sentences_before = src.sentences();
  const int64_t src_before = src.tokens(), tgt_before = tgt.tokens();
  reader_out = std::make_unique<PairReader>(*part.files, part.label);
  PairReader& reader = *reader_out;
  const auto fill = [&reader](std::vector<RawPair>& chunk) {
    size_t count = 0;
    while (count < chunk.size() && reader.next(chunk[count].src, chunk[count].tgt)) ++count;
    return count;
  };
  // Chunk k+1 is read on a thread of its own while chunk k is encoded; the reader is idle while
  // chunk k's skips are located in it.
  std::vector<RawPair> chunk(options.chunk_pairs), ahead(options.chunk_pairs);
  size_t count = fill(chunk);
  for (int64_t first = 0; count > 0; first += options.chunk_pairs) {
    std::future<size_t> next;
    if (count == chunk.size()) next = std::async(std::launch::async, fill, std::ref(ahead));
    const std::vector<EncodedSlice> slices =
        encode_chunk(vocab, options.max_len, part.tag, chunk.data(), count, threads);
    const size_t next_count = next.valid() ? next.get() : 0;
    int64_t index = first;
    for (const EncodedSlice& slice : slices) {
      for (const Verdict verdict : slice.verdicts) {
        if (verdict != kKept) count_skip(summary, verdict, reader, index);
        ++index;
      }
      src.append(slice.src_tokens, slice.src_lengths);
      tgt.append(slice.tgt_tokens, slice.tgt_lengths);
    }
    chunk.swap(ahead);
    count = next_count;
  }
  summary.lines = reader.pairs();
  summary.kept = src.sentences() - sentences_before;
  summary.src_tokens = src.tokens() - src_before;
  summary.tgt_tokens = tgt.tokens() - tgt_before;
  return summary;
}

// A split of every corpus that has it, one after another: /<split>/{src,tgt}, and the split's
// provenance: on /<split> for a file of one corpus; else each corpus's in
// /corpora/<name>/<split> (its first pair and pair count there too), and the totals on /<split>.
// `corpus_groups[k]` is part k's /corpora/<name>, or -1 for a file of one corpus. Returns the
// totals, and each part's summary in `parts_out`.
SplitSummary write_split(hid_t file, const std::string& name, const std::vector<SplitPart>& parts,
                         const std::vector<hid_t>& corpus_groups, const Vocab& vocab,
                         const PrepOptions& options, int threads,
                         std::vector<SplitSummary>& parts_out) {
  SplitSummary total = empty_summary(name);
  SpilledSide src(options.out), tgt(options.out);
  for (size_t k = 0; k < parts.size(); ++k) {
    const int64_t first = src.sentences();
    std::unique_ptr<PairReader> reader;
    SplitSummary part = encode_part(parts[k], vocab, options, threads, src, tgt, reader);
    total.lines += part.lines;
    total.kept += part.kept;
    total.src_tokens += part.src_tokens;
    total.tgt_tokens += part.tgt_tokens;
    for (const auto& [reason, count] : part.dropped) total.dropped[reason] += count;
    for (const std::string& skipped : part.first_skipped) {
      if (total.first_skipped.size() < kShownSkips) total.first_skipped.push_back(skipped);
    }
    if (corpus_groups[k] >= 0) {
      h5::Handle group = h5::create_group(corpus_groups[k], name);
      h5::write_attribute(group.get(), "first", first);
      h5::write_attribute(group.get(), "count", part.kept);
      write_provenance(group.get(), *parts[k].files, *reader, part);
    } else {
      h5::Handle group = h5::create_group(file, name);
      src.write(group.get(), "src");
      tgt.write(group.get(), "tgt");
      write_provenance(group.get(), *parts[k].files, *reader, part);
      parts_out.push_back(part);
      return part;
    }
    parts_out.push_back(std::move(part));
  }
  h5::Handle group = h5::create_group(file, name);
  src.write(group.get(), "src");
  tgt.write(group.get(), "tgt");
  write_counts(group.get(), total);
  return total;
}

void write_root(hid_t file, const Vocab& vocab, const PrepOptions& options) {
  h5::write_bytes(file, "vocab", vocab.bytes());
  h5::write_attribute(file, "format", std::string(kFormat));
  h5::write_attribute(file, "format_version",
                      options.corpora.empty() ? kFormatVersion : kCorporaFormatVersion);
  h5::write_attribute(file, "vocab_size", vocab.size());
  if (options.vocab_bytes.empty()) {
    h5::write_attribute(file, "vocab_model_type", options.vocab.model_type);
    h5::write_attribute(file, "vocab_sample", options.vocab.input_sentence_size);
    h5::write_attribute(file, "vocab_seed", static_cast<int64_t>(options.vocab.seed));
  } else {
    h5::write_attribute(file, "vocab_from", options.vocab_from);
  }
  h5::write_attribute(file, "max_len", options.max_len);
  h5::write_attribute(file, "checksum",
                      std::string("crc32 (zlib) of each side's text: decompressed, its files "
                                  "concatenated in order (a single plain file: its bytes)"));
}

// Whether `text` is made of letters, digits and the characters of `extra` only (and not empty).
bool is_word(const std::string& text, const std::string& extra) {
  if (text.empty()) return false;
  for (const char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && extra.find(c) == std::string::npos) {
      return false;
    }
  }
  return true;
}

// One corpus's splits; `prefix` starts each message ("" or "corpus 'en-es': ").
void validate_splits(const std::vector<SplitFiles>& splits, const std::string& prefix) {
  std::set<std::string> names;
  for (const SplitFiles& split : splits) {
    const std::string what = prefix + "split '" + split.name + "'";
    if (split.name != "train" && split.name != "valid" && split.name != "test") {
      throw std::invalid_argument(what + ": expected train, valid or test");
    }
    if (!names.insert(split.name).second) throw std::invalid_argument(what + " is given twice");
    if (split.src.empty() || split.tgt.empty()) {
      throw std::invalid_argument(what + " needs both a source and a target file");
    }
    for (const auto* side : {&split.src, &split.tgt}) {
      for (const std::string& path : *side) {
        if (path.empty()) throw std::invalid_argument(what + ": empty file name");
      }
    }
  }
  if (names.count("train") == 0)
    throw std::invalid_argument(prefix + "the train split is required");
}

void validate(const PrepOptions& options) {
  if (options.splits.empty() == options.corpora.empty()) {
    throw std::invalid_argument(options.corpora.empty()
                                    ? "the train split is required"
                                    : "give either one corpus's splits or several corpora");
  }
  if (!options.splits.empty()) validate_splits(options.splits, "");
  std::set<std::string> names;
  for (const CorpusFiles& corpus : options.corpora) {
    if (!is_word(corpus.name, "._-")) {
      throw std::invalid_argument("corpus name '" + corpus.name +
                                  "': expected letters, digits, '.', '_' or '-'");
    }
    if (!names.insert(corpus.name).second) {
      throw std::invalid_argument("corpus '" + corpus.name + "' is given twice");
    }
    for (const auto& [key, language] :
         {std::pair{"src_lang", corpus.src_lang}, std::pair{"tgt_lang", corpus.tgt_lang}}) {
      if (!is_word(language, "_-")) {
        throw std::invalid_argument("corpus '" + corpus.name + "': " + key + " '" + language +
                                    "': expected a language code (letters, digits, '_', '-')");
      }
    }
    validate_splits(corpus.splits, "corpus '" + corpus.name + "': ");
  }
  if (options.out.empty()) throw std::invalid_argument("the output corpus path is empty");
  if (options.max_len < 1) {
    throw std::invalid_argument("max_len " + std::to_string(options.max_len) + ": expected >= 1");
  }
  if (options.chunk_pairs < 1) {
    throw std::invalid_argument("chunk_pairs " + std::to_string(options.chunk_pairs) +
                                ": expected >= 1");
  }
  if (options.threads < 0) {
    throw std::invalid_argument("threads " + std::to_string(options.threads) +
                                ": expected >= 1, or 0 for one per core");
  }
  if (options.vocab.input_sentence_size < 0) {
    throw std::invalid_argument("vocabulary sample " +
                                std::to_string(options.vocab.input_sentence_size) +
                                ": expected >= 1 sentences, or 0 for all");
  }
}

// The corpora to write: options.corpora, or the one corpus of options.splits (no name).
std::vector<CorpusFiles> corpora_of(const PrepOptions& options) {
  if (!options.corpora.empty()) return options.corpora;
  return {CorpusFiles{"", "", "", options.splits}};
}

// ">>es<<" for each target language, in order of appearance, when there are several; none
// otherwise (one target language needs no tag).
std::vector<std::string> language_tags(const std::vector<CorpusFiles>& corpora) {
  std::vector<std::string> tags;
  for (const CorpusFiles& corpus : corpora) {
    const std::string tag = ">>" + corpus.tgt_lang + "<<";
    if (std::find(tags.begin(), tags.end(), tag) == tags.end()) tags.push_back(tag);
  }
  if (tags.size() < 2) tags.clear();
  return tags;
}

// Fails before the slow work when `out` cannot be written through `tmp` (missing directory,
// permissions).
void check_writable(const std::string& tmp, const std::string& out) {
  std::FILE* probe = std::fopen(tmp.c_str(), "wb");
  if (probe == nullptr) throw_cannot_open("output", out);
  std::fclose(probe);
  std::remove(tmp.c_str());
}

// Encodes and writes every split into the (temporary) file at `path`: the splits in the order
// given for one corpus; train, valid, test for several, each over the corpora that have it.
void write_corpus(const std::string& path, const Vocab& vocab, const PrepOptions& options,
                  const std::vector<CorpusFiles>& corpora, const std::vector<std::string>& tags,
                  PrepSummary& summary) {
  h5::QuietErrors quiet;
  h5::Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!file.valid()) throw std::invalid_argument("output: cannot create HDF5 file '" + path + "'");
  write_root(file.get(), vocab, options);
  const int threads = options.threads > 0
                          ? options.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const bool several = !options.corpora.empty();
  std::vector<h5::Handle> groups;  // /corpora/<name>, with several
  if (several) {
    h5::Handle all = h5::create_group(file.get(), "corpora", h5::LinkOrder::kCreation);
    for (const CorpusFiles& corpus : corpora) {
      groups.push_back(h5::create_group(all.get(), corpus.name));
      h5::write_attribute(groups.back().get(), "src_lang", corpus.src_lang);
      h5::write_attribute(groups.back().get(), "tgt_lang", corpus.tgt_lang);
      h5::write_attribute(groups.back().get(), "tag",
                          tags.empty() ? std::string() : ">>" + corpus.tgt_lang + "<<");
    }
    for (const CorpusFiles& corpus : corpora) summary.corpora.push_back({corpus.name, {}});
  }
  std::vector<std::string> names;
  for (const SplitFiles& files : corpora.front().splits) names.push_back(files.name);
  if (several) names = {"train", "valid", "test"};
  for (const std::string& name : names) {
    std::vector<SplitPart> parts;
    std::vector<hid_t> part_groups;
    std::vector<size_t> part_corpus;
    for (size_t k = 0; k < corpora.size(); ++k) {
      const SplitFiles* files = find_split(corpora[k], name);
      if (files == nullptr) continue;
      const int32_t tag = tags.empty() ? -1 : vocab.tag_id(">>" + corpora[k].tgt_lang + "<<");
      parts.push_back({files, label_of(corpora[k], name), tag});
      part_groups.push_back(several ? groups[k].get() : -1);
      part_corpus.push_back(k);
    }
    if (parts.empty()) continue;
    std::vector<SplitSummary> part_summaries;
    summary.splits.push_back(
        write_split(file.get(), name, parts, part_groups, vocab, options, threads, part_summaries));
    if (several) {
      for (size_t j = 0; j < parts.size(); ++j) {
        summary.corpora[part_corpus[j]].second.push_back(part_summaries[j]);
      }
    }
  }
  groups.clear();
  h5::check(file.close(), "cannot close '" + path + "'");
}

// The vocabulary: trained on a sample of the train split (balanced across languages for several
// corpora) with the tags as pieces of their own, or the one given, which must have the tags.
Vocab make_vocab(const PrepOptions& options, const std::vector<CorpusFiles>& corpora,
                 const std::vector<std::string>& tags) {
  if (!options.vocab_bytes.empty()) {
    Vocab vocab = Vocab::from_bytes(options.vocab_bytes);
    for (const std::string& tag : tags) {
      if (vocab.tag_id(tag) < 0) {
        throw std::invalid_argument("the vocabulary of '" + options.vocab_from +
                                    "' has no piece '" + tag +
                                    "' for the corpora's target language");
      }
    }
    return vocab;
  }
  VocabTrainOptions train = options.vocab;
  train.user_symbols = tags;
  if (options.corpora.empty()) {
    return Vocab::train(sample_sentences(*find_split(corpora.front(), "train"), train), train);
  }
  return Vocab::train(sample_by_language(corpora, train), train);
}

}  // namespace

PrepSummary prepare_corpus(const PrepOptions& options) {
  validate(options);
  const std::string tmp = options.out + ".tmp";
  check_writable(tmp, options.out);
  const std::vector<CorpusFiles> corpora = corpora_of(options);
  for (const CorpusFiles& corpus : corpora) {
    for (const SplitFiles& files : corpus.splits) {
      PairReader check_readable(files, label_of(corpus, files.name));
    }
  }
  const std::vector<std::string> tags = language_tags(corpora);
  const Vocab vocab = make_vocab(options, corpora, tags);

  PrepSummary summary;
  summary.vocab_size = vocab.size();
  for (const std::string& tag : tags) summary.tags.emplace_back(tag, vocab.tag_id(tag));
  try {
    write_corpus(tmp, vocab, options, corpora, tags, summary);
    if (std::rename(tmp.c_str(), options.out.c_str()) != 0) {
      throw std::runtime_error("cannot rename '" + tmp + "' to '" + options.out + "'");
    }
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  return summary;
}

namespace {

void print_header(std::ostream& out, int width) {
  out << std::left << std::setw(width) << "split" << std::right << std::setw(12) << "pairs read"
      << std::setw(12) << "kept";
  for (const char* reason : kSkipReasons) out << std::setw(14) << reason;
  out << std::setw(14) << "src tokens" << std::setw(14) << "tgt tokens"
      << "\n";
}

void print_row(std::ostream& out, int width, const std::string& name, const SplitSummary& split) {
  out << std::left << std::setw(width) << name << std::right << std::setw(12) << split.lines
      << std::setw(12) << split.kept;
  for (const char* reason : kSkipReasons) {
    const auto it = split.dropped.find(reason);
    out << std::setw(14) << (it == split.dropped.end() ? 0 : it->second);
  }
  out << std::setw(14) << split.src_tokens << std::setw(14) << split.tgt_tokens << "\n";
}

}  // namespace

std::string PrepSummary::to_string() const {
  std::ostringstream out;
  out << "vocabulary: " << vocab_size << " pieces (pad 0, unk 1, bos 2, eos 3";
  for (const auto& [tag, id] : tags) out << ", " << tag << " " << id;
  out << ")\n";
  // With several corpora, each corpus's rows ("en-es train") before the totals ("all train").
  size_t width = 8;
  for (const auto& [name, splits] : corpora) width = std::max(width, name.size() + 7);
  print_header(out, static_cast<int>(width));
  for (const auto& [name, splits] : corpora) {
    for (const SplitSummary& split : splits) {
      print_row(out, static_cast<int>(width), name + " " + split.name, split);
    }
  }
  for (const SplitSummary& split : splits) {
    print_row(out, static_cast<int>(width), (corpora.empty() ? "" : "all ") + split.name, split);
  }
  out << "(empty, invalid_utf8, too_long: pairs skipped for that reason; tokens exclude BOS/EOS)\n";
  return out.str();
}

}  // namespace tandem::data
