// A folder written whole or not at all (tandem-export's output): its files go into a hidden
// sibling first, which becomes the folder only once everything in it is written.
#pragma once

#include <string>

namespace tandem {

// The constructor creates <parent>/.<name>.tmp-XXXXXX beside `path`; the caller writes its files
// into path(); commit() renames the staging folder to `path`. With `replace`, a folder already at
// `path` is replaced by that rename (the caller decides whether it may be); without, commit()
// fails where something stands there. Destroyed without commit() (an exception on the way), the
// staging folder is removed and `path` is as it was.
class StagedDir {
 public:
  // std::invalid_argument naming `path` when its parent folder is missing or the staging folder
  // cannot be created there (not a folder, not writable).
  StagedDir(const std::string& path, bool replace);
  ~StagedDir();
  StagedDir(const StagedDir&) = delete;
  StagedDir& operator=(const StagedDir&) = delete;

  const std::string& path() const { return staging_; }  // where to write until commit()
  std::string file(const std::string& name) const { return staging_ + "/" + name; }

  // Publishes the folder at the final path; std::runtime_error naming it when a rename fails
  // (what stood there before is then back in place).
  void commit();

 private:
  std::string final_, staging_;
  bool replace_ = false;
  bool committed_ = false;
};

}  // namespace tandem
