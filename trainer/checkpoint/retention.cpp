// Checkpoint files in a run directory: naming by step, finding the newest usable one to resume
// from, and keeping only the newest N.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/hdf5/hdf5.h"

namespace tandem::checkpoint {
namespace {

namespace fs = std::filesystem;

// (step, path) of every step-<digits>.h5 in `dir`, newest first; *.tmp and other files are not
// step files. A missing directory has none.
std::vector<std::pair<int64_t, std::string>> numbered_step_files(const std::string& dir) {
  static const std::regex kStepFile("step-([0-9]{1,18})\\.h5");
  std::vector<std::pair<int64_t, std::string>> files;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    std::smatch match;
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && std::regex_match(name, match, kStepFile)) {
      files.emplace_back(std::stoll(match[1].str()), entry.path().string());
    }
  }
  std::sort(files.rbegin(), files.rend());
  return files;
}

// Cheap: opens the file and reads one root attribute, no dataset. A truncated or foreign file
// fails here; a file corrupted inside a dataset does not (load() reports that one).
bool opens_as_checkpoint(const std::string& path) {
  h5::QuietErrors quiet;
  if (!h5::is_hdf5(path)) return false;
  h5::Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file.valid()) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  return h5::read_string_attribute(file.get(), "format") == std::string(kFormatName);
}

}  // namespace

std::string step_file_name(int64_t step) {
  if (step < 0)
    throw std::invalid_argument("step_file_name: step " + std::to_string(step) + " < 0");
  char name[40];
  std::snprintf(name, sizeof name, "step-%08lld.h5", static_cast<long long>(step));
  return name;
}

std::vector<std::string> step_files(const std::string& dir) {
  std::vector<std::string> paths;
  for (const auto& [step, path] : numbered_step_files(dir)) paths.push_back(path);
  return paths;
}

// The highest step-*.h5 whose root "format" attribute reads as a Tandem checkpoint; a file left
// half-written by a crash (never renamed from *.tmp) or truncated later is passed over.
std::string find_latest(const std::string& dir) {
  for (const auto& [step, path] : numbered_step_files(dir)) {
    if (opens_as_checkpoint(path)) return path;
  }
  return "";
}

void prune(const std::string& dir, int64_t keep_last) {
  if (keep_last < 0) {
    throw std::invalid_argument("prune: keep_last " + std::to_string(keep_last) + " < 0");
  }
  if (keep_last == 0) return;
  const auto files = numbered_step_files(dir);
  for (size_t i = static_cast<size_t>(keep_last); i < files.size(); ++i) {
    std::error_code error;
    if (!fs::remove(files[i].second, error) && error) {
      throw std::runtime_error("prune: cannot delete '" + files[i].second +
                               "': " + error.message());
    }
  }
}

}  // namespace tandem::checkpoint
