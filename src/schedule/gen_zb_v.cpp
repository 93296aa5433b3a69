// ZB-V (Qi et al., "Pipeline Parallelism with Controllable Memory", NeurIPS'24): the model is cut
// into 2D stages laid out as a V — worker w holds chunk 0 = stage w and chunk 1 = stage 2D-1-w —
// and every backward is split into I (input gradient, on the critical path) and W (weight
// gradient, free to move). A micro-batch runs down the workers in chunk 0, turns at worker D-1
// (a local hand-off) and comes back up in chunk 1, so worker 0 both starts and ends it, and its
// gradient retraces the V.
//
// Construction: a greedy list scheduler on unit slots (F = I = W, the setting ZB-V is designed
// for; an op costs one slot), every worker deciding at every slot, from what has finished in
// earlier slots:
//   1. an I that is ready, chunk 0 before chunk 1 (finish the micro-batch furthest along its V:
//      its activations are the next to be freed), micro-batches in order;
//   2. else an F that is ready, chunk 1 before chunk 0 (again the one furthest along), while the
//      worker holds fewer than 2D chunks' activations (an F adds one, its W frees it): 2D half
//      stages are D micro-batches through 1/D of the model, 1F1B's peak on its first worker;
//   3. else the oldest pending W — W's are deferred into the slots the worker would idle, and run
//      when the memory bound stops the next forward.
// This reproduces ZB-V's shape: warm-up forwards of chunk 0 until chunk 1 of the first
// micro-batch comes back (2(D-1-w)+1 of them on worker w), then chunk 0 and chunk 1 forwards in
// turn, then a steady F/I/W rotation in which the W's fill the bubbles, and a tail of W's.
// The order is taken from the slots, so it is an execution order: deadlock-free with eager sends.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "generator_util.hpp"

namespace chimera::schedule {

namespace {

constexpr std::int64_t kNotYet = std::numeric_limits<std::int64_t>::max();

struct WorkerState {
  int next_f[2] = {0, 0};  // next micro-batch to forward, per chunk
  int next_i[2] = {0, 0};  // next micro-batch to back-propagate, per chunk
  std::deque<Op> pending_w;
  int live = 0;  // chunks' activations held: F's minus W's
};

}  // namespace

Schedule zb_v(int D, int N) {
  detail::require_pipeline("zb-v", D, N, 2);
  const int S = 2 * D;
  Schedule s = detail::make_shell("zb-v", "", D, S, N, 1, {detail::v_placement(D)});
  const int cap = 2 * D;
  auto stage_of = [&](int w, int chunk) { return chunk == 0 ? w : S - 1 - w; };
  // The slot at which F (I) of (stage, micro-batch) ended.
  std::vector<std::int64_t> f_end(static_cast<std::size_t>(S) * N, kNotYet);
  std::vector<std::int64_t> i_end(static_cast<std::size_t>(S) * N, kNotYet);
  auto at = [&](int stage, int mb) { return static_cast<std::size_t>(stage) * N + mb; };
  auto f_ready = [&](int stage, int mb, std::int64_t t) {
    return stage == 0 || f_end[at(stage - 1, mb)] <= t;
  };
  auto i_ready = [&](int stage, int mb, std::int64_t t) {
    return f_end[at(stage, mb)] <= t && (stage == S - 1 || i_end[at(stage + 1, mb)] <= t);
  };

  std::vector<WorkerState> state(static_cast<std::size_t>(D));
  const std::int64_t total = std::int64_t{3} * S * N;
  std::int64_t placed = 0;
  // Every op is ready within a pipeline's length of the last one: a longer wait is a bug.
  std::int64_t last_progress = 0;
  for (std::int64_t t = 0; placed < total; ++t) {
    CHIMERA_CHECK(t - last_progress <= 4 * S, "zb-v list scheduling made no progress by slot {}",
                  t);
    for (int w = 0; w < D; ++w) {
      WorkerState& ws = state[w];
      auto& ops = s.ops[w];
      bool done = false;
      for (int chunk : {0, 1}) {  // 1. input gradients, chunk 0 first
        const int mb = ws.next_i[chunk];
        const int stage = stage_of(w, chunk);
        if (done || mb >= N || !i_ready(stage, mb, t)) continue;
        ops.push_back({OpKind::I, 0, stage, {mb}});
        ws.pending_w.push_back({OpKind::W, 0, stage, {mb}});
        i_end[at(stage, mb)] = t + 1;
        ++ws.next_i[chunk];
        done = true;
      }
      for (int chunk : {1, 0}) {  // 2. forwards, chunk 1 first, within the memory bound
        const int mb = ws.next_f[chunk];
        const int stage = stage_of(w, chunk);
        if (done || mb >= N || ws.live >= cap || !f_ready(stage, mb, t)) continue;
        ops.push_back({OpKind::F, 0, stage, {mb}});
        f_end[at(stage, mb)] = t + 1;
        ++ws.next_f[chunk];
        ++ws.live;
        done = true;
      }
      if (!done && !ws.pending_w.empty()) {  // 3. a deferred weight gradient fills the slot
        ops.push_back(std::move(ws.pending_w.front()));
        ws.pending_w.pop_front();
        --ws.live;
        done = true;
      }
      if (done) {
        ++placed;
        last_progress = t;
      }
    }
  }
  return s;
}

}  // namespace chimera::schedule
