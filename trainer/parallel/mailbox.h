// Byte messages from one rank to another (MPI point-to-point over a copy of the world), for work
// handed out and handed back as each piece is done rather than in lockstep: a send, a receive
// that waits, and a look that does not. Only the thread that initialised MPI may use a Mailbox
// (MPI_THREAD_FUNNELED).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "trainer/parallel/process_group.h"

namespace tandem::parallel {

struct Message {
  int source = -1;
  int tag = 0;
  std::string bytes;
};

class Mailbox {
 public:
  // Collective: every rank of `group` makes its Mailbox, in the same order as its collectives.
  explicit Mailbox(const ProcessGroup& group);
  ~Mailbox();
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;

  // Sends `bytes` (under 2 GiB) to rank `dest` with `tag` (0 to 32767); returns when `bytes` may
  // be changed again, which may be before `dest` has received them.
  void send(int dest, int tag, const std::string& bytes);
  // The next message from any rank, waiting for one.
  Message receive();
  // The same, waiting at most `seconds`: nullopt when none came in that time.
  std::optional<Message> receive_within(double seconds);
  // The next message from any rank if one has arrived; nullopt, at once, otherwise.
  std::optional<Message> poll();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::parallel
