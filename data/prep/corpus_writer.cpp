// write_corpus: pass 2 of tandem-prep. Each split of every corpus that has it is read a chunk at a
// time, encoded on several threads, spilled to temporary files and copied into its datasets, with
// its provenance and figures as attributes (layout: corpus_format.h).
#include "data/prep/corpus_writer.h"

#include <algorithm>
#include <functional>
#include <future>
#include <memory>
#include <thread>

#include "data/corpus/corpus_format.h"
#include "data/corpus/direction.h"
#include "data/prep/pair_encoder.h"
#include "data/prep/pair_reader.h"
#include "data/prep/spill.h"
#include "data/prep/text_input.h"
#include "trainer/hdf5/hdf5.h"

namespace tandem::data {
namespace {

namespace format = corpus_format;
constexpr size_t kShownSkips = 5;  // skipped pairs whose position is reported

// One corpus's part of a split, as written: its files, the label its messages use, and its
// sentences' language marks.
struct SplitPart {
  const SplitFiles* files;
  std::string label;
  LanguageMarks marks;
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
  if (reader.aligned()) {
    h5::write_attribute(group, "align_file", join_paths(files.align));
    h5::write_attribute(group, "align_crc32", static_cast<int64_t>(reader.align_checksum()));
  }
  write_counts(group, summary);
}

// Adds a part's alignment figures to `total`'s (-1: none yet).
void add_alignment_counts(SplitSummary& total, const SplitSummary& part) {
  if (part.aligned < 0) return;
  total.aligned = std::max<int64_t>(total.aligned, 0) + part.aligned;
  total.links = std::max<int64_t>(total.links, 0) + part.links;
}

[[noreturn]] void throw_bad_alignment(const PairReader& reader, const std::string& label,
                                      int64_t index, const std::string& error) {
  throw std::invalid_argument(reader.align_position_of(index) + " (" + label +
                              " alignments): " + error);
}

// The alignment figures of a slice's kept pairs.
void count_links(SplitSummary& summary, const EncodedSlice& slice) {
  for (const int64_t values : slice.link_lengths) {
    summary.aligned += values > 0 ? 1 : 0;
    summary.links += values / 2;
  }
}

SplitSummary empty_summary(const std::string& name) {
  SplitSummary summary;
  summary.name = name;
  for (const char* reason : kSkipReasons) summary.dropped[reason] = 0;
  return summary;
}

// The spills of a split: its sides, and its alignments' links from the first part given some on
// (the pairs before it then get none); without alignments nothing goes to `align`.
struct SplitSpills {
  SpilledSide src, tgt, align;
  bool aligned = false;
  explicit SplitSpills(const std::string& beside) : src(beside), tgt(beside), align(beside) {}

