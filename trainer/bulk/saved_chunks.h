// What a chunked job (tandem-decode, tandem-score --input/--output) has saved for its relaunch, as
// the launcher reads it between runs: the chunks done in the output's parts folder
// (bulk/chunk_store.h), where the restarts are recorded too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/jobs/restarts.h"

namespace tandem::bulk {

class SavedChunks : public jobs::SavedProgress {
 public:
  // The job writes `output`, in `chunks` chunks.
  SavedChunks(std::string output, int64_t chunks);

  std::string state_prefix() const override;  // .<output name>.rank-state beside the output
  jobs::SavedPoint saved() const override;    // the chunks done
  jobs::JobUnit unit() const override { return jobs::JobUnit::kChunk; }
  jobs::StopWords stop_words() const override {
    return {"every rank finishes the chunk in hand and rank 0 writes it", "finished chunks"};
  }
  std::string stop_report(const jobs::JobResult& result,
                          const std::vector<jobs::RankState>& ranks) const override;
  // The output's lock, which the kernel releases when the failed run's rank 0 is gone.
  void wait_until_free() const override;
  void record_restart(const jobs::RestartRecord& record) const override;  // restarts.jsonl

 private:
  std::string output_;
  int64_t chunks_ = 0;
};

}  // namespace tandem::bulk
