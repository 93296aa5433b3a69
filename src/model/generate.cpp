#include "chimera/model/generate.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "chimera/core/error.hpp"
#include "chimera/model/kv_cache.hpp"

namespace chimera::model {

void SamplingOptions::validate() const {
  CHIMERA_REQUIRE(std::isfinite(temperature) && temperature >= 0,
                  "--temperature {} must be a number >= 0 (0 = greedy)", temperature);
  CHIMERA_REQUIRE(top_k >= 0, "--top-k {} must be >= 0 (0 = every token)", top_k);
}

TokenSampler::TokenSampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {
  options_.validate();
}

std::int32_t TokenSampler::next(std::span<const float> logits) {
  CHIMERA_CHECK(!logits.empty(), "no logits to sample from");
  const auto V = static_cast<std::int32_t>(logits.size());
  if (options_.temperature == 0.0) {
    return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) -
                                     logits.begin());
  }
  order_.resize(logits.size());
  for (std::int32_t i = 0; i < V; ++i) order_[static_cast<std::size_t>(i)] = i;
  std::size_t k = logits.size();
  const auto more_likely = [&](std::int32_t a, std::int32_t b) {
    const float la = logits[static_cast<std::size_t>(a)], lb = logits[static_cast<std::size_t>(b)];
    return la != lb ? la > lb : a < b;
  };
  if (options_.top_k > 0 && static_cast<std::size_t>(options_.top_k) < k) {
    k = static_cast<std::size_t>(options_.top_k);
    std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(k), order_.end(),
                      more_likely);
  }
  const double top = logits[static_cast<std::size_t>(*std::min_element(
      order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(k), more_likely))];
  std::vector<double> weights(k);
  double total = 0.0;
  for (std::size_t i = 0; i < k; ++i) {
    total += std::exp((logits[static_cast<std::size_t>(order_[i])] - top) / options_.temperature);
    weights[i] = total;
  }
  // 53 random bits: a uniform double in [0, 1) that does not depend on the standard library.
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * total;
  const auto chosen = std::upper_bound(weights.begin(), weights.end(), u) - weights.begin();
  return order_[static_cast<std::size_t>(
      std::min<std::ptrdiff_t>(chosen, static_cast<std::ptrdiff_t>(k) - 1))];
}

std::span<const std::int32_t> context_window(std::span<const std::int32_t> tokens, int n_ctx) {
  const auto keep = std::min(tokens.size(), static_cast<std::size_t>(n_ctx));
  return tokens.subspan(tokens.size() - keep);
}

std::vector<std::int32_t> parse_token_ids(std::string_view text, int vocab_size,
                                          std::string_view what) {
  std::vector<std::int32_t> ids;
  const auto separator = [](char c) { return c == ' ' || c == ',' || c == '\t' || c == '\n'; };
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    if (separator(*p)) {
      ++p;
      continue;
    }
    std::int64_t id = -1;
    const auto [next, ec] = std::from_chars(p, end, id);
    CHIMERA_REQUIRE(ec == std::errc() && (next == end || separator(*next)),
                    "{} \"{}\": expected token ids separated by spaces, e.g. \"464 3290\"", what,
                    text);
    CHIMERA_REQUIRE(id >= 0 && id < vocab_size,
                    "{}: token {} is outside the model's vocabulary [0, {})", what, id, vocab_size);
    ids.push_back(static_cast<std::int32_t>(id));
    p = next;
  }
  return ids;
}

std::vector<std::int32_t> generate(GPT2Worker& worker, std::span<const std::int32_t> prompt,
                                   int count, TokenSampler& sampler,
                                   const std::function<void(std::int32_t)>& on_token) {
  const Dims& dims = worker.dims();
  CHIMERA_CHECK(worker.layout().partition().num_stages() == 1,
                "generation with a cache runs on one worker holding the whole model");
  CHIMERA_CHECK(!prompt.empty(), "generation needs at least one prompt token");
  CachedDecoder decoder(worker, static_cast<int>(dims.T));
  std::vector<std::int32_t> sequence(prompt.begin(), prompt.end()), generated;
  std::vector<float> logits(static_cast<std::size_t>(dims.V));
  decoder.prefill(context_window(sequence, decoder.capacity()), logits);
  for (int i = 0; i < count; ++i) {
    const std::int32_t token = sampler.next(logits);
    sequence.push_back(token);
    generated.push_back(token);
    if (on_token) on_token(token);
    if (i + 1 == count) break;
    if (decoder.positions() < decoder.capacity()) {
      decoder.append(token, logits);
    } else {
      decoder.prefill(context_window(sequence, decoder.capacity()), logits);
    }
  }
  return generated;
}

}  // namespace chimera::model
