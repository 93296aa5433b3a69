#pragma once
// Validation loss: forward passes only, along the first pipe's placement, over the same
// val-split samples at every evaluation (so the losses of different steps compare). Each replica
// takes its share of every global batch; micro-batches flow through the stages in order, each
// worker running its (micro-batch, stage) pairs in that same order, which cannot deadlock.
#include <optional>

#include "chimera/comm/communicators.hpp"
#include "chimera/comm/mpi.hpp"
#include "chimera/data/dataset.hpp"
#include "chimera/model/worker.hpp"
#include "chimera/runtime/message_staging.hpp"
#include "chimera/runtime/run_plan.hpp"

namespace chimera::runtime {

class Evaluator {
 public:
  // Opens the val split on the ranks that read data; InputError if it is missing or too short.
  // Messages live where `staging` puts them (host memory, or GPU memory for CUDA-aware MPI).
  Evaluator(const RunPlan& plan, model::GPT2Worker& worker, MessageStaging& staging,
            const comm::Communicators& comms, comm::WaitPolicy wait_policy);

  // Collective over the world: the mean validation loss (on every rank).
  double evaluate();

 private:
  const RunPlan& plan_;
  model::GPT2Worker& worker_;
  MessageStaging& staging_;
  const comm::Communicators& comms_;
  comm::WaitPolicy wait_policy_;
  std::optional<data::TokenDataset> dataset_;
};

}  // namespace chimera::runtime
