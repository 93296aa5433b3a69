#include "chimera/model/partition.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "chimera/core/error.hpp"

namespace chimera::model {

StagePartition::StagePartition(std::vector<int> blocks_per_stage)
    : blocks_per_stage_(std::move(blocks_per_stage)) {
  CHIMERA_CHECK(!blocks_per_stage_.empty(), "a partition needs at least one stage");
  int first = 0;
  for (const int blocks : blocks_per_stage_) {
    CHIMERA_CHECK(blocks >= 1, "every stage needs a block: {}", to_string());
    first_block_.push_back(first);
    first += blocks;
  }
}

int StagePartition::stage_of_block(int block) const {
  const auto it = std::upper_bound(first_block_.begin(), first_block_.end(), block);
  const int stage = static_cast<int>(it - first_block_.begin()) - 1;
  CHIMERA_CHECK(stage >= 0 && block < first_block_.at(stage) + num_blocks(stage),
                "block {} is not in partition {}", block, to_string());
  return stage;
}

std::string StagePartition::to_string() const {
  return fmt::format("[{}]", fmt::join(blocks_per_stage_, ", "));
}

std::int64_t block_cost(const GPT2Config& c, int seq_len) {
  const std::int64_t C = c.n_embd;
  return 24 * C * C + 4 * static_cast<std::int64_t>(seq_len) * C;
}

std::int64_t head_cost(const GPT2Config& c) {
  return 2 * static_cast<std::int64_t>(c.n_embd) * c.vocab_size;
}

namespace {

void require_stage_count(const GPT2Config& config, int num_stages) {
  CHIMERA_REQUIRE(num_stages >= 1, "the pipeline needs at least one model stage, got {}",
                  num_stages);
  CHIMERA_REQUIRE(num_stages <= config.n_layer,
                  "the pipeline has {} model stages but the model has only {} blocks "
                  "(model.n_layer): every stage needs at least one block, so use at most {} "
                  "stages (parallel.stages x parallel.virtual) or a deeper model",
                  num_stages, config.n_layer, config.n_layer);
}

}  // namespace

StagePartition balanced_partition(const GPT2Config& config, int num_stages, int seq_len) {
  require_stage_count(config, num_stages);
  const int S = num_stages;
  const int L = config.n_layer;
  // Costs in units of gcd(block, head) keep the squared sums below exactly-representable range.
  const std::int64_t unit = std::gcd(block_cost(config, seq_len), head_cost(config));
  const std::int64_t block = block_cost(config, seq_len) / unit;
  const std::int64_t head = head_cost(config) / unit;
  const auto stage_cost = [&](int stage, int blocks) {
    return blocks * block + (stage == S - 1 ? head : 0);
  };
  // best_max[s][r]: least possible maximum stage cost of stages s..S-1 holding the last r blocks.
  constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();
  std::vector<std::vector<std::int64_t>> best_max(S, std::vector<std::int64_t>(L + 1, kNone));
  for (int r = 1; r <= L; ++r) best_max[S - 1][r] = stage_cost(S - 1, r);
  for (int s = S - 2; s >= 0; --s) {
    for (int r = S - s; r <= L; ++r) {
      for (int n = 1; n <= r - (S - 1 - s); ++n) {
        const std::int64_t m = std::max(stage_cost(s, n), best_max[s + 1][r - n]);
        best_max[s][r] = std::min(best_max[s][r], m);
      }
    }
  }
  const std::int64_t limit = best_max[0][L];
  // best_sq[s][r]: least sum of squared stage costs with every stage at most `limit`.
  constexpr double kInfeasible = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best_sq(S + 1, std::vector<double>(L + 1, kInfeasible));
  best_sq[S][0] = 0.0;
  const auto square = [](std::int64_t x) {
    return static_cast<double>(x) * static_cast<double>(x);
  };
  for (int s = S - 1; s >= 0; --s) {
    for (int r = 1; r <= L; ++r) {
      for (int n = 1; n <= r; ++n) {
        if (stage_cost(s, n) > limit || best_sq[s + 1][r - n] == kInfeasible) continue;
        best_sq[s][r] = std::min(best_sq[s][r], square(stage_cost(s, n)) + best_sq[s + 1][r - n]);
      }
    }
  }
  // Reconstruct from the front, taking the fewest blocks that stay optimal.
  std::vector<int> blocks_per_stage;
  int remaining = L;
  for (int s = 0; s < S; ++s) {
    for (int n = 1; n <= remaining; ++n) {
      if (stage_cost(s, n) > limit || best_sq[s + 1][remaining - n] == kInfeasible) continue;
      if (square(stage_cost(s, n)) + best_sq[s + 1][remaining - n] == best_sq[s][remaining]) {
        blocks_per_stage.push_back(n);
        remaining -= n;
        break;
      }
    }
  }
  CHIMERA_CHECK(remaining == 0 && static_cast<int>(blocks_per_stage.size()) == S,
                "balanced partition of {} blocks over {} stages failed", L, S);
  return StagePartition(std::move(blocks_per_stage));
}

StagePartition explicit_partition(const GPT2Config& config, int num_stages,
                                  std::span<const int> blocks_per_stage) {
  require_stage_count(config, num_stages);
  const std::vector<int> blocks(blocks_per_stage.begin(), blocks_per_stage.end());
  const std::string text = fmt::format("parallel.partition = [{}]", fmt::join(blocks, ", "));
  CHIMERA_REQUIRE(static_cast<int>(blocks.size()) == num_stages,
                  "{} lists {} stages but the pipeline has {} model stages: give one block count "
                  "per model stage",
                  text, blocks.size(), num_stages);
  for (std::size_t s = 0; s < blocks.size(); ++s) {
    CHIMERA_REQUIRE(blocks[s] >= 1, "{} gives stage {} {} blocks: every stage needs at least one",
                    text, s, blocks[s]);
  }
  const long total = std::accumulate(blocks.begin(), blocks.end(), 0L);
  CHIMERA_REQUIRE(total >= config.n_layer,
                  "{} places {} blocks but model.n_layer = {}: it drops {} block(s); the counts "
                  "must add up to n_layer so that every block is on exactly one stage",
                  text, total, config.n_layer, config.n_layer - total);
  CHIMERA_REQUIRE(total <= config.n_layer,
                  "{} places {} blocks but model.n_layer = {}: it repeats {} block(s); the counts "
                  "must add up to n_layer so that every block is on exactly one stage",
                  text, total, config.n_layer, total - config.n_layer);
  return StagePartition(blocks);
}

StagePartition make_partition(const GPT2Config& config, int num_stages,
                              std::span<const int> blocks_per_stage, int seq_len) {
  if (!blocks_per_stage.empty()) return explicit_partition(config, num_stages, blocks_per_stage);
  return balanced_partition(config, num_stages, seq_len);
}

}  // namespace chimera::model
