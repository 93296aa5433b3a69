#pragma once
// AdamW (decoupled weight decay, bias correction) as torch.optim.AdamW, applied to one parameter
// buffer (a stage's or the tied one) in ranges that say which tensors decay: 2-D weights and the
// embeddings do, biases and LayerNorm parameters do not (nanoGPT's rule; model::TensorInfo has
// the flag). Global-norm clipping rides on the update as a gradient scale, so it costs no pass.
#include <cstddef>
#include <span>
#include <vector>

#include "chimera/backend/buffer.hpp"
#include "chimera/core/config.hpp"

namespace chimera::optim {

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  // train.beta1, beta2, eps, weight_decay, as check_optimizer_config (config_checks.hpp) passed.
  static AdamWConfig from(const TrainConfig& train);
};

// A run of parameters [offset, offset + count) of one buffer with the same decay rule.
struct ParamRange {
  std::size_t offset = 0;
  std::size_t count = 0;
  bool weight_decay = false;
};

// The parts of `ranges` inside [begin, end) of their buffer, with offsets from `begin`: the
// ranges of one shard of the buffer (a sharded optimizer updates only its shard).
std::vector<ParamRange> shard_ranges(std::span<const ParamRange> ranges, std::size_t begin,
                                     std::size_t end);

// The two moments of one parameter buffer, laid out like it (checkpoints read them through the
// model's tensor copies, under optim/exp_avg/<name> and optim/exp_avg_sq/<name>).
struct AdamWMoments {
  AdamWMoments(backend::Backend& backend, std::size_t floats)
      : m(backend::DeviceBuffer::zeros(backend, floats)),
        v(backend::DeviceBuffer::zeros(backend, floats)) {}
  backend::DeviceBuffer m;  // exp_avg
  backend::DeviceBuffer v;  // exp_avg_sq
};

// The kernel's scalars for step t >= 1 (computed in double, as PyTorch does).
backend::AdamWArgs adamw_args(const AdamWConfig& config, int step, double lr, double grad_scale,
                              bool weight_decay);

// One update of `params` from `grads` * grad_scale, step t >= 1 (1 for the first update).
void adamw_step(backend::Backend& backend, const AdamWConfig& config, int step, double lr,
                double grad_scale, float* params, const float* grads, AdamWMoments& moments,
                std::span<const ParamRange> ranges);

}  // namespace chimera::optim
