#pragma once
// `--compute emulate`: every stage op becomes a timed wait of its cost while messages (at the
// real activation size) and gradient allreduces (at the real stage sizes) stay real. Waiting
// sleeps in short slices and keeps MPI progressing, so 32-64 ranks fit on a 2-core machine.
//
// Costs are per configured micro-batch through 1/D of the model, in milliseconds, exactly as the
// simulator counts them (schedule/simulate.hpp): an op costs X * op_scale per micro-batch it
// covers, op_scale = schedule::work_per_micro_batch (halving's halves cost half, interleaved
// stages 1/v). The costs come from schedule::Costs::parse, as every --cost flag's do.
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "chimera/schedule/simulate.hpp"
#include "stage_compute.hpp"

namespace chimera::runtime {

struct EmulatedStage {
  int stage = 0;
  std::size_t grad_floats = 0;        // the stage's gradient buffer (without the tied embedding)
  std::int64_t activation_bytes = 0;  // kept per micro-batch between forward and backward
  int blocks = 1;                     // transformer blocks: an op progresses MPI between them
};

class EmulatedStageCompute final : public StageCompute {
 public:
  EmulatedStageCompute(schedule::Costs costs, double op_scale, std::size_t message_floats,
                       std::vector<EmulatedStage> held, std::size_t tied_floats, bool holds_tied);

  std::size_t message_floats() const override { return message_floats_; }
  float forward(int stage, int mb, const float* in, const std::int32_t* tokens,
                const std::int32_t* targets, float* out, float loss_scale) override;
  void backward(int stage, int mb, const float* grad_out, float* grad_in) override;
  void backward_input(int stage, int mb, const float* grad_out, float* grad_in) override;
  void backward_weight(int stage, int mb) override;
  void zero_grad() override {}
  std::vector<GradBuffer> grad_buffers() override;
  std::int64_t peak_activation_bytes() const override { return peak_bytes_; }
  void reset_peak_activation_bytes() override { peak_bytes_ = live_bytes_; }

 private:
  void wait_ms(double ms, int stage);
  const EmulatedStage& held(int stage) const;
  std::int64_t activation_bytes(int stage) const;

  schedule::Costs costs_;  // F, B, I, W in milliseconds
  double scale_;           // op_scale
  std::size_t message_floats_;
  std::vector<EmulatedStage> held_;
  // How late a sleep wakes on average (a loaded or virtual machine wakes 0.1-0.2 ms after the
  // time asked): an op's last sleep ends this much early, so that ops last their cost on average.
  double lateness_s_ = 0.0;
  std::map<int, std::vector<float>> grads_;  // stage (or -1 tied) -> zero-filled buffer
  std::set<std::pair<int, int>> live_;       // (stage, mb) with activations held
  std::int64_t live_bytes_ = 0;
  std::int64_t peak_bytes_ = 0;
};

}  // namespace chimera::runtime
