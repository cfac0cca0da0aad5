// A fresh directory under the system temp dir, removed with everything in it by the destructor:
// scratch space for the benchmarks and fixtures for the tests. And remove_tree, which removes a
// tree without std::filesystem::remove_all.
#pragma once

#include <string>

namespace tandem {

class TempDir {
 public:
  // Creates <system temp>/tandem-<tag>-XXXXXX; std::runtime_error when that fails.
  explicit TempDir(const std::string& tag);
  ~TempDir();  // remove_tree(path())
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Removes `path` and, for a directory, everything under it; symbolic links are removed, never
// followed. Best effort: what cannot be removed stays. Returns whether `path` is gone.
//
// Use this, not std::filesystem::remove_all: the LibTorch of the PyPI wheels exports its own
// copy of remove_all (libtorch.so carries GCC 13's libstdc++_nonshared), which binds before
// libstdc++'s and calls recursive_directory_iterator::__erase, a weak symbol that GCC 12's
// libstdc++ (Debian 12) lacks: a call through a null pointer, seen as a SIGSEGV at address 0.
bool remove_tree(const std::string& path) noexcept;

}  // namespace tandem
