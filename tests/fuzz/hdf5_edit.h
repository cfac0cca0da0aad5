// The corpus and checkpoint targets' inputs: edits of a real HDF5 file the suite's code wrote,
// made through libhdf5 (objects deleted, copied or linked twice; attributes deleted or rewritten
// with another type; dataset elements overwritten; datasets recreated with another type, rank or
// size, up to declared sizes far beyond the file's bytes). What Tandem must refuse is a well-formed
// HDF5 file with the wrong contents; a file damaged below that (its bytes, not its objects) is
// libhdf5's to parse, and docs/checkpoints.md says how far that is trusted.
#pragma once

#include <string>

#include "tests/fuzz/fuzz_input.h"

namespace tandem::fuzz {

// Copies `base` to file `name` of the scratch folder and applies the edits `input` spells (at
// most 8); returns the copy's path.
std::string edited_copy(const std::string& base, const std::string& name, FuzzInput& input);

}  // namespace tandem::fuzz
