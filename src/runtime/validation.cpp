#include "validation.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "chimera/core/error.hpp"
#include "chimera/core/log.hpp"
#include "chimera/model/generate.hpp"

namespace chimera::runtime {

Validation::Validation(const RunPlan& plan, model::GPT2Worker& worker, MessageStaging& staging,
                       const comm::Communicators& comms, comm::WaitPolicy wait_policy, int rank)
    : plan_(plan), rank_(rank), evaluator_(plan, worker, staging, comms, wait_policy) {
  if (plan.config.log.sample_tokens > 0 && plan.topology.replica == 0) setup_sample_prompt();
}

// The prompt of the samples printed during training: text through GPT-2's tokenizer (empty:
// the end-of-text token, as llm.c starts its samples), or ids for other vocabularies.
void Validation::setup_sample_prompt() {
  const LogConfig& log = plan_.config.log;
  if (plan_.model.vocab_size == data::kGpt2VocabSize) {
    tokenizer_.emplace(data::Tokenizer::load(log.tokenizer));
    sample_prompt_ = log.sample_prompt.empty() ? std::vector{tokenizer_->eos_token()}
                                               : tokenizer_->encode(log.sample_prompt);
  } else {
    sample_prompt_ =
        model::parse_token_ids(log.sample_prompt, plan_.model.vocab_size, "log.sample_prompt");
    if (log.sample_prompt.find_first_not_of(" ,\t\n") == std::string::npos) sample_prompt_ = {0};
  }
  CHIMERA_REQUIRE(!sample_prompt_.empty(), "log.sample_prompt = \"{}\" has no token",
                  log.sample_prompt);
}

void Validation::before_training(std::int64_t step) {
  log::info("validation loss before step {}: {:.6f}", step + 1, evaluator_.evaluate());
  print_sample(fmt::format("before step {}", step + 1));
}

std::optional<double> Validation::after_step(std::int64_t step) {
  if (!due(step)) return std::nullopt;
  return evaluator_.evaluate();
}

void Validation::print_sample(const std::string& when) {
  const Config& config = plan_.config;
  if (config.log.sample_tokens == 0) return;
  model::TokenSampler sampler(
      model::SamplingOptions{1.0, 0, static_cast<std::uint64_t>(config.train.seed)});
  const auto generated = evaluator_.sample(sample_prompt_, config.log.sample_tokens, sampler);
  if (rank_ != 0) return;
  std::string text;
  if (tokenizer_) {
    std::vector<std::int32_t> shown;
    if (!config.log.sample_prompt.empty()) shown = sample_prompt_;
    shown.insert(shown.end(), generated.begin(), generated.end());
    text = tokenizer_->decode(shown);
  } else {
    text = fmt::format("{}", fmt::join(generated, " "));
  }
  log::info("sample {}: {}", when, text);
}

}  // namespace chimera::runtime
