#include "chimera/comm/mpi.hpp"

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>

#include "chimera/core/log.hpp"
#include "chimera/core/timer.hpp"

namespace chimera::comm {

void fail_mpi(const char* file, int line, const char* call, int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw Error(fmt::format("{}{}:{}: {} failed: {}", rank_prefix(), file, line, call,
                          std::string(text, static_cast<std::size_t>(len))));
}

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    owns_ = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  // Waits sleep in slices of microseconds (comm::wait, emulated ops); Linux's default timer slack
  // of 50 us would add that much to every slice. 1 us keeps sleeps close to what was asked.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  log::set_rank(rank_, size_);
}

MpiSession::~MpiSession() {
  if (owns_) MPI_Finalize();
}

void abort_job(const std::string& message, int status) {
  log::write_stderr("error: " + message);
  MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);  // MPI_Abort does not return; this is for MPI implementations that do
}

void wait_until(bool (*done)(void*), void* arg, const WaitPolicy& policy) {
  if (done(arg)) return;
  const double spin_until = now_seconds() + policy.spin_us * 1e-6;
  double sleep_us = 1.0;
  while (!done(arg)) {
    if (now_seconds() < spin_until) continue;
    const timespec ts{0, static_cast<long>(sleep_us * 1e3)};
    nanosleep(&ts, nullptr);
    sleep_us = std::min(sleep_us * 2.0, policy.max_sleep_us);
  }
}

void wait(MPI_Request& request, const WaitPolicy& policy, void (*poll)(void*), void* poll_arg) {
  struct Wait {
    MPI_Request& request;
    void (*poll)(void*);
    void* poll_arg;
    bool first = true;
  } w{request, poll, poll_arg};
  wait_until(
      [](void* self) {
        auto& x = *static_cast<Wait*>(self);
        // The first test comes before any poll, as a request that is already done needs none.
        if (!x.first && x.poll != nullptr) x.poll(x.poll_arg);
        x.first = false;
        int done = 0;
        MPI_CHECK(MPI_Test(&x.request, &done, MPI_STATUS_IGNORE));
        return done != 0;
      },
      &w, policy);
}

}  // namespace chimera::comm
