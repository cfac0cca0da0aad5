// ShardedLoader: this rank's share of each step's global batches, the data position, and the
// prefetch thread. A StepReader turns a position into that step's batches; it is used by one
// thread at a time: the prefetch thread while it runs, the caller otherwise.
#include "data/batching/loader.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

namespace tandem::data {
namespace {

// Page-locked copies of a batch's tensors: a GPU copies them while the host goes on.
void pin(Batch& batch) {
  batch.src = batch.src.pin_memory();
  batch.tgt_in = batch.tgt_in.pin_memory();
  batch.tgt_out = batch.tgt_out.pin_memory();
  if (batch.direction.defined()) batch.direction = batch.direction.pin_memory();
  if (batch.links.defined()) {
    batch.links = batch.links.pin_memory();
    batch.link_weights = batch.link_weights.pin_memory();
  }
}

// Where each direction of `split` begins in it, when the file holds several; else empty.
std::vector<int64_t> direction_starts(const Corpus& corpus, const std::string& split) {
  const Directions& directions = corpus.directions();
  std::vector<int64_t> starts;
  if (!directions.several()) return starts;
  for (const Direction& direction : directions) {
    const PairRange* range = direction.range(split);
    starts.push_back(range == nullptr ? 0 : range->first);
  }
  return starts;
}

// [pairs] int64: the direction of each pair index, the last one starting at or before it.
torch::Tensor direction_of(const std::vector<int64_t>& pairs, const std::vector<int64_t>& starts) {
  auto out = torch::empty({static_cast<int64_t>(pairs.size())}, torch::kInt64);
  auto* at = out.data_ptr<int64_t>();
  for (const int64_t pair : pairs) {
    *at++ = std::upper_bound(starts.begin(), starts.end(), pair) - starts.begin() - 1;
  }
  return out;
}

// One step as handed out: its micro-batches and the position after it.
struct Step {
  std::vector<Batch> batches;
  DataPosition after;
};

class StepReader {
 public:
  StepReader(const Corpus& corpus, std::string split, BatchPlanOptions options, int rank,
             int world_size)
      : corpus_(corpus),
        split_(std::move(split)),
        options_(options),
        rank_(rank),
        world_size_(world_size),
        direction_starts_(direction_starts(corpus, split_)) {}

  // The step that starts at `at` (or at the next epoch's start if `at` used its epoch up).
  Step read(DataPosition at, int64_t accum_steps) {
    if (at.next_batch >= plan(at).size()) at = DataPosition{at.epoch + 1, 0};
    const BatchPlan& batches = plan(at);
    Step step;
    for (int64_t m = 0; m < accum_steps; ++m) {
      const int64_t index = at.next_batch + m * world_size_ + rank_;
      if (index < batches.size()) {
        const std::vector<int64_t> pairs = batches.batch(index);
        step.batches.push_back(make_batch(corpus_.read(split_, pairs, links_)));
        if (!direction_starts_.empty())
          step.batches.back().direction = direction_of(pairs, direction_starts_);
      } else {
        step.batches.push_back(make_batch({}));
      }
      if (pinned_ && !step.batches.back().empty()) pin(step.batches.back());
    }
    step.after = DataPosition{at.epoch, at.next_batch + accum_steps * world_size_};
    return step;
  }

  void set_pinned(bool pinned) { pinned_ = pinned; }
  void set_links(Corpus::Links links) { links_ = links; }
  int64_t directions() const { return static_cast<int64_t>(direction_starts_.size()); }

  // This rank's share of the plan of the epoch `at` is in, built when first asked for (one is
  // held at a time); the epoch's size is remembered for batches_in_epoch, under a lock the caller
  // may read it with. Steps move on by multiples of the world size, so within an epoch this rank
  // reads batches at + rank + k * world only: the share kept (a resume at another world size may
  // start elsewhere, which builds the share again).
  const BatchPlan& plan(DataPosition at) {
    const int64_t first = (at.next_batch + rank_) % world_size_;
    if (plan_epoch_ != at.epoch || plan_first_ != first) {
      plan_ = BatchPlan();  // the old plan goes before the new one is built: half the peak
      plan_epoch_ = -1;
      plan_ = make_batch_plan(corpus_.padded_lengths(split_), options_, at.epoch);
      plan_.keep_share(first, world_size_);
      plan_epoch_ = at.epoch;
      plan_first_ = first;
      const std::lock_guard<std::mutex> lock(sizes_mutex_);
      sizes_[at.epoch] = plan_.size();
    }
    return plan_;
  }

  std::optional<int64_t> known_size(int64_t epoch) {
    const std::lock_guard<std::mutex> lock(sizes_mutex_);
    const auto found = sizes_.find(epoch);
    if (found == sizes_.end()) return std::nullopt;
    return found->second;
  }

 private:
  const Corpus& corpus_;
  std::string split_;
  BatchPlanOptions options_;
  int rank_;
  int world_size_;
  std::vector<int64_t> direction_starts_;  // of the split's corpora when it holds several
  bool pinned_ = false;
  Corpus::Links links_ = Corpus::Links::kSkip;
  int64_t plan_epoch_ = -1, plan_first_ = 0;
  BatchPlan plan_;
  std::mutex sizes_mutex_;
  std::map<int64_t, int64_t> sizes_;  // batches per epoch, for every plan built
};

// A thread that reads the steps from `start` on into a queue of at most `depth`, until stopped
// or an error (which is queued in place of the step it would have been).
class Prefetcher {
 public:
  Prefetcher(StepReader& reader, DataPosition start, int64_t accum_steps, int64_t depth)
      : accum_steps_(accum_steps), depth_(depth) {
    thread_ = std::thread([this, &reader, start] { run(reader, start); });
  }
  ~Prefetcher() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  int64_t accum_steps() const { return accum_steps_; }

