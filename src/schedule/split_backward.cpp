#include "split_backward.hpp"

#include <deque>
#include <limits>
#include <map>

#include "chimera/core/error.hpp"

namespace chimera::schedule::detail {

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
  std::vector<Op> primary;  // F and I ops in the base order
  std::size_t next = 0;
  double clock = 0;
  std::deque<Op> pending_w;           // W ops whose I is done, oldest first
  std::map<int, int> inputs_to_come;  // stage -> I ops not yet placed
  int in_flight = 0;                  // activations held: F ops placed minus W ops
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

Schedule split_backward_filling_waits(const Schedule& base, int cap, const FillCosts& costs) {
  const int D = base.workers;
  Schedule s = base;
  const int last = s.stages - 1;
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
    w.clock += op.kind == OpKind::F ? costs.F : op.kind == OpKind::I ? costs.I : costs.W;
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
    CHIMERA_CHECK(steps < give_up, "{} split backward made no progress", s.scheme);
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
    CHIMERA_CHECK(chosen >= 0, "{} split backward: every worker waits (order bug)", s.scheme);
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

}  // namespace chimera::schedule::detail
