#pragma once
// The checkpoint hook of the step loop (checkpoint.dir set): when a step is saved, and the save
// itself, bounded by checkpoint.save_timeout_s and agreed on by every rank.
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "chimera/comm/agreement.hpp"
#include "chimera/comm/deadline.hpp"
#include "chimera/comm/mpi.hpp"
#include "chimera/core/config.hpp"
#include "chimera/io/checkpoint.hpp"
#include "chimera/io/directory_lock.hpp"
#include "chimera/runtime/train_state.hpp"
#include "hang_hook.hpp"

namespace chimera::runtime {

class Checkpointing {
 public:
  // The collective parts of an asynchronous save (creating the file, the check in poll(),
  // naming the file) are bounded as the training's waits are, by `policy` (which must outlive
  // this object): the checkpoint code's own agreements (io::set_collective_wait, installed for
  // this object's lifetime) and poll()'s reduction are waits under it (watched, answering
  // probes); before creating and before naming the file every rank meets the others in a watched
  // barrier; and what cannot be watched in between ends the job past its watchdog limit
  // (runtime.watchdog_s; off: 0). A host lost while the others save then ends the job as fast
  // as one lost during a step; the background write itself, which may take long, stays bounded
  // by checkpoint.save_timeout_s.
  Checkpointing(const Config& config, MPI_Comm world, int rank, const HangHook& hang_hook,
                const comm::WaitPolicy& policy);

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
  // failure always stops the run. Returns whether the checkpoint was written (asynchronous: its
  // write started, or for the last save, written).
  //
  // checkpoint.async: the state is copied to a host snapshot and the file created (collective,
  // on this thread), then a helper thread writes the values while training goes on (at most one
  // save in flight: a save waits for the one before, and says so). poll() finishes it: once
  // every rank's write has ended, the ranks agree and only then is the file renamed and
  // `latest` moved, so a crash before leaves the previous checkpoint named.
  bool save(TrainState& state, const io::CheckpointMeta& meta, bool last);

  // Before the state changes (the optimizer step): waits until the save in flight has its
  // snapshot (the helper thread copies the live state while the step computes).
  void before_update();

  // Every step, on every rank (collective over the world while a save is in flight): finishes
  // the save in flight when every rank's write has ended, reporting a failure as save() does.
  void poll();

  // Collective: finishes the save in flight, if any, for a run that ends with another error on
  // every rank (divergence); its failure is a warning, not thrown.
  void finish_save_in_flight();

  ~Checkpointing();  // waits for a write in flight (a run ending in error does not name it)

 private:
  const Config& config_;
  MPI_Comm world_;
  int rank_;
  const HangHook& hang_hook_;
  const comm::WaitPolicy& policy_;
  // Starts a collective phase of a save: meets every rank in a watched barrier, then returns
  // the bound on the phase (null when the watchdog is off).
  std::unique_ptr<comm::Deadline> enter_collective_phase(const char* phase,
                                                         std::int64_t step) const;
  // Runs `work` on every rank of the phase and agrees on its outcome in a watched wait
  // (comm::all_or_none with the wait policy).
  void agree_in_phase(const char* phase, std::int64_t step,
                      const std::function<void()>& work) const;
  struct InFlight;
  bool save_now(TrainState& state, const io::CheckpointMeta& meta, bool last);
  bool finish_in_flight();
  // A failed save: rethrows `error` unless checkpoint.on_save_error = warn lets training go on.
  bool tolerate(const comm::AgreedError& error, std::int64_t step, bool last) const;

  io::CheckpointDirectory directory_;
  std::unique_ptr<InFlight> in_flight_;
  // The snapshot buffers of the last save, kept for the next (memory: one snapshot).
  CheckpointSnapshot spare_snapshot_;
  std::unique_ptr<io::DirectoryLock> lock_;  // rank 0's
};

}  // namespace chimera::runtime
