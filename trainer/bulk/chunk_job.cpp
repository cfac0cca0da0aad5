#include "trainer/bulk/chunk_job.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <utility>

#include "trainer/bulk/chunk_messages.h"
#include "trainer/bulk/chunk_store.h"
#include "trainer/bulk/job_progress.h"
#include "trainer/bulk/local_worker.h"
#include "trainer/common/fault_injection.h"
#include "trainer/jobs/stop_handler.h"
#include "trainer/jobs/stop_signals.h"

namespace tandem::bulk {
namespace {

// How long rank 0's main thread waits for its worker before it looks for the other ranks'
// messages again; alone, it has only a stop signal to notice meanwhile.
constexpr auto kPollEvery = std::chrono::milliseconds(2);
constexpr auto kAloneWait = std::chrono::milliseconds(100);

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point then) {
  return std::chrono::duration<double>(Clock::now() - then).count();
}

// Rank 0's account of the job: the chunks left (in order), which rank holds which and since when,
// and the parts written as results come in.
class Dispatch {
 public:
  Dispatch(const JobFiles& files, ChunkStore& store, JobProgress& progress, double timeout_s)
      : files_(files), store_(store), progress_(progress), timeout_s_(timeout_s) {}

  // The next chunk for `rank`, or nullopt when none is left or the job is stopping.
  std::optional<Chunk> next(int rank) {
    while (next_ < store_.chunks() && store_.done(next_)) ++next_;
    if (stop_signal_ != 0 || next_ >= store_.chunks()) return std::nullopt;
    Chunk chunk;
    chunk.index = next_++;
    chunk.first_line = files_.inputs.front().first_line(chunk.index);
    for (const auto& input : files_.inputs) chunk.columns.push_back(read_chunk(input, chunk.index));
    held_[rank] = {chunk.index, Clock::now()};
    std::vector<int64_t> in_flight;
    for (const auto& [holder, held] : held_) in_flight.push_back(held.chunk);
    store_.set_in_flight(in_flight);
    progress_.start();
    return chunk;
  }

  // `rank` has handed back `result`, which is written as its chunk's part before anything else
  // (a send to a rank that has just died can hold this thread until mpirun ends the job).
  void done(int rank, const ChunkResult& result) {
    store_.write(result.index, result.text);
    const auto held = held_.find(rank);
    if (held != held_.end()) slowest_s_ = std::max(slowest_s_, seconds_since(held->second.since));
    held_.erase(rank);
    progress_.chunk_done(files_.inputs.front().lines_in(result.index));
    if (result.stop_signal != 0) stop(result.stop_signal);
  }

  // No chunk is handed out after this; those in hand are still written.
  void stop(int sig) {
    if (stop_signal_ == 0) stop_signal_ = sig;
  }
  int stop_signal() const { return stop_signal_; }

  // PeerTimeout when a rank has held its chunk past the timeout (timeout_s, or by default
  // kTimeoutPerSlowestChunk times the slowest chunk so far, at least kLeastTimeoutS; no chunk is
  // overdue by default until one has finished).
  void check_overdue(const std::vector<std::string>& hosts) const {
    if (timeout_s_ <= 0 && slowest_s_ == 0) return;
    const double limit = timeout_s_ > 0
                             ? timeout_s_
                             : std::max(kLeastTimeoutS, kTimeoutPerSlowestChunk * slowest_s_);
    for (const auto& [rank, held] : held_) {
      const double s = seconds_since(held.since);
      if (s <= limit) continue;
      char text[64];
      std::snprintf(text, sizeof text, "%.0f s (the limit: %.0f s)", s, limit);
      throw PeerTimeout("rank " + std::to_string(rank) + " on " + hosts[rank] + " has held chunk " +
                        std::to_string(held.chunk) + " for " + text + ": a peer is dead or stuck");
    }
  }

 private:
  struct Held {
    int64_t chunk = 0;
    Clock::time_point since;
  };

