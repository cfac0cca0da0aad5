// tandem-bench-decode --constraints / --shortlist: what a decoding variant costs or saves, and
// gives, against plain decoding. --constraints: each input line includes one or two phrases of
// its reference (decode/constraints.h); --shortlist: the output layer on a lexical shortlist
// (data/shortlist/shortlist.h). For every precision and beam the line's plain and variant decoding
// alternate, as tandem-decode decodes, and the table gives each one's speed and BLEU (and the
// share of phrases its translations hold).
#pragma once

#include <string>

#include "trainer/bench/decode_bench.h"

namespace tandem::bench {

// Measures and prints (o.ref is required; o.thread_counts' first count); returns the tool's
// exit code. `shortlist`: the shortlist file, or "" for constraints.
int run_variant_bench(DecodeBenchOptions o, const std::string& shortlist);

}  // namespace tandem::bench
