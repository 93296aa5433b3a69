// main() for MPI GoogleTest executables. Every rank runs every test; rank 0 prints the usual
// report and the other ranks print only their failures (with a rank prefix). The exit status is
// the same on every rank: failed if any rank failed. A watchdog aborts the job with a message if
// a test hangs (a collective that some rank skipped), so CTest never waits on a silent hang.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "chimera/core/log.hpp"

namespace {

class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed()) {
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                   r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
    }
  }

 private:
  int rank_;
};

void on_alarm(int) {
  const char msg[] = "MPI test watchdog: no progress before the deadline (a hang?); aborting\n";
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg, sizeof(msg) - 1);
  std::abort();
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  chimera::log::set_rank(rank, size);

  const char* deadline = std::getenv("CHIMERA_TEST_DEADLINE_S");
  std::signal(SIGALRM, on_alarm);
  alarm(deadline != nullptr ? static_cast<unsigned>(std::atoi(deadline)) : 280U);

  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  const int local = RUN_ALL_TESTS();
  int any = 0;
  MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  alarm(0);
  MPI_Finalize();
  return any;
}
