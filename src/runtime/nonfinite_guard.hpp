#pragma once
// The step's loss and gradient norm, and what a non-finite one means (train.on_nonfinite):
// stop the run (status 3) without applying or saving anything of the step, or skip its update,
// up to train.max_skipped_steps in a row.
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "chimera/comm/mpi.hpp"
#include "chimera/core/config.hpp"
#include "executor.hpp"

namespace chimera::runtime {

struct LossAndNorm {
  double loss = 0.0;
  double grad_norm = 0.0;
  bool finite() const { return std::isfinite(loss) && std::isfinite(grad_norm); }
};

// Collective: the global-batch loss and the global gradient norm in one reduction (the norm's,
// which clipping needs anyway). Reduced to rank 0 and broadcast, so every rank holds the same
// bits: every replica applies the same clip factor, and every rank reaches the same verdict on
// whether the step is finite (a NaN in a sum stays NaN, an Inf in a sum of squares stays Inf).
// Non-blocking, awaited by `policy`'s sleeping, watched wait (`label` names it if it trips): a
// blocking collective polls a core the whole time, which on cores shared by several ranks
// delays the very peers it waits for by a scheduler slice per round.
LossAndNorm reduce_loss_and_norm(MPI_Comm world, const IterationResult& r, double grad_squares,
                                 const comm::WaitPolicy& policy, const comm::WaitLabel& label);

class NonfiniteGuard {
 public:
  // `skipped_steps`: the updates a resumed run had left out already.
  NonfiniteGuard(const TrainConfig& train, std::int64_t skipped_steps);

  struct Verdict {
    bool finite = true;  // apply the update
    bool skip = false;   // not finite, and train.on_nonfinite = skip leaves the update out
  };
  // Counts the step: a finite one ends a run of skips, a skipped one extends it.
  Verdict judge(const LossAndNorm& v);

  // For a step that was not finite, once it is logged: a DivergedError naming where the value
  // came from (`bad_stages`: TrainState::nonfinite_grad_stages) and what is kept (`kept`), or,
  // for a skipped step within train.max_skipped_steps, a warning.
  void enforce(std::int64_t step, const LossAndNorm& v, int stages,
               const std::vector<int>& bad_stages, const std::string& kept) const;

  std::int64_t skipped_steps() const { return skipped_steps_; }

 private:
  NonfinitePolicy policy_;
  int max_consecutive_;
  std::int64_t skipped_steps_;  // in all, the run's earlier invocations included
  int consecutive_ = 0;
};

}  // namespace chimera::runtime
