// A lower bound on the makespan of every schedule with a given structure: placement, pipes,
// stages, micro-batch granularity (mb_split, micro-batches per op), with any op order and with
// the backward split into I and W or not. Messages are free (alpha = beta = 0).
//
// Notation: S stages, an op on c of its schedule micro-batches costs X * c / mb_split * D / S
// (simulate.hpp). f = the cheapest F op, i and w = the cheapest I and W pieces (backward ops
// cover the fewest micro-batches), last = min(i + w, the B piece): a backward's final op.
//
// For every worker p (busy_p = the total cost of its ops, fixed by the placement; F_p = that of
// its F ops; k_lo, k_hi = the lowest and highest stage of its F ops):
//   (1) fill + work: p's first op is an F (every other op needs p's own F). An F at stage k
//       needs the F's at stages 0..k-1 of its micro-batch first, one after another on other
//       workers (on p they would come before p's first op), so p starts no earlier than
//       k_lo * f and then has busy_p of work:            makespan >= k_lo * f + busy_p.
//   (2) drain: p's last F (at some stage k <= k_hi) ends after all of p's F work. Its micro-batch
//       then runs F at stages k+1..S-1 and I at S-1..k+1, one after another, and p still runs
//       that micro-batch's backward at k:
//                  makespan >= k_lo * f + F_p + (S-1-k_hi) * (f + i) + last.
//   (3) critical path: one micro-batch's F at every stage, then I at every stage down to 0,
//       then stage 0's W:                                makespan >= S * f + (S-1) * i + last.
// The bound is the largest of these. (1) over all workers is at least the work bound: total
// work / D = N (F + B) for D workers. It is tight for D = 1 (one worker: N (F + B)) and for the
// single-pipe placement with F = I = W (zb-h1's 3N + D - 1 is (1) on worker D-1).
// It does not know the activation cap: a cap can only make the optimum longer.
#include <algorithm>
#include <limits>

#include "chimera/schedule/search.hpp"

namespace chimera::schedule {

double structure_lower_bound(const Schedule& s, const Costs& costs) {
  const double scale = work_per_micro_batch(s);  // 1 / mb_split * D / stages
  const double inf = std::numeric_limits<double>::infinity();
  double f = inf, back_cover = inf;
  for (const auto& ops : s.ops) {
    for (const Op& op : ops) {
      const double c = static_cast<double>(op.mbs.size()) * scale;
      if (op.kind == OpKind::F) f = std::min(f, costs.F * c);
      if (op.kind != OpKind::F) back_cover = std::min(back_cover, c);
    }
  }
  if (f == inf) return 0;
  const bool backward = back_cover != inf;
  const double i = backward ? costs.I * back_cover : 0;
  const double last = backward ? std::min(costs.I + costs.W, costs.B) * back_cover : 0;
  const double S = s.stages;
  double bound = S * f + (backward ? (S - 1) * i + last : 0);  // (3)
  for (const auto& ops : s.ops) {
    if (ops.empty()) continue;
    double busy = 0, forward = 0;
    int k_lo = s.stages, k_hi = -1;
    for (const Op& op : ops) {
      const double c = static_cast<double>(op.mbs.size()) * scale;
      const double x = op.kind == OpKind::F   ? costs.F
                       : op.kind == OpKind::B ? costs.B
                       : op.kind == OpKind::I ? costs.I
                                              : costs.W;
      busy += x * c;
      if (op.kind == OpKind::F) {
        forward += x * c;
        k_lo = std::min(k_lo, op.stage);
        k_hi = std::max(k_hi, op.stage);
      }
    }
    if (k_hi < 0) continue;
    const double start = k_lo * f;
    bound = std::max(bound, start + busy);  // (1)
    if (backward)
      bound = std::max(bound, start + forward + (S - 1 - k_hi) * (f + i) + last);  // (2)
  }
  return bound;
}

}  // namespace chimera::schedule
