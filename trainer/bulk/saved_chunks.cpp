#include "trainer/bulk/saved_chunks.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <utility>

#include "trainer/bulk/chunk_store.h"
#include "trainer/jobs/job_lock.h"
#include "trainer/jobs/stop_signals.h"

namespace tandem::bulk {

SavedChunks::SavedChunks(std::string output, int64_t chunks)
    : output_(std::move(output)), chunks_(chunks) {}

std::string SavedChunks::state_prefix() const {
  const std::filesystem::path path(output_);
  return (path.parent_path() / ("." + path.filename().string() + ".rank-state")).string();
}

jobs::SavedPoint SavedChunks::saved() const {
  const int64_t done = bulk::chunks_done(output_, chunks_);
  return {done, std::to_string(done) + " of " + std::to_string(chunks_) + " chunks done (" +
                    bulk::parts_folder(output_) + ")"};
}

std::string SavedChunks::stop_report(const jobs::JobResult& result,
                                     const std::vector<jobs::RankState>& /*ranks*/) const {
  const int64_t done = bulk::chunks_done(output_, chunks_);
  const std::string name = jobs::signal_name(result.stop_signal);
  if (done == chunks_) return "stopped by " + name + " after the output was complete";
  return "stopped by " + name + "; " + std::to_string(done) + " of " + std::to_string(chunks_) +
         " chunks are done (" + bulk::parts_folder(output_) +
         "): the same command resumes at the first unfinished chunk";
}

void SavedChunks::wait_until_free() const { jobs::wait_until_free(jobs::output_target(output_)); }

void SavedChunks::record_restart(const jobs::RestartRecord& record) const {
  std::ofstream out(bulk::restarts_log(output_), std::ios::app);
  out << record.to_json().dump() << '\n';
  if (!out) {
    std::fprintf(stderr, "warning: cannot record the restart in '%s'\n",
                 bulk::restarts_log(output_).c_str());
  }
}

}  // namespace tandem::bulk