  void start_links() {
    if (!aligned) align.append_empty(src.sentences());
    aligned = true;
  }
};

// Pass 2 over one corpus's part of a split: pairs read a chunk at a time, encoded on `threads`
// threads, the kept ones' tokens (and links) appended to the spills in order.
SplitSummary encode_part(const SplitPart& part, const Vocab& vocab, const PrepOptions& options,
                         int threads, SplitSpills& spills,
                         std::unique_ptr<PairReader>& reader_out) {
  SpilledSide& src = spills.src;
  SpilledSide& tgt = spills.tgt;
  SplitSummary summary = empty_summary(part.files->name);
  if (!part.files->align.empty()) {
    summary.aligned = summary.links = 0;
    spills.start_links();
  }
  const int64_t sentences_before = src.sentences();
  const int64_t src_before = src.tokens(), tgt_before = tgt.tokens();
  reader_out = std::make_unique<PairReader>(*part.files, part.label);
  PairReader& reader = *reader_out;
  const auto fill = [&reader](std::vector<RawPair>& chunk) {
    size_t count = 0;
    while (count < chunk.size() && reader.next(chunk[count])) ++count;
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
        encode_chunk(vocab, options.max_len, part.marks, chunk.data(), count, threads);
    const size_t next_count = next.valid() ? next.get() : 0;
    int64_t index = first;
    for (const EncodedSlice& slice : slices) {
      if (slice.bad_alignment >= 0) {
        throw_bad_alignment(reader, part.label, index + slice.bad_alignment, slice.alignment_error);
      }
      for (const Verdict verdict : slice.verdicts) {
        if (verdict != kKept) count_skip(summary, verdict, reader, index);
        ++index;
      }
      src.append(slice.src_tokens, slice.src_lengths);
      tgt.append(slice.tgt_tokens, slice.tgt_lengths);
      if (spills.aligned) spills.align.append(slice.links, slice.link_lengths);
      if (summary.aligned >= 0) count_links(summary, slice);
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

// Adds a part's figures to the split's totals.
void add_part(SplitSummary& total, const SplitSummary& part) {
  total.lines += part.lines;
  total.kept += part.kept;
  total.src_tokens += part.src_tokens;
  total.tgt_tokens += part.tgt_tokens;
  for (const auto& [reason, count] : part.dropped) total.dropped[reason] += count;
  for (const std::string& skipped : part.first_skipped) {
    if (total.first_skipped.size() < kShownSkips) total.first_skipped.push_back(skipped);
  }
  add_alignment_counts(total, part);
}

// /<split> with its sides, and its alignments when any part was given some (with their figures).
h5::Handle write_split_group(hid_t file, const std::string& name, SplitSpills& spills,
                             const SplitSummary& total) {
  h5::Handle group = h5::create_group(file, name);
  spills.src.write(group.get(), format::kSource);
  spills.tgt.write(group.get(), format::kTarget);
  if (spills.aligned) {
    spills.align.write(group.get(), format::kAlignment, format::kLinks);
    h5::Handle align = h5::open_group(group.get(), format::kAlignment);
    h5::write_attribute(align.get(), "aligned_pairs", total.aligned);
    h5::write_attribute(align.get(), "links", total.links);
  }
  return group;
}

// A split of every corpus that has it, one after another: /<split>/{src,tgt} (and align), and the
// split's provenance: on /<split> for a file of one corpus; else each corpus's in
// /corpora/<name>/<split> (its first pair and pair count there too), and the totals on /<split>.
// `corpus_groups[k]` is part k's /corpora/<name>, or -1 for a file of one corpus. Returns the
// totals, and each part's summary in `parts_out`.
SplitSummary write_split(hid_t file, const std::string& name, const std::vector<SplitPart>& parts,
                         const std::vector<hid_t>& corpus_groups, const Vocab& vocab,
                         const PrepOptions& options, int threads,
                         std::vector<SplitSummary>& parts_out) {
  SplitSummary total = empty_summary(name);
  SplitSpills spills(options.out);
  for (size_t k = 0; k < parts.size(); ++k) {
    const int64_t first = spills.src.sentences();
    std::unique_ptr<PairReader> reader;
    SplitSummary part = encode_part(parts[k], vocab, options, threads, spills, reader);
    add_part(total, part);
    if (corpus_groups[k] >= 0) {
      h5::Handle group = h5::create_group(corpus_groups[k], name);
      h5::write_attribute(group.get(), format::kFirst, first);
      h5::write_attribute(group.get(), format::kCount, part.kept);
      write_provenance(group.get(), *parts[k].files, *reader, part);
    } else {
      h5::Handle group = write_split_group(file, name, spills, part);
      write_provenance(group.get(), *parts[k].files, *reader, part);
      parts_out.push_back(part);
      return part;
    }
    parts_out.push_back(std::move(part));
  }
  h5::Handle group = write_split_group(file, name, spills, total);
  write_counts(group.get(), total);
  return total;
}

void write_root(hid_t file, const Vocab& vocab, const PrepOptions& options) {
  h5::write_bytes(file, format::kVocab, vocab.bytes());
  h5::write_attribute(file, format::kFormatAttribute, std::string(format::kFormat));
  h5::write_attribute(file, format::kVersionAttribute,
                      options.corpora.empty() ? format::kVersion : format::kCorporaVersion);
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

}  // namespace

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
    h5::Handle all = h5::create_group(file.get(), format::kCorpora, h5::LinkOrder::kCreation);
    for (const CorpusFiles& corpus : corpora) {
      groups.push_back(h5::create_group(all.get(), corpus.name));
      h5::write_attribute(groups.back().get(), format::kSourceLanguage, corpus.src_lang);
      h5::write_attribute(groups.back().get(), format::kTargetLanguage, corpus.tgt_lang);
      h5::write_attribute(groups.back().get(), format::kTag,
                          tags.empty() ? std::string() : language_tag(corpus.tgt_lang));
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
      // Languages checked against the codes or tags (prepare_corpus).
      const LanguageMarks marks =
          direction_marks(vocab, corpora[k].src_lang, corpora[k].tgt_lang, !tags.empty());
      parts.push_back({files, label_of(corpora[k], name), marks});
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

}  // namespace tandem::data
