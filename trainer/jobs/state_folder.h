// Where the ranks of one run of a job leave their state records (jobs/rank_state.h): a folder
// its launcher makes for that run alone and removes itself, so that a job ending in the same
// checkpoint.dir (or beside the same output) as a new one starts cannot take the new one's.
#pragma once

#include <string>

namespace tandem::jobs {

// <prefix>-<host>-<pid>-XXXXXX, made by mkdtemp (no other launch, on any host, gets the same
// name), absolute so that ranks in other working directories or on other hosts write where the
// launcher reads; removed with its records by the destructor. Folders of the same prefix that
// launchers of this host left when they were killed before their clean-up (their pid is gone) are
// removed first; those of live launchers are never touched. std::runtime_error when the folder
// cannot be made.
class StateFolder {
 public:
  explicit StateFolder(const std::string& prefix);
  ~StateFolder();
  StateFolder(const StateFolder&) = delete;
  StateFolder& operator=(const StateFolder&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace tandem::jobs
