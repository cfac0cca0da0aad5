// Writing a checkpoint file whole or not at all: into <path>.tmp, flushed and synced, then renamed
// into place; a save that cannot fit fails first, and a failure is one line naming the OS error.
#pragma once

#include <functional>
#include <string>

#include "trainer/checkpoint/checkpoint_data.h"
#include "trainer/hdf5/hdf5.h"

namespace tandem::checkpoint {

// Creates <path>.tmp, lets `write_contents` fill it, and publishes it as `path` (data synced before
// the rename, the directory after). std::runtime_error naming `path` on failure; `data` sizes the
// disk-space check and the message. Nothing at `path` changes unless the whole file is written.
void write_atomically(const std::string& path, const CheckpointData& data,
                      const std::function<void(hid_t file)>& write_contents);

}  // namespace tandem::checkpoint
