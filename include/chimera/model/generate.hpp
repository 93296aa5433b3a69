#pragma once
// Text continuation with a trained GPT-2: choosing each next token from the logits (greedy, or
// sampled with a temperature and top-k), and the loop that runs it on one worker holding the
// whole model with a key/value cache (kv_cache.hpp): the prompt runs once, each new token one
// position.
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <string_view>
#include <vector>

#include "chimera/model/worker.hpp"

namespace chimera::model {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy (the most likely token, the lowest id on ties)
  int top_k = 0;             // sample among the k most likely tokens (0: all)
  std::uint64_t seed = 1337;
  // InputError naming the flag (--temperature, --top-k) when out of range.
  void validate() const;
};

// Picks next tokens from logits; the same seed gives the same choices for the same logits.
class TokenSampler {
 public:
  explicit TokenSampler(const SamplingOptions& options);
  std::int32_t next(std::span<const float> logits);

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
  std::vector<std::int32_t> order_;  // scratch: candidate ids
};

// The last `n_ctx` tokens: a prompt longer than the model's context keeps its end.
std::span<const std::int32_t> context_window(std::span<const std::int32_t> tokens, int n_ctx);

// Token ids written as text, "464 3290 318" (spaces or commas), each checked against the
// vocabulary. InputError naming `what` (the flag or config key) otherwise.
std::vector<std::int32_t> parse_token_ids(std::string_view text, int vocab_size,
                                          std::string_view what);

// Continues `prompt` by `count` tokens. `worker` must hold every stage of a one-stage partition;
// its sequence length T is the longest window (the last T tokens of
// the sequence condition each new one; once the sequence is longer, the cache is rebuilt from
// its last T tokens for every new token). Only the worker's weights are used.
// `on_token` sees each new token as it is chosen.
std::vector<std::int32_t> generate(GPT2Worker& worker, std::span<const std::int32_t> prompt,
                                   int count, TokenSampler& sampler,
                                   const std::function<void(std::int32_t)>& on_token = {});

}  // namespace chimera::model
