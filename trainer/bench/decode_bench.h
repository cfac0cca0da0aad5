// tandem-bench-decode's measurement: decoding speed of one checkpoint on one input file for every
// precision, beam size and thread count asked for, as tandem-decode decodes (with --seeds also the
// seeds' uncached greedy decoder; with --ctranslate2 CTranslate2 on the exported model, row by
// row), printed as a table, speed-ups and one JSON line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/decode/translate.h"
#include "trainer/bench/ctranslate2_decode.h"
#include "trainer/bench/decode_timing.h"

namespace tandem::bench {

struct DecodeBenchOptions {
  std::string checkpoint, input, ref;  // ref: optional references of input, for BLEU
  std::vector<int> thread_counts = {1, 2};
  std::vector<int64_t> beams = {1, 5};
  std::vector<std::string> precisions = {"fp32", "int8"};
  bool precisions_given = false;  // false: on a GPU, fp32 alone (int8 is a CPU precision)
  int repeat = 1;                 // runs per row; the median wall time is reported
  size_t max_lines = 0;           // the first N lines of input; 0 = all
  bool seeds = false;             // also the seeds' uncached greedy decoder
  std::string device_flag = "cpu";
  decode::DecodeOptions decode;  // batch_tokens and the search's limits; threads and beam per row
  Ct2DecodeOptions ctranslate2;  // model_dir given: each row also decoded by CTranslate2
};

// CTranslate2 stops every sentence at one length (max_decoding_length), so beside it both engines
// decode at most min(256, max_positions) tokens a sentence (prints so).
void same_length_limit(DecodeBenchOptions& o, int64_t max_positions);

// Measures and prints; returns the tool's exit code.
int run_decode_bench(DecodeBenchOptions options);

}  // namespace tandem::bench
