// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR'24): 1F1B with each backward split
// into I (input gradient, on the critical path) and W (weight gradient, free to move). Stage s
// runs 1F1B's warm-up, then F and I in turn, and defers its W's by s: the I's travel up the
// pipeline without waiting for W's, and the deferred W's fill the cool-down bubbles. Every worker
// then holds at most D micro-batches' activations (1F1B's largest peak, on its first worker) and
// the bubble shrinks from (D-1)(F+B) to (D-1)(F+I-W).
#include <algorithm>

#include "chimera/schedule/generators.hpp"
#include "generator_util.hpp"

namespace chimera::schedule {

Schedule zb_h1(int D, int N) {
  detail::require_pipeline("zb-h1", D, N);
  Schedule s = detail::make_shell("zb-h1", "", D, D, N, 1, {detail::down_placement(D)});
  for (int w = 0; w < D; ++w) {
    auto& ops = s.ops[w];
    const int deferred = w;
    int forwards = 0;
    int inputs = 0;
    int weights = 0;
    for (; forwards < std::min(D - 1 - w, N); ++forwards) {
      ops.push_back({OpKind::F, 0, w, {forwards}});
    }
    while (inputs < N) {
      if (forwards < N) ops.push_back({OpKind::F, 0, w, {forwards++}});
      ops.push_back({OpKind::I, 0, w, {inputs++}});
      if (inputs - weights > deferred) ops.push_back({OpKind::W, 0, w, {weights++}});
    }
    while (weights < N) ops.push_back({OpKind::W, 0, w, {weights++}});
  }
  return s;
}

}  // namespace chimera::schedule
