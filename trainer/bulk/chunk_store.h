// The parts of a chunked job's output, kept on disk beside it until the output is whole:
//   <output>.parts/job.json          the job (JobRecord), written before any part
//   <output>.parts/<chunk>.part      a finished chunk's output, written whole or not at all
//   <output>.parts/in-flight.json    the chunks being worked on, and how many were redone so far
//   <output>.parts/restarts.jsonl    the launcher's record of each restart
//   <output>.job.json                once the output is whole: the job and its summary
// A chunk is done when its part is there. The output appears whole, by one rename, once every part
// is; the parts folder goes after. A rerun of a finished job finds it complete; a run of another
// command, or a resume record of another job, is refused before anything is written.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trainer/bulk/job_record.h"

namespace tandem::bulk {

std::string parts_folder(const std::string& output);
std::string record_path(const std::string& output);  // <output>.job.json

enum class OutputState {
  kNew,        // nothing of this job yet
  kResumable,  // a parts folder of this job
  kComplete,   // the output is whole and recorded as this job's
};

// What is on disk for `output` and the job `asked`, changing nothing. std::invalid_argument (each
// naming the file and what differs, and what to do) when the output exists but is not this job's
// (another command's, or a file no chunked job wrote), or when the parts folder is another job's
// or holds parts without a record.
OutputState inspect_output(const std::string& output, const JobRecord& asked);

// Where the launcher records the job's restarts (one JSON object a line).
std::string restarts_log(const std::string& output);

// The chunks of `output` done so far: every one when it is complete; 0 when nothing is there.
// For the launcher between runs.
int64_t chunks_done(const std::string& output, int64_t chunks);

class ChunkStore {
 public:
  // Opens the parts folder of `output` for `asked`, whose state inspect_output found `state`
  // (kNew or kResumable), making it and writing job.json when it is new; `chunks` is the job's
  // chunk count. Left-over temporary files of a killed run are removed.
  ChunkStore(const std::string& output, const JobRecord& asked, OutputState state, int64_t chunks);

  int64_t chunks() const { return static_cast<int64_t>(done_.size()); }
  bool done(int64_t chunk) const { return done_[static_cast<size_t>(chunk)]; }
  int64_t done_count() const { return done_count_; }
  // Chunks the last run was working on when it ended, not done: this run does them again.
  const std::vector<int64_t>& redone() const { return redone_; }
  // Chunks redone over the job's whole life, this run's included.
  int64_t redone_total() const { return redone_total_; }
  // The launcher's restarts of the job so far (records in restarts.jsonl).
  int64_t restarts() const { return restarts_; }

  // The part of `chunk`, whole or not at all. std::runtime_error naming the file on failure.
  void write(int64_t chunk, const std::string& text);
  // Notes the chunks being worked on now (replacing the last note).
  void set_in_flight(const std::vector<int64_t>& chunks);
  // Once every chunk is done: the output from the parts in order (by a rename), then
  // <output>.job.json with `summary` added, then the parts folder removed.
  void complete(const nlohmann::json& summary);

 private:
  void make_folder() const;
  void read_parts();
  void read_in_flight();
  void save_in_flight(const std::vector<int64_t>& chunks) const;

  std::string output_, folder_;
  JobRecord record_;
  std::vector<bool> done_;
  int64_t done_count_ = 0;
  std::vector<int64_t> redone_;
  int64_t redone_total_ = 0;
  int64_t restarts_ = 0;
};

}  // namespace tandem::bulk
