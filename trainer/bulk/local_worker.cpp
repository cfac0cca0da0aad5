#include "trainer/bulk/local_worker.h"

#include <stdexcept>
#include <utility>

namespace tandem::bulk {

LocalWorker::LocalWorker(std::function<ChunkFunction()> load, std::function<void(int64_t)> on_chunk)
    : on_chunk_(std::move(on_chunk)), thread_([this, load = std::move(load)] { main(load); }) {}

LocalWorker::~LocalWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ending_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void LocalWorker::main(const std::function<ChunkFunction()>& load) {
  try {
    const ChunkFunction work = load();
    std::unique_lock<std::mutex> lock(mutex_);
    loaded_ = true;
    ++version_;
    changed_.notify_all();
    for (;;) {
      changed_.wait(lock, [this] { return ending_ || chunk_.has_value(); });
      if (ending_) return;
      const Chunk chunk = std::move(*chunk_);
      lock.unlock();
      on_chunk_(chunk.index);
      ChunkResult result{chunk.index, work(chunk), 0};
      lock.lock();
      chunk_.reset();
      result_ = std::move(result);
      ++version_;
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::current_exception();
    ++version_;
    changed_.notify_all();
  }
}

void LocalWorker::rethrow_locked() {
  if (error_) std::rethrow_exception(error_);
}

bool LocalWorker::idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  rethrow_locked();
  return loaded_ && !chunk_.has_value() && !result_.has_value();
}

void LocalWorker::give(Chunk chunk) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!loaded_ || chunk_.has_value() || result_.has_value()) {
      throw std::logic_error("LocalWorker::give: the worker is not idle");
    }
    chunk_ = std::move(chunk);
  }
  changed_.notify_all();
}

std::optional<ChunkResult> LocalWorker::take_result() {
  std::lock_guard<std::mutex> lock(mutex_);
  rethrow_locked();
  std::optional<ChunkResult> result = std::move(result_);
  result_.reset();
  return result;
}

uint64_t LocalWorker::version() {
  std::lock_guard<std::mutex> lock(mutex_);
  return version_;
}

void LocalWorker::wait(uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return version_ != seen; });
}

}  // namespace tandem::bulk
