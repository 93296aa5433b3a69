// Chimera with split backward ("chimera-zb"): Chimera's two pipelines (the paper's pair: worker
// p holds stage p of the down pipe and stage D-1-p of the up pipe) whose backwards are split into
// I (input gradient, on the critical path) and W (weight gradient, free to move), with the W ops
// filling the bubbles, as zero-bubble schedules do for one pipeline.
//
// Construction. The F and I ops keep the order of Chimera direct (its B ops become I ops): that
// order is deadlock-free, and a W, which nothing on another worker waits for, may go anywhere
// after its own I without changing that. The W ops are placed by an event-driven list scheduler
// on the op costs F = I = W = 1 (F:B = 1:2 with I = W = B/2): each worker, at its clock,
//   * runs its next F or I if its input has arrived;
//   * else runs a pending W (so the W fills the wait), preferring the stage with the fewest I ops
//     still to come on this worker, so that stage's gradient becomes final (and its eager sum can
//     start) as early as possible; oldest first within a stage;
//   * else idles until the input arrives.
// Before an F that would hold more than `max_in_flight` chunk-activations (simulate.hpp: an F
// adds a micro-batch through a stage, two chunks, its W frees them), pending W ops run first. After
// the last I the remaining W ops run, stage by stage. The worker with the earliest clock decides
// next; a worker whose input's producer has not been placed yet counts as not ready.
//
// Memory: Chimera direct holds at most D micro-batches per worker; deferring W ops holds more,
// up to max_in_flight / 2 (default 2D chunks, so never more than Chimera). A cap below Chimera's
// own peak on some worker cannot be met by W ops alone and is refused.
#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <tuple>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "chimera/schedule/simulate.hpp"
#include "generator_util.hpp"

namespace chimera::schedule {

namespace {

constexpr double kNotYet = std::numeric_limits<double>::infinity();

// End times of the F and I ops placed so far, by (pipe, stage, micro-batch).
class EndTimes {
 public:
  EndTimes(int pipes, int stages, int micro_batches)
      : stages_(stages),
        mbs_(micro_batches),
        f_(static_cast<std::size_t>(pipes * stages * micro_batches), kNotYet),
        i_(f_) {}
  double& f(int pipe, int stage, int mb) { return f_[index(pipe, stage, mb)]; }
  double& i(int pipe, int stage, int mb) { return i_[index(pipe, stage, mb)]; }

