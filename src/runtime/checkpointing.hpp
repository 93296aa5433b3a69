#pragma once
// The checkpoint hook of the step loop (checkpoint.dir set): when a step is saved, and the save
// itself, bounded by checkpoint.save_timeout_s and agreed on by every rank.
#include <mpi.h>

#include <cstdint>
#include <memory>

#include "chimera/core/config.hpp"
#include "chimera/io/checkpoint.hpp"
#include "chimera/io/directory_lock.hpp"
#include "chimera/runtime/train_state.hpp"
#include "hang_hook.hpp"

namespace chimera::runtime {

class Checkpointing {
 public:
  Checkpointing(const Config& config, MPI_Comm world, int rank, const HangHook& hang_hook);

  io::CheckpointDirectory& directory() { return directory_; }

  // Rank 0, at setup: creates the directory, checks that it is writable, and takes its lock for
  // the run's lifetime (io::DirectoryLock: one job per checkpoint directory). InputError naming
  // the problem, or the live holder of the lock.
  void claim_directory();

  // Whether step `step` (0-based) is saved: the last of this invocation always; otherwise every
  // checkpoint.every steps, except a skipped step, which changed nothing: a periodic save of it
  // would only rotate older checkpoints away while the run may be diverging.
  bool due(std::int64_t step, bool last, bool skipped) const;

  // Saves a checkpoint of `state`; every rank agrees on the outcome. A failure stops the run
  // (status 1), or with checkpoint.on_save_error = warn is reported and the next save tries
  // again; the last save of a run (the end, a signal, --stop-after) has no next one, so its
  // failure always stops the run. Returns whether the checkpoint was written.
  bool save(TrainState& state, const io::CheckpointMeta& meta, bool last);

 private:
  const Config& config_;
  MPI_Comm world_;
  int rank_;
  const HangHook& hang_hook_;
  io::CheckpointDirectory directory_;
  std::unique_ptr<io::DirectoryLock> lock_;  // rank 0's
};

}  // namespace chimera::runtime
