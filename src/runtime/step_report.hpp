#pragma once
// What each step reports: its timings reduced over the ranks (StepStats), one JSON line in
// --metrics, one log line every log.every steps, and at the end the run's means.
#include <mpi.h>

#include <cstdint>
#include <optional>
#include <string>

#include "chimera/comm/core_sharing.hpp"
#include "chimera/comm/mpi.hpp"
#include "chimera/io/metrics.hpp"
#include "chimera/runtime/run_plan.hpp"
#include "executor.hpp"

namespace chimera::runtime {

struct StepStats {
  double iter_s = 0.0;
  double pipeline_s = 0.0;
  double bubble = 0.0;
  double core_wait = 0.0;  // the part of `bubble` ranks were runnable but had no core
  std::int64_t peak_act = 0;
  int stop_signal = 0;  // a stop signal some rank received (the highest number), 0 if none
  bool stop() const { return stop_signal != 0; }
};

// Collective: the timing and the stop signal of one step, gathered with two non-blocking
// reductions awaited by `policy`'s sleeping, watched wait (as reduce_loss_and_norm's).
StepStats reduce_step(MPI_Comm world, const IterationResult& r, double iter_s,
                      std::int64_t peak_act, int stop_signal, const comm::WaitPolicy& policy,
                      const comm::WaitLabel& label);

class StepReport {
 public:
  // `metrics`: the --metrics file (open on rank 0 only, where one is asked for); `predicted_ms`:
  // the simulator's iteration time, printed beside the measured one where there is one.
  StepReport(const RunPlan& plan, const comm::CoreSharing& cores, io::MetricsWriter metrics,
             std::optional<double> predicted_ms, std::int64_t start_step);

  // Step `m.step` (0-based): its metrics line, and its log line when log.every says so, or when
  // it is the last step, has a validation loss or is not `finite`.
  void step(const io::StepMetrics& m, const StepStats& s, bool finite);
  // The means of the timed steps (the first step warms caches up and is left out, unless it is
  // the only one), with the schedule's own bubble beside the measured one.
  void done(std::int64_t steps_run, double run_s, double schedule_bubble) const;

 private:
  // Where ranks outnumber cores, the measured bubble is part core sharing: say how much.
  std::string core_wait(double share, std::string_view format) const;

  const RunPlan& plan_;
  comm::CoreSharing cores_;
  io::MetricsWriter metrics_;
  std::optional<double> predicted_ms_;
  std::int64_t start_step_;
  double sum_iter_s_ = 0.0, sum_bubble_ = 0.0, sum_core_wait_ = 0.0;
  int timed_steps_ = 0;
};

}  // namespace chimera::runtime
