#include "emulated_stage_compute.hpp"

#include <algorithm>
#include <charconv>

#include "chimera/core/error.hpp"
#include "chimera/core/timer.hpp"

namespace chimera::runtime {

EmulatedStageCompute::EmulatedStageCompute(schedule::Costs costs, double op_scale,
                                           std::size_t message_floats,
                                           std::vector<EmulatedStage> held, std::size_t tied_floats,
                                           bool holds_tied)
    : costs_(costs), scale_(op_scale), message_floats_(message_floats), held_(std::move(held)) {
  for (const auto& h : held_) grads_[h.stage].assign(h.grad_floats, 0.0F);
  if (holds_tied) grads_[-1].assign(tied_floats, 0.0F);
}

void EmulatedStageCompute::wait_ms(double ms) {
  const double deadline = now_seconds() + ms * 1e-3;
  while (true) {
    const bool pending = progress();
    const double left = deadline - now_seconds();
    // While an allreduce runs, wake every 0.5 ms to progress it (as a real op would not, but a
    // GPU run's host thread would); otherwise sleep the whole op, so that dozens of emulated
    // ranks leave the cores to the ranks that have work.
    const bool last = !pending || left <= 500e-6;
    const double slice = last ? left - lateness_s_ : 500e-6;
    if (slice <= 0.0) return;
    const double wake = now_seconds() + slice;
    sleep_seconds(slice);
    if (last) {
      // A running mean over the last ~20 ops; a late wake of a descheduled rank counts too, as
      // the op did last that long.
      lateness_s_ += 0.05 * ((now_seconds() - wake) - lateness_s_);
      return;
    }
  }
}

std::int64_t EmulatedStageCompute::activation_bytes(int stage) const {
  for (const auto& h : held_) {
    if (h.stage == stage) return h.activation_bytes;
  }
  CHIMERA_CHECK(false, "stage {} is not held by this worker", stage);
  return 0;
}

float EmulatedStageCompute::forward(int stage, int mb, const float*, const std::int32_t*,
                                    const std::int32_t*, float*, float) {
  wait_ms(costs_.F * scale_);
  CHIMERA_CHECK(live_.insert({stage, mb}).second, "forward of stage {} mb {} ran twice", stage, mb);
  live_bytes_ += activation_bytes(stage);
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  return 0.0F;
}

void EmulatedStageCompute::backward(int stage, int mb, const float*, float*) {
  wait_ms(costs_.B * scale_);
  CHIMERA_CHECK(live_.erase({stage, mb}) == 1, "backward of stage {} mb {} before forward", stage,
                mb);
  live_bytes_ -= activation_bytes(stage);
}

void EmulatedStageCompute::backward_input(int stage, int mb, const float*, float*) {
  wait_ms(costs_.I * scale_);
  CHIMERA_CHECK(live_.count({stage, mb}) == 1, "input-backward of stage {} mb {} before forward",
                stage, mb);
}

void EmulatedStageCompute::backward_weight(int stage, int mb) {
  wait_ms(costs_.W * scale_);
  CHIMERA_CHECK(live_.erase({stage, mb}) == 1, "weight-backward of stage {} mb {} before forward",
                stage, mb);
  live_bytes_ -= activation_bytes(stage);
}

std::vector<GradBuffer> EmulatedStageCompute::grad_buffers() {
  std::vector<GradBuffer> out;
  for (auto& [stage, buf] : grads_) {
    out.push_back(GradBuffer{stage < 0 ? "tied wte" : fmt::format("stage {}", stage), stage,
                             buf.data(), buf.size()});
  }
  return out;
}

}  // namespace chimera::runtime
