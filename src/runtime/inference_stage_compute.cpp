#include "inference_stage_compute.hpp"

#include "chimera/core/error.hpp"

namespace chimera::runtime {

namespace {
// Worker slots of evaluation micro-batches: far above any training micro-batch id, so that an
// evaluation never touches a training micro-batch's activations.
constexpr int kSlotBase = 1 << 24;
}  // namespace

float InferenceStageCompute::forward(int stage, int mb, const float* in, const std::int32_t* tokens,
                                     const std::int32_t* targets, float* out,
                                     float /*loss_scale*/) {
  const int slot = kSlotBase + mb;
  // No backward follows: the loss only, no gradient.
  const float loss = model_.forward(stage, slot, in, tokens, targets, out, 0.0F);
  worker_.release(stage, slot);
  return loss;
}

void InferenceStageCompute::no_backward(int stage, int mb) {
  throw Error(
      fmt::format("evaluation runs forwards only, but a backward of stage {} micro-batch "
                  "{} was scheduled",
                  stage, mb));
}

}  // namespace chimera::runtime
