// V-Half and V-Min (Qi et al., "Pipeline Parallelism with Controllable Memory", NeurIPS'24): the
// V placement of zb-v (worker w holds chunk 0 = stage w and chunk 1 = stage 2D-1-w), split
// backward, 1x weights, with a repeating pattern that bounds the activations a worker holds to
// about 1/2 (V-Half) or 1/3 (V-Min) of 1F1B's.
//
// Construction, in unit slots (F = I = W, one slot each), as the paper's reference builds it:
//   1. Micro-batch m's four critical ops on worker i (of p) sit at fixed offsets + 6m: the
//      forward of chunk 0 (F0), of chunk 1 (F1), then the input gradient of chunk 1 (I1) and of
//      chunk 0 (I0):
//        V-Min:  F0 = i,  F1 = 2p-1-i, I1 = 2p+d+i,    I0 = 4p+d-1-i,  d = 2 if p % 3 == 0 else 0
//        V-Half: F0 = 2i, F1 = 3p-2-i, I1 = 3p+d+2i-1, I0 = 6p+d-2-i,  d = 3 if p even else 0
//      The four offsets differ mod 6, so a worker's ops never share a slot; every op's inputs sit
//      at earlier slots.
//   2. Weight gradients fill the free slots, in the order their I's ran (W's that find no free
//      slot run at the end).
//   3. The greedy "squeeze": ops of the warm-up (before worker 0's first I0) and of the cool-down
//      (after worker 0's last F0) move to the earliest free slot their inputs allow, where that
//      does not raise the highest peak of activations any worker had. It runs twice: first with
//      the W's placed (warm-up and cool-down), then with the W's left to the free slots
//      (cool-down only).
//   4. The W's are placed again in the free slots, chunk 1's before chunk 0's.
// Activations are held from F to W (an F adds a chunk's, its W frees it), which is what the peak
// counts. The order is taken from the slots, so it is an execution order: deadlock-free with eager
// sends.
#include <algorithm>
#include <array>
#include <cstdint>
#include <tuple>

#include "chimera/core/error.hpp"
#include "chimera/schedule/generators.hpp"
#include "generator_util.hpp"

