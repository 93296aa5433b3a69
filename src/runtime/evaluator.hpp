#pragma once
// Validation loss and text samples during training, as forward-only schedules run by the same
// executor and transport as training (schedule::forward_only, schedule::forward_one): no
// communication of its own. For the loss, every evaluation reads the same val-split samples (so
// the losses of different steps compare); each replica takes its share of every global batch,
// and the micro-batches flow through the training schedule's pipes in its order, pipelined.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "chimera/comm/communicators.hpp"
#include "chimera/comm/mpi.hpp"
#include "chimera/comm/mpi_transport.hpp"
#include "chimera/data/dataset.hpp"
#include "chimera/model/generate.hpp"
#include "chimera/model/worker.hpp"
#include "chimera/runtime/run_plan.hpp"
#include "chimera/schedule/program.hpp"
#include "executor.hpp"
#include "generation_stage_compute.hpp"
#include "inference_stage_compute.hpp"
#include "message_staging.hpp"
#include "schedule_batches.hpp"

namespace chimera::runtime {

class Evaluator {
 public:
  // Opens the val split on the ranks that read data; InputError if it is missing or too short.
  // Messages live where `staging` puts them (host memory, or GPU memory for CUDA-aware MPI).
  Evaluator(const RunPlan& plan, model::GPT2Worker& worker, MessageStaging& staging,
            const comm::Communicators& comms, comm::WaitPolicy wait_policy);
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Collective over the world: the mean validation loss (on every rank). The first call sets up
  // the validation transport (collective over each pipeline group).
  double evaluate();

  // Continues `prompt` by `count` tokens with replica 0's pipeline group, each stage keeping the
  // keys and values of its blocks: the window (the last T = data.seq_len tokens) goes through
  // the first pipe's stages once (a prefill, [P, C] messages), then each new token as one
  // position ([C] messages); the last stage's worker picks each token and broadcasts it to the
  // group. When the window is full, the next token prefills it again from its last T tokens.
  // Nothing runs on the other replicas, which return at once. Returns the tokens on the ranks of
  // replica 0 (empty elsewhere).
  std::vector<std::int32_t> sample(std::span<const std::int32_t> prompt, int count,
                                   model::TokenSampler& sampler);

 private:
  // A forward-only schedule with its program, transport and executor.
  struct Pass {
    schedule::Schedule schedule;
    schedule::Program program;
    comm::MpiTransport transport;
    Executor executor;
    Pass(schedule::Schedule s, const RunPlan& plan, const comm::Communicators& comms,
         comm::WaitPolicy wait_policy, StageCompute& compute);
  };

  Pass& pass(std::unique_ptr<Pass>& pass, schedule::Schedule (*make)(const schedule::Schedule&),
             StageCompute& compute);

  const RunPlan& plan_;
  model::GPT2Worker& worker_;
  const comm::Communicators& comms_;
  comm::WaitPolicy wait_policy_;
  InferenceStageCompute compute_;
  GenerationCaches caches_;
  GenerationStageCompute prefill_compute_, append_compute_;
  std::unique_ptr<Pass> validation_, prefill_, append_;
  ScheduleBatches batches_;  // the validation schedule reads the training one's micro-batches
  std::optional<data::TokenDataset> dataset_;
};

}  // namespace chimera::runtime
