#pragma once
// StageCompute over real GPT-2 stages (model::GPT2Worker on a backend).
#include "chimera/model/worker.hpp"
#include "chimera/runtime/stage_compute.hpp"

namespace chimera::runtime {

class ModelCompute final : public StageCompute {
 public:
  explicit ModelCompute(model::GPT2Worker& worker) : worker_(worker) {}

  std::size_t message_floats() const override { return worker_.message_floats(); }
  float forward(int stage, int mb, const float* in, const std::int32_t* tokens,
                const std::int32_t* targets, float* out) override;
  void backward(int stage, int mb, const float* grad_out, float* grad_in,
                float loss_scale) override {
    worker_.backward(stage, mb, grad_out, grad_in, loss_scale);
  }
  void backward_input(int stage, int mb, const float* grad_out, float* grad_in,
                      float loss_scale) override {
    worker_.backward_input(stage, mb, grad_out, grad_in, loss_scale);
  }
  void backward_weight(int stage, int mb) override { worker_.backward_weight(stage, mb); }
  void zero_grad() override { worker_.zero_grad(); }
  void finalize_tied_grads() override { worker_.finalize_tied_grads(); }
  std::vector<GradBuffer> grad_buffers() override;
  std::int64_t peak_activation_bytes() const override {
    return static_cast<std::int64_t>(worker_.peak_activation_bytes());
  }
  void reset_peak_activation_bytes() override { worker_.reset_peak_activation_bytes(); }

 private:
  model::GPT2Worker& worker_;
};

}  // namespace chimera::runtime
