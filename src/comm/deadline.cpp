#include "chimera/comm/deadline.hpp"

#include "chimera/comm/mpi.hpp"
#include "chimera/core/error.hpp"  // process_rank, kExitInternal

namespace chimera::comm {

Deadline::Deadline(double limit_s, std::function<std::string()> describe) {
  if (limit_s <= 0.0) return;
  // Every rank of a stuck job trips its own deadline at about the same time. Rank 0 (or the only
  // rank) says what happened; the others give it a head start, so the job ends with its one
  // line, and only speak themselves when rank 0 cannot (it is gone or stuck elsewhere).
  const double grace_s = process_rank() > 0 ? 1.0 + 0.1 * limit_s : 0.0;
  const auto limit = std::chrono::duration<double>(limit_s + grace_s);
  watcher_ = std::thread([this, limit, describe = std::move(describe)] {
    std::unique_lock lock(mutex_);
    if (done_changed_.wait_for(lock, limit, [this] { return done_; })) return;
    lock.unlock();
    // MPI_Abort from a thread other than the one in MPI: outside MPI_THREAD_FUNNELED's letter,
    // but Open MPI and MPICH end the job from any thread, and the alternative is a job that
    // holds its nodes until the scheduler's time limit.
    abort_job(describe(), kExitInternal);
  });
}

Deadline::~Deadline() {
  if (!watcher_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  done_changed_.notify_all();
  watcher_.join();
}

}  // namespace chimera::comm
