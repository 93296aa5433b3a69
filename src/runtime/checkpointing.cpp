#include "checkpointing.hpp"

#include <fmt/format.h>

#include <string>

#include "chimera/comm/agreement.hpp"
#include "chimera/comm/deadline.hpp"
#include "chimera/core/error.hpp"
#include "chimera/core/log.hpp"

namespace chimera::runtime {

Checkpointing::Checkpointing(const Config& config, MPI_Comm world, int rank,
                             const HangHook& hang_hook)
    : config_(config),
      world_(world),
      rank_(rank),
      hang_hook_(hang_hook),
      directory_(config.checkpoint.dir, config.checkpoint.keep) {}

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

bool Checkpointing::save(TrainState& state, const io::CheckpointMeta& meta, bool last) {
  std::string path;
  const double limit_s = config_.checkpoint.save_timeout_s;
  const std::string target = directory_.path_for_step(meta.step);
  // Parallel HDF5 can wait forever when a rank's file system fails mid-save; this bounds it.
  const comm::Deadline deadline(limit_s, [directory = directory_, target, limit_s] {
    std::string cause = directory.vanished();
    if (cause.empty()) cause = "a rank's file system may have failed in the middle of the write";
    return fmt::format(
        "saving {} has not finished after {:.0f} s (checkpoint.save_timeout_s): {}; ending the "
        "job, the previous checkpoints are intact",
        target, limit_s, cause);
  });
  try {
    comm::all_or_none(world_, [&] {
      hang_hook_.maybe_hang(rank_, meta.step, true);
      path = state.save(directory_, meta);
    });
  } catch (const comm::AgreedError& e) {
    if (config_.checkpoint.on_save_error != SaveErrorPolicy::Warn || last) throw;
    log::warn_once(
        "checkpoint of step {} not saved: {}; training goes on "
        "(checkpoint.on_save_error = warn), the previous checkpoint is intact",
        meta.step, e.what());
    return false;
  }
  log::info("saved {}", path);
  return true;
}

}  // namespace chimera::runtime
