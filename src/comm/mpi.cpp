#include "chimera/comm/mpi.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>

#include "chimera/comm/doorbell.hpp"
#include "chimera/comm/eager_over_tcp.hpp"
#include "chimera/comm/peer_probe.hpp"
#include "chimera/comm/rank_hosts.hpp"
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
  std::string transport_note;
  if (initialized == 0) {
    transport_note = send_eagerly_over_tcp();
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
  if (rank_ == 0 && !transport_note.empty()) log::info("{}", transport_note);
}

MpiSession::~MpiSession() {
  if (owns_) MPI_Finalize();
}

void abort_job(const std::string& message, int status) {
  log::write_stderr("error: " + message);
  // MPI_Abort asks the launcher to end every rank. Where a host is lost, the launcher may wait
  // for it (Slurm's PMIx abort propagation to a cut host times out only after minutes) and this
  // rank would outlive the job's end: it leaves on its own after a grace period that lets the
  // launcher end the others first.
  std::thread([status] {
    std::this_thread::sleep_for(std::chrono::seconds(5));
    std::_Exit(status);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);  // MPI_Abort does not return; this is for MPI implementations that do
}

namespace {
// A peer that never answers (a hung rank, a lost message) would otherwise hold the job until the
// scheduler's time limit: end it now, saying what this rank waited for.
[[noreturn]] void watchdog_expired(double waited_s, double limit_s, const WaitLabel& label) {
  const int rank = std::max(process_rank(), 0);
  abort_job(
      fmt::format("watchdog: rank {}{} waited {:.1f} s, more than runtime.watchdog_s ({:.0f} s), "
                  "in {}; a peer or its host is lost or stuck: ending the job with status 1 "
                  "(internal/system failure)",
                  rank, on_host(rank), waited_s, limit_s, label ? label() : std::string("a wait")),
      kExitInternal);
}
}  // namespace

void wait_until(WaitState (*test)(void*), void* arg, const WaitPolicy& policy,
                const Doorbells* bell, const WaitLabel& label, std::optional<Announced> announced) {
  double spin_until = -1.0;
  double sleep_us = 1.0;
  double started = -1.0;
  while (true) {
    // Read before the test: a ring after it changes the counter, and the sleep returns at once.
    const std::uint32_t seen = bell != nullptr ? bell->seen() : 0;
    const WaitState state = test(arg);
    if (state == WaitState::Done) return;
    answer_probes();  // a peer whose watchdog tripped asks who is still here
    const double now = now_seconds();
    if (started < 0.0) started = now;
    const double limit_s = policy.watchdog_limit_s();
    if (limit_s > 0.0 && now - started > limit_s) watchdog_expired(now - started, limit_s, label);
    if (spin_until < 0.0) spin_until = now + policy.spin_us * 1e-6;
    if (now < spin_until) continue;
    if (bell == nullptr) {
      sleep_seconds(sleep_us * 1e-6);
    } else {
      // The long sleep waits for a ring that is still to come. Once the sender has announced
      // its message, that message may be moving, in fragments that each need a test here while
      // the sender, having rung once, rings no more: then the sleeps stay short until it is in.
      const bool under_way =
          announced && bell->announced_by(announced->sender) != announced->received;
      bell->sleep(seen,
                  state == WaitState::Idle && !under_way ? policy.max_bell_sleep_us : sleep_us);
      // A ring says that something arrived; it may take a few tests to complete (a message
      // queued behind another), so test without sleeping for a moment again.
      if (bell->seen() != seen) {
        spin_until = -1.0;
        sleep_us = 1.0;
        continue;
      }
    }
    sleep_us = std::min(sleep_us * 2.0, policy.max_sleep_us);
  }
}

void wait(MPI_Request& request, const WaitPolicy& policy, bool (*poll)(void*), void* poll_arg,
          const Doorbells* bell, const WaitLabel& label, std::optional<Announced> announced) {
  struct Wait {
    MPI_Request& request;
    bool (*poll)(void*);
    void* poll_arg;
    bool first = true;
    bool busy = false;
  } w{request, poll, poll_arg};
  wait_until(
      [](void* self) {
        auto& x = *static_cast<Wait*>(self);
        // The first test comes before any poll, as a request that is already done needs none.
        if (!x.first && x.poll != nullptr) x.busy = x.poll(x.poll_arg);
        x.first = false;
        int done = 0;
        MPI_CHECK(MPI_Test(&x.request, &done, MPI_STATUS_IGNORE));
        if (done != 0) return WaitState::Done;
        return x.busy ? WaitState::Busy : WaitState::Idle;
      },
      &w, policy, bell, label, announced);
}

void barrier(MPI_Comm comm, const WaitPolicy& policy, const WaitLabel& label) {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ibarrier(comm, &request));
  wait(request, policy, nullptr, nullptr, nullptr, label);
}

}  // namespace chimera::comm
