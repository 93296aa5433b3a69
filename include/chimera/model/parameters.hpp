#pragma once
// Where every GPT-2 parameter lives. Parameters carry Hugging Face GPT-2 names and shapes
// (Conv1D weights are [in, out]); the internal layout is the HF layout, so a tensor is `numel`
// contiguous floats at `offset` of its buffer:
//  - the token table `wte.weight` [V, C] lives in its own "tied" buffer of padded_vocab x C
//    floats (the rows after V are padding: zero, never stored in checkpoints), shared by the
//    embedding (stage 0) and the LM head (stage S-1);
//  - every other parameter lives in the one contiguous buffer of its stage: stage 0 starts with
//    `wpe.weight`, then the stage's blocks in order, and the last stage ends with `ln_f`.
// Offsets are multiples of 16 floats (64 bytes) so that a tensor's alignment, and with it every
// kernel's result, does not depend on the partition; the gaps are zero.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chimera/model/gpt2_config.hpp"
#include "chimera/model/partition.hpp"

namespace chimera::model {

inline constexpr int kTiedStage = -1;  // TensorInfo::stage of wte.weight

enum class Init { Normal, Zeros, Ones };

struct TensorInfo {
  std::string name;                 // Hugging Face name, e.g. "h.3.attn.c_attn.weight"
  std::vector<std::int64_t> shape;  // Hugging Face shape, e.g. {C, 3C}
  int stage = 0;                    // model stage whose buffer holds it, or kTiedStage
  std::size_t offset = 0;           // in floats from the start of that buffer
  std::size_t numel = 0;            // product of shape
  bool weight_decay = false;        // 2-D weights and embeddings decay; biases and LayerNorm not
  Init init = Init::Zeros;
  float init_std = 0.0F;  // Init::Normal: 0.02, or 0.02 / sqrt(2L) for residual projections
};

// The twelve tensors of one transformer block, in buffer order.
enum class BlockTensor {
  ln_1_weight,
  ln_1_bias,
  attn_c_attn_weight,
  attn_c_attn_bias,
  attn_c_proj_weight,
  attn_c_proj_bias,
  ln_2_weight,
  ln_2_bias,
  mlp_c_fc_weight,
  mlp_c_fc_bias,
  mlp_c_proj_weight,
  mlp_c_proj_bias,
};
inline constexpr int kBlockTensors = 12;

// Pointers to one block's tensors inside a stage buffer (parameters, gradients or moments).
template <typename Float>
struct BlockTensors {
  Float* ln_1_weight;
  Float* ln_1_bias;
  Float* attn_c_attn_weight;  // [C, 3C]
  Float* attn_c_attn_bias;    // [3C]
  Float* attn_c_proj_weight;  // [C, C]
  Float* attn_c_proj_bias;
  Float* ln_2_weight;
  Float* ln_2_bias;
  Float* mlp_c_fc_weight;    // [C, 4C]
  Float* mlp_c_fc_bias;      // [4C]
  Float* mlp_c_proj_weight;  // [4C, C]
  Float* mlp_c_proj_bias;
};
using BlockWeights = BlockTensors<const float>;
using BlockWeightGrads = BlockTensors<float>;

class ParameterLayout {
 public:
  ParameterLayout(const GPT2Config& config, const StagePartition& partition);

  const GPT2Config& config() const { return config_; }
  const StagePartition& partition() const { return partition_; }

  // Floats in a stage buffer (including alignment gaps) and in the tied buffer (padded rows).
  std::size_t stage_floats(int stage) const { return stage_floats_.at(stage); }
  std::size_t tied_floats() const {
    return static_cast<std::size_t>(config_.padded_vocab_size) * config_.n_embd;
  }

  const TensorInfo& tied() const { return tied_; }
  std::span<const TensorInfo> stage_tensors(int stage) const { return stage_tensors_.at(stage); }
  // Every tensor of the model, wte first, then stage by stage. Null when the name is unknown.
  std::vector<const TensorInfo*> all() const;
  const TensorInfo* find(std::string_view name) const;

  // Offsets inside stage buffers for the model's own code.
  std::size_t wpe_offset() const { return wpe_offset_; }           // stage 0
  std::size_t ln_f_weight_offset() const { return ln_f_offset_; }  // last stage
  std::size_t ln_f_bias_offset() const { return ln_f_offset_ + align(config_.n_embd); }
  template <typename Float>
  BlockTensors<Float> block(Float* stage_buffer, int block) const;

  // Offsets are rounded up to this many floats.
  static constexpr std::size_t kAlignFloats = 16;
  static std::size_t align(std::size_t floats) {
    return (floats + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  }

 private:
  GPT2Config config_;
  StagePartition partition_;
  TensorInfo tied_;
  std::vector<std::vector<TensorInfo>> stage_tensors_;
  std::vector<std::size_t> stage_floats_;
  std::vector<std::array<std::size_t, kBlockTensors>> block_offsets_;  // by global block
  std::size_t wpe_offset_ = 0;
  std::size_t ln_f_offset_ = 0;
};

template <typename Float>
BlockTensors<Float> ParameterLayout::block(Float* stage_buffer, int block) const {
  const auto& o = block_offsets_.at(block);
  const auto at = [&](BlockTensor t) { return stage_buffer + o[static_cast<int>(t)]; };
  return {at(BlockTensor::ln_1_weight),        at(BlockTensor::ln_1_bias),
          at(BlockTensor::attn_c_attn_weight), at(BlockTensor::attn_c_attn_bias),
          at(BlockTensor::attn_c_proj_weight), at(BlockTensor::attn_c_proj_bias),
          at(BlockTensor::ln_2_weight),        at(BlockTensor::ln_2_bias),
          at(BlockTensor::mlp_c_fc_weight),    at(BlockTensor::mlp_c_fc_bias),
          at(BlockTensor::mlp_c_proj_weight),  at(BlockTensor::mlp_c_proj_bias)};
}

}  // namespace chimera::model
