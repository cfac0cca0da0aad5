#include "trainer/jobs/rank_state.h"

#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "trainer/common/atomic_file.h"
#include "trainer/common/log.h"

namespace tandem::jobs {
namespace {

constexpr RankState::Outcome kOutcomes[] = {
    RankState::Outcome::kFinished, RankState::Outcome::kStopped, RankState::Outcome::kFailed,
    RankState::Outcome::kTimedOut};

std::string record_path(const std::string& dir, int rank) {
  return dir + "/rank-" + std::to_string(rank) + ".json";
}

// Whether `name` is a record's file name, "rank-<digits>.json".
bool is_record_name(const std::string& name) {
  const std::string prefix = "rank-", suffix = ".json";
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  return std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// What open() set: the folder ("" records nothing) and who this rank is; and whether end() ran.
struct Recorder {
  std::mutex mutex;
  std::string dir;
  int rank = 0;
  std::string host;
  bool ended = false;
};

Recorder& recorder() {
  static Recorder instance;
  return instance;
}

}  // namespace

const char* outcome_name(RankState::Outcome outcome) {
  switch (outcome) {
    case RankState::Outcome::kFinished:
      return "finished";
    case RankState::Outcome::kStopped:
      return "stopped";
    case RankState::Outcome::kTimedOut:
      return "timed_out";
    case RankState::Outcome::kFailed:
      break;
  }
  return "failed";
}

std::string to_json(const RankState& state) {
  return nlohmann::json{{"rank", state.rank},
                        {"host", state.host},
                        {"outcome", outcome_name(state.outcome)},
                        {"at", state.at},
                        {"exit_code", state.exit_code},
                        {"signal", state.signal},
                        {"error", state.error},
                        {"time", state.time}}
      .dump();
}

RankState rank_state_from_json(const std::string& text, const std::string& source) {
  try {
    const auto json = nlohmann::json::parse(text);
    RankState state;
    state.rank = json.at("rank").get<int>();
    state.host = json.at("host").get<std::string>();
    const std::string outcome = json.at("outcome").get<std::string>();
    const auto* found = std::find_if(std::begin(kOutcomes), std::end(kOutcomes),
                                     [&](auto o) { return outcome == outcome_name(o); });
    if (found == std::end(kOutcomes)) throw std::invalid_argument("outcome '" + outcome + "'");
    state.outcome = *found;
    state.at = json.at("at").get<int64_t>();
    state.exit_code = json.at("exit_code").get<int>();
    state.signal = json.at("signal").get<int>();
    state.error = json.at("error").get<std::string>();
    state.time = json.at("time").get<double>();
    return state;
  } catch (const std::exception& e) {  // nlohmann's parse, key and type errors, and the above
    throw std::invalid_argument(source + " is not a rank's state record: " + e.what());
  }
}

std::vector<RankState> read_rank_states(const std::string& dir) {
  std::vector<RankState> states;
  DIR* folder = opendir(dir.c_str());
  if (folder == nullptr) return states;
  std::vector<std::string> names;
  while (const dirent* entry = readdir(folder)) {
    if (is_record_name(entry->d_name)) names.emplace_back(entry->d_name);
  }
  closedir(folder);
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    try {
      states.push_back(rank_state_from_json(text.str(), "'" + path + "'"));
    } catch (const std::invalid_argument& e) {
      log::warn(e.what());
    }
  }
  std::sort(states.begin(), states.end(),
            [](const RankState& a, const RankState& b) { return a.rank < b.rank; });
  return states;
}

namespace rank_state {

void open(int rank, const std::string& host) {
  Recorder& r = recorder();
  const std::lock_guard<std::mutex> lock(r.mutex);
  const char* dir = std::getenv(kRankStateDirVariable);
  r.dir = dir != nullptr ? dir : "";
  r.rank = rank;
  r.host = host;
}

bool end(RankState::Outcome outcome, int64_t at, int exit_code, int signal,
         const std::string& error) noexcept {
  try {
    Recorder& r = recorder();
    const std::lock_guard<std::mutex> lock(r.mutex);
    if (r.dir.empty() || r.ended) return false;
    r.ended = true;
    RankState state{r.rank, r.host, outcome, at, exit_code, signal, error, 0};
    state.time =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    // Written whole or not at all: the launcher may read the folder while a rank still ends.
    write_file_atomically(record_path(r.dir, r.rank), to_json(state) + "\n");
    return true;
  } catch (const std::exception& e) {
    log::warn(std::string("the rank's state record for the launcher: ") + e.what());
  } catch (...) {
  }
  return false;
}

}  // namespace rank_state
}  // namespace tandem::jobs
