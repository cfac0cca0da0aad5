// PrepSummary::to_string: the table tandem-prep prints.
#include "data/prep/prep_summary.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "data/prep/pair_reader.h"

namespace tandem::data {
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
  for (const SplitSummary& split : splits) {
    if (split.aligned < 0) continue;
    out << "alignments: " << split.name << ": " << split.aligned << " of " << split.kept
        << " kept pairs with links, " << split.links << " links between pieces\n";
  }
  return out.str();
}

}  // namespace tandem::data
