// Rank 0's own worker in a chunked job: a thread that loads what the chunks need, then works on
// one chunk at a time as rank 0's main thread (which alone calls MPI) hands them over, so rank 0
// translates as the other ranks do while it hands out their chunks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "trainer/bulk/chunk.h"
#include "trainer/bulk/chunk_messages.h"

namespace tandem::bulk {

class LocalWorker {
 public:
  // Starts the thread, which calls `load`, then `work` (rank 0's rank number and the chunk's
  // index go to `on_chunk` first: fault injection, the failure record).
  LocalWorker(std::function<ChunkFunction()> load, std::function<void(int64_t)> on_chunk);
  // Tells the thread to end and waits for it (for the chunk in hand, when there is one).
  ~LocalWorker();
  LocalWorker(const LocalWorker&) = delete;
  LocalWorker& operator=(const LocalWorker&) = delete;

  // Loaded and holding no chunk. Rethrows what `load` or a chunk threw.
  bool idle();
  // Hands it a chunk; it must be idle.
  void give(Chunk chunk);
  // The result of the chunk it was given, once there; nullopt before. Rethrows its error.
  std::optional<ChunkResult> take_result();
  // A count that moves on whenever its state changes (loaded, a result, an error).
  uint64_t version();
  // Waits until version() differs from `seen` or `timeout` has passed.
  void wait(uint64_t seen, std::chrono::milliseconds timeout);

 private:
  void main(const std::function<ChunkFunction()>& load);
  void rethrow_locked();

  std::function<void(int64_t)> on_chunk_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool loaded_ = false, ending_ = false;
  uint64_t version_ = 0;
  std::optional<Chunk> chunk_;
  std::optional<ChunkResult> result_;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace tandem::bulk
