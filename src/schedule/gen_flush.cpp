// GPipe and 1F1B (DAPPLE / PipeDream-Flush): one pipe, stage s on worker s, a flush per iteration.
// Both accept D = 1, the whole model in one process: plain gradient accumulation over N
// micro-batches (the single-process reference every pipeline is checked against).
#include "chimera/schedule/generators.hpp"
#include "generator_util.hpp"

namespace chimera::schedule {

Schedule gpipe(int D, int N) {
  detail::require_pipeline("gpipe", D, N, 1, 1);
  Schedule s = detail::make_shell("gpipe", "", D, D, N, 1, {detail::down_placement(D)});
  for (int w = 0; w < D; ++w) {
    for (int m = 0; m < N; ++m) s.ops[w].push_back({OpKind::F, 0, w, {m}});
    for (int m = 0; m < N; ++m) s.ops[w].push_back({OpKind::B, 0, w, {m}});
  }
  return s;
}

Schedule one_f_one_b(int D, int N) {
  detail::require_pipeline("1f1b", D, N, 1, 1);
  Schedule s = detail::make_shell("1f1b", "", D, D, N, 1, {detail::down_placement(D)});
  for (int w = 0; w < D; ++w) {
    // Stage w keeps at most D-w micro-batches in flight: D-1-w warm-up forwards, then one
    // forward and one backward in turn, then the remaining backwards.
    const int warmup = std::min(D - 1 - w, N);
    auto& ops = s.ops[w];
    for (int m = 0; m < warmup; ++m) ops.push_back({OpKind::F, 0, w, {m}});
    for (int m = 0; m + warmup < N; ++m) {
      ops.push_back({OpKind::F, 0, w, {m + warmup}});
      ops.push_back({OpKind::B, 0, w, {m}});
    }
    for (int m = N - warmup; m < N; ++m) ops.push_back({OpKind::B, 0, w, {m}});
  }
  return s;
}

}  // namespace chimera::schedule
