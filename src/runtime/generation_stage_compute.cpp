#include "generation_stage_compute.hpp"

#include <fmt/format.h>

#include "chimera/core/error.hpp"

namespace chimera::runtime {

void GenerationCaches::begin(int capacity) {
  decoders_.clear();
  capacity_ = capacity;
  logits.assign(static_cast<std::size_t>(worker_.dims().V), 0.0F);
}

model::CachedDecoder& GenerationCaches::decoder(int stage) {
  auto& slot = decoders_[stage];
  if (!slot) slot = std::make_unique<model::CachedDecoder>(worker_, capacity_, stage);
  return *slot;
}

float GenerationStageCompute::forward(int stage, int /*mb*/, const float* in,
                                      const std::int32_t* /*tokens*/,
                                      const std::int32_t* /*targets*/, float* out,
                                      float /*loss_scale*/) {
  model::CachedDecoder& decoder = caches_.decoder(stage);
  const float* x = staging_.incoming(in);
  float* y = staging_.outgoing(out);
  if (kind_ == Kind::Prefill) {
    // At most the caches' capacity of positions (prefill_stage checks), which the messages hold.
    decoder.prefill_stage(caches_.window, x, static_cast<model::Index>(caches_.window.size()), y,
                          caches_.logits);
  } else {
    decoder.append_stage(caches_.token, x, y, caches_.logits);
  }
  staging_.finish(out);
  if (decoder.last() && caches_.at_last) caches_.at_last(caches_.logits);
  return 0.0F;
}

void GenerationStageCompute::no_backward(int stage) {
  throw Error(
      fmt::format("text generation runs forwards only, but a backward of stage {} was "
                  "scheduled",
                  stage));
}

}  // namespace chimera::runtime
