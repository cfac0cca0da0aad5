#include "trainer/bulk/chunk_store.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "trainer/common/atomic_file.h"
#include "trainer/common/temp_dir.h"

namespace tandem::bulk {
namespace {

namespace fs = std::filesystem;

constexpr const char* kJob = "job.json";
constexpr const char* kInFlight = "in-flight.json";
constexpr const char* kPartSuffix = ".part";

bool exists(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0;
}

std::string part_name(int64_t chunk) {
  char name[32];
  std::snprintf(name, sizeof name, "%08lld%s", static_cast<long long>(chunk), kPartSuffix);
  return name;
}

// The chunk a part's file name is of, or -1 for any other name.
int64_t part_chunk(const std::string& name) {
  const size_t digits = name.size() - std::strlen(kPartSuffix);
  if (name.size() <= std::strlen(kPartSuffix) ||
      name.compare(digits, std::string::npos, kPartSuffix) != 0) {
    return -1;
  }
  int64_t chunk = 0;
  for (size_t i = 0; i < digits; ++i) {
    if (name[i] < '0' || name[i] > '9' || chunk > (INT64_MAX - 9) / 10) return -1;
    chunk = chunk * 10 + (name[i] - '0');
  }
  return chunk;
}

std::vector<int64_t> parts_in(const std::string& folder) {
  std::vector<int64_t> chunks;
  std::error_code error;
  for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    const int64_t chunk = part_chunk(it->path().filename().string());
    if (chunk >= 0) chunks.push_back(chunk);
  }
  return chunks;
}

JobRecord read_record(const std::string& path) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument("'" + path + "' is not a job record (" + e.what() +
                                "): remove it, or name another output");
  }
  return JobRecord::from_json(json, path);
}

// The parts folder's state, checked against `asked`: whether it holds this job's record.
bool parts_of_this_job(const std::string& output, const JobRecord& asked) {
  const std::string folder = parts_folder(output);
  if (!exists(folder)) return false;
  const std::string job = folder + "/" + kJob;
  if (!exists(job)) {
    if (!parts_in(folder).empty()) {
      throw std::invalid_argument("'" + folder + "' holds parts but no " + kJob +
                                  " saying of which job: remove the folder to start afresh");
    }
    return false;
  }
  const std::string why = difference(read_record(job), asked);
  if (!why.empty()) {
    throw std::invalid_argument("the resume record '" + job + "' does not match this command: " +
                                why + ". Run the recorded command to finish it, or remove '" +
                                folder + "' to start afresh (its finished chunks are then lost)");
  }
  return true;
}

}  // namespace

std::string parts_folder(const std::string& output) { return output + ".parts"; }
std::string record_path(const std::string& output) { return output + ".job.json"; }
std::string restarts_log(const std::string& output) {
  return parts_folder(output) + "/restarts.jsonl";
}

OutputState inspect_output(const std::string& output, const JobRecord& asked) {
  if (parts_of_this_job(output, asked)) return OutputState::kResumable;
  if (!exists(output)) return OutputState::kNew;
  const std::string record = record_path(output);
  if (!exists(record)) {
    throw std::invalid_argument("--output '" + output + "' exists and no " + record +
                                " says it is this command's output: remove it, or name another "
                                "output");
  }
  const std::string why = difference(read_record(record), asked);
  if (!why.empty()) {
    throw std::invalid_argument("--output '" + output + "' exists from a different command: " +
                                why + " (" + record + "). Remove it, or name another output");
  }
  return OutputState::kComplete;
}

int64_t chunks_done(const std::string& output, int64_t chunks) {
  const std::string folder = parts_folder(output);
  if (exists(folder)) return static_cast<int64_t>(parts_in(folder).size());
  return exists(output) && exists(record_path(output)) ? chunks : 0;
}

ChunkStore::ChunkStore(const std::string& output, const JobRecord& asked, OutputState state,
                       int64_t chunks)
    : output_(output),
      folder_(parts_folder(output)),
      record_(asked),
      done_(static_cast<size_t>(chunks), false) {
  if (state == OutputState::kComplete) {
    throw std::logic_error("ChunkStore: '" + output + "' is complete already");
  }
  if (state == OutputState::kNew) make_folder();
  read_parts();
  read_in_flight();
  save_in_flight({});
  if (exists(restarts_log(output))) {
    for (const char c : read_file(restarts_log(output))) restarts_ += c == '\n' ? 1 : 0;
  }
}

void ChunkStore::make_folder() const {
  std::error_code error;
  fs::create_directories(folder_, error);
  if (error) {
    throw std::invalid_argument("cannot make the parts folder '" + folder_ + "' (" +
                                error.message() + ")");
  }
  write_file_atomically(folder_ + "/" + kJob, record_.to_json().dump(1) + "\n");
}

// The parts there are; a killed run's temporary files go.
void ChunkStore::read_parts() {
  for (const int64_t chunk : parts_in(folder_)) {
    if (chunk >= chunks()) {
      throw std::invalid_argument("'" + folder_ + "/" + part_name(chunk) +
                                  "' is past the job's last chunk (" +
                                  std::to_string(chunks() - 1) + "): remove the folder");
    }
    done_[static_cast<size_t>(chunk)] = true;
    ++done_count_;
  }
  std::error_code error;
  for (fs::directory_iterator it(folder_, error), end; !error && it != end; it.increment(error)) {
    if (it->path().extension() == ".tmp") remove_tree(it->path().string());
  }
}

// The chunks the last run had in hand and did not finish, and the count redone before it.
void ChunkStore::read_in_flight() {
  const std::string in_flight = folder_ + "/" + kInFlight;
  if (exists(in_flight)) {
    const auto json = nlohmann::json::parse(read_file(in_flight), nullptr, false);
    if (!json.is_discarded() && json.is_object()) {
      for (const auto& chunk : json.value("in_flight", nlohmann::json::array())) {
        const int64_t c = chunk.is_number_integer() ? chunk.get<int64_t>() : -1;
        if (c >= 0 && c < chunks() && !done(c)) redone_.push_back(c);
      }
      redone_total_ = json.value("redone", int64_t{0});
    }
  }
  redone_total_ += static_cast<int64_t>(redone_.size());
}

void ChunkStore::write(int64_t chunk, const std::string& text) {
  write_file_atomically(folder_ + "/" + part_name(chunk), text);
  if (!done_[static_cast<size_t>(chunk)]) {
    done_[static_cast<size_t>(chunk)] = true;
    ++done_count_;
  }
}

void ChunkStore::set_in_flight(const std::vector<int64_t>& chunks) { save_in_flight(chunks); }

void ChunkStore::save_in_flight(const std::vector<int64_t>& chunks) const {
  const nlohmann::json json{{"in_flight", chunks}, {"redone", redone_total_}};
  write_file_atomically(folder_ + "/" + kInFlight, json.dump() + "\n");
}

void ChunkStore::complete(const nlohmann::json& summary) {
  if (done_count_ != chunks()) {
    throw std::logic_error("ChunkStore::complete with " + std::to_string(chunks() - done_count_) +
                           " chunk(s) not done");
  }
  // Assembled in the parts' folder, then renamed into place.
  AtomicFile whole(output_, folder_ + "/output.tmp");
  for (int64_t chunk = 0; chunk < chunks(); ++chunk) {
    whole.append(read_file(folder_ + "/" + part_name(chunk)));
  }
  whole.commit();
  nlohmann::json record = record_.to_json();
  record["summary"] = summary;
  write_file_atomically(record_path(output_), record.dump(1) + "\n");
  remove_tree(folder_);
}

}  // namespace tandem::bulk
