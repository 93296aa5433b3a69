#pragma once
// How GPT-2's transformer blocks are split over S model stages (S = D pipeline stages, or D*v
// with interleaving; S = 1 is the whole model). Stage 0 also holds the embeddings, stage S-1 the
// final LayerNorm and the LM head; every stage holds at least one block, every block is on
// exactly one stage, and the stages hold consecutive blocks in order.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "chimera/model/gpt2_config.hpp"

namespace chimera::model {

class StagePartition {
 public:
  // blocks_per_stage must already be valid (the factories below check user input).
  explicit StagePartition(std::vector<int> blocks_per_stage);

  int num_stages() const { return static_cast<int>(blocks_per_stage_.size()); }
  int num_blocks(int stage) const { return blocks_per_stage_.at(stage); }
  int first_block(int stage) const { return first_block_.at(stage); }
  int stage_of_block(int block) const;
  bool is_first(int stage) const { return stage == 0; }
  bool is_last(int stage) const { return stage == num_stages() - 1; }
  const std::vector<int>& blocks_per_stage() const { return blocks_per_stage_; }
  std::string to_string() const;  // "[2, 1, 1]"

  friend bool operator==(const StagePartition& a, const StagePartition& b) {
    return a.blocks_per_stage_ == b.blocks_per_stage_;
  }

 private:
  std::vector<int> blocks_per_stage_;
  std::vector<int> first_block_;
};

// Cost model for balancing: a third of a training step's GEMM FLOPs per token (forward +
// backward; for a block the forward is one third of it). The head runs all of its work in the
// forward (the fused head + cross-entropy: 3 x 2 C V there, nothing in its backward), which moves
// work from the last stage's B into its F but leaves its F + B, and so the balance, unchanged.
std::int64_t block_cost(const GPT2Config& config, int seq_len);  // 24 C^2 + 4 T C
std::int64_t head_cost(const GPT2Config& config);                // 2 C V

// Blocks split so that the most expensive stage is as cheap as possible (the head counts on the
// last stage); among those, the most even split (least sum of squared stage costs); among those,
// the one with the fewest blocks on the earliest stages.
StagePartition balanced_partition(const GPT2Config& config, int num_stages, int seq_len);
// An explicit list of blocks per stage (config parallel.partition), checked.
StagePartition explicit_partition(const GPT2Config& config, int num_stages,
                                  std::span<const int> blocks_per_stage);
// explicit_partition when `blocks_per_stage` is non-empty, else balanced_partition.
StagePartition make_partition(const GPT2Config& config, int num_stages,
                              std::span<const int> blocks_per_stage, int seq_len);

}  // namespace chimera::model
