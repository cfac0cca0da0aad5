#include "trainer/common/temp_dir.h"

#include <ftw.h>
#include <stdio.h>   // remove
#include <stdlib.h>  // mkdtemp
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace tandem {
namespace {

// Children before their directory (FTW_DEPTH), links as links (FTW_PHYS); a failure to remove
// one entry does not stop the walk.
int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  ::remove(path);
  return 0;
}

bool exists_as_link_or_file(const std::string& path) {
  struct stat info;
  return ::lstat(path.c_str(), &info) == 0;
}

}  // namespace

TempDir::TempDir(const std::string& tag) {
  std::string pattern =
      (std::filesystem::temp_directory_path() / ("tandem-" + tag + "-XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("cannot create a directory like " + pattern + ": " +
                             std::strerror(errno));
  }
  path_ = pattern;
}

TempDir::~TempDir() { remove_tree(path_); }

bool remove_tree(const std::string& path) noexcept {
  if (!exists_as_link_or_file(path)) return true;
  ::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  return !exists_as_link_or_file(path);
}

}  // namespace tandem
