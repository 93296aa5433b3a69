#pragma once
// What the executor asks of the stages a worker holds: forward and backward of one model stage
// for one micro-batch. Implementations named by what differs: RealStageCompute (GPT-2 stages on a
// backend), EmulatedStageCompute (timed waits of the configured F/B costs, for timing schedules
// at scale on a laptop), InferenceStageCompute (forward only, for validation) and
// GenerationStageCompute (text samples, with each stage's key/value cache).
// Message pointers are memory from allocate_message(), owned by the executor; an implementation
// copies what it keeps.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "chimera/comm/transport.hpp"

namespace chimera::runtime {

using comm::GradBuffer;

class StageCompute {
 public:
  virtual ~StageCompute() = default;

  // Floats in one activation or activation-gradient message (B*T*C).
  virtual std::size_t message_floats() const = 0;
  // Memory for one message, which MPI sends from and receives into: host memory unless the
  // implementation keeps messages elsewhere (GPU memory for CUDA-aware MPI).
  virtual float* allocate_message() { return new float[message_floats()]; }
  virtual void deallocate_message(float* message) noexcept { delete[] message; }

  // Stage 0 reads `tokens` [B*T] instead of `in`; the last stage reads `targets` [B*T], writes no
  // `out`, and returns the mean cross-entropy of its tokens (other stages return 0). In training
  // the last stage's forward also computes the gradient of loss_scale times its mean loss (the
  // loss is the model's last op); loss_scale 0 (evaluation) computes the loss only.
  virtual float forward(int stage, int mb, const float* in, const std::int32_t* tokens,
                        const std::int32_t* targets, float* out, float loss_scale) = 0;
  // Full backward: accumulates parameter gradients; `grad_out` is null on the last stage (it
  // starts from the loss gradient of its forward), `grad_in` is null on stage 0.
  virtual void backward(int stage, int mb, const float* grad_out, float* grad_in) = 0;
  // Split backward (zero-bubble I and W ops): the two together equal backward().
  virtual void backward_input(int stage, int mb, const float* grad_out, float* grad_in) = 0;
  virtual void backward_weight(int stage, int mb) = 0;

  virtual void zero_grad() = 0;
  // Called once per iteration after the worker's last backward touching the tied embedding and
  // before its gradient is reduced (a worker holding both ends adds the embedding's part here).
  virtual void finalize_tied_grads() {}
  // Gradient buffers of the held stages (one per stage) and of the tied embedding (if held).
  virtual std::vector<GradBuffer> grad_buffers() = 0;

  virtual std::int64_t peak_activation_bytes() const = 0;
  virtual void reset_peak_activation_bytes() = 0;

  // Progresses the run's messages and sums: called between the blocks of an op (a real stage
  // after each transformer block, an emulated one at the same fractions of its time), since MPI
  // moves a large message over TCP only inside MPI calls. Returns whether an allreduce still
  // needs this rank's progress (when none does, an emulated wait need not poll).
  void set_progress(std::function<bool()> progress) { progress_ = std::move(progress); }

 protected:
  bool progress() const { return progress_ ? progress_() : false; }

 private:
  std::function<bool()> progress_;
};

}  // namespace chimera::runtime
