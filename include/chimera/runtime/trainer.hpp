#pragma once
// `chimera train`: the whole training job on every rank of `world`. Setup steps that can fail
// (configuration, data, checkpoints) end every rank together with one message (AgreedError);
// a failure once training runs ends the job through MPI_Abort with the failing rank's message.
// SIGTERM or SIGUSR1 (Slurm's warning before a time limit) make every rank stop after the current
// step, save a checkpoint if a checkpoint directory is set, and exit normally.
#include <mpi.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chimera/core/config.hpp"

namespace chimera::runtime {

struct TrainRequest {
  Config config;
  bool resume = false;  // continue from the latest checkpoint in checkpoint.dir
  std::string init;     // start from this checkpoint's weights (step 0, fresh optimizer)
  int stop_after = 0;   // run at most this many steps now, then checkpoint (0: no limit)
};

class Trainer {
 public:
  // Collective over `world`: validates the configuration, builds the stages, opens the data,
  // loads a checkpoint if asked to.
  Trainer(const TrainRequest& request, MPI_Comm world);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Collective: trains until train.steps (or a stop signal).
  void run();

  // The global-batch loss of every step run so far (the same on every rank).
  const std::vector<double>& losses() const;
  // This rank's copy of a tensor in Hugging Face layout (weights, or an AdamW moment named
  // optim/exp_avg/<name>, optim/exp_avg_sq/<name>); nullopt when this rank holds no copy.
  std::optional<std::vector<float>> tensor(const std::string& name) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace chimera::runtime
