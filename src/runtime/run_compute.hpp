#pragma once
// What a run computes with, chosen once from runtime.compute: real GPT-2 stages on a backend, or
// emulated stages (timed waits of runtime.cost, no weights). Each mode owns what it needs, the
// real one its backend, stages, trainable state and validation, so the step loop asks the mode
// rather than checking which one it runs.
#include <mpi.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chimera/comm/communicators.hpp"
#include "chimera/comm/local_rank.hpp"
#include "chimera/comm/mpi.hpp"
#include "chimera/comm/mpi_transport.hpp"
#include "chimera/runtime/run_plan.hpp"
#include "chimera/runtime/train_state.hpp"
#include "chimera/schedule/simulate.hpp"
#include "emulated_prediction.hpp"
#include "stage_compute.hpp"
#include "validation.hpp"

namespace chimera::runtime {

class RunCompute {
 public:
  virtual ~RunCompute() = default;

  // Collective over `world`: the mode plan.config.runtime.compute names, set up. A failure on
  // any rank (no GPU, a bad dataset) is agreed: every rank throws the same comm::AgreedError.
  static std::unique_ptr<RunCompute> make(const RunPlan& plan, MPI_Comm world,
                                          const comm::Communicators& comms,
                                          comm::WaitPolicy wait_policy,
                                          const comm::NodeLocalRank& local_rank, int rank);

  // The stages the executor runs.
  virtual StageCompute& stages() = 0;
  // How the transport sums gradients the GPU way (NCCL, host-staged MPI); empty for
  // MPI_Iallreduce on the buffers themselves.
  virtual comm::SumFactory sum_factory() { return {}; }
  // For the run's header line: "real", or "emulate (cost F:B ms)".
  virtual std::string describe() const = 0;
  // The costs the schedule's own bubble is simulated with.
  virtual schedule::Costs bubble_costs() const = 0;
  // The simulator's iteration time, where it predicts what the run measures (emulation), and
  // what it includes. `ranks_per_host`: the launcher's ranks per node.
  virtual std::optional<IterationPrediction> predicted(int ranks_per_host) const = 0;

  // The sum of squares of the gradients this rank owns (TrainState::local_grad_squares).
  virtual double local_grad_squares() = 0;
  // One optimizer update; `update` counts the updates made (skipped steps are none).
  virtual void optimizer_step(int update, double lr, double grad_scale) = 0;
  // Collective: the model stages whose gradients are not finite (TrainState).
  virtual std::vector<int> nonfinite_grad_stages() const = 0;

  // The weights and optimizer moments, for checkpoints and --init. Only real compute has them
  // (the trainer refuses checkpoints and --init with emulation); emulation throws.
  virtual TrainState& state() = 0;
  // This rank's copy of a tensor (Trainer::tensor); nullopt where it holds none.
  virtual std::optional<std::vector<float>> host_tensor(const std::string& name) const = 0;
  // The validation hook; null where train.eval_every = 0 (emulation has no weights to validate).
  virtual Validation* validation() = 0;
};

}  // namespace chimera::runtime
