// What every fuzz target in tests/fuzz/ is: libFuzzer's entry point, run once per input (under
// libFuzzer in a fuzzing build, by replay_main.cpp over saved inputs in every other build), and the
// seeds it starts from, made at run time by Tandem's own code (a corpus tandem-prep's code wrote, a
// checkpoint checkpoint::save wrote, a vocabulary the SentencePiece trainer trained).
//
// A target calls the reader on the input and accepts exactly one way of refusing it: the
// std::invalid_argument that names the file, key or value (what the tools turn into exit code 2).
// Any other exception, a crash, a sanitizer report, a hang or an allocation beyond libFuzzer's
// -rss_limit_mb is a finding; each becomes a file under tests/fuzz/inputs/<target>/ that every
// build replays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace tandem::fuzz {

// The target's seed inputs (defined by each target).
std::vector<std::string> seeds();

// Runs `read`; a std::invalid_argument is the reader refusing the input, as it should.
template <class Read>
void refused_or_read(const Read& read) {
  try {
    read();
  } catch (const std::invalid_argument&) {
  }
}

// Stops the run with `what` on standard error: a property of a successful read did not hold.
[[noreturn]] void fail(const std::string& what);

}  // namespace tandem::fuzz
