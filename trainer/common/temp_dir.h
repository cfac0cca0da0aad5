// A fresh directory under the system temp dir, removed with everything in it by the destructor:
// scratch space for the benchmarks and fixtures for the tests.
#pragma once

#include <string>

namespace tandem {

class TempDir {
 public:
  // Creates <system temp>/tandem-<tag>-XXXXXX; std::runtime_error when that fails.
  explicit TempDir(const std::string& tag);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace tandem
