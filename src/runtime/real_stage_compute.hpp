#pragma once
// StageCompute over real GPT-2 stages (model::GPT2Worker on a backend). Messages come and go
// through a MessageStaging (direct or host-staged); every op returns once the backend finished it,
// so that its output can be sent and its time is the compute's.
#include "chimera/model/worker.hpp"
#include "message_staging.hpp"
#include "stage_compute.hpp"

namespace chimera::runtime {

class RealStageCompute final : public StageCompute {
 public:
  RealStageCompute(model::GPT2Worker& worker, MessageStaging& staging)
      : worker_(worker), staging_(staging) {}

  std::size_t message_floats() const override { return worker_.message_floats(); }
  float* allocate_message() override { return staging_.allocate(); }
  void deallocate_message(float* message) noexcept override { staging_.deallocate(message); }

  float forward(int stage, int mb, const float* in, const std::int32_t* tokens,
                const std::int32_t* targets, float* out, float loss_scale) override;
  void backward(int stage, int mb, const float* grad_out, float* grad_in) override;
  void backward_input(int stage, int mb, const float* grad_out, float* grad_in) override;
  void backward_weight(int stage, int mb) override;
  void zero_grad() override { worker_.zero_grad(); }
  void finalize_tied_grads() override;
  std::vector<GradBuffer> grad_buffers() override;
  std::int64_t peak_activation_bytes() const override {
    return static_cast<std::int64_t>(worker_.peak_activation_bytes());
  }
  void reset_peak_activation_bytes() override { worker_.reset_peak_activation_bytes(); }

 private:
  model::GPT2Worker& worker_;
  MessageStaging& staging_;
};

}  // namespace chimera::runtime
