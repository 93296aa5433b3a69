#include "real_stage_compute.hpp"

#include <fmt/format.h>

namespace chimera::runtime {

namespace {

// The worker progresses this compute's messages between its blocks for the length of one op
// (the worker also serves evaluation and sampling, which have messages of their own).
class ProgressBetweenBlocks {
 public:
  ProgressBetweenBlocks(model::GPT2Worker& worker, std::function<void()> progress)
      : worker_(worker) {
    worker_.set_after_block(std::move(progress));
  }
  ~ProgressBetweenBlocks() { worker_.set_after_block({}); }
  ProgressBetweenBlocks(const ProgressBetweenBlocks&) = delete;
  ProgressBetweenBlocks& operator=(const ProgressBetweenBlocks&) = delete;

 private:
  model::GPT2Worker& worker_;
};

}  // namespace

float RealStageCompute::forward(int stage, int mb, const float* in, const std::int32_t* tokens,
                                const std::int32_t* targets, float* out, float loss_scale) {
  const auto n = static_cast<std::size_t>(worker_.dims().N());
  model::ForwardInput input;
  if (tokens != nullptr) input.tokens = {tokens, n};
  if (targets != nullptr) input.targets = {targets, n};
  input.activation = staging_.incoming(in);
  input.loss_scale = loss_scale;
  const ProgressBetweenBlocks progressing(worker_, [this] { progress(); });
  const float loss = worker_.forward(stage, mb, input, staging_.outgoing(out));
  staging_.finish(out);
  return loss;
}

void RealStageCompute::backward(int stage, int mb, const float* grad_out, float* grad_in) {
  const ProgressBetweenBlocks progressing(worker_, [this] { progress(); });
  worker_.backward(stage, mb, staging_.incoming(grad_out), staging_.outgoing(grad_in));
  staging_.finish(grad_in);
}

void RealStageCompute::backward_input(int stage, int mb, const float* grad_out, float* grad_in) {
  const ProgressBetweenBlocks progressing(worker_, [this] { progress(); });
  worker_.backward_input(stage, mb, staging_.incoming(grad_out), staging_.outgoing(grad_in));
  staging_.finish(grad_in);
}

void RealStageCompute::backward_weight(int stage, int mb) {
  const ProgressBetweenBlocks progressing(worker_, [this] { progress(); });
  worker_.backward_weight(stage, mb);
  staging_.finish(nullptr);
}

void RealStageCompute::finalize_tied_grads() {
  worker_.finalize_tied_grads();
  staging_.finish(nullptr);  // the tied sum starts next and may read the gradient from the host
}

std::vector<GradBuffer> RealStageCompute::grad_buffers() {
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
