#pragma once
// StageCompute for evaluation and text generation: the model's forward (through RealStageCompute)
// on micro-batch slots of its own, keeping nothing for a backward. On the last stage, an optional
// hook sees the slot between the forward and its release (to read logits).
#include <functional>

#include "real_stage_compute.hpp"

namespace chimera::runtime {

class InferenceStageCompute final : public StageCompute {
 public:
  InferenceStageCompute(model::GPT2Worker& worker, MessageStaging& staging)
      : worker_(worker), model_(worker, staging) {}

  // Runs on the last stage after each forward with the worker's slot of that micro-batch.
  void set_at_last(std::function<void(int slot)> at_last) { at_last_ = std::move(at_last); }

  std::size_t message_floats() const override { return model_.message_floats(); }
  float* allocate_message() override { return model_.allocate_message(); }
  void deallocate_message(float* message) noexcept override { model_.deallocate_message(message); }

  float forward(int stage, int mb, const float* in, const std::int32_t* tokens,
                const std::int32_t* targets, float* out, float loss_scale) override;
  void backward(int stage, int mb, const float*, float*) override { no_backward(stage, mb); }
  void backward_input(int stage, int mb, const float*, float*) override { no_backward(stage, mb); }
  void backward_weight(int stage, int mb) override { no_backward(stage, mb); }
  void zero_grad() override {}
  std::vector<GradBuffer> grad_buffers() override { return {}; }
  std::int64_t peak_activation_bytes() const override { return model_.peak_activation_bytes(); }
  void reset_peak_activation_bytes() override { model_.reset_peak_activation_bytes(); }

 private:
  [[noreturn]] static void no_backward(int stage, int mb);

  model::GPT2Worker& worker_;
  RealStageCompute model_;
  std::function<void(int slot)> at_last_;
};

}  // namespace chimera::runtime
