#pragma once
// The watchdog's limit, derived from the run (runtime.watchdog_s = -1, the default): a lost
// host, a cut link or a stuck rank ends the job within minutes instead of holding every node
// until the scheduler's time limit. The limit is max(120 s, 20 x the median step time after the
// first, warm-up, step); before the first step has been timed it is 600 s. Every rank computes
// it from the same step times (the job's slowest rank's), so all agree.
//   runtime.watchdog_s = -1  (auto) each wait and each step are bounded by the derived limit
//   runtime.watchdog_s = S>0 each wait by S (as set), each step by the derived limit
//   runtime.watchdog_s = 0   off: nothing is bounded
// A step is bounded from the start of its pipeline to the end of its reductions; validation
// and checkpoints are not part of it (a save has checkpoint.save_timeout_s). The step bound is
// 1.25 x the limit, so that a wait, which names its peer, trips first where one is stuck.
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "chimera/comm/mpi.hpp"
#include "chimera/core/config.hpp"

namespace chimera::runtime {

using chimera::kWatchdogAuto;

// The bound on set-up waits that come before any step is timed (NCCL communicators, the first
// collectives): the configured limit, or the auto limit's value before the first step.
double setup_limit_s(double configured_s);

class StepWatchdog {
 public:
  static constexpr double kFloorS = 120.0;       // never below (start-up, slow steps of a run)
  static constexpr double kStepsOfSlack = 20.0;  // medians of a step a wait may last
  static constexpr double kBeforeFirstStepS = 600.0;
  static constexpr double kStepBoundFactor = 1.25;

  explicit StepWatchdog(double configured_s);

  // Points `policy` at this watchdog: its waits follow the limit as it changes.
  void apply(comm::WaitPolicy& policy) const;
  // A step's time, the same on every rank; the first is warm-up and is left out of the median
  // once a later one is known.
  void step_done(double seconds);

  bool off() const { return configured_s_ == 0.0; }
  double derived_s() const { return derived_s_.load(std::memory_order_relaxed); }
  // How long one step may take before the job is ended (0 = unbounded).
  double step_limit_s() const { return off() ? 0.0 : kStepBoundFactor * derived_s(); }
  // What the step does now, for the line below (a string literal: it is read by the bound's
  // thread).
  void phase(const char* what) { phase_.store(what, std::memory_order_relaxed); }
  // The line that ends a job whose step `step` (1-based) passed step_limit_s() on `rank`.
  std::string step_expired(std::int64_t step, int rank) const;
  // For the log: "watchdog: 600 s until the first step is timed, then max(120 s, 20 x median
  // step) (runtime.watchdog_s = -1, auto; 0 turns it off)".
  std::string describe() const;

 private:
  double configured_s_;
  std::vector<double> steps_s_;
  std::atomic<double> derived_s_{kBeforeFirstStepS};
  std::atomic<const char*> phase_{"the step"};
};

}  // namespace chimera::runtime
