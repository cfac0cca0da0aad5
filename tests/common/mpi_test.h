// For tests run under mpirun (tandem_mpi_test): the process group that tests/common/mpi_main.cpp
// created before running them.
#pragma once

#include "trainer/parallel/process_group.h"

namespace tandem::test {

tandem::parallel::ProcessGroup& process_group();

}  // namespace tandem::test
