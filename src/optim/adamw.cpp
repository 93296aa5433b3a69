#include "chimera/optim/adamw.hpp"

#include <algorithm>
#include <cmath>

#include "chimera/core/error.hpp"

namespace chimera::optim {

AdamWConfig AdamWConfig::from(const TrainConfig& train) {
  return {train.beta1, train.beta2, train.eps, train.weight_decay};
}

backend::AdamWArgs adamw_args(const AdamWConfig& c, int step, double lr, double grad_scale,
                              bool weight_decay) {
  CHIMERA_CHECK(step >= 1, "AdamW steps count from 1, got {}", step);
  const double bias_correction1 = 1.0 - std::pow(c.beta1, step);
  const double bias_correction2 = 1.0 - std::pow(c.beta2, step);
  backend::AdamWArgs a;
  a.decay_factor = static_cast<float>(weight_decay ? 1.0 - lr * c.weight_decay : 1.0);
  a.step_size = static_cast<float>(lr / bias_correction1);
  a.beta1 = static_cast<float>(c.beta1);
  a.one_minus_beta1 = static_cast<float>(1.0 - c.beta1);
  a.beta2 = static_cast<float>(c.beta2);
  a.one_minus_beta2 = static_cast<float>(1.0 - c.beta2);
  a.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  a.eps = static_cast<float>(c.eps);
  a.grad_scale = static_cast<float>(grad_scale);
  return a;
}

std::vector<ParamRange> shard_ranges(std::span<const ParamRange> ranges, std::size_t begin,
                                     std::size_t end) {
  std::vector<ParamRange> out;
  for (const ParamRange& r : ranges) {
    const std::size_t lo = std::max(r.offset, begin), hi = std::min(r.offset + r.count, end);
    if (lo < hi) out.push_back(ParamRange{lo - begin, hi - lo, r.weight_decay});
  }
  return out;
}

void adamw_step(backend::Backend& backend, const AdamWConfig& config, int step, double lr,
                double grad_scale, float* params, const float* grads, AdamWMoments& moments,
                std::span<const ParamRange> ranges) {
  const backend::AdamWArgs decay = adamw_args(config, step, lr, grad_scale, true);
  const backend::AdamWArgs no_decay = adamw_args(config, step, lr, grad_scale, false);
  for (const ParamRange& r : ranges) {
    CHIMERA_CHECK(r.offset + r.count <= moments.m.floats(),
                  "parameter range [{}, {}) outside a buffer of {} floats", r.offset,
                  r.offset + r.count, moments.m.floats());
    backend.adamw_update(params + r.offset, grads + r.offset, moments.m.f32() + r.offset,
                         moments.v.f32() + r.offset, static_cast<backend::Index>(r.count),
                         r.weight_decay ? decay : no_decay);
  }
}

}  // namespace chimera::optim
