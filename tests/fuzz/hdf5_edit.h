// The corpus and checkpoint targets' inputs: edits of a real HDF5 file the suite's code wrote,
// made through libhdf5 (objects deleted, copied or linked twice; attributes deleted or rewritten
// with another type; dataset elements overwritten; datasets recreated with another type, rank or
// size, up to declared sizes far beyond the file's bytes). What Tandem must refuse is a well-formed
// HDF5 file with the wrong contents; a file damaged below that (its bytes, not its objects) is
// libhdf5's to parse, and docs/checkpoints.md says how far that is trusted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_input.h"

namespace tandem::fuzz {

// With TANDEM_FUZZ_RAW_HDF5=1 in the environment the corpus and checkpoint targets take the file's
// bytes instead (seeded with the real file's): that fuzzes libhdf5's own parser, whose findings are
// libhdf5's (docs/sanitizers.md says what a run found).
bool raw_hdf5();

// The file the target reads: `input`'s bytes in raw_hdf5() mode, else edited_copy's.
std::string file_to_read(const std::string& base, const std::string& name, const uint8_t* data,
                         size_t size);
// The seeds: in raw mode the base file's bytes, else `edits`.
std::vector<std::string> seeds_for(const std::string& base, std::vector<std::string> edits);

// Copies `base` to file `name` of the scratch folder and applies the edits `input` spells (at
// most 8); returns the copy's path.
std::string edited_copy(const std::string& base, const std::string& name, FuzzInput& input);

}  // namespace tandem::fuzz
