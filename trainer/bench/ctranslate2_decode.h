// CTranslate2 beside tandem-decode in tandem-bench-decode: the folder tandem-export wrote,
// translated by CTranslate2's Python package (launch/ctranslate2-decode.py) on the same encoded
// sentences, precision, threads and beam, its decoding time alone read back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/vocab/vocab.h"
#include "trainer/bench/decode_timing.h"
#include "trainer/decode/beam.h"

namespace tandem::bench {

struct Ct2DecodeOptions {
  std::string model_dir;          // a tandem-export --to ctranslate2 folder; "" = no CTranslate2 rows
  std::string python = "python3"; // with ctranslate2 importable (PYTHONPATH=$(launch/ctranslate2.sh))
  std::string script;             // launch/ctranslate2-decode.py
  bool use_vmap = false;          // translate_batch(use_vmap=True): the folder's vmap.txt
};

// std::invalid_argument naming the folder or script when either is missing.
void check_ctranslate2(const Ct2DecodeOptions& options);

// One timed run of CTranslate2 on `sources` (Tandem ids), in a process of its own, as Tandem's
// runs are timed (decode_timing.h): translate_batch's wall, user and sys seconds, its
// translations counted. "fp32" computes in float32, "int8" in int8 (CTranslate2 quantizes at
// load as tandem-export --quantization int8 does); `threads` batches at once with one thread
// each; beam, length penalty, batch tokens and the fixed length limit decode.max_len_b from
// `decode` (CTranslate2 has no per-sentence a·len+b: decode.max_len_a must be 0); sources cut at
// the model's `max_positions` tokens. The process first translates 100 of the sentences untimed:
// its first batches pay for its allocations, which Tandem's runs, all in one process, paid
// before. The benchmarks call it once a round, in turn with Tandem's runs, so that the machine's
// drift moves both engines alike. std::runtime_error when the script fails.
Timing timed_ctranslate2(const Ct2DecodeOptions& options, const data::Vocab& vocab,
                         const std::vector<std::vector<int32_t>>& sources,
                         const std::string& precision, int threads,
                         const decode::DecodeOptions& decode, int64_t max_positions,
                         const std::string& work_dir);

}  // namespace tandem::bench
