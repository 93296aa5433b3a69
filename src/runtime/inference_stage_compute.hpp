#pragma once
// StageCompute for evaluation: the model's forward (through RealStageCompute) on micro-batch
// slots of its own, keeping nothing for a backward. (Text samples: generation_stage_compute.hpp.)
#include "real_stage_compute.hpp"

namespace chimera::runtime {

class InferenceStageCompute final : public StageCompute {
 public:
  InferenceStageCompute(model::GPT2Worker& worker, MessageStaging& staging)
      : worker_(worker), model_(worker, staging) {}

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
};

}  // namespace chimera::runtime
