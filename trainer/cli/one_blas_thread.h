// Keeps OpenBLAS from starting one spinning worker per CPU before main in the decoding tools: the
// process runs on one CPU while the libraries initialise.
#pragma once

#include <sched.h>

#include <cstring>
#include <initializer_list>

namespace tandem::cli::preinit {

// Included by the decoding tools' main files only (through decode_flags.h). They run OpenBLAS on
// one thread per decoding worker (load_models → configure_cpu_runtime), but OpenBLAS starts its
// thread pool while it is loaded, before main: one thread per CPU the process may run on, unless
// OPENBLAS_NUM_THREADS (or GOTO_/OMP_NUM_THREADS) says otherwise, and each idle worker then spins
// in sched_yield for a while (what that costs: docs/benchmarks.md).
// The environment cannot be changed in time (libc takes its copy after an executable's
// preinit_array runs, and the libraries' initialisers run after that), so the process runs on
// one CPU while the libraries initialise: preinit_array, which runs before any shared library's
// initialiser, narrows the CPU affinity to its first CPU, and a constructor of the executable,
// which runs after them all and before main, restores it. No library starts a thread of its own
// before main otherwise (strace: OpenBLAS's was the only one); OpenMP's default team size, which
// it reads from the affinity then, is not used by the decoding tools (cpu_count() is). A user who
// set one of the variables keeps their choice: nothing is narrowed.

inline cpu_set_t& saved_cpus() {
  static cpu_set_t cpus;
  return cpus;
}
inline bool& narrowed() {
  static bool value = false;
  return value;
}

inline bool sets_blas_threads(char** envp) {
  for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
    for (const char* name : {"OPENBLAS_NUM_THREADS=", "GOTO_NUM_THREADS=", "OMP_NUM_THREADS="}) {
      if (std::strncmp(*e, name, std::strlen(name)) == 0) return true;
    }
  }
  return false;
}

// Every translation unit that includes this header adds its own preinit_array entry and
// constructor (tandem-bench-decode has two): only the first narrows, and it alone saves the
// affinity to restore, so that a later one cannot save the narrowed set in its place.
inline void narrow_cpus(int /*argc*/, char** /*argv*/, char** envp) {
  cpu_set_t cpus;
  if (narrowed() || sets_blas_threads(envp) || sched_getaffinity(0, sizeof cpus, &cpus) != 0 ||
      CPU_COUNT(&cpus) < 2) {
    return;
  }
  cpu_set_t first;
  CPU_ZERO(&first);
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &cpus)) {
      CPU_SET(c, &first);
      break;
    }
  }
  saved_cpus() = cpus;
  narrowed() = sched_setaffinity(0, sizeof first, &first) == 0;
}

[[gnu::constructor]] static void restore_cpus() {
  if (narrowed()) sched_setaffinity(0, sizeof(cpu_set_t), &saved_cpus());
  narrowed() = false;
}

[[gnu::used,
  gnu::section(".preinit_array")]] static void (*const kNarrowCpus)(int, char**,
                                                                    char**) = &narrow_cpus;

}  // namespace tandem::cli::preinit

namespace tandem::cli {

// The CPUs (logical: hardware threads) this process may run on, its affinity, at least 1; what the
// decoding tools' --threads 0 means. (jobs::usable_cores counts physical cores, for pinning ranks.)
inline int cpu_count() {
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) != 0) return 1;
  return CPU_COUNT(&cpus) > 0 ? CPU_COUNT(&cpus) : 1;
}

}  // namespace tandem::cli
