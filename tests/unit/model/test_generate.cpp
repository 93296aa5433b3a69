// Choosing next tokens: greedy, top-k, temperature, seeds; the context window; token-id prompts;
// generation with the key/value cache against the whole window's forward.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "chimera/core/error.hpp"
#include "chimera/model/generate.hpp"
#include "chimera/model/kv_cache.hpp"

namespace chimera::model {
namespace {

const std::vector<float> kLogits{0.5F, 3.0F, -1.0F, 3.0F, 2.0F, 0.0F};

std::vector<std::int32_t> draws(const SamplingOptions& options, int n) {
  TokenSampler sampler(options);
  std::vector<std::int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(sampler.next(kLogits));
  return out;
}

TEST(Generate, GreedyTakesTheLowestIdOfTheMostLikely) {
  EXPECT_EQ(draws({0.0, 0, 1}, 3), (std::vector<std::int32_t>{1, 1, 1}));
  // top-k 1 is greedy whatever the temperature.
  EXPECT_EQ(draws({5.0, 1, 9}, 4), (std::vector<std::int32_t>{1, 1, 1, 1}));
}

TEST(Generate, TopKDrawsOnlyAmongTheKMostLikelyWithSoftmaxFrequencies) {
  const auto picks = draws({1.0, 3, 7}, 20000);
  std::map<std::int32_t, int> counts;
  for (const auto p : picks) ++counts[p];
  EXPECT_EQ(counts.size(), 3U);  // ids 1, 3 (logit 3) and 4 (logit 2)
  const double e = std::exp(-1.0), total = 2.0 + e;
  EXPECT_NEAR(counts[1] / 20000.0, 1.0 / total, 0.015);
  EXPECT_NEAR(counts[3] / 20000.0, 1.0 / total, 0.015);
  EXPECT_NEAR(counts[4] / 20000.0, e / total, 0.015);
}

TEST(Generate, TheSameSeedDrawsTheSameTokens) {
  EXPECT_EQ(draws({1.0, 0, 42}, 50), draws({1.0, 0, 42}, 50));
  EXPECT_NE(draws({1.0, 0, 42}, 50), draws({1.0, 0, 43}, 50));
}

TEST(Generate, BadOptionsAreInputErrors) {
  EXPECT_THROW(TokenSampler({-0.5, 0, 1}), InputError);
  EXPECT_THROW(TokenSampler({std::nan(""), 0, 1}), InputError);
  EXPECT_THROW(TokenSampler({1.0, -1, 1}), InputError);
}

TEST(Generate, ContextWindowKeepsTheLastTokens) {
  const std::vector<std::int32_t> tokens{1, 2, 3, 4, 5};
  const auto w = context_window(tokens, 3);
  EXPECT_EQ(std::vector<std::int32_t>(w.begin(), w.end()), (std::vector<std::int32_t>{3, 4, 5}));
  EXPECT_EQ(context_window(tokens, 8).size(), 5U);
}

TEST(Generate, TokenIdsAreParsedAndChecked) {
  EXPECT_EQ(parse_token_ids(" 464, 3290\t318 ", 50257, "--prompt-ids"),
            (std::vector<std::int32_t>{464, 3290, 318}));
  EXPECT_TRUE(parse_token_ids("", 10, "x").empty());
  EXPECT_THROW(parse_token_ids("1 10", 10, "x"), InputError);
  EXPECT_THROW(parse_token_ids("1 -2", 10, "x"), InputError);
  EXPECT_THROW(parse_token_ids("1 2x", 10, "x"), InputError);
}

// A small random model whose window (n_ctx = 12) the tests run past.
class CachedGeneration : public ::testing::Test {
 protected:
  CachedGeneration() {
    ModelConfig m;
    m.n_layer = 2;
    m.n_embd = 32;
    m.n_head = 4;
    m.n_ctx = kCtx;
    m.vocab_size = 50;
    config_ = GPT2Config::from(m);
    worker_ = std::make_unique<GPT2Worker>(*be_, config_, StagePartition({2}), std::vector<int>{0},
                                           GPT2Worker::Options{1, kCtx, false});
    worker_->init_parameters(5);
    std::mt19937 rng(3);
    for (int i = 0; i < 40; ++i) tokens_.push_back(static_cast<std::int32_t>(rng() % 50));
  }

