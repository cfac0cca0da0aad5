#include "trainer/bulk/chunk_job.h"

#include <cstdio>
#include <map>
#include <optional>
#include <utility>

#include "trainer/bulk/chunk_messages.h"
#include "trainer/bulk/chunk_store.h"
#include "trainer/bulk/job_progress.h"
#include "trainer/bulk/local_worker.h"
#include "trainer/common/fault_injection.h"
#include "trainer/common/stop_handler.h"
#include "trainer/common/stop_signals.h"

namespace tandem::bulk {
namespace {

// How long rank 0's main thread waits for its worker before it looks for the other ranks'
// messages again; alone, it has only a stop signal to notice meanwhile.
constexpr auto kPollEvery = std::chrono::milliseconds(2);
constexpr auto kAloneWait = std::chrono::milliseconds(100);

// Rank 0's account of the job: the chunks left (in order), which rank holds which, and the parts
// written as results come in.
class Dispatch {
 public:
  Dispatch(const JobFiles& files, ChunkStore& store, JobProgress& progress)
      : files_(files), store_(store), progress_(progress) {}

  // The next chunk for `rank`, or nullopt when none is left or the job is stopping.
  std::optional<Chunk> next(int rank) {
    while (next_ < store_.chunks() && store_.done(next_)) ++next_;
    if (stop_signal_ != 0 || next_ >= store_.chunks()) return std::nullopt;
    Chunk chunk;
    chunk.index = next_++;
    chunk.first_line = files_.inputs.front().first_line(chunk.index);
    for (const auto& input : files_.inputs) chunk.columns.push_back(read_chunk(input, chunk.index));
    held_[rank] = chunk.index;
    std::vector<int64_t> in_flight;
    for (const auto& [holder, index] : held_) in_flight.push_back(index);
    store_.set_in_flight(in_flight);
    progress_.start();
    return chunk;
  }

  void done(int rank, const ChunkResult& result) {
    store_.write(result.index, result.text);
    held_.erase(rank);
    progress_.chunk_done(files_.inputs.front().lines_in(result.index));
    if (result.stop_signal != 0) stop(result.stop_signal);
  }

  // No chunk is handed out after this; those in hand are still written.
  void stop(int sig) {
    if (stop_signal_ == 0) stop_signal_ = sig;
  }
  int stop_signal() const { return stop_signal_; }