namespace chimera::schedule {

namespace {

// The op lists of one worker: the slot of each micro-batch's op, in micro-batch order.
enum Kind { kF0 = 0, kF1 = 1, kI1 = 2, kI0 = 3, kW = 4, kW0 = 5 };
using Slots = std::vector<std::int64_t>;
using WorkerSlots = std::vector<Slots>;  // [kind]: kF0..kI0, then kW (or kW for chunk 1, kW0)

std::array<int, 4> pattern(bool half, int p, int i) {
  if (half) {
    const int d = p % 2 == 0 ? 3 : 0;
    return {2 * i, 3 * p - 2 - i, 3 * p + d + 2 * i - 1, 6 * p + d - 2 - i};
  }
  const int d = p % 3 == 0 ? 2 : 0;
  return {i, 2 * p - 1 - i, 2 * p + d + i, 4 * p + d - 1 - i};
}

std::int64_t last_slot(const WorkerSlots& w) {
  std::int64_t last = 0;
  for (const Slots& s : w)
    if (!s.empty()) last = std::max(last, s.back());
  return last;
}

// What sits at each slot of a worker: the kind, or -1 for a free slot.
std::vector<int> slot_kinds(const WorkerSlots& w) {
  std::vector<int> at(static_cast<std::size_t>(last_slot(w) + 1), -1);
  for (int k = 0; k < static_cast<int>(w.size()); ++k)
    for (std::int64_t t : w[k]) {
      CHIMERA_CHECK(at[t] == -1, "v schedule: two ops at slot {}", t);
      at[t] = k;
    }
  return at;
}

// Appends the W lists: one W per I, in the free slots after it, in the order the I's ran
// (`split`: chunk 1's W's, kW, before chunk 0's, kW0, each list in micro-batch order).
void place_w(WorkerSlots& w, bool split) {
  w.resize(4);
  w.resize(split ? 6 : 5);
  const std::vector<int> at = slot_kinds(w);
  std::array<int, 2> pending = {0, 0};
  std::int64_t t = 0;
  auto put = [&](int list) {
    w[split ? kW + list : kW].push_back(t);
    --pending[list];
  };
  for (; t < static_cast<std::int64_t>(at.size()); ++t) {
    if (at[t] == kI1 || at[t] == kI0) ++pending[split && at[t] == kI0 ? 1 : 0];
    if (at[t] != -1) continue;
    if (pending[0] > 0) {
      put(0);
    } else if (pending[1] > 0) {
      put(1);
    }
  }
  for (int list : {0, 1})
    while (pending[list] > 0) {
      put(list);
      ++t;
    }
}

// The most chunks' activations the worker holds after any slot, from what sits at each slot: an F
// adds one, a W frees one. Without placed W's, they run in the free slots as place_w puts them.
int peak(const std::vector<int>& at, bool placed) {
  int held = 0;
  int most = 0;
  int pending = 0;
  for (int k : at) {
    if (k == kF0 || k == kF1) ++held;
    if (k >= kW) --held;
    if (k == kI1 || k == kI0) ++pending;
    if (k == -1 && !placed && pending > 0) {
      --held;
      --pending;
    }
    most = std::max(most, held);
  }
  return most;
}

int peak(const WorkerSlots& w) {
  return peak(slot_kinds(w), w.size() > 4);
}

// The earliest slot op (kind, mb) of worker i may take: after its inputs and its predecessor in
// the same list.
std::int64_t earliest(const std::vector<WorkerSlots>& all, int i, int kind, int mb) {
  const int p = static_cast<int>(all.size());
  const WorkerSlots& w = all[i];
  std::int64_t after = -1;
  if ((kind == kF0 || kind == kI1) && i > 0) after = std::max(after, all[i - 1][kind][mb]);
  if ((kind == kF1 || kind == kI0) && i < p - 1) after = std::max(after, all[i + 1][kind][mb]);
  if (kind == kF1 || kind == kI1 || kind == kI0) after = std::max(after, w[kind - 1][mb]);
  if (kind == kW) {  // the mb-th I this worker runs
    Slots is = w[kI1];
    is.insert(is.end(), w[kI0].begin(), w[kI0].end());
    std::nth_element(is.begin(), is.begin() + mb, is.end());
    after = std::max(after, is[mb]);
  }
  if (mb > 0) after = std::max(after, w[kind][mb - 1]);
  return after + 1;
}

// Step 3: one pass of the squeeze over every op in slot order (ties: worker, kind, micro-batch).
void squeeze(std::vector<WorkerSlots>& all, bool with_w) {
  int cap = 0;
  for (const WorkerSlots& w : all) cap = std::max(cap, peak(w));
  std::vector<std::vector<bool>> taken;
  std::vector<std::vector<int>> at;  // [worker][slot]: the kind there now, -1 free
  std::vector<std::tuple<std::int64_t, int, int, int>> order;  // slot, worker, kind, mb
  for (int i = 0; i < static_cast<int>(all.size()); ++i) {
    taken.emplace_back(static_cast<std::size_t>(last_slot(all[i]) + 1), false);
    at.push_back(slot_kinds(all[i]));
    for (int k = 0; k < static_cast<int>(all[i].size()); ++k)
      for (int m = 0; m < static_cast<int>(all[i][k].size()); ++m)
        order.emplace_back(all[i][k][m], i, k, m);
  }
  std::sort(order.begin(), order.end());
  const int N = static_cast<int>(all[0][kF0].size());
  enum { kWarmUp, kSteady, kCoolDown } phase = kWarmUp;
  for (const auto& [slot, i, kind, mb] : order) {
    if (phase == kWarmUp && kind == kI0 && i == 0) phase = kSteady;
    bool stay = phase == kSteady || (phase == kWarmUp && !with_w);
    if (phase == kSteady && kind == kF0 && mb == N - 1) phase = kCoolDown;
    std::int64_t& t = all[i][kind][mb];
    if (!stay) {
      // With the W's placed only an earlier F can raise the peak (an I holds on, a W frees).
      const bool check = !with_w || kind == kF0 || kind == kF1;
      at[i][slot] = -1;
      bool moved = false;
      for (std::int64_t to = earliest(all, i, kind, mb); to < slot && !moved; ++to) {
        if (taken[i][to]) continue;
        at[i][to] = kind;
        moved = !check || peak(at[i], with_w) <= cap;
        if (moved) t = to;
        if (!moved) at[i][to] = -1;
      }
      if (!moved) at[i][slot] = kind;
    }
    taken[i][t] = true;
  }
}

Schedule v_half_min(const std::string& scheme, bool half, int D, int N) {
  detail::require_pipeline(scheme, D, N, 2);
  const int S = 2 * D;
  std::vector<WorkerSlots> all(static_cast<std::size_t>(D));
  for (int i = 0; i < D; ++i) {
    const std::array<int, 4> at = pattern(half, D, i);
    all[i].resize(4);
    for (int k = 0; k < 4; ++k)
      for (int m = 0; m < N; ++m) all[i][k].push_back(at[k] + std::int64_t{6} * m);
    place_w(all[i], false);
  }
  squeeze(all, true);
  for (WorkerSlots& w : all) w.resize(4);
  squeeze(all, false);

  Schedule s = detail::make_shell(scheme, "", D, S, N, 1, {detail::v_placement(D)});
  std::vector<std::vector<detail::SlottedOp>> slotted(static_cast<std::size_t>(D));
  for (int i = 0; i < D; ++i) {
    WorkerSlots& w = all[i];
    w.resize(4);
    place_w(w, true);
    const int chunk_stage[2] = {i, S - 1 - i};
    const std::array<std::pair<OpKind, int>, 6> what = {{{OpKind::F, chunk_stage[0]},
                                                         {OpKind::F, chunk_stage[1]},
                                                         {OpKind::I, chunk_stage[1]},
                                                         {OpKind::I, chunk_stage[0]},
                                                         {OpKind::W, chunk_stage[1]},
                                                         {OpKind::W, chunk_stage[0]}}};
    for (int k = 0; k < 6; ++k)
      for (int m = 0; m < N; ++m)
        slotted[i].push_back({w[k][m], {what[k].first, 0, what[k].second, {m}}});
  }
  detail::order_by_slot(s, std::move(slotted));
  return s;
}

}  // namespace

Schedule v_half(int D, int N) {
  return v_half_min("v-half", true, D, N);
}
Schedule v_min(int D, int N) {
  return v_half_min("v-min", false, D, N);
}

}  // namespace chimera::schedule
