// Choosing next tokens: greedy, top-k, temperature, seeds; the context window; token-id prompts.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "chimera/core/error.hpp"
#include "chimera/model/generate.hpp"

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

}  // namespace
}  // namespace chimera::model
