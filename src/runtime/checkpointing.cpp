#include "checkpointing.hpp"

#include <fmt/format.h>

#include <string>

#include "background_write.hpp"
#include "chimera/comm/agreement.hpp"
#include "chimera/comm/deadline.hpp"
#include "chimera/comm/mpi.hpp"
#include "chimera/comm/peer_probe.hpp"
#include "chimera/comm/rank_hosts.hpp"
#include "chimera/core/error.hpp"
#include "chimera/core/log.hpp"
#include "chimera/core/timer.hpp"
#include "step_watchdog.hpp"

namespace chimera::runtime {

Checkpointing::Checkpointing(const Config& config, MPI_Comm world, int rank,
                             const HangHook& hang_hook, const comm::WaitPolicy& policy)
    : config_(config),
      world_(world),
      rank_(rank),
      hang_hook_(hang_hook),
      policy_(policy),
      directory_(config.checkpoint.dir, config.checkpoint.keep) {
  io::set_collective_wait([&policy](MPI_Request& request, MPI_Comm comm) {
    comm::wait(request, policy, nullptr, nullptr, nullptr, [comm] {
      return fmt::format("the checkpoint writer's agreement on a save{}",
                         comm::describe_silent_peers(comm));
    });
  });
}

void Checkpointing::claim_directory() {
  const std::string unwritable = directory_.prepare();
  CHIMERA_REQUIRE(unwritable.empty(), "{}", unwritable);
  lock_ = std::make_unique<io::DirectoryLock>(directory_.dir());
  if (!lock_->taken_over().empty())
    log::warn("{}: taking over the lock of a run that has ended: {}", directory_.dir(),
              lock_->taken_over());
}

bool Checkpointing::due(std::int64_t step, bool last, bool skipped) const {
  const int every = config_.checkpoint.every;
  return last || (!skipped && every > 0 && (step + 1) % every == 0);
}

namespace {

// Parallel HDF5 can wait forever when a rank's file system fails mid-save, and a background
// write can hang in the kernel: this bounds a save, from its start to its agreement.
std::unique_ptr<comm::Deadline> save_deadline(const io::CheckpointDirectory& directory,
                                              std::int64_t step, double limit_s) {
  return std::make_unique<comm::Deadline>(
      limit_s, [directory, target = directory.path_for_step(step), limit_s] {
        std::string cause = directory.vanished();
        if (cause.empty())
          cause = "a rank's file system may have failed in the middle of the write";
        return fmt::format(
            "saving {} has not finished after {:.0f} s (checkpoint.save_timeout_s): {}; ending "
            "the job, the previous checkpoints are intact",
            target, limit_s, cause);
      });
}

}  // namespace

std::unique_ptr<comm::Deadline> Checkpointing::enter_collective_phase(const char* phase,
                                                                      std::int64_t step) const {
  const double limit_s = policy_.watchdog_limit_s();
  if (limit_s <= 0.0) return nullptr;
  // The barrier names a peer that is gone (its probes go unanswered) the way a step's waits do,
  // and so do the phase's collectives and its agreement (agree_in_phase); the deadline covers
  // what no wait watches (the file system, parallel HDF5). Like a step's bound it runs
  // StepWatchdog::kStepBoundFactor times the waits' limit, so that a watched wait inside the
  // phase, which names the peer it waited for, ends the job first.
  comm::barrier(world_, policy_, [this, phase, step] {
    return fmt::format("the barrier before {} of step {}{}", phase, step,
                       comm::describe_silent_peers(world_));
  });
  const double bound_s = StepWatchdog::kStepBoundFactor * limit_s;
  return std::make_unique<comm::Deadline>(
      bound_s, [phase, target = directory_.path_for_step(step), bound_s] {
        return fmt::format(
            "watchdog: {} {} has not finished after {:.1f} s ({} x runtime.watchdog_s): a host "
            "or link of the job{} is lost, or a rank is stuck: ending the job with status 1 "
            "(internal/system failure); the previous checkpoints are intact",
            phase, target, bound_s, StepWatchdog::kStepBoundFactor, comm::job_hosts());
      });
}

void Checkpointing::agree_in_phase(const char* phase, std::int64_t step,
                                   const std::function<void()>& work) const {
  comm::all_or_none(world_, work, policy_, [this, phase, step] {
    return fmt::format("the agreement after {} of step {}{}", phase, step,
                       comm::describe_silent_peers(world_));
  });
}

struct Checkpointing::InFlight {
  std::int64_t step = 0;
  bool last = false;
  MPI_Comm comm = MPI_COMM_NULL;
  CheckpointSnapshot snapshot;
  io::CheckpointDirectory::StartedSave started;
  std::unique_ptr<comm::Deadline> deadline;
  double blocked_s = 0.0;  // the snapshot and the file's creation, on the training's path
  BackgroundWrite write;   // after `deadline`: destroyed (joined) while the deadline still runs
};

Checkpointing::~Checkpointing() {
  io::set_collective_wait({});
}

bool Checkpointing::tolerate(const comm::AgreedError& error, std::int64_t step, bool last) const {
  if (config_.checkpoint.on_save_error != SaveErrorPolicy::Warn || last) throw error;
  log::warn_once(
      "checkpoint of step {} not saved: {}; training goes on "
      "(checkpoint.on_save_error = warn), the previous checkpoint is intact",
      step, error.what());
  return false;
}

bool Checkpointing::save(TrainState& state, const io::CheckpointMeta& meta, bool last) {
  if (!config_.checkpoint.async) return save_now(state, meta, last);
  if (in_flight_) {
    const bool writing = !in_flight_->write.done();
    const std::int64_t previous = in_flight_->step;
    const Stopwatch waited;
    finish_in_flight();
    if (writing)
      log::info("the save of step {} waited {:.2f} s for the save of step {} to be written",
                meta.step, waited.seconds(), previous);
  }
  auto f = std::make_unique<InFlight>();
  f->step = meta.step;
  f->last = last;
  f->comm = state.save_comm();
  f->deadline = save_deadline(directory_, meta.step, config_.checkpoint.save_timeout_s);
  const Stopwatch blocked;
  try {
    const char* phase = "creating the checkpoint file";
    const auto bound = enter_collective_phase(phase, meta.step);
    agree_in_phase(phase, meta.step, [&] {
      hang_hook_.maybe_hang(rank_, meta.step, true);
      if (f->comm == MPI_COMM_NULL) return;
      f->snapshot = std::move(spare_snapshot_);
      state.snapshot(f->snapshot, /*live_if_host=*/true);
      f->started = directory_.begin_save(f->comm, f->snapshot.tensors, meta);
    });
  } catch (const comm::AgreedError& e) {
    return tolerate(e, meta.step, last);
  }
  f->write.start(f->started.temp_path, f->started.pieces,
                 f->snapshot.live ? &f->snapshot.host : nullptr);
  f->blocked_s = blocked.seconds();
  in_flight_ = std::move(f);
  return last ? finish_in_flight() : true;
}

void Checkpointing::before_update() {
  if (!in_flight_) return;
  const Stopwatch waited;
  in_flight_->write.wait_copied();
  in_flight_->blocked_s += waited.seconds();
}

void Checkpointing::poll() {
  if (!in_flight_) return;  // the same on every rank: saves are collective
  int done = in_flight_->write.done() ? 1 : 0;
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, &done, 1, MPI_INT, MPI_MIN, world_, &request));
  comm::wait(request, policy_, nullptr, nullptr, nullptr, [this, step = in_flight_->step] {
    return fmt::format("the check whether every rank has written the checkpoint of step {}{}", step,
                       comm::describe_silent_peers(world_));
  });
  if (done != 0) finish_in_flight();
}

