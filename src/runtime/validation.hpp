#pragma once
// The validation hook of the step loop (train.eval_every > 0, real compute): the validation loss
// before the first step and every train.eval_every steps, each followed by a text sample of
// log.sample_tokens tokens where asked for.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chimera/comm/communicators.hpp"
#include "chimera/comm/mpi.hpp"
#include "chimera/data/tokenizer.hpp"
#include "chimera/model/worker.hpp"
#include "chimera/runtime/run_plan.hpp"
#include "evaluator.hpp"
#include "message_staging.hpp"

namespace chimera::runtime {

class Validation {
 public:
  // Opens the val split; loads the sample prompt on replica 0 (InputError for a bad one).
  // `rank`: this world rank (rank 0 prints the samples).
  Validation(const RunPlan& plan, model::GPT2Worker& worker, MessageStaging& staging,
             const comm::Communicators& comms, comm::WaitPolicy wait_policy, int rank);

  // Collective, before `step` (0-based), the first of this invocation: where the run starts
  // from (fresh, --init or --resume), before any update.
  void before_training(std::int64_t step);
  // Collective, after `step`: its validation loss when one is due.
  std::optional<double> after_step(std::int64_t step);
  bool due(std::int64_t step) const { return (step + 1) % plan_.config.train.eval_every == 0; }
  // Collective over replica 0: a sample, the same seed every time so that samples of different
  // steps compare; rank 0 prints it.
  void print_sample(const std::string& when);

 private:
  void setup_sample_prompt();

  const RunPlan& plan_;
  int rank_;
  Evaluator evaluator_;
  std::vector<std::int32_t> sample_prompt_;   // replica 0, when log.sample_tokens > 0
  std::optional<data::Tokenizer> tokenizer_;  // replica 0, for GPT-2's vocabulary
};

}  // namespace chimera::runtime
