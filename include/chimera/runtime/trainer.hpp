#pragma once
// `chimera train`: the whole training job on every rank of `world`. Setup steps that can fail
// (configuration, data, checkpoints) end every rank together with one message (AgreedError);
// a failure once training runs ends the job through MPI_Abort with the failing rank's message.
// SIGTERM or SIGUSR1 (Slurm's warning before a time limit) make every rank stop after the current
// step, save a checkpoint if a checkpoint directory is set, and exit normally.
#include <mpi.h>

#include <string>

#include "chimera/core/config.hpp"

namespace chimera::runtime {

struct TrainRequest {
  Config config;
  bool resume = false;       // continue from the latest checkpoint in checkpoint.dir
  std::string init;          // start from this checkpoint's weights (step 0, fresh optimizer)
};

void run_training(const TrainRequest& request, MPI_Comm world);

}  // namespace chimera::runtime