  const JobFiles& files_;
  ChunkStore& store_;
  JobProgress& progress_;
  int64_t next_ = 0;
  double timeout_s_ = 0;
  std::map<int, Held> held_;  // rank → its chunk
  double slowest_s_ = 0;      // the longest a chunk took so far
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
    const std::string why = stopped_by == jobs::kLauncherStopSignal
                                ? std::string("the launcher's request")
                                : jobs::signal_name(stopped_by);
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

// Rank 0's worker: the result it handed back written, then a chunk for it while there is one
// (`done` once there is none). Whether there was anything to do.
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

// The other ranks' messages that have arrived: the result each handed back written, then to the
// rank a chunk, or word that nothing is left (counted in `finished`). Whether any came.
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

ChunkJob::ChunkJob(parallel::ProcessGroup& group, std::string tool, double progress_s,
                   double timeout_s)
    : group_(group), tool_(std::move(tool)), progress_s_(progress_s), timeout_s_(timeout_s) {}

JobOutcome ChunkJob::run(const JobFiles& files, const std::function<ChunkFunction()>& load) {
  parallel::Mailbox mailbox(group_);
  return group_.rank() == 0 ? run_dispatcher(mailbox, files, load) : run_worker(mailbox, load);
}

JobOutcome ChunkJob::run_dispatcher(parallel::Mailbox& mailbox, const JobFiles& files,
                                    const std::function<ChunkFunction()>& load) {
  const LineChunks& first = files.inputs.front();
  ChunkStore store(files.output, files.record, files.state, first.count());
  // The models load on the worker's thread while this one hands out the other ranks' chunks.
  int64_t worked = 0;  // chunks the worker has begun (the fault injection's steps)
  LocalWorker worker(load, [this, &worked](int64_t chunk) {
    current_ = chunk;
    inject_fault_if_requested(0, worked++);
  });
  report_resume(tool_, files.output, store);
  JobProgress progress(tool_, first.count(), first.lines, store.done_count(),
                       lines_done(first, store), progress_s_);
  Dispatch dispatch(files, store, progress, timeout_s_);
  const std::vector<std::string> hosts = group_.cpu().gather_bytes(group_.hostname(), 0);
  const int others = group_.size() - 1;
  int finished = 0;  // other ranks told that nothing is left
  bool worker_done = false;
  while (!worker_done || finished < others) {
    const uint64_t seen = worker.version();
    if (const int sig = jobs::stop_signal(); sig != 0) dispatch.stop(sig);
    const bool local = serve_worker(worker, dispatch, worker_done);
    const bool remote = serve_others(mailbox, dispatch, finished);
    if (!local && !remote) worker.wait(seen, others > 0 ? kPollEvery : kAloneWait);
    dispatch.check_overdue(hosts);
  }
  current_ = -1;
  finish(tool_, files, store, progress, group_.size(), dispatch.stop_signal());
  return {store.done_count() == store.chunks(), dispatch.stop_signal(), store.chunks(),
          store.done_count()};
}

JobOutcome ChunkJob::run_worker(parallel::Mailbox& mailbox,
                                const std::function<ChunkFunction()>& load) {
  group_.cpu().gather_bytes(group_.hostname(), 0);
  const ChunkFunction work = load();
  mailbox.send(0, kReady, "");
  JobOutcome outcome;
  // Rank 0 answers each message at once; a silence this long is a rank 0 dead or stuck.
  const double answer_s = timeout_s_ > 0 ? timeout_s_ : kLeastTimeoutS;
  for (;;) {
    const auto answer = mailbox.receive_within(answer_s);
    if (!answer) {
      char text[96];
      std::snprintf(text, sizeof text,
                    "rank 0 has not answered for %.0f s: a peer is dead or stuck", answer_s);
      throw PeerTimeout(text);
    }
    const parallel::Message& message = *answer;
    if (message.tag == kFinish) break;
    const Chunk chunk = decode_chunk(message.bytes);
    current_ = chunk.index;
    inject_fault_if_requested(group_.rank(), outcome.chunks_done);
    const ChunkResult result{chunk.index, work(chunk), jobs::stop_signal()};
    current_ = -1;
    mailbox.send(0, kResult, encode_result(result));
    ++outcome.chunks_done;
  }
  outcome.stop_signal = jobs::stop_signal();
  return outcome;
}

}  // namespace tandem::bulk
