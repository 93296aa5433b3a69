#pragma once
// MPI essentials: the check macro, the process-wide session, and waiting without spinning.
#include <mpi.h>

#include <string>

#include "chimera/core/error.hpp"

namespace chimera::comm {

[[noreturn]] void fail_mpi(const char* file, int line, const char* call, int code);

// MPI errors are returned (MPI_ERRORS_RETURN on our communicators) and turned into exceptions
// that carry file, line, rank and MPI's own error string.
#define MPI_CHECK(call)                                                    \
  do {                                                                     \
    const int mpi_check_rc_ = (call);                                      \
    if (mpi_check_rc_ != MPI_SUCCESS) [[unlikely]] {                       \
      ::chimera::comm::fail_mpi(__FILE__, __LINE__, #call, mpi_check_rc_); \
    }                                                                      \
  } while (0)

// Initialises MPI (thread level FUNNELED: only the main thread calls MPI; OpenMP threads
// compute), tells core's logging which rank this is, and finalizes on destruction.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  int rank_ = 0;
  int size_ = 1;
  bool owns_ = false;
};

// Ends every rank of the job now, after printing `message` (with this rank's prefix) once. Used
// when one rank fails mid-run: the others may be blocked in a collective and would otherwise hang.
[[noreturn]] void abort_job(const std::string& message, int status);

// How a wait behaves: spin on MPI_Test for `spin_us`, then sleep in growing steps up to
// `max_sleep_us`, so that 64 ranks waiting on a 2-core machine do not burn the cores.
struct WaitPolicy {
  double spin_us = 20.0;
  double max_sleep_us = 100.0;
};

// Waits for one request without monopolising a core. `poll` (may be empty) runs between tests:
// it is how outstanding sends and eager allreduces make progress during a wait.
void wait(MPI_Request& request, const WaitPolicy& policy, void (*poll)(void*) = nullptr,
          void* poll_arg = nullptr);
// The same wait for any condition: tests `done(arg)` until it is true.
void wait_until(bool (*done)(void*), void* arg, const WaitPolicy& policy);

}  // namespace chimera::comm