void Checkpointing::finish_save_in_flight() {
  if (!in_flight_) return;
  const std::int64_t step = in_flight_->step;
  try {
    finish_in_flight();
  } catch (const comm::AgreedError& e) {
    log::warn_once("checkpoint of step {} not saved: {}", step, e.what());
  }
}

bool Checkpointing::finish_in_flight() {
  const std::unique_ptr<InFlight> f = std::move(in_flight_);
  const std::string written = f->write.wait();
  spare_snapshot_ = std::move(f->snapshot);  // the next save's buffers, whatever the outcome
  std::string path;
  const Stopwatch naming;
  try {
    const char* phase = "naming the checkpoint file";
    const auto bound = enter_collective_phase(phase, f->step);
    agree_in_phase(phase, f->step, [&] {
      if (f->comm != MPI_COMM_NULL) path = directory_.finish_save(f->comm, f->started, written);
    });
  } catch (const comm::AgreedError& e) {
    return tolerate(e, f->step, f->last);
  }
  log::info(
      "saved {} (training waited {:.2f} s for the snapshot and {:.2f} s to name the file; "
      "written in the background in {:.2f} s, {:.2f} s of it flushing to disk)",
      path, f->blocked_s, naming.seconds(), f->write.seconds(), f->write.flush_seconds());
  return true;
}

bool Checkpointing::save_now(TrainState& state, const io::CheckpointMeta& meta, bool last) {
  std::string path;
  const auto deadline = save_deadline(directory_, meta.step, config_.checkpoint.save_timeout_s);
  try {
    comm::all_or_none(world_, [&] {
      hang_hook_.maybe_hang(rank_, meta.step, true);
      path = state.save(directory_, meta);
    });
  } catch (const comm::AgreedError& e) {
    return tolerate(e, meta.step, last);
  }
  log::info("saved {}", path);
  return true;
}

}  // namespace chimera::runtime
