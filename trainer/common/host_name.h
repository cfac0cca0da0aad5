// This machine's name, as the directory lock, TensorBoard's event file names and the launcher's
// host list call it.
#pragma once

#include <string>

namespace tandem {

// gethostname's answer; "localhost" when it gives none.
std::string host_name();

}  // namespace tandem
