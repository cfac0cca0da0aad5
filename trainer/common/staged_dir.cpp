#include "trainer/common/staged_dir.h"

#include <stdio.h>   // rename
#include <stdlib.h>  // mkdtemp
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "trainer/common/temp_dir.h"

namespace tandem {
namespace {

// "runs/ct2/" → "runs/ct2": the name is what the staging folder's is made from.
std::string without_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// "runs/ct2" → "runs", "ct2" → ".", "/ct2" → "/".
std::string parent_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string name_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool exists(const std::string& path) {
  struct stat info;
  return ::lstat(path.c_str(), &info) == 0;
}

}  // namespace

StagedDir::StagedDir(const std::string& path, bool replace)
    : final_(without_trailing_slashes(path)), replace_(replace) {
  if (final_.empty()) throw std::invalid_argument("the output folder's name is empty");
  const std::string parent = parent_of(final_);
  struct stat info;
  if (::stat(parent.c_str(), &info) != 0) {
    throw std::invalid_argument("cannot create folder '" + path + "': its parent '" + parent +
                                "' does not exist (" + std::strerror(errno) + ")");
  }
  std::string pattern =
      (parent == "/" ? std::string() : parent) + "/." + name_of(final_) + ".tmp-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::invalid_argument("cannot create folder '" + path + "' in '" + parent + "' (" +
                                std::strerror(errno) + ")");
  }
  staging_ = pattern;
  // mkdtemp's 0700 is for scratch space; the published folder gets what mkdir would give it.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::chmod(staging_.c_str(), 0777 & ~mask);
}

StagedDir::~StagedDir() {
  if (!committed_) remove_tree(staging_);
}

void StagedDir::commit() {
  // The folder being replaced moves aside first, so that a failed rename can put it back.
  const std::string aside = staging_ + ".replaced";
  const bool replacing = replace_ && exists(final_);
  if (replacing && ::rename(final_.c_str(), aside.c_str()) != 0) {
    throw std::runtime_error("cannot replace folder '" + final_ + "': " + std::strerror(errno));
  }
  if (::rename(staging_.c_str(), final_.c_str()) != 0) {
    const std::string error = std::strerror(errno);
    if (replacing) ::rename(aside.c_str(), final_.c_str());
    throw std::runtime_error("cannot publish folder '" + final_ + "' (from '" + staging_ +
                             "'): " + error);
  }
  committed_ = true;
  if (replacing) remove_tree(aside);
}

}  // namespace tandem
