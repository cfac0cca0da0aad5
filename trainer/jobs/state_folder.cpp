#include "trainer/jobs/state_folder.h"

#include <signal.h>
#include <stdlib.h>  // mkdtemp
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>

#include "trainer/common/host_name.h"
#include "trainer/common/temp_dir.h"
#include "trainer/common/whole_number.h"

namespace tandem::jobs {
namespace {

namespace fs = std::filesystem;

// The pid in `name` when it is a folder of `stem` (<stem><pid>-XXXXXX) that a launcher of this
// host made.
std::optional<int64_t> launcher_pid(const std::string& name, const std::string& stem) {
  if (name.size() <= stem.size() + 7 || name.compare(0, stem.size(), stem) != 0) return {};
  const size_t dash = name.size() - 7;
  if (name[dash] != '-') return {};
  return parse_whole_number(name.substr(stem.size(), dash - stem.size()));
}

bool process_gone(int64_t pid) { return kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

// Removes the folders of `stem` in `parent` whose launcher is gone.
void remove_abandoned(const fs::path& parent, const std::string& stem) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(parent, error)) {
    const auto pid = launcher_pid(entry.path().filename().string(), stem);
    if (pid && *pid != getpid() && process_gone(*pid)) remove_tree(entry.path().string());
  }
}

}  // namespace

StateFolder::StateFolder(const std::string& prefix) {
  std::error_code error;
  const fs::path absolute = fs::absolute(prefix, error);
  const fs::path where = error ? fs::path(prefix) : absolute;
  fs::create_directories(where.parent_path(), error);
  const std::string stem = where.filename().string() + "-" + host_name() + "-";
  remove_abandoned(where.parent_path(), stem);
  std::string pattern = (where.parent_path() / (stem + std::to_string(getpid()) + "-XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("cannot create a folder like '" + pattern +
                             "' for the ranks' state records (" + std::strerror(errno) + ")");
  }
  path_ = pattern;
}

StateFolder::~StateFolder() { remove_tree(path_); }

}  // namespace tandem::jobs
