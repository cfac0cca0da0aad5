// Small files written whole or not at all: the bytes go to <path>.tmp, are synced, and the file
// is renamed into place, so a reader (or a resumed job) finds the old file or the new one, never
// a part of one.
#pragma once

#include <string>

namespace tandem {

// std::runtime_error naming `path` and the OS error when it cannot be written; nothing at `path`
// changes then, and the temporary file is removed.
void write_file_atomically(const std::string& path, const std::string& bytes);

// The whole of the file at `path`; std::runtime_error naming it when it cannot be read.
std::string read_file(const std::string& path);

}  // namespace tandem
