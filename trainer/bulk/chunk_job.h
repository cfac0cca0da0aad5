// A chunked job across the ranks of an MPI job (or one process): rank 0 hands the chunks not yet
// done to whichever rank asks, in order, a worker thread of its own among them, and writes each
// result as a part as it arrives (ChunkStore), then the whole output; every rank translates (or
// scores) what it is handed. A rank holds one chunk at a time, so a lost rank costs at most its
// chunk. A stop signal (jobs/stop_handler.h) on any rank ends the job once the chunks in hand
// are written. A rank that holds its chunk far longer than chunks take, or a rank 0 that stops
// answering, ends the job as dead or stuck (PeerTimeout, common/error.h), which a lost rank does
// by itself (mpirun ends the job). Rank 0's main thread alone calls MPI; the ranks' work runs on
// LibTorch's side.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/bulk/chunk.h"
#include "trainer/bulk/chunk_store.h"
#include "trainer/bulk/job_record.h"
#include "trainer/bulk/line_chunks.h"
#include "trainer/common/error.h"
#include "trainer/parallel/mailbox.h"
#include "trainer/parallel/process_group.h"

namespace tandem::bulk {

// Rank 0's side of the job: its inputs (the same chunking and line count each), where the output
// goes, and the job's record.
struct JobFiles {
  std::vector<LineChunks> inputs;
  std::string output;
  JobRecord record;
  OutputState state = OutputState::kNew;  // what is on disk for the output (inspect_output)
};

struct JobOutcome {
  bool complete = false;    // the output is whole
  int stop_signal = 0;      // the stop signal that ended the job early; 0: none
  int64_t chunks = 0;       // the job's chunks
  int64_t chunks_done = 0;  // done when it ended (rank 0; others: those this rank did)
};

// The least timeout when it is not given: no chunk is taken for stuck sooner than this.
constexpr double kLeastTimeoutS = 300;
// When it is not given, a rank is stuck once it holds its chunk this many times as long as the
// slowest chunk so far took (and kLeastTimeoutS).
constexpr double kTimeoutPerSlowestChunk = 10;

class ChunkJob {
 public:
  // `tool` names the job in its lines; rank 0 prints a progress line at most every `progress_s`.
  // `timeout_s`: how long a rank may hold a chunk, and wait for rank 0's answer, before the job
  // ends as dead or stuck; 0: kTimeoutPerSlowestChunk times the slowest chunk so far, at least
  // kLeastTimeoutS.
  ChunkJob(parallel::ProcessGroup& group, std::string tool, double progress_s,
           double timeout_s = 0);

  // Collective. `files` is rank 0's (ignored elsewhere; its inputs already indexed). `load` runs
  // once on every rank, on rank 0 in its worker thread, and returns what the rank does with each
  // chunk. Errors: std::invalid_argument for an input or output the job cannot use (rank
  // 0, before any part is written), what `load` or a chunk throws, std::runtime_error for files
  // that cannot be written.
  JobOutcome run(const JobFiles& files, const std::function<ChunkFunction()>& load);

  // The chunk this rank works on now; -1 when none (for a failure's record).
  int64_t current_chunk() const { return current_; }

 private:
  JobOutcome run_dispatcher(parallel::Mailbox& mailbox, const JobFiles& files,
                            const std::function<ChunkFunction()>& load);
  JobOutcome run_worker(parallel::Mailbox& mailbox, const std::function<ChunkFunction()>& load);

  parallel::ProcessGroup& group_;
  std::string tool_;
  double progress_s_ = 10;
  double timeout_s_ = 0;
  std::atomic<int64_t> current_{-1};
};

}  // namespace tandem::bulk
