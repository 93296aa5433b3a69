#pragma once
// Validation loss and text samples during training: forward passes only, along the first pipe's
// placement. For the loss, every evaluation reads the same val-split samples (so the losses of
// different steps compare); each replica takes its share of every global batch. Micro-batches
// flow through the stages in order, each worker running its (micro-batch, stage) pairs in that
// same order, which cannot deadlock.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "chimera/comm/communicators.hpp"
#include "chimera/comm/mpi.hpp"
#include "chimera/data/dataset.hpp"
#include "chimera/model/generate.hpp"
#include "chimera/model/worker.hpp"
#include "chimera/runtime/run_plan.hpp"
#include "message_staging.hpp"

namespace chimera::runtime {

class Evaluator {
 public:
  // Opens the val split on the ranks that read data; InputError if it is missing or too short.
  // Messages live where `staging` puts them (host memory, or GPU memory for CUDA-aware MPI).
  Evaluator(const RunPlan& plan, model::GPT2Worker& worker, MessageStaging& staging,
            const comm::Communicators& comms, comm::WaitPolicy wait_policy);

  // Collective over the world: the mean validation loss (on every rank).
  double evaluate();

  // Continues `prompt` by `count` tokens with replica 0's pipeline group: for each new token,
  // the window (the last T = data.seq_len tokens) goes through the stages as row 0 of one
  // micro-batch, the last stage's worker picks the token and broadcasts it to the group. So a
  // sample costs `count` forwards of one micro-batch, stage after stage, and nothing on the other
  // replicas, which return at once. Returns the tokens on the ranks of replica 0 (empty
  // elsewhere). The model must keep its activations (no parallel.recompute).
  std::vector<std::int32_t> sample(std::span<const std::int32_t> prompt, int count,
                                   model::TokenSampler& sampler);

 private:
  // One micro-batch through this worker's stages of the first pipe, receiving and sending the
  // activations between workers. On the last stage, `at_last(slot)` runs between the forward and
  // the release of the slot. Returns the loss on the last stage, 0 elsewhere.
  float forward_through_pipe(std::span<const std::int32_t> inputs,
                             std::span<const std::int32_t> targets, int slot, MessageBuffer& in,
                             MessageBuffer& out, const std::function<void(int)>& at_last = {});

  const RunPlan& plan_;
  model::GPT2Worker& worker_;
  MessageStaging& staging_;
  const comm::Communicators& comms_;
  comm::WaitPolicy wait_policy_;
  std::optional<data::TokenDataset> dataset_;
  std::vector<int> mine_;  // stages of the first pipe on this worker, in order
};

}  // namespace chimera::runtime
