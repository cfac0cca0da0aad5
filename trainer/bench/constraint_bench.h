// tandem-bench-decode --constraints: what terminology constraints cost and give. Each input line
// gets one or two phrases of its reference to include (decode/constraints.h); for every beam the
// line's unconstrained and constrained decoding alternate, as tandem-decode decodes, and the table
// gives each one's speed, BLEU and the share of phrases its translations hold.
#pragma once

#include "trainer/bench/decode_bench.h"

namespace tandem::bench {

// Measures and prints (o.ref is required; o.precisions' first precision, o.thread_counts' first
// count); returns the tool's exit code.
int run_constraint_bench(DecodeBenchOptions o);

}  // namespace tandem::bench
