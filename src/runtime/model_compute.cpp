#include "chimera/runtime/model_compute.hpp"

#include <fmt/format.h>

namespace chimera::runtime {

float ModelCompute::forward(int stage, int mb, const float* in, const std::int32_t* tokens,
                            const std::int32_t* targets, float* out) {
  const auto n = static_cast<std::size_t>(worker_.dims().N());
  model::ForwardInput input;
  if (tokens != nullptr) input.tokens = {tokens, n};
  if (targets != nullptr) input.targets = {targets, n};
  input.activation = in;
  return worker_.forward(stage, mb, input, out);
}

std::vector<GradBuffer> ModelCompute::grad_buffers() {
  std::vector<GradBuffer> out;
  for (const int s : worker_.stages()) {
    const auto g = worker_.grads(s);
    out.push_back(GradBuffer{fmt::format("stage {}", s), s, g.data, g.count});
  }
  if (worker_.holds_tied()) {
    const auto g = worker_.tied_grads();
    out.push_back(GradBuffer{"tied wte", -1, g.data, g.count});
  }
  return out;
}

}  // namespace chimera::runtime
