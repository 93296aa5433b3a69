#pragma once
// MPI essentials: the check macro, the process-wide session, and waiting without spinning.
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
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

class Doorbells;

// How a wait behaves: test for `spin_us`, then sleep between tests. A sleep lasts at most
// `max_sleep_us` (growing from 1 us) while something needs this rank's MPI progress (an eager
// allreduce, a send) or no doorbell can announce the awaited event; with a doorbell and nothing
// else to progress, a sleep lasts until the bell rings or `max_bell_sleep_us` passes. So 64
// ranks waiting on a 2-core machine neither burn the cores nor answer late.
struct WaitPolicy {
  double spin_us = 20.0;
  double max_sleep_us = 100.0;
  double max_bell_sleep_us = 2000.0;
  bool doorbells = true;  // runtime.wait: doorbell (true) or poll (false)
  // runtime.watchdog_s: a single wait longer than this ends the job through abort_job, naming
  // the wait (0 = off). Only waits are watched: compute, and the few blocking collectives left
  // (setup, validation's), never trip it. `derived_watchdog_s`, where set, replaces it with a limit
  // the run derives from its step times as it goes (runtime/step_watchdog.hpp); every copy of the
  // policy reads the same value.
  double watchdog_s = 0.0;
  const std::atomic<double>* derived_watchdog_s = nullptr;

  double watchdog_limit_s() const {
    return derived_watchdog_s != nullptr ? derived_watchdog_s->load(std::memory_order_relaxed)
                                         : watchdog_s;
  }
};

// What a wait is for, built only when the watchdog trips: "recv of the activation of stage 1,
// micro-batch 3 from rank 1 (step 7)".
using WaitLabel = std::function<std::string()>;

// What one test during a wait found.
enum class WaitState {
  Done,
  Idle,  // not done; nothing but the awaited event needs this rank (a doorbell may sleep long)
  Busy,  // not done; outstanding work needs this rank's MPI progress (sleep short)
};

// For a wait on a receive from a rank of this node: that rank, and how many of its messages this
// rank has received so far. While the sender has announced more (Doorbells::announced_by), one
// of its messages is under way, most likely the one awaited.
struct Announced {
  int sender = -1;
  std::uint32_t received = 0;
};

// Waits until `test(arg)` says Done, without monopolising a core. `bell` (may be null) is this
// rank's doorbell when whoever completes the awaited event rings it. `label` names the wait in
// the watchdog's message. `announced`: while the sender has a message under way, that message
// may need this rank's tests to move, and the wait does not sleep long on the bell.
void wait_until(WaitState (*test)(void*), void* arg, const WaitPolicy& policy,
                const Doorbells* bell = nullptr, const WaitLabel& label = {},
                std::optional<Announced> announced = std::nullopt);

// Waits for one request. `poll` (may be empty) runs between tests: it is how outstanding sends
// and eager allreduces make progress during a wait, and it returns whether any of them still
// needs this rank's progress.
void wait(MPI_Request& request, const WaitPolicy& policy, bool (*poll)(void*) = nullptr,
          void* poll_arg = nullptr, const Doorbells* bell = nullptr, const WaitLabel& label = {},
          std::optional<Announced> announced = std::nullopt);

// A barrier over `comm` whose wait is a wait like the others: watched by the watchdog, and
// answering the probes of a peer stuck elsewhere (peer_probe.hpp). Before a step's reductions,
// it keeps a rank that got ahead of a lost peer waiting where it answers.
void barrier(MPI_Comm comm, const WaitPolicy& policy, const WaitLabel& label);

}  // namespace chimera::comm