 private:
  const JobFiles& files_;
  ChunkStore& store_;
  JobProgress& progress_;
  int64_t next_ = 0;
  std::map<int, int64_t> held_;  // rank → its chunk
  int stop_signal_ = 0;
};

int64_t lines_done(const LineChunks& input, const ChunkStore& store) {
  int64_t lines = 0;
  for (int64_t c = 0; c < store.chunks(); ++c) lines += store.done(c) ? input.lines_in(c) : 0;
  return lines;
}

void report_resume(const std::string& tool, const std::string& output, const ChunkStore& store) {
  if (store.done_count() == 0 && store.redone().empty()) return;
  std::string redone;
  for (const int64_t chunk : store.redone()) {
    redone += (redone.empty() ? "" : ", ") + std::to_string(chunk);
  }
  std::fprintf(stderr,
               "%s: resuming %s: %lld of %lld chunks done; %zu chunk(s) redone (in hand "
               "when it stopped%s%s)\n",
               tool.c_str(), output.c_str(), static_cast<long long>(store.done_count()),
               static_cast<long long>(store.chunks()), store.redone().size(),
               redone.empty() ? "" : ": ", redone.c_str());
}

// The job's end on rank 0: the whole output and its summary, or where a stop left it.
void finish(const std::string& tool, const JobFiles& files, ChunkStore& store,
            const JobProgress& progress, int ranks, int stopped_by) {
  if (store.done_count() < store.chunks()) {
    const std::string why = stopped_by == kLauncherStopSignal
                                ? std::string("the launcher's request")
                                : signal_name(stopped_by);
    std::fprintf(stderr,
                 "%s: stopping on %s with %lld of %lld chunks of %s done (%s); the same command "
                 "resumes at the first unfinished chunk\n",
                 tool.c_str(), why.c_str(), static_cast<long long>(store.done_count()),
                 static_cast<long long>(store.chunks()), files.output.c_str(),
                 parts_folder(files.output).c_str());
    return;
  }
  nlohmann::json summary;
  const std::string text = progress.summary(ranks, store.redone_total(), summary);
  summary["restarts"] = store.restarts();
  store.complete(summary);
  std::fprintf(stderr, "%s: wrote %s: %s, %lld restart(s)\n", tool.c_str(), files.output.c_str(),
               text.c_str(), static_cast<long long>(store.restarts()));
}

// Rank 0's worker: its result written, and a chunk for it while there is one (`done` once there
// is none). Whether there was anything to do.
bool serve_worker(LocalWorker& worker, Dispatch& dispatch, bool& done) {
  bool acted = false;
  if (auto result = worker.take_result()) {
    dispatch.done(0, *result);
    acted = true;
  }
  if (!done && worker.idle()) {
    if (auto chunk = dispatch.next(0)) {
      worker.give(std::move(*chunk));
    } else {
      done = true;
    }
    acted = true;
  }
  return acted;
}

// The other ranks' messages that have arrived: each result written, and to each rank that asks a
// chunk, or word that nothing is left (counted in `finished`). Whether any came.
bool serve_others(parallel::Mailbox& mailbox, Dispatch& dispatch, int& finished) {
  bool acted = false;
  while (auto message = mailbox.poll()) {
    if (message->tag == kResult) dispatch.done(message->source, decode_result(message->bytes));
    if (auto chunk = dispatch.next(message->source)) {
      mailbox.send(message->source, kWork, encode_chunk(*chunk));
    } else {
      mailbox.send(message->source, kFinish, "");
      ++finished;
    }
    acted = true;
  }
  return acted;
}

}  // namespace

ChunkJob::ChunkJob(parallel::ProcessGroup& group, std::string tool, double progress_s)
    : group_(group), tool_(std::move(tool)), progress_s_(progress_s) {}

JobOutcome ChunkJob::run(const JobFiles& files, const std::function<ChunkFunction()>& load) {
  parallel::Mailbox mailbox(group_);
  return group_.rank() == 0 ? run_dispatcher(mailbox, files, load) : run_worker(mailbox, load);
}

JobOutcome ChunkJob::run_dispatcher(parallel::Mailbox& mailbox, const JobFiles& files,
                                    const std::function<ChunkFunction()>& load) {
  const LineChunks& first = files.inputs.front();
  ChunkStore store(files.output, files.record, first.count());
  // The models load on the worker's thread while this one hands out the other ranks' chunks.
  LocalWorker worker(load, [this](int64_t chunk) {
    current_ = chunk;
    inject_fault_if_requested(0, chunk);
  });
  report_resume(tool_, files.output, store);
  JobProgress progress(tool_, first.count(), first.lines, store.done_count(),
                       lines_done(first, store), progress_s_);
  Dispatch dispatch(files, store, progress);
  const int others = group_.size() - 1;
  int finished = 0;  // other ranks told that nothing is left
  bool worker_done = false;
  while (!worker_done || finished < others) {
    const uint64_t seen = worker.version();
    if (const int sig = stop_signal(); sig != 0) dispatch.stop(sig);
    const bool local = serve_worker(worker, dispatch, worker_done);
    const bool remote = serve_others(mailbox, dispatch, finished);
    if (!local && !remote) worker.wait(seen, others > 0 ? kPollEvery : kAloneWait);
  }
  current_ = -1;
  finish(tool_, files, store, progress, group_.size(), dispatch.stop_signal());
  return {store.done_count() == store.chunks(), dispatch.stop_signal(), store.chunks(),
          store.done_count()};
}

JobOutcome ChunkJob::run_worker(parallel::Mailbox& mailbox,
                                const std::function<ChunkFunction()>& load) {
  const ChunkFunction work = load();
  mailbox.send(0, kReady, "");
  JobOutcome outcome;
  for (;;) {
    const parallel::Message message = mailbox.receive();
    if (message.tag == kFinish) break;
    const Chunk chunk = decode_chunk(message.bytes);
    current_ = chunk.index;
    inject_fault_if_requested(group_.rank(), chunk.index);
    const ChunkResult result{chunk.index, work(chunk), stop_signal()};
    current_ = -1;
    mailbox.send(0, kResult, encode_result(result));
    ++outcome.chunks_done;
  }
  outcome.stop_signal = stop_signal();
  return outcome;
}

}  // namespace tandem::bulk
