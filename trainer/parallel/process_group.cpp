#include "trainer/parallel/process_group.h"

#include <mpi.h>

#include <cstdlib>
#include <stdexcept>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#include <sanitizer/lsan_interface.h>
#define TANDEM_LSAN 1
#endif
#endif

#include "trainer/common/fnv_hash.h"
#include "trainer/common/log.h"
#include "trainer/parallel/mpi_communicator.h"

namespace tandem::parallel {
namespace {

// Ends every item, so {"ab"} and {"a", "b"} hash differently.
constexpr unsigned char kItemSeparator = 0;

bool mpi_initialized() {
  int flag = 0;
  MPI_Initialized(&flag);
  return flag != 0;
}

bool mpi_finalized() {
  int flag = 0;
  MPI_Finalized(&flag);
  return flag != 0;
}

// LeakSanitizer and Open MPI (ASan builds; docs/sanitizers.md). Open MPI opens plugins in
// MPI_Init, keeps some and closes the others, and closes the rest in MPI_Finalize; a block a
// plugin allocated is reported at exit with its stack ending in "<unknown module>" (the plugin is
// gone, and it has no frame pointers to walk past it), where no suppression can name it. So what
// MPI_Init allocates is not leak-checked (Open MPI keeps it until exit, by design), and the leak
// check runs before MPI_Finalize, while every plugin still has its name for lsan.supp to match.
#ifdef TANDEM_LSAN
using UncheckedForLeaks = __lsan::ScopedDisabler;
void check_leaks_now() { __lsan_do_leak_check(); }
#else
struct UncheckedForLeaks {};
void check_leaks_now() {}
#endif

void finalize_mpi() {
  check_leaks_now();
  MPI_Finalize();
}

// Without mpirun, Open MPI starts a singleton: a world of one, as the tools need.
void init_mpi(int* argc, char*** argv) {
  if (mpi_finalized()) {
    throw std::runtime_error(
        "ProcessGroup: MPI was already finalised in this process; "
        "create one ProcessGroup per process, first thing in main()");
  }
  // Open MPI unloads its plugins in MPI_Finalize. A plugin that patched other libraries' symbols
  // (UCX's memory hooks do) then leaves dangling pointers behind for the exit handlers of CUDA and
  // LibTorch; keeping them loaded is harmless. (Suspected cause of a crash at exit seen on a GPU
  // machine only, not yet confirmed there.) A value set by the user wins. Debian 12's Open MPI
  // 4.1.4 (the GPU bundle's too) has no such parameter (`ompi_info --all` lists none, and ASan's
  // module map at exit shows every plugin unloaded), so there it changes nothing.
  setenv("OMPI_MCA_mca_base_component_disable_dlclose", "1", /*overwrite=*/0);
  // Only the main thread calls MPI; the NCCL backend and the trainer do not need more.
  int provided = 0;
  int status = 0;
  {
    [[maybe_unused]] UncheckedForLeaks open_mpi_state;
    status = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  }
  if (status != MPI_SUCCESS) {
    throw std::runtime_error("ProcessGroup: MPI_Init_thread failed");
  }
  if (provided < MPI_THREAD_FUNNELED) {
    finalize_mpi();
    throw std::runtime_error("ProcessGroup: the MPI library does not provide MPI_THREAD_FUNNELED");
  }
}

}  // namespace

ProcessGroup::ProcessGroup(int* argc, char*** argv) {
  if (!mpi_initialized()) {
    init_mpi(argc, argv);
    owns_mpi_ = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);

  // Processes that can share memory are the ones on this host.
  MPI_Comm local = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &local_rank_);
  MPI_Comm_size(local, &local_size_);
  MPI_Comm_free(&local);

  log::set_rank(rank_, size_);
  cpu_ = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
}

ProcessGroup::~ProcessGroup() {
  cpu_.reset();
  if (owns_mpi_ && mpi_initialized() && !mpi_finalized()) finalize_mpi();
}

std::string ProcessGroup::hostname() const {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  return std::string(name, static_cast<size_t>(length));
}

Communicator& ProcessGroup::cpu() { return *cpu_; }

void ProcessGroup::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  // MPI_Abort does not return; if an MPI library ever did, still honour [[noreturn]].
  std::abort();
}

uint64_t stable_hash(const std::vector<std::string>& items) {
  uint64_t hash = kFnvOffsetBasis;
  for (const std::string& item : items) {
    hash = fnv1a(item.data(), item.size(), hash);
    hash = fnv1a(&kItemSeparator, 1, hash);
  }
  return hash;
}

jobs::RankSeat ProcessGroup::seat() {
  return {rank_, size_, hostname(), [this](int code) { abort(code); }};
}

}  // namespace tandem::parallel
