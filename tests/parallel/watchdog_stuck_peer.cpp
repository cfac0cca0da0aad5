// Run by watchdog_stuck_peer.sh under mpirun -np 2: rank 1 skips a collective that rank 0 enters
// and blocks elsewhere, as a stuck peer does; rank 0's watchdog (2 s) must end the whole job.
// Usage: watchdog_stuck_peer sync|async (rank 0 waits in all_reduce_sum or all_reduce_sum_async).
#include <mpi.h>

#include <cstdio>
#include <string>

#include "trainer/parallel/process_group.h"

int main(int argc, char** argv) {
  tandem::parallel::ProcessGroup group(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "sync";
  tandem::parallel::Communicator& comm = group.cpu();
  comm.set_timeout(2.0);
  comm.barrier();  // collective #1: both ranks are up
  if (group.rank() == 1) {
    int never_sent = 0;
    MPI_Recv(&never_sent, 1, MPI_INT, 0, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (mode == "async") {
    torch::Tensor values = torch::ones({4});
    comm.all_reduce_sum_async(values)->fence();  // collective #2
  } else {
    comm.all_reduce_sum(1.0);  // collective #2
  }
  std::fprintf(stderr, "rank %d: the collective completed, which it cannot\n", group.rank());
  return 0;
}
