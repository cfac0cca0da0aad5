// The decoding tools' start on one CPU (one_blas_thread.h): narrowed before the libraries load,
// the whole affinity back before main, however many of a tool's files include the header.
#include "trainer/cli/one_blas_thread.h"

#include <gtest/gtest.h>

namespace tandem::cli {
namespace {

// tandem-bench-decode includes the header from two files, so its preinit_array holds two entries
// and it has two restoring constructors: the second entry used to save the narrowed affinity as
// the one to restore, and every one of its "2 threads" rows then ran on one CPU.
TEST(OneBlasThread, TwoIncludingFilesNarrowOnceAndRestoreTheWholeAffinity) {
  const int before = cpu_count();
  if (before < 2) GTEST_SKIP() << "one CPU: nothing to narrow";
  char* no_variables[] = {nullptr};
  preinit::narrow_cpus(0, nullptr, no_variables);  // the first file's preinit_array entry
  preinit::narrow_cpus(0, nullptr, no_variables);  // the second's
  EXPECT_EQ(cpu_count(), 1);
  preinit::restore_cpus();
  preinit::restore_cpus();
  EXPECT_EQ(cpu_count(), before);
}

TEST(OneBlasThread, AUsersBlasThreadCountLeavesTheAffinityAlone) {
  const int before = cpu_count();
  char variable[] = "OPENBLAS_NUM_THREADS=4";
  char* environment[] = {variable, nullptr};
  preinit::narrow_cpus(0, nullptr, environment);
  EXPECT_EQ(cpu_count(), before);
  preinit::restore_cpus();
  EXPECT_EQ(cpu_count(), before);
}

}  // namespace
}  // namespace tandem::cli