 private:
  std::size_t index(int pipe, int stage, int mb) const {
    return static_cast<std::size_t>((pipe * stages_ + stage) * mbs_ + mb);
  }
  int stages_, mbs_;
  std::vector<double> f_, i_;
};

struct WorkerState {
  std::vector<Op> primary;  // F and I ops in Chimera's order
  std::size_t next = 0;
  double clock = 0;
  std::deque<Op> pending_w;           // W ops whose I is done, oldest first
  std::map<int, int> inputs_to_come;  // stage -> I ops not yet placed
  int in_flight = 0;                  // micro-batches with an F placed and no W yet
  std::vector<Op> out;
};

// The pending W to run next: the stage with the fewest I ops still to come, oldest first.
Op take_w(WorkerState& w) {
  auto best = w.pending_w.begin();
  for (auto it = w.pending_w.begin(); it != w.pending_w.end(); ++it) {
    if (w.inputs_to_come[it->stage] < w.inputs_to_come[best->stage]) best = it;
  }
  Op op = *best;
  w.pending_w.erase(best);
  return op;
}

}  // namespace

Schedule chimera_zb(int D, int N, int max_in_flight) {
  detail::require_pipeline("chimera-zb", D, N);
  const Schedule base = chimera(D, N, "direct", 2);  // checks D even, N a multiple of D
  // max_in_flight counts chunk-activations (simulate.hpp); an F here holds a stage, two chunks.
  const int cap = max_in_flight == 0 ? D : static_cast<int>(from_chunks(max_in_flight));
  CHIMERA_REQUIRE(cap >= 1,
                  "chimera-zb: max_in_flight = {} chunk-activations must be >= 2 (0 = 2D)",
                  max_in_flight);
  // Chimera's own peak, which W ops cannot lower.
  const SimResult chimera_sim = simulate(base, Costs::forward_backward(1, 1));
  const double chimera_peak =
      *std::max_element(chimera_sim.peak_activations.begin(), chimera_sim.peak_activations.end());
  CHIMERA_REQUIRE(cap >= chimera_peak,
                  "chimera-zb with D={}, N={} needs max_in_flight >= {} (Chimera's own peak of "
                  "chunk-activations held on one worker; got {})",
                  D, N, to_chunks(chimera_peak), max_in_flight);

  Schedule s = base;
  s.scheme = "chimera-zb";
  s.variant = "";
  const int last = D - 1;
  std::vector<WorkerState> workers(static_cast<std::size_t>(D));
  for (int w = 0; w < D; ++w) {
    for (Op op : base.ops[w]) {
      if (op.kind == OpKind::B) {
        op.kind = OpKind::I;
        ++workers[w].inputs_to_come[op.stage];
      }
      workers[w].primary.push_back(op);
    }
  }
  EndTimes ends(s.pipes(), s.stages, s.schedule_micro_batches);
  // When op's input is there: kNotYet while its producer is not placed.
  auto ready_at = [&](const Op& op) {
    const int mb = op.mbs.front();
    if (op.kind == OpKind::F) return op.stage == 0 ? 0.0 : ends.f(op.pipe, op.stage - 1, mb);
    return op.stage == last ? ends.f(op.pipe, op.stage, mb) : ends.i(op.pipe, op.stage + 1, mb);
  };
  std::size_t remaining = 0;  // ops still to place: F, I and W per (stage, micro-batch)
  for (const auto& w : workers) remaining += w.primary.size() * 3 / 2;
  auto place = [&](WorkerState& w, const Op& op) {
    --remaining;
    w.out.push_back(op);
    w.clock += 1.0;  // F = I = W = 1
    const int mb = op.mbs.front();
    if (op.kind == OpKind::F) {
      ends.f(op.pipe, op.stage, mb) = w.clock;
      ++w.in_flight;
    } else if (op.kind == OpKind::I) {
      ends.i(op.pipe, op.stage, mb) = w.clock;
      --w.inputs_to_come[op.stage];
      w.pending_w.push_back(Op{OpKind::W, op.pipe, op.stage, op.mbs});
    } else {
      --w.in_flight;
    }
  };

  const std::size_t give_up = 4 * remaining + 64;  // each op is placed after at most one idle
  for (std::size_t steps = 0; remaining > 0; ++steps) {
    CHIMERA_CHECK(steps < give_up, "chimera-zb list scheduling made no progress");
    // The worker with the earliest clock that can decide now.
    int chosen = -1;
    for (int w = 0; w < D; ++w) {
      const WorkerState& x = workers[w];
      const bool primary_left = x.next < x.primary.size();
      if (!primary_left && x.pending_w.empty()) continue;
      const bool decidable =
          !primary_left || !x.pending_w.empty() || ready_at(x.primary[x.next]) != kNotYet;
      if (decidable && (chosen < 0 || x.clock < workers[chosen].clock)) chosen = w;
    }
    CHIMERA_CHECK(chosen >= 0,
                  "chimera-zb list scheduling: every worker waits (Chimera order bug)");
    WorkerState& w = workers[chosen];
    if (w.next >= w.primary.size()) {
      place(w, take_w(w));
      continue;
    }
    const Op& op = w.primary[w.next];
    if (op.kind == OpKind::F && w.in_flight + 1 > cap && !w.pending_w.empty()) {
      place(w, take_w(w));
      continue;
    }
    const double ready = ready_at(op);
    if (ready <= w.clock) {
      place(w, op);
      ++w.next;
    } else if (!w.pending_w.empty()) {
      place(w, take_w(w));
    } else {
      w.clock = ready;  // idle until the input is in
    }
  }
  for (int w = 0; w < D; ++w) s.ops[w] = std::move(workers[w].out);
  return s;
}

}  // namespace chimera::schedule
