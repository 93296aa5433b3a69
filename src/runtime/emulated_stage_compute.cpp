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

void EmulatedStageCompute::wait_ms(double ms, int stage) {
  const double begin = now_seconds();
  const double deadline = begin + ms * 1e-3;
  // A real op progresses messages between its blocks (RealStageCompute): so does this one, at
  // the same fractions of its time.
  const int blocks = std::max(1, held(stage).blocks);
  const auto boundary_time = [&](int j) { return begin + ms * 1e-3 * j / blocks; };
  int boundary = 1;
  while (true) {
    const bool pending = progress();
    const double now = now_seconds();
    const double left = deadline - now;
    while (boundary < blocks && boundary_time(boundary) <= now) ++boundary;
    const double to_boundary = boundary < blocks ? boundary_time(boundary) - now : left;
    // While an allreduce runs, wake every 0.5 ms to progress it (as a GPU run's host thread
    // would); otherwise sleep to the next block boundary or the end of the op, so that dozens of
    // emulated ranks leave the cores to the ranks that have work.
    const double wanted = pending ? std::min(500e-6, to_boundary) : to_boundary;
    const bool last = wanted >= left - 1e-9 || left <= 500e-6;
    const double slice = last ? left - lateness_s_ : wanted;
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

const EmulatedStage& EmulatedStageCompute::held(int stage) const {
  for (const auto& h : held_) {
    if (h.stage == stage) return h;
  }
  CHIMERA_CHECK(false, "stage {} is not held by this worker", stage);
  return held_.front();
}

std::int64_t EmulatedStageCompute::activation_bytes(int stage) const {
  return held(stage).activation_bytes;
}

float EmulatedStageCompute::forward(int stage, int mb, const float*, const std::int32_t*,
                                    const std::int32_t*, float*, float) {
  wait_ms(costs_.F * scale_, stage);
  CHIMERA_CHECK(live_.insert({stage, mb}).second, "forward of stage {} mb {} ran twice", stage, mb);
  live_bytes_ += activation_bytes(stage);
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  return 0.0F;
}

void EmulatedStageCompute::backward(int stage, int mb, const float*, float*) {
  wait_ms(costs_.B * scale_, stage);
  CHIMERA_CHECK(live_.erase({stage, mb}) == 1, "backward of stage {} mb {} before forward", stage,
                mb);
  live_bytes_ -= activation_bytes(stage);
}

void EmulatedStageCompute::backward_input(int stage, int mb, const float*, float*) {
  wait_ms(costs_.I * scale_, stage);
  CHIMERA_CHECK(live_.count({stage, mb}) == 1, "input-backward of stage {} mb {} before forward",
                stage, mb);
}

void EmulatedStageCompute::backward_weight(int stage, int mb) {
  wait_ms(costs_.W * scale_, stage);
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
