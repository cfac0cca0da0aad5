// GoogleTest main for tests under mpirun: every rank runs every test, only rank 0 prints the
// report (other ranks print just their failures), and the exit status fails if any rank failed.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "tests/common/mpi_test.h"

namespace tandem::test {
namespace {

parallel::ProcessGroup* g_group = nullptr;

// Replaces the default printer on ranks != 0, so their failures still reach the log, with the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "unknown", result.line_number(),
                 result.message());
    std::fflush(stderr);
  }

 private:
  int rank_;
};

}  // namespace

parallel::ProcessGroup& process_group() { return *g_group; }

}  // namespace tandem::test

int main(int argc, char** argv) {
  tandem::parallel::ProcessGroup group(&argc, &argv);
  tandem::test::g_group = &group;
  ::testing::InitGoogleTest(&argc, argv);
  if (group.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new tandem::test::FailurePrinter(group.rank()));
  }
  const double local_failed = RUN_ALL_TESTS() != 0 ? 1.0 : 0.0;
  // Every rank must agree on the status, or mpirun/CTest could report success for a failing rank.
  const double ranks_failed = group.cpu().all_reduce_sum(local_failed);
  if (group.rank() == 0 && ranks_failed > 0) {
    std::fprintf(stderr, "FAILED on %g of %d ranks (their failures are the [rank N] lines)\n",
                 ranks_failed, group.size());
  }
  return ranks_failed > 0 ? 1 : 0;
}
