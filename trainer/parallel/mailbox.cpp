#include "trainer/parallel/mailbox.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <thread>

// As in mpi_communicator.cpp, MPI calls are not checked one by one: MPI_ERRORS_ARE_FATAL ends the
// whole job on an MPI error. A peer that dies is mpirun's to notice: it ends the job.

namespace tandem::parallel {

struct Mailbox::Impl {
  MPI_Comm comm = MPI_COMM_NULL;  // the world's copy: its messages never meet the collectives'

  Message take(const MPI_Status& status) {
    int count = 0;
    MPI_Get_count(&status, MPI_CHAR, &count);
    Message message;
    message.source = status.MPI_SOURCE;
    message.tag = status.MPI_TAG;
    message.bytes.resize(static_cast<size_t>(count));
    MPI_Recv(message.bytes.data(), count, MPI_CHAR, status.MPI_SOURCE, status.MPI_TAG, comm,
             MPI_STATUS_IGNORE);
    return message;
  }
};

Mailbox::Mailbox(const ProcessGroup& /*group: MPI is initialised*/)
    : impl_(std::make_unique<Impl>()) {
  MPI_Comm_dup(MPI_COMM_WORLD, &impl_->comm);
}

Mailbox::~Mailbox() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&impl_->comm);
}

void Mailbox::send(int dest, int tag, const std::string& bytes) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    throw std::runtime_error("Mailbox::send: a message of " + std::to_string(bytes.size()) +
                             " bytes is over MPI's 2 GiB count");
  }
  MPI_Send(bytes.data(), static_cast<int>(bytes.size()), MPI_CHAR, dest, tag, impl_->comm);
}

Message Mailbox::receive() {
  MPI_Status status;
  MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, impl_->comm, &status);
  return impl_->take(status);
}

std::optional<Message> Mailbox::receive_within(double seconds) {
  // MPI has no probe with a deadline: look, then sleep a little longer each time, up to 5 ms.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    if (auto message = poll()) return message;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(5000));
  }
}

std::optional<Message> Mailbox::poll() {
  int arrived = 0;
  MPI_Status status;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, impl_->comm, &arrived, &status);
  if (!arrived) return std::nullopt;
  return impl_->take(status);
}

}  // namespace tandem::parallel