  // The no-cache path: the whole window (the last n_ctx tokens, padded with token 0) through the
  // model's forward, and the logits of its last token.
  std::vector<float> window_logits(std::span<const std::int32_t> sequence) {
    const auto window = context_window(sequence, kCtx);
    std::vector<std::int32_t> padded(kCtx, 0), targets(kCtx, 0);
    std::copy(window.begin(), window.end(), padded.begin());
    std::vector<float> logits(50);
    worker_->forward(0, 0, {padded, nullptr, targets}, nullptr);
    worker_->logits(0, logits, static_cast<Index>(window.size() - 1));
    worker_->release(0, 0);
    return logits;
  }

  static void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
    double rms = 0;
    for (const float v : want) rms += static_cast<double>(v) * v;
    rms = std::sqrt(rms / static_cast<double>(want.size()));
    for (std::size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-5 * (std::abs(want[i]) + rms)) << "logit " << i;
    }
  }

  static constexpr int kCtx = 12;
  std::unique_ptr<backend::Backend> be_ = backend::make_backend(BackendKind::Cpu);
  GPT2Config config_;
  std::unique_ptr<GPT2Worker> worker_;
  std::vector<std::int32_t> tokens_;
};

TEST_F(CachedGeneration, EveryPositionsLogitsEqualTheWholeWindowsForward) {
  CachedDecoder decoder(*worker_, kCtx);
  const std::span<const std::int32_t> all(tokens_);
  std::vector<float> logits(50);
  decoder.prefill(all.first(5), logits);
  expect_near(logits, window_logits(all.first(5)));
  for (std::size_t n = 6; n <= kCtx; ++n) {
    decoder.append(tokens_[n - 1], logits);
    expect_near(logits, window_logits(all.first(n)));
  }
  EXPECT_EQ(decoder.positions(), kCtx);
  EXPECT_THROW(decoder.append(1, logits), Error);  // full: the window must move
  // A moved window is a new prefill of the last n_ctx tokens.
  decoder.prefill(context_window(all.first(20), kCtx), logits);
  expect_near(logits, window_logits(all.first(20)));
  EXPECT_THROW(decoder.prefill(all.first(kCtx + 1), logits), Error);
  decoder.prefill(all.first(3), logits);
  EXPECT_THROW(decoder.append(50, logits), InputError);  // outside the vocabulary
}

// A pipeline's stages, each with the cache of its own blocks, handing on [P, C] after a prefill
// and [C] per token: the whole model's logits, bit for bit (the same calls on the same shapes).
TEST_F(CachedGeneration, StagesWithTheirOwnCachesGiveTheWholeModelsLogits) {
  GPT2Worker split(*be_, config_, StagePartition({1, 1}), std::vector<int>{0, 1},
                   GPT2Worker::Options{1, kCtx, false});
  split.init_parameters(5);
  CachedDecoder whole(*worker_, kCtx), first(split, kCtx, 0), last(split, kCtx, 1);
  EXPECT_TRUE(first.first() && !first.last() && !last.first() && last.last());
  backend::DeviceBuffer message(*be_, static_cast<std::size_t>(kCtx) * 32 * sizeof(float));
  const std::span<const std::int32_t> all(tokens_);
  std::vector<float> want(50), got(50);
  const auto prompt = all.first(5);
  whole.prefill(prompt, want);
  first.prefill_stage(prompt, nullptr, 5, message.f32(), {});
  last.prefill_stage({}, message.f32(), 5, nullptr, got);
  EXPECT_EQ(got, want) << "prefill";
  for (std::size_t n = 6; n <= kCtx; ++n) {
    whole.append(tokens_[n - 1], want);
    first.append_stage(tokens_[n - 1], nullptr, message.f32(), {});
    last.append_stage(0, message.f32(), nullptr, got);
    EXPECT_EQ(got, want) << n << " positions";
  }
  EXPECT_EQ(last.positions(), kCtx);
}

TEST_F(CachedGeneration, GreedyIdsEqualTheNoCachePathPastTheWindow) {
  // A prompt longer than n_ctx (its last n_ctx tokens count), then more tokens than fit.
  for (const std::size_t prompt_length : {std::size_t{3}, std::size_t{20}}) {
    const std::span<const std::int32_t> prompt(tokens_.data(), prompt_length);
    TokenSampler greedy({0.0, 0, 1});
    const auto got = generate(*worker_, prompt, 25, greedy);
    std::vector<std::int32_t> sequence(prompt.begin(), prompt.end()), want;
    for (int i = 0; i < 25; ++i) {
      const auto logits = window_logits(sequence);
      const auto next = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) -
                                                  logits.begin());
      sequence.push_back(next);
      want.push_back(next);
    }
    EXPECT_EQ(got, want) << "prompt of " << prompt_length << " tokens";
  }
}

}  // namespace
}  // namespace chimera::model
