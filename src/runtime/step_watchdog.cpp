#include "step_watchdog.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "chimera/comm/rank_hosts.hpp"

namespace chimera::runtime {

StepWatchdog::StepWatchdog(double configured_s) : configured_s_(configured_s) {}

void StepWatchdog::apply(comm::WaitPolicy& policy) const {
  policy.watchdog_s = std::max(configured_s_, 0.0);
  policy.derived_watchdog_s = configured_s_ == kWatchdogAuto ? &derived_s_ : nullptr;
}

void StepWatchdog::step_done(double seconds) {
  steps_s_.push_back(seconds);
  // After warm-up: the first step (allocation, first touches, connection set-up) is left out
  // once there is another.
  std::vector<double> s(steps_s_.size() > 1 ? steps_s_.begin() + 1 : steps_s_.begin(),
                        steps_s_.end());
  const auto mid = s.begin() + static_cast<std::ptrdiff_t>(s.size() / 2);
  std::nth_element(s.begin(), mid, s.end());
  double median = *mid;
  if (s.size() % 2 == 0) median = (median + *std::max_element(s.begin(), mid)) / 2.0;
  derived_s_.store(std::max(kFloorS, kStepsOfSlack * median), std::memory_order_relaxed);
}

std::string StepWatchdog::step_expired(std::int64_t step, int rank) const {
  return fmt::format(
      "watchdog: step {} has not finished after {:.0f} s on rank {}{}, waiting in "
      "{}{} ({} x the watchdog's limit of {:.0f} s); a host or link of the job is "
      "lost, or a rank is stuck: ending the job with status 1 (internal/system "
      "failure)",
      step, step_limit_s(), rank, comm::on_host(rank), phase_.load(std::memory_order_relaxed),
      comm::job_hosts(), kStepBoundFactor, derived_s());
}

std::string StepWatchdog::describe() const {
  if (off()) return "watchdog: off (runtime.watchdog_s = 0): a lost host holds the job";
  const std::string rule = fmt::format(
      "max({:.0f} s, {:.0f} x the median step after the first), {:.0f} s until a "
      "step is timed",
      kFloorS, kStepsOfSlack, kBeforeFirstStepS);
  if (configured_s_ == kWatchdogAuto)
    return fmt::format(
        "watchdog: a wait longer than {}, or a step longer than {} times that, "
        "ends the job (runtime.watchdog_s = -1, auto; 0 turns it off)",
        rule, kStepBoundFactor);
  return fmt::format(
      "watchdog: a wait longer than {:.1f} s (runtime.watchdog_s), or a step "
      "longer than {} times {}, ends the job",
      configured_s_, kStepBoundFactor, rule);
}

double setup_limit_s(double configured_s) {
  return configured_s == kWatchdogAuto ? StepWatchdog::kBeforeFirstStepS : configured_s;
}

}  // namespace chimera::runtime
