#include "step_report.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "chimera/comm/mpi.hpp"
#include "chimera/core/log.hpp"

namespace chimera::runtime {

StepStats reduce_step(MPI_Comm world, const IterationResult& r, double iter_s,
                      std::int64_t peak_act, int stop_signal, const comm::WaitPolicy& policy,
                      const comm::WaitLabel& label) {
  int size = 1;
  MPI_CHECK(MPI_Comm_size(world, &size));
  double sums[3] = {r.compute_s, r.idle_queued_s.value_or(0.0), r.idle_queued_s ? 1.0 : 0.0};
  double maxes[4] = {iter_s, r.wall_s, static_cast<double>(peak_act),
                     static_cast<double>(stop_signal)};
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, sums, 3, MPI_DOUBLE, MPI_SUM, world, &requests[0]));
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, maxes, 4, MPI_DOUBLE, MPI_MAX, world, &requests[1]));
  for (MPI_Request& request : requests)
    comm::wait(request, policy, nullptr, nullptr, nullptr, label);
  StepStats s;
  s.iter_s = maxes[0];
  s.pipeline_s = maxes[1];
  // Measured bubble: the share of the pipeline phase the ranks spent not computing; core wait:
  // the part of it they were ready to run but had no core. The rest waited for messages.
  const double rank_seconds = size * maxes[1];
  s.bubble = maxes[1] > 0 ? 1.0 - sums[0] / rank_seconds : 0.0;
  s.core_wait = maxes[1] > 0 && sums[2] == size ? sums[1] / rank_seconds
                                                : std::numeric_limits<double>::quiet_NaN();
  s.peak_act = static_cast<std::int64_t>(maxes[2]);
  s.stop_signal = static_cast<int>(maxes[3]);
  return s;
}

StepReport::StepReport(const RunPlan& plan, const comm::CoreSharing& cores,
                       io::MetricsWriter metrics, std::optional<double> predicted_ms,
                       std::int64_t start_step)
    : plan_(plan),
      cores_(cores),
      metrics_(std::move(metrics)),
      predicted_ms_(predicted_ms),
      start_step_(start_step) {}

std::string StepReport::core_wait(double share, std::string_view format) const {
  return cores_.oversubscribed() && std::isfinite(share)
             ? fmt::format(fmt::runtime(format), 100.0 * share)
             : std::string();
}

void StepReport::step(const io::StepMetrics& m, const StepStats& s, bool finite) {
  const int steps = plan_.config.train.steps;
  if (m.step > start_step_ || steps - start_step_ == 1) {  // the first step warms caches up
    sum_iter_s_ += s.iter_s;
    sum_bubble_ += s.bubble;
    sum_core_wait_ += s.core_wait;
    ++timed_steps_;
  }
  if (metrics_.is_open()) metrics_.write(m);
  if ((m.step + 1) % plan_.config.log.every != 0 && m.step + 1 != steps && !m.val_loss && finite)
    return;
  log::info(
      "step {:>5}/{} | loss {:.4f}{} | lr {:.2e} | grad-norm {:.3f} | {:8.1f} ms{} | "
      "{:8.0f} tok/s | bubble {:5.1f}%{} | act {:.1f} MiB{}",
      m.step + 1, steps, m.loss, m.val_loss ? fmt::format(" | val {:.4f}", *m.val_loss) : "", m.lr,
      m.grad_norm, m.iter_ms, predicted_ms_ ? fmt::format(" (sim {:.1f})", *predicted_ms_) : "",
      m.tokens_per_s, 100.0 * s.bubble, core_wait(s.core_wait, " (core wait {:.1f}%)"),
      static_cast<double>(s.peak_act) / (1 << 20),
      m.skipped ? fmt::format(" | skipped ({} in all)", m.skipped_steps) : "");
}

void StepReport::done(std::int64_t steps_run, double run_s, double schedule_bubble) const {
  if (timed_steps_ == 0) return;
  const double mean_s = sum_iter_s_ / timed_steps_;
  const std::string& trace = plan_.config.log.trace;
  log::info(
      "done: {} steps in {:.1f} s; mean iteration {:.1f} ms, {:.0f} tokens/s, bubble "
      "{:.1f}% ({}the schedule's {:.1f}%){}",
      steps_run, run_s, mean_s * 1e3, static_cast<double>(plan_.tokens_per_step()) / mean_s,
      100.0 * sum_bubble_ / timed_steps_,
      core_wait(sum_core_wait_ / timed_steps_, "core wait {:.1f}%, "), 100.0 * schedule_bubble,
      trace.empty() ? "" : fmt::format("; trace in {}", trace));
}

}  // namespace chimera::runtime