  // The next step, waiting for it if the thread is behind; rethrows the thread's error.
  Step next() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return !queue_.empty() || error_; });
    if (queue_.empty()) std::rethrow_exception(error_);
    Step step = std::move(queue_.front());
    queue_.pop_front();
    changed_.notify_all();
    return step;
  }

  // Waits until the reader knows the size of `epoch` (the thread's first read builds that plan
  // for the epoch it starts in) or the thread has failed.
  int64_t size_of(StepReader& reader, int64_t epoch) {
    std::unique_lock<std::mutex> lock(mutex_);
    std::optional<int64_t> size;
    changed_.wait(lock, [&] { return (size = reader.known_size(epoch)) || error_ || done_; });
    if (size) return *size;
    if (error_) std::rethrow_exception(error_);
    throw std::logic_error("loader: the prefetch thread never planned epoch " +
                           std::to_string(epoch));
  }

 private:
  void run(StepReader& reader, DataPosition cursor) {
    // Lowest priority: where ranks fill the cores, reading ahead takes the time the step leaves
    // idle instead of preempting it (waiting in next_step, the step thread leaves the core to it).
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
    try {
      while (true) {
        Step step = reader.read(cursor, accum_steps_);
        cursor = step.after;
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.notify_all();  // a plan size may have become known
        changed_.wait(lock,
                      [this] { return stopping_ || static_cast<int64_t>(queue_.size()) < depth_; });
        if (stopping_) break;
        queue_.push_back(std::move(step));
        changed_.notify_all();
      }
    } catch (...) {
      const std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
    }
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    changed_.notify_all();
  }

  const int64_t accum_steps_;
  const int64_t depth_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Step> queue_;
  std::exception_ptr error_;
  bool stopping_ = false;
  bool done_ = false;
  std::thread thread_;  // last: started once everything it uses exists
};

}  // namespace

struct ShardedLoader::Impl {
  Impl(const Corpus& corpus, std::string split, BatchPlanOptions options, int rank, int world_size,
       int64_t prefetch_steps)
      : reader(corpus, std::move(split), options, rank, world_size),
        prefetch_steps(prefetch_steps) {}

  StepReader reader;
  int64_t prefetch_steps;
  DataPosition position;
  std::unique_ptr<Prefetcher> prefetcher;  // running from `position` while set
};

ShardedLoader::ShardedLoader(const Corpus& corpus, std::string split, BatchPlanOptions options,
                             int rank, int world_size, int64_t prefetch_steps) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw std::invalid_argument("loader: rank " + std::to_string(rank) + " of world size " +
                                std::to_string(world_size) + "; expected 0 <= rank < world size");
  }
  if (prefetch_steps < 0) {
    throw std::invalid_argument("data.prefetch_steps " + std::to_string(prefetch_steps) +
                                ": expected >= 0");
  }
  if (corpus.size(split) == 0) {
    throw std::invalid_argument("corpus '" + corpus.path() + "': split '" + split +
                                "' has no sentence pairs to train on");
  }
  impl_ =
      std::make_unique<Impl>(corpus, std::move(split), options, rank, world_size, prefetch_steps);
}

ShardedLoader::ShardedLoader(ShardedLoader&&) noexcept = default;
ShardedLoader& ShardedLoader::operator=(ShardedLoader&&) noexcept = default;
ShardedLoader::~ShardedLoader() = default;

std::vector<Batch> ShardedLoader::next_step(int64_t accum_steps) {
  if (accum_steps < 1) {
    throw std::invalid_argument("train.accum_steps " + std::to_string(accum_steps) +
                                ": expected >= 1");
  }
  Impl& impl = *impl_;
  Step step;
  if (impl.prefetch_steps == 0) {
    step = impl.reader.read(impl.position, accum_steps);
  } else {
    if (impl.prefetcher && impl.prefetcher->accum_steps() != accum_steps) impl.prefetcher.reset();
    if (!impl.prefetcher) {
      impl.prefetcher = std::make_unique<Prefetcher>(impl.reader, impl.position, accum_steps,
                                                     impl.prefetch_steps);
    }
    try {
      step = impl.prefetcher->next();
    } catch (...) {
      impl.prefetcher.reset();  // the next call starts again from the same position
      throw;
    }
  }
  impl.position = step.after;
  return std::move(step.batches);
}

DataPosition ShardedLoader::position() const { return impl_->position; }

void ShardedLoader::set_position(const DataPosition& position) {
  if (position.epoch < 0 || position.next_batch < 0) {
    throw std::invalid_argument("data position (epoch " + std::to_string(position.epoch) +
                                ", next batch " + std::to_string(position.next_batch) +
                                "): expected both >= 0");
  }
  impl_->prefetcher.reset();
  impl_->position = position;
}

void ShardedLoader::pin_batches(bool pinned) {
  impl_->prefetcher.reset();  // the reader is the caller's while no thread runs
  impl_->reader.set_pinned(pinned);
}

void ShardedLoader::read_links(bool links) {
  impl_->prefetcher.reset();
  impl_->reader.set_links(links ? Corpus::Links::kRead : Corpus::Links::kSkip);
}

int64_t ShardedLoader::directions() const { return impl_->reader.directions(); }

int64_t ShardedLoader::batches_in_epoch() {
  Impl& impl = *impl_;
  const int64_t epoch = impl.position.epoch;
  if (const auto size = impl.reader.known_size(epoch)) return *size;
  if (impl.prefetcher) return impl.prefetcher->size_of(impl.reader, epoch);
  return impl.reader.plan(impl.position).size();
}

}  // namespace tandem::data
