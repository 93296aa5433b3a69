#include "chimera/model/parameters.hpp"

#include <cmath>

#include "chimera/core/error.hpp"

namespace chimera::model {

namespace {

constexpr float kInitStd = 0.02F;

struct BlockTensorSpec {
  const char* suffix;
  int rows;  // in units of C (0: a vector)
  int cols;  // in units of C
  Init init;
  bool residual_projection;  // init std scaled by 1/sqrt(2L)
};

// Shapes in units of C, in buffer order (matches BlockTensor).
constexpr BlockTensorSpec kBlockSpecs[kBlockTensors] = {
    {"ln_1.weight", 0, 1, Init::Ones, false},
    {"ln_1.bias", 0, 1, Init::Zeros, false},
    {"attn.c_attn.weight", 1, 3, Init::Normal, false},
    {"attn.c_attn.bias", 0, 3, Init::Zeros, false},
    {"attn.c_proj.weight", 1, 1, Init::Normal, true},
    {"attn.c_proj.bias", 0, 1, Init::Zeros, false},
    {"ln_2.weight", 0, 1, Init::Ones, false},
    {"ln_2.bias", 0, 1, Init::Zeros, false},
    {"mlp.c_fc.weight", 1, 4, Init::Normal, false},
    {"mlp.c_fc.bias", 0, 4, Init::Zeros, false},
    {"mlp.c_proj.weight", 4, 1, Init::Normal, true},
    {"mlp.c_proj.bias", 0, 1, Init::Zeros, false},
};

TensorInfo make_tensor(std::string name, std::vector<std::int64_t> shape, int stage,
                       std::size_t offset, Init init, float init_std) {
  TensorInfo t;
  t.name = std::move(name);
  t.numel = 1;
  for (const auto d : shape) t.numel *= static_cast<std::size_t>(d);
  t.weight_decay = shape.size() == 2;
  t.shape = std::move(shape);
  t.stage = stage;
  t.offset = offset;
  t.init = init;
  t.init_std = init == Init::Normal ? init_std : 0.0F;
  return t;
}

}  // namespace

ParameterLayout::ParameterLayout(const GPT2Config& config, const StagePartition& partition)
    : config_(config), partition_(partition) {
  const std::int64_t C = config.n_embd;
  CHIMERA_CHECK(partition.first_block(partition.num_stages() - 1) +
                        partition.num_blocks(partition.num_stages() - 1) ==
                    config.n_layer,
                "partition {} does not cover the {} blocks", partition.to_string(), config.n_layer);
  tied_ = make_tensor("wte.weight", {config.vocab_size, C}, kTiedStage, 0, Init::Normal, kInitStd);
  const float residual_std = kInitStd / std::sqrt(2.0F * static_cast<float>(config.n_layer));
  block_offsets_.resize(static_cast<std::size_t>(config.n_layer));
  for (int s = 0; s < partition.num_stages(); ++s) {
    std::vector<TensorInfo> tensors;
    std::size_t offset = 0;
    auto add = [&](std::string name, std::vector<std::int64_t> shape, Init init, float std) {
      tensors.push_back(make_tensor(std::move(name), std::move(shape), s, offset, init, std));
      const std::size_t at = offset;
      offset += align(tensors.back().numel);
      return at;
    };
    if (partition.is_first(s)) {
      wpe_offset_ = add("wpe.weight", {config.n_ctx, C}, Init::Normal, kInitStd);
    }
    for (int b = partition.first_block(s); b < partition.first_block(s) + partition.num_blocks(s);
         ++b) {
      for (int i = 0; i < kBlockTensors; ++i) {
        const BlockTensorSpec& spec = kBlockSpecs[i];
        std::vector<std::int64_t> shape;
        if (spec.rows > 0) shape.push_back(spec.rows * C);
        shape.push_back(spec.cols * C);
        block_offsets_[static_cast<std::size_t>(b)][static_cast<std::size_t>(i)] =
            add(fmt::format("h.{}.{}", b, spec.suffix), std::move(shape), spec.init,
                spec.residual_projection ? residual_std : kInitStd);
      }
    }
    if (partition.is_last(s)) {
      ln_f_offset_ = add("ln_f.weight", {C}, Init::Ones, 0.0F);
      add("ln_f.bias", {C}, Init::Zeros, 0.0F);
    }
    stage_tensors_.push_back(std::move(tensors));
    stage_floats_.push_back(offset);
  }
}

std::vector<const TensorInfo*> ParameterLayout::all() const {
  std::vector<const TensorInfo*> out{&tied_};
  for (const auto& tensors : stage_tensors_) {
    for (const auto& t : tensors) out.push_back(&t);
  }
  return out;
}

const TensorInfo* ParameterLayout::find(std::string_view name) const {
  for (const TensorInfo* t : all()) {
    if (t->name == name) return t;
  }
  return nullptr;
}

}  // namespace chimera::model
